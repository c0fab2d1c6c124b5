"""The pipeline's stages: each reads tables (or inputs), writes tables and returns a summary of counts."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ratio_spark.core.config import Config
from ratio_spark.core.errors import ReconciliationError
from ratio_spark.pipeline.ingest import ingest
from ratio_spark.pipeline.segment import segment_papers
from ratio_spark.pipeline.tables import read_table, table_location, write_table


def _log(message: str) -> None:
    print(f"[ratio-spark {time.strftime('%H:%M:%S')}] {message}", flush=True)


@contextmanager
def _phase(what: str):
    """A progress line before a long phase and one with its time after it: no minute passes without a word."""
    started = time.time()
    _log(f"{what} ...")
    yield
    _log(f"{what}: done in {time.time() - started:.1f} s")


def run_ingest(spark: SparkSession, config: Config) -> dict[str, Any]:
    """Inputs -> ``papers`` + ``rejects``; every input record lands in exactly one of them."""
    started = time.time()
    _log(f"ingest: reading {len(config.inputs)} input(s): " + ", ".join(f"{i.name} ({i.format})" for i in config.inputs))
    result = ingest(spark, config)
    records = result.records.persist(StorageLevel.MEMORY_AND_DISK)  # papers and rejects reuse it
    try:
        with _phase("ingest: reading and parsing every input unit"):
            by_input = {r["source_format"]: r["count"] for r in records.groupBy("source_format").count().collect()}
        with _phase("ingest: writing papers"):
            write_table(result.papers, table_location(config, "papers"))
        with _phase("ingest: writing rejects"):
            write_table(result.rejects, table_location(config, "rejects"))
        input_records = sum(by_input.values())
    finally:
        records.unpersist()

    written_papers = read_table(spark, config, "papers")
    written_rejects = read_table(spark, config, "rejects")
    n_papers = written_papers.count()
    reasons = {r["reason"]: r["count"] for r in written_rejects.groupBy("reason").count().collect()}
    n_rejects = sum(reasons.values())
    summary = {
        "stage": "ingest",
        "input_records": input_records,
        "input_records_by_format": by_input,
        "papers": n_papers,
        "rejected": n_rejects,
        "rejected_by_reason": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "papers_by_year": {
            str(r["year"]): r["count"]
            for r in written_papers.groupBy(F.year("pub_date").alias("year")).count().orderBy("year").collect()
        },
        "papers_by_date_source": {
            r["date_source"]: r["count"] for r in written_papers.groupBy("date_source").count().collect()
        },
        "tables": {name: table_location(config, name) for name in ("papers", "rejects")},
        "seconds": round(time.time() - started, 1),
    }
    if input_records != n_papers + n_rejects:
        raise ReconciliationError(
            f"ingest: {input_records} input records but {n_papers} papers + {n_rejects} rejects were written"
        )
    return summary


def run_segment(spark: SparkSession, config: Config) -> dict[str, Any]:
    """``papers`` -> ``sentences`` (Spark NLP in the JVM)."""
    started = time.time()
    papers = read_table(spark, config, "papers")
    with _phase("segment: splitting paragraphs into sentences (Spark NLP SentenceDetector) and writing them"):
        write_table(segment_papers(papers, config.segment), table_location(config, "sentences"))
    sentences = read_table(spark, config, "sentences")
    row = sentences.agg(
        F.count("*").alias("sentences"),
        F.countDistinct("paper_id").alias("papers_with_sentences"),
        F.sum(F.when(F.col("norm_flag").isNull(), 1).otherwise(0)).alias("clean"),
    ).first()
    flags = {
        r["norm_flag"]: r["count"]
        for r in sentences.filter(F.col("norm_flag").isNotNull()).groupBy("norm_flag").count().collect()
    }
    n_papers = papers.count()
    summary = {
        "stage": "segment",
        "papers": n_papers,
        "papers_with_sentences": row["papers_with_sentences"],
        "sentences": row["sentences"],
        "clean_sentences": row["clean"],
        "flagged_by_reason": flags,
        "tables": {"sentences": table_location(config, "sentences")},
        "seconds": round(time.time() - started, 1),
    }
    if row["clean"] + sum(flags.values()) != row["sentences"]:
        raise ReconciliationError("segment: clean + flagged sentences do not add up to all sentences")
    return summary


def run_mine(spark: SparkSession, config: Config) -> dict[str, Any]:
    """``sentences`` -> ``mined_pairs`` (+ ``stats_mining``): marker matching over consecutive pairs."""
    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.pipeline.mine import mine_pairs, pairs_for_mining

    started = time.time()
    lexicon = load_lexicon(config.mining.lexicon)
    _log(f"mine: lexicon {lexicon.version} ({len(lexicon.markers)} markers), matching consecutive pairs")
    sentences = read_table(spark, config, "sentences")
    matched, mined = mine_pairs(spark, sentences, lexicon, config.mining)
    matched = matched.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with _phase("mine: matching and writing mined_pairs"):
            write_table(mined, table_location(config, "mined_pairs"))
        examined_by_year = {
            r["year"]: r["count"]
            for r in pairs_for_mining(sentences).groupBy(F.year("pub_date").alias("year")).count().collect()
        }
        pairs_examined = sum(examined_by_year.values())
        outcome = {
            (r["role"], r["drop_reason"]): r["count"]
            for r in matched.groupBy("role", "drop_reason").count().collect()
        }
    finally:
        matched.unpersist()
    written = read_table(spark, config, "mined_pairs")
    by_label = {
        f"{r['role']}:{r['label']}": r["count"]
        for r in written.groupBy("role", F.coalesce("move", "category").alias("label")).count().collect()
    }
    matched_total = sum(outcome.values())
    kept = sum(n for (role, reason), n in outcome.items() if reason is None)
    dropped = {reason: sum(n for (_, r), n in outcome.items() if r == reason) for _, reason in outcome if reason}
    rows = written.count()
    summary = {
        "stage": "mine",
        "lexicon_version": lexicon.version,
        "consecutive_pairs_examined": pairs_examined,
        "pairs_opening_with_a_marker": matched_total,
        "dropped_by_reason": dropped,
        "duplicates_removed": kept - rows,
        "mined_pairs": rows,
        "mined_by_move_or_category": dict(sorted(by_label.items())),
        "tables": {"mined_pairs": table_location(config, "mined_pairs"), "stats_mining": table_location(config, "stats_mining")},
        "seconds": round(time.time() - started, 1),
    }
    # One row per publication year: yields by year need the pairs examined in that year.
    stats = spark.createDataFrame(
        [(lexicon.version, year, n) for year, n in sorted(examined_by_year.items(), key=lambda kv: (kv[0] is None, kv[0]))],
        "lexicon_version string, year int, pairs_examined long",
    )
    write_table(stats, table_location(config, "stats_mining"))
    if matched_total != kept + sum(dropped.values()):
        raise ReconciliationError("mine: matched pairs != kept + dropped")
    return summary


def run_pools(spark: SparkSession, config: Config) -> dict[str, Any]:
    """``mined_pairs`` -> temporal splits, shared candidate pools (``queries``, ``candidates``), leakage checks, ``stats_*``."""
    from ratio_spark.pipeline.leakage import check_leakage
    from ratio_spark.pipeline.pools import build_pools
    from ratio_spark.pipeline.splits import assign_splits
    from ratio_spark.pipeline.stats import benchmark_stats

    started = time.time()
    mined = read_table(spark, config, "mined_pairs")
    with _phase("pools: assigning temporal splits"):
        assignment = assign_splits(mined, config.splits)
        split_summary = assignment.summary()
    build = build_pools(assignment.pairs)
    with _phase("pools: building and writing the queries and the shared candidate pool of each split"):
        write_table(build.queries, table_location(config, "queries"), partition_by=["split"])
        write_table(build.candidates, table_location(config, "candidates"), partition_by=["split"])
    with _phase("pools: counting what the pools kept and dropped"):
        pool_summary = build.summary()
    queries, candidates = read_table(spark, config, "queries"), read_table(spark, config, "candidates")
    with _phase("pools: leakage checks"):
        leakage = check_leakage(queries, candidates, config.splits)
    pairs_examined = read_table(spark, config, "stats_mining").agg(F.sum("pairs_examined")).first()[0]
    stats = benchmark_stats(mined, queries, candidates, pairs_examined)
    with _phase(f"pools: writing the statistics tables ({', '.join(stats)})"):
        for name, frame in stats.items():
            write_table(frame, table_location(config, name))
    yields = {
        r["label"]: {"pairs": r["pairs"], "per_1000_pairs": round(r["pairs_per_1000"], 3)}
        for r in read_table(spark, config, "stats_yield").collect()
        if r["role"] == "move"
    }
    matches = read_table(spark, config, "stats_marker_matches").filter(F.col("role") == "move").collect()
    top_markers = {
        move: {r["marker_entry"]: r["pairs"] for r in sorted((r for r in matches if r["label"] == move), key=lambda r: -r["pairs"])[:5]}
        for move in ("address", "broaden", "specify")
    }
    markers_matched = {
        f"{r['label']} ({r['marker_source']})": r["markers_matched"]
        for r in read_table(spark, config, "stats_marker_sources").filter(F.col("role") == "move").collect()
    }
    return {
        "stage": "pools",
        **{k: v for k, v in split_summary.items() if k != "pairs_by_split"},
        "pairs_by_split": split_summary["pairs_by_split"],
        "splits": pool_summary["splits"],
        "yield_per_1000_consecutive_pairs": yields,
        "consecutive_pairs_examined": pairs_examined,
        "markers_with_matches_by_move_and_source": markers_matched,
        "top_markers_by_move": top_markers,
        **leakage,
        "tables": {name: table_location(config, name) for name in ["queries", "candidates", *stats]},
        "seconds": round(time.time() - started, 1),
    }


def run_export(spark: SparkSession, config: Config) -> dict[str, Any]:
    """``queries`` + ``candidates`` -> the release: Parquet and JSONL per split, BEIR folders per move and split."""
    from ratio_spark.pipeline.export import export_release

    started = time.time()
    _log(f"export: writing the release to {config.release.root}")
    manifest = export_release(read_table(spark, config, "queries"), read_table(spark, config, "candidates"), config.release.root)
    return {
        "stage": "export",
        "release": config.release.root,
        "splits": manifest.get("splits", {}),
        "beir_folders": sum(len(splits) for splits in manifest.get("beir", {}).values()),
        "beir_skipped": manifest.get("beir_skipped", []),
        "seconds": round(time.time() - started, 1),
    }


STAGES = {"ingest": run_ingest, "segment": run_segment, "mine": run_mine, "pools": run_pools, "export": run_export}
PIPELINE = ["ingest", "segment", "mine", "pools", "export"]
