"""The Spark pipeline's commands: config, one per stage (ingest .. export), run, jars, zip."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ratio_spark.cli.common import add_config_args, print_summary, write_summary
from ratio_spark.config import Config, load_config
from ratio_spark.core.errors import USAGE_EXIT
from ratio_spark.pipeline.stages import PIPELINE, STAGES  # declarations only: no pyspark for --help


def add_commands(sub: argparse._SubParsersAction) -> None:
    commands = [("config", "print the resolved configuration and exit")]
    commands += [(name, STAGES[name].help) for name in PIPELINE]
    commands += [("run", "run every stage in order: " + ", ".join(PIPELINE))]
    for name, help_text in commands:
        parser = sub.add_parser(name, help=help_text)
        add_config_args(parser)
        if name != "config":
            parser.add_argument("--check", action="store_true",
                                help="run the pre-flight checks only (inputs, lexicon, tables, roots, jars) and exit")
        parser.set_defaults(handler=run)
    jars = sub.add_parser("jars", help="fetch the jars a configuration needs (Delta Lake; Spark NLP with "
                                       "segment.engine: sparknlp) with Maven (cached) and list them")
    jars.add_argument("--conf", help="YAML configuration whose jars to list; defaults apply without one")
    jars.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a setting, e.g. --set segment.engine=sparknlp")
    jars.add_argument("--profile", help="the Spark line (default: the configuration's spark.jars.profile)")
    jars.add_argument("--all", action="store_true", help="every component, whatever the configuration needs")
    jars.add_argument("--comma", action="store_true", help="print one comma-separated line (for spark-submit --jars)")
    jars.add_argument("--class-archive", action="store_true",
                      help="also write the JVM class archive local sessions start faster with (~20 s once; scripts/setup.sh does)")
    jars.set_defaults(handler=run_jars)
    package = sub.add_parser("zip", help="write the package, with its lexicons, as one zip for spark-submit --py-files")
    package.add_argument("--out", default="ratio_spark.zip", help="the zip to write (default: ratio_spark.zip)")
    package.set_defaults(handler=run_zip)


def run_jars(args: argparse.Namespace) -> int:
    from ratio_spark.pipeline.jars import COMPONENTS, components, ensure_jars

    config = load_config(args.conf, args.overrides)
    wanted = COMPONENTS if args.all else components(config)
    jars = ensure_jars(args.profile or config.spark.jars.profile, config.spark.jars.cache_dir, wanted=wanted)
    print(",".join(map(str, jars)) if args.comma else "\n".join(map(str, jars)))
    if args.class_archive:
        from ratio_spark.pipeline.class_archive import build_archive

        spark = config.spark.model_copy(update={"jars": config.spark.jars.model_copy(
            update={"profile": args.profile or config.spark.jars.profile})})
        print(f"class archive: {build_archive(spark)}", file=sys.stderr)
    return 0


def run_zip(args: argparse.Namespace) -> int:
    from ratio_spark.pipeline.package_zip import write_package_zip

    print(write_package_zip(args.out))
    return 0


def run_stages(config: Config, stages: list[str]) -> list[dict]:
    import ratio_spark
    from ratio_spark.pipeline.jars import components
    from ratio_spark.pipeline.runner import run_stage
    from ratio_spark.pipeline.session import build_spark_session

    print(f"ratio-spark {ratio_spark.__version__} from {Path(ratio_spark.__file__).parent}", flush=True)
    spark = build_spark_session(config.spark, spark_nlp="sparknlp" in components(config, stages))
    summaries = []
    for stage in stages:
        summary = run_stage(spark, config, stage)
        print_summary(summary)
        summaries.append(summary)
    return summaries


def run(args: argparse.Namespace) -> int:
    config = load_config(args.conf, args.overrides)
    if args.command == "config":
        print(config.to_yaml(), end="")
        return 0
    from ratio_spark.cli.preflight import pipeline_checks, print_report, require

    stages = PIPELINE if args.command == "run" else [args.command]
    checks = pipeline_checks(config, stages)
    if args.check:
        print_report(", ".join(stages), checks)
        return 0 if all(c.ok for c in checks) else USAGE_EXIT
    require(checks)
    summaries = run_stages(config, stages)
    write_summary(args.summary_json, summaries)
    print(f"\nTables are under {config.tables.root} (Delta; read them with Spark or the `deltalake` package).")
    return 0
