"""The date gate and the search backends of the Inspire service (the paper's TimeMachine).

The corpus (``corpus.parquet`` of an instance version) is indexed once; every search scores the whole
corpus, then sets every paper published on or after the episode's cutoff, and the hidden target, to
minus infinity *before* the top-k cut, so no ranking can reach them; the result is checked against the
gate once more before it leaves. Backends reuse the evaluation retrievers: BM25 (bm25s, the analyser of
``ratio_spark.evaluation.retrieval``), dense (sentence-transformers, cached embeddings) or any other retriever of
the evaluation registry, by the same spec as ``ratio-spark evaluate --retrievers``. Exact scoring
of every paper per query suits corpora of up to a few hundred thousand papers.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ratio_spark.core.errors import RunFailure
from ratio_spark.evaluation.data import CandidatePool
from ratio_spark.evaluation.retrieval.base import deterministic_top_k


class DateGateViolation(RunFailure):
    """A result on or after the cutoff (or the hidden target) was about to leave the service: a failed check of
    the run (exit 1), never an answer."""


@dataclass
class SearchCorpus:
    ids: list[str]  # sorted: ties between equal scores go to the smaller id
    dates: np.ndarray  # datetime64[D]
    titles: list[str]
    abstracts: list[str]
    bodies: list[str]

    @classmethod
    def load(cls, path: str | Path) -> "SearchCorpus":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).sort_by("paper_id")
        return cls(
            ids=rows.column("paper_id").to_pylist(),
            dates=np.array(rows.column("pub_date").to_pylist(), dtype="datetime64[D]"),
            titles=[t or "" for t in rows.column("title").to_pylist()],
            abstracts=[a or "" for a in rows.column("abstract").to_pylist()],
            bodies=[b or "" for b in rows.column("body").to_pylist()],
        )

    def __len__(self) -> int:
        return len(self.ids)

    def texts(self, fields: list[str]) -> list[str]:
        columns = {"title": self.titles, "abstract": self.abstracts, "body": self.bodies}
        return [". ".join(p for p in parts if p) for parts in zip(*(columns[f] for f in fields))]

    def pool(self, fields: list[str]) -> CandidatePool:
        """The corpus as an evaluation CandidatePool, so the evaluation retrievers index it unchanged."""
        n = len(self)
        return CandidatePool(split="inspire", ids=list(self.ids), texts=self.texts(fields), sources=["paper"] * n,
                             gold_moves=[()] * n, paper_ids=list(self.ids))


class Backend(Protocol):
    name: str
    positive_only: bool  # a score of 0 or less means no match (BM25), not a result

    def scores(self, query: str) -> np.ndarray: ...  # one score per corpus paper, higher is better


class RetrieverBackend:
    """Any retriever of the evaluation registry, indexed over the corpus: every search scores every paper."""

    def __init__(self, retriever):
        self.name = retriever.name
        self.positive_only = retriever.positive_only
        self._retriever = retriever

    def scores(self, query: str) -> np.ndarray:
        return np.asarray(self._retriever.score_pool(query), dtype=np.float64)


def make_backend(spec: str, corpus: SearchCorpus, fields: list[str], dense_prefix: str = "none") -> Backend:
    """A retriever spec of the evaluation registry (``evaluation.retrieval.registry``, the grammar of ``evaluate
    --retrievers``: bm25-1 or bm25, dense:<model>[:<prefix>], ...) over the corpus's ``fields``;
    ``dense_prefix`` when a dense spec names no prefix mode."""
    from ratio_spark.evaluation.retrieval.registry import build_retriever
    from ratio_spark.evaluation.settings import DenseConfig, EvaluationConfig

    retriever = build_retriever(spec, EvaluationConfig(progress=False, dense=DenseConfig(prefix=dense_prefix)))
    retriever.index(corpus.pool(fields))
    return RetrieverBackend(retriever)


class DateGatedSearch:
    def __init__(self, corpus: SearchCorpus, backend: Backend):
        self.corpus = corpus
        self.backend = backend
        self.index = {pid: i for i, pid in enumerate(corpus.ids)}

    def visible(self, cutoff: dt.date, hidden: set[str]) -> np.ndarray:
        """Which papers an episode may see: published strictly before the cutoff, and not hidden."""
        mask = self.corpus.dates < np.datetime64(cutoff, "D")
        for paper_id in hidden:
            if paper_id in self.index:
                mask[self.index[paper_id]] = False
        return mask

    def search(self, query: str, limit: int, cutoff: dt.date, hidden: set[str]) -> list[tuple[str, float]]:
        """(paper id, score) of the best ``limit`` visible papers, best first."""
        mask = self.visible(cutoff, hidden)
        scores = self.backend.scores(query).astype(np.float64)
        scores[~mask] = -np.inf
        if getattr(self.backend, "positive_only", False):
            scores[scores <= 0] = -np.inf
        top = [int(i) for i in deterministic_top_k(scores, limit) if np.isfinite(scores[i])]
        for row in top:
            if not mask[row]:
                raise DateGateViolation(f"{self.corpus.ids[row]} is not visible before {cutoff}")
        return [(self.corpus.ids[row], float(scores[row])) for row in top]

    def describe(self, row: int, snippet_chars: int) -> dict:
        """What a result shows the policy: id, year, title and the start of the abstract."""
        return {"paper_id": self.corpus.ids[row], "year": int(str(self.corpus.dates[row])[:4]),
                "title": self.corpus.titles[row], "abstract": self.corpus.abstracts[row][:snippet_chars]}
