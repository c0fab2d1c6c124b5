"""Write an evaluation to a results folder: tables people can read (Markdown) and load (CSV), plots (PNG),
the runs (TREC format) and a JSON summary.

```
<results>/
  results.md            MRR@10 per system and move, then one table per move (systems x all metrics, %), the
                        shape of the paper's Tables 1 and 8; bold = best in the column
  metrics.csv           long form: split, query_set, pool, pool_size, move, system, label, metric, value, queries
  results_wide.csv      full pool, one row per system, columns <move>/<metric> (%)
  per_query.csv         one row per (pool, move, system, query): gold id, gold rank (empty beyond the depth), metrics
  oracle.md, oracle.csv the oracle-pool table (the paper's Table 10 shape): full pool vs pools (a) and (b)
  recall_at_100.md/.csv first-stage Recall@100 and the reranking headroom
  overlap.md/.csv/.png  lexical overlap of the top k with the query, against the query-gold overlap (Figure 4)
  mrr10.png             MRR@10 per move and system
  runs/<system>/<move>.trec   the top-<depth> run of each system on the full pool (qid Q0 cid rank score system)
  summary.json          data counts, systems (prefixes, index, ANN recall), timings, headline MRR@10
```
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ratio_spark.evaluation.analyses import ORACLE_POOLS, first_stage_recall
from ratio_spark.evaluation.runner import MOVE_ORDER, EvaluationResult
from ratio_spark.evaluation.metrics import metric_names


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


def markdown_table(frame: pd.DataFrame, bold_max: bool = True, digits: int = 1) -> str:
    """A Markdown table; numeric columns formatted, the best of each column in bold."""
    columns = [str(c) for c in frame.columns]
    best = {}
    if bold_max:
        for c in frame.columns:
            if pd.api.types.is_numeric_dtype(frame[c]) and frame[c].nunique() > 1:
                best[str(c)] = frame[c].max()
    lines = ["| " + " | ".join([frame.index.name or ""] + columns) + " |",
             "|" + "---|" * (len(columns) + 1)]
    for idx, row in frame.iterrows():
        cells = []
        for c in frame.columns:
            value = row[c]
            if isinstance(value, float):
                text = "–" if pd.isna(value) else f"{value:.{digits}f}"
                if str(c) in best and not pd.isna(value) and value == best[str(c)]:
                    text = f"**{text}**"
            else:
                text = str(value)
            cells.append(text)
        lines.append("| " + " | ".join([str(idx)] + cells) + " |")
    return "\n".join(lines)


def _moves(result: EvaluationResult) -> list[str]:
    present = set(result.metrics["move"]) if not result.metrics.empty else set()
    return [m for m in MOVE_ORDER if m in present]


def _systems_order(result: EvaluationResult) -> list[str]:
    return [s["label"] for s in result.systems]


def per_move_table(result: EvaluationResult, move: str, pool: str = "full") -> pd.DataFrame:
    frame = result.metrics[(result.metrics["pool"] == pool) & (result.metrics["move"] == move)]
    table = frame.pivot_table(index="label", columns="metric", values="value", sort=False) * 100
    table = table[[m for m in metric_names(result.cutoffs) if m in table.columns]]
    table = table.reindex([label for label in _systems_order(result) if label in table.index])
    table.index.name = "system"
    return table


def wide_table(result: EvaluationResult) -> pd.DataFrame:
    parts = {move: per_move_table(result, move) for move in _moves(result)}
    wide = pd.concat(parts, axis=1)
    wide.columns = [f"{move}/{metric}" for move, metric in wide.columns]
    return wide


def _query_counts(result: EvaluationResult) -> dict[str, int]:
    full = result.metrics[result.metrics["pool"] == "full"]
    return full.groupby("move")["queries"].max().to_dict()


def results_markdown(result: EvaluationResult) -> str:
    counts = _query_counts(result)
    summary = result.data_summary
    head = [
        f"# Retrieval results: {result.split} split, {result.query_set} queries",
        "",
        f"Every query is ranked against the split's whole shared pool ({summary['pool_candidates']:,} candidates, "
        f"version `{summary['pool_version']}`), its own sentence excluded. Values in %. "
        f"R@k = Recall@k, M@k = MRR@k; M@10 is the primary metric. Bold: best in the column. "
        f"Source: `{summary['source']}`.",
        "",
        "Queries: " + ", ".join(f"{m} {counts.get(m, 0):,}" for m in MOVE_ORDER if m in summary["queries_by_move"]) + ".",
        "",
        "## MRR@10",
        "",
    ]
    mrr = result.table("M@10").reindex([s for s in _systems_order(result) if s in result.table("M@10").index])
    mrr.index.name = "system"
    body = [markdown_table(mrr), ""]
    for move in _moves(result):
        body += [f"## {move.capitalize()} ({counts.get(move, 0):,} queries)", "", markdown_table(per_move_table(result, move)), ""]
    empty = [m for m, n in summary["queries_by_move"].items() if n == 0]
    if empty:
        body += [f"No queries for: {', '.join(empty)} (nothing to score).", ""]
    return "\n".join(head + body)


def oracle_table(result: EvaluationResult, metrics: tuple[str, ...] = ("R@1", "R@10", "R@100", "M@10")) -> pd.DataFrame:
    frame = result.metrics[result.metrics["metric"].isin(metrics)]
    table = frame.pivot_table(index=["move", "pool", "pool_size", "label"], columns="metric", values="value", sort=False) * 100
    table = table[[m for m in metrics if m in table.columns]].reset_index()
    pool_rank = {"full": 0, "oracle_a": 1, "oracle_b": 2}
    table["_m"] = table["move"].map({m: i for i, m in enumerate(MOVE_ORDER)})
    table["_p"] = table["pool"].map(pool_rank)
    table["_s"] = table["label"].map({s: i for i, s in enumerate(_systems_order(result))})
    return table.sort_values(["_m", "_p", "_s"]).drop(columns=["_m", "_p", "_s"]).reset_index(drop=True)


def oracle_markdown(result: EvaluationResult) -> str:
    table = oracle_table(result)
    lines = [
        f"# Oracle move filtering: {result.split} split, {result.query_set} queries",
        "",
        "The same queries, ranked against the full shared pool and against two oracle pools that hold only "
        "candidates of the queried move (the paper's appendix F.2, Table 10): " + "; ".join(
            f"{k.replace('oracle_', 'pool ')} = {v}" for k, v in ORACLE_POOLS.items()) +
        ". Values in %. Scores are comparable only within one pool. BM25 is re-indexed on each pool.",
        "",
    ]
    for move in _moves(result):
        for pool in ("full", "oracle_a", "oracle_b"):
            part = table[(table["move"] == move) & (table["pool"] == pool)]
            if part.empty:
                continue
            name = {"full": "full pool", "oracle_a": "pool (a)", "oracle_b": "pool (b)"}[pool]
            lines += [f"## {move.capitalize()}: {name}, {int(part['pool_size'].iloc[0]):,} candidates", "",
                      markdown_table(part.drop(columns=["move", "pool", "pool_size"]).set_index("label").rename_axis("system")), ""]
    return "\n".join(lines)


def recall_markdown(result: EvaluationResult, k: int = 100) -> tuple[str, pd.DataFrame]:
    table = first_stage_recall(result.metrics, k)
    pivot = table.pivot_table(index="label", columns="move", values=f"R@{k}", sort=False) * 100
    pivot = pivot[[m for m in MOVE_ORDER if m in pivot.columns]]
    pivot = pivot.reindex([s for s in _systems_order(result) if s in pivot.index]).rename_axis("system")
    headroom = table.pivot_table(index="label", columns="move", values="rerank_headroom", sort=False) * 100
    headroom = headroom[[m for m in MOVE_ORDER if m in headroom.columns]]
    headroom = headroom.reindex([s for s in _systems_order(result) if s in headroom.index]).rename_axis("system")
    text = "\n".join([
        f"# First-stage Recall@{k}: {result.split} split, {result.query_set} queries",
        "",
        f"Share of queries (%) whose gold sentence is in the retriever's top {k} on the full pool. A reranker of "
        f"that top {k} cannot do better: its MRR@10 is at most Recall@{k}.",
        "",
        markdown_table(pivot),
        "",
        f"## Headroom for a reranker: Recall@{k} - MRR@10 (points)",
        "",
        markdown_table(headroom, bold_max=False),
        "",
    ])
    return text, table


def overlap_markdown(result: EvaluationResult) -> str:
    frame = result.overlap
    lines = [f"# Lexical overlap: {result.split} split, {result.query_set} queries", "",
             "Mean Jaccard similarity of stemmed, stopword-free unigrams between a query and its top-k candidates "
             "(the paper's F.1), and between a query and its gold sentence (last row).", ""]
    for move in _moves(result):
        part = frame[frame["move"] == move]
        systems = part[part["system"] != "gold"].pivot_table(index="label", columns="k", values="jaccard", sort=False)
        systems = systems.reindex([s for s in _systems_order(result) if s in systems.index])
        systems.columns = [f"k={k}" for k in systems.columns]
        gold = part[part["system"] == "gold"]["jaccard"]
        if not gold.empty:
            systems.loc["query-gold"] = [float(gold.iloc[0])] * len(systems.columns)
        lines += [f"## {move.capitalize()}", "", markdown_table(systems.rename_axis("system"), bold_max=False, digits=3), ""]
    return "\n".join(lines)


def plot_overlap(result: EvaluationResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    moves = _moves(result)
    fig, axes = plt.subplots(1, len(moves), figsize=(4.2 * len(moves), 3.6), squeeze=False, sharey=True)
    frame = result.overlap
    for ax, move in zip(axes[0], moves):
        part = frame[frame["move"] == move]
        for label in _systems_order(result):
            line = part[part["label"] == label].sort_values("k")
            if not line.empty:
                ax.plot(line["k"], line["jaccard"], marker="o", markersize=3, label=label)
        gold = part[part["system"] == "gold"]["jaccard"]
        if not gold.empty:
            ax.axhline(float(gold.iloc[0]), color="black", linestyle="--", linewidth=1, label="query-gold")
        ax.set_xscale("log")
        ks = sorted(part[part["k"] > 0]["k"].unique())
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_title(f"{move.capitalize()} ({int(part['queries'].max())} queries)")
        ax.set_xlabel("top k")
    axes[0][0].set_ylabel("mean Jaccard with the query")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.suptitle(f"Query-candidate lexical overlap by depth ({result.split}, {result.query_set} queries)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_mrr(result: EvaluationResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = result.table("M@10")
    table = table.reindex([s for s in _systems_order(result) if s in table.index])
    ax = table.T.plot.bar(figsize=(1.6 + 1.4 * len(table.columns) * max(1, len(table) / 3), 3.8), rot=0, width=0.8)
    ax.set_ylabel("MRR@10 (%)")
    ax.set_xlabel("")
    ax.set_title(f"MRR@10 on the full pool ({result.split}, {result.query_set} queries)", fontsize=10)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=130)
    plt.close(ax.figure)


def write_runs(result: EvaluationResult, folder: Path) -> int:
    written = 0
    for (system, move), rankings in result.rankings.items():
        path = folder / _slug(system) / f"{move}.trec"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as out:
            for qid in sorted(rankings):
                for rank, (cid, score) in enumerate(zip(rankings[qid].ids, rankings[qid].scores), start=1):
                    out.write(f"{qid} Q0 {cid} {rank} {score:.6f} {_slug(system)}\n")
        written += 1
    return written


def write_results(result: EvaluationResult, folder: str | Path, extra_summary: dict | None = None) -> dict[str, str]:
    """Write every table, plot and run; returns {what: path}."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}

    def put(name: str, text: str) -> None:
        (folder / name).write_text(text if text.endswith("\n") else text + "\n")
        written[name] = str(folder / name)

    result.metrics.to_csv(folder / "metrics.csv", index=False)
    written["metrics.csv"] = str(folder / "metrics.csv")
    result.per_query.to_csv(folder / "per_query.csv", index=False)
    written["per_query.csv"] = str(folder / "per_query.csv")
    if not result.metrics.empty:
        put("results.md", results_markdown(result))
        wide_table(result).to_csv(folder / "results_wide.csv", float_format="%.2f")
        written["results_wide.csv"] = str(folder / "results_wide.csv")
        plot_mrr(result, folder / "mrr10.png")
        written["mrr10.png"] = str(folder / "mrr10.png")
        if (result.metrics["pool"] != "full").any():
            put("oracle.md", oracle_markdown(result))
            oracle_table(result, tuple(metric_names(result.cutoffs))).to_csv(folder / "oracle.csv", index=False,
                                                                             float_format="%.2f")
            written["oracle.csv"] = str(folder / "oracle.csv")
        if 100 in result.cutoffs:
            text, table = recall_markdown(result)
            put("recall_at_100.md", text)
            table.to_csv(folder / "recall_at_100.csv", index=False, float_format="%.4f")
            written["recall_at_100.csv"] = str(folder / "recall_at_100.csv")
    if result.overlap is not None and (result.overlap["system"] != "gold").any():
        result.overlap.to_csv(folder / "overlap.csv", index=False, float_format="%.5f")
        written["overlap.csv"] = str(folder / "overlap.csv")
        put("overlap.md", overlap_markdown(result))
        plot_overlap(result, folder / "overlap.png")
        written["overlap.png"] = str(folder / "overlap.png")
    runs = write_runs(result, folder / "runs")
    written["runs"] = f"{folder / 'runs'} ({runs} files)"
    headline = {}
    if not result.metrics.empty:
        headline = {label: {move: round(v, 2) for move, v in row.items() if not pd.isna(v)}
                    for label, row in result.table("M@10").iterrows()}
    summary = {"split": result.split, "query_set": result.query_set, "data": result.data_summary,
               "mrr_at_10_percent": headline, "systems": result.systems, "timings_seconds": result.timings,
               **(extra_summary or {})}
    put("summary.json", json.dumps(summary, indent=2, default=str))
    return written
