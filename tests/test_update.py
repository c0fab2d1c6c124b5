"""`ratio-spark update` (pipeline/update.py), the living benchmark: a benchmark of four real papers gets two new
ones and a changed one. The updated tables equal a full rebuild over the same inputs, row for row; the changed
paper's sentences and pairs are replaced, not added; an update with nothing new writes no table version; the
release before the update reads back exactly through Delta time travel, and the release's diff matches the
tables."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO_ROOT, SAMPLE_TEI, _table_versions, sample_config
from ratio_spark.core.config import Config, SplitRange, SplitsConfig, load_config
from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.pipeline.stages import PIPELINE, STAGES
from test_standalone import assert_same_tables, table_names, table_rows

BASE = ["P16-1001", "P16-1008", "P17-1001", "P17-1008"]
NEW = ["P18-1001", "P18-1009"]
CHANGED = "P17-1001"
ADDED = ("Our method scores every candidate in a single pass over the corpus. "
         "In particular, it ranks each candidate by its word overlap with the query sentence.")


@dataclass
class Updated:
    config: Config  # the benchmark, built from BASE, then updated with the new folder
    rebuilt: Config  # a full rebuild over the same inputs
    before: Path  # a copy of the tables before the update
    summary: dict


def changed_copy(source: Path, target: Path) -> None:
    """The paper with one paragraph added after its first heading: its sentences and pairs change."""
    text = gzip.decompress(source.read_bytes()).decode()
    head_end = text.index("</head>", text.index("<body>")) + len("</head>")
    target.write_text(text[:head_end] + f"<p>{ADDED}</p>" + text[head_end:])


@pytest.fixture(scope="module")
def updated(spark, tmp_path_factory) -> Updated:
    from ratio_spark.pipeline.update import update

    root = tmp_path_factory.mktemp("update")
    base, new = root / "base", root / "new"
    base.mkdir(), new.mkdir()
    for name in BASE:
        shutil.copy(SAMPLE_TEI / f"{name}.tei.xml.gz", base)
    for name in NEW:
        shutil.copy(SAMPLE_TEI / f"{name}.tei.xml.gz", new)
    changed_copy(SAMPLE_TEI / f"{CHANGED}.tei.xml.gz", new / f"{CHANGED}.tei.xml")

    config = sample_config(base, root / "tables", root / "release")
    for stage in PIPELINE:
        STAGES[stage](spark, config)
    shutil.copytree(root / "tables", root / "before")
    summary = update(spark, config, str(new))

    # The same inputs in one full run: the base folder without the old version of the changed paper, and
    # the new folder (the same files, so the same source paths).
    (base / f"{CHANGED}.tei.xml.gz").unlink()
    rebuilt = load_config(REPO_ROOT / "conf" / "sample.yaml", [
        f"inputs.0.path={base}", "inputs.1.name=new", "inputs.1.format=tei", f"inputs.1.path={new}",
        f"tables.root={root / 'rebuilt'}", f"release.root={root / 'rebuilt-release'}"])
    for stage in PIPELINE:
        STAGES[stage](spark, rebuilt)
    return Updated(config, rebuilt, root / "before", summary)


@pytest.mark.slow
def test_an_update_gives_the_tables_of_a_full_rebuild(updated):
    assert updated.summary["papers"] == {"new": len(NEW), "changed": 1, "unchanged": 0}
    tables = Path(updated.config.tables.root)
    assert "releases" in table_names(tables)
    shutil.copytree(tables, tables.parent / "compared", ignore=shutil.ignore_patterns("releases"))
    assert_same_tables(tables.parent / "compared", Path(updated.rebuilt.tables.root))
    assert (Path(updated.config.release.root) / "manifest.json").read_text() == \
        (Path(updated.rebuilt.release.root) / "manifest.json").read_text()
    assert not (tables / "_update").exists()  # the staging tables are gone


@pytest.mark.slow
def test_a_changed_paper_replaces_its_sentences_and_pairs(updated):
    from deltalake import DeltaTable

    def of_paper(root: Path, name: str):
        frame = DeltaTable(str(root / name)).to_pandas()
        return frame[frame["paper_id"] == CHANGED]

    tables = Path(updated.config.tables.root)
    old, now = of_paper(updated.before, "sentences"), of_paper(tables, "sentences")
    assert now["sentence_id"].is_unique
    assert len(now) == len(old) + 2  # the added paragraph's two sentences, the old ones once
    assert any("In particular, it ranks" in t for t in now["text"])
    assert not any("In particular, it ranks" in t for t in old["text"])
    pairs = of_paper(tables, "mined_pairs")
    assert pairs["pair_id"].is_unique
    added = pairs[pairs["gold_text_original"].str.contains("ranks each candidate", na=False)]
    assert list(added["move"]) == ["specify"]  # "In particular" opens a specify pair
    assert sorted(pairs["pair_id"]) == sorted(of_paper(Path(updated.rebuilt.tables.root), "mined_pairs")["pair_id"])
    # The paragraph moved the later ones (para_idx is part of the ids): the old ids are gone, not kept beside.
    stale = set(of_paper(updated.before, "mined_pairs")["pair_id"]) - set(pairs["pair_id"])
    assert stale and not stale & set(DeltaTable(str(tables / "mined_pairs")).to_pandas()["pair_id"])


@pytest.mark.slow
def test_time_travel_reads_the_release_before_the_update_exactly(updated, spark):
    from ratio_spark.pipeline.update import read_release

    release = updated.summary["release"]
    assert release["release"] == 1
    for name in ("papers", "sentences", "mined_pairs", "queries", "candidates", "drops"):
        frame = read_release(spark, updated.config, name, 0).toPandas()
        assert sorted(map(str, frame.astype(str).itertuples(index=False))) == table_rows(updated.before / name), name
    latest = read_release(spark, updated.config, "queries").toPandas()
    assert len(latest) == len(table_rows(Path(updated.config.tables.root) / "queries"))
    # The diff against release 0, from the two states of the tables.
    from deltalake import DeltaTable

    def counts(root: Path, name: str, keys: list[str]) -> dict:
        return DeltaTable(str(root / name)).to_pandas().groupby(keys).size().to_dict()

    tables = Path(updated.config.tables.root)
    before, now = counts(updated.before, "queries", ["split", "move"]), counts(tables, "queries", ["split", "move"])
    assert release["diff"]["new_queries"] == {f"{s}/{m}": now.get((s, m), 0) - before.get((s, m), 0)
                                              for s in SPLITS for m in MOVES}
    assert release["diff"]["new_queries"]["test/specify"] > 0  # the two 2018 papers
    pool_before, pool_now = counts(updated.before, "candidates", ["split"]), counts(tables, "candidates", ["split"])
    assert release["diff"]["pool_growth"] == {s: pool_now.get(s, 0) - pool_before.get(s, 0) for s in SPLITS}
    stored = spark.read.format("delta").load(str(tables / "releases")).orderBy("release").collect()
    assert [r["release"] for r in stored] == [0, 1]
    assert json.loads(stored[1]["diff"]) == release["diff"]


@pytest.mark.slow
def test_an_update_with_nothing_new_writes_no_table_version(updated, spark):
    from ratio_spark.pipeline.update import update

    tables = Path(updated.config.tables.root)
    versions = _table_versions(tables)
    new = Path(updated.config.inputs[0].path).parent / "new"
    summary = update(spark, updated.config, str(new))
    assert summary["papers"] == {"new": 0, "changed": 0, "unchanged": len(NEW) + 1}
    assert summary["release"] is None
    assert _table_versions(tables) == versions


def test_rolling_splits_end_with_the_month_of_the_latest_paper():
    splits = SplitsConfig(train=SplitRange(start="2010-01-01", end="2010-12-31"),
                          validation=SplitRange(start="2011-01-01", end="2011-12-31"),
                          test=SplitRange(start="2012-01-01", end="2012-12-31"),
                          rolling={"test_months": 3, "validation_months": 2})
    resolved = splits.resolved(dt.date(2026, 2, 14))
    assert (resolved.test.start, resolved.test.end) == (dt.date(2025, 12, 1), dt.date(2026, 2, 28))
    assert (resolved.validation.start, resolved.validation.end) == (dt.date(2025, 10, 1), dt.date(2025, 11, 30))
    assert (resolved.train.start, resolved.train.end) == (dt.date(2010, 1, 1), dt.date(2025, 9, 30))
    assert splits.resolved(None) is splits
    assert SplitsConfig().resolved(dt.date(2026, 2, 14)) == SplitsConfig()  # fixed splits stay as configured
