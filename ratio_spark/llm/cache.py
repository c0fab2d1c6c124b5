"""On-disk answer cache: one sqlite row per request key, committed as soon as the answer arrives.

Why sqlite: many threads (and several processes, e.g. a killed run and its rerun) write single rows;
sqlite's WAL journal makes each committed row durable and readable at once, so a run killed at any
moment loses at most the answers still in flight, and a rerun re-asks only those.

The key is a hash of the full request as sent (base URL, model id, messages, schema, max_tokens,
temperature, JSON mode, extra fields), never of the API key; rows hold the parsed answer and token
counts, nothing secret.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

SCHEMA_VERSION = 1


def request_key(payload: dict[str, Any]) -> str:
    """Stable hash of a request payload (canonical JSON, sorted keys)."""
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedAnswer:
    data: dict
    prompt_tokens: int
    completion_tokens: int


class AnswerCache:
    """Thread-safe sqlite cache; ``get_many`` for lookups, ``put`` commits one answer."""

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._conn.execute(
            """CREATE TABLE IF NOT EXISTS answers (
                   key TEXT PRIMARY KEY,
                   endpoint TEXT NOT NULL,
                   model TEXT NOT NULL,
                   request_id TEXT,
                   data TEXT NOT NULL,
                   prompt_tokens INTEGER NOT NULL DEFAULT 0,
                   completion_tokens INTEGER NOT NULL DEFAULT 0,
                   via TEXT NOT NULL DEFAULT 'sync',
                   created_at REAL NOT NULL
               )"""
        )
        self._conn.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
        self._conn.execute(
            "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, CachedAnswer] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT key, data, prompt_tokens, completion_tokens FROM answers WHERE key IN ({marks})", chunk
                ).fetchall()
                for key, data, pt, ct in rows:
                    found[key] = CachedAnswer(json.loads(data), int(pt), int(ct))
        return found

    def get(self, key: str) -> CachedAnswer | None:
        return self.get_many([key]).get(key)

    def put(
        self,
        key: str,
        *,
        endpoint: str,
        model: str,
        request_id: str | None,
        data: dict,
        prompt_tokens: int,
        completion_tokens: int,
        via: str = "sync",
    ) -> None:
        """Store one answer and commit it (autocommit mode: every statement is its own transaction)."""
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, endpoint, model, request_id, json.dumps(data, ensure_ascii=False),
                 int(prompt_tokens), int(completion_tokens), via, time.time()),
            )

    def count(self, endpoint: str | None = None) -> int:
        with self._lock:
            if endpoint is None:
                return self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
            return self._conn.execute("SELECT COUNT(*) FROM answers WHERE endpoint = ?", (endpoint,)).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
