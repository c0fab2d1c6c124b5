"""The one TSV dialect of the project's hand-edited files: lexicons, candidates, labels, decisions,
prefixes, pattern templates and terms.

Tab-separated, one header line, UTF-8, ``\\n`` line ends. A field is quoted (csv-style, ``""`` for a quote)
only when it must be: it holds a tab or a line break, or starts with a quote. So JSON provenance stays
readable (``{"prefix":"to address"}``), and Python's csv module, pandas and spreadsheets read every file
back exactly. ``read_tsv`` returns each row with its line number, for messages that point at the line.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from ratio_spark.core.files import read_text

if TYPE_CHECKING:
    from importlib.abc import Traversable


def _field(value: object) -> str:
    text = "" if value is None else str(value)
    if any(c in text for c in "\t\n\r") or text.startswith('"'):
        return '"' + text.replace('"', '""') + '"'
    return text


def write_tsv(path: str | os.PathLike, header: Iterable[str], rows: Iterable[Iterable]) -> int:
    """Write header + rows in one atomic replace (a killed run leaves the old file). Returns the rows written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8", newline="") as handle:
        handle.write("\t".join(map(_field, header)) + "\n")
        for row in rows:
            handle.write("\t".join(map(_field, row)) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def read_tsv(path: str | os.PathLike | Traversable, required: Iterable[str] = (), *, comments: bool = False,
             error: type[Exception] = ValueError) -> list[tuple[int, dict[str, str]]]:
    """(line number, row) for every non-blank row; values stripped, a missing value is "".

    ``path`` may be a file of the package data (``importlib.resources``; inside a zip it is no ``Path``).
    ``required``: columns the header must have (else ``error`` names the missing ones). ``comments``:
    lines starting with ``#`` are skipped (pattern templates and term lists use them). A file that is missing or
    not UTF-8 text raises ``error`` with one line naming it.
    """
    path = Path(path) if isinstance(path, (str, os.PathLike)) else path
    if not path.is_file():
        raise error(f"{path}: file not found")
    handle = io.StringIO(read_text(path, error), newline="")
    line_no = 0

    def lines() -> Iterator[str]:
        nonlocal line_no
        for line_no, line in enumerate(handle, start=1):  # noqa: B007 - read by the loop below
            if not (comments and line.lstrip().startswith("#")):
                yield line

    reader = csv.DictReader(lines(), delimiter="\t")
    header = [name for name in reader.fieldnames or [] if name]
    missing = [c for c in required if c not in header]
    if missing:
        raise error(f"{path}: missing columns {missing}; expected {list(required)} (tab-separated)")
    out = []
    for row in reader:
        values = {k: (row.get(k) or "").strip() for k in header}
        if any(values.values()):
            out.append((line_no, values))
    return out
