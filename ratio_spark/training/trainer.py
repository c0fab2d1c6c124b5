"""Fine-tune a bi-encoder on a move (or on all moves at once) with the sentence-transformers trainer.

One *run* trains one model: a move's retriever (``mode: per_move``), or the unified retriever (``mode:
unified``: one model for every move, each query carrying its move's instruction). A run tries each
hyperparameter configuration of its file; each configuration is a ``SentenceTransformerTrainer`` with

* MultipleNegativesRankingLoss (in-batch negatives: the golds of the other queries in the batch), or
  CachedMultipleNegativesRankingLoss (GradCache) for large batches on small memory; both gather the
  in-batch candidates across processes when there are several (the paper's four-GPU setting);
* ``BatchSamplers.NO_DUPLICATES``: no batch holds the same text twice, in any column, so no in-batch
  negative is a copy of a query's own gold;
* the prefixes of evaluation (``DenseRetriever.prefixes``), given as the trainer's ``prompts`` so that a
  model is trained and evaluated with the same ones;
* :class:`~ratio_spark.training.evaluator.ValidationEvaluator` after every epoch (and every ``eval_steps``
  steps), ``load_best_model_at_end`` with ``metric_for_best_model = eval_validation_mrr@10``.

The run keeps the configuration with the best validation MRR@10 as ``<output>/<run>/model``: a plain
sentence-transformers folder (its prompts saved in its config) with a model card. Under torchrun,
accelerate or TorchDistributor every process runs this same code; only the first writes files.
"""

from __future__ import annotations

import math
import os
import platform
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from ratio_spark.evaluation.data import BenchmarkSplit, load_split
from ratio_spark.evaluation.retrieval.cache import EmbeddingCache
from ratio_spark.evaluation.retrieval.dense import DenseRetriever
from ratio_spark.evaluation.settings import EvaluationConfig
from ratio_spark.training.data import TrainingPairs, add_hard_negatives, data_version, training_pairs
from ratio_spark.training.evaluator import PRIMARY, ValidationEvaluator
from ratio_spark.training.hyperparameters import HyperParameters, load_hyperparameters
from ratio_spark.training.settings import TrainingConfig, TrainingInputError

BEST_METRIC = f"eval_validation_{PRIMARY}"


def process_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


@dataclass
class ConfigurationResult:
    id: str
    hyperparameters: dict
    best_mrr10: float
    best_step: int | None
    best_epoch: float | None
    curve: list[dict]  # one point per validation: epoch, step, metrics
    train_loss: list[dict]  # epoch, step, loss
    steps: int
    train_pairs_seen: int
    wall_seconds: float
    validation_seconds: float
    pairs_per_second: float  # training pairs / (wall time - validation time), over all processes


@dataclass
class RunResult:
    name: str
    mode: str
    moves: list[str]
    base_model: str
    base_model_path: str
    prefix: str
    prompts: dict
    output_dir: str
    model_dir: str
    selected: str
    baseline: dict  # validation metrics of the untuned model
    configurations: list[ConfigurationResult]
    data: dict
    counts: dict
    settings: dict
    hardware: dict
    world_size: int
    wall_seconds: float = 0.0
    evaluate_spec: str = ""  # what to give ``ratio-spark evaluate --retrievers``

    @property
    def best(self) -> ConfigurationResult:
        return next(c for c in self.configurations if c.id == self.selected)

    def to_dict(self) -> dict:
        return asdict(self)


def run_name(settings: TrainingConfig, moves: list[str]) -> str:
    from ratio_spark.evaluation.models import display_name

    target = "unified" if settings.mode == "unified" else moves[0]
    base = settings.run_name or f"{display_name(settings.model)}-{target}-{settings.prefix}"
    if settings.run_name and settings.mode == "per_move" and len(settings.moves) > 1:
        base = f"{settings.run_name}-{target}"
    return base


def hardware() -> dict:
    import torch

    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpu_count": os.cpu_count(), "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def trained_prompts(retriever: DenseRetriever, moves: list[str], prefix_mode: str) -> dict[str, str]:
    """The prompts saved in the model's config: ``query``/``document`` are what it was trained with (so
    ``encode_query``/``encode_document`` and ``dense:<folder>:recommended`` use them); an instruction-trained
    model also gets one prompt per move."""
    query, document = retriever.prefixes(moves[0])
    if prefix_mode != "instructions":
        return {"query": query, "document": document}
    return {"query": "", "document": document, **{m: retriever.prefixes(m)[0] for m in moves}}


def freeze_bottom_layers(model, ratio: float) -> int:
    """Freeze the embeddings and the bottom ``ratio`` of the transformer layers (Table 6's "frz")."""
    if ratio <= 0:
        return 0
    backbone = model[0].auto_model
    encoder = getattr(backbone, "encoder", None)
    layers = getattr(encoder, "layer", None) or getattr(backbone, "layers", None)
    embeddings = getattr(backbone, "embeddings", None)
    if layers is None or embeddings is None:
        raise TrainingInputError(f"freeze_ratio needs a BERT-like model (embeddings + encoder layers); "
                         f"{type(backbone).__name__} has none: set freeze_ratio to 0")
    frozen = int(len(layers) * ratio)
    for module in [embeddings, *layers[:frozen]]:
        for parameter in module.parameters():
            parameter.requires_grad = False
    return frozen


def _datasets(pairs: dict[str, TrainingPairs], prompts_by_move: dict[str, tuple[str, str]], unified: bool):
    """The train dataset(s) and the trainer's ``prompts``: one Dataset, or one per move (unified)."""
    from datasets import Dataset, DatasetDict

    def column_prompts(move: str) -> dict[str, str]:
        query, document = prompts_by_move[move]
        prompts = {"query": query, "gold": document}
        prompts.update({f"negative_{i}": document for i in range(1, len(pairs[move].negatives) + 1)})
        return {column: text for column, text in prompts.items() if text}

    if not unified:
        (move, rows), = pairs.items()
        return Dataset.from_dict(rows.columns()), column_prompts(move)
    dataset = DatasetDict({move: Dataset.from_dict(rows.columns()) for move, rows in pairs.items() if len(rows)})
    return dataset, {move: column_prompts(move) for move in dataset}


class EvaluateAtEpochEnd:
    """With ``eval_steps``, also validate (and checkpoint) at the end of every epoch, unless that step was
    just validated."""

    def __new__(cls):
        from transformers import TrainerCallback

        class _Callback(TrainerCallback):
            def on_epoch_end(self, args, state, control, **kwargs):
                done = any(entry.get("step") == state.global_step and BEST_METRIC in entry for entry in state.log_history)
                if args.eval_steps and not done:
                    control.should_evaluate = True
                    control.should_save = True
                return control

        return _Callback()


def warmup_steps(optimisation_steps: int, warmup_ratio: float) -> int:
    """Whole warm-up steps, rounded down. The trainer rounds a ratio up, so a run of a few steps (Broaden: 26
    pairs, one batch) spent them all at a learning rate of 0 and left the model as it was."""
    return int(optimisation_steps * warmup_ratio)


def build_trainer(settings: TrainingConfig, hp: HyperParameters, pairs: dict[str, TrainingPairs],
                  evaluator: ValidationEvaluator, prompts_by_move: dict[str, tuple[str, str]], folder: Path,
                  aliases: dict[str, str] | None = None):
    """A ``SentenceTransformerTrainer`` for one configuration, from a fresh copy of the base model."""
    import torch
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers, MultiDatasetBatchSamplers
    from sentence_transformers.sentence_transformer import losses
    from transformers import set_seed

    from ratio_spark.evaluation.models import load_sentence_transformer

    set_seed(hp.seed)
    device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = load_sentence_transformer(settings.model, device, aliases)
    if hp.max_seq_length:
        model.max_seq_length = hp.max_seq_length
    freeze_bottom_layers(model, hp.freeze_ratio)
    dataset, prompts = _datasets(pairs, prompts_by_move, settings.mode == "unified")
    gather = world_size() > 1
    if settings.loss == "cached_mnrl":
        loss = losses.CachedMultipleNegativesRankingLoss(model, scale=hp.scale, gather_across_devices=gather,
                                                         mini_batch_size=settings.cached_mini_batch_size)
    else:
        loss = losses.MultipleNegativesRankingLoss(model, scale=hp.scale, gather_across_devices=gather)
    strategy = "steps" if settings.eval_steps else "epoch"
    n_pairs = sum(len(p) for p in pairs.values())
    if world_size() > 1:  # data-parallel training drops partial batches: a move short of one would go untrained
        short = {m: len(p) for m, p in pairs.items() if 0 < len(p) < hp.batch_size}
        batches = sum(len(p) // hp.batch_size for p in pairs.values())
        if short or batches < world_size():
            raise TrainingInputError(f"too few training pairs for {world_size()} processes at batch_size {hp.batch_size}: "
                             f"{ {m: len(p) for m, p in pairs.items()} } make {batches} full batches (each process "
                             f"needs one, and every move at least one); lower batch_size or use fewer processes")
    steps_per_epoch = max(1, -(-n_pairs // (hp.batch_size * world_size())))
    optimisation_steps = max(1, math.ceil(steps_per_epoch * hp.epochs))
    backend = settings.distributed.backend or ("nccl" if device.startswith("cuda") else "gloo")
    args = SentenceTransformerTrainingArguments(
        output_dir=str(folder / "checkpoints"),
        num_train_epochs=hp.epochs,
        per_device_train_batch_size=hp.batch_size,
        learning_rate=hp.learning_rate,
        weight_decay=hp.weight_decay,
        warmup_steps=warmup_steps(optimisation_steps, hp.warmup_ratio),
        max_grad_norm=hp.max_grad_norm,
        seed=hp.seed,
        data_seed=hp.seed,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        multi_dataset_batch_sampler=MultiDatasetBatchSamplers.PROPORTIONAL,
        prompts=prompts or None,
        eval_strategy=strategy,
        save_strategy=strategy,
        eval_steps=settings.eval_steps,
        save_steps=settings.eval_steps,
        load_best_model_at_end=True,
        metric_for_best_model=BEST_METRIC,
        greater_is_better=True,
        save_total_limit=2,  # the best checkpoint is always kept, plus the latest
        save_only_model=True,  # no optimizer state: checkpoints only serve model selection
        logging_strategy="steps",
        logging_steps=max(1, steps_per_epoch // 10),
        logging_first_step=True,
        report_to="none",
        disable_tqdm=not settings.progress,
        use_cpu=device == "cpu",
        bf16=settings.precision == "bf16",
        fp16=settings.precision == "fp16",
        ddp_backend=backend if world_size() > 1 else None,
        dataloader_num_workers=settings.dataloader_workers,
    )
    return SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss, evaluator=evaluator,
                                      callbacks=[EvaluateAtEpochEnd()])


def train_configuration(settings: TrainingConfig, hp: HyperParameters, pairs: dict[str, TrainingPairs],
                        evaluator: ValidationEvaluator, prompts_by_move: dict[str, tuple[str, str]],
                        folder: Path, log: Callable[[str], None],
                        aliases: dict[str, str] | None = None) -> tuple[ConfigurationResult, object]:
    """Train one configuration; returns its result and the restored best model."""
    trainer = build_trainer(settings, hp, pairs, evaluator, prompts_by_move, folder, aliases)
    n_pairs = sum(len(p) for p in pairs.values())
    validated_before = len(evaluator.history)
    started = time.perf_counter()
    output = trainer.train()
    wall = time.perf_counter() - started
    curve = [dict(p) for p in evaluator.history[validated_before:]]
    validation_seconds = sum(p["seconds"] for p in curve)
    state = trainer.state
    best_step = int(state.best_model_checkpoint.rsplit("-", 1)[-1]) if state.best_model_checkpoint else None
    best_point = next((p for p in curve if p["step"] == best_step), None)
    losses_logged = [{"epoch": e.get("epoch"), "step": e.get("step"), "loss": e["loss"]}
                     for e in state.log_history if "loss" in e]
    seen = int(round(n_pairs * hp.epochs))
    train_seconds = max(wall - validation_seconds, 1e-9)
    result = ConfigurationResult(
        id=hp.id, hyperparameters=hp.model_dump(),
        best_mrr10=float(state.best_metric) if state.best_metric is not None else float("nan"),
        best_step=best_step, best_epoch=best_point["epoch"] if best_point else None, curve=curve,
        train_loss=losses_logged, steps=int(output.global_step), train_pairs_seen=seen,
        wall_seconds=round(wall, 1), validation_seconds=round(validation_seconds, 1),
        pairs_per_second=round(seen / train_seconds, 2),
    )
    log(f"  configuration {hp.id}: best validation MRR@10 {100 * result.best_mrr10:.2f} at step {best_step} "
        f"(epoch {result.best_epoch}); {result.pairs_per_second} pairs/s; {wall:.0f}s")
    return result, trainer.model


def load_data(settings: TrainingConfig, source: str, moves: list[str]) -> tuple[BenchmarkSplit, BenchmarkSplit]:
    """The train and validation splits (never the test split)."""
    train = load_split(source, "train", moves)
    validation = load_split(source, "validation", moves, max_queries=settings.validation_max_queries)
    return train, validation


def run_training(settings: TrainingConfig, source: str, log: Callable[[str], None] = print,
                 evaluation: EvaluationConfig | None = None) -> list[RunResult]:
    """Every run the settings ask for: one per move (per_move) or one for all moves (unified).

    ``evaluation`` (the configuration's ``evaluation:`` section) lends its model aliases, instruction template
    and embedding cache, so that training validates the way ``evaluate`` scores.
    """
    from ratio_spark.evaluation.models import offline

    offline()
    evaluation = evaluation or EvaluationConfig()
    hyperparameters = load_hyperparameters(settings.hyperparameters, settings.configurations)
    train, validation = load_data(settings, source, settings.moves)
    log(f"train split: {train.summary()['queries_by_move']} queries, pool {len(train.pool)}; validation split: "
        f"{validation.summary()['queries_by_move']} queries, pool {len(validation.pool)}")
    groups = [list(settings.moves)] if settings.mode == "unified" else [[m] for m in settings.moves]
    version = data_version(source)
    return [train_run(settings, moves, train, validation, hyperparameters, version, log, evaluation) for moves in groups]


def train_run(settings: TrainingConfig, moves: list[str], train: BenchmarkSplit, validation: BenchmarkSplit,
              hyperparameters: list[HyperParameters], version: dict, log: Callable[[str], None],
              evaluation: EvaluationConfig) -> RunResult:
    from ratio_spark.evaluation.models import load_sentence_transformer, resolve_model

    started = time.perf_counter()
    aliases = evaluation.models
    template = evaluation.dense.instruction_template
    name = run_name(settings, moves)
    out = Path(settings.output) / name
    writer = process_rank() == 0
    base_path = resolve_model(settings.model, aliases)
    log(f"== train {name}: {settings.model} ({base_path}), moves {moves}, prefix {settings.prefix}, "
        f"{len(hyperparameters)} configuration(s), {world_size()} process(es) ==")
    pairs = {m: training_pairs(train, m, settings.max_train_pairs, seed=hyperparameters[0].seed) for m in moves}
    empty = [m for m, p in pairs.items() if not len(p)]
    if len(empty) == len(moves):
        raise TrainingInputError(f"the train split has no pairs for {moves}: nothing to train on")
    if settings.hard_negatives.enabled:
        pairs = {m: mine_negatives(settings, p, train, evaluation) if len(p) else p for m, p in pairs.items()}
    counts = {m: p.counts for m, p in pairs.items()}
    log("  training pairs: " + ", ".join(f"{m} {len(p)}" for m, p in pairs.items()))

    base = load_sentence_transformer(settings.model, settings.device, aliases)
    retriever = DenseRetriever.from_model(base, base_path, settings.prefix, instruction_template=template)
    prompts_by_move = {m: retriever.prefixes(m) for m in moves}
    evaluator = ValidationEvaluator(validation, base_path, settings.prefix, moves=moves,
                                    batch_size=settings.validation_batch_size, instruction_template=template)
    # the untuned model's embeddings are cached as evaluate caches them: the runs of several moves encode its
    # validation pool once
    cache = EmbeddingCache(evaluation.cache_dir, enabled=evaluation.cache)
    baseline = evaluator.score(base, cache=cache) if writer else {}
    if baseline:
        log(f"  untuned validation MRR@10: {100 * baseline[PRIMARY]:.2f}")
    prompts = trained_prompts(retriever, moves, settings.prefix)
    del base, retriever

    results: list[ConfigurationResult] = []
    for hp in hyperparameters:
        folder = out / "configurations" / hp.id
        result, model = train_configuration(settings, hp, pairs, evaluator, prompts_by_move, folder, log, aliases)
        results.append(result)
        if writer:
            model.prompts = dict(prompts)
            model.save_pretrained(str(folder / "model"))
            if not settings.keep_checkpoints:
                shutil.rmtree(folder / "checkpoints", ignore_errors=True)
        del model
    selected = max(results, key=lambda r: r.best_mrr10)
    run = RunResult(
        name=name, mode=settings.mode, moves=moves, base_model=settings.model, base_model_path=base_path,
        prefix=settings.prefix, prompts=prompts, output_dir=str(out), model_dir=str(out / "model"),
        selected=selected.id, baseline=baseline, configurations=results, data=version, counts=counts,
        settings=settings.model_dump(mode="json"), hardware=hardware(), world_size=world_size(),
        evaluate_spec=f"dense:{out / 'model'}:{settings.prefix}",
    )
    run.wall_seconds = round(time.perf_counter() - started, 1)
    if writer:
        from ratio_spark.training.card import write_run

        write_run(run, keep_all=settings.keep_checkpoints)
    log(f"  selected configuration {selected.id}: validation MRR@10 {100 * selected.best_mrr10:.2f} "
        f"-> {run.model_dir}")
    return run


def mine_negatives(settings: TrainingConfig, pairs: TrainingPairs, train: BenchmarkSplit,
                   evaluation: EvaluationConfig) -> TrainingPairs:
    from ratio_spark.evaluation.retrieval.registry import build_retriever

    options = settings.hard_negatives
    retriever = build_retriever(options.miner, evaluation.model_copy(update={"progress": settings.progress}))
    return add_hard_negatives(pairs, train, retriever, count=options.count, skip_top=options.skip_top,
                              depth=options.depth)
