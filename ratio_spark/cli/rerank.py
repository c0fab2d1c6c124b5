"""rerank a first-stage run with an LLM (listwise, top 100 -> 10 best): funnel, intervals, manifest

    ratio-spark rerank --conf conf/rerank-local.yaml --from-results results/sample --local-server
    ratio-spark rerank --conf conf/rerank-openai.yaml --run bm25=runs/bm25.trec --results results/bm25-gpt5mini

Reads the first-stage runs (``--from-results``: the runs of an ``evaluate`` results folder, on the same
queries; ``--run NAME=PATH``: TREC files or folders of them), reranks each with the ``rerank.model``
endpoint of the ``llm:`` section (or ``--local-server``), scores first stage and reranked pipelines on the
split, and writes the results folder of ``evaluate`` plus ``rerank.md`` and ``rerank/``. See docs/rerank.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from ratio_spark.cli.common import comma_list


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args, add_local_server_args

    add_config_args(parser)
    parser.add_argument("--from-results", metavar="FOLDER", help="rerank the first-stage runs of this evaluate results "
                        "folder, on its split, query set and sample")
    parser.add_argument("--run", action="append", default=[], metavar="NAME=PATH",
                        help="a first-stage run: a TREC file or a folder of <move>.trec files (repeatable)")
    parser.add_argument("--systems", help="with --from-results: comma-separated system ids to rerank (default: all)")
    parser.add_argument("--model", help="endpoint name from the llm: section (default: rerank.model)")
    add_local_server_args(parser, "rerank", rerank_context=True)
    parser.add_argument("--results", help="output folder (default: <from-results>-rerank, or rerank.results)")
    parser.add_argument("--split", help="split (default: the results folder's, or evaluation.split)")
    parser.add_argument("--source", help="tables root or release root (default: the results folder's, or tables.root)")
    parser.add_argument("--sample-per-move", type=int, help="a seeded sample of N queries per move "
                        "(default: the results folder's, or evaluation.sample_per_move)")


# ---------------------------------------------------------------------------------------------- shared with evaluate


def rerank_into(result, data, config, model: str, results_folder, args):
    """Rerank the first-stage systems of ``result`` in place: (report, manifest inputs). An interrupt, a batch
    still running or a bad answer reach the CLI's one handler (a rerun resumes from the cache)."""
    from ratio_spark.cli.common import llm_client
    from ratio_spark.evaluation.manifest import files_entry
    from ratio_spark.rerank.runner import rerank_systems

    settings = config.rerank.model_copy(update={"model": model})
    state_dir = Path(settings.batch_state_dir or Path(results_folder) / "rerank" / "batches")
    result.window = settings.candidates
    with llm_client(config.llm, model, args.local_server, args.local_port, local_n_ctx=args.local_n_ctx) \
            as (client, name):
        report = rerank_systems(result, data, client, settings, model=name, state_dir=state_dir,
                                log=lambda line: print(line, flush=True))
        inputs = report.manifest_inputs(client.endpoint(name))
    if args.local_server:
        from ratio_spark.llm.local_server import gemma_model_path

        inputs[f"model:llm:{model}"] = files_entry(gemma_model_path(), name="bundled gemma 3 270M GGUF")
    return report, inputs


def print_rerank_report(report) -> int:
    """Counts and the client's usage; exit 1 when a query failed (a rerun retries only those)."""
    import pandas as pd

    print("\n== rerank ==")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        columns = ["system", "move", "queries", "not_sent", "reranked", "repaired", "failed", "requests", "cached",
                   "reasks", "answers_with_defects"]
        print("  " + report.counts[columns].to_string(index=False).replace("\n", "\n  "))
    print("\nLLM client usage:\n" + report.usage_report)
    if report.failed:
        print(f"\n{report.failed} queries failed; they score zero in every table. Run the same command again: answered "
              "requests come from the cache, only the failed ones are sent.", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------------------------- the command


def _defaults_from(folder: Path) -> dict:
    """The evaluation settings of an `evaluate` results folder: the same split, data, queries and sample."""
    summary = json.loads((folder / "summary.json").read_text())
    settings = summary.get("settings") or {}
    defaults = {key: settings.get(key) for key in ("split", "source", "queries", "silver_table", "moves",
                                                   "max_queries", "sample_per_move", "sample_seed", "cutoffs", "depth")}
    read_from = str((summary.get("data") or {}).get("source", ""))  # "tables:<root>" or "release:<root>"
    if not defaults["source"] and ":" in read_from:
        defaults["source"] = read_from.split(":", 1)[1]
    return defaults


def run(args) -> int:
    from ratio_spark.cli.common import resolved_config, validated_settings, write_results_manifest
    from ratio_spark.core.config import ConfigError, load_config
    from ratio_spark.evaluation.runs import RunError, read_run_files, runs_of_results

    config = load_config(args.conf, args.overrides)
    if bool(args.from_results) == bool(args.run):
        raise ConfigError("give either --from-results FOLDER or --run NAME=PATH (one or more)")
    tree = config.evaluation.model_dump()
    if args.from_results:
        runs = runs_of_results(args.from_results)  # first: it says so when the folder is not a results folder
        tree.update({k: v for k, v in _defaults_from(Path(args.from_results)).items() if v is not None})
        if args.systems:
            wanted = comma_list(args.systems)
            unknown = sorted(set(wanted) - {name for name, _, _ in runs})
            if unknown:
                raise RunError(f"--systems {unknown} are not in {args.from_results} "
                               f"(it has {[name for name, _, _ in runs]})")
            runs = [r for r in runs if r[0] in wanted]
    else:
        runs = []
        for spec in args.run:
            name, sep, path = spec.partition("=")
            if not sep or not name or not path:
                raise RunError(f"--run {spec!r} must look like NAME=PATH")
            runs.append((name, name, Path(path)))
    for key, value in (("split", args.split), ("source", args.source), ("sample_per_move", args.sample_per_move)):
        if value:
            tree[key] = value
    results = args.results or (f"{str(args.from_results).rstrip('/')}-rerank" if args.from_results
                               else config.evaluation.results)
    tree["results"] = results
    settings = validated_settings(tree)

    from ratio_spark.evaluation.data import load_split
    from ratio_spark.evaluation.manifest import files_entry
    from ratio_spark.evaluation.reports import write_results
    from ratio_spark.evaluation.runner import add_system, empty_result

    started = time.perf_counter()
    source = settings.source or config.tables.root
    silver = settings.silver_table or (config.tables.location("silver") if not settings.source else None)
    data = load_split(source, settings.split, settings.moves, settings.queries, silver, settings.max_queries,
                      settings.sample_per_move, settings.sample_seed)
    result = empty_result(data, settings.cutoffs, config.rerank.candidates)
    run_inputs, coverage = {}, {}
    for name, label, path in runs:
        rankings = read_run_files(path)
        by_move = {move: {q.query_id: rankings[q.query_id] for q in queries if q.query_id in rankings}
                   for move, queries in data.queries.items()}
        in_split = {q.query_id for queries in data.queries.values() for q in queries}
        coverage[name] = {"split_queries_missing_from_run": len(in_split - set(rankings)),
                          "run_queries_outside_split": len(set(rankings) - in_split)}
        if not set(rankings) & in_split:
            raise RunError(f"run {name} ({path}) holds none of the {len(in_split)} queries of the "
                           f"{settings.split} split: wrong split or wrong run?")
        add_system(result, data, {"name": name, "label": label, "run": str(path)}, by_move)
        run_inputs[f"run:{name}"] = files_entry(path, ["*.trec"])
    print(f"== rerank: {settings.split} split, {data.query_set} queries, from {data.source} ==")
    print("  queries_by_move                " + ", ".join(f"{m} {len(q)}" for m, q in data.queries.items()))
    for name, cover in coverage.items():
        print(f"  run {name:<26} " + ", ".join(f"{k} {v}" for k, v in cover.items()))

    if args.model:
        config.rerank.model = args.model
    report, inputs = rerank_into(result, data, config, config.rerank.model, results, args)
    elapsed = time.perf_counter() - started
    written = write_results(result, results, significance=settings.significance, extra_summary={
        "settings": settings.model_dump(mode="json"), "elapsed_seconds": round(elapsed, 1), "runs": coverage,
        "rerank": report.summary()})
    written.update(report.write(results))
    tree = resolved_config(config, settings)
    write_results_manifest(results, "rerank", tree, data, result,
                           tables_root=None if data.source.startswith("release:") else source,
                           lexicon=config.mining.lexicon, extra_inputs={**run_inputs, **inputs},
                           seeds={"significance": settings.significance.seed,
                                  **({"query_sample": settings.sample_seed} if settings.sample_per_move else {})},
                           timings={"elapsed_seconds": round(elapsed, 1), "rerank_seconds": round(report.seconds, 1)})
    print("\n== rerank: MRR@10 (%), full pool ==")
    print("  " + result.table("M@10").round(1).to_string().replace("\n", "\n  "))
    print(f"\n  results                        {results}: "
          + ", ".join(sorted(k for k in written if k != "runs")) + ", manifest.json")
    if args.summary_json:
        Path(args.summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary_json).write_text(Path(written["summary.json"]).read_text())
    return print_rerank_report(report)
