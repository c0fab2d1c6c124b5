"""``ratio-spark``: one command for every stage, locally or under spark-submit (see jobs/)."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from ratio_spark.config import Config, ConfigError, load_config


# Python-half commands (plain Python, no JVM): name -> module. Each module has ``add_arguments(parser)``
# and ``run(args) -> int`` (exit code), and keeps heavy imports (torch, faiss) inside ``run`` so that
# ``ratio-spark --help`` stays fast.
PYTHON_COMMANDS: dict[str, str] = {
    "lexicon": "ratio_spark.lexicon_tools.command",
    "lexicon-llm": "ratio_spark.lexicon_llm_cli",
    "silver": "ratio_spark.silver.cli",
    "evaluate": "ratio_spark.evaluate_cli",
    "models": "ratio_spark.models",
}


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", help="YAML configuration (conf/*.yaml); defaults apply without one")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a setting, e.g. --set spark.master=local[4] --set tables.root=/data/tables "
        "(repeatable; spark.conf.<spark key>=value sets a Spark property)",
    )
    parser.add_argument("--summary-json", help="also write the run's summary to this JSON file")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ratio-spark", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    from ratio_spark.stages import PIPELINE, STAGES

    commands = [("config", "print the resolved configuration and exit")]
    commands += [(name, (STAGES[name].__doc__ or "").strip().splitlines()[0]) for name in PIPELINE]
    commands += [("run", "run every stage in order: " + ", ".join(PIPELINE))]
    for name, help_text in commands:
        add_config_args(sub.add_parser(name, help=help_text))
    for name, module_name in PYTHON_COMMANDS.items():
        module = importlib.import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=(module.__doc__ or name).strip().splitlines()[0]))
    jars = sub.add_parser("jars", help="fetch the Delta Lake and Spark NLP jars with Maven (cached) and list them")
    jars.add_argument("--profile", default="spark35")
    jars.add_argument("--comma", action="store_true", help="print one comma-separated line (for spark-submit --jars)")
    return parser


def _print_value(key: str, value, indent: int) -> None:
    pad = "  " * indent
    if isinstance(value, dict):
        print(f"{pad}{key}:")
        for k, v in value.items():
            _print_value(str(k), v, indent + 1)
    elif isinstance(value, list):
        print(f"{pad}{key + ':':<{max(32 - 2 * indent, 8)}} {', '.join(map(str, value))}")
    else:
        print(f"{pad}{key:<{max(32 - 2 * indent, 8)}} {value}")


def _print_summary(summary: dict) -> None:
    print(f"\n== {summary['stage']} ==")
    for key, value in summary.items():
        if key != "stage":
            _print_value(key, value, 1)


def run_stages(config: Config, stages: list[str]) -> list[dict]:
    from ratio_spark.session import build_spark_session
    from ratio_spark.stages import STAGES

    import ratio_spark

    print(f"ratio-spark {ratio_spark.__version__} from {Path(ratio_spark.__file__).parent}", flush=True)
    spark = build_spark_session(config.spark)
    summaries = []
    for stage in stages:
        summary = STAGES[stage](spark, config)
        _print_summary(summary)
        summaries.append(summary)
    return summaries


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "jars":
        from ratio_spark.jars import ensure_jars

        jars = ensure_jars(args.profile)
        print(",".join(map(str, jars)) if args.comma else "\n".join(map(str, jars)))
        return 0
    if args.command in PYTHON_COMMANDS:
        return importlib.import_module(PYTHON_COMMANDS[args.command]).run(args)
    try:
        config = load_config(args.conf, args.overrides)
    except ConfigError as exc:
        print(f"ratio-spark: {exc}", file=sys.stderr)
        return 2
    if args.command == "config":
        print(config.to_yaml(), end="")
        return 0
    from ratio_spark.stages import PIPELINE

    stages = PIPELINE if args.command == "run" else [args.command]
    summaries = run_stages(config, stages)
    if args.summary_json:
        Path(args.summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary_json).write_text(json.dumps(summaries, indent=2, default=str))
    print(f"\nTables are under {config.tables.root} (Delta; read them with Spark or the `deltalake` package).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
