"""The pools stage's wall time, and a row-for-row comparison of its outputs between two runs (issue 13 item 3).

    # once per table root: the mine stage's outputs that pools reads (ACL-FINAL is read-only)
    mkdir -p /work/data/poolspeed/after/tables
    cp -r /work/data/acl-final/tables/{mined_pairs,stats_mining} /work/data/poolspeed/after/tables/
    # medians of 3 (`ratio-spark pools`, each run its own process; the load average is recorded beside each)
    python benchmarks/pools_speed.py run --conf conf/acl.yaml --tables /work/data/poolspeed/after/tables --runs 3
    # the outputs of two roots (e.g. main's code and this code) row for row: exit 1 when any table differs
    python benchmarks/pools_speed.py compare /work/data/poolspeed/before/tables /work/data/poolspeed/after/tables

``compare`` reads with the project's pyspark-free Delta reader (``core.delta``), so it starts no JVM. It compares
each table the pools stage writes (``queries``, ``candidates``, every ``stats_*`` table, the pools rows of ``drops``
and ``stats_drops``) as a multiset of rows: the same rows, each as often, whatever the file layout.
Results of ``run`` go to ``benchmarks/results/pools_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "pools_speed.json"
# What the pools stage writes; ``drops`` and ``stats_drops`` are shared with other stages: only the pools rows count.
TABLES = ("queries", "candidates", "stats_split_sizes", "stats_marker_matches", "stats_marker_sources", "stats_yield",
          "drops", "stats_drops")


def _rows(location: Path, table: str, stage: str) -> Counter:
    from ratio_spark.core.delta import read_delta

    filters = [("stage", "=", stage)] if table in ("drops", "stats_drops") else None
    rows = read_delta(location / table, filters=filters).to_pylist()
    return Counter(json.dumps(row, sort_keys=True, default=str) for row in rows)


def compare(before: Path, after: Path, tables: tuple[str, ...] = TABLES, stage: str = "pools") -> int:
    """Print, per table, the rows of each root and how many differ; 1 when any table differs. ``drops`` and
    ``stats_drops`` count only the rows of ``stage`` (``benchmarks/mining_vs_pandas.py compare`` uses it for mine)."""
    differs = False
    for table in tables:
        a, b = _rows(before, table, stage), _rows(after, table, stage)
        only_before, only_after = a - b, b - a
        same = not only_before and not only_after
        differs |= not same
        print(f"{table:22s} before {sum(a.values()):7d} rows, after {sum(b.values()):7d} rows: "
              + ("identical" if same else f"DIFFERENT ({sum(only_before.values())} only before, "
                                             f"{sum(only_after.values())} only after)"))
        for row in list(only_before)[:2]:
            print(f"    only before: {row[:300]}")
        for row in list(only_after)[:2]:
            print(f"    only after:  {row[:300]}")
    return 1 if differs else 0


def _tree_cpu_seconds(process: subprocess.Popen) -> float:
    """Wait for ``process``; the CPU seconds (user + system) of it and every descendant (the JVM, the Python
    workers), each process's last sample taken every 0.2 s: a figure that the machine's load hardly changes."""
    import psutil

    root, last = psutil.Process(process.pid), {}
    while process.poll() is None:
        for proc in [root, *root.children(recursive=True)]:
            try:
                times = proc.cpu_times()
                last[proc.pid] = times.user + times.system
            except psutil.Error:  # ended between the listing and the sample
                pass
        time.sleep(0.2)
    return sum(last.values())


def run(conf: str, tables: str, runs: int, extra: list[str]) -> dict:
    """``ratio-spark pools`` ``runs`` times; the stage's seconds, phases and the load average of each run."""
    command = [str(Path(sys.executable).with_name("ratio-spark")), "pools", "--conf", conf,
               "--set", f"tables.root={tables}", *[a for s in extra for a in ("--set", s)]]
    measured = []
    for i in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            summary_json = Path(tmp) / "summary.json"
            load_before, started = os.getloadavg()[0], time.time()
            process = subprocess.Popen([*command, "--summary-json", str(summary_json)], cwd=REPO,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cpu_seconds = _tree_cpu_seconds(process)
            if process.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed with exit code {process.returncode}")
            wall, load_after = time.time() - started, os.getloadavg()[0]
            (summary,) = json.loads(summary_json.read_text())
        measured.append({"stage_seconds": summary["seconds"], "command_seconds": round(wall, 1),
                         "cpu_seconds_process_tree": round(cpu_seconds, 1),
                         "load_1min_before": round(load_before, 2), "load_1min_after": round(load_after, 2),
                         "phase_seconds": summary["phase_seconds"]})
        print(f"run {i + 1}: {measured[-1]}", flush=True)
    result = {
        "command": " ".join(command),
        "runs": measured,
        "median_stage_seconds": statistics.median(m["stage_seconds"] for m in measured),
        "median_command_seconds": statistics.median(m["command_seconds"] for m in measured),
        "median_cpu_seconds_process_tree": statistics.median(m["cpu_seconds_process_tree"] for m in measured),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="time `ratio-spark pools` on a table root")
    r.add_argument("--conf", required=True)
    r.add_argument("--tables", required=True, help="tables.root holding mined_pairs and stats_mining (written into)")
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--label", default="pools", help="the key of this measurement in the results file")
    r.add_argument("--set", dest="extra", action="append", default=[], help="more config overrides")
    c = sub.add_parser("compare", help="compare the pools stage's outputs of two table roots row for row")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "compare":
        return compare(args.before, args.after)
    result = run(args.conf, args.tables, args.runs, args.extra)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[args.label] = result
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
