"""Our own JSONL format: one paper per JSON object, already split into sections and paragraphs.

    {"paper_id": "P14-1001", "pub_date": "2014-06-22" | "2014-06" | "2014", "title": "..." | null,
     "sections": [{"heading": "Introduction" | null, "paragraphs": ["...", "..."]}],
     "license": "CC-BY-4.0" | "https://creativecommons.org/licenses/by/4.0/" | null}    (optional)

One object per line of a ``*.jsonl`` / ``*.jsonl.gz`` / ``*.ndjson`` file, or one per ``*.json`` file.
The format is the simplest way to bring any other corpus in: convert it to this shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.dates import parse_iso_date, resolve_date
from ratio_spark.core.schema import Reason
from ratio_spark.pipeline.ingest.records import ParsedRecord, license_name, paper_record, reject

FORMAT = "jsonl"
# pub_date must be ISO (the shared free-text parser would read "2014-13-45" as the year 2014).
_STRICT_ISO = re.compile(r"^\d{4}(?:-\d{2}(?:-\d{2})?)?$")


def _valid_pub_date(raw: Any) -> bool:
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        return False
    if isinstance(raw, str) and not _STRICT_ISO.match(raw.strip()):
        return False
    return parse_iso_date(raw) is not None


def _sections(raw: Any, options: ReaderOptions) -> list[dict] | str:
    """The cleaned sections, or a string saying what is wrong with their shape."""
    if not isinstance(raw, list):
        return f"sections is {type(raw).__name__}, not a list"
    sections = []
    for i, section in enumerate(raw):
        if not isinstance(section, dict):
            return f"sections[{i}] is not an object"
        heading, paragraphs = section.get("heading"), section.get("paragraphs")
        if heading is not None and not isinstance(heading, str):
            return f"sections[{i}].heading is not a string or null"
        if not isinstance(paragraphs, list) or not all(isinstance(p, str) for p in paragraphs):
            return f"sections[{i}].paragraphs is not a list of strings"
        cleaned = [p for p in (options.clean(p) for p in paragraphs) if p]
        if cleaned:
            sections.append({"heading": (options.clean(heading) or None) if heading else None, "paragraphs": cleaned})
    return sections


def parse_jsonl(data: bytes, source_path: str, options: ReaderOptions) -> list[ParsedRecord]:
    """One JSON object (a line or a whole .json file) into a paper or a reject saying why."""

    def fail(reason: str, detail: str, paper_id: str | None = None) -> list[ParsedRecord]:
        return [reject(FORMAT, source_path, reason, detail, paper_id)]

    if not data.strip():
        return fail(Reason.EMPTY_FILE, "no content")
    try:
        obj = json.loads(data.decode("utf-8"))  # strict: a replaced byte would silently corrupt text
    except UnicodeDecodeError as exc:
        return fail(Reason.UNDECODABLE_BYTES, f"not valid UTF-8: {exc}")
    except json.JSONDecodeError as exc:
        return fail(Reason.MALFORMED_JSON, f"JSON parser: {exc}")
    if not isinstance(obj, dict):
        return fail(Reason.UNEXPECTED_SHAPE, f"top level is {type(obj).__name__}, not an object")

    raw_id = obj.get("paper_id")
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        return fail(Reason.MISSING_ID, "no paper_id")
    if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool):
        return fail(Reason.UNEXPECTED_SHAPE, f"paper_id is {type(raw_id).__name__}, not a string")
    paper_id = str(raw_id).strip()

    title = obj.get("title")
    if title is not None and not isinstance(title, str):
        return fail(Reason.UNEXPECTED_SHAPE, f"title is {type(title).__name__}, not a string or null", paper_id)
    license = obj.get("license")
    if license is not None and not isinstance(license, str):
        return fail(Reason.UNEXPECTED_SHAPE, f"license is {type(license).__name__}, not a string or null", paper_id)
    if "sections" not in obj:  # a record without body text says so with "sections": [] (then empty_body)
        return fail(Reason.UNEXPECTED_SHAPE, 'no "sections" key (a paper without body text has "sections": [], '
                    "and is then rejected as empty_body)", paper_id)
    sections = _sections(obj["sections"], options)
    if isinstance(sections, str):
        return fail(Reason.UNEXPECTED_SHAPE, sections, paper_id)

    raw_date = obj.get("pub_date")
    valid = raw_date in (None, "") or _valid_pub_date(raw_date)
    # An invalid pub_date gives nothing to the `source` rule; the other rules may still date the paper.
    candidates = [("pub_date", raw_date)] if valid else []
    date, rule, failure = resolve_date(candidates, paper_id, options.date_rules, options.min_year, options.max_year)
    if date is None:
        if not valid:
            return fail(Reason.UNPARSEABLE_DATE, f"pub_date {raw_date!r} is not YYYY-MM-DD, YYYY-MM or YYYY", paper_id)
        reason, detail = failure.split("|", 1)
        return fail(reason, detail, paper_id)

    shortfall = options.body_shortfall(sections)
    if shortfall:
        return fail(Reason.EMPTY_BODY, shortfall, paper_id)
    return [paper_record(FORMAT, source_path, paper_id, title, sections, date, rule, license=license_name(license))]
