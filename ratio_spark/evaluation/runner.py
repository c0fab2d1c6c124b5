"""Score retrievers on one split: every system over every move on the full shared pool, then the analyses
(oracle pools, lexical overlap, first-stage recall). Plain Python; used by ``ratio-spark evaluate``, the
results notebook and the benchmarks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from ratio_spark.evaluation.analyses import gold_overlap_rows, lexical_overlap, oracle_pools, overlap_rows
from ratio_spark.evaluation.data import BenchmarkSplit
from ratio_spark.evaluation.settings import EvaluationConfig
from ratio_spark.evaluation.metrics import first_relevant_rank, query_metrics
from ratio_spark.evaluation.retrieval.base import Rankings, retrieve
from ratio_spark.evaluation.retrieval.registry import build_retriever

MOVE_ORDER = ("specify", "address", "broaden")  # the paper's column order


@dataclass
class EvaluationResult:
    split: str
    query_set: str
    data_summary: dict
    metrics: pd.DataFrame  # long: pool, pool_size, move, system, label, metric, value, queries
    per_query: pd.DataFrame  # pool, move, system, query_id, gold_id, gold_rank, <metrics>
    overlap: pd.DataFrame | None  # move, system, label, k, jaccard, queries (system "gold": the query-gold line)
    systems: list[dict]  # each retriever's description (prefixes, index, ANN recall, ...)
    timings: dict[str, dict]  # system -> seconds per phase
    rankings: dict[tuple[str, str], Rankings] = field(default_factory=dict)  # (system, move) on the full pool
    cutoffs: tuple[int, ...] = (1, 3, 5, 10, 20, 100)
    pool_sizes: dict[str, int] = field(default_factory=dict)  # "full", "<oracle pool>:<move>" -> candidates
    window: int = 100  # the funnel's exposure window: the first stage's top `window` (what a reranker sees)

    def labels(self) -> dict[str, str]:
        return {s["name"]: s["label"] for s in self.systems}

    def table(self, metric: str = "M@10", pool: str = "full") -> pd.DataFrame:
        """Systems x moves for one metric (percent), in the paper's move order."""
        frame = self.metrics[(self.metrics["pool"] == pool) & (self.metrics["metric"] == metric)]
        table = frame.pivot_table(index="label", columns="move", values="value", sort=False) * 100
        return table[[m for m in MOVE_ORDER if m in table.columns]]


def add_system(result: EvaluationResult, data: BenchmarkSplit, description: dict,
               rankings: dict[str, Rankings], columns: dict[tuple[str, str], dict] | None = None) -> None:
    """Score one more system on the full pool (a reranked run, a run read from disk) and add it to
    ``result``: per-query rows, aggregated metrics, its description and rankings. ``rankings``: move ->
    rankings; ``columns``: extra per-query values by (move, query_id), e.g. a reranker's status."""
    name = description["name"]
    rows = []
    for move, move_rankings in rankings.items():
        result.rankings[(name, move)] = move_rankings
        for row in score_rankings(move_rankings, data.queries.get(move, []), result.cutoffs):
            rows.append({"pool": "full", "move": move, "system": name, **row,
                         **(columns or {}).get((move, row["query_id"]), {})})
    result.systems.append(description)
    result.per_query = pd.concat([result.per_query, pd.DataFrame(rows)], ignore_index=True) if len(result.per_query) \
        else pd.DataFrame(rows)
    result.pool_sizes.setdefault("full", len(data.pool))
    result.metrics = aggregate_metrics(result.per_query, result.labels(), result.pool_sizes, result.cutoffs, data)


def empty_result(data: BenchmarkSplit, cutoffs=(1, 3, 5, 10, 20, 100), window: int = 100) -> EvaluationResult:
    """A result without systems, to ``add_system`` runs read from disk into (``ratio-spark rerank``)."""
    return EvaluationResult(split=data.split, query_set=data.query_set, data_summary=data.summary(),
                            metrics=pd.DataFrame(), per_query=pd.DataFrame(), overlap=None, systems=[], timings={},
                            cutoffs=tuple(cutoffs), pool_sizes={"full": len(data.pool)}, window=window)


def score_rankings(rankings: Rankings, queries, cutoffs) -> list[dict]:
    rows = []
    for query in queries:
        ranked = rankings.get(query.query_id)
        ids = ranked.ids if ranked else []
        rows.append({"query_id": query.query_id, "gold_id": query.gold_ids[0],
                     "gold_rank": first_relevant_rank(ids, query.gold_ids), **query_metrics(ids, query.gold_ids, cutoffs)})
    return rows


def run_evaluation(
    data: BenchmarkSplit,
    settings: EvaluationConfig,
    cache=None,
    log: Callable[[str], None] = print,
) -> EvaluationResult:
    """Index and search with every retriever, score every move, and run the requested analyses."""
    from ratio_spark.evaluation.retrieval.analyzer import Analyzer
    from ratio_spark.evaluation.retrieval.cache import EmbeddingCache

    cache = cache or EmbeddingCache(settings.cache_dir, enabled=settings.cache)
    depth = max(settings.depth, max(settings.cutoffs), max(settings.overlap_ks) if "overlap" in settings.analyses else 0)
    moves = [m for m in settings.moves if m in data.queries]
    per_query_rows: list[dict] = []
    overlap_frame_rows: list[dict] = []
    systems: list[dict] = []
    timings: dict[str, dict] = {}
    all_rankings: dict[tuple[str, str], Rankings] = {}
    pool_sizes = {"full": len(data.pool)}
    analyzer = Analyzer()
    token_sets: dict[str, frozenset[str]] = {}

    if "overlap" in settings.analyses:
        for move in moves:
            overlap = lexical_overlap(data.queries[move], {}, data.pool, settings.overlap_ks, analyzer, token_sets)
            overlap_frame_rows += gold_overlap_rows(move, overlap)

    for spec in settings.retrievers:
        retriever = build_retriever(spec, settings, cache)
        times: dict[str, float] = {}
        log(f"[{spec}] indexing {len(data.pool)} candidates")
        started = time.perf_counter()
        retriever.index(data.pool)
        times["index_full_pool"] = time.perf_counter() - started
        for move in moves:
            queries = data.queries[move]
            started = time.perf_counter()
            rankings = retrieve(retriever, queries, data.pool, move, depth)
            times[f"search_{move}"] = time.perf_counter() - started
            all_rankings[(spec, move)] = rankings
            for row in score_rankings(rankings, queries, settings.cutoffs):
                per_query_rows.append({"pool": "full", "move": move, "system": spec, **row})
            if "overlap" in settings.analyses and queries:
                overlap = lexical_overlap(queries, rankings, data.pool, settings.overlap_ks, analyzer, token_sets)
                overlap_frame_rows += overlap_rows(move, spec, retriever.label, overlap)
        description = retriever.describe()  # of the full pool, before oracle pools re-index
        if "oracle" in settings.analyses:
            started = time.perf_counter()
            for move in moves:
                queries = data.queries[move]
                if not queries:
                    continue
                for pool_name, pool in oracle_pools(data, move).items():
                    pool_sizes[f"{pool_name}:{move}"] = len(pool)
                    retriever.index(pool)
                    rankings = retrieve(retriever, queries, pool, move, depth)
                    for row in score_rankings(rankings, queries, settings.cutoffs):
                        per_query_rows.append({"pool": pool_name, "move": move, "system": spec, **row})
            times["oracle_pools"] = time.perf_counter() - started
        systems.append(description)
        timings[spec] = times
        summary = ", ".join(
            f"{m} M@10 {100 * _mean(per_query_rows, spec, m, 'M@10'):.1f}" for m in moves if data.queries[m]
        )
        log(f"[{spec}] {retriever.label}: {summary} ({sum(times.values()):.1f}s)")

    per_query = pd.DataFrame(per_query_rows)
    labels = {s["name"]: s["label"] for s in systems}
    metrics = aggregate_metrics(per_query, labels, pool_sizes, settings.cutoffs, data)
    overlap = pd.DataFrame(overlap_frame_rows) if overlap_frame_rows else None
    return EvaluationResult(
        split=data.split, query_set=data.query_set, data_summary=data.summary(), metrics=metrics, per_query=per_query,
        overlap=overlap, systems=systems, timings=timings, rankings=all_rankings, cutoffs=tuple(settings.cutoffs),
        pool_sizes=pool_sizes, window=settings.depth,
    )


def _mean(rows: list[dict], system: str, move: str, metric: str) -> float:
    values = [r[metric] for r in rows if r["system"] == system and r["move"] == move and r["pool"] == "full"]
    return sum(values) / len(values) if values else float("nan")


def aggregate_metrics(per_query: pd.DataFrame, labels: dict, pool_sizes: dict, cutoffs, data: BenchmarkSplit) -> pd.DataFrame:
    from ratio_spark.evaluation.metrics import metric_names

    names = metric_names(cutoffs)
    rows = []
    if not per_query.empty:
        grouped = per_query.groupby(["pool", "move", "system"], sort=False)
        for (pool, move, system), group in grouped:
            size = pool_sizes["full"] if pool == "full" else pool_sizes.get(f"{pool}:{move}")
            for name in names:
                rows.append({"split": data.split, "query_set": data.query_set, "pool": pool, "pool_size": size,
                             "move": move, "system": system, "label": labels.get(system, system), "metric": name,
                             "value": float(group[name].mean()), "queries": len(group)})
    return pd.DataFrame(rows, columns=["split", "query_set", "pool", "pool_size", "move", "system", "label", "metric",
                                       "value", "queries"])
