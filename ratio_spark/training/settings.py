"""The ``training:`` section of the YAML configuration (``ratio-spark train``).

Two layers, as in the paper (appendix C, Table 6): the *run* (which moves, model, prefix, loss, where the
data and the models are) lives in the configuration; the *hyperparameter configurations* tried for a model
live in versioned files (shipped: ``ratio_spark/conf/training/<model>.yaml``), one entry per configuration in the shape of
Table 6 (epochs, batch size per device, learning rate, weight decay, warmup ratio, max grad norm, freeze
ratio, max sequence length, seed, rationale). ``ratio-spark train`` runs the selected configurations and
keeps the one with the best validation MRR@10 (``ratio_spark.training.hyperparameters``).

Pure pydantic, no torch: loading a configuration never imports the training stack.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ratio_spark.core.errors import UserError
from ratio_spark.core.schema import MoveName, PrefixMode
from ratio_spark.core.strict import StrictModel


class TrainingInputError(UserError, ValueError):
    """What ``ratio-spark train`` was given cannot be trained on (a hyperparameter file, too few pairs, a model
    it cannot freeze, a folder that is not a run): one line naming it and how to fix it."""


class HardNegativeConfig(StrictModel):
    """Mined hard negatives (beyond the paper; off by default): for each training query, candidates of the
    train pool ranked high by ``miner``, skipping the gold, the query's excluded candidates and every
    candidate from the query's own paper. They become extra columns of MNRL."""

    enabled: bool = False
    miner: str = "bm25-1"  # bm25-1 | bm25-2 | bm25-3 | dense:<model>[:<prefix>]  (the evaluation's retrievers)
    count: int = Field(default=1, ge=1, le=16)  # negatives per query
    skip_top: int = Field(default=0, ge=0)  # ranks to skip after filtering (likely false negatives)
    depth: int = Field(default=100, ge=1)  # candidates retrieved per query before filtering


class DistributedConfig(StrictModel):
    """How to launch several training processes. ``none``: this process (torchrun/accelerate launch it
    themselves, see docs/training.md); ``torch_distributor``: PySpark's TorchDistributor."""

    launcher: Literal["none", "torch_distributor"] = "none"
    num_processes: int = Field(default=2, ge=1)
    local_mode: bool = True  # TorchDistributor: processes on the driver (True) or on executors (False)
    use_gpu: bool = False
    backend: Literal["gloo", "nccl"] | None = None  # None: nccl on GPUs, gloo on CPUs


class TrainingConfig(StrictModel):
    """What ``ratio-spark train`` trains, on which data, and where it writes; command-line flags override."""

    source: str | None = None  # tables root or release root; default: tables.root
    moves: list[MoveName] = Field(default_factory=lambda: ["specify"])
    # per_move: one model per move; unified: one model for all moves, each query with its move's instruction
    mode: Literal["per_move", "unified"] = "per_move"
    model: str = "minilm"  # alias (minilm, mpnet, evaluation.models), folder or sentence-transformers name
    prefix: PrefixMode = "generic"
    hyperparameters: str = "minilm"  # a shipped file by name (minilm, mpnet) or a path
    configurations: list[str] | None = None  # ids to run from the file; None: all of them
    loss: Literal["mnrl", "cached_mnrl"] = "mnrl"
    cached_mini_batch_size: int = Field(default=32, ge=1)  # cached_mnrl: texts per forward pass
    output: str = "models"
    run_name: str | None = None  # default: <model>-<move|unified>-<prefix>
    eval_steps: int | None = Field(default=None, ge=1)  # validate every N steps too (always after each epoch)
    validation_max_queries: int | None = Field(default=None, ge=1)  # per move, first N by id (quick looks only)
    max_train_pairs: int | None = Field(default=None, ge=2)  # per move, a seeded sample (quick looks, tests)
    validation_batch_size: int = Field(default=64, ge=1)
    hard_negatives: HardNegativeConfig = Field(default_factory=HardNegativeConfig)
    distributed: DistributedConfig = Field(default_factory=DistributedConfig)
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
