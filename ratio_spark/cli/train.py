"""fine-tune retrievers per move or one unified retriever (train + validation splits), or tabulate trained ones

    ratio-spark train --conf conf/training-acl.yaml --moves specify,address      # one model per move
    ratio-spark train --conf conf/training-acl.yaml --mode unified               # one model, move instructions
    ratio-spark train report --evaluation RESULTS --runs models/acl/* --out DIR  # Table 7 shape, transfer, curves

Settings come from the ``training:`` section of the configuration (``ratio_spark.training.settings``) and a
hyperparameter file (``ratio_spark/conf/training/*.yaml``); the flags below override them. Reads the train and
validation splits only; score the saved model on test with ``ratio-spark evaluate --retrievers
dense:<model folder>:<prefix>``. Runs under ``torchrun``/``accelerate launch`` as it is, or launches itself
on PySpark's TorchDistributor (``--launcher torch_distributor``). See docs/training.md.
"""

from __future__ import annotations

import argparse

from ratio_spark.cli.common import comma_list
from ratio_spark.core.schema import PREFIX_MODES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args

    parser.add_argument("action", nargs="?", choices=["fit", "report"], default="fit",
                        help="fit (default): train; report: tables and curves of trained models")
    add_config_args(parser)
    fit = parser.add_argument_group("fit")
    fit.add_argument("--source", help="tables root or release root (default: training.source, else tables.root)")
    fit.add_argument("--moves", help="comma-separated moves (default: training.moves)")
    fit.add_argument("--mode", choices=["per_move", "unified"], help="one model per move, or one for all moves")
    fit.add_argument("--model", help="base model: minilm, mpnet, a folder or a sentence-transformers name")
    fit.add_argument("--prefix", choices=PREFIX_MODES)
    fit.add_argument("--hyperparameters", help="hyperparameter file: a shipped one by name (minilm, mpnet) or a path")
    fit.add_argument("--configurations", help="comma-separated configuration ids of the file (default: all)")
    fit.add_argument("--loss", choices=["mnrl", "cached_mnrl"])
    fit.add_argument("--output", help="folder for the run folders (default: training.output)")
    fit.add_argument("--run-name", help="run folder name (default: <model>-<move|unified>-<prefix>)")
    fit.add_argument("--eval-steps", type=int, help="also validate every N steps")
    fit.add_argument("--max-train-pairs", type=int, help="per move, a seeded sample of N pairs (quick looks)")
    fit.add_argument("--hard-negatives", action="store_true", help="add mined hard negatives (training.hard_negatives)")
    fit.add_argument("--launcher", choices=["none", "torch_distributor"],
                     help="torch_distributor: run on PySpark's TorchDistributor (training.distributed)")
    fit.add_argument("--num-processes", type=int, help="processes for the launcher")
    fit.add_argument("--no-progress", action="store_true", help="no progress bars")
    report = parser.add_argument_group("report")
    report.add_argument("--evaluation", help="results folder of ratio-spark evaluate (its metrics.csv, summary.json)")
    report.add_argument("--runs", nargs="+", help="run folders written by ratio-spark train")
    report.add_argument("--out", help="folder for the tables and the curves (default: the evaluation folder)")
    report.add_argument("--baseline", action="append", default=[], metavar="MODEL=SPEC",
                        help="the untuned retriever of a base model, e.g. minilm=dense:minilm:generic (repeatable)")
    report.add_argument("--not-run", action="append", default=[], metavar="LABEL",
                        help="a row to show as not run, e.g. 'all-mpnet-base-v2 (generic prefix) Tuned' (repeatable)")


def _flags(args) -> dict:
    """The flags given, as dotted settings keys (``cli.common.with_flags``); None: not given."""
    simple = {"source": args.source, "mode": args.mode, "model": args.model, "prefix": args.prefix,
              "hyperparameters": args.hyperparameters, "loss": args.loss, "output": args.output,
              "run_name": args.run_name, "eval_steps": args.eval_steps, "max_train_pairs": args.max_train_pairs,
              "moves": comma_list(args.moves) if args.moves else None,
              "configurations": comma_list(args.configurations) if args.configurations else None,
              "hard_negatives.enabled": True if args.hard_negatives else None,
              "distributed.launcher": args.launcher or None, "distributed.num_processes": args.num_processes or None,
              "progress": False if args.no_progress else None}
    return {f"training.{key}": value for key, value in simple.items()}


def run(args) -> int:
    from ratio_spark.cli.common import with_flags
    from ratio_spark.config import load_config

    config = with_flags(load_config(args.conf, args.overrides), _flags(args))
    settings = config.training
    if args.action == "report":
        return _report(args)

    from ratio_spark.cli.preflight import model_checks, require

    require(model_checks([settings.model], config.evaluation.models))
    if settings.distributed.launcher == "torch_distributor":
        return _launch_on_torch_distributor(args, config, settings)
    return _fit(args, config, settings)


def _fit(args, config, settings) -> int:
    from ratio_spark.training.trainer import process_rank, run_training

    source = settings.source or config.tables.root
    runs = run_training(settings, source, log=lambda line: print(line, flush=True), evaluation=config.evaluation)
    if process_rank() != 0:
        return 0
    summary = {"stage": "train: summary", "source": source, "runs": {}}
    for run in runs:
        best = run.best
        summary["runs"][run.name] = {
            "moves": ", ".join(run.moves),
            "training_pairs": ", ".join(f"{m} {c['train_pairs']}" for m, c in run.counts.items()),
            "validation_mrr10_untuned": f"{100 * run.baseline['mrr@10']:.2f}" if run.baseline else "–",
            "validation_mrr10_tuned": f"{100 * best.best_mrr10:.2f} (configuration {best.id}, step {best.best_step})",
            "configurations": ", ".join(f"{c.id}: {100 * c.best_mrr10:.2f}" for c in run.configurations),
            "train_pairs_per_second": best.pairs_per_second,
            "processes": run.world_size,
            "wall_seconds": run.wall_seconds,
            "model": run.model_dir,
            "evaluate_with": f"--retrievers {run.evaluate_spec}",
        }
    from ratio_spark.cli.common import print_summary, write_summary

    print_summary(summary)
    write_summary(args.summary_json, [r.to_dict() for r in runs])
    return 0


def _launch_on_torch_distributor(args, config, settings) -> int:
    from ratio_spark.training.distributor import run_on_torch_distributor

    return run_on_torch_distributor(config, settings, train_process)


def train_process(conf_path: str) -> int:
    """One training process under TorchDistributor: ``ratio-spark train`` with the resolved configuration."""
    from ratio_spark.cli.main import main

    return main(["train", "--conf", conf_path, "--no-progress"])


def _report(args) -> int:
    from ratio_spark.core.errors import UserError
    from ratio_spark.training.reports import write_report

    if not args.evaluation or not args.runs:
        raise UserError("ratio-spark train report needs --evaluation RESULTS and --runs RUN [RUN ...]")
    baselines = {}
    for item in args.baseline:
        model, sep, spec = item.partition("=")
        if not sep:
            raise UserError(f"--baseline {item!r} must look like MODEL=SPEC, e.g. minilm=dense:minilm:generic")
        baselines[model] = spec
    from ratio_spark.cli.common import print_summary

    print_summary(write_report(args.evaluation, args.runs, args.out or args.evaluation, baselines, args.not_run),
                  "train report")
    return 0
