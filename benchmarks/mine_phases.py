"""Where `mine`'s time goes at scale, piece by piece, in one Spark session (issue 28), and the least time any
`mine` of this design needs (Spark reads the sentences and writes Delta, Python matches and cuts).

Each piece is written to Spark's ``noop`` sink (everything computed, nothing written) unless it says Delta:
reading the columns mine reads; those columns through Arrow into Python and nothing back; the pass that forms,
matches and cuts the pairs (cold: the session's first Python job; then warm; then persisted as the stage does);
the de-duplication window over the matched pairs; the rows and drops from a persisted or a recomputed window;
and writing the stage's rows and drops as Delta tables from memory (what the stage writes, nothing computed). Then
the Python side on one core, on the pairs of every ``--sample-every``-th paper: the pre-filter per sentence, the
matcher and the cutting rules per pair the pre-filter passes.

    python benchmarks/mine_phases.py --sentences /work/data/scale/keep/local-4x/tables/sentences --out 4x.json
    python benchmarks/mine_phases.py --sentences /work/data/scale/keep/local-16x/tables/sentences --out 16x.json
    python benchmarks/mine_phases.py --bound 4x.json 16x.json

``--bound`` compares two runs: each piece's marginal rate per core between them; the least wall time the larger
scale's step costs (the pieces no implementation of this design avoids: the columns into Python, the
de-duplication, the writes) against what 150K examined pairs/s per core allows; the same with the Python side at
its measured costs; and how few microseconds per candidate the matcher and rules would need to fit the budget.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

READ, ARROW = "read the columns mine reads -> noop", "the columns through Arrow into Python, nothing back -> noop"
WINDOW = "the de-duplication window -> noop"
WRITE_ROWS, WRITE_DROPS = "mined_pairs rows from memory -> Delta", "drops from memory -> Delta"
# What any mine of this design does at least once per run (the window: the de-duplication; other ways of it
# measured no cheaper, docs/performance.md).
UNAVOIDABLE = (ARROW, WINDOW, WRITE_ROWS, WRITE_DROPS)


def measure(args) -> dict:
    from pyspark import StorageLevel

    import ratio_spark.pipeline.mine as mine
    from ratio_spark.config import load_config
    from ratio_spark.core.schema import TABLES
    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.pipeline.session import build_spark_session
    from ratio_spark.pipeline.tables import write_table

    config = load_config(args.conf, [f"mining.lexicon={args.lexicon}"] if args.lexicon else [])
    spark = build_spark_session(config.spark)
    sentences = spark.read.format("delta").load(args.sentences)
    lexicon = load_lexicon(config.mining.lexicon)
    rules = mine.pair_rules(lexicon, config.mining)
    seconds: dict[str, float] = {}

    def timed(name: str, action) -> None:
        started = time.perf_counter()
        action()
        seconds[name] = round(time.perf_counter() - started, 2)
        print(f"{name}: {seconds[name]} s", flush=True)

    noop = lambda frame: frame.write.format("noop").mode("overwrite").save()
    columns = sentences.select(*[c for c in mine.SENTENCE_FIELDS if c != "year"])
    timed(READ + " (cold: the session's first job)", lambda: noop(columns))
    timed(READ, lambda: noop(columns))
    timed(ARROW + " (cold: the session's first Python job)",
          lambda: noop(columns.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches), columns.schema)))
    timed(ARROW, lambda: noop(columns.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches), columns.schema)))
    timed("the pass -> noop", lambda: noop(mine._scan_in_order(sentences, rules, spark)))
    scan = mine._scan_in_order(sentences, rules, spark).persist(StorageLevel.MEMORY_AND_DISK)
    timed("the pass -> persisted, counted", scan.count)
    scan.unpersist()
    mining = mine.mine_pairs(spark, sentences, lexicon, config.mining)  # runs its pass, persisted
    examined = sum(r["count"] for r in mining.examined.collect())
    matched_pairs = mining.scanned.filter("_kind = 'pair'")
    timed("the matched pairs from the persisted pass -> noop", lambda: noop(matched_pairs))
    timed(WINDOW, lambda: noop(mining.matched))
    matched = mining.matched.persist(StorageLevel.MEMORY_AND_DISK)
    timed("the de-duplication window -> persisted, counted", matched.count)
    timed("mined_pairs rows from the persisted window -> noop", lambda: noop(mining.mined))
    timed("drops from the persisted window -> noop", lambda: noop(mining.drops))
    n_matched = matched.count()
    matched.unpersist()
    timed("mined_pairs rows, the window recomputed -> noop", lambda: noop(mining.mined))
    timed("drops, the window recomputed -> noop", lambda: noop(mining.drops))
    rows = mining.mined.persist(StorageLevel.MEMORY_AND_DISK)
    drops = mining.drops.persist(StorageLevel.MEMORY_AND_DISK)
    counts = {"examined_pairs": examined, "pairs_opening_with_a_marker": n_matched, "mined_pairs": rows.count(),
              "drops": drops.count()}
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        timed(WRITE_ROWS, lambda: write_table(rows, f"{scratch}/mined_pairs", TABLES["mined_pairs"].partition_by))
        timed(WRITE_DROPS, lambda: write_table(drops, f"{scratch}/drops"))
    per_pair = python_costs(spark, sentences, rules, args.sample_every)
    spark.stop()
    return {"sentences": args.sentences, "lexicon": lexicon.version, **counts, "seconds": seconds, **per_pair}


def python_costs(spark, sentences, rules, every: int) -> dict:
    """What the Python side costs on one core (the driver's), on the pairs of every ``every``-th paper: the
    pre-filter per sentence (``PairCutter.may_open_column`` over batches of 10,000, as the pass gets them), and the matcher and cutting rules per pair the pre-filter
    passes (``mine._cut_batch``, as the pass calls them), with the share of those a marker opens."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    import ratio_spark.pipeline.mine as mine

    some = sentences.filter(F.abs(F.xxhash64("paper_id")) % every == 0)
    texts = pa.Table.from_batches(some.select("norm_text")._collect_as_arrow()).column("norm_text").combine_chunks()
    started = time.perf_counter()
    for start in range(0, len(texts), 10_000):  # Spark's Arrow batches (spark.sql.execution.arrow.maxRecordsPerBatch)
        rules.cutter.may_open_column(texts.slice(start, 10_000))
    prefilter = time.perf_counter() - started
    candidates = pa.Table.from_batches(mine.pairs_for_mining(some).filter(
        mine.may_open_in_jvm("second_norm", rules.cutter)).select(*mine._RULE_INPUTS)._collect_as_arrow())
    attributes = mine.marker_attributes(rules.cutter)
    started, opened = time.perf_counter(), 0
    for batch in candidates.to_batches(10_000):
        opens, _ = mine._cut_batch(rules, attributes, batch)
        opened += sum(opens.to_pylist())
    cutting = time.perf_counter() - started
    return {"python_one_core": {
        "sentences": len(texts), "prefilter_us_per_sentence": round(prefilter / len(texts) * 1e6, 3),
        "candidates": candidates.num_rows, "opened_by_a_marker": opened,
        "match_and_cut_us_per_candidate": round(cutting / candidates.num_rows * 1e6, 2)}}


def bound(smaller: dict, larger: dict, target_per_core: float = 150_000, cores: int = 2) -> dict:
    """Each piece's marginal rate per core from ``smaller`` to ``larger``, and the unavoidable pieces' marginal
    seconds against the step's budget at ``target_per_core``."""
    more = larger["examined_pairs"] - smaller["examined_pairs"]
    step = {name: round(larger["seconds"][name] - smaller["seconds"][name], 2)
            for name in larger["seconds"] if name in smaller["seconds"]}
    unavoidable = round(sum(step[name] for name in UNAVOIDABLE), 2)
    report = {
        "more_examined_pairs": more,
        "marginal_seconds": step,
        "marginal_rate_per_core": {name: round(more / s / cores) if s > 0 else None for name, s in step.items()},
        "budget_seconds_at_target": round(more / target_per_core / cores, 2),
        "unavoidable_marginal_seconds": unavoidable,
        "best_rate_per_core_of_the_unavoidable": round(more / unavoidable / cores),
        "unavoidable_at_the_larger_scale": round(sum(larger["seconds"][name] for name in UNAVOIDABLE), 2),
    }
    if "python_one_core" not in larger:  # a run of the script before it measured the Python side
        return report
    # The Python side at the costs measured on one core: the pre-filter over every second sentence of a pair,
    # the matcher and the rules over every pair it passes (the matched pairs over the share a marker opens).
    python = larger["python_one_core"]
    candidates = (larger["pairs_opening_with_a_marker"] - smaller["pairs_opening_with_a_marker"]) \
        * python["candidates"] / python["opened_by_a_marker"]
    python_seconds = round((more * python["prefilter_us_per_sentence"]
                            + candidates * python["match_and_cut_us_per_candidate"]) / 1e6 / cores, 2)
    return {
        **report,
        "python_marginal_seconds": python_seconds,
        "best_rate_per_core_with_python": round(more / (unavoidable + python_seconds) / cores),
        "budget_left_for_python_us_per_candidate": round(
            max(0.0, (more / target_per_core - unavoidable * cores) * 1e6 - more * python["prefilter_us_per_sentence"])
            / candidates, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", help="a sentences Delta table")
    parser.add_argument("--conf", default="conf/acl.yaml")
    parser.add_argument("--lexicon", help="mining.lexicon (default: the configuration's)")
    parser.add_argument("--scratch", default=None, help="where the Delta writes go (a temporary folder in it)")
    parser.add_argument("--sample-every", type=int, default=16, help="the Python costs on every n-th paper")
    parser.add_argument("--bound", nargs=2, type=Path, metavar=("SMALLER.json", "LARGER.json"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if bool(args.sentences) == bool(args.bound):
        parser.error("give --sentences (measure) or --bound (compare two runs)")
    if args.bound:
        missing = [str(p) for p in args.bound if not p.is_file()]
        if missing:
            parser.error(f"no such run: {', '.join(missing)} (write them with --sentences ... --out)")
        report = bound(*(json.loads(p.read_text()) for p in args.bound))
    else:
        report = measure(args)
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
