"""Provenance for Inspire folders: SHA-256 of files and texts (the file and JSON hashes are the run manifest's,
``ratio_spark.evaluation.manifest``), the code commit (``git_state``), atomic JSON writes."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ratio_spark.evaluation.manifest import git_state, sha256_file, sha256_json

__all__ = ["code_commit", "now_utc", "sha256_bytes", "sha256_file", "sha256_json", "write_json"]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_commit() -> str | None:
    """The git commit of the checkout this package runs from (None outside a git checkout)."""
    return git_state()["commit"]


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: str | Path, value: Any) -> str:
    """Write ``value`` as canonical JSON through a temporary file and a rename; returns its SHA-256."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return sha256_bytes(data)
