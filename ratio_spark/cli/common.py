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


def comma_list(text: str) -> list[str]:
    """The items of a comma-separated option ("specify, address" -> ["specify", "address"]), blanks dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]


def validated_settings(tree: dict, section: str = "evaluation"):
    """The settings of a configuration ``section`` (its model in ``Config``) from a tree of values, as
    command-line flags changed it; a bad key is a ConfigError naming it."""
    from pydantic import ValidationError

    from ratio_spark.core.config import Config, ConfigError, validation_message

    try:
        return Config.model_fields[section].annotation.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, f"invalid {section} settings", prefix=f"{section}.")) from None


def resolved_config(config, settings) -> dict:
    """The configuration a run used: the file and --set overrides, with the command's flags applied."""
    tree = config.model_dump(mode="json")
    tree["evaluation"] = settings.model_dump(mode="json")
    return tree


def write_results_manifest(folder, command: str, config_tree: dict, data, result, *, tables_root: str | None,
                           lexicon: str, seeds: dict, timings: dict, extra_inputs: dict | None = None) -> None:
    """The manifest of a results folder (``ratio_spark.evaluation.manifest``): the data read, the models of
    the systems, the lexicon, and what the command adds (runs, prompts, LLM endpoints)."""
    from ratio_spark.evaluation.data import lexicon_versions
    from ratio_spark.evaluation.manifest import build_manifest, lexicon_entry, model_inputs, write_manifest

    inputs = {**data.inputs, **model_inputs(result.systems), **(extra_inputs or {}),
              "lexicon": lexicon_entry(lexicon, lexicon_versions(tables_root) if tables_root else None)}
    write_manifest(folder, build_manifest(command, config_tree, inputs, seeds=seeds, timings=timings))

