"""The one record shape every reader produces.

A reader turns raw input (bytes of a file, or a line) into ``ParsedRecord`` dicts: either a paper
(``reject_reason`` is None) or a reject with a reason code (``ratio_spark.core.schema.Reason``, stage
ingest) and a readable detail. Readers are pure Python functions over one input unit;
``ratio_spark.pipeline.ingest.spark_io`` runs them over Arrow batches in Spark. Nothing is dropped: every input unit yields at least one record.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, TypedDict

from pyspark.sql import types as T

from ratio_spark.core.text import collapse_whitespace
from ratio_spark.pipeline.ingest.bibliography import BIBLIOGRAPHY_TYPE

SECTION_TYPE = T.StructType(
    [
        T.StructField("heading", T.StringType()),
        T.StructField("paragraphs", T.ArrayType(T.StringType())),
    ]
)

# Output of every reader. ``raw_date`` and ``date_hint`` let later rules (metadata joins) fill dates.
RECORD_SCHEMA = T.StructType(
    [
        T.StructField("paper_id", T.StringType()),
        T.StructField("pub_date", T.DateType()),
        T.StructField("date_precision", T.StringType()),  # day | month | year
        T.StructField("date_source", T.StringType()),  # which rule set the date
        T.StructField("title", T.StringType()),
        T.StructField("sections", T.ArrayType(SECTION_TYPE)),
        # entries + in-text mentions (ratio_spark.pipeline.ingest.bibliography); null: the format has none
        T.StructField("bibliography", BIBLIOGRAPHY_TYPE),
        T.StructField("license", T.StringType()),  # the paper's licence (license_name); null: not stated
        T.StructField("source_format", T.StringType()),
        T.StructField("source_path", T.StringType()),
        T.StructField("reject_reason", T.StringType()),
        T.StructField("reject_detail", T.StringType()),
    ]
)
RECORD_COLUMNS = [f.name for f in RECORD_SCHEMA.fields]


class ParsedRecord(TypedDict, total=False):
    paper_id: str | None
    pub_date: dt.date | None
    date_precision: str | None
    date_source: str | None
    title: str | None
    sections: list[dict[str, Any]] | None
    bibliography: dict[str, Any] | None
    license: str | None
    source_format: str
    source_path: str
    reject_reason: str | None
    reject_detail: str | None


def reject(source_format: str, source_path: str, reason: str, detail: str, paper_id: str | None = None) -> ParsedRecord:
    return {
        "paper_id": paper_id,
        "source_format": source_format,
        "source_path": source_path,
        "reject_reason": reason,
        "reject_detail": detail[:500],
    }


def paper_record(source_format: str, source_path: str, paper_id: str, title: Any, sections: list[dict],
                 date: dict | None, date_source: str, bibliography: dict | None = None,
                 license: str | None = None) -> ParsedRecord:
    """An accepted paper; ``date`` is a ``dates.ParsedDate`` (None until a later rule sets it);
    ``bibliography`` as ``ingest.bibliography.bibliography`` builds it (None: the format has none);
    ``license`` as ``license_name`` gives it (None: the record states none)."""
    return {
        "paper_id": paper_id,
        "pub_date": date["pub_date"] if date else None,
        "date_precision": date["date_precision"] if date else None,
        "date_source": date_source,
        "title": (collapse_whitespace(title) or None) if isinstance(title, str) else None,
        "sections": sections,
        "bibliography": bibliography,
        "license": license,
        "source_format": source_format,
        "source_path": source_path,
        "reject_reason": None,
        "reject_detail": None,
    }


# Creative Commons licence URLs (http or https, any host spelling) -> SPDX ids: CC-BY-4.0, CC-BY-NC-SA-3.0, CC0-1.0.
_CC_LICENSE = re.compile(r"creativecommons\.org/licenses/(by(?:-nc)?(?:-nd|-sa)?)/(\d\.\d)", re.IGNORECASE)
_CC_ZERO = re.compile(r"creativecommons\.org/publicdomain/zero/(\d\.\d)", re.IGNORECASE)
_MAX_LICENSE_CHARS = 300


def license_name(*statements: Any) -> str | None:
    """A paper's licence as the ``papers`` table keeps it, from the first statement that says anything: the
    SPDX id when a statement holds a Creative Commons URL (``CC-BY-4.0``, ``CC0-1.0``), else the statement
    itself (a URL, a code such as S2's ``CCBY``, a sentence), whitespace collapsed; None when all are empty.
    A release filters on it to say what it may redistribute."""
    for statement in statements:
        text = collapse_whitespace(statement) if isinstance(statement, str) else ""
        if not text:
            continue
        if match := _CC_LICENSE.search(text):
            return f"CC-{match.group(1).upper()}-{match.group(2)}"
        if match := _CC_ZERO.search(text):
            return f"CC0-{match.group(1)}"
        return text[:_MAX_LICENSE_CHARS]
    return None
