"""The one record shape every reader produces, and the reject reasons.

A reader turns raw input (bytes of a file, or a line) into ``ParsedRecord`` dicts: either a paper
(``reject_reason`` is None) or a reject with a snake_case reason and a readable detail. Readers are
pure Python functions over one input unit; ``ratio_spark.pipeline.ingest.spark_io`` runs them over Arrow
batches in Spark. Nothing is dropped: every input unit yields at least one record.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypedDict

from pyspark.sql import types as T


class Reason:
    """Snake_case reject codes (datatrove-style: a filter says why)."""

    MALFORMED_XML = "malformed_xml"
    MALFORMED_JSON = "malformed_json"
    UNDECODABLE_BYTES = "undecodable_bytes"
    EMPTY_FILE = "empty_file"
    UNREADABLE_FILE = "unreadable_file"
    TRUNCATED_FILE = "truncated_file"
    UNSUPPORTED_COMPRESSION = "unsupported_compression"
    FILE_TOO_LARGE = "file_too_large"
    MISSING_ID = "missing_id"
    MISSING_DATE = "missing_date"
    UNPARSEABLE_DATE = "unparseable_date"
    DATE_OUT_OF_RANGE = "date_out_of_range"
    EMPTY_BODY = "empty_body"
    UNEXPECTED_SHAPE = "unexpected_shape"
    EXCLUDED_BY_PATH_RULE = "excluded_by_path_rule"
    DUPLICATE_PAPER_ID = "duplicate_paper_id"
    MISSING_METADATA = "missing_metadata"


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
