"""Model selection by validation MRR@10, scored exactly as ``ratio-spark evaluate`` scores the test split.

:class:`ValidationEvaluator` is a sentence-transformers evaluator: the trainer calls it after every epoch
(and every ``eval_steps`` steps when asked), and ``load_best_model_at_end`` restores the checkpoint with the
best ``eval_validation_mrr@10``. It ranks every validation query of each move against the validation
split's **whole shared pool**, minus the query's excluded candidates, with the evaluation's own dense
retriever (normalised embeddings, faiss inner product, ties by candidate id) and metrics (the ones
parity-tested against ir_measures). With several moves (the unified model) the primary metric is the mean
of the moves' MRR@10, so a small move counts as much as Specify.
"""

from __future__ import annotations

import time

from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

from ratio_spark.evaluation.data import BenchmarkSplit
from ratio_spark.evaluation.metrics import mean_metrics, query_metrics
from ratio_spark.evaluation.retrieval.base import retrieve
from ratio_spark.evaluation.retrieval.dense import DEFAULT_INSTRUCTION_TEMPLATE, DenseRetriever
from ratio_spark.training.settings import TrainingInputError

PRIMARY = "mrr@10"
CUTOFFS = (1, 10, 100)  # what the curves show: R@1, R@10, R@100 and MRR@10
DEPTH = 100


class ValidationEvaluator(BaseEvaluator):
    """Validation MRR@10 (primary), R@1, R@10 and R@100 per move; every call appended to ``history``."""

    def __init__(self, split: BenchmarkSplit, model_name: str, prefix: str, *, moves: list[str] | None = None,
                 batch_size: int = 64, instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE,
                 name: str = "validation"):
        super().__init__()
        if split.split != "validation":
            raise ValueError(f"model selection reads the validation split, not {split.split!r}")
        self.split = split
        self.model_name = model_name
        self.prefix = prefix
        self.moves = [m for m in (moves or list(split.queries)) if split.queries.get(m)]
        if not self.moves:
            raise TrainingInputError(f"the validation split has no queries for {moves or list(split.queries)}: model "
                             "selection needs some (build the validation split, or pick moves that have queries)")
        self.batch_size = batch_size
        self.instruction_template = instruction_template
        self.name = name
        self.primary_metric = PRIMARY
        self.history: list[dict] = []

    def retriever(self, model, cache=None) -> DenseRetriever:
        options = {"cache": cache} if cache is not None else {}
        return DenseRetriever.from_model(model, self.model_name, self.prefix, batch_size=self.batch_size,
                                         instruction_template=self.instruction_template, progress=False, **options)

    def score(self, model, cache=None) -> dict[str, float]:
        """Unprefixed metrics: ``<move>_mrr@10``, ``<move>_r@k`` and the primary ``mrr@10``.

        ``cache`` (an ``EmbeddingCache``) only for a model whose weights are those of ``model_name`` on disk
        (the untuned model): its key is that folder's weight files.
        """
        retriever = self.retriever(model, cache)
        retriever.index(self.split.pool)
        metrics: dict[str, float] = {}
        for move in self.moves:
            queries = self.split.queries[move]
            rankings = retrieve(retriever, queries, self.split.pool, move, DEPTH)
            means = mean_metrics({q.query_id: query_metrics(rankings[q.query_id].ids, q.gold_ids, CUTOFFS)
                                  for q in queries})
            metrics[f"{move}_mrr@10"] = means["M@10"]
            for k in CUTOFFS:
                metrics[f"{move}_r@{k}"] = means[f"R@{k}"]
        metrics[PRIMARY] = sum(metrics[f"{m}_mrr@10"] for m in self.moves) / len(self.moves)
        return metrics

    def __call__(self, model, output_path: str | None = None, epoch: float = -1, steps: int = -1) -> dict[str, float]:
        started = time.perf_counter()
        metrics = self.score(model)
        seconds = time.perf_counter() - started
        self.history.append({"epoch": float(epoch), "step": int(steps), "seconds": round(seconds, 2), **metrics})
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics

    @property
    def seconds(self) -> float:
        """Wall time spent validating so far (subtracted from training time for pairs/s)."""
        return sum(point["seconds"] for point in self.history)

    def get_config_dict(self) -> dict:
        return {"split": "validation", "moves": self.moves, "prefix": self.prefix,
                "pool_candidates": len(self.split.pool),
                "queries": {m: len(self.split.queries[m]) for m in self.moves}}
