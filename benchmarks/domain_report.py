"""A second domain against the first: yields per move beside another corpus's and the paper's, the top markers
per move, and a seeded sample of pairs per move for judging by reading (docs/domains.md).

Plain Python over the Delta tables (no JVM). The sample is written to ``--judgements`` with an empty
``judgement`` column the first time; a reader fills in ``yes`` (the second sentence is a real Address /
Broaden / Specify of the first), ``no`` or ``unclear`` and a note, and a rerun keeps those rows (matched by
pair_id) and counts them.

    .venv/bin/python benchmarks/domain_report.py --tables /work/data/jats/tables/elife --name eLife \\
        --against benchmarks/results/acl/yields.json --against-name ACL --per-move 20 --seed 2016 \\
        --judgements benchmarks/results/elife/judged_pairs.tsv --out benchmarks/results/elife/domain
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
from pathlib import Path

import pandas as pd

from ratio_spark.core.schema import MOVES
from ratio_spark.evaluation.tables import read_table

# The paper's yields per 1,000 consecutive pairs (docs/mining.md, "The figures").
PAPER_YIELD = {"specify": 7.6, "address": 0.61, "broaden": 0.043}
JUDGEMENT_COLUMNS = ["pair_id", "move", "marker", "paper_id", "query_text_original", "gold_text_original",
                     "judgement", "note"]


def table(root: Path, name: str) -> pd.DataFrame:
    return read_table(str(root / name), name).to_pandas()


def yields(root: Path) -> dict[str, dict]:
    """Move yields from a tables root, or from a JSON file of figures already reported (a corpus whose tables
    are gone: ``{"source": ..., "examined": N, "pairs": {move: n}}``)."""
    if root.is_file():
        recorded = json.loads(root.read_text(encoding="utf-8"))
        examined = int(recorded["examined"])
        return {move: {"pairs": int(n), "per_1000": round(1000 * int(n) / examined, 3), "examined": examined}
                for move, n in recorded["pairs"].items()}
    rows = table(root, "stats_yield")
    rows = rows[rows["role"] == "move"]
    return {r["label"]: {"pairs": int(r["pairs"]), "per_1000": round(float(r["pairs_per_1000"]), 3),
                         "examined": int(r["consecutive_pairs_examined"])} for _, r in rows.iterrows()}


def top_markers(root: Path, n: int) -> dict[str, list[dict]]:
    rows = table(root, "stats_marker_matches")
    rows = rows[rows["role"] == "move"].sort_values(["pairs", "marker_entry"], ascending=[False, True])
    return {move: [{"marker": r["marker_entry"], "pairs": int(r["pairs"]), "papers": int(r["papers"]),
                    "source": r["marker_source"]} for _, r in rows[rows["label"] == move].head(n).iterrows()]
            for move in MOVES}


def sample_pairs(root: Path, per_move: int, seed: int) -> pd.DataFrame:
    """``per_move`` pairs of each move that became queries, ordered by a seeded hash of the pair id."""
    pairs = table(root, "mined_pairs")
    queries = set(table(root, "queries")["pair_id"])
    pairs = pairs[(pairs["role"] == "move") & pairs["pair_id"].isin(queries)].copy()
    pairs["_key"] = [hashlib.sha256(f"{seed}:{p}".encode()).hexdigest() for p in pairs["pair_id"]]
    picked = pairs.sort_values("_key").groupby("move", group_keys=False).head(per_move)
    return picked.sort_values(["move", "_key"])[JUDGEMENT_COLUMNS[:6]]


def merge_judgements(sample: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The sample with the judgements already written in ``path`` (by pair_id); new rows get empty ones."""
    done = {}
    if path.exists():
        with path.open(newline="", encoding="utf-8") as handle:
            done = {row["pair_id"]: row for row in csv.DictReader(handle, delimiter="\t")}
    sample = sample.copy()
    sample["judgement"] = [done.get(p, {}).get("judgement", "") for p in sample["pair_id"]]
    sample["note"] = [done.get(p, {}).get("note", "") for p in sample["pair_id"]]
    path.parent.mkdir(parents=True, exist_ok=True)
    sample.to_csv(path, sep="\t", index=False, quoting=csv.QUOTE_MINIMAL)
    return sample


def tally(judged: pd.DataFrame) -> dict[str, dict[str, int]]:
    return {move: {k: int(v) for k, v in group["judgement"].replace("", "unjudged").value_counts().items()}
            for move, group in judged.groupby("move")}


def markdown(report: dict) -> str:
    name, other = report["name"], report["against_name"]
    lines = [f"# {name}: yields, markers and judged pairs", "", f"Yield per 1,000 consecutive pairs ({name}: "
             f"{report['yields'][MOVES[0]]['examined']:,} pairs examined; {other}: "
             f"{report['against_yields'][MOVES[0]]['examined']:,}):", "",
             f"| move | {name} pairs | {name} per 1,000 | {other} pairs | {other} per 1,000 | paper per 1,000 |",
             "|---|---:|---:|---:|---:|---:|"]
    for move in ("specify", "address", "broaden"):
        mine, theirs = report["yields"].get(move, {}), report["against_yields"].get(move, {})
        lines.append(f"| {move} | {mine.get('pairs', 0):,} | {mine.get('per_1000', 0)} | {theirs.get('pairs', 0):,} | "
                     f"{theirs.get('per_1000', 0)} | {PAPER_YIELD[move]} |")
    for move, markers in report["top_markers"].items():
        lines += ["", f"Top markers, {move}: " + ", ".join(f"{m['marker']} {m['pairs']}" for m in markers)]
    lines += ["", "Judged pairs (a real relation of the move: yes / no / unclear):", ""]
    for move, counts in report["judgements"].items():
        lines.append(f"- {move}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=Path, required=True, help="tables root of the domain")
    parser.add_argument("--name", default="domain")
    parser.add_argument("--against", type=Path, required=True, help="tables root of the corpus to compare with, or a JSON file of its reported yields")
    parser.add_argument("--against-name", default="other")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--per-move", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2016)
    parser.add_argument("--judgements", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.md")
    args = parser.parse_args()
    judged = merge_judgements(sample_pairs(args.tables, args.per_move, args.seed), args.judgements)
    report = {
        "name": args.name, "against_name": args.against_name, "tables": str(args.tables), "against": str(args.against),
        "yields": yields(args.tables), "against_yields": yields(args.against), "paper_yields": PAPER_YIELD,
        "top_markers": top_markers(args.tables, args.top), "per_move": args.per_move, "seed": args.seed,
        "judgements": tally(judged),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
