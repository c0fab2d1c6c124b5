"""Publication dates and paper ids: free-text and ISO dates, ACL Anthology ids, the date rules of a reader."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, TypedDict

from ratio_spark.core.schema import Reason


_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
         ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"),
         ("nov", "november"), ("dec", "december")]
    )
    for m in names
}
_ISO_DATE = re.compile(r"^\s*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")
_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")
_MONTH_WORD = re.compile(r"\b(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b", re.IGNORECASE)
# Old-style ACL Anthology ids (P14-1001) and new-style ones (2020.acl-main.1).
_ANTHOLOGY_OLD = re.compile(r"^([A-Z])(\d{2})-\d{4}$")
# A revised upload carries a version suffix: P16-1200v2, P16-1200v2.1.
_ANTHOLOGY_VERSION = re.compile(r"^([A-Z]\d{2}-\d{4}|(?:19|20)\d\d\.[a-z0-9]+-[a-z0-9]+\.\d+)v\d+(?:\.\d+)*$")
_ANTHOLOGY_NEW = re.compile(r"^((?:19|20)\d\d)\.[a-z0-9]+-[a-z0-9]+\.\d+$")


class ParsedDate(TypedDict):
    pub_date: dt.date
    date_precision: str


def parse_iso_date(value: Any) -> ParsedDate | None:
    """'2014-06-22' / '2014-06' / '2014' (or an int year) -> date with its precision."""
    if value is None:
        return None
    if isinstance(value, int):
        value = str(value)
    match = _ISO_DATE.match(str(value))
    if not match:
        return None
    year, month, day = match.group(1), match.group(2), match.group(3)
    try:
        if day:
            return {"pub_date": dt.date(int(year), int(month), int(day)), "date_precision": "day"}
        if month:
            return {"pub_date": dt.date(int(year), int(month), 1), "date_precision": "month"}
        return {"pub_date": dt.date(int(year), 1, 1), "date_precision": "year"}
    except ValueError:
        return None


def parse_free_text_date(text: str | None) -> ParsedDate | None:
    """Free-text dates as GROBID leaves them ('June 23-25 2014. 2014'): a year, and a month if named."""
    if not text:
        return None
    if re.match(r"^\s*\d{4}(-\d{1,2}){0,2}\s*$", text):
        return parse_iso_date(text)  # an ISO date that does not exist (2014-13-45) is no date
    years = _YEAR.findall(text)
    if not years:
        return None
    year = int(years[0])
    month_match = _MONTH_WORD.search(text)
    if month_match:
        return {"pub_date": dt.date(year, _MONTHS[month_match.group(1).lower()], 1), "date_precision": "month"}
    return {"pub_date": dt.date(year, 1, 1), "date_precision": "year"}


def canonical_paper_id(paper_id: str) -> str:
    """An ACL Anthology id without its version suffix (P16-1200v2 -> P16-1200): versions are one paper."""
    match = _ANTHOLOGY_VERSION.match(paper_id)
    return match.group(1) if match else paper_id


def date_from_anthology_id(paper_id: str | None) -> ParsedDate | None:
    """ACL Anthology ids carry the year: P14-1001 -> 2014 (two digits >= 50 mean 19xx), 2020.acl-main.1 -> 2020."""
    if not paper_id:
        return None
    match = _ANTHOLOGY_OLD.match(paper_id)
    if match:
        yy = int(match.group(2))
        return {"pub_date": dt.date(1900 + yy if yy >= 50 else 2000 + yy, 1, 1), "date_precision": "year"}
    match = _ANTHOLOGY_NEW.match(paper_id)
    if match:
        return {"pub_date": dt.date(int(match.group(1)), 1, 1), "date_precision": "year"}
    return None


def paper_id_from_path(path: str) -> str:
    """The file name without its data suffixes: .../P14-1001.tei.xml.gz -> P14-1001 (PMC's .nxml too)."""
    name = path.rsplit("/", 1)[-1].rsplit("!", 1)[-1].rsplit("/", 1)[-1]
    for suffix in (".gz", ".xml", ".nxml", ".tei", ".json", ".jsonl"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for suffix in (".xml", ".tei", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def resolve_date(
    candidates: list[tuple[str, Any]],
    paper_id: str | None,
    rules: list[str],
    min_year: int,
    max_year: int,
) -> tuple[ParsedDate | None, str | None, str | None]:
    """Apply the date rules in order.

    ``candidates`` are (rule name, raw value) pairs from the record itself (rule ``source``).
    Returns (date, rule that set it, or None) and, when no rule gave a usable date, the reason
    (missing_date / unparseable_date / date_out_of_range) in the third slot with a detail.
    """
    seen_values: list[str] = []
    out_of_range: list[str] = []
    for rule in rules:
        if rule == "source":
            for name, raw in candidates:
                if raw in (None, ""):
                    continue
                seen_values.append(f"{name}={raw!r}")
                parsed = parse_iso_date(raw) if isinstance(raw, int) else parse_free_text_date(str(raw))
                if parsed is None:
                    continue
                if not (min_year <= parsed["pub_date"].year <= max_year):
                    out_of_range.append(f"{name}={raw!r}")
                    continue
                return parsed, name, None
        elif rule == "anthology_id":
            parsed = date_from_anthology_id(paper_id)
            if parsed and min_year <= parsed["pub_date"].year <= max_year:
                return parsed, "anthology_id", None
    if out_of_range:
        return None, None, f"{Reason.DATE_OUT_OF_RANGE}|outside {min_year}-{max_year}: " + ", ".join(out_of_range)
    if seen_values:
        return None, None, f"{Reason.UNPARSEABLE_DATE}|no rule of {rules} parsed " + ", ".join(seen_values)
    return None, None, f"{Reason.MISSING_DATE}|no date in the record and no rule of {rules} applies"
