"""Damaged and odd inputs in all three families (TEI, S2ORC 2020, our JSONL), ingested in one run of the real
command: it exits 0, every input unit ends as a paper or a reject with the reason the fixture was built for,
and the records before damage in a compressed line file or a tar archive are kept (issue 12).

The fixtures are made here from real files (the bundled sample's TEI, the S2ORC 2020 reader fixtures) and
broken on purpose; what each unit should become is written down while it is made, and the lines a truncated
gzip still holds are counted independently with zlib.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import tarfile
import zlib
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from deltalake import DeltaTable

from conftest import FIXTURES, REPO_ROOT
from ratio_spark.cli.main import main

SAMPLE = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"
S2ORC_2020 = FIXTURES / "readers" / "s2orc_2020" / "P11-2109.json"
PAPER = "paper"


def _tei(name: str) -> bytes:
    return gzip.decompress((SAMPLE / f"{name}.tei.xml.gz").read_bytes())


def _jsonl_paper(paper_id: str) -> dict:
    paragraph = " ".join(f"Sentence {i} of {paper_id} says something about parsing and tagging." for i in range(12))
    return {"paper_id": paper_id, "pub_date": "2017-05-01", "title": f"Paper {paper_id}",
            "sections": [{"heading": "Introduction", "paragraphs": [paragraph, paragraph.upper()]}]}


def _s2orc_paper(paper_id: str) -> dict:
    obj = json.loads(S2ORC_2020.read_text())
    # Dated by its anthology id; the filler keeps lines apart, so that a cut of the gzip falls mid-file.
    obj.update(paper_id=paper_id, year="", filler=[hashlib.sha256(f"{paper_id}:{i}".encode()).hexdigest() for i in range(200)])
    return obj


def _lines(objects: list) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


def _truncated_gzip(data: bytes, keep: float) -> tuple[bytes, int]:
    """A gzip of ``data`` cut at ``keep`` of its length, and how many complete lines the cut still holds."""
    packed = gzip.compress(data)
    cut = packed[: int(len(packed) * keep)]
    recoverable = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(cut)
    return cut, recoverable.count(b"\n")


def _tar(members: dict[str, bytes], compress: bool) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if compress else "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class Corpus:
    """Writes files and records what each unit in them must become."""

    def __init__(self, root: Path):
        self.root = root
        self.expected: Counter = Counter()  # (file relative to root, outcome) -> units

    def write(self, rel: str, data: bytes, *outcomes: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        self.expected.update((rel, o) for o in outcomes)


def make_corpus(root: Path) -> Corpus:
    c = Corpus(root)
    # --- TEI (one file per paper; .gz, tar archives) -------------------------------------------------------
    for name in ("P17-1001", "P17-1008", "P18-1001"):
        c.write(f"tei/{name}.tei.xml.gz", (SAMPLE / f"{name}.tei.xml.gz").read_bytes(), PAPER)
    packed = (SAMPLE / "P18-1009.tei.xml.gz").read_bytes()
    c.write("tei/P18-1009.tei.xml.gz", packed[: len(packed) // 2], "truncated_file")
    c.write("tei/P18-1017.tei.xml.gz", _tei("P18-1017"), "unreadable_file")  # plain XML named .gz
    c.write("tei/archive.tar.gz", _tar({
        "P16-1001.tei.xml.gz": (SAMPLE / "P16-1001.tei.xml.gz").read_bytes(),
        "P16-1008.tei.xml": _tei("P16-1008"),
        "P16-9999.tei.xml.gz": b"\x1f\x8b\x08\x00 not really gzip after its magic bytes",  # a damaged member
    }, compress=True), PAPER, PAPER, "unreadable_file")
    cut_tar = _tar({name + ".tei.xml": _tei(name) for name in ("P16-1015", "P17-1015", "P17-1022")}, compress=False)
    third = cut_tar.index(b"P17-1022.tei.xml")  # its header: cut inside the member that follows it
    c.write("tei/cut.tar", cut_tar[: third + 4000], PAPER, PAPER, "truncated_file")
    c.write("tei/empty.tei.xml", b"", "empty_file")
    # Names a URI spells otherwise (Spark's file index lists "file:///a%20b"; the scan reads "file:/a b").
    c.write("tei/empty space +%25 ünï.tei.xml", b"", "empty_file")
    c.write("tei/P18-9103 copy +%.tei.xml", _tei("P18-1033"), PAPER)
    c.write("tei/garbage.tei.xml", bytes(range(256)) * 8, "undecodable_bytes")
    c.write("tei/P18-9100.tei.xml", _tei("P18-1025").decode("utf-8").encode("utf-16"), PAPER)  # UTF-16 with BOM
    text = _tei("P18-1025")
    header = text.split(b"<body>")[0].split(b"<abstract")[0]
    c.write("tei/P18-9101.tei.xml", header + b"</profileDesc></teiHeader><text><body></body></text></TEI>", "empty_body")
    c.write("tei/zz-copy/P17-1001.tei.xml", _tei("P17-1001"), "duplicate_paper_id")  # same id, later path
    c.write("tei/P18-9102.tei.xml.zst", b"(\xb5/\xfd" + b"\x00" * 40, "unsupported_compression")

    # --- S2ORC 2020 (one object per .json file or per line) -------------------------------------------------
    c.write("s2orc/a.jsonl.bz2", bz2.compress(_lines([_s2orc_paper("P17-5001"), _s2orc_paper("P17-5002")])),
            PAPER, PAPER)
    cut, kept = _truncated_gzip(_lines([_s2orc_paper(f"P17-501{i}") for i in range(5)]), 0.6)
    assert 1 <= kept < 5
    c.write("s2orc/b.jsonl.gz", cut, *[PAPER] * kept, "truncated_file")
    c.write("s2orc/c.jsonl.gz", _lines([_s2orc_paper("P17-5020")]), "unreadable_file")  # not gzip at all
    c.write("s2orc/d.jsonl", _lines([_s2orc_paper("P17-5021"), [1, 2, 3]]) + b"\x80\x81 not UTF-8 \xfe\n",
            PAPER, "unexpected_shape", "undecodable_bytes")
    c.write("s2orc/e.json", json.dumps(_s2orc_paper("P17-5022")).encode("utf-16"), "undecodable_bytes")
    c.write("s2orc/f.json", b"", "empty_file")
    c.write("s2orc/g.json", bytes(range(256)) * 8, "undecodable_bytes")
    c.write("s2orc/z.json", json.dumps(_s2orc_paper("P17-5021")).encode(), "duplicate_paper_id")

    # --- our JSONL --------------------------------------------------------------------------------------------
    c.write("jsonl/p.jsonl", _lines([_jsonl_paper("J17-0001"), ["an", "array"], _jsonl_paper("J17-0002"),
                                     _jsonl_paper("P17-1008")]),  # the id of a TEI paper: the earlier input wins
            PAPER, "unexpected_shape", PAPER, "duplicate_paper_id")
    c.write("jsonl/q.jsonl.xz", lzma.compress(_lines([_jsonl_paper("J17-0003"), _jsonl_paper("J17-0004")])),
            PAPER, PAPER)
    cut, kept = _truncated_gzip(_lines([_jsonl_paper(f"J17-001{i}") for i in range(6)]), 0.7)
    assert 1 <= kept < 6
    c.write("jsonl/r.jsonl.gz", cut, *[PAPER] * kept, "truncated_file")
    c.write("jsonl/s.jsonl.gz", gzip.compress(b"\n  \n\n"), "empty_file")
    c.write("jsonl/t.jsonl.zst", b"(\xb5/\xfd" + b"\x00" * 40, "unsupported_compression")
    c.write("jsonl/u.jsonl.gz", b"", "empty_file")
    return c


def _relative(source_path: str, root: Path) -> str:
    path = urlparse(source_path).path.split("#line-")[0].split("!")[0]
    return str(Path(path).relative_to(root))


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("corrupt")
    corpus = make_corpus(root / "in")
    conf = root / "corrupt.yaml"
    conf.write_text(yaml.safe_dump({
        "extends": "local",
        "tables": {"root": str(root / "tables")},
        "inputs": [{"name": "tei", "format": "tei", "path": str(root / "in" / "tei")},
                   {"name": "s2orc", "format": "s2orc_2020", "path": str(root / "in" / "s2orc")},
                   {"name": "ours", "format": "jsonl", "path": str(root / "in" / "jsonl")}],
    }))
    code = main(["ingest", "--conf", str(conf), "--summary-json", str(root / "summary.json")])
    summary = json.loads((root / "summary.json").read_text())[0]
    papers = DeltaTable(str(root / "tables" / "papers")).to_pandas()
    rejects = DeltaTable(str(root / "tables" / "rejects")).to_pandas()
    return code, summary, papers, rejects, corpus


def test_one_run_exits_0_and_counts_reconcile(ingested):
    code, summary, papers, rejects, corpus = ingested
    assert code == 0
    assert summary["input_records"] == len(papers) + len(rejects) == summary["papers"] + summary["dropped"]
    assert summary["input_records"] == sum(corpus.expected.values())


def test_every_unit_has_the_outcome_it_was_built_for(ingested):
    _, _, papers, rejects, corpus = ingested
    root = corpus.root
    got = Counter((_relative(p, root), PAPER) for p in papers["source_path"])
    got.update((_relative(p, root), reason) for p, reason in zip(rejects["source_path"], rejects["reason"]))
    assert got == corpus.expected
    assert rejects["detail"].str.len().min() > 0  # every reject says why


def test_damage_is_named_and_the_records_before_it_are_kept(ingested):
    _, _, papers, rejects, corpus = ingested
    damaged = rejects[rejects["reason"].isin(["truncated_file", "unreadable_file"])]
    by_file = {_relative(p, corpus.root): d for p, d in zip(damaged["source_path"], damaged["detail"])}
    assert "truncated" in by_file["jsonl/r.jsonl.gz"] and "gzip stream" in by_file["jsonl/r.jsonl.gz"]
    assert "not what its name says" in by_file["s2orc/c.jsonl.gz"]
    assert "tar archive" in by_file["tei/cut.tar"] and "2 member(s) before the damage" in by_file["tei/cut.tar"]
    member = damaged[damaged["source_path"].str.endswith("archive.tar.gz!P16-9999.tei.xml.gz")]
    assert len(member) == 1  # the damaged member alone, named inside its archive
    # The lines before the cut are read as papers, in order from the first.
    kept = sorted(p for p in papers["paper_id"] if p.startswith("J17-001"))
    assert kept == [f"J17-001{i}" for i in range(len(kept))] and kept
    lines = sorted(int(p.rsplit("#line-", 1)[1]) for p in papers["source_path"] if "r.jsonl.gz#line-" in p)
    assert lines == list(range(1, len(kept) + 1))


def test_the_utf16_tei_is_read_like_its_utf8_original(ingested):
    _, _, papers, _, _ = ingested
    assert "P18-9100" in set(papers["paper_id"])


@pytest.mark.parametrize("name", ["P17-5020.json.gz", "plain.jsonl.gz", "plain.jsonl.bz2"])
def test_a_plain_file_named_as_compressed_is_told_to_rename_it(name):
    """Issue 34: a plain-text file named *.gz was told to "copy or download the file again"; the likely fix is
    renaming it. The reject says what was found: the first bytes are not the compression's magic number."""
    from ratio_spark.pipeline.ingest.jsonl import parse_jsonl
    from ratio_spark.pipeline.ingest.options import ReaderOptions
    from ratio_spark.pipeline.ingest.spark_io import file_records

    plain = json.dumps(_jsonl_paper("J17-0001")).encode() + b"\n"
    [record] = file_records(f"/in/{name}", plain, parse_jsonl, ReaderOptions(input_name="t", format="jsonl"))
    suffix = name[name.rindex("."):]
    detail = record["reject_detail"]
    assert record["reject_reason"] == "unreadable_file"
    assert f"named {suffix} but is not" in detail and "magic number" in detail
    assert plain[:8].hex(" ") in detail  # what was found
    assert f"rename it without {suffix}" in detail


def test_a_jsonl_record_without_sections_is_another_shape_and_an_empty_one_has_no_body():
    """Issue 34: the boundary docs/formats.md states: no "sections" key is unexpected_shape (saying so),
    "sections": [] is empty_body."""
    from ratio_spark.pipeline.ingest.jsonl import parse_jsonl
    from ratio_spark.pipeline.ingest.options import ReaderOptions

    options = ReaderOptions(input_name="t", format="jsonl")
    paper = _jsonl_paper("J17-0002")
    without = {k: v for k, v in paper.items() if k != "sections"}
    [missing] = parse_jsonl(json.dumps(without).encode(), "/in/a.jsonl", options)
    [empty] = parse_jsonl(json.dumps({**paper, "sections": []}).encode(), "/in/b.jsonl", options)
    assert (missing["reject_reason"], empty["reject_reason"]) == ("unexpected_shape", "empty_body")
    assert 'no "sections" key' in missing["reject_detail"] and missing["paper_id"] == "J17-0002"
    formats = (REPO_ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    assert 'a record without the key is `unexpected_shape`' in formats and '`"sections": []`' in formats
