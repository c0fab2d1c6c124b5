"""The Python half's one way to read a table of a tables root: ``read_table`` is ``core.delta.read_delta`` (the one
Delta reader) with the command that writes the table in its error when the table or a column is missing (the
stage declarations' ``run_first``; ``silver`` is written by ``ratio-spark silver build``), and, given ``inputs``,
the version read recorded for a run manifest. The evaluation, the silver set, the human evaluation and Inspire
read through it."""

from __future__ import annotations

import os
from typing import Any, Sequence

import pyarrow as pa

from ratio_spark.core.delta import DeltaColumnsMissing, delta_version, read_delta
from ratio_spark.evaluation.manifest import delta_entry
from ratio_spark.pipeline.stages import run_first

# Tables of the Python half: name -> the command that writes it (the pipeline's come from its stage declarations).
PYTHON_HALF_WRITERS = {"silver": "`ratio-spark silver build`"}


def writer_of(name: str) -> str:
    """The command to run for table ``name``: "`ratio-spark pools`"."""
    return PYTHON_HALF_WRITERS.get(name) or run_first(name)


def table_version(location: str | os.PathLike, name: str) -> int:
    """The latest version of table ``name`` at ``location``; a missing table names the command that writes it."""
    return delta_version(location, missing_hint=f"run {writer_of(name)} first")


def read_table(location: str | os.PathLike, name: str, columns: Sequence[str] | None = None,
               filters: list[tuple[str, str, Any]] | None = None, *, inputs: dict | None = None,
               role: str | None = None, error: type[Exception] = DeltaColumnsMissing) -> pa.Table:
    """Table ``name`` at ``location``: its ``columns`` (all when None) matching ``filters`` (DNF tuples,
    ``[("split", "=", "test")]``). With ``inputs``, one snapshot is read and recorded there as
    ``table:<role or name>`` (location and version). A missing table is ``DeltaTableMissing``, missing columns
    are ``error``; both say which command to run."""
    version = None
    if inputs is not None:
        version = table_version(location, name)
        inputs[f"table:{role or name}"] = delta_entry(location, version)
    try:
        return read_delta(location, columns, filters, missing_hint=f"run {writer_of(name)} first", version=version)
    except DeltaColumnsMissing as exc:
        raise error(f"{exc}: rerun {writer_of(name)}") from None
