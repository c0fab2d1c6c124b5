"""The ``training:`` section of the YAML configuration (``ratio-spark train``) and the hyperparameter files.

Two layers, as in the paper (appendix C, Table 6): the *run* (which moves, model, prefix, loss, where the
data and the models are) lives in the configuration; the *hyperparameter configurations* tried for a model
live in versioned files (``conf/training/<model>.yaml``), one entry per configuration in the shape of
Table 6 (epochs, batch size per device, learning rate, weight decay, warmup ratio, max grad norm, freeze
ratio, max sequence length, seed, rationale). ``ratio-spark train`` runs the selected configurations and
keeps the one with the best validation MRR@10.

Pure pydantic, no torch: loading a configuration never imports the training stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

MoveName = Literal["address", "broaden", "specify"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HyperParameters(_Strict):
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


class HyperParameterFile(_Strict):
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


class HardNegativeSettings(_Strict):
    """Mined hard negatives (beyond the paper; off by default): for each training query, candidates of the
    train pool ranked high by ``miner``, skipping the gold, the query's excluded candidates and every
    candidate from the query's own paper. They become extra columns of MNRL."""

    enabled: bool = False
    miner: str = "bm25-1"  # bm25-1 | bm25-2 | bm25-3 | dense:<model>[:<prefix>]  (the evaluation's retrievers)
    count: int = Field(default=1, ge=1, le=16)  # negatives per query
    skip_top: int = Field(default=0, ge=0)  # ranks to skip after filtering (likely false negatives)
    depth: int = Field(default=100, ge=1)  # candidates retrieved per query before filtering


class DistributedSettings(_Strict):
    """How to launch several training processes. ``none``: this process (torchrun/accelerate launch it
    themselves, see docs/training.md); ``torch_distributor``: PySpark's TorchDistributor."""

    launcher: Literal["none", "torch_distributor"] = "none"
    num_processes: int = Field(default=2, ge=1)
    local_mode: bool = True  # TorchDistributor: processes on the driver (True) or on executors (False)
    use_gpu: bool = False
    backend: Literal["gloo", "nccl"] | None = None  # None: nccl on GPUs, gloo on CPUs


class TrainingConfig(_Strict):
    """What ``ratio-spark train`` trains, on which data, and where it writes; command-line flags override."""

    source: str | None = None  # tables root or release root; default: tables.root
    moves: list[MoveName] = Field(default_factory=lambda: ["specify"])
    # per_move: one model per move; unified: one model for all moves, each query with its move's instruction
    mode: Literal["per_move", "unified"] = "per_move"
    model: str = "minilm"  # alias (minilm, mpnet, evaluation.models), folder or sentence-transformers name
    prefix: Literal["none", "generic", "recommended", "instructions"] = "generic"
    hyperparameters: str = "conf/training/minilm.yaml"
    configurations: list[str] | None = None  # ids to run from the file; None: all of them
    loss: Literal["mnrl", "cached_mnrl"] = "mnrl"
    cached_mini_batch_size: int = Field(default=32, ge=1)  # cached_mnrl: texts per forward pass
    output: str = "models"
    run_name: str | None = None  # default: <model>-<move|unified>-<prefix>
    eval_steps: int | None = Field(default=None, ge=1)  # validate every N steps too (always after each epoch)
    validation_max_queries: int | None = Field(default=None, ge=1)  # per move, first N by id (quick looks only)
    max_train_pairs: int | None = Field(default=None, ge=2)  # per move, a seeded sample (quick looks, tests)
    validation_batch_size: int = Field(default=64, ge=1)
    hard_negatives: HardNegativeSettings = Field(default_factory=HardNegativeSettings)
    distributed: DistributedSettings = Field(default_factory=DistributedSettings)
    device: str | None = None  # None: cuda when torch sees one
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"  # mixed precision on GPUs; fp32 on CPUs
    keep_checkpoints: bool = False  # keep every configuration's trainer checkpoints (large)
    dataloader_workers: int = Field(default=0, ge=0)
    progress: bool = True

    @field_validator("moves")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("moves is empty")
        if len(set(value)) != len(value):
            raise ValueError("a move is listed twice")
        return value

    @model_validator(mode="after")
    def _unified_needs_instructions(self) -> "TrainingConfig":
        if self.mode == "unified" and self.prefix != "instructions":
            raise ValueError("mode unified needs prefix instructions: the move is given to the model as its "
                             "instruction (the paper's appendix C)")
        return self


def load_hyperparameters(path: str | Path, ids: list[str] | None = None) -> list[HyperParameters]:
    """The configurations of a hyperparameter file (all, or those with the given ids, in file order)."""
    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"hyperparameter file not found: {path} (training.hyperparameters)") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from None
    try:
        parsed = HyperParameterFile.model_validate(tree or {})
    except ValidationError as exc:
        lines = [f"  {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise ValueError(f"invalid hyperparameter file {path}:\n" + "\n".join(lines)) from None
    if ids is None:
        return parsed.configurations
    known = {c.id: c for c in parsed.configurations}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"{path} has no configuration {unknown}; it has {list(known)} (training.configurations)")
    return [known[i] for i in ids]
