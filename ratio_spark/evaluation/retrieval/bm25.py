"""BM25 over the shared pool with bm25s (the paper's appendix C): English stopwords, Snowball stemming, and
three variants: unigrams (``bm25-1``), unigrams + bigrams (``bm25-2``), unigrams + trigrams (``bm25-3``).

bm25s' own tokenizer makes unigrams only, so the analyser (``ratio_spark.evaluation.retrieval.analyzer``) builds the token
lists, we map them to ids with our own vocabulary and hand bm25s ``(corpus_token_ids, vocab)``. Queries are
mapped with the same vocabulary (unknown n-grams score nothing) and scored against the whole pool with
``get_scores_from_ids``; the top-k is taken with ties ordered by candidate id, so a run is reproducible.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ratio_spark.evaluation.data import CandidatePool
from ratio_spark.evaluation.retrieval.analyzer import Analyzer, ngram_order_name
from ratio_spark.evaluation.retrieval.base import PROGRESS_MIN, Retriever, top_k_per_query


class BM25Retriever(Retriever):
    positive_only = True
    def __init__(self, ngram: int = 1, k1: float = 1.5, b: float = 0.75, method: str = "lucene", progress: bool = True):
        if ngram not in (1, 2, 3):
            raise ValueError(f"BM25 n-gram order must be 1, 2 or 3, got {ngram}")
        self.ngram = ngram
        self.k1, self.b, self.method = k1, b, method
        self.progress = progress
        self.name = f"bm25-{ngram}"
        self.label = f"BM25-{ngram_order_name(ngram)}"
        self.analyzer = Analyzer()
        self._bm25 = None
        self._vocab: dict[str, int] = {}
        self._pool_size = 0

    def index(self, pool: CandidatePool) -> None:
        import bm25s
        from tqdm.auto import tqdm

        vocab: dict[str, int] = {}
        corpus_ids: list[list[int]] = []
        for text in tqdm(pool.texts, desc=f"{self.name}: analysing pool", unit="sent", disable=not self.progress or len(pool) < PROGRESS_MIN,
                         mininterval=1.0, leave=False):
            corpus_ids.append([vocab.setdefault(tok, len(vocab)) for tok in self.analyzer.tokens(text, self.ngram)])
        # bm25s scores an empty query against an "empty" token; keep one so that any query works.
        vocab.setdefault("", len(vocab))
        model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        model.index((corpus_ids, vocab), show_progress=False)
        self._bm25, self._vocab, self._pool_size = model, vocab, len(pool)

    def query_token_ids(self, text: str) -> list[int]:
        return [self._vocab[tok] for tok in self.analyzer.tokens(text, self.ngram) if tok in self._vocab]

    def scores(self, text: str) -> np.ndarray:
        """BM25 score of every pool candidate for one query (0 where nothing matches)."""
        ids = self.query_token_ids(text)
        if not ids:
            return np.zeros(self._pool_size, dtype=np.float32)
        return self._bm25.get_scores_from_ids(ids)

    def score_pool(self, text: str) -> np.ndarray:
        return self.scores(text)

    def search(self, texts: Sequence[str], move: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self._bm25 is None:
            raise RuntimeError(f"{self.name}: index a pool first")
        return top_k_per_query(texts, self.scores, min(k, self._pool_size), desc=f"{self.name}: {move}",
                               progress=self.progress)

    def describe(self) -> dict:
        return {**super().describe(), "ngram": self.ngram, "k1": self.k1, "b": self.b, "method": self.method,
                "vocabulary": len(self._vocab)}
