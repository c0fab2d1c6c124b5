"""Pre-flight: check what a command needs before Spark starts, so a typo fails in a second, not after minutes.

The configuration is already valid when this runs (``load_config`` rejects unknown keys and bad values,
``--set`` paths included). These checks look at what the configuration points to: input paths (or globs
that match), the lexicon, the tables and release roots (writable), the tables a stage reads (its declaration in
``pipeline/stages.py``; written by an earlier run), its file inputs, the jars, and, for ``evaluate``, the models. Remote locations (``s3://``, ``dbfs:/`` ...)
are left to Spark, which reports them with ``ratio_spark.core.errors``. ``--check`` prints the report and
runs nothing. Plain Python: no JVM is started here.
"""

from __future__ import annotations

import glob
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ratio_spark.config import Config
from ratio_spark.core import paths
from ratio_spark.core.errors import UserError
from ratio_spark.pipeline.stages import STAGES, run_first

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]+):")


class PreflightError(UserError):
    """One or more pre-flight checks failed; the message lists each with its fix."""


@dataclass(frozen=True)
class Check:
    what: str  # "input acl-sample", "lexicon", "tables root", "table sentences", "model minilm"
    ok: bool
    detail: str  # what was found, or what is wrong and how to fix it


def local_path(location: str) -> Path | None:
    """The local path of a location, or None for a remote one (s3://, dbfs:/, hdfs://) that only Spark can see."""
    found = _SCHEME.match(location)
    if found is None:
        return Path(location).expanduser()
    if found.group(1) == "file":
        return Path(re.sub(r"^file:(//)?", "", location))
    return None


def _input_path(label: str, location: str) -> Check:
    path = local_path(location)
    if path is None:
        return Check(label, True, f"{location} (remote: Spark checks it)")
    if any(ch in str(path) for ch in "*?["):
        matches = glob.glob(str(path))
        if matches:
            return Check(label, True, f"{location}: {len(matches)} match(es)")
        return Check(label, False, f"{location}: the glob matches nothing; check the path and the pattern")
    if path.is_dir():
        return Check(label, True, f"{location}: a folder")
    if path.is_file():
        return Check(label, True, f"{location}: a file")
    return Check(label, False, f"{location} does not exist; fix the path (relative paths start at {Path.cwd()})")


def _writable(label: str, location: str) -> Check:
    path = local_path(location)
    if path is None:
        return Check(label, True, f"{location} (remote: Spark checks it)")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check(label, False, f"{location}: {existing} is a file, not a folder; choose another {label}")
    try:  # a real write: file modes say little (root ignores them; read-only mounts do not show in them)
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        return Check(label, False, f"{location}: cannot write in {existing} ({exc.strerror or exc}); "
                                   f"choose a writable {label}")
    return Check(label, True, f"{location} (writable)")


def _table(config: Config, name: str) -> Check:
    location = config.tables.location(name)
    path = local_path(location)
    if path is None:
        return Check(f"table {name}", True, f"{location} (remote: Spark checks it)")
    if (path / "_delta_log").is_dir():
        return Check(f"table {name}", True, location)
    if path.is_file() or (path.is_dir() and any(path.iterdir())):
        return Check(f"table {name}", False, f"{location} is not a Delta table (no _delta_log folder in it): point "
                                             f"tables.root at the tables of an earlier run, or run {run_first(name)} "
                                             "to write it elsewhere")
    return Check(f"table {name}", False, f"{location} does not exist yet: run {run_first(name)} first "
                                         "(or `ratio-spark run`), or point tables.root at the tables of an earlier run")


def _inputs(config: Config) -> list[Check]:
    if not config.inputs:
        return [Check("inputs", False, "the configuration has no inputs: add at least one under `inputs:` "
                                       "(or --set 'inputs=[{name: x, format: tei, path: /data/x}]')")]
    checks = []
    for inp in config.inputs:
        checks.append(_input_path(f"input {inp.name}", inp.path))
        if inp.format == "s2orc_current" and not inp.metadata_path:
            checks.append(Check(f"input {inp.name}", False, "format s2orc_current needs metadata_path "
                                                            "(the papers dataset with corpusid and publicationdate)"))
        if inp.metadata_path:
            checks.append(_input_path(f"input {inp.name} metadata", inp.metadata_path))
        if inp.exclude_path_regex:
            try:
                re.compile(inp.exclude_path_regex)
            except re.error as exc:
                checks.append(Check(f"input {inp.name}", False, f"exclude_path_regex {inp.exclude_path_regex!r} is "
                                                                f"not a regular expression ({exc})"))
    return checks


def _lexicon(name: str) -> Check:
    from ratio_spark.lexicon.loader import load_lexicon

    try:
        lexicon = load_lexicon(name)
    except UserError as exc:
        return Check("lexicon", False, str(exc))
    moves = sum(1 for m in lexicon.markers if m.is_move)
    return Check("lexicon", True, f"{name}: {len(lexicon.markers)} markers ({moves} move markers)")


def _jars(config: Config, stages: list[str]) -> Check:
    import shutil

    from ratio_spark.pipeline.jars import components, is_cached

    mode = config.spark.jars.mode
    wanted = components(config, stages)
    what = " and ".join({"delta": "Delta Lake", "sparknlp": "Spark NLP (segment.engine: sparknlp)"}[c] for c in wanted)
    if mode != "local":
        return Check("jars", True, f"mode {mode}: {what}; " + ("Spark fetches them" if mode == "packages" else "the cluster has them"))
    cache = Path(config.spark.jars.cache_dir or paths.cache_dir("jars")).expanduser()
    if is_cached(config.spark.jars.profile, cache, wanted):
        return Check("jars", True, f"mode local: {what}, cached in {cache / config.spark.jars.profile}")
    if shutil.which("mvn"):
        return Check("jars", True, f"mode local: Maven fetches {what} once into {cache}")
    return Check("jars", False, f"mode local needs Maven (mvn) once to fetch the {what} jars: install "
                                "it, or set spark.jars.mode to packages or provided")


# How to check a kind of file input a stage declares (``Stage.files``): what -> its check.
FILE_CHECKS = {"lexicon": _lexicon}


def pipeline_checks(config: Config, stages: list[str]) -> list[Check]:
    """Everything the pipeline stages ``stages`` (run in this order) need before Spark starts."""
    checks = [_jars(config, stages)]
    if "ingest" in stages:
        checks += _inputs(config)
    # The file inputs each stage declares (Stage.files), by what they are.
    checks += [FILE_CHECKS[what](STAGES[stage].setting(config, key)) for stage in stages
               for what, key in STAGES[stage].files.items()]
    # The tables each stage reads (its declaration), once; one written by an earlier stage of this run need not exist yet.
    written: set[str] = set()
    for stage in stages:
        declared = STAGES[stage]
        checks += [_table(config, name) for name in declared.reads if name not in written]
        written.update(declared.reads, declared.writes)  # each table checked once
    if any(STAGES[s].writes or STAGES[s].drops_table for s in stages):
        checks.append(_writable("tables root", config.tables.root))
    if "export" in stages:
        if local_path(config.release.root) is None:  # the JSONL and BEIR files are written by the driver
            checks.append(Check("release root", False, f"{config.release.root}: must be a path on the driver "
                                                       "(a local folder or a mount such as /dbfs/...), not a URI"))
        else:
            checks.append(_writable("release root", config.release.root))
    return checks


def update_checks(config: Config, inputs: str, stages: list[str]) -> list[Check]:
    """What ``update`` needs before Spark starts: the new inputs, and a benchmark whose ``stages`` it reruns."""
    return [_input_path("new inputs", inputs), *pipeline_checks(config, stages)]


def model_checks(models: list[str], aliases: dict[str, str]) -> list[Check]:
    """Each model resolves locally (alias, folder, or the Hugging Face cache) without downloading."""
    from ratio_spark.evaluation.models import check_model_available

    checks = []
    for name in dict.fromkeys(models):
        try:
            checks.append(Check(f"model {name}", True, check_model_available(name, aliases)))
        except UserError as exc:
            checks.append(Check(f"model {name}", False, str(exc)))
    return checks


def print_report(title: str, checks: list[Check]) -> None:
    print(f"== pre-flight: {title} ==")
    for check in checks:
        print(f"  {'ok  ' if check.ok else 'FAIL'}  {check.what:<28} {check.detail}")
    failed = sum(not c.ok for c in checks)
    print(f"  {len(checks) - failed} ok, {failed} failed", flush=True)


def require(checks: list[Check]) -> None:
    """Raise one ``PreflightError`` naming every failed check (on one line)."""
    failed = [c for c in checks if not c.ok]
    if failed:
        raise PreflightError("; ".join(f"{c.what}: {c.detail}" for c in failed))
