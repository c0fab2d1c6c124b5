"""``ratio-spark``: one command for every stage, locally or under spark-submit (see jobs/)."""

from __future__ import annotations

import argparse
import importlib
import sys

from ratio_spark.cli import pipeline

# Command groups beside the pipeline's: name -> module. Each module has ``add_arguments(parser)`` and
# ``run(args) -> int`` (exit code), and keeps heavy imports (torch, faiss) inside ``run`` so that
# ``ratio-spark --help`` stays fast.
COMMAND_GROUPS: dict[str, str] = {
    "lexicon": "ratio_spark.cli.lexicon",
    "lexicon-llm": "ratio_spark.cli.lexicon_llm",
    "silver": "ratio_spark.cli.silver",
    "evaluate": "ratio_spark.cli.evaluate",
    "train": "ratio_spark.cli.train",
    "models": "ratio_spark.cli.models",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ratio-spark", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    pipeline.add_commands(sub)
    for name, module_name in COMMAND_GROUPS.items():
        module = importlib.import_module(module_name)
        group = sub.add_parser(name, help=(module.__doc__ or name).strip().splitlines()[0])
        module.add_arguments(group)
        group.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
