"""Mine's pairs in reading order against the shuffle (docs/performance.md, "Mining: pairs in reading order").

1. ``mine_pairs`` both ways (``in_order`` True and False) on one sentences table: the stage log's line on how the
   pairs were formed, and whether the pairs examined per year are the same, and the ``mined_pairs`` rows and the
   drops (their count and the sum of a 64-bit hash of every row: the same rows in any order give the same sum).
2. With ``--pieces``, what the pass in reading order costs, piece by piece, each written to Spark's ``noop``
   sink (every column computed, nothing stored), ``--repeats`` times in turn: reading the columns mine reads;
   the same with the pre-filter regex; with the file split's hash; the sentences through Arrow into Python and
   nothing back; the whole pass in reading order (pairs, pre-filter, automaton, cutting rules); and the
   shuffle's pairs with the same work (``_pairs_by_shuffle(...).matched``). ``--pieces-only`` skips step 1.

    python benchmarks/mine_pairing.py --sentences /work/data/scale/keep/local-16x/tables/sentences --pieces \\
        --out benchmarks/results/mine_pairing_16x.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pyspark.sql import functions as F

from ratio_spark.config import load_config
from ratio_spark.lexicon.loader import load_lexicon
from ratio_spark.pipeline import mine
from ratio_spark.pipeline.session import build_spark_session
from ratio_spark.pipeline.settings import MiningConfig

REPO = Path(__file__).resolve().parents[1]


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    value = action()
    return round(time.perf_counter() - started, 1), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", required=True, help="a sentences Delta table")
    parser.add_argument("--lexicon", default="v1")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--pieces", action="store_true")
    parser.add_argument("--pieces-only", action="store_true", help="the pieces without step 1")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/mine_pairing.json"))
    args = parser.parse_args()

    spark = build_spark_session(load_config("local", [f"spark.master={args.master}"]).spark)
    lexicon, config = load_lexicon(args.lexicon), MiningConfig()
    rules = mine.pair_rules(lexicon, config)
    sentences = spark.read.format("delta").load(args.sentences)
    results: dict = {"sentences": args.sentences, "lexicon": lexicon.version, "master": args.master}

    def fingerprint(frame) -> list:
        """Rows and the sum of a 64-bit hash of each whole row: equal for the same rows in any order."""
        row = frame.agg(F.count("*").alias("rows"), F.sum(F.xxhash64(*frame.columns).cast("decimal(38,0)")).alias("hash")).first()
        return [row["rows"], str(row["hash"])]

    outputs = {}
    for in_order in () if args.pieces_only else (True, False):
        mining = mine.mine_pairs(spark, sentences, lexicon, config, in_order=in_order)
        matched = mining.matched.persist()
        outputs[in_order] = {"examined": sorted((r["year"], r["count"]) for r in mining.examined.collect()),
                             "mined_pairs": fingerprint(mining.mined), "drops": fingerprint(mining.drops)}
        results["in order" if in_order else "by the shuffle"] = {
            "pairing": mining.pairing, "examined": sum(n for _, n in outputs[in_order]["examined"]),
            "mined_pairs": outputs[in_order]["mined_pairs"], "drops": outputs[in_order]["drops"]}
        matched.unpersist()
        mining.scanned.unpersist()
    if outputs:
        results["same"] = {name: outputs[True][name] == outputs[False][name] for name in outputs[True]}
        print(json.dumps(results, indent=2), flush=True)

    if args.pieces or args.pieces_only:
        def noop(frame):
            return lambda: frame.write.format("noop").mode("overwrite").save()

        columns = sentences.select(*[c for c in mine.SENTENCE_FIELDS if c != "year"])
        pieces = {
            "read the columns mine reads": noop(columns),
            "+ the pre-filter regex": noop(columns.withColumn("_o", F.col("norm_text").rlike(rules.cutter.opening_regex()))),
            "+ the file split's hash": noop(columns.withColumn("_b", F.xxhash64(F.input_file_name(), F.input_file_block_start()))),
            "through Arrow into Python, nothing back": noop(columns.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches),
                                                                                columns.schema)),
            "the pass in reading order (pairs, pre-filter, automaton, rules)": noop(mine._scan_in_order(sentences, rules, spark)),
            "the shuffle's pairs, pre-filter, automaton and rules": noop(mine._pairs_by_shuffle(sentences, rules, spark, "asked").matched),
        }
        timed(noop(columns))  # the page cache and the JIT
        results["pieces_seconds"] = {name: [] for name in pieces}
        for _ in range(args.repeats):
            for name, action in pieces.items():
                seconds, _ = timed(action)
                results["pieces_seconds"][name].append(seconds)
                print(f"{name}: {seconds} s", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
