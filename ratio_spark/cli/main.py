"""``ratio-spark``: one command for every stage, locally or under spark-submit (see jobs/).

Errors end in one line on stderr (what, where, how to fix) and an exit code: 2 for usage, configuration
and input errors, 1 for failed checks and unexpected errors, 130 when interrupted. The full trace goes
to a log file (``~/.cache/ratio-spark/logs``, or ``$RATIO_SPARK_LOG_DIR``); ``--debug`` prints it too.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import os
import sys
import traceback
from pathlib import Path

from ratio_spark.cli import pipeline
from ratio_spark.core.errors import describe_error
from ratio_spark.core.paths import cache_dir

# Command groups beside the pipeline's: name -> module. Each module has ``add_arguments(parser)`` and
# ``run(args) -> int`` (exit code), and keeps heavy imports (torch, faiss) inside ``run`` so that
# ``ratio-spark --help`` stays fast.
COMMAND_GROUPS: dict[str, str] = {
    "lexicon": "ratio_spark.cli.lexicon",
    "lexicon-llm": "ratio_spark.cli.lexicon_llm",
    "silver": "ratio_spark.cli.silver",
    "evaluate": "ratio_spark.cli.evaluate",
    "rerank": "ratio_spark.cli.rerank",
    "train": "ratio_spark.cli.train",
    "models": "ratio_spark.cli.models",
    "humaneval": "ratio_spark.cli.humaneval",
    "inspire": "ratio_spark.cli.inspire",
    "update": "ratio_spark.cli.update",
    "browse": "ratio_spark.cli.browse",
}
# Attributes that name a subcommand, in order: "lexicon spans", "silver build", ...
_SUBCOMMAND_ATTRS = ("command", "lexicon_command", "silver_command", "action", "models_command", "humaneval_command",
                     "inspire_command")
DEBUG_FLAG = "--debug"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ratio-spark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(DEBUG_FLAG, action="store_true",
                        help="on an error, print the full trace as well (accepted anywhere on the command line)")
    sub = parser.add_subparsers(dest="command", required=True)
    pipeline.add_commands(sub)
    for name, module_name in COMMAND_GROUPS.items():
        module = importlib.import_module(module_name)
        group = sub.add_parser(name, help=(module.__doc__ or name).strip().splitlines()[0])
        module.add_arguments(group)
        group.set_defaults(handler=module.run)
    return parser


def _write_trace(command: str, argv: list[str], exc: BaseException) -> Path | None:
    """The full trace, with the command line, in a new log file; None when the log folder is not writable."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    path = cache_dir("logs") / f"{command.replace(' ', '-')}-{stamp}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("ratio-spark " + " ".join(argv) + "\n\n" + "".join(traceback.format_exception(exc)))
    except OSError:
        return None
    return path


def report_error(command: str, argv: list[str], exc: BaseException, debug: bool) -> int:
    """Print one line for ``exc`` (and the trace with ``--debug``), log the trace, return the exit code."""
    report = describe_error(exc)
    log = _write_trace(command, argv, exc)
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    line = f"ratio-spark {command}: error: {report.message}"
    if not report.expected:
        line += f" (full trace: {log or 'not written'}; --debug prints it)"
    print(line, file=sys.stderr, flush=True)
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv or os.environ.get("RATIO_SPARK_DEBUG") == "1"
    args = build_parser().parse_args([a for a in argv if a != DEBUG_FLAG])
    command = " ".join(str(v) for a in _SUBCOMMAND_ATTRS if (v := getattr(args, a, None)))
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print(f"\nratio-spark {command}: interrupted; run the same command again to resume "
              "(written tables and cached LLM answers are kept)", file=sys.stderr, flush=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns any error into a line and an exit code
        return report_error(command, argv, exc, debug)


if __name__ == "__main__":
    sys.exit(main())
