"""The one Delta reader of the plain-Python half: ``deltalake`` + pyarrow, no JVM.

``deltalake``'s scan reads Parquet through its own (Rust) filesystem, wrapped as a pyarrow Python
filesystem. pyarrow's I/O threads call into it, and when the interpreter exits while one of them is
still running (a partly consumed scan, read-ahead, a file handle closed late) the process dies with
"terminate called without an active exception" (SIGABRT) or a segfault (delta-rs 1.6; the same report:
pola-rs/polars#24169). Handing the scan pyarrow's own filesystem for the table's location avoids the
Rust filesystem altogether: same rows, same partition pruning, a clean exit
(``tests/core/test_delta_reader.py`` shows both in subprocesses). Every read of the Python half goes through
``read_delta`` (or ``delta_dataset`` for a lazy scan); writes use ``deltalake.write_deltalake``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ratio_spark.core.errors import MissingTableError, UserError


class DeltaTableMissing(MissingTableError):
    """No Delta table at the location; the message says which stage or command writes it."""


class DeltaColumnsMissing(UserError, ValueError):
    """The table lacks columns the caller reads."""


def is_delta_table(location: str | os.PathLike) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(str(location))


def _filesystem(location: str) -> pafs.FileSystem:
    """pyarrow's filesystem rooted at the table (local paths, file://, s3://, gs://, abfs://, hdfs://)."""
    if "://" in location:
        filesystem, path = pafs.FileSystem.from_uri(location)
    else:
        filesystem, path = pafs.LocalFileSystem(), str(Path(location).resolve())
    return pafs.SubTreeFileSystem(path, filesystem)


def delta_version(location: str | os.PathLike, *, missing_hint: str = "run the pipeline stage that writes it first") -> int:
    """The table's latest version: pass it to ``read_delta(version=...)`` to read and record one snapshot."""
    from deltalake import DeltaTable

    if not is_delta_table(location):
        raise DeltaTableMissing(f"no Delta table at {location}: {missing_hint}")
    return DeltaTable(str(location)).version()


def delta_dataset(location: str | os.PathLike, *, missing_hint: str = "run the pipeline stage that writes it first",
                  version: int | None = None):
    """The table's active files (at ``version``; the latest when None) as a ``pyarrow.dataset.Dataset`` read
    through pyarrow's own filesystem."""
    from deltalake import DeltaTable

    location = str(location)
    if not is_delta_table(location):
        raise DeltaTableMissing(f"no Delta table at {location}: {missing_hint}")
    return DeltaTable(location, version=version).to_pyarrow_dataset(filesystem=_filesystem(location))


def read_delta(
    location: str | os.PathLike,
    columns: Sequence[str] | None = None,
    filters: list[tuple[str, str, Any]] | None = None,
    *,
    missing_hint: str = "run the pipeline stage that writes it first",
    version: int | None = None,
) -> pa.Table:
    """The table's rows (``columns``, all when None) matching ``filters`` (``[("split", "=", "test")]``:
    DNF tuples as pyarrow.parquet takes them; partition columns are pruned without reading their files), at
    ``version`` (the latest when None)."""
    dataset = delta_dataset(location, missing_hint=missing_hint, version=version)
    if columns is not None:
        missing = [c for c in columns if c not in dataset.schema.names]
        if missing:
            raise DeltaColumnsMissing(f"the Delta table at {location} lacks column(s) {missing}")
    return dataset.to_table(columns=list(columns) if columns is not None else None,
                            filter=pq.filters_to_expression(filters) if filters else None)
