"""The lexicon toolkit's Spark half: span review, extensions, the Table 4 report, and a toolkit-built
lexicon driving the real mining stage. Hand-built tables for the rules; the shared sample's real papers
(``data/sample/acl-emnlp-tei``, ingested and segmented once by tests/conftest.py) for the report, the
end-to-end run and the CLI.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from ratio_spark.cli.main import main
from ratio_spark.config import load_config
from ratio_spark.lexicon.loader import load_lexicon
from ratio_spark.lexicon.curation.build import build_lexicon
from ratio_spark.lexicon.curation.extensions import MAX_EXTENSION_WORDS, Prefix, collect_extensions, extension_candidates
from ratio_spark.lexicon.curation.formats import (
    Decision,
    decisions_to_candidates,
    read_candidates,
    read_decisions,
    write_candidates,
    write_decisions,
)
from ratio_spark.lexicon.curation.patterns import expand_patterns
from ratio_spark.lexicon.curation.report import lexicon_report, occurrences
from ratio_spark.lexicon.curation.span_review import mine_spans, span_counts, write_review
from ratio_spark.lexicon.matcher import PairCutter
from ratio_spark.pipeline.pairs import consecutive_pairs
from ratio_spark.pipeline.runner import run_stage
from ratio_spark.core.text import normalize_text

from conftest import REPO_ROOT

SCHEMA = ("sentence_id string, paper_id string, pub_date date, section_idx int, section_heading string, "
          "para_idx int, sent_idx int, char_start int, char_end int, text string, norm_text string, norm_flag string")


def rows(paper: str, para: int, texts: list[str], flags: dict[int, str] | None = None) -> list[tuple]:
    flags = flags or {}
    return [(f"{paper}:0:{para}:{i}", paper, None, 0, "intro", para, i, 0, len(t), t, normalize_text(t), flags.get(i))
            for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def handmade(spark):
    data = (
        rows("p1", 0, ["Our model overfits.", "To address this issue, we apply dropout.", "However, it is slow.",
                       "To address this, we cache.", "For example, a cache of 2 GB."])
        + rows("p1", 1, ["To address this issue, we start a paragraph.", "Results vary.",
                         "To address one two three four five six, too long for an extension."])
        + rows("p2", 0, ["Noise hurts.", "To address the noise in labels, we relabel.", "TO ADDRESS, a flagged one.",
                         "To addressing it, a different word.", "However , spaced comma."], flags={2: "malformed_few_letters"})
    )
    return spark.createDataFrame(data, SCHEMA)


@pytest.fixture(scope="module")
def sample_sentences(spark, sample_segmented):
    """The shared sample's ``sentences`` (real GROBID TEI papers, ingested and segmented once: tests/conftest.py)."""
    tables = sample_segmented.tables_root
    return tables, spark.read.format("delta").load(str(tables / "sentences"))


def test_span_counts_follow_the_papers_rule(handmade):
    counts = {r.span: (r.occurrences, r.paragraph_initial) for r in span_counts(handmade).collect()}
    assert counts["to address this issue"] == (2, 1)  # one opens paragraph 1
    assert counts["however"] == (2, 0)  # "However , spaced" trims to the same span
    assert "to address" not in counts  # only in a flagged sentence
    assert "to address one two three four five six" not in counts  # eight words
    spans = mine_spans(handmade, consecutive_pairs(handmade), top=2, per_span=5, seed=1, lexicon=load_lexicon("v1"))
    assert [(s.span, s.in_lexicon) for s in spans] == [
        ("however", "distractor:contrast"), ("to address this issue", "move:address via to address")]
    assert [p["second_sentence_id"] for p in spans[1].pairs] == ["p1:0:0:1"]  # the paragraph opener has no pair


def test_span_samples_are_seeded_and_reproducible(sample_sentences):
    _, sentences = sample_sentences
    first = mine_spans(sentences, consecutive_pairs(sentences), top=5, per_span=4, seed=11)
    again = mine_spans(sentences.repartition(3), consecutive_pairs(sentences.repartition(3)), top=5, per_span=4, seed=11)
    other = mine_spans(sentences, consecutive_pairs(sentences), top=5, per_span=4, seed=12)
    ids = lambda spans: [[p["second_sentence_id"] for p in s.pairs] for s in spans]  # noqa: E731
    assert [s.span for s in first][:2] == ["however", "for example"]
    assert all(len(s.pairs) == 4 for s in first)
    assert ids(first) == ids(again)
    assert ids(first) != ids(other)
    for s in first:
        for p in s.pairs:
            assert normalize_text(p["second_text"]).startswith(s.span)


def test_review_sheets_and_decisions_merge(handmade, tmp_path):
    lexicon = load_lexicon("v1")
    spans = mine_spans(handmade, consecutive_pairs(handmade), top=3, per_span=3, seed=0, lexicon=lexicon)
    summary = write_review(tmp_path, spans, lexicon, {"per_span": 3})
    assert summary["decisions"] == {"kept": 0, "added": 3, "prefilled_from_lexicon": 3}
    page = (tmp_path / "review.html").read_text()
    assert "<b>To address this issue</b>, we apply dropout." in page and "<script" not in page
    with (tmp_path / "pairs.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == sum(len(s.pairs) for s in spans)
    # The curator edits a decision; a rerun with more spans keeps it and only appends.
    decisions = read_decisions(tmp_path / "decisions.tsv")
    edited = [Decision(d.span, "reject", "", "curator said no", d.extra) if d.span == "however" else d for d in decisions]
    write_decisions(tmp_path / "decisions.tsv", edited, ("rank", "occurrences", "in_lexicon"))
    more = mine_spans(handmade, consecutive_pairs(handmade), top=4, per_span=3, seed=0, lexicon=lexicon)
    assert write_review(tmp_path, more, lexicon, {"per_span": 3})["decisions"]["kept"] == 3
    after = {d.span: d for d in read_decisions(tmp_path / "decisions.tsv")}
    assert after["however"].decision == "reject" and after["however"].note == "curator said no"
    assert len(after) == 4


def test_extensions_collects_every_extension_up_to_a_comma(handmade):
    prefixes = [Prefix("to address", "address"), Prefix("to remedy", "address")]
    got = {(r.prefix, r.extension): (r.sentences, r.pairs) for r in collect_extensions(handmade, consecutive_pairs(handmade), prefixes).collect()}
    assert got == {
        ("to address", "to address this issue"): (2, 1),  # the paragraph opener is no pair's second sentence
        ("to address", "to address this"): (1, 1),
        ("to address", "to address the noise in labels"): (1, 1),
    }  # not: six more words, the flagged sentence, "to addressing"
    candidates = extension_candidates([{"prefix": p, "extension": e, "sentences": s, "pairs": n, "move": "address"}
                                       for (p, e), (s, n) in got.items()], prefixes, "hand")
    assert {c.marker for c in candidates} == {"to address this issue", "to address this", "to address the noise in labels", "to remedy"}
    noise = next(c for c in candidates if c.marker == "to address the noise in labels")
    assert noise.provenance == {"prefix": "to address", "extension": "the noise in labels", "sentences": 1, "pairs": 1, "corpus": "hand"}
    # the matcher agrees on what an extension is, at the same length (collection: the paper's 5 words; mining
    # defaults to the released benchmark's 3, so a 4-word extension is collected for review but not mined)
    cutter = PairCutter(load_lexicon("v1"), max_extension_words=MAX_EXTENSION_WORDS)
    assert cutter.match("to address the noise in labels, we relabel.").text == "to address the noise in labels"
    assert PairCutter(load_lexicon("v1")).match("to address the noise in labels, we relabel.") is None


def test_report_counts_what_the_matcher_matches(spark, sample_sentences, tmp_path):
    """The Arrow/JVM path of the report gives the same counts as the matcher run in plain Python."""
    root, sentences = sample_sentences
    lexicon = load_lexicon("v1")
    found, examined = occurrences(spark, lexicon, "sentences", sentences=sentences)
    frame = DeltaTable(str(root / "sentences")).to_pandas()
    clean = frame[frame.norm_flag.isna()]
    cutter = PairCutter(lexicon)
    expected: dict[str, int] = {}
    for text in clean.norm_text:
        hit = cutter.match(text)
        if hit:
            expected[hit.marker.text] = expected.get(hit.marker.text, 0) + 1
    assert examined == {"clean_sentences": len(clean)}
    assert {k: v["matches"] for k, v in found.items()} == expected
    assert found["for example"]["matches"] > 50
    summary = lexicon_report(tmp_path, lexicon, "v1", spark, "pairs", pairs=consecutive_pairs(sentences))
    table = (tmp_path / "table4.md").read_text()
    assert "| Manual curation |" in table and "| Extendable connective |" in table
    assert 0 < summary["moves"]["specify"]["data"] <= summary["moves"]["specify"]["lexicon"]
    with pytest.raises(ValueError, match="mined with lexicon"):
        occurrences(spark, lexicon, "mined_pairs",
                    mined_pairs=spark.createDataFrame([("x", "y", "v0")], "marker_entry string, marker string, lexicon_version string"))


def test_a_toolkit_built_lexicon_drives_mining(spark, sample_sentences, tmp_path):
    """Spans -> decisions -> extensions -> patterns -> build -> the mine stage -> Table 4 on mined_pairs."""
    root, sentences = sample_sentences
    spans = mine_spans(sentences, consecutive_pairs(sentences), top=25, per_span=3, seed=5)
    write_review(tmp_path / "review", spans, None, {"per_span": 3})
    # The curator's calls on the top spans (a fixed table standing in for reading the sheets).
    calls = {"for example": ("accept", "specify"), "for instance": ("accept", "specify"), "specifically": ("accept", "specify"),
             "in particular": ("accept", "specify"), "however": ("distractor", "contrast"), "in contrast": ("distractor", "contrast"),
             "therefore": ("distractor", "inference"), "thus": ("distractor", "inference"), "moreover": ("distractor", "continuation")}
    decisions = [Decision(s.span, *calls.get(s.span, ("reject", "")), "test curator") for s in spans]
    assert sum(d.decision == "accept" for d in decisions) >= 3
    write_decisions(tmp_path / "decisions.tsv", decisions)
    candidates = tmp_path / "v-test" / "candidates"
    write_candidates(candidates / "spans.tsv", decisions_to_candidates(read_decisions(tmp_path / "decisions.tsv")))
    prefixes = [Prefix("to address", "address"), Prefix("to alleviate", "address")]
    rows = [r.asDict() for r in collect_extensions(sentences, consecutive_pairs(sentences), prefixes).collect()]
    write_candidates(candidates / "extension.tsv", extension_candidates(rows, prefixes, "sample"))
    write_candidates(candidates / "pattern.tsv", expand_patterns(moves=("broaden", "address"),
                                                                 templates=["broaden-adverb", "address-to-pronoun"]).candidates)
    result = build_lexicon(tmp_path / "v-test", candidates_dir=candidates, decisions_files=[tmp_path / "decisions.tsv"])
    lexicon = load_lexicon(tmp_path / "v-test")
    assert {m.source for m in lexicon.markers} == {"manual", "extension", "pattern"}
    assert result.summary["covered_by_extendable_prefix"] >= 1  # "to address this" is the prefix's

    # Mined from the shared sentences into tables of its own (the shared tables are read-only).
    config = load_config(None, [f"tables.root={root}", f"mining.lexicon={tmp_path / 'v-test'}",
                                f"tables.overrides.mined_pairs={tmp_path / 'mined_pairs'}",
                                f"tables.overrides.stats_mining={tmp_path / 'stats_mining'}",
                                f"tables.overrides.drops={tmp_path / 'drops'}",
                                f"tables.overrides.stats_drops={tmp_path / 'stats_drops'}"])
    summary = run_stage(spark, config, "mine")
    assert summary["lexicon_version"] == "v-test"
    mined = DeltaTable(config.tables.location("mined_pairs")).to_pandas()
    assert set(mined.lexicon_version) == {"v-test"}
    by_move = mined[mined.role == "move"].groupby("move").size().to_dict()
    assert by_move["specify"] > 50 and by_move["address"] >= 3
    assert set(mined[mined.move == "address"].marker_source) <= {"extension", "pattern"}
    report = lexicon_report(tmp_path / "report", lexicon, tmp_path / "v-test", spark, "mined_pairs",
                            mined_pairs=spark.read.format("delta").load(config.tables.location("mined_pairs")))
    assert report["moves"]["address"]["data"] >= 1
    assert report["moves"]["specify"]["matches"] == by_move["specify"]


def test_cli_spans_extensions_report(spark, sample_sentences, tmp_path, capsys):
    root, _ = sample_sentences
    common = ["--set", f"tables.root={root}"]
    out = tmp_path / "spans"
    assert main(["lexicon", "spans", *common, "--top", "8", "--per-span", "2", "--seed", "3", "--out", str(out),
                 "--summary-json", str(tmp_path / "s.json")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["spans"] == 8 and summary["lexicon"] == "v1" and summary["spans_in_lexicon"] >= 5
    assert {p.name for p in out.iterdir()} >= {"spans.csv", "pairs.csv", "review.html", "decisions.tsv", "review.json"}
    phrases = tmp_path / "phrases.txt"
    phrases.write_text("to address this problem\nmore generally\nnever seen in any paper\n")
    assert main(["lexicon", "spans", *common, "--phrases", str(phrases), "--per-span", "2", "--out", str(tmp_path / "ph"),
                 "--summary-json", str(tmp_path / "p.json")]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["phrases_attested"] == 2
    assert main(["lexicon", "extensions", *common, "--prefix", "to address=address", "--out", str(tmp_path / "ext.tsv")]) == 0
    assert any(c.marker.startswith("to address ") for c in read_candidates(tmp_path / "ext.tsv"))
    assert main(["lexicon", "report", *common, "--lexicon", "v1", "--against", "sentences", "--out", str(tmp_path / "rep")]) == 0
    assert "Table 4 for lexicon v1" in (tmp_path / "rep" / "table4.md").read_text()
    capsys.readouterr()
    assert main(["lexicon", "extensions", *common, "--prefix", "to address", "--out", str(tmp_path / "x.tsv")]) == 2
    assert "must look like 'to address=address'" in capsys.readouterr().err


@pytest.mark.slow
def test_lexicon_spans_job_runs_under_spark_submit(sample_sentences, tmp_path):
    from ratio_spark.pipeline.jars import ensure_jars
    from ratio_spark.pipeline.package_zip import write_package_zip

    root, _ = sample_sentences
    archive = str(write_package_zip(tmp_path / "ratio_spark.zip"))
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]", "--jars", ",".join(map(str, ensure_jars())),
           "--py-files", archive, str(REPO_ROOT / "jobs" / "lexicon_spans.py"),
           "--set", "spark.master=null", "--set", "spark.jars.mode=provided", "--set", f"tables.root={root}",
           "--top", "5", "--per-span", "2", "--lexicon", "v1", "--out", str(tmp_path / "job")]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    with (tmp_path / "job" / "spans.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 5
