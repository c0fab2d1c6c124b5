"""The floor of a Spark command (``mining_vs_pandas.py floor``: start the session ``ratio-spark mine`` starts, count
the sentences table, write one row, stop) for two checkouts side by side, interleaved: issue 28, item 5.

Each run is a fresh process tree with the checkout first on ``PYTHONPATH`` (one venv serves both); wall seconds
and the CPU seconds of the whole tree (the JVM included, sampled every 0.1 s) are recorded with the 1-minute load average before it.

    python benchmarks/floor_compare.py --before /work/before --after . --sentences data/tables/acl/sentences \\
        --repeats 3 --out benchmarks/results/floor_compare.json
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
from pathlib import Path

import psutil


def measure(command: list[str], checkout: Path) -> dict:
    """Run ``command`` in ``checkout`` (first on ``PYTHONPATH``): wall seconds, the CPU seconds of its whole process
    tree (the JVM included, sampled every 0.1 s) and the 1-minute load average before it."""
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    load = os.getloadavg()[0]
    log = tempfile.TemporaryFile(mode="w+")
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=checkout, stdout=log, stderr=subprocess.STDOUT, text=True)
    root, cpu, seen = psutil.Process(process.pid), {}, {}
    while process.poll() is None:  # CPU seconds of every process of the tree, the JVM too, as last seen
        try:
            for member in [root, *root.children(recursive=True)]:
                seen[member.pid] = member
                with member.oneshot():
                    times = member.cpu_times()
                    cpu[member.pid] = times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
        time.sleep(0.1)
    seconds = time.perf_counter() - started
    # The JVM may still be exiting when its parent has: wait for every process of the tree, so that the next
    # run does not start beside it (the earlier figures' "load before" of 2.4-2.6).
    psutil.wait_procs([p for p in seen.values() if p.pid != root.pid], timeout=60)
    if process.returncode != 0:
        log.seek(0)
        raise SystemExit(f"failed in {checkout}: {' '.join(command)}\n{log.read()[-3000:]}")
    return {"seconds": round(seconds, 2), "cpu_seconds": round(sum(cpu.values()), 2), "load_before": round(load, 2)}


def interleaved(before: Path, after: Path, repeats: int, run, extra: dict, out: Path | None) -> dict:
    """``run(label, checkout)`` for before and after in turn, ``repeats`` times; the runs, their medians and
    ``extra`` printed, written to ``out`` and returned."""
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for repeat in range(repeats):
        for label, checkout in (("before", before), ("after", after)):
            runs[label].append(run(label, checkout))
            print(label, repeat + 1, json.dumps(runs[label][-1]), flush=True)
    report = {"before": str(before.resolve()), "after": str(after.resolve()), **extra, "runs": runs,
              "median_seconds": {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()},
              "median_cpu_seconds": {k: statistics.median(r["cpu_seconds"] for r in v) for k, v in runs.items()}}
    print(json.dumps({k: report[k] for k in ("median_seconds", "median_cpu_seconds")}))
    if out:
        out.write_text(json.dumps(report, indent=2) + "\n")
    return report


def one_run(checkout: Path, sentences: str, settings: list[str]) -> dict:
    out = Path(tempfile.mkdtemp(prefix="floor-")) / "one_row"
    command = [sys.executable, str(checkout / "benchmarks" / "mining_vs_pandas.py"), "floor", "--sentences",
               str(Path(sentences).resolve()), "--conf", str(checkout / "conf" / "acl.yaml"), "--out", str(out)]
    for setting in settings:
        command += ["--set", setting]
    return measure(command, checkout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, type=Path, help="the checkout before the change")
    parser.add_argument("--after", default=".", type=Path, help="the checkout after it (default: this one)")
    parser.add_argument("--sentences", required=True, help="a sentences Delta table")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=["spark.conf.spark.driver.memory=768m"])
    parser.add_argument("--after-set", action="append", default=[],
                        help="a setting for the after side only (compare settings on one checkout: --before . --after .)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    interleaved(args.before, args.after, args.repeats,
                lambda label, checkout: one_run(checkout, args.sentences,
                                                args.set + (args.after_set if label == "after" else [])),
                {"settings": args.set, "after_settings": args.after_set}, args.out)


if __name__ == "__main__":
    main()
