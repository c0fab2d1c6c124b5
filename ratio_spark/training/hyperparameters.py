"""The hyperparameter files (``conf/training/*.yaml``): the configurations tried for a model, one entry per
configuration in the shape of the paper's Table 6. ``ratio-spark train`` runs the selected ones and keeps the one
with the best validation MRR@10. Change a configuration only by adding a new id, so that a model card's (file, id)
keeps naming what trained it.

Pure pydantic, no torch.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from ratio_spark.core.config import validation_message
from ratio_spark.core.strict import StrictModel
from ratio_spark.training.settings import TrainingInputError


class HyperParameters(StrictModel):
    """One row of the paper's Table 6. ``batch_size`` is per device: with N processes, each query sees
    ``batch_size * N - 1`` in-batch negatives (the losses gather across devices)."""

    id: str
    epochs: float = Field(default=1, gt=0)
    batch_size: int = Field(default=32, ge=2)
    learning_rate: float = Field(default=2e-5, gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    warmup_ratio: float = Field(default=0.1, ge=0, lt=1)
    max_grad_norm: float = Field(default=1.0, gt=0)
    freeze_ratio: float = Field(default=0.0, ge=0, lt=1)  # share of the bottom transformer layers kept frozen
    max_seq_length: int | None = Field(default=None, ge=8)  # None: the model's own
    scale: float = Field(default=20.0, gt=0)  # MNRL's inverse temperature
    seed: int = 42
    rationale: str = ""

    @field_validator("id", mode="before")
    @classmethod
    def _as_text(cls, value):
        return str(value)


class HyperParameterFile(StrictModel):
    """A versioned file of configurations for one model (``conf/training/*.yaml``)."""

    model: str | None = None  # the model the file was written for (documentation; not enforced)
    version: str = "1"
    notes: str = ""
    configurations: list[HyperParameters]

    @model_validator(mode="after")
    def _unique_ids(self) -> "HyperParameterFile":
        ids = [c.id for c in self.configurations]
        if not ids:
            raise ValueError("configurations is empty")
        if len(set(ids)) != len(ids):
            raise ValueError(f"configuration ids repeat: {ids}")
        return self


def load_hyperparameters(path: str | Path, ids: list[str] | None = None) -> list[HyperParameters]:
    """The configurations of a hyperparameter file (all, or those with the given ids, in file order)."""
    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise TrainingInputError(f"hyperparameter file not found: {path} (training.hyperparameters)") from None
    except yaml.YAMLError as exc:
        raise TrainingInputError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    try:
        parsed = HyperParameterFile.model_validate(tree or {})
    except ValidationError as exc:
        raise TrainingInputError(validation_message(exc, f"invalid hyperparameter file {path}")) from None
    if ids is None:
        return parsed.configurations
    known = {c.id: c for c in parsed.configurations}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise TrainingInputError(f"{path} has no configuration {unknown}; it has {list(known)} (training.configurations)")
    return [known[i] for i in ids]
