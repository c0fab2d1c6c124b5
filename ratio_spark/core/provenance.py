"""Provenance both halves record: the sha256 of a file or a JSON value and the git state of the code.

In core because the Spark half's release manifest (pipeline/export.py) and the Python half's run
manifests (evaluation/manifest.py, inspire/manifest.py) pin their inputs the same way."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def shared_folder(checkout: Path = PACKAGE_ROOT) -> Path:
    """The project's shared data (corpora, seeds), which the benchmarks and tests read: ``$RATIO_SHARED``; else
    ``shared`` beside the checkout; else beside the local checkout this one was cloned from (a clone made in a
    temporary folder, as CI may make). The first candidate when none exists (its error then names it)."""
    if os.environ.get("RATIO_SHARED"):
        return Path(os.environ["RATIO_SHARED"])
    beside = checkout.parent / "shared"
    if beside.is_dir():
        return beside
    try:
        origin = subprocess.run(["git", "-C", str(checkout), "config", "--get", "remote.origin.url"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        origin = ""
    origin = origin.removeprefix("file://")
    if origin and ":" not in origin and (Path(origin).resolve().parent / "shared").is_dir():
        return Path(origin).resolve().parent / "shared"
    return beside


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_json(value: Any) -> str:
    """The sha256 of ``value`` as canonical JSON (sorted keys, UTF-8)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()


def git_state(path: str | Path = PACKAGE_ROOT) -> dict:
    """Commit and dirty flag of the checkout the code runs from (None outside a git checkout)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "note": f"{path} is not a git checkout"}
    status = git("status", "--porcelain") or ""
    changed = [line for line in status.splitlines() if line.strip()]
    state = {"commit": commit, "dirty": bool(changed), "changed_files": len(changed)}
    if changed:  # pins uncommitted edits of tracked files (untracked files: by name only)
        state["diff_sha256"] = hashlib.sha256(((git("diff", "HEAD") or "") + status).encode("utf-8")).hexdigest()
    return state
