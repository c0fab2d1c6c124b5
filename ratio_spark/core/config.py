"""Loading typed, validated settings: YAML files (``extends:``) plus ``--set key=value`` overrides.

A wrong key or value fails at start-up with one line naming it (pydantic ``extra="forbid"``), before any Spark
work starts. The machinery only: each package defines its own sections, and ``ratio_spark.config`` composes
them into the configuration that ``ratio-spark config`` prints.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ratio_spark.core.errors import UserError
from ratio_spark.core.files import read_text

if TYPE_CHECKING:
    from importlib.abc import Traversable


# Configurations that ship inside the package: platform defaults (local, databricks, emr).
SHIPPED_CONF_DIR = resources.files("ratio_spark") / "conf"

Model = TypeVar("Model", bound=BaseModel)


class ConfigError(UserError, ValueError):
    """A configuration file or override that does not validate; the message names the key."""


def _set_dotted(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node: Any = tree
    for part, following in zip(parts[:-1], parts[1:]):
        if isinstance(node, list):
            while len(node) <= int(part):
                node.append({})
            node = node[int(part)]
            continue
        node = node.setdefault(part, [] if following.isdigit() else {})
    last = parts[-1]
    if isinstance(node, list):
        while len(node) <= int(last):
            node.append(None)
        node[int(last)] = value
    else:
        node[last] = value


def _apply_override(tree: dict, override: str) -> None:
    key, eq, raw = override.partition("=")
    if not eq or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {override!r} must look like key.path=value (e.g. --set spark.master=local[4])")
    # spark.conf keys contain dots themselves: spark.conf.spark.sql.shuffle.partitions=4
    if key.startswith("spark.conf."):
        tree.setdefault("spark", {}).setdefault("conf", {})[key[len("spark.conf."):]] = raw
        return
    try:
        value = yaml.safe_load(raw) if raw != "" else None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date-like value that is no date (2020-13-01)
        problem = _yaml_problem(exc) if isinstance(exc, yaml.YAMLError) else str(exc)
        raise ConfigError(f"--set {key}={raw}: the value is not valid YAML ({problem}); quote it or fix it") from None
    try:
        _set_dotted(tree, key, value)
    except (ValueError, TypeError, AttributeError):
        # e.g. inputs.first.path (a list needs an index) or spark.master.x (a value has no keys)
        raise ConfigError(
            f"--set {key}: this path does not lead to a setting (a list needs a number, a value has no keys); "
            "`ratio-spark config` prints every key"
        ) from None


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem


def shipped_confs() -> list[str]:
    """Names of the configurations shipped inside the package (``--conf local``, ``--conf databricks``...)."""
    return sorted(p.name.removesuffix(".yaml") for p in SHIPPED_CONF_DIR.iterdir() if p.name.endswith(".yaml"))


def _find_conf(name: str, relative_to: Path | None) -> Path | Traversable:
    """A configuration file: a path (relative to the file that extends it), else a shipped one by name."""
    local = (relative_to / name) if relative_to is not None else Path(name)
    if local.is_file():
        return local.resolve()
    shipped = SHIPPED_CONF_DIR / (name if name.endswith(".yaml") else f"{name}.yaml")
    if "/" not in name and shipped.is_file():
        return shipped
    raise ConfigError(f"configuration file not found: {local} (and no shipped configuration {name!r}; "
                      f"shipped: {', '.join(shipped_confs())})")


def _read_yaml(source: Path | Traversable) -> dict:
    text = read_text(source, ConfigError)
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not valid YAML: {_yaml_problem(exc)}; fix the syntax there") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping (key: value lines)")
    # A file may extend another one: relative to itself, or a shipped configuration by name.
    parent = data.pop("extends", None)
    if parent:
        data = _merge(_read_yaml(_find_conf(str(parent), source.parent if isinstance(source, Path) else None)), data)
    return data


def validation_message(exc: ValidationError, title: str, prefix: str = "", overrides: list[str] | None = None,
                       file: str | None = None) -> str:
    """Every failing key on one line: ``title: key: problem (got value); key: ...``. With ``overrides``, each key
    names where it came from: ``from --set key=value`` when an override set it (or a part of it), else ``in
    <file>``, so the user looks where the mistake is."""
    problems = []
    for err in exc.errors():
        key = prefix + ".".join(str(p) for p in err["loc"])
        setting = [o for o in overrides or [] if _sets(o.partition("=")[0], key)]
        source = f" (from --set {', --set '.join(setting)})" if setting else f" (in {file})" if file and overrides else ""
        if err["type"] == "extra_forbidden":
            problems.append(f"{key}: unknown key{source} (`ratio-spark config` prints the valid ones)")
            continue
        got = "" if err["type"] == "missing" else f" (got {_short(err['input'])})"
        problems.append(f"{key}: {err['msg']}{got}{source}")
    return f"{title}: " + "; ".join(problems)


def _sets(set_key: str, key: str) -> bool:
    """Whether ``--set set_key=...`` sets ``key``, a part of it, or the section that holds it."""
    return key == set_key or key.startswith(set_key + ".") or set_key.startswith(key + ".")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_model(model: type[Model], path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> Model:
    """Load a YAML file (optionally ``extends:`` another), apply overrides, validate as ``model``."""
    tree = _read_yaml(_find_conf(str(path), None)) if path else {}
    for override in overrides or []:
        _apply_override(tree, override)
    try:
        return model.model_validate(tree)
    except ValidationError as exc:
        source = f" in {path}" if path and not overrides else ""
        raise ConfigError(validation_message(exc, f"invalid configuration{source}", overrides=overrides,
                                             file=str(path) if path else None)) from None
