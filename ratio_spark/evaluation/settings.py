"""The ``evaluation:`` section of the YAML configuration (``ratio-spark evaluate``), typed and validated.

Kept apart from ``ratio_spark.core.config`` (which only adds one field for it) and free of heavy imports, so that
loading a configuration never imports torch or faiss.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.core.strict import StrictModel

MoveName = Literal[MOVES]
AnalysisName = Literal["oracle", "overlap", "recall"]


class BM25Settings(StrictModel):
    k1: float = 1.5
    b: float = 0.75
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"


class IndexSettings(StrictModel):
    """faiss index: ``flat`` is exact inner product; ``ivf`` / ``hnsw`` are approximate (recall vs exact reported)."""

    kind: Literal["flat", "ivf", "hnsw"] = "flat"
    nlist: int | None = Field(default=None, ge=1)  # ivf lists; default 4 * sqrt(pool size)
    nprobe: int = Field(default=64, ge=1)  # on the ACL pool (596 lists) recall@100 vs exact: 0.67 at 16, 0.88 at 64
    hnsw_m: int = Field(default=32, ge=4)
    ef_construction: int = Field(default=200, ge=8)
    ef_search: int = Field(default=128, ge=8)


class DenseSettings(StrictModel):
    prefix: Literal["none", "generic", "recommended", "instructions"] = "generic"  # when a spec names none
    batch_size: int = Field(default=64, ge=1)
    device: str | None = None  # None: cuda when torch sees a GPU, else cpu
    max_seq_length: int | None = Field(default=None, ge=8)
    instruction_template: str = "Instruct: {instruction}\nQuery: "
    index: IndexSettings = Field(default_factory=IndexSettings)

    @field_validator("instruction_template")
    @classmethod
    def _has_slot(cls, value: str) -> str:
        if "{instruction}" not in value:
            raise ValueError("instruction_template must contain {instruction}")
        return value


class EvaluationConfig(StrictModel):
    """What ``ratio-spark evaluate`` scores, on what, and where it writes; command-line flags override."""

    split: Literal[SPLITS] = "test"
    moves: list[MoveName] = Field(default_factory=lambda: list(MOVES))
    queries: Literal["all", "silver"] = "all"
    # bm25-1 | bm25-2 | bm25-3 | dense:<model>[:<prefix>] | maxsim:<model>   (model: alias, folder or name)
    retrievers: list[str] = Field(default_factory=lambda: ["bm25-1", "bm25-2", "bm25-3", "dense:minilm"])
    source: str | None = None  # tables root or release root; default: tables.root
    silver_table: str | None = None  # default: tables.location("silver")
    results: str = "results"
    depth: int = Field(default=100, ge=1)  # candidates kept per query (runs, Recall@100, overlap up to 100)
    cutoffs: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 20, 100])
    analyses: list[AnalysisName] = Field(default_factory=lambda: ["oracle", "overlap", "recall"])
    overlap_ks: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 20, 50, 100])
    max_queries: int | None = Field(default=None, ge=1)  # per move, first N by query id (quick looks)
    cache_dir: str | None = None  # embeddings; default ~/.cache/ratio-spark/embeddings
    cache: bool = True
    models: dict[str, str] = Field(default_factory=dict)  # extra aliases: name -> folder or model name
    bm25: BM25Settings = Field(default_factory=BM25Settings)
    dense: DenseSettings = Field(default_factory=DenseSettings)
    progress: bool = True

    @field_validator("retrievers")
    @classmethod
    def _known_specs(cls, value: list[str]) -> list[str]:
        for spec in value:
            parse_retriever_spec(spec)
        if len(set(value)) != len(value):
            raise ValueError("a retriever is listed twice")
        return value

    @field_validator("cutoffs", "overlap_ks")
    @classmethod
    def _positive_sorted(cls, value: list[int]) -> list[int]:
        if not value or any(k < 1 for k in value):
            raise ValueError("cutoffs must be positive integers")
        return sorted(set(value))


PREFIX_MODES = ("none", "generic", "recommended", "instructions")


def parse_retriever_spec(spec: str) -> dict:
    """``bm25-2`` -> {kind: bm25, ngram: 2}; ``dense:mpnet:generic`` -> {kind: dense, model, prefix};
    ``maxsim:minilm`` -> {kind: maxsim, model}. A ValueError names the bad spec."""
    spec = spec.strip()
    if spec in ("bm25", "bm25-1", "bm25-2", "bm25-3"):
        return {"kind": "bm25", "ngram": 1 if spec == "bm25" else int(spec[-1])}
    kind, _, rest = spec.partition(":")
    if kind in ("dense", "maxsim") and rest:
        model, prefix = rest, None
        head, _, tail = rest.rpartition(":")
        if head and tail in PREFIX_MODES:
            model, prefix = head, tail
        if kind == "maxsim" and prefix is not None:
            raise ValueError(f"retriever {spec!r}: maxsim takes no prefix mode")
        return {"kind": kind, "model": model, "prefix": prefix}
    raise ValueError(
        f"unknown retriever {spec!r}: use bm25-1, bm25-2, bm25-3, dense:<model>[:<none|generic|recommended|"
        "instructions>] or maxsim:<model> (model: minilm, mpnet, a folder or a sentence-transformers name)"
    )
