"""Precision of reference resolution on a hand-verifiable sample (docs/inspire.md).

Draw a seeded sample of resolved entries from a ``references`` table, side by side with the corpus paper
each was resolved to, to be judged by a person (``correct`` = 1 when the entry and the paper are the same
work, 0 otherwise); then score the judged file: precision per rule and overall, with Wilson intervals.

    python benchmarks/inspire_resolution_sample.py draw --tables /work/data/inspire/acl/tables --n 100 \\
        --out benchmarks/results/inspire/resolution_sample.csv
    # fill the `correct` column by hand, then
    python benchmarks/inspire_resolution_sample.py score benchmarks/results/inspire/resolution_sample.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import sys
from pathlib import Path

COLUMNS = ["paper_id", "entry_id", "resolved_by", "entry_title", "entry_year", "entry_venue", "entry_authors",
           "resolved_paper_id", "paper_title", "paper_year", "correct", "note"]


def draw(tables: Path, n: int, seed: int, out: Path) -> None:
    from deltalake import DeltaTable

    refs = DeltaTable(str(tables / "references")).to_pandas(
        columns=["paper_id", "entry_id", "title", "year", "venue", "authors", "resolved_paper_id", "resolved_by"])
    papers = DeltaTable(str(tables / "papers")).to_pandas(columns=["paper_id", "title", "pub_date"]).set_index("paper_id")
    resolved = refs[refs.resolved_paper_id.notna()].sort_values(["paper_id", "entry_id"])
    rows = resolved.to_dict("records")
    sample = sorted(random.Random(seed).sample(rows, min(n, len(rows))), key=lambda r: (r["paper_id"], r["entry_id"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for r in sample:
            paper = papers.loc[r["resolved_paper_id"]]
            writer.writerow({
                "paper_id": r["paper_id"], "entry_id": r["entry_id"], "resolved_by": r["resolved_by"],
                "entry_title": r["title"], "entry_year": r["year"], "entry_venue": r["venue"],
                "entry_authors": "; ".join(list(r["authors"])[:4]), "resolved_paper_id": r["resolved_paper_id"],
                "paper_title": paper.title, "paper_year": paper.pub_date.year, "correct": "", "note": "",
            })
    print(f"{len(sample)} of {len(rows)} resolved entries -> {out}; judge the `correct` column, then run `score`")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def score(path: Path) -> None:
    rows = list(csv.DictReader(open(path, encoding="utf-8")))
    unjudged = [r for r in rows if r["correct"] not in ("0", "1")]
    if unjudged:
        sys.exit(f"{len(unjudged)} rows have no 0/1 in `correct` (first: {unjudged[0]['paper_id']} {unjudged[0]['entry_id']})")
    groups: dict[str, list[int]] = {"all": []}
    for r in rows:
        groups.setdefault(r["resolved_by"], []).append(int(r["correct"]))
        groups["all"].append(int(r["correct"]))
    print("| rule | judged | correct | precision | 95% Wilson interval |\n|---|---|---|---|---|")
    for name, values in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        low, high = wilson(sum(values), len(values))
        print(f"| {name} | {len(values)} | {sum(values)} | {sum(values) / len(values):.3f} | [{low:.3f}, {high:.3f}] |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("draw")
    p.add_argument("--tables", required=True, type=Path)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--out", required=True, type=Path)
    p = sub.add_parser("score")
    p.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.command == "draw":
        draw(args.tables, args.n, args.seed, args.out)
    else:
        score(args.path)


if __name__ == "__main__":
    main()
