"""Where `mine`'s time goes at scale, piece by piece, in one Spark session (issue 28): the pass that forms, matches
and cuts the pairs (cold: the session's first Python job; then warm), the same pass persisted as the stage does, the
de-duplication window over the matched pairs, and the rows and drops from a persisted or a recomputed window. Each
piece is written to Spark's ``noop`` sink (everything computed, nothing written).

    python benchmarks/mine_phases.py --sentences /work/data/scale/keep/local-16x/tables/sentences \
        --out benchmarks/results/mine_phases_16x.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", required=True, help="a sentences Delta table")
    parser.add_argument("--conf", default="conf/acl.yaml")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from pyspark import StorageLevel

    import ratio_spark.pipeline.mine as mine
    from ratio_spark.config import load_config
    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.pipeline.session import build_spark_session

    config = load_config(args.conf, [])
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
    timed("the pass -> noop (cold: the session's first Python job)", lambda: noop(mine._scan_in_order(sentences, rules, spark)))
    timed("the pass -> noop (warm)", lambda: noop(mine._scan_in_order(sentences, rules, spark)))
    scan = mine._scan_in_order(sentences, rules, spark).persist(StorageLevel.MEMORY_AND_DISK)
    timed("the pass -> persisted, counted", scan.count)
    scan.unpersist()
    mining = mine.mine_pairs(spark, sentences, lexicon, config.mining)  # runs its pass, persisted
    matched_pairs = mining.scanned.filter("_kind = 'pair'")
    timed("the matched pairs from the persisted pass -> noop", lambda: noop(matched_pairs))
    timed("the de-duplication window -> noop", lambda: noop(mining.matched))
    matched = mining.matched.persist(StorageLevel.MEMORY_AND_DISK)
    timed("the de-duplication window -> persisted, counted", matched.count)
    timed("mined_pairs rows from the persisted window -> noop", lambda: noop(mining.mined))
    timed("drops from the persisted window -> noop", lambda: noop(mining.drops))
    matched.unpersist()
    timed("mined_pairs rows, the window recomputed -> noop", lambda: noop(mining.mined))
    timed("drops, the window recomputed -> noop", lambda: noop(mining.drops))
    report = {"sentences": args.sentences, "pairs_opening_with_a_marker": matched_pairs.count(), "seconds": seconds}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
