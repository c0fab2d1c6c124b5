"""Training and validation speed of ``ratio-spark train`` on this machine (MiniLM by default).

* **training pairs/s**: the trainer ``ratio-spark train`` builds (``ratio_spark.training.trainer.build_trainer``:
  MNRL, no-duplicate batches, the configuration's batch size and max length), on real train pairs, timed over the
  optimisation steps only (a callback around each step; the first step, which warms up, is left out);
* **validation sentences/s**: the validation evaluator's encoder on real pool sentences (what one validation pass
  costs: pool + queries);
* the process CPU seconds beside the wall seconds, and the load average, since the machine is shared.

Each measurement runs ``--repeats`` times; the JSON has every run and the medians.

    python benchmarks/training_throughput.py --source data/tables/acl --out benchmarks/results/training_throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def step_timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.seconds: list[float] = []
            self.cpu: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self._started, self._cpu = time.perf_counter(), time.process_time()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._started)
            self.cpu.append(time.process_time() - self._cpu)

    return StepTimer()


def measure_training(source: str, model: str, hp, steps: int, loss: str, mini_batch: int) -> dict:
    from ratio_spark.evaluation.data import load_split
    from ratio_spark.training.data import training_pairs
    from ratio_spark.training.evaluator import ValidationEvaluator
    from ratio_spark.training.settings import TrainingConfig
    from ratio_spark.training.trainer import build_trainer

    train = load_split(source, "train", ["specify"])
    pairs = training_pairs(train, "specify", max_pairs=hp.batch_size * (steps + 1), seed=hp.seed)
    validation = load_split(source, "validation", ["specify"], max_queries=5)
    settings = TrainingConfig(model=model, moves=["specify"], progress=False, loss=loss,
                              cached_mini_batch_size=mini_batch)
    evaluator = ValidationEvaluator(validation, model, "generic")
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(settings, hp, {"specify": pairs}, evaluator, {"specify": ("query: ", "document: ")},
                                Path(tmp))
        trainer.args.eval_strategy = trainer.args.save_strategy = "no"  # time the steps, nothing else
        trainer.args.load_best_model_at_end = False
        trainer.args.max_steps = steps + 1  # the first step warms up and is not timed
        timer = step_timer()
        trainer.add_callback(timer)
        trainer.train()
    import resource

    timed, cpu = timer.seconds[1:], timer.cpu[1:]
    return {"pairs": len(pairs), "loss": loss, "batch_size": hp.batch_size, "max_seq_length": hp.max_seq_length,
            "timed_steps": len(timed), "pairs_per_second": round(hp.batch_size * len(timed) / sum(timed), 2),
            "cpu_seconds_per_step": round(sum(cpu) / len(cpu), 2), "wall_seconds_per_step": round(sum(timed) / len(timed), 2),
            "peak_rss_gib_so_far": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


def measure_encoding(source: str, model: str, texts: int, max_seq_length: int | None) -> dict:
    from ratio_spark.evaluation.data import load_split
    from ratio_spark.evaluation.models import load_sentence_transformer
    from ratio_spark.evaluation.retrieval.dense import DenseRetriever

    pool = load_split(source, "validation", ["specify"]).pool
    encoder = load_sentence_transformer(model, "cpu")
    if max_seq_length:
        encoder.max_seq_length = max_seq_length
    retriever = DenseRetriever.from_model(encoder, model, "generic", progress=False)
    sample = pool.texts[:texts]
    started, cpu = time.perf_counter(), time.process_time()
    retriever.encode(sample, "document: ")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"texts": len(sample), "sentences_per_second": round(len(sample) / wall, 1),
            "cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1), "pool": len(pool)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", required=True, help="tables or release root with train and validation splits")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--hyperparameters", default="minilm")
    parser.add_argument("--configuration", default="1")
    parser.add_argument("--loss", choices=["mnrl", "cached_mnrl"], default="mnrl")
    parser.add_argument("--mini-batch", type=int, default=16, help="cached_mnrl: texts per forward pass")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()

    from ratio_spark.evaluation.models import offline
    from ratio_spark.training.hyperparameters import load_hyperparameters

    offline()
    hp, = load_hyperparameters(args.hyperparameters, [args.configuration])
    runs = []
    for _ in range(args.repeats):
        load = os.getloadavg()[0]
        runs.append({"load_average_1min": round(load, 2),
                     "training": measure_training(args.source, args.model, hp, args.steps, args.loss, args.mini_batch),
                     "encoding": measure_encoding(args.source, args.model, args.texts, hp.max_seq_length)})
        print(json.dumps(runs[-1]), flush=True)
    report = {
        "model": args.model, "configuration": hp.model_dump(), "source": args.source, "cpu_count": os.cpu_count(),
        "runs": runs,
        "median_training_pairs_per_second": statistics.median(r["training"]["pairs_per_second"] for r in runs),
        "median_encoding_sentences_per_second": statistics.median(r["encoding"]["sentences_per_second"] for r in runs),
        "median_load_average": statistics.median(r["load_average_1min"] for r in runs),
    }
    print(f"medians over {args.repeats} runs: training {report['median_training_pairs_per_second']} pairs/s, "
          f"encoding {report['median_encoding_sentences_per_second']} sentences/s, load {report['median_load_average']}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
