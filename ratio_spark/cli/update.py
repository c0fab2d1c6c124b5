"""update: add new papers to an existing benchmark and write a release (the living benchmark)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ratio_spark.cli.common import add_config_args, print_summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser)
    parser.add_argument("--inputs", required=True,
                        help="file, folder or glob of the new papers, read like the configuration's first input")


def run(args: argparse.Namespace) -> int:
    from ratio_spark.cli.preflight import require, update_checks
    from ratio_spark.core.config import load_config
    from ratio_spark.pipeline.session import build_spark_session
    from ratio_spark.pipeline.update import INCREMENTAL, REBUILT, update

    config = load_config(args.conf, args.overrides)
    require(update_checks(config, args.inputs, ["segment", *INCREMENTAL, *REBUILT]))  # before the JVM starts
    summary = update(build_spark_session(config.spark), config, args.inputs)
    for stage_summary in summary.pop("stages").values():
        print_summary(stage_summary)
    print_summary({"stage": "update", **summary})
    if args.summary_json:
        Path(args.summary_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary_json).write_text(json.dumps(summary, indent=2, default=str))
    return 0
