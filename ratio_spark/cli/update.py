"""update: add new papers to an existing benchmark and write a release (the living benchmark)."""

from __future__ import annotations

import argparse

from ratio_spark.cli.common import add_config_args, print_summary, write_summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser)
    parser.add_argument("--inputs", required=True,
                        help="file, folder or glob of the new papers, read like the configuration's first input")


def run(args: argparse.Namespace) -> int:
    from ratio_spark.cli.preflight import require, update_checks
    from ratio_spark.config import load_config
    from ratio_spark.pipeline.jars import components
    from ratio_spark.pipeline.session import build_spark_session
    from ratio_spark.pipeline.update import INCREMENTAL, REBUILT, check_no_update_running, update

    config = load_config(args.conf, args.overrides)
    stages = ["segment", *INCREMENTAL, *REBUILT]
    require(update_checks(config, args.inputs, stages))  # before the JVM starts
    check_no_update_running(config)  # a second update stops here, in a moment; `update` holds the lock
    summary = update(build_spark_session(config.spark, spark_nlp="sparknlp" in components(config, stages)), config,
                     args.inputs)
    for stage_summary in summary.pop("stages").values():
        print_summary(stage_summary)
    print_summary({"stage": "update", **summary})
    write_summary(args.summary_json, summary)
    return 0
