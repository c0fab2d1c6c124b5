"""The ``evaluation:`` section of the YAML configuration (``ratio-spark evaluate``), typed and validated.

Kept apart from ``ratio_spark.config`` (which only adds one field for it) and free of heavy imports, so that
loading a configuration never imports torch or faiss.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ratio_spark.core.schema import MOVES, MoveName, PrefixMode, SplitName
from ratio_spark.core.strict import StrictModel
from ratio_spark.evaluation.retrieval.registry import parse_retriever_spec

AnalysisName = Literal["oracle", "overlap", "recall"]


class BM25Config(StrictModel):
    k1: float = 1.5
    b: float = 0.75
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"


class IndexConfig(StrictModel):
    """faiss index: ``flat`` is exact inner product; ``ivf`` / ``hnsw`` are approximate (recall vs exact reported)."""

    kind: Literal["flat", "ivf", "hnsw"] = "flat"
    nlist: int | None = Field(default=None, ge=1)  # ivf lists; default 4 * sqrt(pool size)
    nprobe: int = Field(default=64, ge=1)  # on the ACL pool (596 lists) recall@100 vs exact: 0.67 at 16, 0.88 at 64
    hnsw_m: int = Field(default=32, ge=4)
    ef_construction: int = Field(default=200, ge=8)
    ef_search: int = Field(default=128, ge=8)


class DenseConfig(StrictModel):
    prefix: PrefixMode = "generic"  # when a spec names none
    batch_size: int = Field(default=64, ge=1)
    device: str | None = None  # None: cuda when torch sees a GPU, else cpu
    max_seq_length: int | None = Field(default=None, ge=8)
    instruction_template: str = "Instruct: {instruction}\nQuery: "
    index: IndexConfig = Field(default_factory=IndexConfig)

    @field_validator("instruction_template")
    @classmethod
    def _has_slot(cls, value: str) -> str:
        if "{instruction}" not in value:
            raise ValueError("instruction_template must contain {instruction}")
        return value


class SignificanceConfig(StrictModel):
    """The ``evaluation.significance`` section: how intervals and p-values are computed."""

    bootstrap_samples: int = Field(default=2000, ge=1000)  # Koehn (2004) used 1,000
    permutations: int = Field(default=10_000, ge=1000)  # the Ratio paper's human evaluation used 10,000
    confidence: float = Field(default=0.95, gt=0, lt=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)  # a difference is marked significant when p < alpha
    seed: int = 20260


class EvaluationConfig(StrictModel):
    """What ``ratio-spark evaluate`` scores, on what, and where it writes; command-line flags override."""

    split: SplitName = "test"
    moves: list[MoveName] = Field(default_factory=lambda: list(MOVES))
    queries: Literal["all", "silver"] = "all"
    # specs of evaluation.retrieval.registry: bm25-1 (or bm25) | bm25-2 | bm25-3 | dense:<model>[:<prefix>] | maxsim:<model>
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
    bm25: BM25Config = Field(default_factory=BM25Config)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    significance: SignificanceConfig = Field(default_factory=SignificanceConfig)
    # A seeded sample of `sample_per_move` queries per move (sha256 of seed and query id; the same on any
    # machine), scored by every system: paired comparisons on a subset when a system (an LLM reranker)
    # is too slow for the whole split. None: every query.
    sample_per_move: int | None = Field(default=None, ge=1)
    sample_seed: int = 13
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
