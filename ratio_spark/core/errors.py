"""The project's error contract: what the user can fix, what failed, and how either reaches the console.

Every exception the project raises on purpose derives from one of two bases:

* ``UserError`` (exit code 2): bad usage, configuration or input — a missing path, an unknown lexicon, a
  malformed ``--set``, a table that does not exist yet. The message says what, where, and how to fix it.
* ``RunFailure`` (exit code 1): the run itself found something wrong — counts that do not reconcile,
  splits that leak, a stage that breaks its contract. The message says which check failed and what it saw.

``describe_error`` turns any exception (ours, an ``OSError``, or one that Spark raises because of user
input: a missing path, not a Delta table, an unknown column) into an exit code and one line; the CLI
(``ratio_spark.cli.main``) prints that line and keeps the full trace in a log file. This module imports
nothing heavy (no pyspark): Spark's exceptions are recognised by name and message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

USAGE_EXIT = 2
FAILURE_EXIT = 1


class UserError(Exception):
    """A problem in what the user gave (usage, configuration, input): exit code 2, one clear line."""

    exit_code = USAGE_EXIT


class RunFailure(Exception):
    """A check of the run failed (not the user's input): exit code 1."""

    exit_code = FAILURE_EXIT


class ReconciliationError(RunFailure, RuntimeError):
    """Counts that must add up do not: something was lost or made up."""


class ContractError(RunFailure, RuntimeError):
    """A stage wrote what its declaration (``pipeline/stages.py``) does not declare, or missed what it does:
    a fault of the stage's code, not of the user's input."""


class MissingTableError(UserError, FileNotFoundError):
    """A table a stage or command reads is not there (yet) or lacks columns: the message names the stage
    to run first."""


@dataclass(frozen=True)
class ErrorReport:
    exit_code: int
    message: str
    expected: bool  # False: an unexpected exception (a bug, or a Spark failure we do not recognise)


# Spark errors caused by user input, recognised by their error class or Java exception, with a hint.
# Each entry: (pattern over "<exception class>: <message>", line template using the match's groups).
_NOT_A_TABLE = "{0} is not a Delta table: run the stage that writes it first, or point tables.root at a tables folder"
_SPARK_INPUT_ERRORS: list[tuple[str, str]] = [
    (r"\[PATH_NOT_FOUND\] Path does not exist: (\S+?)\.?(\s|$)",
     "input path does not exist: {0} (check inputs[].path / metadata_path, or the table location)"),
    (r"\[DELTA_TABLE_NOT_FOUND\] Delta table `([^`]+)` doesn't exist", _NOT_A_TABLE),
    (r"\[DELTA_MISSING_DELTA_TABLE\].*?`?([^`\s]+)`? is not a Delta table", _NOT_A_TABLE),
    (r"(\S+) is not a Delta table", _NOT_A_TABLE),
    (r"\[(?:UNRESOLVED_COLUMN|FIELD_NOT_FOUND)[^\]]*\][^`]*`([^`]+)`",
     "a table lacks the column `{0}`: it was written by another version of ratio-spark; rerun the stage that writes it"),
    (r"java\.nio\.file\.AccessDeniedException: (\S+)", "permission denied: {0} (choose a writable tables.root / release.root)"),
    (r"SparkFileNotFoundException: File (\S+) does not exist",
     "a data file of a table is missing: {0} (deleted or moved outside Delta: restore it, or rerun the stage that "
     "writes the table)"),
    (r"(?:ValueError: cannot read the Parquet file|ChecksumException: Checksum error:) (\S+?):? ",
     "a data file of a table is damaged: {0} (rewrite the table with the stage that writes it, or restore the file)"),
    (r"(?:java\.io\.FileNotFoundException|java\.nio\.file\.NoSuchFileException): (\S+)",
     "file not found: {0} (was it moved or deleted while the run read it?)"),
    (r"\[DELTA_CANNOT_CREATE_LOG_PATH\] Cannot create (\S+?)(?:/_delta_log)?(?:\s|$)",
     "cannot create a table at {0}: choose a writable tables.root (is a part of the path a file?)"),
    (r"Parent path is not a directory: (\S+)", "{0} is a file, not a folder: choose another tables.root / release.root"),
    (r"(?:Mkdirs failed to create|Cannot create directory|Unable to create directory) (\S+?)(?:/_delta_log)?(?:\s|$)",
     "cannot create {0}: choose a writable tables.root / release.root"),
    (r"org\.apache\.hadoop\.fs\.UnsupportedFileSystemException: No FileSystem for scheme \"?(\w+)",
     "no file system for '{0}://' paths in this Spark: use a path this cluster can read (or add its connector)"),
]


# Errors about a path the user named (a file that is not there, a folder that cannot be written).
_PATH_ERRORS = (FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError, FileExistsError)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def describe_spark_error(exc: BaseException) -> str | None:
    """One line for a Spark / Py4J exception that comes from user input; None when it does not look like one."""
    name = type(exc).__name__
    if name not in ("AnalysisException", "Py4JJavaError", "IllegalArgumentException", "SparkException") and \
            not type(exc).__module__.startswith(("pyspark", "py4j")):
        return None
    text = f"{name}: {exc}"
    for pattern, template in _SPARK_INPUT_ERRORS:
        found = re.search(pattern, text)
        if found:
            return template.format(*found.groups())
    return None


def describe_error(exc: BaseException) -> ErrorReport:
    """Exit code and one line for any exception (see the module docstring)."""
    if isinstance(exc, (UserError, RunFailure)):
        return ErrorReport(exc.exit_code, str(exc) or type(exc).__name__, True)
    spark_line = describe_spark_error(exc)
    if spark_line is not None:
        return ErrorReport(USAGE_EXIT, spark_line, True)
    if isinstance(exc, _PATH_ERRORS):
        where = f"{exc.strerror}: {exc.filename}" if exc.filename is not None and exc.strerror else _first_line(str(exc))
        return ErrorReport(USAGE_EXIT, where or type(exc).__name__, True)
    detail = _first_line(str(exc))
    return ErrorReport(FAILURE_EXIT, f"unexpected {type(exc).__name__}" + (f": {detail}" if detail else ""), False)
