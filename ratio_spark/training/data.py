"""Training pairs from the benchmark's train split, and the data version a model card records.

The train split is read with the evaluation's one loader (``ratio_spark.evaluation.data.load_split``), from a
tables root or a release root. A training pair is (query text, gold text): the query's normalised text and
its gold candidate's text from the train pool, the same texts that evaluation ranks. Only the ``train`` and
``validation`` splits are ever read here; the test split is left to ``ratio-spark evaluate``.

Hard negatives (off by default) are mined from the train pool by one of the evaluation's retrievers:
for each query, its top candidates minus the gold, the query's excluded candidates and every candidate of
the query's own paper (its neighbours are likely related, and the model should not learn to push its
own paper away), after skipping ``skip_top`` ranks.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ratio_spark.core.delta import delta_version, is_delta_table
from ratio_spark.evaluation.data import BenchmarkSplit, Query


@dataclass
class TrainingPairs:
    """One move's training rows: ``query``, ``gold`` and optional ``negative_<i>`` texts, in row order."""

    move: str
    queries: list[Query]
    query_texts: list[str]
    gold_texts: list[str]
    negatives: list[list[str]] = field(default_factory=list)  # one list per negative column
    counts: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.query_texts)

    def columns(self) -> dict[str, list[str]]:
        """The dataset columns in MNRL's order: anchor, positive, then the negatives."""
        columns = {"query": self.query_texts, "gold": self.gold_texts}
        for i, texts in enumerate(self.negatives, start=1):
            columns[f"negative_{i}"] = texts
        return columns


def training_pairs(split: BenchmarkSplit, move: str, max_pairs: int | None = None, seed: int = 42) -> TrainingPairs:
    """(query, gold) pairs of one move of the train split; ``max_pairs`` keeps a seeded sample."""
    if split.split != "train":
        raise ValueError(f"training pairs come from the train split, not {split.split!r}")
    queries = list(split.queries.get(move, []))
    read = len(queries)
    if max_pairs is not None and len(queries) > max_pairs:
        queries = sorted(random.Random(seed).sample(queries, max_pairs), key=lambda q: q.query_id)
    pool = split.pool
    gold_texts = [pool.texts[pool.index[q.gold_ids[0]]] for q in queries]
    return TrainingPairs(
        move=move, queries=queries, query_texts=[q.text for q in queries], gold_texts=gold_texts,
        counts={"train_queries": read, "train_pairs": len(queries), "sampled_out": read - len(queries)},
    )


def add_hard_negatives(pairs: TrainingPairs, split: BenchmarkSplit, retriever, *, count: int = 1, skip_top: int = 0,
                       depth: int = 100) -> TrainingPairs:
    """Add ``count`` negative columns mined by ``retriever`` (indexed here on the train pool).

    A query left with too few candidates after filtering is dropped from the pairs, and counted: MNRL
    needs the same number of columns in every row.
    """
    from ratio_spark.evaluation.retrieval.base import retrieve

    pool = split.pool
    retriever.index(pool)
    rankings = retrieve(retriever, pairs.queries, pool, pairs.move, depth)
    kept_rows: list[int] = []
    negatives: list[list[str]] = [[] for _ in range(count)]
    for row, query in enumerate(pairs.queries):
        own_paper = query.paper_id
        usable = [cid for cid in rankings[query.query_id].ids
                  if cid not in query.gold_ids and (own_paper is None or pool.paper_ids[pool.index[cid]] != own_paper)]
        chosen = usable[skip_top: skip_top + count]
        if len(chosen) < count:
            continue
        kept_rows.append(row)
        for column, cid in zip(negatives, chosen):
            column.append(pool.texts[pool.index[cid]])
    dropped = len(pairs) - len(kept_rows)
    return TrainingPairs(
        move=pairs.move,
        queries=[pairs.queries[i] for i in kept_rows],
        query_texts=[pairs.query_texts[i] for i in kept_rows],
        gold_texts=[pairs.gold_texts[i] for i in kept_rows],
        negatives=negatives,
        counts={**pairs.counts, "train_pairs": len(kept_rows), "dropped_without_enough_negatives": dropped,
                "hard_negatives_per_pair": count},
    )


def data_version(source: str | Path, splits: Sequence[str] = ("train", "validation")) -> dict:
    """What a model was trained on: the Delta versions of ``queries`` and ``candidates`` (a tables root),
    or the sha256 of the release's ``manifest.json`` and of the Parquet/JSONL files of ``splits``."""
    root = Path(source)
    if is_delta_table(root / "queries"):
        return {"kind": "delta", "root": str(root.resolve()),
                "versions": {name: delta_version(root / name) for name in ("queries", "candidates")}}
    digest = hashlib.sha256()
    files = [root / "manifest.json"] if (root / "manifest.json").is_file() else []
    for split in splits:
        files += sorted(p for p in (root / "parquet" / split).rglob("*") if p.is_file())
        files += sorted(p for p in (root / "jsonl" / split).glob("*.jsonl"))
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return {"kind": "release", "root": str(root.resolve()), "sha256": digest.hexdigest(), "files": len(files)}
