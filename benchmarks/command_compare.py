"""One ``ratio-spark`` command from two checkouts side by side, interleaved (issue 28: a stage before and after a
change): wall seconds and CPU seconds of the whole process tree per run, their medians, the stage's own phase
times from its summary (``--summary-json``). Each run gets a fresh ``tables.root`` (a copy of ``--tables`` when given,
so a stage that reads earlier tables finds them).

    git worktree add /work/before <commit>
    python benchmarks/command_compare.py --before /work/before --after . --repeats 2 --tables /work/data/acl/tables \\
        --out benchmarks/results/ingest_compare.json -- ingest --conf conf/acl.yaml --set inputs.0.path=/work/data/corpora/acl
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from floor_compare import interleaved, measure


def one_run(checkout: Path, arguments: list[str], tables: Path | None) -> dict:
    work = Path(tempfile.mkdtemp(prefix="command-compare-"))
    root = work / "tables"
    if tables is not None:
        shutil.copytree(tables, root)
    summary = work / "summary.json"
    command = [sys.executable, "-m", "ratio_spark.cli.main", *arguments, "--set", f"tables.root={root}",
               "--summary-json", str(summary)]
    run = measure(command, checkout)
    stages = json.loads(summary.read_text()) if summary.exists() else []
    run["phase_seconds"] = {s.get("stage"): s.get("phase_seconds") for s in (stages if isinstance(stages, list) else [stages])}
    shutil.rmtree(work, ignore_errors=True)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, type=Path)
    parser.add_argument("--after", default=".", type=Path)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--tables", type=Path, help="tables the command reads (copied for each run)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="-- then the ratio-spark command and its options")
    args = parser.parse_args()
    arguments = args.arguments[1:] if args.arguments[:1] == ["--"] else args.arguments
    interleaved(args.before, args.after, args.repeats, lambda label, checkout: one_run(checkout, arguments, args.tables),
                {"command": arguments}, args.out)


if __name__ == "__main__":
    main()
