"""The whole configuration: the pipeline's sections and those of every package above it, one YAML tree.

It sits above the packages whose sections it composes, so that ``core/`` stays the ground floor; the loading
machinery (``extends:``, ``--set``, one-line errors) is ``ratio_spark.core.config``'s. ``ratio-spark config``
prints the resolved configuration.
"""

from __future__ import annotations

import os

import yaml
from pydantic import Field

from ratio_spark.core.config import load_model
from ratio_spark.evaluation.settings import EvaluationConfig
from ratio_spark.humaneval.settings import HumanEvalConfig
from ratio_spark.inspire.settings import InspireConfig
from ratio_spark.llm.settings import LLMConfig
from ratio_spark.pipeline.settings import PipelineConfig
from ratio_spark.rerank.settings import RerankConfig
from ratio_spark.silver.settings import SilverConfig
from ratio_spark.training.settings import TrainingConfig


class Config(PipelineConfig):
    """The pipeline's sections (first, in the printed order) and the other packages' ones."""

    llm: LLMConfig = Field(default_factory=LLMConfig)
    silver: SilverConfig = Field(default_factory=SilverConfig)
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    humaneval: HumanEvalConfig = Field(default_factory=HumanEvalConfig)
    inspire: InspireConfig = Field(default_factory=InspireConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML configuration (optionally ``extends:`` another), apply overrides, validate."""
    return load_model(Config, path, overrides)
