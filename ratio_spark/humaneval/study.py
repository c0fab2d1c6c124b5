"""The study database: one SQLite file that holds a human evaluation from assignment to analysis.

What the annotators saw (queries, both systems' top lists, the recorded A/B order per query), who labels
what (accounts with hashed tokens, assignments) and every answer (a usefulness label per candidate, a list
preference and a comment per assignment). Every answer is written in its own transaction the moment it is
given, in WAL mode with ``synchronous=FULL``, so a closed tab or a killed server loses nothing that was
acknowledged.

A candidate that appears in both lists of a query is one row of ``labels`` (labelled once, shown the same in
both lists). An assignment is complete when every distinct candidate of its two lists is labelled and a
preference is given: the paper's rule "all 20 candidates" when the lists do not overlap.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ratio_spark.core.errors import UserError

SCHEMA_VERSION = "1"
PREFERENCES = ("A", "B", "tie")
MAX_COMMENT_CHARS = 5000
SQLITE_MIN_INT, SQLITE_MAX_INT = -(2**63), 2**63 - 1

_SCHEMA = """
CREATE TABLE study (key TEXT PRIMARY KEY, value TEXT NOT NULL);            -- JSON values
CREATE TABLE systems (
  system TEXT PRIMARY KEY, position INTEGER NOT NULL UNIQUE, run_path TEXT NOT NULL, run_sha256 TEXT NOT NULL);
CREATE TABLE queries (
  query_id TEXT PRIMARY KEY, move TEXT NOT NULL, marker TEXT, stratum TEXT, query_text TEXT NOT NULL,
  gold_candidate_id TEXT NOT NULL, paper_id TEXT, subfield TEXT,
  system_a TEXT NOT NULL REFERENCES systems, system_b TEXT NOT NULL REFERENCES systems,
  CHECK (system_a <> system_b));
CREATE TABLE candidates (candidate_id TEXT PRIMARY KEY, text TEXT NOT NULL, paper_id TEXT);
CREATE TABLE lists (
  query_id TEXT NOT NULL REFERENCES queries, system TEXT NOT NULL REFERENCES systems, rank INTEGER NOT NULL,
  candidate_id TEXT NOT NULL REFERENCES candidates,
  PRIMARY KEY (query_id, system, rank), UNIQUE (query_id, system, candidate_id));
CREATE TABLE accounts (
  name TEXT PRIMARY KEY, role TEXT NOT NULL CHECK (role IN ('annotator', 'admin')), subfields TEXT NOT NULL,
  token_sha256 TEXT NOT NULL UNIQUE);
CREATE TABLE assignments (
  assignment_id INTEGER PRIMARY KEY, annotator TEXT NOT NULL REFERENCES accounts, query_id TEXT NOT NULL
  REFERENCES queries, position INTEGER NOT NULL, preference TEXT CHECK (preference IN ('A', 'B', 'tie')),
  comment TEXT NOT NULL DEFAULT '', opened_at TEXT, completed_at TEXT,
  UNIQUE (annotator, query_id), UNIQUE (annotator, position));
CREATE TABLE labels (
  assignment_id INTEGER NOT NULL REFERENCES assignments, candidate_id TEXT NOT NULL REFERENCES candidates,
  useful INTEGER NOT NULL CHECK (useful IN (0, 1)), labelled_at TEXT NOT NULL,
  PRIMARY KEY (assignment_id, candidate_id));
"""


class StudyError(UserError, ValueError):
    """A study file that cannot be created or opened, or an answer that does not fit the study."""


class StudyBusy(StudyError):
    """The study file stayed locked by other writers past the busy timeout (twice): the answer was not saved
    and can be sent again (the app answers 503)."""


def _busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Account:
    name: str
    role: str  # annotator | admin


@dataclass
class StudyContent:
    """Everything ``Study.create`` writes; rows are plain dicts keyed by the tables' column names."""

    meta: dict
    systems: list[dict]
    queries: list[dict]
    candidates: list[dict]
    lists: list[dict]
    accounts: list[dict]
    assignments: list[dict]


class Study:
    """An open study file. Each method opens its own short connection, so one object serves many threads."""

    BUSY_TIMEOUT_S = 30.0  # how long a connection waits for another writer's lock (then once more, then StudyBusy)

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise StudyError(f"no study at {self.path}: create one with `ratio-spark humaneval assign`")
        version = self.meta().get("schema_version")
        if version != SCHEMA_VERSION:
            raise StudyError(f"{self.path} has study schema {version!r}; this version reads {SCHEMA_VERSION!r}")

    # ------------------------------------------------------------------ connections

    @contextlib.contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        try:
            conn = sqlite3.connect(self.path, timeout=self.BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise StudyError(f"cannot open the study {self.path}: {exc}") from None
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = FULL")
            if write:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:  # the busy timeout ran out: wait once more
                    if not _busy(exc):
                        raise
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            else:
                yield conn
        except sqlite3.DatabaseError as exc:
            if _busy(exc):
                raise StudyBusy(f"the study is busy with other answers (waited {2 * self.BUSY_TIMEOUT_S:.0f} s): this "
                                "answer was not saved, send it again") from None
            raise StudyError(f"the study {self.path} cannot be read or written: {exc}") from None
        finally:
            conn.close()

    @classmethod
    def create(cls, path: str | Path, content: StudyContent) -> "Study":
        """Write a new study file in one transaction; an existing file is never overwritten."""
        path = Path(path)
        if path.exists():
            raise StudyError(f"{path} exists: a study is never overwritten (its labels would be lost); "
                             "choose another --out or delete the file yourself")
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("BEGIN")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            meta = {**content.meta, "schema_version": SCHEMA_VERSION}
            conn.executemany("INSERT INTO study VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
            for table, rows in (("systems", content.systems), ("queries", content.queries),
                                ("candidates", content.candidates), ("lists", content.lists),
                                ("accounts", content.accounts), ("assignments", content.assignments)):
                if rows:
                    columns = list(rows[0])
                    conn.executemany(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                        [tuple(row[c] for c in columns) for row in rows])
            conn.execute("COMMIT")
        except BaseException:
            conn.close()
            path.unlink(missing_ok=True)
            raise
        conn.close()
        return cls(path)

    # ------------------------------------------------------------------ reading

    def meta(self) -> dict:
        with self._connect() as conn:
            try:
                rows = conn.execute("SELECT key, value FROM study").fetchall()
            except sqlite3.DatabaseError:
                raise StudyError(f"{self.path} is not a study database") from None
        return {row["key"]: json.loads(row["value"]) for row in rows}

    def authenticate(self, token: str | None) -> Account | None:
        """The account whose token this is, comparing the digest with every account's in constant time."""
        if not token:
            return None
        digest = token_digest(token)
        with self._connect() as conn:
            rows = conn.execute("SELECT name, role, token_sha256 FROM accounts ORDER BY name").fetchall()
        found = None
        for row in rows:  # no early exit: the time taken does not depend on which account matches
            if hmac.compare_digest(digest, row["token_sha256"]):
                found = Account(row["name"], row["role"])
        return found

    def assignments_of(self, annotator: str) -> list[dict]:
        """The annotator's assignments in their order, with move and completion."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT a.assignment_id, a.position, a.query_id, q.move, a.completed_at IS NOT NULL AS complete, "
                "(SELECT COUNT(*) FROM labels l WHERE l.assignment_id = a.assignment_id) AS labelled "
                "FROM assignments a JOIN queries q USING (query_id) WHERE a.annotator = ? ORDER BY a.position",
                (annotator,)).fetchall()
        return [dict(row) for row in rows]

    def owner(self, assignment_id: int) -> str | None:
        """The annotator of an assignment; None when there is none (an id outside SQLite's 64-bit integers
        cannot name one, and would overflow the query)."""
        if not SQLITE_MIN_INT <= assignment_id <= SQLITE_MAX_INT:
            return None
        with self._connect() as conn:
            row = conn.execute("SELECT annotator FROM assignments WHERE assignment_id = ?", (assignment_id,)).fetchone()
        return row["annotator"] if row else None

    def assignment(self, assignment_id: int) -> dict:
        """One assignment as the annotator sees it: the query, lists A and B, and the answers so far."""
        with self._connect() as conn:
            head = conn.execute(
                "SELECT a.*, q.move, q.query_text, q.system_a, q.system_b FROM assignments a "
                "JOIN queries q USING (query_id) WHERE a.assignment_id = ?", (assignment_id,)).fetchone()
            if head is None:
                raise StudyError(f"no assignment {assignment_id}")
            lists = {}
            for side in ("a", "b"):
                lists[side.upper()] = [dict(r) for r in conn.execute(
                    "SELECT l.rank, l.candidate_id, c.text FROM lists l JOIN candidates c USING (candidate_id) "
                    "WHERE l.query_id = ? AND l.system = ? ORDER BY l.rank", (head["query_id"], head[f"system_{side}"]))]
            total = conn.execute("SELECT COUNT(*) FROM assignments WHERE annotator = ?", (head["annotator"],)).fetchone()[0]
            state = self._state(conn, assignment_id)
        return {"assignment_id": assignment_id, "annotator": head["annotator"], "position": head["position"],
                "of": total, "query_id": head["query_id"], "move": head["move"], "query_text": head["query_text"],
                "lists": lists, **state}

    def state(self, assignment_id: int) -> dict:
        with self._connect() as conn:
            return self._state(conn, assignment_id)

    @staticmethod
    def _state(conn: sqlite3.Connection, assignment_id: int) -> dict:
        row = conn.execute("SELECT query_id, preference, comment, completed_at FROM assignments WHERE assignment_id = ?",
                           (assignment_id,)).fetchone()
        if row is None:
            raise StudyError(f"no assignment {assignment_id}")
        labels = {r["candidate_id"]: bool(r["useful"]) for r in conn.execute(
            "SELECT candidate_id, useful FROM labels WHERE assignment_id = ?", (assignment_id,))}
        required = conn.execute("SELECT COUNT(DISTINCT candidate_id) FROM lists WHERE query_id = ?",
                                (row["query_id"],)).fetchone()[0]
        return {"labels": labels, "labelled": len(labels), "required": required, "preference": row["preference"],
                "comment": row["comment"], "complete": row["completed_at"] is not None}

    def progress(self) -> list[dict]:
        """Per annotator: assigned, started and complete assignments, and the last answer's time."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT c.name AS annotator, c.subfields, COUNT(a.assignment_id) AS assigned, "
                "SUM(a.completed_at IS NOT NULL) AS complete, "
                "SUM(EXISTS (SELECT 1 FROM labels l WHERE l.assignment_id = a.assignment_id) "
                "    OR a.preference IS NOT NULL) AS started, "
                "(SELECT MAX(l.labelled_at) FROM labels l JOIN assignments b USING (assignment_id) "
                " WHERE b.annotator = c.name) AS last_label_at "
                "FROM accounts c LEFT JOIN assignments a ON a.annotator = c.name WHERE c.role = 'annotator' "
                "GROUP BY c.name ORDER BY c.name").fetchall()
        return [{**dict(r), "complete": int(r["complete"] or 0), "started": int(r["started"] or 0)} for r in rows]

    def frames(self) -> dict:
        """Every table as a pandas DataFrame (the analyses and the export read these)."""
        import pandas as pd

        with self._connect() as conn:
            return {name: pd.read_sql_query(f"SELECT * FROM {name}", conn)
                    for name in ("systems", "queries", "candidates", "lists", "accounts", "assignments", "labels")}

    # ------------------------------------------------------------------ writing (one transaction per answer)

    def _finish(self, conn: sqlite3.Connection, assignment_id: int) -> dict:
        state = self._state(conn, assignment_id)
        if not state["complete"] and state["preference"] and state["labelled"] == state["required"]:
            conn.execute("UPDATE assignments SET completed_at = ? WHERE assignment_id = ?", (_now(), assignment_id))
            state["complete"] = True
        return state

    def mark_opened(self, assignment_id: int) -> None:
        with self._connect(write=True) as conn:
            conn.execute("UPDATE assignments SET opened_at = ? WHERE assignment_id = ? AND opened_at IS NULL",
                         (_now(), assignment_id))

    def set_label(self, assignment_id: int, candidate_id: str, useful: bool) -> dict:
        with self._connect(write=True) as conn:
            shown = conn.execute(
                "SELECT 1 FROM assignments a JOIN lists l USING (query_id) WHERE a.assignment_id = ? "
                "AND l.candidate_id = ?", (assignment_id, candidate_id)).fetchone()
            if shown is None:
                raise StudyError(f"candidate {candidate_id!r} is not in the lists of assignment {assignment_id}")
            conn.execute(
                "INSERT INTO labels VALUES (?, ?, ?, ?) ON CONFLICT (assignment_id, candidate_id) "
                "DO UPDATE SET useful = excluded.useful, labelled_at = excluded.labelled_at",
                (assignment_id, candidate_id, int(bool(useful)), _now()))
            return self._finish(conn, assignment_id)

    def set_preference(self, assignment_id: int, preference: str) -> dict:
        if preference not in PREFERENCES:
            raise StudyError(f"preference must be one of {PREFERENCES} (got {preference!r})")
        with self._connect(write=True) as conn:
            conn.execute("UPDATE assignments SET preference = ? WHERE assignment_id = ?", (preference, assignment_id))
            return self._finish(conn, assignment_id)

    def set_comment(self, assignment_id: int, comment: str) -> dict:
        if len(comment) > MAX_COMMENT_CHARS:
            raise StudyError(f"a comment has at most {MAX_COMMENT_CHARS} characters (got {len(comment)})")
        with self._connect(write=True) as conn:
            conn.execute("UPDATE assignments SET comment = ? WHERE assignment_id = ?", (comment, assignment_id))
            return self._state(conn, assignment_id)
