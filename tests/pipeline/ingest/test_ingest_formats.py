"""Ingest of the S2ORC 2020, current S2ORC (with its metadata join) and JSONL fixtures in Spark.

Nothing may be lost: every input unit (a per-file input, a non-blank line, an empty file) ends up
as exactly one paper or one reject, with the reason expected.json gives for it.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import FIXTURES
from ratio_spark.config import Config
from ratio_spark.pipeline.ingest import ingest
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.s2orc import parse_s2orc_2020, read_s2orc_current
from ratio_spark.pipeline.ingest.spark_io import LINE_SUFFIXES

READERS = FIXTURES / "readers"
EXPECTED = json.loads((READERS / "expected.json").read_text())


def _config() -> Config:
    return Config.model_validate({"inputs": [
        {"name": "aclsum-2020", "format": "s2orc_2020", "path": str(READERS / "s2orc_2020")},
        {"name": "s2orc-current", "format": "s2orc_current", "path": str(READERS / "s2orc_current" / "s2orc"),
         "metadata_path": str(READERS / "s2orc_current" / "papers")},
        {"name": "ours", "format": "jsonl", "path": str(READERS / "jsonl")},
    ]})


@pytest.fixture(scope="module")
def result(spark):
    out = ingest(spark, _config())
    return {"papers": [r.asDict(recursive=True) for r in out.papers.collect()],
            "rejects": [r.asDict() for r in out.rejects.collect()],
            "records": out.records.count()}


def _fixture_file(source_path: str) -> str:
    """file:/.../readers/jsonl/papers.jsonl#line-ab12 -> jsonl/papers.jsonl"""
    path = urlparse(source_path.split("#line-")[0]).path
    return str(Path(path).relative_to(READERS))


def _input_units() -> int:
    """Counted from the files themselves, as the readers should see them."""
    count = 0
    for path in READERS.rglob("*"):
        if not path.is_file() or path.parent == READERS or path.parent.name == "papers":
            continue  # make_fixtures.py, expected.json and the metadata dataset are no inputs
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        is_lines = path.name.endswith(LINE_SUFFIXES)
        count += sum(1 for line in data.split(b"\n") if line.strip()) if is_lines and data else 1
    return count


def test_counts_reconcile(result):
    papers, rejects = result["papers"], result["rejects"]
    assert len(papers) + len(rejects) == _input_units() == sum(len(v) for v in EXPECTED.values())
    assert result["records"] == _input_units()  # the readers emit one record per unit, before dedup
    assert len({p["paper_id"] for p in papers}) == len(papers)


_DATE_SOURCES = {"anthology_id", "year", "publicationdate", "pub_date"}


def test_every_unit_has_its_expected_outcome(result):
    expected = Counter((rel, pid, outcome) for rel, units in EXPECTED.items() for pid, outcome in units)
    as_paper: dict[str, list[tuple[str, str]]] = {}
    for rel, pid, outcome in expected.elements():
        if outcome in _DATE_SOURCES:
            as_paper.setdefault(pid, []).append((rel, outcome))
    repeated = {pid: units for pid, units in as_paper.items() if len(units) > 1}
    assert repeated, "the fixtures should hold duplicate paper ids"

    papers = {p["paper_id"]: p for p in result["papers"]}
    duplicates = [r for r in result["rejects"] if r["reason"] == "duplicate_paper_id"]
    # A paper id that several units give as a paper: one unit stays a paper, the others are duplicates.
    for pid, units in repeated.items():
        kept = papers[pid]
        assert (_fixture_file(kept["source_path"]), kept["date_source"]) in units
        dupes = [r for r in duplicates if r["paper_id"] == pid]
        assert all(r["detail"] == f"paper id already taken by {kept['source_path']}" for r in dupes)
        assert sorted([_fixture_file(kept["source_path"])] + [_fixture_file(r["source_path"]) for r in dupes]) == \
            sorted(rel for rel, _ in units)
    assert len(duplicates) == sum(len(units) - 1 for units in repeated.values())

    got = Counter((_fixture_file(p["source_path"]), p["paper_id"], p["date_source"]) for p in result["papers"])
    got.update((_fixture_file(r["source_path"]), r["paper_id"], r["reason"]) for r in result["rejects"]
               if r["reason"] != "duplicate_paper_id")
    not_repeated = lambda counter: Counter({k: n for k, n in counter.items() if k[1] not in repeated})  # noqa: E731
    assert not_repeated(got) == not_repeated(expected)
    assert sum(got.values()) + len(duplicates) == sum(expected.values())


def test_papers_are_complete(result):
    for p in result["papers"]:
        assert p["pub_date"] is not None and p["date_precision"] in ("day", "month", "year")
        assert p["date_source"] in _DATE_SOURCES
        assert p["sections"] and all(s["paragraphs"] for s in p["sections"])
        assert sum(len(x) for s in p["sections"] for x in s["paragraphs"]) >= 200


def test_s2orc_current_dates_and_titles_come_from_the_metadata(result):
    papers = {p["paper_id"]: p for p in result["papers"] if p["source_format"] == "s2orc_current"}
    got = {k: (p["pub_date"], p["date_precision"], p["date_source"]) for k, p in papers.items()}
    assert got == {
        "1001": (dt.date(2011, 6, 19), "day", "publicationdate"),
        "1002": (dt.date(2010, 1, 1), "year", "year"),
        "1003": (dt.date(2020, 1, 1), "year", "anthology_id"),
        "1012": (dt.date(2010, 6, 2), "day", "publicationdate"),
    }
    assert papers["1001"]["title"] == "Generalized Interpolation in Decision Tree LM"
    # Through Spark (Arrow in and out), the same paper as the 2020 file gives, paragraph for paragraph.
    raw = (READERS / "s2orc_2020" / "P11-2109.json").read_bytes()
    reference = parse_s2orc_2020(raw, "P11-2109.json", ReaderOptions(input_name="t", format="s2orc_2020"))[0]
    assert papers["1001"]["sections"] == reference["sections"]
    kept_p11 = next(p for p in result["papers"] if p["paper_id"] == "P11-2109")  # whichever format won
    assert kept_p11["sections"] == reference["sections"]


def test_s2orc_current_needs_its_metadata(spark):
    inp = _config().inputs[1].model_copy(update={"metadata_path": None})
    with pytest.raises(ValueError, match="metadata_path"):
        read_s2orc_current(spark, inp, ReaderOptions(input_name=inp.name, format=inp.format))
