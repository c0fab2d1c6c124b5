"""The test suite like for like (issue 11): the suite before the layout work against today's, interleaved.

    git worktree add ../wt-base 56e333c && (cd ../wt-base && scripts/setup.sh)   # the suite before, its own venv
    python benchmarks/suite_like_for_like.py --before ../wt-base --pairs 2

Each pair runs the suite before (``python -m pytest`` in the worktree, one process: it had no xdist) and then
the tests of today's suite that carry the same names (``benchmarks/suite_like_for_like.ids``; as
``scripts/test.sh`` runs them: ``-n 2 --dist loadfile``), one after the other, never side by side. For each run:
pytest's own wall time and the machine's CPU time from ``/proc/stat`` (busy, idle and stolen: on a shared
virtual machine the steal shows how much the neighbours took). Results go to
``benchmarks/results/suite_like_for_like.json``. Runs of the same code differ by a fifth from one day to the
next on a shared machine: compare the runs of one call, not runs of different days.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IDS = REPO / "benchmarks" / "suite_like_for_like.ids"
RESULTS = REPO / "benchmarks" / "results" / "suite_like_for_like.json"


def _cpu() -> list[int]:
    """The machine's CPU ticks: user, nice, system, idle, iowait, irq, softirq, steal."""
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]


def _run(label: str, command: list[str], cwd: Path, venv_python: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(cwd), "PYSPARK_PYTHON": str(venv_python), "SPARK_LOCAL_IP": "127.0.0.1",
           "RATIO_REQUIRE_ALL": "1"}
    before, started = _cpu(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    ticks = [b - a for a, b in zip(before, _cpu())]
    hz = os.sysconf("SC_CLK_TCK")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    wall = re.search(r" in ([0-9.]+)s", last)
    result = {"label": label, "started": started, "summary": last, "pytest_seconds": float(wall.group(1)) if wall else None,
              "cpu_busy_seconds": round((sum(ticks) - ticks[3] - ticks[4]) / hz, 1),
              "cpu_total_seconds": round(sum(ticks) / hz, 1), "cpu_steal_seconds": round(ticks[7] / hz, 1),
              "returncode": done.returncode}
    print(json.dumps(result), flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a worktree of the suite before, set up with its venv")
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    before = args.before.resolve()
    for python in (before / ".venv/bin/python", REPO / ".venv/bin/python"):
        if not python.exists():
            raise SystemExit(f"suite_like_for_like: {python} does not exist: run scripts/setup.sh in {python.parents[2]}")
    runs = []
    for _ in range(args.pairs):
        runs.append(_run("before", [str(before / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                         before, before / ".venv/bin/python"))
        runs.append(_run("after", [str(REPO / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   "-n", "2", "--dist", "loadfile", f"@{IDS}"], REPO, REPO / ".venv/bin/python"))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"command": " ".join(sys.argv), "runs": runs}, indent=2) + "\n")
    return 0 if all(r["returncode"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
