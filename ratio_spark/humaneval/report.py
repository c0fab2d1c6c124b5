"""Write a study's analysis to a folder: the paper's Tables 2, 11 and 12 and the agreement as Markdown and
CSV, the per-annotation and per-query rows, a PNG, and a manifest.

```
<out>/report.md            every table with what it means
      table2.csv           move, system, queries, HR, P, MRR (%), preferred, tie, p_HR, p_P, p_MRR
      table11.csv          move, system, queries, HR, MRR, gold, gold_useful, beyond, MRR_gold (%), ratios
      table12.csv          move, system, useful, cross (%), papers, all_cross (%)
      agreement.csv        move, query_pairs, candidate_pairs, label/preference agreement (%) and kappa
      per_annotation.csv   one row per (complete assignment, system)
      per_query.csv        one row per (query, system): the mean over its annotations
      preferences.csv      one row per complete assignment: the list chosen, mapped back to its system
      humaneval.png        HR, P and MRR per move and system, with the permutation test's p-values
      manifest.json        the study (file hash, split, seed, runs and their hashes), counts, test settings, code commit
```
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from ratio_spark.evaluation.reports import frame_markdown
from ratio_spark.humaneval.analysis import ALL, METRICS, Analysis

NAMES = {"HR": "HR", "P": "P", "MRR": "MRR", "gold": "Gold", "gold_useful": "Gold useful", "beyond": "Beyond",
         "MRR_gold": "MRR gold"}


def _pct(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.1f}"


def _p(value: float) -> str:
    return "–" if pd.isna(value) else ("<0.001" if value < 0.001 else f"{value:.3f}")


def _pair(a: float, b: float, fmt=_pct) -> list[str]:
    """Two systems' values, the higher in bold (as the paper marks the better of Baseline and Tuned)."""
    cells = [fmt(a), fmt(b)]
    if not (pd.isna(a) or pd.isna(b)) and a != b:
        best = 0 if a > b else 1
        cells[best] = f"**{cells[best]}**"
    return cells


def _row_label(move: str, queries: int) -> str:
    return f"{'All' if move == ALL else move.capitalize()} ({queries})"


def _wide(table: pd.DataFrame, analysis: Analysis, columns: list[str], extra=None) -> pd.DataFrame:
    first, second = analysis.systems
    rows = {}
    for move, group in table.groupby("move", sort=False):
        a, b = group.set_index("system").loc[first], group.set_index("system").loc[second]
        cells = {}
        for column in columns:
            x, y = _pair(a[column], b[column])
            cells[f"{NAMES.get(column, column)} {first}"], cells[f"{NAMES.get(column, column)} {second}"] = x, y
            if extra:
                cells.update(extra(column, a, b))
        rows[_row_label(move, int(a.get("queries", 0)))] = cells
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "move (queries)"
    return frame


def table2_markdown(analysis: Analysis, table: pd.DataFrame) -> str:
    first, second = analysis.systems
    wide = _wide(table, analysis, list(METRICS), extra=lambda m, a, b: {f"p {NAMES[m]}": _p(a[f"p_{m}"])})
    prefs = table.set_index(["move", "system"])
    for label, move in zip(wide.index, table["move"].unique()):
        wide.loc[label, f"Pref. {first}"], wide.loc[label, f"Pref. {second}"] = _pair(
            prefs.loc[(move, first), "preferred"], prefs.loc[(move, second), "preferred"], fmt=lambda v: str(int(v)))
        wide.loc[label, "Tie"] = str(int(prefs.loc[(move, first), "tie"]))
    return frame_markdown(wide, bold_max=False)


def table11_markdown(analysis: Analysis, table: pd.DataFrame) -> str:
    wide = _wide(table, analysis, ["HR", "MRR", "gold", "gold_useful", "beyond", "MRR_gold"])
    return frame_markdown(wide, bold_max=False)


def table12_markdown(analysis: Analysis, table: pd.DataFrame) -> str:
    first, second = analysis.systems
    rows = {}
    for move, group in table.groupby("move", sort=False):
        cells = {}
        for system in (first, second):
            row = group.set_index("system").loc[system]
            cells.update({f"Useful {system}": str(int(row["useful"])), f"Cross {system}": _pct(row["cross"]),
                          f"Papers {system}": str(int(row["papers"])), f"All {system}": _pct(row["all_cross"])})
        rows["All" if move == ALL else move.capitalize()] = cells
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "move"
    return frame_markdown(frame, bold_max=False)


def plot(analysis: Analysis, table: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    moves = list(table["move"].unique())
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4.2 * len(METRICS), 3.6), squeeze=False)
    x = np.arange(len(moves))
    for ax, metric in zip(axes[0], METRICS):
        for i, system in enumerate(analysis.systems):
            values = [table[(table["move"] == m) & (table["system"] == system)][metric].iloc[0] for m in moves]
            ax.bar(x + (i - 0.5) * 0.38, values, width=0.38, label=system)
        for j, move in enumerate(moves):
            row = table[table["move"] == move]
            ax.annotate(f"p={_p(row[f'p_{metric}'].iloc[0])}", (x[j], row[metric].max()), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(x, [f"{m}\n({int(table[table['move'] == m]['queries'].iloc[0])})" for m in moves])
        ax.set_title(f"{metric}@{analysis.depth} (%)")
        ax.set_ylim(0, 112)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", fontsize=8, ncol=len(labels))
    fig.suptitle("Human evaluation: useful candidates in each system's list (paired permutation test)", fontsize=10,
                 x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_report(analysis: Analysis, meta: dict, study_path: str | Path, out: str | Path,
                 systems_rows: list[dict] | None = None) -> dict[str, str]:
    """Write every table, the plot and the manifest into ``out``; returns {name: path}."""
    from ratio_spark.humaneval.assign import code_commit

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}

    def csv(name: str, frame: pd.DataFrame) -> None:
        frame.to_csv(out / name, index=False, float_format="%.4f")
        written[name] = str(out / name)

    t2, t11, t12, agreement = analysis.table2(), analysis.table11(), analysis.table12(), analysis.agreement()
    csv("table2.csv", t2)
    csv("table11.csv", t11)
    csv("table12.csv", t12)
    csv("agreement.csv", agreement)
    csv("per_annotation.csv", analysis.per_annotation)
    csv("per_query.csv", analysis.per_query)
    csv("preferences.csv", analysis.preferences)
    plot(analysis, t2, out / "humaneval.png")
    written["humaneval.png"] = str(out / "humaneval.png")

    first, second = analysis.systems
    depth = analysis.depth
    c = analysis.counts
    ratio = t11[t11["move"] == ALL].set_index("system")["MRR_all_over_gold"]
    gold_rate = t11[t11["move"] == ALL].set_index("system")["gold_marked_useful_rate"]
    ratios = [f"{ratio[s]:.2f}× the gold-only MRR for {s}" for s in analysis.systems if not pd.isna(ratio[s])]
    ratio_line = f"Over all queries, MRR with every useful candidate counted is {' and '.join(ratios)}." if ratios else ""
    lines = [
        f"# Human evaluation: {first} vs {second} ({meta.get('split')} split)",
        "",
        f"{c['complete']} complete annotations of {c['queries_analysed']} queries; {c['incomplete']} of "
        f"{c['assignments']} assignments are incomplete and left out. Queries labelled more than once: "
        f"{c['queries_labelled_twice_or_more']} (their annotations' scores are averaged). "
        f"Annotators saw each system's top {depth} as List A and List B in a recorded random order, blind to the "
        "system. A candidate marked useful counts as relevant. Values in %, mean over queries; the number of "
        "queries is in parentheses. Bold: the better of the two systems.",
        "",
        f"## Table 2: useful candidates in the top {depth}",
        "",
        f"HR = a useful candidate in the top {depth}; P = useful candidates / {depth}; MRR = reciprocal rank of the "
        f"first useful candidate. p: paired sign-flip permutation test over queries ({analysis.permutations:,} "
        f"permutations, seed {analysis.seed}; exact when every sign vector fits) of {second} − {first}. "
        "Pref.: annotations that preferred the system's list; Tie: annotations that preferred neither.",
        "",
        table2_markdown(analysis, t2),
        "",
        "## Table 11: useful candidates and the gold sentence",
        "",
        "HR and MRR with every useful candidate counted; Gold: the gold sentence is in the list (gold-only HR); "
        "Gold useful: it is, and was marked useful; Beyond: a useful candidate other than the gold is in the list; "
        "MRR gold: gold-only MRR, as the silver metrics.",
        "",
        table11_markdown(analysis, t11),
        "",
        ratio_line,
        "Annotators marked the gold sentence useful in "
        + " and ".join(f"{_pct(gold_rate[s])}% of the annotations where it was in {s}'s list" for s in analysis.systems)
        + ".",
        "",
        "## Table 12: where the useful non-gold candidates come from",
        "",
        "Useful: useful candidates other than the gold, pooled over annotations; Cross: % of them from a paper other "
        "than the query's; Papers: distinct papers among them; All: % of all non-gold candidates in the list from "
        "another paper. A candidate's paper is the paper of the pool row kept for its text.",
        "",
        table12_markdown(analysis, t12),
        "",
        "## Inter-annotator agreement",
        "",
    ]
    if int(agreement["query_pairs"].max() or 0) == 0:
        lines.append("No query was completed by two annotators (assign with --overlap to measure agreement).")
    else:
        shown = pd.DataFrame({
            "query pairs": agreement["query_pairs"].astype(str), "candidate pairs": agreement["candidate_pairs"].astype(str),
            "label agreement (%)": agreement["label_agreement"].map(_pct),
            "label kappa": agreement["label_kappa"].map(lambda v: "–" if pd.isna(v) else f"{v:.2f}"),
            "preference agreement (%)": agreement["preference_agreement"].map(_pct),
            "preference kappa": agreement["preference_kappa"].map(lambda v: "–" if pd.isna(v) else f"{v:.2f}"),
        }).set_axis([("All" if m == ALL else m.capitalize()) for m in agreement["move"]])
        shown.index.name = "move"
        lines += ["Pairs of annotations of the same query: usefulness of each shared candidate and the list preferred "
                  "(by system); % agreement and Cohen's kappa.", "", frame_markdown(shown, bold_max=False)]
    lines += ["", "![HR, P and MRR per move](humaneval.png)", ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    written["report.md"] = str(out / "report.md")

    manifest = {
        "study": {"path": str(study_path), "sha256": _sha256(Path(study_path)), **{k: meta.get(k) for k in (
            "split", "moves", "per_move", "stratify_by", "seed", "depth", "assignment", "overlap", "query_set",
            "source", "created_at", "code_commit")}},
        "systems": systems_rows or [],
        "counts": analysis.counts,
        "permutation_test": {"permutations": analysis.permutations, "seed": analysis.seed,
                             "difference": f"{second} - {first}"},
        "code_commit": code_commit(),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
    written["manifest.json"] = str(out / "manifest.json")
    return written
