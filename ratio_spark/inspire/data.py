"""What Inspire reads from the Delta tables (``deltalake``, no JVM): papers, references, sentences."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

from ratio_spark.evaluation.tables import read_table


def read_rows(location: str, name: str, columns: list[str], paper_ids: list[str] | None = None) -> pa.Table:
    """The table's ``columns`` (only the rows of ``paper_ids`` when given), as an Arrow table; a missing table
    or column is a one-line error naming the stage that writes it (``evaluation.tables.read_table``)."""
    return read_table(location, name, columns, [("paper_id", "in", paper_ids)] if paper_ids is not None else None)


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


