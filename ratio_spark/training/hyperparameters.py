"""The hyperparameter files (shipped in ``ratio_spark/conf/training/*.yaml``, named by their stem: ``minilm``,
``mpnet``; or any file a user writes): the configurations tried for a model, one entry per
configuration in the shape of the paper's Table 6. ``ratio-spark train`` runs the selected ones and keeps the one
with the best validation MRR@10. Change a configuration only by adding a new id, so that a model card's (file, id)
keeps naming what trained it.

Pure pydantic, no torch.
"""

from __future__ import annotations

from importlib.resources.abc import Traversable
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from ratio_spark.core.config import SHIPPED_CONF_DIR, validation_message
from ratio_spark.core.files import read_text
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
    """A versioned file of configurations for one model (``ratio_spark/conf/training/*.yaml``)."""

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


SHIPPED_HYPERPARAMETERS = SHIPPED_CONF_DIR / "training"


def shipped_hyperparameters() -> list[str]:
    """Names of the hyperparameter files shipped inside the package (``--hyperparameters mpnet``)."""
    return sorted(p.name.removesuffix(".yaml") for p in SHIPPED_HYPERPARAMETERS.iterdir() if p.name.endswith(".yaml"))


def find_hyperparameters(name: str | Path) -> Path | Traversable:
    """A hyperparameter file: a path (relative to the working directory), else a shipped one by name, so the
    default works wherever the package is installed and whatever the working directory."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = SHIPPED_HYPERPARAMETERS / (path.name if path.suffix == ".yaml" else f"{path.name}.yaml")
    if len(path.parts) == 1 and shipped.is_file():
        return shipped
    problem = f"{name} is a folder, not a hyperparameter file" if path.is_dir() else f"hyperparameter file not found: {name}"
    raise TrainingInputError(f"{problem} (training.hyperparameters; a YAML file, or a shipped one: "
                             f"{', '.join(shipped_hyperparameters())})")


def load_hyperparameters(name: str | Path, ids: list[str] | None = None) -> list[HyperParameters]:
    """The configurations of a hyperparameter file (all, or those with the given ids, in file order)."""
    path = find_hyperparameters(name)
    text = read_text(path, TrainingInputError)
    try:
        tree = yaml.safe_load(text)
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
