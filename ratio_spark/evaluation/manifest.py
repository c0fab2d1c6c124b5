"""Run manifests: what a results folder was computed from, and whether a rerun would read the same.

Every results folder (``evaluate``, ``rerank``; later training, human evaluation, Inspire) carries a
``manifest.json``:

* ``code``: the git commit of the package, whether the checkout had uncommitted changes, and a hash of
  those changes (``git diff HEAD`` and ``git status``);
* ``config``: the resolved configuration (flags applied) and its sha256;
* ``inputs``: one entry per thing the run read, each re-checkable later:
  ``delta`` (a Delta table's location and the version read), ``files`` (a folder's files with their
  sha256: a release, a lexicon, a model, prompt files, first-stage runs) and ``value`` (a fixed
  description, e.g. an LLM endpoint's identity: name, model id, URL or cache identity, JSON mode,
  sampling settings; **never a key**, only the name of the variable that holds it);
* ``seeds``, ``timings``, ``environment`` (Python, package versions, platform, CPUs, GPU when torch
  sees one) and ``created_at``;
* ``inputs_sha256``: a hash of code commit, config hash and inputs: equal fingerprints mean the same
  code read the same data with the same settings.

``check_manifest(folder)`` recomputes every ``delta`` and ``files`` entry now (``ratio-spark evaluate
--check-manifest <folder>``) and lists what changed; package versions that differ are notes, not
differences, since they do not change what is read.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from ratio_spark.core.errors import UserError
from ratio_spark.core.provenance import PACKAGE_ROOT, git_state, sha256_file, sha256_json  # noqa: F401 (re-exported)

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1

# Settings that only say where results go or how progress is shown: they do not change a result, so
# they are left out of the config hash (a rerun into another folder reads the same inputs).
OUTPUT_ONLY_KEYS = (("evaluation", "results"), ("evaluation", "progress"), ("rerank", "results"))

# The packages whose versions can change a figure; recorded when installed.
PACKAGES = ("ratio-spark", "numpy", "pandas", "pyarrow", "deltalake", "scipy", "scikit-learn", "bm25s", "PyStemmer",
            "sentence-transformers", "transformers", "torch", "faiss-cpu", "faiss-gpu", "openai", "llama_cpp_python",
            "jsonschema", "pydantic", "pyspark", "delta-spark", "spark-nlp")


class ManifestError(UserError, ValueError):
    """A results folder without a readable manifest."""


# ---------------------------------------------------------------------------------------------- hashing


def _listed(root: Path, patterns: Iterable[str]) -> list[Path]:
    found = {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def files_entry(root: str | Path, patterns: Iterable[str] = ("**/*",), **about: Any) -> dict:
    """The sha256 of every file under ``root`` that matches ``patterns`` (or of ``root`` itself, a file)."""
    root = Path(root).expanduser().resolve()
    patterns = list(patterns)
    if root.is_file():
        files = {root.name: sha256_file(root)}
    else:
        files = {p.relative_to(root).as_posix(): sha256_file(p) for p in _listed(root, patterns)} if root.is_dir() else {}
    return {"kind": "files", "root": str(root), "patterns": patterns, "files": files, **about}


def delta_entry(location: str | Path, version: int) -> dict:
    return {"kind": "delta", "location": str(Path(location).expanduser().resolve()), "version": int(version)}


def value_entry(**value: Any) -> dict:
    return {"kind": "value", **value}


def llm_entry(endpoint, **about: Any) -> dict:
    """An LLM endpoint's identity: what answers, never how to authenticate."""
    # A cache identity names the server (the bundled local model: its weights); its port is then irrelevant.
    url = None if endpoint.cache_identity else endpoint.base_url or "https://api.openai.com/v1"
    return value_entry(
        name=endpoint.name, model=endpoint.model, base_url=url, cache_identity=endpoint.cache_identity, json_mode=endpoint.json_mode, temperature=endpoint.temperature,
        extra_body=dict(endpoint.extra_body), fold_system_prompt=endpoint.fold_system_prompt,
        api_key_env=endpoint.api_key_env, **about)


# ---------------------------------------------------------------------------------------------- the state of things


def config_entry(config: dict) -> dict:
    """The resolved configuration and the sha256 of its result-affecting part."""
    hashed = json.loads(json.dumps(config, default=str))
    for section, key in OUTPUT_ONLY_KEYS:
        if isinstance(hashed.get(section), dict):
            hashed[section].pop(key, None)
    return {"sha256": sha256_json(hashed), "resolved": config}


def environment() -> dict:
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    hardware = {"machine": platform.machine(), "processor": platform.processor() or None, "cpus": os.cpu_count()}
    torch = sys.modules.get("torch")  # only when the run already imported it: never import torch for this
    if torch is not None and torch.cuda.is_available():
        hardware["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"python": sys.version.split()[0], "platform": platform.platform(), "packages": packages,
            "hardware": hardware}


def lexicon_entry(lexicon: str, versions_in_tables: list[str] | None = None) -> dict:
    """The configured lexicon (``mining.lexicon``): its files' sha256, and the lexicon versions that the
    tables' ``mined_pairs`` name (``data.lexicon_versions``), so a mismatch is visible."""
    from ratio_spark.lexicon.loader import lexicon_folder

    entry = files_entry(lexicon_folder(lexicon), ["*"], version=Path(lexicon).name)
    if versions_in_tables is not None:
        entry["versions_in_mined_pairs"] = versions_in_tables
    return entry


def model_inputs(systems: list[dict]) -> dict[str, dict]:
    """Every model folder a system loaded (``model_path`` in its description), hashed; a model known only by
    name (not on disk) is recorded by name."""
    inputs = {}
    for system in systems:
        path = system.get("model_path")
        if not system.get("model"):
            continue
        key = f"model:{system['model']}"
        if path and Path(path).exists():
            inputs[key] = files_entry(path, ["**/*"], name=system["model"])
        else:
            inputs[key] = value_entry(name=system["model"], note="not a local path: the files cannot be hashed")
    return inputs


def fingerprint(manifest: dict) -> str:
    return sha256_json({"commit": manifest["code"].get("commit"), "diff": manifest["code"].get("diff_sha256"),
                        "config": manifest["config"]["sha256"], "inputs": manifest["inputs"]})


def build_manifest(command: str, config: dict, inputs: dict[str, dict], *, seeds: dict | None = None,
                   timings: dict | None = None, extra: dict | None = None) -> dict:
    """A manifest for one run; ``inputs`` maps a name (``table:queries``, ``model:dense:minilm``, ...) to an
    entry made by ``delta_entry``, ``files_entry`` or ``value_entry``."""
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "command": command,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "code": git_state(),
        "config": config_entry(config),
        "inputs": {name: inputs[name] for name in sorted(inputs)},
        "seeds": seeds or {},
        "timings": timings or {},
        "environment": environment(),
        **(extra or {}),
    }
    manifest["inputs_sha256"] = fingerprint(manifest)
    return manifest


def write_manifest(folder: str | Path, manifest: dict) -> Path:
    path = Path(folder) / MANIFEST_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return path


def read_manifest(folder: str | Path) -> dict:
    path = Path(folder) / MANIFEST_FILE
    if not path.is_file():
        raise ManifestError(f"no {MANIFEST_FILE} in {folder}: it was not written by a command that records one")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not valid JSON ({exc})") from None


# ---------------------------------------------------------------------------------------------- checking


@dataclass
class ManifestCheck:
    differences: list[str] = field(default_factory=list)  # what a rerun would read differently
    notes: list[str] = field(default_factory=list)  # worth knowing, but the inputs are the same

    @property
    def same_inputs(self) -> bool:
        return not self.differences


def _current(entry: dict) -> dict | str:
    """The entry recomputed now, or a one-line reason why it cannot be."""
    if entry["kind"] == "delta":
        from deltalake import DeltaTable

        try:
            return {**entry, "version": DeltaTable(entry["location"]).version()}
        except Exception as exc:  # deltalake raises its own TableNotFoundError and OSErrors
            return f"cannot open the Delta table: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    if entry["kind"] == "files":
        root = Path(entry["root"])
        if not root.exists():
            return "the folder or file is gone"
        return {**entry, "files": files_entry(root, entry.get("patterns") or ["**/*"])["files"]}
    return entry  # a value: it is what the configuration says


def _describe_change(name: str, before: dict, now: dict) -> list[str]:
    if before["kind"] == "delta":
        return [f"{name}: {before['location']} is at version {now['version']}, the run read version {before['version']}"]
    if before["kind"] == "files":
        old, new = before["files"], now["files"]
        changed = sorted(f for f in set(old) & set(new) if old[f] != new[f])
        lines = [f"{name}: {f} changed" for f in changed[:10]]
        lines += [f"{name}: {f} is new" for f in sorted(set(new) - set(old))[:10]]
        lines += [f"{name}: {f} is gone" for f in sorted(set(old) - set(new))[:10]]
        return lines or [f"{name}: changed"]
    return [f"{name}: {json.dumps(before, sort_keys=True)} -> {json.dumps(now, sort_keys=True)}"]


def check_manifest(folder: str | Path, *, config: dict | None = None, inputs_now: dict[str, dict] | None = None) -> ManifestCheck:
    """Would a rerun read the same inputs? Recomputes table versions and file hashes now.

    ``config``: the configuration a rerun would use (default: the manifest's own, so only the data, the
    files and the code are checked). ``inputs_now``: entries a rerun with that configuration would
    read, when the caller can describe them (e.g. an LLM endpoint's identity from a new config).
    """
    manifest = read_manifest(folder)
    check = ManifestCheck()
    code = git_state()
    recorded = manifest.get("code", {})
    if recorded.get("commit") != code.get("commit"):
        check.differences.append(f"code: commit {code.get('commit')} now, {recorded.get('commit')} at the run")
    elif recorded.get("diff_sha256") != code.get("diff_sha256"):
        check.differences.append("code: the uncommitted changes differ from those at the run")
    elif code.get("dirty"):
        check.notes.append("code: same commit and the same uncommitted changes as at the run (untracked files are "
                           "compared by name only)")
    if config is not None:
        now = config_entry(config)["sha256"]
        if now != manifest["config"]["sha256"]:
            check.differences.append(f"config: sha256 {now[:12]} now, {manifest['config']['sha256'][:12]} at the run")
    elif config_entry(manifest["config"]["resolved"])["sha256"] != manifest["config"]["sha256"]:
        check.differences.append("config: the recorded configuration does not match its recorded sha256 (edited?)")
    for name, entry in manifest.get("inputs", {}).items():
        now = (inputs_now or {}).get(name) or _current(entry)
        if isinstance(now, str):
            check.differences.append(f"{name}: {now}")
        elif now != entry:
            check.differences += _describe_change(name, entry, now)
    for name in sorted(set(inputs_now or {}) - set(manifest.get("inputs", {}))):
        check.differences.append(f"{name}: a rerun would read it; the run did not")
    before = manifest.get("environment", {}).get("packages", {})
    after = environment()["packages"]
    for package in sorted(set(before) | set(after)):
        if before.get(package) != after.get(package):
            check.notes.append(f"package {package}: {after.get(package)} now, {before.get(package)} at the run")
    return check
