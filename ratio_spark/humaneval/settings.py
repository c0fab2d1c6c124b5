"""The ``humaneval:`` configuration section (the human evaluation of two retrievers, paper §5.3, appendix G).

Pure pydantic, no import of ``ratio_spark.config`` (which adds one field for it). Every field has a
default that follows the paper, so ``humaneval:`` may be omitted; the ``ratio-spark humaneval`` flags
override it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ratio_spark.core.schema import MoveName, SplitName
from ratio_spark.core.strict import StrictModel


class HumanEvalConfig(StrictModel):
    """How a study is sampled, assigned, served and analysed.

    ``per_move``: queries per move, drawn with equal allocation across ``stratify_by`` values (the paper
    labelled 39-46 per move). ``overlap``: the share of each move's queries that a second annotator labels
    too, for inter-annotator agreement. ``depth``: candidates per list (the paper's top 10).
    """

    split: SplitName = "test"
    moves: list[MoveName] = Field(default_factory=lambda: ["address", "broaden", "specify"])
    queries: Literal["all", "silver"] = "all"  # silver: only queries the LLM judge accepted
    per_move: int = Field(default=40, ge=1)
    stratify_by: Literal["marker_entry", "marker"] = "marker_entry"
    seed: int = 17
    depth: int = Field(default=10, ge=1, le=50)
    assignment: Literal["round_robin", "subfield"] = "round_robin"
    overlap: float = Field(default=0.0, ge=0.0, le=1.0)
    permutations: int = Field(default=10_000, ge=100)
    permutation_seed: int = 0
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)  # 0: a free port
