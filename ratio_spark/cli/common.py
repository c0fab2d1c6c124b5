"""What every command shares: the configuration flags, applying flags to settings (``with_flags``), the printed
summary of a run and its ``--summary-json`` file, the LLM client of the ``llm:`` section."""

from __future__ import annotations

import argparse
import contextlib
import sys


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
    elif isinstance(value, str) and "\n" in value:  # a table: its lines under the key
        print(f"{pad}{key}:")
        for line in value.splitlines():
            print(f"{pad}  {line}")
    else:
        print(f"{pad}{key:<{max(32 - 2 * indent, 8)}} {value}")


def print_summary(summary: dict, title: str | None = None) -> None:
    """A summary as an indented block headed ``== <title> ==`` (default: its ``stage`` or ``command``, which
    the block then leaves out): nested dicts indent, lists join with commas, a multi-line text (a table)
    prints under its key."""
    heading = title or summary.get("stage") or summary.get("command")
    print(f"\n== {heading} ==")
    for key, value in summary.items():
        if title is not None or key not in ("stage", "command"):
            _print_value(key, value, 1)
    sys.stdout.flush()


def write_summary(path: str | None, value) -> None:
    """``--summary-json``: ``value`` (a summary, or a list of them) as JSON at ``path`` (its folder made);
    nothing when the flag was not given. The one writer of every command's summary file."""
    if path:
        import json
        from pathlib import Path

        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(value, indent=2, default=str))


def add_local_server_args(parser: argparse.ArgumentParser, what: str, rerank_context: bool = False) -> None:
    """--local-server and --local-port; with ``rerank_context``, --local-n-ctx sized for listwise prompts."""
    parser.add_argument("--local-server", action="store_true",
                        help=f"start the bundled local gemma model (llama.cpp on 127.0.0.1) and {what} with it; its "
                             "endpoint takes the configured endpoint's name")
    parser.add_argument("--local-port", type=int, default=None,
                        help="port of the local server (default: a free one; the LLM cache names the local model by "
                             "its weights, not its address, so any port answers from the same cache)")
    if rerank_context:
        parser.add_argument("--local-n-ctx", type=int, default=8192, help="context of the local server (default "
                            "8192: 100 candidates take about 5,000 tokens)")


@contextlib.contextmanager
def llm_client(settings, model: str, local_server: bool = False, local_port: int | None = None, *,
               local_n_ctx: int = 2048):
    """An LLMClient for the ``llm:`` section (``settings``), plus the bundled local server when asked for.
    Yields (client, endpoint name); the server stops when the block ends, even on SIGTERM."""
    from ratio_spark.core.config import ConfigError
    from ratio_spark.llm import LLMClient, LLMConfig

    settings = settings or LLMConfig()
    if local_server:
        import signal

        from ratio_spark.llm.local_server import LocalLlamaServer

        # SIGTERM (timeout, kill) must unwind through the context manager, or the server outlives us;
        # as an interrupt, so the user is told how to resume.
        def _interrupt(*_):
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, _interrupt)
        print("starting the local gemma server (llama.cpp on 127.0.0.1) ...", flush=True)
        try:
            server = LocalLlamaServer(port=local_port, n_ctx=local_n_ctx).start()
        except BaseException:
            signal.signal(signal.SIGTERM, previous)
            raise
        try:
            # One request at a time, long timeout: llama.cpp serves one request at a time, and on a busy
            # CPU a queued request would time out and be re-sent while the server still works on it.
            endpoint = server.endpoint(name=model).model_copy(update={"max_concurrency": 1, "timeout_s": 600})
            others = [m for m in settings.models if m.name != endpoint.name]
            settings = settings.model_copy(update={"models": [*others, endpoint]})
            yield LLMClient(settings), model
        finally:
            server.stop()
            signal.signal(signal.SIGTERM, previous)
        return
    if not any(m.name == model for m in settings.models):
        raise ConfigError(
            f"no endpoint named {model!r} in the llm: section (have: {[m.name for m in settings.models]}); "
            "add one, pass --model, or use --local-server"
        )
    yield LLMClient(settings), model


def port(text: str) -> int:
    """An argparse type for --port: a usage error, not a bind() traceback, for a port outside 0-65535."""
    value = int(text) if text.isdigit() else -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535; 0 takes a free one)")
    return value


def comma_list(text: str) -> list[str]:
    """The items of a comma-separated option ("specify, address" -> ["specify", "address"]), blanks dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]


def with_flags(config, flags: dict):
    """The one way a command changes settings: ``config`` with its command-line flags applied, validated again
    as a whole (so a bad flag fails like a bad --set, a ConfigError naming the key). ``flags`` maps a dotted key
    (``evaluation.split``, ``evaluation.dense.index.kind``) to the flag's value; None means not given."""
    from pydantic import ValidationError

    from ratio_spark.core.config import ConfigError, validation_message

    tree = config.model_dump()
    for key, value in flags.items():
        if value is None:
            continue
        *path, last = key.split(".")
        node = tree
        for part in path:
            node = node[part]
        node[last] = value
    try:
        return type(config).model_validate(tree)
    except ValidationError as exc:
        sections = sorted({str(err["loc"][0]) for err in exc.errors() if err["loc"]})
        raise ConfigError(validation_message(exc, f"invalid {'/'.join(sections)} settings")) from None
