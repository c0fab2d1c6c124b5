"""The paper's analyses (appendix F), on our runs.

* **Oracle move filtering** (F.2): the pool is cut down to (a) the gold sentences of every pair of the move
  in the split (``gold_moves`` holds the move), or (b) only the gold sentences of the evaluated queries. Each
  retriever is re-run on each cut pool (BM25 re-indexes it, so its IDF is the cut pool's; dense retrievers
  reuse the full pool's embeddings). Scores are only comparable within one pool.
* **Lexical overlap** (F.1): the mean Jaccard similarity of stemmed, stopword-free unigrams between a query
  and each of its top-k candidates (k = 1, 3, 5, 10, 20, 50, 100), averaged over queries, against the mean
  query-gold Jaccard. Same analyser as BM25.
* **First-stage Recall@100** (§5.2): the share of queries whose gold is in a retriever's top 100, the bound on
  what a reranker of that top 100 can reach (its MRR@10 can be at most Recall@100).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from ratio_spark.evaluation.data import BenchmarkSplit, CandidatePool, Query
from ratio_spark.evaluation.retrieval.analyzer import Analyzer, jaccard
from ratio_spark.evaluation.retrieval.base import Rankings

ORACLE_POOLS = {
    "oracle_a": "(a) gold sentences of all the move's pairs in the split",
    "oracle_b": "(b) gold sentences of the evaluated queries only",
}


def oracle_pools(data: BenchmarkSplit, move: str) -> dict[str, CandidatePool]:
    """The two restricted pools of F.2 for one move (each a sub-pool of the split's pool)."""
    pool = data.pool
    evaluated_golds = {gold for query in data.queries.get(move, []) for gold in query.gold_ids}
    return {
        "oracle_a": pool.subset(pool.gold_ids_of_move(move)),
        "oracle_b": pool.subset(evaluated_golds),
    }


def lexical_overlap(
    queries: Sequence[Query],
    rankings: Rankings,
    pool: CandidatePool,
    ks: Sequence[int],
    analyzer: Analyzer | None = None,
    token_sets: dict[str, frozenset[str]] | None = None,
) -> dict:
    """Mean query-candidate Jaccard over each query's top k, per k, and the mean query-gold Jaccard.

    ``token_sets`` (candidate id -> analysed unigram set) can be shared between calls on one pool.
    A query with fewer than k ranked candidates averages over those it has; one with none is left out of
    that k and counted in ``queries_without_candidates``.
    """
    analyzer = analyzer or Analyzer()
    if token_sets is None:
        token_sets = {}

    def tokens_of(cid: str) -> frozenset[str]:
        found = token_sets.get(cid)
        if found is None:
            found = token_sets[cid] = frozenset(analyzer.unigrams(pool.texts[pool.index[cid]]))
        return found

    per_k: dict[int, list[float]] = {k: [] for k in ks}
    gold_values: list[float] = []
    empty = 0
    for query in queries:
        query_tokens = frozenset(analyzer.unigrams(query.text))
        gold_values.append(sum(jaccard(query_tokens, tokens_of(g)) for g in query.gold_ids) / len(query.gold_ids))
        ranked = rankings.get(query.query_id)
        if ranked is None or not ranked.ids:
            empty += 1
            continue
        similarities = [jaccard(query_tokens, tokens_of(cid)) for cid in ranked.ids[: max(ks)]]
        for k in ks:
            top = similarities[:k]
            per_k[k].append(sum(top) / len(top))
    return {
        "by_k": {k: (sum(v) / len(v) if v else float("nan")) for k, v in per_k.items()},
        "gold": sum(gold_values) / len(gold_values) if gold_values else float("nan"),
        "queries": len(queries),
        "queries_without_candidates": empty,
    }


def overlap_rows(move: str, system: str, label: str, overlap: dict) -> list[dict]:
    rows = [{"move": move, "system": system, "label": label, "k": k, "jaccard": value, "queries": overlap["queries"]}
            for k, value in overlap["by_k"].items()]
    return rows


def gold_overlap_rows(move: str, overlap: dict) -> list[dict]:
    return [{"move": move, "system": "gold", "label": "query-gold", "k": 0, "jaccard": overlap["gold"],
             "queries": overlap["queries"]}]


def first_stage_recall(metrics: pd.DataFrame, k: int = 100) -> pd.DataFrame:
    """Recall@k and MRR@10 per move and system on the full pool, with the reranking headroom R@k - M@10."""
    full = metrics[(metrics["pool"] == "full") & metrics["metric"].isin([f"R@{k}", "M@10"])]
    table = full.pivot_table(index=["move", "system", "label"], columns="metric", values="value").reset_index()
    if f"R@{k}" in table and "M@10" in table:
        table["rerank_headroom"] = table[f"R@{k}"] - table["M@10"]
    return table
