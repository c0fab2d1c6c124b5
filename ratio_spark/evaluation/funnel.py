"""Stage-wise evaluation of a retrieval pipeline (the Inspire paper's funnel): where was the gold lost?

A pipeline is a first stage alone, or a first stage whose top ``window`` candidates a reranker reorders.
Per pipeline and move, over **all** queries (a query whose answer failed, or that was never sent to the
reranker, counts as a miss, never as skipped):

* **exposed**  = share of queries whose gold is in the first stage's top ``window`` (Recall@window):
  what any later stage can work with. For a first stage alone the window is the same, so the two
  pipelines of one retriever share their exposure.
* **selected** = share of queries whose gold is in the final top ``cutoff`` (Recall@10).
* **MRR@10**, **nDCG@10** of the final ranking (binary gain, one gold).
* **gain kept** = selected / exposed: of the queries whose gold was exposed, the share kept in the top
  10 (the Ratio paper's "for these queries the reranker ranks it in its top 10 in 86.6%").
* **rank quality** = nDCG@10 / selected: how well the kept golds are ordered (1 = all at rank 1).

The nesting nDCG@10 <= selected <= exposed holds whenever the final top 10 is drawn from the window;
``funnel_table`` checks it and fails loudly otherwise. Beside these failure-as-zero figures the table
gives the Ratio paper's view, MRR@10 and nDCG@10 over the exposed queries only (labelled
``*_exposed_only``), since the paper reports reranking on queries whose gold is in the top 100.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

FUNNEL_COLUMNS = [
    "move", "system", "label", "first_stage", "window", "queries", "exposed_queries", "exposed", "selected",
    "mrr_at_10", "ndcg_at_10", "gain_kept", "rank_quality", "mrr_at_10_exposed_only", "ndcg_at_10_exposed_only",
    "not_sent", "failed", "repaired",
]


def _reciprocal(rank: float, cutoff: int) -> float:
    return 1.0 / rank if not math.isnan(rank) and rank <= cutoff else 0.0


def _ndcg(rank: float, cutoff: int) -> float:
    return 1.0 / math.log2(rank + 1) if not math.isnan(rank) and rank <= cutoff else 0.0


def funnel_table(per_query: pd.DataFrame, systems: list[dict], window: int, cutoff: int = 10) -> pd.DataFrame:
    """One row per (move, pipeline) from per-query gold ranks.

    ``per_query``: rows of the full pool with ``move``, ``system``, ``query_id``, ``gold_rank`` (NaN when the
    gold is not ranked) and, for reranked systems, ``rerank_status`` (reranked / repaired / not_sent /
    failed). ``systems``: dicts with ``name``, ``label`` and, for a reranked pipeline, ``first_stage`` (the
    name of the system whose ranking it reordered; its exposure is that system's).
    """
    frame = per_query[per_query["pool"] == "full"] if "pool" in per_query.columns else per_query
    ranks = {(row.system, row.move, row.query_id): float(row.gold_rank) if pd.notna(row.gold_rank) else math.nan
             for row in frame[["system", "move", "query_id", "gold_rank"]].itertuples(index=False)}
    status = frame["rerank_status"] if "rerank_status" in frame.columns else pd.Series(index=frame.index, dtype=object)
    rows = []
    for system in systems:
        name, first = system["name"], system.get("first_stage") or system["name"]
        part = frame[frame["system"] == name]
        for move, group in part.groupby("move", sort=False):
            final = group["gold_rank"].astype(float).to_numpy()
            exposure = np.array([ranks.get((first, move, q), math.nan) for q in group["query_id"]])
            missing = [q for q, r in zip(group["query_id"], exposure) if (first, move, q) not in ranks]
            if missing:
                raise ValueError(f"{name} ({move}): first stage {first!r} has no row for queries {missing[:3]}")
            exposed = ~np.isnan(exposure) & (exposure <= window)
            selected = ~np.isnan(final) & (final <= cutoff)
            if (selected & ~exposed).any():
                bad = list(group["query_id"][selected & ~exposed])[:3]
                raise ValueError(f"{name} ({move}): gold in the final top {cutoff} but not in the first stage's top "
                                 f"{window} for {bad}: the funnel does not nest")
            rr = np.array([_reciprocal(r, cutoff) for r in final])
            gain = np.array([_ndcg(r, cutoff) for r in final])
            n, n_exposed = len(group), int(exposed.sum())
            statuses = status.loc[group.index].value_counts().to_dict()
            rows.append({
                "move": move, "system": name, "label": system.get("label", name),
                "first_stage": system.get("first_stage"), "window": window, "queries": n,
                "exposed_queries": n_exposed, "exposed": n_exposed / n, "selected": selected.mean(),
                "mrr_at_10": rr.mean(), "ndcg_at_10": gain.mean(),
                "gain_kept": selected.sum() / n_exposed if n_exposed else math.nan,
                "rank_quality": gain.sum() / selected.sum() if selected.any() else math.nan,
                "mrr_at_10_exposed_only": rr[exposed].mean() if n_exposed else math.nan,
                "ndcg_at_10_exposed_only": gain[exposed].mean() if n_exposed else math.nan,
                "not_sent": int(statuses.get("not_sent", 0)), "failed": int(statuses.get("failed", 0)),
                "repaired": int(statuses.get("repaired", 0)),
            })
    return pd.DataFrame(rows, columns=FUNNEL_COLUMNS)


def plot_funnel(table: pd.DataFrame, path, moves: list[str], title: str) -> None:
    """Per move, one group of bars per pipeline: exposed, selected, nDCG@10 (the funnel narrows left to right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [("exposed", "exposed (gold in window)"), ("selected", "selected (gold in top 10)"),
              ("ndcg_at_10", "nDCG@10")]
    fig, axes = plt.subplots(1, len(moves), figsize=(max(4.5, 1.1 * table["label"].nunique() + 2) * len(moves), 4.2),
                             squeeze=False, sharey=True)
    for ax, move in zip(axes[0], moves):
        part = table[table["move"] == move]
        x = np.arange(len(part))
        width = 0.8 / len(stages)
        for i, (column, name) in enumerate(stages):
            ax.bar(x + (i - 1) * width, part[column] * 100, width, label=name)
        ax.set_xticks(x, [label.replace(" + ", "\n+ ") for label in part["label"]], fontsize=7, rotation=0)
        queries = int(part["queries"].max()) if len(part) else 0
        ax.set_title(f"{move.capitalize()} ({queries} queries)")
    axes[0][0].set_ylabel("% of queries (nDCG@10: mean)")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
