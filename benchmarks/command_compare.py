"""One ``ratio-spark`` command from two checkouts side by side, interleaved (issue 28: a stage before and after a
change): wall seconds and CPU seconds of the whole process tree per run, their medians, the stage's own phase
times from its summary (``--summary-json``), and a fingerprint of every table it wrote (rows, and the sum of a
64-bit hash of every row: order-free); the report says whether before and after wrote the same rows. Each run gets
a fresh ``tables.root`` (a copy of ``--tables`` when given, so a stage that reads earlier tables finds them).

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


def fingerprints(root: Path, given: Path | None) -> dict[str, list[int]]:
    """Each Delta table under ``root`` that the command wrote (not a copy of ``given``'s, unchanged) -> [rows, the
    sum mod 2**64 of a hash of every row] (pandas' row hash: the same rows in any order, any file layout)."""
    import pandas as pd

    from ratio_spark.core.delta import read_delta

    out = {}
    for log in sorted(root.glob("*/_delta_log")):
        table = log.parent
        if given is not None and (given / table.name / "_delta_log").exists() and \
                sorted(p.name for p in log.iterdir()) == sorted(p.name for p in (given / table.name / "_delta_log").iterdir()):
            continue
        frame = read_delta(table).to_pandas()
        frame = frame[sorted(frame.columns)].astype(str)  # one spelling per value whatever the file's types
        out[table.name] = [len(frame), int(pd.util.hash_pandas_object(frame, index=False).sum())]
    return out


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
    run["tables"] = fingerprints(root, tables)
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
    report = interleaved(args.before, args.after, args.repeats,
                         lambda label, checkout: one_run(checkout, arguments, args.tables), {"command": arguments}, None)
    written = {json.dumps(run["tables"], sort_keys=True) for runs in report["runs"].values() for run in runs}
    report["same_tables"] = len(written) == 1
    print("before and after wrote the same rows" if report["same_tables"] else
          "the runs wrote DIFFERENT rows: " + "; ".join(sorted(written)), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
