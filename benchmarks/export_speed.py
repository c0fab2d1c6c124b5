"""The export stage's release writing, two versions of ``pipeline/export.py`` side by side in one Spark session: wall
time of ``export_release``, interleaved (old, new, old, new, ...), and the two releases compared byte for byte
(issue 28: the JSONL and BEIR files written by the executors instead of the driver, row by row).

    # k-fold copies of built queries and candidates tables (ids re-hashed per copy, so rows stay distinct)
    python benchmarks/export_speed.py replicate --tables data/tables/acl --out /tmp/export-16x/tables --copies 16
    # the old export.py (e.g. main's) against this tree's, 3 runs each after one untimed warm-up run
    python benchmarks/export_speed.py run --conf conf/acl.yaml --tables /tmp/export-16x/tables \
        --old /work/main/ratio_spark/pipeline/export.py --repeats 3 --out benchmarks/results/export_speed.json
    # two release folders, every file's sha256: exit 1 when any differs
    python benchmarks/export_speed.py compare /tmp/a /tmp/b

Both versions run in the same session (the old module loaded from its file, everything else this tree's), for
two reasons: the comparison is fair (same JVM, same warm caches, runs interleaved), and the Parquet files are
byte-comparable: parquet-mr writes each column chunk's set of encodings in hash order, which changes from one
JVM to the next, so two sessions of the same code write Parquet files with the same rows but other bytes (and
README.md and manifest.json list those files' hashes). Only the ``export_release`` call is timed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from cluster_scale import ProcessTree  # benchmarks/, the script's folder

def _session(conf: str, sets: list[str]):
    from ratio_spark.config import load_config
    from ratio_spark.pipeline.session import build_spark_session

    config = load_config(conf, sets)
    return config, build_spark_session(config.spark)


def replicate(args) -> None:
    """``--copies`` copies of queries and candidates: copy 0 as it is, copy i with every id re-hashed with i."""
    from pyspark.sql import functions as F

    _, spark = _session(args.conf, [])

    def rehash(column, copy: int):
        return F.concat(F.substring(column, 1, 1), F.substring(F.sha2(F.concat(column, F.lit(f":{copy}")), 256), 1, 16))

    def copies(df, ids: list[str], id_arrays: list[str]):
        out = df
        for copy in range(1, args.copies):
            one = df.withColumns({c: rehash(F.col(c), copy) for c in ids})
            one = one.withColumns({c: F.transform(c, lambda x, copy=copy: rehash(x, copy)) for c in id_arrays})
            out = out.unionByName(one)
        return out

    source, target = Path(args.tables), Path(args.out)
    queries = spark.read.format("delta").load(str(source / "queries"))
    candidates = spark.read.format("delta").load(str(source / "candidates"))
    frames = {"queries": copies(queries, ["query_id", "gold_candidate_id", "pair_id"], ["exclude_candidate_ids"]),
              "candidates": copies(candidates, ["candidate_id"], [])}
    for name, df in frames.items():
        df.write.format("delta").mode("overwrite").partitionBy("split").save(str(target / name))
        print(name, spark.read.format("delta").load(str(target / name)).count(), flush=True)
    from ratio_spark.pipeline.dataset_card import STATS_TABLES

    for name in STATS_TABLES:  # the card's stats, as they are
        shutil.copytree(source / name, target / name, dirs_exist_ok=True)
    spark.stop()


def hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _without_parquet_hashes(path: Path) -> list[str]:
    """README.md or manifest.json without the lines that hold a Parquet file's hash (or the card's, in the manifest)."""
    return [line for line in path.read_text().splitlines() if "parquet/" not in line and '"README.md"' not in line]


def differences(a: Path, b: Path) -> dict:
    """Every file's sha256 in both; a differing Parquet folder is then compared row for row (its rows in part order),
    README.md and manifest.json without the Parquet hashes. ``unexplained`` lists what differs beyond that."""
    import pyarrow.parquet as pq

    left, right = hashes(a), hashes(b)
    names = set(left) | set(right)
    differ = sorted(k for k in names if left.get(k) != right.get(k))
    folders = sorted({str(Path(k).parent) for k in differ if k.startswith("parquet/")})
    same_rows = {f: pq.read_table(a / f).equals(pq.read_table(b / f)) for f in folders}
    listings = {k: _without_parquet_hashes(a / k) == _without_parquet_hashes(b / k)
                for k in ("README.md", "manifest.json") if k in differ and k in left and k in right}
    unexplained = [k for k in differ if not (same_rows.get(str(Path(k).parent)) or listings.get(k))]
    return {"files": len(names), "identical_bytes": len(names) - len(differ), "differ": differ,
            "parquet_folders_same_rows_in_order": same_rows, "equal_but_parquet_hashes": listings,
            "unexplained": unexplained, "bytes": sum((a / k).stat().st_size for k in left)}


def compare(args) -> int:
    result = differences(Path(args.a), Path(args.b))
    print(json.dumps(result, indent=2))
    return 1 if result["unexplained"] else 0


def run(args) -> int:
    """Old and new interleaved in one session after an untimed warm-up; then the last two releases compared."""
    from ratio_spark.pipeline import export as new
    from ratio_spark.pipeline.dataset_card import STATS_TABLES

    spec = importlib.util.spec_from_file_location("old_export", args.old)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    cores = args.cores
    config, spark = _session(args.conf, [f"spark.master=local[{cores}]"])
    tables, scratch = Path(args.tables), Path(args.scratch)
    queries = spark.read.format("delta").load(str(tables / "queries"))
    candidates = spark.read.format("delta").load(str(tables / "candidates"))
    stats = {name: [row.asDict() for row in spark.read.format("delta").load(str(tables / name)).collect()]
             for name in STATS_TABLES if (tables / name).exists()}
    about = new.release_about(config, stats)
    new.export_release(queries, candidates, scratch / "warm-up", about=about)
    tree = ProcessTree([os.getpid()]).__enter__()  # driver, JVM and Python workers: CPU seconds the load hardly changes
    runs = []
    for repeat in range(args.repeats):
        for label, module in (("old", old), ("new", new)):
            load, cpu, driver = os.getloadavg()[0], tree.cpu_seconds(), time.process_time()
            start = time.perf_counter()
            manifest = module.export_release(queries, candidates, scratch / f"{label}-{repeat % 2}", about=about)
            seconds = round(time.perf_counter() - start, 2)
            driver = round(time.process_time() - driver, 1)  # the driver's Python: work that never spreads
            cpu = round(tree.cpu_seconds() - cpu, 1)
            rows = sum(s["queries"] + s["candidates"] for s in manifest["splits"].values())
            runs.append({"label": label, "repeat": repeat, "seconds": seconds, "released_rows": rows,
                         "rows_per_s_per_core": round(rows / seconds / cores), "cpu_seconds": cpu, "driver_python_cpu_seconds": driver,
                         "rows_per_cpu_second": round(rows / cpu), "load_before": round(load, 2),
                         "load_after": round(os.getloadavg()[0], 2)})
            print(json.dumps(runs[-1]), flush=True)
    tree.__exit__(None, None, None)
    spark.stop()
    last = (args.repeats - 1) % 2
    same = differences(scratch / f"old-{last}", scratch / f"new-{last}")
    # Two runs of the old code: what differs there (the Parquet files' bytes) is no change of the new code's.
    old_twice = differences(scratch / "old-0", scratch / "old-1") if args.repeats > 1 else None
    summary = {}
    for label in ("old", "new"):
        mine = [r for r in runs if r["label"] == label]
        median = statistics.median(r["seconds"] for r in mine)
        cpu = statistics.median(r["cpu_seconds"] for r in mine)
        summary[label] = {"seconds": [r["seconds"] for r in mine], "median_seconds": median,
                          "rows_per_s_per_core": round(runs[0]["released_rows"] / median / cores),
                          "median_cpu_seconds": cpu, "rows_per_cpu_second": round(runs[0]["released_rows"] / cpu),
                          "median_driver_python_cpu_seconds": statistics.median(
                              r["driver_python_cpu_seconds"] for r in mine)}
    record = {"command": "python " + " ".join(sys.argv), "tables": args.tables, "cores": cores,
              "released_rows": runs[0]["released_rows"], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": args.machine, "runs": runs, "summary": summary, "releases_compared": same,
              "old_releases_compared": old_twice}
    print(json.dumps({"summary": summary, "releases_compared": same, "old_releases_compared": old_twice}, indent=2))
    if args.out:
        out = Path(args.out)
        previous = json.loads(out.read_text()) if out.exists() else []
        out.write_text(json.dumps([*previous, record], indent=2) + "\n")
    return 1 if same["unexplained"] else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("replicate")
    p.add_argument("--tables", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--copies", type=int, default=16)
    p.add_argument("--conf", default="conf/acl.yaml")
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    p = sub.add_parser("run")
    p.add_argument("--conf", required=True)
    p.add_argument("--tables", required=True)
    p.add_argument("--old", required=True, help="the old pipeline/export.py (e.g. main's)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--scratch", default="/tmp/export-speed")
    p.add_argument("--machine", default="")
    p.add_argument("--out")
    args = parser.parse_args()
    return {"replicate": replicate, "compare": compare, "run": run}[args.command](args) or 0


if __name__ == "__main__":
    sys.exit(main())
