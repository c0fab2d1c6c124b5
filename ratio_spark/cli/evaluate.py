"""score retrievers (BM25, dense, MaxSim) on a split of the benchmark: metrics per move, analyses, results folder

    ratio-spark evaluate --conf conf/sample.yaml --split test --moves address,broaden,specify \\
        --retrievers bm25-1,bm25-2,bm25-3,dense:minilm --results results/sample

Settings come from the ``evaluation:`` section of the configuration (``ratio_spark.evaluation.settings``);
the flags below override it. Plain Python: no JVM; torch and faiss are imported only when a dense retriever
runs. See docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args

    add_config_args(parser)
    parser.add_argument("--split", help="train, validation or test (default: evaluation.split, test)")
    parser.add_argument("--moves", help="comma-separated moves (default: address,broaden,specify)")
    parser.add_argument("--retrievers", help="comma-separated: bm25-1,bm25-2,bm25-3,dense:<model>[:<prefix>],"
                        "maxsim:<model>; models: minilm, mpnet, a folder or a sentence-transformers name; "
                        "prefix: none, generic, recommended, instructions")
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
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _settings(args, config):
    from pydantic import ValidationError

    from ratio_spark.core.config import ConfigError, validation_message
    from ratio_spark.evaluation.settings import EvaluationConfig

    tree = config.evaluation.model_dump()
    if args.split:
        tree["split"] = args.split
    if args.moves:
        tree["moves"] = [m.strip() for m in args.moves.split(",") if m.strip()]
    if args.retrievers:
        tree["retrievers"] = [r.strip() for r in args.retrievers.split(",") if r.strip()]
    if args.queries:
        tree["queries"] = args.queries
    if args.source:
        tree["source"] = args.source
    if args.silver:
        tree["silver_table"] = args.silver
    if args.results:
        tree["results"] = args.results
    if args.depth:
        tree["depth"] = args.depth
    if args.analyses:
        tree["analyses"] = [] if args.analyses == "none" else [a.strip() for a in args.analyses.split(",") if a.strip()]
    if args.index:
        tree["dense"]["index"]["kind"] = args.index
    if args.max_queries:
        tree["max_queries"] = args.max_queries
    if args.no_cache:
        tree["cache"] = False
    if args.no_progress:
        tree["progress"] = False
    try:
        return EvaluationConfig.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, "invalid evaluation settings", prefix="evaluation.")) from None


def run(args) -> int:
    from ratio_spark.core.config import load_config

    config = load_config(args.conf, args.overrides)
    settings = _settings(args, config)

    from ratio_spark.cli.preflight import model_checks, require
    from ratio_spark.evaluation.data import BenchmarkDataError, load_split
    from ratio_spark.evaluation.models import offline
    from ratio_spark.evaluation.settings import parse_retriever_spec

    offline()
    specs = [parse_retriever_spec(spec) for spec in settings.retrievers]
    require(model_checks([s["model"] for s in specs if "model" in s], settings.models))
    source = settings.source or config.tables.root
    silver = settings.silver_table or (config.tables.location("silver") if not settings.source else None)
    started = time.perf_counter()
    data = load_split(source, settings.split, settings.moves, settings.queries, silver, settings.max_queries)
    loaded = data.summary()
    print(f"== evaluate: {settings.split} split, {settings.queries} queries, from {loaded['source']} ==")
    print(f"  pool_candidates                {loaded['pool_candidates']}")
    print(f"  queries_by_move                " + ", ".join(f"{m} {n}" for m, n in loaded["queries_by_move"].items()))
    print(f"  queries_with_exclusions        {loaded['queries_with_exclusions']}")
    print(f"  retrievers                     {', '.join(settings.retrievers)}")
    print(f"  analyses                       {', '.join(settings.analyses) or 'none'}", flush=True)
    if not any(loaded["queries_by_move"].values()):
        raise BenchmarkDataError(f"no queries to score for moves {settings.moves} in split {settings.split!r} "
                                 f"of {loaded['source']}: choose other --moves / --split")

    from ratio_spark.evaluation.runner import run_evaluation
    from ratio_spark.evaluation.reports import write_results
    from ratio_spark.evaluation.retrieval.cache import EmbeddingCache

    cache = EmbeddingCache(settings.cache_dir, enabled=settings.cache)
    result = run_evaluation(data, settings, cache=cache, log=lambda line: print(line, flush=True))
    elapsed = time.perf_counter() - started
    written = write_results(result, settings.results, extra_summary={
        "settings": settings.model_dump(mode="json"), "elapsed_seconds": round(elapsed, 1),
        "embedding_cache": {"root": str(cache.root), "hits": cache.stats.hits, "misses": cache.stats.misses,
                            "encoded_texts": cache.stats.encoded_texts},
    })

    print("\n== evaluate: summary ==")
    table = result.table("M@10")
    if not table.empty:
        print("  MRR@10 (%), full pool:")
        print("    " + table.round(1).to_string().replace("\n", "\n    "))
    for system in result.systems:
        if system.get("ann_recall_vs_exact"):
            recall = ", ".join(f"{m} {v:.3f}" for m, v in system["ann_recall_vs_exact"].items())
            print(f"  ann_recall_vs_exact            {system['name']}: {recall}")
    print(f"  embedding_cache                hits {cache.stats.hits}, misses {cache.stats.misses}, "
          f"texts encoded {cache.stats.encoded_texts} ({cache.root})")
    print(f"  scored                         {len(result.per_query)} (pool, move, system, query) rows")
    print(f"  elapsed_seconds                {elapsed:.1f}")
    print(f"  results                        {settings.results}: " + ", ".join(sorted(k for k in written if k != "runs")))
    if args.summary_json:
        Path(args.summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary_json).write_text(Path(written["summary.json"]).read_text())
    return 0
