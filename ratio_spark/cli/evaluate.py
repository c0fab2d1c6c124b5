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
from pathlib import Path
from ratio_spark.cli.common import comma_list


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args, add_local_server_args

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
    parser.add_argument("--sample-per-move", type=int, help="a seeded sample of N queries per move, scored by every "
                        "system (evaluation.sample_per_move; seed: evaluation.sample_seed)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--rerank", metavar="ENDPOINT", help="also rerank each retriever's top rerank.candidates with "
                        "this LLM endpoint of the llm: section (listwise, docs/rerank.md)")
    add_local_server_args(parser, "rerank", rerank_context=True)
    parser.add_argument("--check-manifest", metavar="FOLDER", help="only check FOLDER/manifest.json: would a rerun "
                        "read the same inputs (tables, files, code; the config too when --conf/--set are given)?")


def _settings(args, config):
    tree = config.evaluation.model_dump()
    if args.split:
        tree["split"] = args.split
    if args.moves:
        tree["moves"] = comma_list(args.moves)
    if args.retrievers:
        tree["retrievers"] = comma_list(args.retrievers)
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
        tree["analyses"] = [] if args.analyses == "none" else comma_list(args.analyses)
    if args.index:
        tree["dense"]["index"]["kind"] = args.index
    if args.max_queries:
        tree["max_queries"] = args.max_queries
    if args.no_cache:
        tree["cache"] = False
    if args.no_progress:
        tree["progress"] = False
    if args.sample_per_move:
        tree["sample_per_move"] = args.sample_per_move
    from ratio_spark.cli.common import validated_settings

    return validated_settings(tree)


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


def run(args) -> int:
    from ratio_spark.cli.common import resolved_config, write_results_manifest
    from ratio_spark.core.config import ConfigError, load_config

    config = load_config(args.conf, args.overrides)
    settings = _settings(args, config)
    if args.rerank:
        config.rerank.model = args.rerank
    if args.check_manifest:
        given = args.conf or args.overrides
        return check_manifest_command(args.check_manifest, resolved_config(config, settings) if given else None)
    if args.rerank and config.rerank.candidates > settings.depth:
        raise ConfigError(f"rerank.candidates ({config.rerank.candidates}) exceeds the first-stage depth "
                          f"({settings.depth}): raise --depth or lower rerank.candidates")

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
    data = load_split(source, settings.split, settings.moves, settings.queries, silver, settings.max_queries,
                      settings.sample_per_move, settings.sample_seed)
    loaded = data.summary()
    print(f"== evaluate: {settings.split} split, {settings.queries} queries, from {loaded['source']} ==")
    print(f"  pool_candidates                {loaded['pool_candidates']}")
    print("  queries_by_move                " + ", ".join(f"{m} {n}" for m, n in loaded["queries_by_move"].items()))
    if loaded.get("queries_sampled_out"):
        print("  queries_sampled_out            " + ", ".join(f"{m} {n}" for m, n in loaded["queries_sampled_out"].items())
              + f" (seeded sample of {settings.sample_per_move} per move, seed {settings.sample_seed})")
    print(f"  queries_with_exclusions        {loaded['queries_with_exclusions']}")
    print(f"  retrievers                     {', '.join(settings.retrievers)}")
    if args.rerank:
        print(f"  rerank                         {args.rerank}, prompt {config.rerank.prompt}, top "
              f"{config.rerank.candidates} -> {config.rerank.select}")
    print(f"  analyses                       {', '.join(settings.analyses) or 'none'}", flush=True)
    if not any(loaded["queries_by_move"].values()):
        raise BenchmarkDataError(f"no queries to score for moves {settings.moves} in split {settings.split!r} "
                                 f"of {loaded['source']}: choose other --moves / --split")

    from ratio_spark.evaluation.runner import run_evaluation
    from ratio_spark.evaluation.reports import write_results
    from ratio_spark.evaluation.retrieval.cache import EmbeddingCache

    cache = EmbeddingCache(settings.cache_dir, enabled=settings.cache)
    result = run_evaluation(data, settings, cache=cache, log=lambda line: print(line, flush=True))
    report, extra_inputs = None, {}
    if args.rerank:
        from ratio_spark.cli.rerank import rerank_into

        report, extra_inputs = rerank_into(result, data, config, args.rerank, settings.results, args)
    elapsed = time.perf_counter() - started
    written = write_results(result, settings.results, significance=settings.significance, extra_summary={
        "settings": settings.model_dump(mode="json"), "elapsed_seconds": round(elapsed, 1),
        "embedding_cache": {"root": str(cache.root), "hits": cache.stats.hits, "misses": cache.stats.misses,
                            "encoded_texts": cache.stats.encoded_texts},
        **({"rerank": report.summary()} if report else {}),
    })
    if report:
        written.update(report.write(settings.results))
    tree = resolved_config(config, settings)
    write_results_manifest(settings.results, "evaluate", tree, data, result,
                           tables_root=None if loaded["source"].startswith("release:") else source,
                           lexicon=config.mining.lexicon, extra_inputs=extra_inputs,
                           seeds={"significance": settings.significance.seed,
                                  **({"query_sample": settings.sample_seed} if settings.sample_per_move else {})},
                           timings={"elapsed_seconds": round(elapsed, 1), "systems": result.timings,
                                    **({"rerank_seconds": round(report.seconds, 1)} if report else {})})
    written["manifest.json"] = str(Path(settings.results) / "manifest.json")

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
    if report:
        from ratio_spark.cli.rerank import print_rerank_report

        return print_rerank_report(report)
    return 0
