"""Pairs per second for pairing + marker matching, against a bare scan of the same pairs (docs/performance-log.md, "Mining").

For each scale (1x, 2x, 4x the corpus, made by replicating its sentences under new paper ids and
written to Delta first so every run reads from disk the same way), after one untimed Python job that
starts the Python workers (its time is reported as first_python_job_seconds):
  bare_scan   read sentences, form consecutive pairs, count them (Spark prunes the text columns)
  full_scan   the same pairs with every column read (a hash of all columns, summed)
  vectorised  the same pairs, JVM pre-filter + matching and cutting in Arrow batches (mapInArrow, ``cut_matched``),
              count matches

    python benchmarks/mining_throughput.py --sentences /tmp/acl-tables/sentences --lexicon v1
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from ratio_spark.config import load_config
from ratio_spark.lexicon.loader import load_lexicon
from ratio_spark.pipeline.settings import MiningConfig
from ratio_spark.pipeline.mine import CUT_COLUMNS, cut_matched, may_open_in_jvm, pair_rules, pairs_for_mining
from ratio_spark.pipeline.session import build_spark_session

REPO = Path(__file__).resolve().parents[1]


def timed(action):
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", required=True, help="a sentences Delta table (e.g. of conf/acl.yaml)")
    parser.add_argument("--lexicon", default="v1")
    parser.add_argument("--scales", default="1,2,4")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "ratio-spark-mining-bench"))
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/mining_throughput.json"))
    args = parser.parse_args()

    config = load_config("local", [f"spark.master={args.master}"])
    spark = build_spark_session(config.spark)
    lexicon = load_lexicon(args.lexicon)
    mining = MiningConfig()
    rules = pair_rules(lexicon, mining)
    base = spark.read.format("delta").load(args.sentences)
    results: dict = {"lexicon": lexicon.version, "markers": len(lexicon.markers), "master": args.master,
                     "cpus": os.cpu_count(), "scales": {}}

    def matched(pairs):
        """Pre-filter, match and cut in Arrow batches: what ``mine_pairs`` does before de-duplication."""
        return cut_matched(pairs.filter(may_open_in_jvm("second_norm", rules.cutter)), rules, spark)

    for scale in [int(s) for s in args.scales.split(",")]:
        location = f"{args.workdir}/sentences_x{scale}"
        if not Path(location).exists():
            copies = [base.withColumn("paper_id", F.concat("paper_id", F.lit(f"#r{i}"))) for i in range(scale)]
            replicated = copies[0]
            for copy in copies[1:]:
                replicated = replicated.unionByName(copy)
            replicated = replicated.withColumn("sentence_id", F.concat_ws(":", "paper_id", "section_idx", "para_idx", "sent_idx"))
            replicated.write.format("delta").mode("overwrite").save(location)
        sentences = spark.read.format("delta").load(location)
        pairs = pairs_for_mining(sentences)
        pairs.count()  # warm the JVM and the page cache
        if "first_python_job_seconds" not in results:
            # The first Python job of a session starts the Python workers (a fixed cost, paid once per run).
            results["first_python_job_seconds"] = round(timed(lambda: matched(pairs).count())[0], 2)
        bare_seconds, n_pairs = timed(lambda: pairs_for_mining(sentences).count())
        full_seconds, _ = timed(lambda: pairs_for_mining(sentences).select(
            F.sum(F.xxhash64(*pairs.columns) % 1000)).first())
        # Every cut column read (a hash summed), so that Spark cannot prune the rules away as it would for a count.
        match_seconds, n_matched = timed(lambda: matched(pairs_for_mining(sentences)).select(
            F.count("*"), F.sum(F.xxhash64(*CUT_COLUMNS) % 1000)).first()[0])
        row = {
            "pairs": n_pairs, "matched": n_matched,
            "bare_scan_seconds": round(bare_seconds, 2), "full_scan_seconds": round(full_seconds, 2),
            "matching_seconds": round(match_seconds, 2),
            "bare_pairs_per_second": round(n_pairs / bare_seconds), "matching_pairs_per_second": round(n_pairs / match_seconds),
            "matching_over_bare": round(match_seconds / bare_seconds, 2),
            "matching_over_full_scan": round(match_seconds / full_seconds, 2),
        }
        results["scales"][f"{scale}x"] = row
        print(f"{scale}x: {json.dumps(row)}", flush=True)

    if "1x" in results["scales"] and "4x" in results["scales"]:
        results["time_4x_over_1x"] = round(
            results["scales"]["4x"]["matching_seconds"] / results["scales"]["1x"]["matching_seconds"], 2
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
