"""The pipeline on the shared sample (tests/conftest.py): real GROBID TEI papers with corrupted files mixed in,
ingested, segmented, mined, pooled and exported once for the session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from ratio_spark.pipeline.segment import explode_paragraphs
from ratio_spark.pipeline.runner import run_stage
from ratio_spark.pipeline.stages import PIPELINE

from conftest import execute_notebook, notebook_outputs, tagged_cell


def read(spark, run, name):
    return spark.read.format("delta").load(run.config.tables.location(name))


def test_every_input_record_is_a_paper_or_a_reject_with_its_reason(sample_segmented, spark):
    run = sample_segmented
    summary, n_real = run.summaries["ingest"], len(run.corpus.real_papers)
    assert summary["papers"] == n_real
    assert summary["dropped_by_reason"] == run.corpus.expected_rejects
    assert summary["input_records"] == run.corpus.input_records
    papers = read(spark, run, "papers")
    assert papers.select("paper_id").distinct().count() == n_real
    assert papers.filter(F.col("pub_date").isNull() | F.col("date_source").isNull()).count() == 0


def test_rejects_carry_path_and_readable_detail(sample_segmented, spark):
    rejects = read(spark, sample_segmented, "rejects").collect()
    for row in rejects:
        assert row.source_path and row.detail and row.reason.islower() and " " not in row.reason
    dup = next(r for r in rejects if r.reason == "duplicate_paper_id")
    assert "already taken by" in dup.detail


def test_sentences_are_ordered_normalised_and_keep_the_original(sample_segmented, spark):
    run = sample_segmented
    seg, n_real = run.summaries["segment"], len(run.corpus.real_papers)
    assert seg["papers_with_sentences"] == n_real
    sentences = read(spark, run, "sentences")
    assert sentences.count() == seg["sentences"] > 50 * n_real
    assert sentences.select("sentence_id").distinct().count() == seg["sentences"]
    clean = sentences.filter(F.col("norm_flag").isNull())
    assert clean.filter(F.col("norm_text") != F.lower(F.col("norm_text"))).count() == 0
    assert clean.filter(F.col("norm_text").rlike(r"\s{2,}|^\s|\s$")).count() == 0
    # No masked abbreviation period survives, and the original text is kept as written.
    assert sentences.filter(F.col("text").rlike("[\ue000\ue001]")).count() == 0
    papers = read(spark, run, "papers")
    located = explode_paragraphs(papers).join(sentences, ["paper_id", "section_idx", "para_idx"])
    span = F.expr("substring(para_text, char_start + 1, char_end - char_start)")
    assert located.count() == seg["sentences"]
    assert located.filter(span != F.col("text")).count() == 0
    # De-hyphenation: the line-break hyphen of "how- ever" is gone from the papers' text.
    assert sentences.filter(F.col("text").contains("how- ever")).count() == 0


def test_tables_read_back_without_a_jvm(sample_segmented, spark):
    for name in ("papers", "rejects", "sentences"):
        frame = DeltaTable(sample_segmented.config.tables.location(name)).to_pandas()
        assert len(frame) == read(spark, sample_segmented, name).count() > 0


def test_real_papers_mine_into_leak_free_pools_and_a_loadable_release(sample_benchmark, spark):
    from beir.datasets.data_loader import GenericDataLoader

    run = sample_benchmark
    mined, pools = run.summaries["mine"], run.summaries["pools"]
    assert mined["mined_pairs"] > 0 and mined["mined_by_move_or_category"].get("move:specify", 0) > 0
    assert "text_in_two_splits" in pools["leakage_checks_passed"]
    assert {split for split, sizes in pools["splits"].items() if sizes["queries"]} == {"train", "validation", "test"}
    assert read(spark, run, "queries").count() == sum(sizes["queries"] for sizes in pools["splits"].values())
    split, move = "test", "specify"
    corpus, beir_queries, qrels = GenericDataLoader(
        str(Path(run.config.release.root) / "beir" / move / split)
    ).load(split=split)
    assert len(beir_queries) == pools["splits"][split]["queries_by_move"][move]
    assert len(corpus) == pools["splits"][split]["candidates"]
    assert all(gold in corpus for judged in qrels.values() for gold in judged)


def test_every_stage_reconciles_and_counts_its_drops_by_reason(sample_benchmark, spark):
    run = sample_benchmark
    config, expected_rejects = run.config, run.corpus.expected_rejects
    ingest, segment, mine, pools, export = (run.summaries[s] for s in ("ingest", "segment", "mine", "pools", "export"))
    for summary in run.summaries.values():
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
    assert stats.get("segment", {}) == segment["dropped_by_reason"]
    assert stats.get("mine", {}) == mine["dropped_by_reason"] and mine["dropped_by_reason"]
    assert stats.get("pools", {}) == pool_drops
    drops = spark.read.format("delta").load(config.tables.location("drops"))
    by_stage = {r["stage"]: r["count"] for r in drops.groupBy("stage").count().collect()}
    assert by_stage == {stage: sum(counts.values()) for stage, counts in stats.items() if stage != "ingest" and counts}
    assert drops.filter(F.col("item_id").isNull() | F.col("item").isNull()).count() == 0
    assert segment["papers"] == segment["papers_with_sentences"] + sum(segment["dropped_by_reason"].values())


def test_a_rerun_yields_the_same_rows(sample_benchmark, spark, tmp_path):
    """Every stage rerun over its own complete output (a private copy of the shared tables) writes the same rows."""
    config = sample_benchmark.copy_tables(tmp_path)
    names = ("papers", "rejects", "sentences", "mined_pairs", "queries", "candidates", "stats_yield", "references", "drops",
             "stats_drops")
    before = {
        name: sorted(map(str, spark.read.format("delta").load(config.tables.location(name)).collect()))
        for name in names
    }
    for stage in PIPELINE:
        run_stage(spark, config, stage)
    for name, rows in before.items():
        after = sorted(map(str, spark.read.format("delta").load(config.tables.location(name)).collect()))
        assert after == rows, name


@pytest.mark.slow
def test_the_tables_notebook_runs_against_the_tables(sample_segmented, monkeypatch):
    run = sample_segmented
    notebook = execute_notebook("01_ingest_tables.ipynb", {"RATIO_TABLES": str(run.tables_root)}, monkeypatch)
    assert sum("image/png" in o.get("data", {}) for o in notebook_outputs(notebook)) == 2  # the two plots
    counts = tagged_cell(notebook, "table-counts").outputs[0]["data"]["text/plain"]
    assert re.search(rf"^papers\s+{run.summaries['ingest']['papers']}$", counts, re.MULTILINE), counts
    assert re.search(rf"^sentences\s+{run.summaries['segment']['sentences']}$", counts, re.MULTILINE), counts


@pytest.mark.slow
def test_the_benchmark_notebook_runs_against_the_tables(sample_benchmark, monkeypatch):
    notebook = execute_notebook("02_benchmark_tables.ipynb", {"RATIO_TABLES": str(sample_benchmark.tables_root)},
                                monkeypatch)
    assert sum("image/png" in o.get("data", {}) for o in notebook_outputs(notebook)) == 1
    top_markers = tagged_cell(notebook, "top-markers").outputs[0]["data"]["text/plain"]
    # Each move's most frequent marker, counted here from mined_pairs, is in the notebook's table.
    pairs = DeltaTable(sample_benchmark.config.tables.location("mined_pairs")).to_pandas()
    moves = pairs[pairs.role == "move"]
    assert len(moves)
    for move, rows in moves.groupby("move"):
        assert rows.marker_entry.value_counts().index[0] in top_markers, move
