"""What every command shares: the configuration flags and the printed summary of a run."""

from __future__ import annotations

import argparse
import sys


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--conf", help="YAML configuration (conf/*.yaml); defaults apply without one")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a setting, e.g. --set spark.master=local[4] --set tables.root=/data/tables "
        "(repeatable; spark.conf.<spark key>=value sets a Spark property)",
    )
    parser.add_argument("--summary-json", help="also write the run's summary to this JSON file")


def load_settings(args, command: str, section: str, build):
    """The configuration and one section's settings, ``build(args, config)`` (flags over the file). On a bad
    file, key or value: a message naming it on stderr, and None."""
    from pydantic import ValidationError

    from ratio_spark.core.config import ConfigError, load_config

    try:
        config = load_config(args.conf, args.overrides)
        return config, build(args, config)
    except ConfigError as exc:
        print(f"ratio-spark {command}: {exc}", file=sys.stderr)
    except ValidationError as exc:
        lines = [f"  {section}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        print(f"ratio-spark {command}: invalid settings:\n" + "\n".join(lines), file=sys.stderr)
    return None


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
