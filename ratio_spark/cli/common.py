"""What every command shares: the configuration flags and the printed summary of a run."""

from __future__ import annotations

import argparse
import contextlib


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


@contextlib.contextmanager
def llm_client(settings, model: str, local_server: bool = False, local_port: int | None = None):
    """Yield (LLMClient, endpoint name) for the ``llm:`` settings; with ``local_server``, the bundled gemma
    model is started on 127.0.0.1 (and stopped after) and serves the endpoint named ``model``."""
    from ratio_spark.core.config import ConfigError
    from ratio_spark.llm import LLMClient, LLMSettings

    settings = settings or LLMSettings()
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
            server = LocalLlamaServer(port=local_port).start()
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
