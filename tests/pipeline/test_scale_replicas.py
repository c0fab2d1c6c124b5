"""The scale runs' replica generator (benchmarks/scale_replicas.py): replicas of real papers that the pipeline
reads like the originals, mine as many pairs and none of the same (query, gold) texts, and cite within
themselves (docs/performance.md, "Scale")."""

from __future__ import annotations

import datetime as dt
import gzip
import importlib.util
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ratio_spark.config import load_config
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.tei import parse_tei

SCRIPT = REPO_ROOT / "benchmarks" / "scale_replicas.py"
_spec = importlib.util.spec_from_file_location("scale_replicas", SCRIPT)
sr = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sr)

SAMPLE = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"
CONF = REPO_ROOT / "conf" / "sample.yaml"
# P16-1162 is cited by P17-1141 through its Anthology id and by D17-1151 and P18-2054 through its title; the four
# papers lie in the three splits of conf/sample.yaml.
PAPERS = ("P16-1162", "P17-1141", "D17-1151", "P18-2054")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory) -> Path:
    corpus = tmp_path_factory.mktemp("corpus")
    for paper in PAPERS:
        shutil.copy(SAMPLE / f"{paper}.tei.xml.gz", corpus)
    out = tmp_path_factory.mktemp("replicas")
    sr.prepare(corpus, out, replicas=2, conf=CONF, processes=1)
    return out


def _record(path: Path, rules: list[str]) -> dict:
    data = path.read_bytes()
    data = gzip.decompress(data) if path.name.endswith(".gz") else data
    [record] = parse_tei(data, path.name, ReaderOptions(input_name="t", format="tei", date_rules=rules))
    assert record["reject_reason"] is None, record["reject_detail"]
    return record


def _shape(text: str) -> str:
    return re.sub("[a-z]", "a", re.sub("[A-Z]", "A", text))


def test_a_replica_reads_like_its_original_with_other_words(replicas):
    protected = sr.protected_words()
    assert {"address", "however", "example", "first", "fig", "et", "al"} <= protected
    varied = same = 0
    for paper in PAPERS:
        original = _record(sr.replica_folder(replicas, 0) / f"{paper}.tei.xml.gz", ["source", "anthology_id"])
        copy = _record(sr.replica_folder(replicas, 1) / f"{sr.replica_id(paper, 1)}.tei.xml", ["source"])
        assert copy["paper_id"] == sr.replica_id(paper, 1) != paper
        # The same split, one day later (conf/sample.yaml's splits are calendar years).
        assert copy["pub_date"] - original["pub_date"] == dt.timedelta(days=1)
        assert copy["pub_date"].year == original["pub_date"].year
        assert title_words(copy["title"]) == title_words(sr.ReplicaText(1, protected).title(original["title"]))
        assert title_words(copy["title"]) != title_words(original["title"])
        paragraphs = [[p for s in r["sections"] for p in s["paragraphs"]] for r in (original, copy)]
        assert len(paragraphs[0]) == len(paragraphs[1])
        for before, after in zip(*paragraphs):
            # Same length, same punctuation, digits and case: only letters moved, so boundaries cannot move.
            assert _shape(before) == _shape(after)
            varied += before != after
            same += before == after
            # The first word and every word after a sentence end are untouched (the marker position).
            for start in [0] + [m.end() for m in re.finditer(r"[.?!]\s+", before)]:
                assert after[start:].split(" ", 1)[0] == before[start:].split(" ", 1)[0]
        b0, b1 = original["bibliography"], copy["bibliography"]
        assert [(m["entry_id"], m["section_idx"], m["para_idx"], m["char_offset"]) for m in b0["mentions"]] == \
               [(m["entry_id"], m["section_idx"], m["para_idx"], m["char_offset"]) for m in b1["mentions"]]
        for e0, e1 in zip(b0["entries"], b1["entries"]):
            assert (e1["acl_id"] or "").lower() == (sr.replica_id(e0["acl_id"], 1).lower() if e0["acl_id"] else "")
    assert varied > 20 * same  # nearly every paragraph differs from its original


def title_words(title: str | None) -> str:
    return re.sub(r"[^\w]+", " ", (title or "").lower()).strip()


def test_ids_dates_and_words_of_a_replica():
    assert sr.replica_id("P16-1200v2", 3) == "2016.r3-p16.1200v2"
    assert sr.replica_id("2020.acl-main.1", 3) == "2020.r3acl-main.1"
    assert sr.replica_id("paper-7", 3) == "paper-7~r3" and sr.replica_id("P14-1001", 0) == "P14-1001"
    assert sr.replica_ids_in("aclweb.org/anthology/P/P14/P14-1001.pdf 10.18653/v1/D17-1005", 2) == \
        "aclweb.org/anthology/P/P14/2014.r2-p14.1001.pdf 10.18653/v1/2017.r2-d17.1005"
    splits = load_config(CONF).splits.ranges()
    assert sr.shifted_date(dt.date(2016, 12, 30), 5, splits) == dt.date(2016, 12, 25)  # not into validation
    text = sr.ReplicaText(1, frozenset({"address", "issue", "this"}))
    # The first word, protected words, short words, a chunk with a period and the word after it stay.
    assert text.paragraph("To address this issue, we propose methods. Results hold here.") == \
        "To address this issue, we qspqptf methods. Results ipme here."
    # Replicas 1..675 give every word of 4+ letters a different spelling.
    spellings = {sr.ReplicaText(r, frozenset()).paragraph("x word") for r in range(sr.MAX_REPLICAS)}
    assert len(spellings) == sr.MAX_REPLICAS


@pytest.mark.slow
def test_two_replicas_mine_disjoint_pairs_and_the_same_counts(spark, replicas):
    """The readers, segmentation, citations and mining of the pipeline over both replicas, without the stages'
    Delta tables (what they write is tested elsewhere; here only what they compute)."""
    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.pipeline.citations import build_references
    from ratio_spark.pipeline.ingest import ingest
    from ratio_spark.pipeline.mine import mine_pairs
    from ratio_spark.pipeline.segment import segment_papers

    config = sr.replica_config(load_config(CONF), replicas, scale=2)
    papers = ingest(spark, config).papers.persist()
    sentences = segment_papers(papers, config.segment).persist()
    original = {sr.replica_id(p, 1): p for p in PAPERS}

    def home(paper_id: str) -> tuple[str, int]:
        return (original[paper_id], 1) if paper_id in original else (paper_id, 0)

    try:
        assert Counter(home(r.paper_id) for r in papers.select("paper_id").collect()) == \
            Counter({(p, r): 1 for p in PAPERS for r in (0, 1)})
        per_paper = Counter(home(r.paper_id) for r in sentences.select("paper_id").collect())
        assert all(per_paper[(p, 0)] == per_paper[(p, 1)] > 50 for p in PAPERS)
        mined = mine_pairs(spark, sentences, load_lexicon(config.mining.lexicon), config.mining).mined.collect()
        references, _ = build_references(papers, sentences, config.citations)
        resolved = [(home(r.paper_id), home(r.resolved_paper_id), r.resolved_by)
                    for r in references.filter("resolved_paper_id is not null").collect()]
    finally:
        sentences.unpersist()
        papers.unpersist()
    by_replica = [[r for r in mined if home(r.paper_id)[1] == replica] for replica in (0, 1)]
    assert len(by_replica[0]) > 20
    counts = [Counter((home(r.paper_id)[0], r.role, r.marker_entry) for r in rows) for rows in by_replica]
    assert counts[0] == counts[1]  # the same markers match in the same papers
    texts = [{(r.query_text, r.gold_text) for r in rows} for rows in by_replica]
    assert not texts[0] & texts[1]
    assert sorted((p, q, by) for (p, r), (q, s), by in resolved if r == 0) == \
        sorted((p, q, by) for (p, r), (q, s), by in resolved if r == 1)
    assert all(r == s for (_, r), (_, s), _ in resolved)  # within the replica
    assert {by for *_, by in resolved} >= {"acl_id", "title_year"}
