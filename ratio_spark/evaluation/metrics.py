"""The paper's metrics: Recall@k and MRR@k for k in 1, 3, 5, 10, 20, 100, and nDCG@10 (MRR@10 is primary).

Per query, from its ranking (best first) and its relevant ids:

* ``R@k``  = |relevant in top k| / |relevant|            (Ratio has one gold per query: 1 if its rank <= k)
* ``M@k``  = 1 / rank of the first relevant, if <= k, else 0
* ``nDCG@10`` with binary gains and log2 discounts (one gold: 1 / log2(rank + 1))

A ranking is ordered by score descending, then candidate id ascending (``order_run``), so tied scores give
the same ranks on every run. Excluded candidates (the query's own sentence) are removed before ranking.
A query without any ranked candidate scores 0: every query counts in the mean, none is dropped.
Values are fractions here; the tables print percentages, as the paper does.

``tests/evaluation/test_metrics.py`` checks these against ``ir_measures`` (R@k, RR@k, nDCG@10) on the same runs.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

CUTOFFS = (1, 3, 5, 10, 20, 100)
NDCG_CUTOFF = 10
PRIMARY = "M@10"


def metric_names(cutoffs: Sequence[int] = CUTOFFS) -> list[str]:
    return [f"R@{k}" for k in cutoffs] + [f"M@{k}" for k in cutoffs] + [f"nDCG@{NDCG_CUTOFF}"]


def order_run(scores: Mapping[str, float], exclude: Iterable[str] = ()) -> list[str]:
    """Candidate ids of one query's run, best first: score descending, then candidate id ascending."""
    excluded = set(exclude)
    return [cid for cid, _ in sorted(((c, s) for c, s in scores.items() if c not in excluded),
                                      key=lambda item: (-item[1], item[0]))]


def first_relevant_rank(ranked: Sequence[str], relevant: Iterable[str]) -> int | None:
    relevant = set(relevant)
    for rank, cid in enumerate(ranked, start=1):
        if cid in relevant:
            return rank
    return None


def query_metrics(ranked: Sequence[str], relevant: Iterable[str], cutoffs: Sequence[int] = CUTOFFS) -> dict[str, float]:
    """All metrics of one query from its ranking (ids best first) and its relevant ids."""
    relevant = set(relevant)
    if not relevant:
        raise ValueError("a query needs at least one relevant candidate")
    hit_ranks = [rank for rank, cid in enumerate(ranked, start=1) if cid in relevant]
    first = hit_ranks[0] if hit_ranks else None
    out: dict[str, float] = {}
    for k in cutoffs:
        out[f"R@{k}"] = sum(1 for r in hit_ranks if r <= k) / len(relevant)
    for k in cutoffs:
        out[f"M@{k}"] = 1.0 / first if first is not None and first <= k else 0.0
    dcg = sum(1.0 / math.log2(r + 1) for r in hit_ranks if r <= NDCG_CUTOFF)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(len(relevant), NDCG_CUTOFF) + 1))
    out[f"nDCG@{NDCG_CUTOFF}"] = dcg / ideal
    return out


def evaluate_rankings(
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Iterable[str]],
    cutoffs: Sequence[int] = CUTOFFS,
) -> dict[str, dict[str, float]]:
    """Per-query metrics for every query in ``qrels`` (a query missing from ``rankings`` scores 0)."""
    return {qid: query_metrics(rankings.get(qid, ()), relevant, cutoffs) for qid, relevant in qrels.items()}


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Iterable[str]],
    exclude: Mapping[str, Iterable[str]] | None = None,
    cutoffs: Sequence[int] = CUTOFFS,
) -> dict[str, dict[str, float]]:
    """Per-query metrics of a scored run ``{query_id: {candidate_id: score}}``, after exclusions."""
    exclude = exclude or {}
    rankings = {qid: order_run(scores, exclude.get(qid, ())) for qid, scores in run.items()}
    return evaluate_rankings(rankings, qrels, cutoffs)


def mean_metrics(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over queries (an empty set gives NaN, never a silent 0)."""
    if not per_query:
        return {}
    names = next(iter(per_query.values())).keys()
    n = len(per_query)
    return {name: sum(m[name] for m in per_query.values()) / n for name in names}
