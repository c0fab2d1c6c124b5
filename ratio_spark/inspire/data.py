"""What Inspire reads from the Delta tables (``deltalake``, no JVM): papers, references, sentences."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ratio_spark.core.errors import UserError


class InspireDataError(UserError, ValueError):
    """A table Inspire needs is missing or lacks a column: the message says which stage writes it."""


WRITTEN_BY = {"papers": "ingest", "sentences": "segment", "references": "citations"}


def open_table(location: str, name: str):
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(location)
    except TableNotFoundError:
        raise InspireDataError(
            f"table {name!r} not found at {location}: run `ratio-spark {WRITTEN_BY.get(name, name)}` first"
        ) from None


def read_rows(location: str, name: str, columns: list[str], paper_ids: list[str] | None = None) -> pa.Table:
    """The table's ``columns`` (only the rows of ``paper_ids`` when given), as an Arrow table."""
    table = open_table(location, name)
    available = {f.name for f in table.schema().fields}
    missing = [c for c in columns if c not in available]
    if missing:
        raise InspireDataError(
            f"table {name!r} at {location} has no column(s) {missing}: rerun `ratio-spark {WRITTEN_BY.get(name, name)}`"
        )
    dataset = table.to_pyarrow_dataset()
    expression = pc.field("paper_id").isin(paper_ids) if paper_ids is not None else None
    return dataset.to_table(columns=columns, filter=expression)


@dataclass(frozen=True)
class Paper:
    paper_id: str
    title: str | None
    pub_date: dt.date
    abstract: str
    body: str  # every non-abstract paragraph, joined (cut at max_body_chars by the caller's choice)


def papers_from_rows(rows: pa.Table, max_body_chars: int = 0) -> list[Paper]:
    """Papers with their abstract (the ``Abstract`` section the readers put first) and body text."""
    out = []
    for row in rows.to_pylist():
        sections = row["sections"] or []
        has_abstract = bool(sections) and sections[0]["heading"] == "Abstract"
        abstract = " ".join(sections[0]["paragraphs"]) if has_abstract else ""
        body = ""
        if max_body_chars:
            body = " ".join(p for s in sections[1 if has_abstract else 0:] for p in s["paragraphs"])[:max_body_chars]
        out.append(Paper(row["paper_id"], row["title"], row["pub_date"], abstract, body))
    return sorted(out, key=lambda p: p.paper_id)


def table_version(location: str, name: str) -> int:
    return int(open_table(location, name).version())
