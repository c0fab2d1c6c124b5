"""What every command shares: the configuration flags and the printed summary of a run."""

from __future__ import annotations

import argparse


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", help="YAML configuration (conf/*.yaml); defaults apply without one")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a setting, e.g. --set spark.master=local[4] --set tables.root=/data/tables "
        "(repeatable; spark.conf.<spark key>=value sets a Spark property)",
    )
    parser.add_argument("--summary-json", help="also write the run's summary to this JSON file")


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


def print_summary(summary: dict) -> None:
    """A stage's summary as an indented block headed ``== <stage> ==``."""
    print(f"\n== {summary['stage']} ==")
    for key, value in summary.items():
        if key != "stage":
            _print_value(key, value, 1)
