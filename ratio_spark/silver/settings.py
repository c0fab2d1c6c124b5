"""The ``silver:`` configuration section (the silver test set: sampling, the LLM judge, calibration).

Pure pydantic with no import of ``ratio_spark.config``, so the config module can import it without a
cycle. Every field has a default that follows the paper (§4.3, appendix E), so ``silver:`` may be omitted.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ratio_spark.core.schema import MOVES, SplitName
from ratio_spark.llm.settings import LLMTransportConfig


SampleSize = int | Literal["all"]


class SilverConfig(LLMTransportConfig):
    """How the silver test set is sampled, judged and written.

    ``sample``: pairs per move, or ``all`` (the paper: 10K Specify, all Address and Broaden), drawn with
    equal allocation across ``stratify_by`` values. ``prompts``: the two (or more) prompt ids per move
    whose verdicts must all accept a pair; ``ratio-spark silver agreement --write-selection`` writes the
    calibrated choice. The defaults are chosen a priori, not calibrated (docs/silver.md). The transport fields
    (``mode``, ``batch_*``) are ``llm.settings.LLMTransportConfig``; ``batch_state_dir`` None:
    ``<tables root>/silver_batches/<split>``.
    """

    split: SplitName = "test"
    sample: dict[str, SampleSize] = Field(
        default_factory=lambda: {"address": "all", "broaden": "all", "specify": 10_000}
    )
    stratify_by: Literal["marker_entry", "marker"] = "marker_entry"
    seed: int = 13
    model: str = "gemma-local"  # an endpoint name from the ``llm:`` section
    prompts: dict[str, list[str]] = Field(
        default_factory=lambda: {
            "address": ["ordered-v1", "anchored-v1"],
            "broaden": ["ordered-v1", "directional-v1"],
            "specify": ["ordered-v1", "directional-v1"],
        }
    )
    prompt_dir: str | None = None  # None: the prompts shipped in ratio_spark/silver/prompts
    # Ask the second prompt only about pairs the first accepted: the AND rule gives the same set for
    # fewer requests, but rejected pairs then lack the second verdict (its error is skipped_after_reject).
    short_circuit: bool = False
    max_tokens: int = Field(default=256, ge=16)
    calibration_annotator: str | None = None  # None: the annotator who labelled the most pairs

    @field_validator("sample", "prompts", mode="before")
    @classmethod
    def _fill_unnamed_moves(cls, value, info):
        # ``--set silver.sample.specify=500`` names one move: the others keep their defaults (set a
        # move to 0 to leave it out) instead of silently vanishing.
        if isinstance(value, dict):
            default = cls.model_fields[info.field_name].default_factory()
            return {**default, **value}
        return value

    @field_validator("sample")
    @classmethod
    def _sample_moves(cls, value: dict[str, SampleSize]) -> dict[str, SampleSize]:
        for move, size in value.items():
            if move not in MOVES:
                raise ValueError(f"unknown move {move!r} (moves: {', '.join(MOVES)})")
            if isinstance(size, int) and size < 0:
                raise ValueError(f"sample size for {move} must be >= 0 or 'all' (got {size})")
        return value

    @field_validator("prompts")
    @classmethod
    def _prompt_moves(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for move, ids in value.items():
            if move not in MOVES:
                raise ValueError(f"unknown move {move!r} (moves: {', '.join(MOVES)})")
            if not ids:
                raise ValueError(f"no prompt selected for {move}")
            if len(set(ids)) != len(ids):
                raise ValueError(f"prompt ids for {move} repeat: {ids}")
        return value

    @model_validator(mode="after")
    def _every_sampled_move_has_prompts(self) -> "SilverConfig":
        missing = [m for m in self.sample if m not in self.prompts]
        if missing:
            raise ValueError(f"moves {missing} are sampled but have no prompts in silver.prompts")
        return self
