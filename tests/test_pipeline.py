"""Ingest + segment on real GROBID TEI papers from the bundled sample, with corrupted files mixed in."""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from ratio_spark.core.config import load_config
from ratio_spark.pipeline.segment import explode_paragraphs
from ratio_spark.pipeline.stages import run_export, run_ingest, run_mine, run_pools, run_segment

from conftest import REPO_ROOT

SAMPLE = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"


def make_corpus(root, n_real=12):
    """n_real real papers plus one file per failure we must survive."""
    corpus = root / "corpus"
    corpus.mkdir()
    # Papers of 2016, 2017 and 2018, so that the conf's train, validation and test splits all get some.
    by_year = [sorted(p for p in SAMPLE.glob(f"D1{y}-*.gz") if "000.tei" not in p.name) for y in (6, 7, 8)]
    real = [p for papers in zip(*by_year) for p in papers][:n_real]
    for path in real:
        shutil.copy(path, corpus / path.name)
    text = gzip.decompress(real[0].read_bytes())
    cut = text.index(b"<", len(text) // 2)
    (corpus / "P17-9001.tei.xml").write_bytes(text[:cut])  # truncated: malformed XML
    (corpus / "P17-9002.tei.xml").write_bytes(b"\xff\xfe\x00<TEI>" + b"\x80" * 20)  # not UTF-8
    (corpus / "P17-9003.tei.xml").write_bytes(b"")  # empty file (Spark's readers skip these)
    (corpus / "P17-9004.tei.xml.gz").write_bytes(b"not gzip at all")  # unreadable .gz
    # Same paper id as a real file, in a sub-folder: one of the two is kept, the other rejected.
    (corpus / "dup").mkdir()
    (corpus / "dup" / real[1].name.replace(".gz", "")).write_bytes(gzip.decompress(real[1].read_bytes()))
    # No date anywhere: header date removed and an id that is not an anthology id.
    no_date = text.replace(b"<date", b"<nodate").replace(b"</date>", b"</nodate>")
    (corpus / "paper-without-date.tei.xml").write_bytes(no_date)
    # A TEI file with no body text and no abstract (a failed PDF parse).
    header = text.split(b"<body>")[0]
    header = header.split(b"<abstract")[0] + header.split(b"</abstract>")[1] if b"</abstract>" in header else header
    empty_body = header + b"<body></body></text></TEI>"
    (corpus / "P17-9005.tei.xml").write_bytes(empty_body)
    front = SAMPLE / "P16-1000.tei.xml.gz"
    shutil.copy(front, corpus / front.name)
    expected_rejects = {
        "malformed_xml": 1, "undecodable_bytes": 1, "empty_file": 1, "unreadable_file": 1,
        "duplicate_paper_id": 1, "missing_date": 1, "empty_body": 1, "excluded_by_path_rule": 1,
    }
    return corpus, n_real, expected_rejects


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    corpus, n_real, expected = make_corpus(root)
    config = load_config(
        REPO_ROOT / "conf" / "sample.yaml",
        [f"tables.root={root / 'tables'}", f"inputs.0.path={corpus}"],
    )
    ingest_summary = run_ingest(spark, config)
    segment_summary = run_segment(spark, config)
    return config, ingest_summary, segment_summary, n_real, expected


@pytest.fixture(scope="module")
def benchmark(built, spark):
    """The rest of the pipeline on the same real papers: mine, pools (with leakage checks), export."""
    config = built[0]
    config = config.model_copy(update={"release": config.release.model_copy(update={"root": str(Path(config.tables.root).parent / "release")})})
    return config, run_mine(spark, config), run_pools(spark, config), run_export(spark, config)


def test_every_input_record_is_a_paper_or_a_reject_with_its_reason(built, spark):
    config, summary, _, n_real, expected = built
    assert summary["papers"] == n_real
    assert summary["rejected_by_reason"] == expected
    assert summary["input_records"] == n_real + sum(expected.values())
    papers = spark.read.format("delta").load(config.tables.location("papers"))
    assert papers.select("paper_id").distinct().count() == n_real
    assert papers.filter(F.col("pub_date").isNull() | F.col("date_source").isNull()).count() == 0


def test_rejects_carry_path_and_readable_detail(built, spark):
    config = built[0]
    rejects = spark.read.format("delta").load(config.tables.location("rejects")).collect()
    for row in rejects:
        assert row.source_path and row.detail and row.reason.islower() and " " not in row.reason
    dup = next(r for r in rejects if r.reason == "duplicate_paper_id")
    assert "already taken by" in dup.detail


def test_sentences_are_ordered_normalised_and_keep_the_original(built, spark):
    config, _, seg, n_real, _ = built
    assert seg["papers_with_sentences"] == n_real
    sentences = spark.read.format("delta").load(config.tables.location("sentences"))
    assert sentences.count() == seg["sentences"] > 50 * n_real
    assert sentences.select("sentence_id").distinct().count() == seg["sentences"]
    clean = sentences.filter(F.col("norm_flag").isNull())
    assert clean.filter(F.col("norm_text") != F.lower(F.col("norm_text"))).count() == 0
    assert clean.filter(F.col("norm_text").rlike(r"\s{2,}|^\s|\s$")).count() == 0
    # No masked abbreviation period survives, and the original text is kept as written.
    assert sentences.filter(F.col("text").rlike("[\ue000\ue001]")).count() == 0
    papers = spark.read.format("delta").load(config.tables.location("papers"))
    located = explode_paragraphs(papers).join(sentences, ["paper_id", "section_idx", "para_idx"])
    span = F.expr("substring(para_text, char_start + 1, char_end - char_start)")
    assert located.count() == seg["sentences"]
    assert located.filter(span != F.col("text")).count() == 0
    # De-hyphenation: the line-break hyphen of "how- ever" is gone from the papers' text.
    assert sentences.filter(F.col("text").contains("how- ever")).count() == 0


def test_tables_read_back_without_a_jvm(built, spark):
    config = built[0]
    for name in ("papers", "rejects", "sentences"):
        location = config.tables.location(name)
        frame = DeltaTable(location).to_pandas()
        assert len(frame) == spark.read.format("delta").load(location).count() > 0


def test_real_papers_mine_into_leak_free_pools_and_a_loadable_release(benchmark, spark):
    from beir.datasets.data_loader import GenericDataLoader

    config, mined, pools, export = benchmark
    assert mined["mined_pairs"] > 0 and mined["mined_by_move_or_category"].get("move:specify", 0) > 0
    assert "text_in_two_splits" in pools["leakage_checks_passed"]
    assert {split for split, sizes in pools["splits"].items() if sizes["queries"]} == {"train", "validation", "test"}
    queries = spark.read.format("delta").load(config.tables.location("queries"))
    assert queries.count() == sum(sizes["queries"] for sizes in pools["splits"].values())
    split, move = "test", "specify"
    corpus, beir_queries, qrels = GenericDataLoader(
        str(Path(config.release.root) / "beir" / move / split)
    ).load(split=split)
    assert len(beir_queries) == pools["splits"][split]["queries_by_move"][move]
    assert len(corpus) == pools["splits"][split]["candidates"]
    assert all(gold in corpus for judged in qrels.values() for gold in judged)


def test_every_stage_reconciles_and_counts_its_drops_by_reason(built, benchmark, spark):
    config, ingest, segment, _, expected_rejects = built
    _, mine, pools, export = benchmark
    for summary in (ingest, segment, mine, pools, export):
        assert summary["reconciled"], summary["stage"]
    stats = {}
    for r in spark.read.format("delta").load(config.tables.location("stats_drops")).collect():
        stats.setdefault(r["stage"], {})[r["reason"]] = r["rows"]
    pool_drops = {}
    for split in pools["splits"].values():
        for key, n in split["dropped"].items():
            pool_drops[key.split(":", 1)[1]] = pool_drops.get(key.split(":", 1)[1], 0) + n
    for reason, sizes in pools["out_of_range_by_reason"].items():
        pool_drops[reason] = pool_drops.get(reason, 0) + sizes["pairs"]
    assert stats.get("ingest") == expected_rejects
    assert stats.get("segment", {}) == segment["papers_dropped_by_reason"]
    assert stats.get("mine", {}) == mine["dropped_by_reason"] and mine["dropped_by_reason"]
    assert stats.get("pools", {}) == pool_drops
    drops = spark.read.format("delta").load(config.tables.location("drops"))
    by_stage = {r["stage"]: r["count"] for r in drops.groupBy("stage").count().collect()}
    assert by_stage == {stage: sum(counts.values()) for stage, counts in stats.items() if stage != "ingest" and counts}
    assert drops.filter(F.col("item_id").isNull() | F.col("item").isNull()).count() == 0
    assert segment["papers"] == segment["papers_with_sentences"] + sum(segment["papers_dropped_by_reason"].values())


def test_a_rerun_yields_the_same_rows(built, benchmark, spark):
    config = benchmark[0]
    names = ("papers", "rejects", "sentences", "mined_pairs", "queries", "candidates", "stats_yield", "drops", "stats_drops")
    before = {
        name: sorted(map(str, spark.read.format("delta").load(config.tables.location(name)).collect()))
        for name in names
    }
    for stage in (run_ingest, run_segment, run_mine, run_pools):
        stage(spark, config)
    for name, rows in before.items():
        after = sorted(map(str, spark.read.format("delta").load(config.tables.location(name)).collect()))
        assert after == rows, name


def execute_notebook(name: str, tables_root: str, monkeypatch):
    """Run a notebook against a tables root; return it and its outputs, failing on any error cell."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("RATIO_TABLES", tables_root)
    notebook = nbformat.read(REPO_ROOT / "notebooks" / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO_ROOT / "notebooks")}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    return notebook, outputs


@pytest.mark.slow
def test_the_tables_notebook_runs_against_the_tables(built, monkeypatch):
    notebook, outputs = execute_notebook("01_ingest_tables.ipynb", built[0].tables.root, monkeypatch)
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 2  # the two plots
    counts = notebook.cells[1].outputs[0]["data"]["text/plain"]
    assert re.search(rf"^papers\s+{built[1]['papers']}$", counts, re.MULTILINE), counts


@pytest.mark.slow
def test_the_benchmark_notebook_runs_against_the_tables(benchmark, monkeypatch):
    notebook, outputs = execute_notebook("02_benchmark_tables.ipynb", benchmark[0].tables.root, monkeypatch)
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 1
    top_markers = notebook.cells[3].outputs[0]["data"]["text/plain"]
    assert "for example" in top_markers or "specifically" in top_markers
