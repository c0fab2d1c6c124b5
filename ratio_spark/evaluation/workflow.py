"""From a benchmark split to a results folder: the one path of ``ratio-spark evaluate`` (the retrievers it runs)
and ``ratio-spark rerank`` (first-stage runs read from disk).

Both load the split the same way (``load_benchmark``), score their systems into an ``EvaluationResult``, and
end with ``write_evaluation``: the second stage when one is asked for (an LLM reranker, given as a function
by the caller so that this package never imports ``ratio_spark.rerank``), the tables, plots and runs
(``reports.write_results``), the second stage's files, and the manifest (``manifest``). ``data_lines``
and ``summary_lines`` are what both print before and after. Plain Python, no JVM.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ratio_spark.evaluation.data import BenchmarkDataError, BenchmarkSplit, lexicon_versions, load_split
from ratio_spark.evaluation.manifest import build_manifest, files_entry, lexicon_entry, model_inputs, write_manifest
from ratio_spark.evaluation.reports import write_results
from ratio_spark.evaluation.runner import EvaluationResult, add_system
from ratio_spark.evaluation.runs import RunError, read_run_files

# A second stage over the first-stage systems of a result (``ratio_spark.rerank.runner.rerank_with_endpoint``):
# it adds its systems to the result and returns (report, manifest inputs); the report has ``summary()``,
# ``write(folder) -> {what: path}`` and ``seconds``.
SecondStage = Callable[[EvaluationResult, BenchmarkSplit], tuple[Any, dict]]


def benchmark_source(config) -> str:
    """The tables root or release root the evaluation reads (``evaluation.source``, else ``tables.root``)."""
    return config.evaluation.source or config.tables.root


def load_benchmark(config) -> BenchmarkSplit:
    """The split, query set and sample of ``config.evaluation`` (flags applied), from its source; the silver
    table of the tables root unless the source is given."""
    settings = config.evaluation
    silver = settings.silver_table or (config.tables.location("silver") if not settings.source else None)
    return load_split(benchmark_source(config), settings.split, settings.moves, settings.queries, silver,
                      settings.max_queries, settings.sample_per_move, settings.sample_seed)


@dataclass
class WrittenEvaluation:
    files: dict[str, str]  # what -> path, as ``write_results`` returns them, plus the second stage's and the manifest
    summary: dict  # the content of summary.json
    report: Any = None  # the second stage's report, if one ran
    elapsed_seconds: float = 0.0


def add_runs(result: EvaluationResult, data: BenchmarkSplit, runs: list[tuple[str, str, Path]]) -> tuple[dict, dict]:
    """Score first-stage runs read from disk (``(name, label, path)``: a TREC file or a folder of them) into
    ``result``: (manifest inputs, coverage per run). A run that holds none of the split's queries is a RunError."""
    inputs, coverage = {}, {}
    in_split = {q.query_id for queries in data.queries.values() for q in queries}
    for name, label, path in runs:
        rankings = read_run_files(path)
        by_move = {move: {q.query_id: rankings[q.query_id] for q in queries if q.query_id in rankings}
                   for move, queries in data.queries.items()}
        coverage[name] = {"split_queries_missing_from_run": len(in_split - set(rankings)),
                          "run_queries_outside_split": len(set(rankings) - in_split)}
        if not set(rankings) & in_split:
            raise RunError(f"run {name} ({path}) holds none of the {len(in_split)} queries of the "
                           f"{data.split} split: wrong split or wrong run?")
        add_system(result, data, {"name": name, "label": label, "run": str(path)}, by_move)
        inputs[f"run:{name}"] = files_entry(path, ["*.trec"])
    return inputs, coverage


def write_results_manifest(folder, command: str, config_tree: dict, data: BenchmarkSplit, result: EvaluationResult, *,
                           tables_root: str | None, lexicon: str, seeds: dict, timings: dict,
                           extra_inputs: dict | None = None) -> None:
    """The manifest of a results folder: the data read, the models of the systems, the lexicon, and what the
    command adds (runs, prompts, LLM endpoints)."""
    inputs = {**data.inputs, **model_inputs(result.systems), **(extra_inputs or {}),
              "lexicon": lexicon_entry(lexicon, lexicon_versions(tables_root) if tables_root else None)}
    write_manifest(folder, build_manifest(command, config_tree, inputs, seeds=seeds, timings=timings))


def write_evaluation(command: str, config, data: BenchmarkSplit, result: EvaluationResult, *, started: float,
                     second_stage: SecondStage | None = None, extra_summary: dict | None = None,
                     extra_inputs: dict | None = None, extra_timings: dict | None = None) -> WrittenEvaluation:
    """Run the second stage (if any) on ``result``, then write the results folder ``config.evaluation.results``
    and its manifest. ``started``: ``time.perf_counter()`` when the command began (elapsed_seconds counts from
    there); ``extra_*``: what the command adds to summary.json, the manifest inputs and its timings."""
    settings = config.evaluation
    report, stage_inputs = second_stage(result, data) if second_stage else (None, {})
    elapsed = round(time.perf_counter() - started, 1)
    written = write_results(result, settings.results, significance=settings.significance, extra_summary={
        "settings": settings.model_dump(mode="json"), "elapsed_seconds": elapsed, **(extra_summary or {}),
        **({"rerank": report.summary()} if report else {}),
    })
    if report:
        written.update(report.write(settings.results))
    source = benchmark_source(config)
    write_results_manifest(settings.results, command, config.model_dump(mode="json"), data, result,
                           tables_root=None if data.source.startswith("release:") else source,
                           lexicon=config.mining.lexicon, extra_inputs={**(extra_inputs or {}), **stage_inputs},
                           seeds={"significance": settings.significance.seed,
                                  **({"query_sample": settings.sample_seed} if settings.sample_per_move else {})},
                           timings={"elapsed_seconds": elapsed, **(extra_timings or {}),
                                    **({"rerank_seconds": round(report.seconds, 1)} if report else {})})
    written["manifest.json"] = str(Path(settings.results) / "manifest.json")
    summary = json.loads(Path(written["summary.json"]).read_text())
    return WrittenEvaluation(written, summary, report, elapsed)


def data_lines(data: BenchmarkSplit, settings) -> tuple[str, dict]:
    """What ``evaluate`` and ``rerank`` print before they score: the split read, its pool and queries."""
    loaded = data.summary()
    lines = {"pool_candidates": loaded["pool_candidates"],
             "queries_by_move": ", ".join(f"{m} {n}" for m, n in loaded["queries_by_move"].items())}
    if loaded.get("queries_sampled_out"):
        lines["queries_sampled_out"] = (", ".join(f"{m} {n}" for m, n in loaded["queries_sampled_out"].items())
                                        + f" (seeded sample of {settings.sample_per_move} per move, seed "
                                        f"{settings.sample_seed})")
    lines["queries_with_exclusions"] = loaded["queries_with_exclusions"]
    return f"{settings.split} split, {settings.queries} queries, from {loaded['source']}", lines


def require_queries(data: BenchmarkSplit, settings) -> None:
    if not any(data.summary()["queries_by_move"].values()):
        raise BenchmarkDataError(f"no queries to score for moves {settings.moves} in split {settings.split!r} "
                                 f"of {data.source}: choose other --moves / --split")


def summary_lines(result: EvaluationResult, written: WrittenEvaluation, extra: dict | None = None) -> dict:
    """What ``evaluate`` and ``rerank`` print when they are done: MRR@10 per system and move, ANN recall where
    an approximate index ran, what the command adds (``extra``), and the files written."""
    lines: dict = {}
    table = result.table("M@10")
    if not table.empty:
        lines["MRR@10 (%), full pool"] = table.round(1).to_string()
    recall = {system["name"]: ", ".join(f"{m} {v:.3f}" for m, v in system["ann_recall_vs_exact"].items())
              for system in result.systems if system.get("ann_recall_vs_exact")}
    if recall:
        lines["ann_recall_vs_exact"] = recall
    lines.update(extra or {})
    lines["scored"] = f"{len(result.per_query)} (pool, move, system, query) rows"
    lines["elapsed_seconds"] = written.elapsed_seconds
    lines["results"] = f"{Path(written.files['manifest.json']).parent}: " + ", ".join(
        sorted(k for k in written.files if k != "runs"))
    return lines
