"""Late-interaction (MaxSim) scoring over the token embeddings of a sentence-transformers model.

The paper runs three ColBERT models in PyLate. Neither works here: PyLate 1.6 pins sentence-transformers
5.3 and transformers <= 5.3 (this project has 6.x / 5.2x), and no ColBERT checkpoint is on PyPI, so none
can be loaded offline. This retriever is the scoring rule without a trained late-interaction model: the
L2-normalised contextual token embeddings of a bi-encoder (e.g. ``maxsim:minilm``), the score of a candidate
being the sum over query tokens of the best cosine with any candidate token (ColBERT's MaxSim, with no
projection layer, no query augmentation, no compression). Its label says "untrained for late interaction":
its numbers are a floor for MaxSim, not a stand-in for the paper's ColBERT rows.

The search is exact and brute force (all candidate tokens in one float32 matrix, a product per query and a
max per candidate), so it suits pools of tens of thousands of sentences; token embeddings are not cached.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ratio_spark.evaluation.data import CandidatePool
from ratio_spark.evaluation.retrieval.base import PROGRESS_MIN, Retriever, top_k_per_query


class MaxSimRetriever(Retriever):
    def __init__(self, model: str, batch_size: int = 64, device: str | None = None, aliases: dict[str, str] | None = None,
                 max_query_tokens: int = 128, max_candidate_tokens: int = 300, progress: bool = True):
        from ratio_spark.evaluation.models import display_name

        self.model_name = model
        self.batch_size, self.device, self.aliases = batch_size, device, aliases or {}
        self.max_query_tokens, self.max_candidate_tokens = max_query_tokens, max_candidate_tokens  # the paper's 128/300
        self.progress = progress
        self.name = f"maxsim:{model}"
        self.label = f"MaxSim over {display_name(model)} tokens (untrained for late interaction)"
        self._model = None
        self._tokens: np.ndarray | None = None
        self._starts: np.ndarray | None = None
        self._pool_size = 0

    @property
    def model(self):
        if self._model is None:
            from ratio_spark.evaluation.models import load_sentence_transformer

            self._model = load_sentence_transformer(self.model_name, self.device, self.aliases)
        return self._model

    def token_embeddings(self, texts: Sequence[str], max_tokens: int) -> list[np.ndarray]:
        model = self.model
        model.max_seq_length = min(max_tokens, model.tokenizer.model_max_length or max_tokens)
        outputs = model.encode(list(texts), output_value="token_embeddings", batch_size=self.batch_size,
                               convert_to_numpy=False, show_progress_bar=self.progress and len(texts) >= PROGRESS_MIN)
        result = []
        for tokens in outputs:
            array = tokens.float().cpu().numpy()
            norms = np.linalg.norm(array, axis=1, keepdims=True)
            result.append(array / np.maximum(norms, 1e-12))
        return result

    def index(self, pool: CandidatePool) -> None:
        per_doc = self.token_embeddings(pool.texts, self.max_candidate_tokens)
        lengths = np.array([len(t) for t in per_doc], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self._tokens = np.ascontiguousarray(np.concatenate(per_doc, axis=0), dtype=np.float32)
        self._pool_size = len(pool)

    def scores(self, query_tokens: np.ndarray) -> np.ndarray:
        similarities = query_tokens @ self._tokens.T  # (query tokens, all candidate tokens)
        best = np.maximum.reduceat(similarities, self._starts, axis=1)  # (query tokens, candidates)
        return best.sum(axis=0)

    def score_pool(self, text: str) -> np.ndarray:
        if self._tokens is None:
            raise RuntimeError(f"{self.name}: index a pool first")
        return self.scores(self.token_embeddings([text], self.max_query_tokens)[0])

    def search(self, texts: Sequence[str], move: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self._tokens is None:
            raise RuntimeError(f"{self.name}: index a pool first")
        queries = self.token_embeddings(texts, self.max_query_tokens)
        return top_k_per_query(queries, self.scores, min(k, self._pool_size), desc=f"{self.name}: {move}",
                               progress=self.progress)

    def describe(self) -> dict:
        return {**super().describe(), "model": self.model_name, "trained_for_late_interaction": False,
                "max_query_tokens": self.max_query_tokens, "max_candidate_tokens": self.max_candidate_tokens,
                "candidate_tokens": int(self._tokens.shape[0]) if self._tokens is not None else None}
