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


def _log(line: str) -> None:
    print(line, flush=True)


def llm_reranker(config, args):
    """The second stage of ``evaluation.workflow.write_evaluation``: ``rerank.model`` through the llm: section,
    or the bundled local server with --local-server (started only when the first stage is done)."""
    from ratio_spark.cli.common import llm_client
    from ratio_spark.rerank.runner import rerank_with_endpoint

    def open_client():
        return llm_client(config.llm, config.rerank.model, args.local_server, args.local_port,
                          local_n_ctx=args.local_n_ctx)

    def rerank(result, data):
        report, inputs = rerank_with_endpoint(result, data, config.rerank, open_client, config.evaluation.results,
                                              log=_log)
        if args.local_server:
            from ratio_spark.evaluation.manifest import files_entry
            from ratio_spark.llm.local_server import gemma_model_path

            inputs[f"model:llm:{config.rerank.model}"] = files_entry(gemma_model_path(), name="bundled gemma 3 270M GGUF")
        return report, inputs

    return rerank


def print_rerank_report(report) -> int:
    """Counts and the client's usage; exit 1 when a query failed (a rerun retries only those)."""
    print(report.console())
    note = report.failure_note()
    if note:
        print("\n" + note, file=sys.stderr)
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


def _runs(args) -> tuple[list[tuple[str, str, Path]], dict]:
    """The first-stage runs to rerank (name, label, path), and the evaluation settings they imply."""
    from ratio_spark.evaluation.runs import RunError, runs_of_results

    if not args.from_results:
        runs = []
        for spec in args.run:
            name, sep, path = spec.partition("=")
            if not sep or not name or not path:
                raise RunError(f"--run {spec!r} must look like NAME=PATH")
            runs.append((name, name, Path(path)))
        return runs, {}
    runs = runs_of_results(args.from_results)  # first: it says so when the folder is not a results folder
    defaults = _defaults_from(Path(args.from_results))
    if args.systems:
        wanted = comma_list(args.systems)
        unknown = sorted(set(wanted) - {name for name, _, _ in runs})
        if unknown:
            raise RunError(f"--systems {unknown} are not in {args.from_results} "
                           f"(it has {[name for name, _, _ in runs]})")
        runs = [r for r in runs if r[0] in wanted]
    return runs, defaults


def run(args) -> int:
    from ratio_spark.cli.common import print_summary, with_flags, write_summary
    from ratio_spark.config import load_config
    from ratio_spark.core.config import ConfigError

    config = load_config(args.conf, args.overrides)
    if bool(args.from_results) == bool(args.run):
        raise ConfigError("give either --from-results FOLDER or --run NAME=PATH (one or more)")
    runs, defaults = _runs(args)
    results = args.results or (f"{str(args.from_results).rstrip('/')}-rerank" if args.from_results
                               else config.evaluation.results)
    given = {"evaluation.split": args.split, "evaluation.source": args.source,
             "evaluation.sample_per_move": args.sample_per_move, "evaluation.results": results,
             "rerank.model": args.model}
    config = with_flags(config, {**{f"evaluation.{key}": value for key, value in defaults.items()},
                                 **{key: value for key, value in given.items() if value is not None}})

    from ratio_spark.evaluation.runner import empty_result
    from ratio_spark.evaluation.workflow import add_runs, data_lines, load_benchmark, summary_lines, write_evaluation

    started = time.perf_counter()
    data = load_benchmark(config)
    result = empty_result(data, config.evaluation.cutoffs, config.rerank.candidates)
    run_inputs, coverage = add_runs(result, data, runs)
    title, lines = data_lines(data, config.evaluation)
    for name, cover in coverage.items():
        lines[f"run {name}"] = ", ".join(f"{k} {v}" for k, v in cover.items())
    print_summary(lines, f"rerank: {title}")

    written = write_evaluation("rerank", config, data, result, started=started, second_stage=llm_reranker(config, args),
                               extra_summary={"runs": coverage}, extra_inputs=run_inputs)
    print_summary(summary_lines(result, written), "rerank: summary")
    write_summary(args.summary_json, written.summary)
    return print_rerank_report(written.report)
