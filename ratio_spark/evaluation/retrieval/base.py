"""What every retriever shares: the interface, deterministic top-k, and the exclusion of each query's own
sentence.

A retriever indexes a :class:`~ratio_spark.evaluation.data.CandidatePool` and answers ``search(texts, move, k)``
with pool row indices and scores. :func:`retrieve` turns that into :class:`Rankings` (query id -> candidate
ids in rank order, with scores): it asks for a few more than ``depth`` candidates, drops the query's
``exclude_ids``, orders by score descending then candidate id ascending (pool rows are sorted by id), and
cuts at ``depth``. The result is the run ``{query_id: {candidate_id: score}}`` of the issue, kept ordered.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ratio_spark.evaluation.data import CandidatePool, Query

# Extra depth asked of a search beyond what exclusions need, so that score ties at the cut are seen and
# ordered by id (exact for BM25, whose search orders all ties; see ``deterministic_top_k``).
TIE_MARGIN = 10
# Progress bars only for loops long enough to be worth watching (small oracle pools stay quiet).
PROGRESS_MIN = 2000


@dataclass
class Ranking:
    ids: list[str]
    scores: list[float]


Rankings = dict[str, Ranking]  # query_id -> ranking (best first)


def rankings_to_run(rankings: Rankings) -> dict[str, dict[str, float]]:
    """The issue's run shape ``{query_id: {candidate_id: score}}`` (ir_measures / ranx / pytrec_eval input)."""
    return {qid: dict(zip(r.ids, r.scores)) for qid, r in rankings.items()}


def deterministic_top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, ordered by score descending then index ascending.

    Every index tied with the k-th score is considered before the cut, so the result does not depend
    on argpartition's order: with rows sorted by candidate id, ties go to the smaller id.
    """
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        kth = scores[part].min()
        candidates = np.flatnonzero(scores >= kth)
    else:
        candidates = np.arange(n)
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order][:k]


def top_k_per_query(queries: Sequence, score: Callable[[object], np.ndarray], k: int, *, desc: str,
                    progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """``search``'s arrays for retrievers that score the whole pool per query (BM25, MaxSim): each
    query's ``score(query)`` over all rows, cut with ``deterministic_top_k``; -1 pads short rows."""
    from tqdm.auto import tqdm

    all_scores = np.zeros((len(queries), k), dtype=np.float32)
    all_rows = np.full((len(queries), k), -1, dtype=np.int64)
    for i, query in enumerate(tqdm(queries, desc=desc, unit="query", mininterval=1.0, leave=False,
                                   disable=not progress or len(queries) < PROGRESS_MIN)):
        scores = score(query)
        top = deterministic_top_k(scores, k)
        all_rows[i, : len(top)] = top
        all_scores[i, : len(top)] = scores[top]
    return all_scores, all_rows


class Retriever(ABC):
    """Index a pool once, then rank it for many queries."""

    #: system id as given on the command line (``bm25-1``, ``dense:minilm``)
    name: str
    #: human-readable label for tables (``BM25-unigram``, ``all-MiniLM-L6-v2 (generic prefix)``)
    label: str
    #: a score of 0 or less means "shares nothing with the query" (BM25), not a weak match
    positive_only: bool = False

    @abstractmethod
    def index(self, pool: CandidatePool) -> None: ...

    @abstractmethod
    def search(self, texts: Sequence[str], move: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores and pool row indices, each ``(len(texts), k)``, best first; index -1 pads short rows."""

    def score_pool(self, text: str) -> np.ndarray:
        """One score per row of the indexed pool for one query text, with no move (higher is better): for a
        service that gates the pool before its cut (the Inspire search, ``inspire.search``)."""
        raise NotImplementedError(f"{self.name} cannot score a whole pool for a query")

    def describe(self) -> dict:
        return {"name": self.name, "label": self.label}


def retrieve(retriever: Retriever, queries: Sequence[Query], pool: CandidatePool, move: str, depth: int) -> Rankings:
    """Rank ``pool`` (already indexed by ``retriever``) for each query, minus its excluded candidates."""
    if not queries:
        return {}
    excluded_rows = [{pool.index[cid] for cid in q.exclude_ids if cid in pool.index} for q in queries]
    k = min(len(pool), depth + max(len(rows) for rows in excluded_rows) + TIE_MARGIN)
    scores, rows = retriever.search([q.text for q in queries], move, k)
    rankings: Rankings = {}
    for query, excluded, score_row, index_row in zip(queries, excluded_rows, scores, rows):
        kept = [(float(s), int(i)) for s, i in zip(score_row, index_row) if i >= 0 and int(i) not in excluded]
        kept.sort(key=lambda pair: (-pair[0], pair[1]))
        kept = kept[:depth]
        rankings[query.query_id] = Ranking(ids=[pool.ids[i] for _, i in kept], scores=[s for s, _ in kept])
    return rankings
