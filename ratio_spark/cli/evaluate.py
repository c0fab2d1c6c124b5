"""score retrievers (BM25, dense, MaxSim) on a split of the benchmark: metrics per move, analyses, results folder

    ratio-spark evaluate --conf conf/sample.yaml --split test --moves address,broaden,specify \\
        --retrievers bm25-1,bm25-2,bm25-3,dense:minilm --results results/sample
    ratio-spark evaluate --conf conf/rerank-local.yaml --rerank gemma-local --local-server --sample-per-move 20
    ratio-spark evaluate --check-manifest results/sample     # would a rerun read the same inputs?

Settings come from the ``evaluation:`` section of the configuration (``ratio_spark.evaluation.settings``);
the flags below override it. Plain Python: no JVM; torch and faiss are imported only when a dense retriever
runs. See docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import time

from ratio_spark.cli.common import comma_list


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args, add_local_server_args
    from ratio_spark.evaluation.retrieval.registry import MODELS_HELP, spec_help

    add_config_args(parser)
    parser.add_argument("--split", help="train, validation or test (default: evaluation.split, test)")
    parser.add_argument("--moves", help="comma-separated moves (default: address,broaden,specify)")
    parser.add_argument("--retrievers", help=f"comma-separated, each {spec_help()} ({MODELS_HELP})")
    parser.add_argument("--queries", choices=["all", "silver"], help="all mined queries, or only those the LLM judge "
                        "accepted (needs the Delta table 'silver')")
    parser.add_argument("--source", help="a tables root or a release root (default: tables.root of the configuration)")
    parser.add_argument("--silver", help="location of the Delta table 'silver' (default: <tables root>/silver)")
    parser.add_argument("--results", help="folder for tables, plots, runs (default: evaluation.results)")
    parser.add_argument("--depth", type=int, help="candidates kept per query (default 100)")
    parser.add_argument("--analyses", help="comma-separated from oracle,overlap,recall; 'none' for none")
    parser.add_argument("--index", choices=["flat", "ivf", "hnsw"], help="faiss index for dense retrievers")
    parser.add_argument("--max-queries", type=int, help="per move, the first N queries by id (quick looks)")
    parser.add_argument("--no-cache", action="store_true", help="encode again; do not read or write cached embeddings")
    parser.add_argument("--sample-per-move", type=int, help="a seeded sample of N queries per move, scored by every "
                        "system (evaluation.sample_per_move; seed: evaluation.sample_seed)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--rerank", metavar="ENDPOINT", help="also rerank each retriever's top rerank.candidates with "
                        "this LLM endpoint of the llm: section (listwise, docs/rerank.md)")
    add_local_server_args(parser, "rerank", rerank_context=True)
    parser.add_argument("--check-manifest", metavar="FOLDER", help="only check FOLDER/manifest.json: would a rerun "
                        "read the same inputs (tables, files, code; the config too when --conf/--set are given)?")


def _flags(args) -> dict:
    """The flags given, as dotted settings keys (``cli.common.with_flags``); None: not given."""
    analyses = None if args.analyses is None else [] if args.analyses == "none" else comma_list(args.analyses)
    return {"evaluation.split": args.split, "evaluation.moves": comma_list(args.moves) if args.moves else None,
            "evaluation.retrievers": comma_list(args.retrievers) if args.retrievers else None,
            "evaluation.queries": args.queries, "evaluation.source": args.source,
            "evaluation.silver_table": args.silver, "evaluation.results": args.results,
            "evaluation.depth": args.depth, "evaluation.analyses": analyses, "evaluation.dense.index.kind": args.index,
            "evaluation.max_queries": args.max_queries, "evaluation.cache": False if args.no_cache else None,
            "evaluation.progress": False if args.no_progress else None,
            "evaluation.sample_per_move": args.sample_per_move, "rerank.model": args.rerank}


def check_manifest_command(folder: str, config: dict | None) -> int:
    from ratio_spark.evaluation.manifest import check_manifest

    check = check_manifest(folder, config=config)
    for note in check.notes:
        print(f"  note: {note}")
    if check.same_inputs:
        print(f"{folder}: a rerun would read the same inputs" + ("" if config else " (config as recorded)"))
        return 0
    print(f"{folder}: a rerun would read different inputs:")
    for line in check.differences:
        print(f"  - {line}")
    return 1


def _log(line: str) -> None:
    print(line, flush=True)


def run(args) -> int:
    from ratio_spark.cli.common import print_summary, with_flags, write_summary
    from ratio_spark.config import load_config
    from ratio_spark.core.config import ConfigError

    config = with_flags(load_config(args.conf, args.overrides), _flags(args))
    settings = config.evaluation
    if args.check_manifest:
        given = args.conf or args.overrides
        return check_manifest_command(args.check_manifest, config.model_dump(mode="json") if given else None)
    if args.rerank and config.rerank.candidates > settings.depth:
        raise ConfigError(f"rerank.candidates ({config.rerank.candidates}) exceeds the first-stage depth "
                          f"({settings.depth}): raise --depth or lower rerank.candidates")

    from ratio_spark.cli.preflight import model_checks, require
    from ratio_spark.evaluation.models import offline
    from ratio_spark.evaluation.retrieval.registry import parse_retriever_spec

    offline()
    specs = [parse_retriever_spec(spec) for spec in settings.retrievers]
    require(model_checks([s["model"] for s in specs if "model" in s], settings.models))

    from ratio_spark.evaluation.retrieval.cache import EmbeddingCache
    from ratio_spark.evaluation.runner import run_evaluation
    from ratio_spark.evaluation.workflow import data_lines, load_benchmark, require_queries, summary_lines, write_evaluation

    started = time.perf_counter()
    data = load_benchmark(config)
    title, lines = data_lines(data, settings)
    lines["retrievers"] = ", ".join(settings.retrievers)
    if args.rerank:
        rerank = config.rerank
        lines["rerank"] = f"{rerank.model}, prompt {rerank.prompt}, top {rerank.candidates} -> {rerank.select}"
    lines["analyses"] = ", ".join(settings.analyses) or "none"
    print_summary(lines, f"evaluate: {title}")
    require_queries(data, settings)

    cache = EmbeddingCache(settings.cache_dir, enabled=settings.cache)
    result = run_evaluation(data, settings, cache=cache, log=_log)
    stats = cache.stats
    second_stage = None
    if args.rerank:
        from ratio_spark.cli.rerank import llm_reranker

        second_stage = llm_reranker(config, args)
    written = write_evaluation("evaluate", config, data, result, started=started, second_stage=second_stage,
                               extra_summary={"embedding_cache": {"root": str(cache.root), "hits": stats.hits,
                                                                  "misses": stats.misses,
                                                                  "encoded_texts": stats.encoded_texts}},
                               extra_timings={"systems": result.timings})
    print_summary(summary_lines(result, written, {"embedding_cache": f"hits {stats.hits}, misses {stats.misses}, "
                                                  f"texts encoded {stats.encoded_texts} ({cache.root})"}),
                  "evaluate: summary")
    write_summary(args.summary_json, written.summary)
    if written.report:
        from ratio_spark.cli.rerank import print_rerank_report

        return print_rerank_report(written.report)
    return 0
