"""Bibliographies at ingest: entries and in-text mentions, carried in each paper record (pure Python).

Every reader that knows a bibliography (TEI ``<listBibl>``, JATS ``<ref-list>``, S2ORC 2020 ``bib_entries``,
current-release ``bibentry``/``bibref`` annotations) fills the record's ``bibliography`` column with the same shape:

* ``entries``: one per bibliography entry (``entry_id`` as the source names it, title, authors, year,
  venue and the ids it carries: DOI, arXiv, ACL Anthology, Semantic Scholar, PubMed);
* ``mentions``: one per in-text citation marker, with the entry it points to and its place in the
  paper's *cleaned* text: ``(section_idx, para_idx, char_offset)``, the coordinates of the ``sections``
  column, so the ``citations`` stage can find the sentence that holds it after segmentation;
* ``problem``: why there is no usable bibliography (``no_bibliography``, ``bibliography_error: ...``),
  or null. A bad bibliography never rejects a paper.

Why offsets survive cleaning: readers collapse whitespace and undo PDF hyphenation, which moves
characters. A private-use sentinel is inserted before each marker in the raw text, the text is cleaned
with the reader's own function, and the sentinels' positions are read back. The result is trusted only
when the cleaned text without sentinels equals the paragraph exactly as the reader stored it; otherwise
the mentions of that paragraph keep a null offset (counted by the ``citations`` stage, never guessed).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, TypedDict

from pyspark.sql import types as T

from ratio_spark.core.text import collapse_whitespace

SENTINEL = "\ue010"  # private use: never content (the normalisation deletes the whole block)
NO_BIBLIOGRAPHY = "no_bibliography"
BIBLIOGRAPHY_ERROR = "bibliography_error"

BIB_ENTRY_TYPE = T.StructType([
    T.StructField("entry_id", T.StringType()),
    T.StructField("title", T.StringType()),
    T.StructField("authors", T.ArrayType(T.StringType())),
    T.StructField("year", T.IntegerType()),
    T.StructField("venue", T.StringType()),
    T.StructField("doi", T.StringType()),
    T.StructField("arxiv_id", T.StringType()),
    T.StructField("acl_id", T.StringType()),
    T.StructField("s2_id", T.StringType()),  # Semantic Scholar paper id / corpus id of the matched paper
    T.StructField("pmid", T.StringType()),  # PubMed id (JATS <pub-id pub-id-type="pmid">)
])
MENTION_TYPE = T.StructType([
    T.StructField("entry_id", T.StringType()),  # null: a marker that names no entry
    T.StructField("section_idx", T.IntegerType()),  # null: the marker is outside the kept text (footnote)
    T.StructField("para_idx", T.IntegerType()),
    T.StructField("char_offset", T.IntegerType()),  # null: its place could not be recovered exactly
])
BIBLIOGRAPHY_TYPE = T.StructType([
    T.StructField("entries", T.ArrayType(BIB_ENTRY_TYPE)),
    T.StructField("mentions", T.ArrayType(MENTION_TYPE)),
    T.StructField("problem", T.StringType()),
])


class BibEntry(TypedDict, total=False):
    entry_id: str
    title: str | None
    authors: list[str]
    year: int | None
    venue: str | None
    doi: str | None
    arxiv_id: str | None
    acl_id: str | None
    s2_id: str | None
    pmid: str | None


class Mention(TypedDict):
    entry_id: str | None
    section_idx: int | None
    para_idx: int | None
    char_offset: int | None


# ------------------------------------------------------------------------------------------ ids

_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)", re.IGNORECASE)
_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_OLD = re.compile(r"\b([a-z][a-z-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?\b")
_ARXIV_CONTEXT = re.compile(r"arxiv|corr|abs/", re.IGNORECASE)
_ACL_DOI = re.compile(r"10\.18653/v1/([A-Z]\d{2}-\d{4}|(?:19|20)\d\d\.[a-z0-9]+-[a-z0-9]+\.\d+)", re.IGNORECASE)
_ACL_URL = re.compile(
    r"(?:aclweb\.org/anthology|aclanthology\.org|aclanthology\.info/papers)(?:/[A-Za-z]/[A-Za-z]\d{2})?"
    r"/([A-Z]\d{2}-\d{4}|(?:19|20)\d\d\.[a-z0-9]+-[a-z0-9]+\.\d+)",
    re.IGNORECASE,
)
_YEAR = re.compile(r"(?<![\d.])((?:19|20)\d\d)(?![\d])")


def _unbreak(text: str) -> str:
    """Undo line-break hyphens inside identifiers ('arX- iv:1410.5401', '10.1007/s10579- 009')."""
    return re.sub(r"-\s+", "-", text).replace("arX-iv", "arXiv")


def find_doi(text: str | None) -> str | None:
    if not text:
        return None
    match = _DOI.search(_unbreak(text))
    return match.group(1).rstrip(".,;)]").lower() if match else None


def find_arxiv_id(text: str | None, *, assume_arxiv: bool = False) -> str | None:
    """An arXiv id without its version ('1704.08424', 'cs.CL/0102033'), when the text says arXiv/CoRR
    (or ``assume_arxiv``: the field is an arXiv id by definition)."""
    if not text:
        return None
    text = _unbreak(text)
    if not assume_arxiv and not _ARXIV_CONTEXT.search(text):
        return None
    match = _ARXIV_NEW.search(text) or _ARXIV_OLD.search(text)
    return match.group(1) if match else None


def find_acl_id(text: str | None) -> str | None:
    """An ACL Anthology id from an Anthology URL or an ACL DOI (10.18653/v1/P17-1001)."""
    if not text:
        return None
    text = _unbreak(text)
    match = _ACL_DOI.search(text) or _ACL_URL.search(text)
    if not match:
        return None
    found = match.group(1)
    return found.upper() if re.match(r"^[a-z]\d{2}-\d{4}$", found, re.IGNORECASE) else found.lower()


def find_year(text: str | None) -> int | None:
    if text is None:
        return None
    match = _YEAR.search(str(text))
    return int(match.group(1)) if match else None


def clean_field(text: Any, clean: Callable[[str], str] | None = None) -> str | None:
    """A bibliography string: whitespace collapsed, optionally de-hyphenated, None when empty."""
    if not isinstance(text, str):
        return None
    out = collapse_whitespace(text)
    if clean is not None:
        out = clean(out)
    return out or None


def entry(entry_id: str, *, title: str | None = None, authors: Iterable[str] = (), year: Any = None,
          venue: str | None = None, doi: str | None = None, arxiv_id: str | None = None,
          acl_id: str | None = None, s2_id: Any = None, pmid: str | None = None) -> BibEntry:
    year_value = year if isinstance(year, int) and not isinstance(year, bool) else find_year(year)
    return {
        "entry_id": entry_id,
        "title": title,
        "authors": [a for a in authors if a],
        "year": year_value,
        "venue": venue,
        "doi": doi,
        "arxiv_id": arxiv_id,
        "acl_id": acl_id,
        "s2_id": str(s2_id) if s2_id not in (None, "") else None,
        "pmid": pmid or None,
    }


def dedupe_entries(entries: list[BibEntry]) -> list[BibEntry]:
    """One entry per entry id (GROBID occasionally repeats an xml:id): the first one wins."""
    seen: set[str] = set()
    out = []
    for item in entries:
        if item["entry_id"] not in seen:
            seen.add(item["entry_id"])
            out.append(item)
    return out


# ------------------------------------------------------------------------------------------ mentions


def _mark(raw: str, spans: list[tuple[int, int]]) -> str:
    """``raw`` with SENTINEL before the first non-space character at or after each span's start (spans
    sorted by start), so that whitespace collapsing never sees a sentinel between two spaces; a span in
    trailing whitespace marks the end of the text."""
    points = []
    for start, _ in spans:
        point = max(0, min(start, len(raw)))
        while point < len(raw) and raw[point].isspace():
            point += 1
        if point == len(raw):
            point = len(raw.rstrip())
        points.append(point)
    out, last = [], 0
    for point in points:  # non-decreasing, because spans are sorted
        out.append(raw[last:point])
        out.append(SENTINEL)
        last = point
    out.append(raw[last:])
    return "".join(out)


def clean_offsets(raw: str, spans: list[tuple[int, int]], clean: Callable[[str], str]) -> tuple[str, list[int] | None]:
    """(cleaned text, offset of each span in it) or (cleaned text, None) when the offsets are not exact.

    ``spans`` are (start, end) character offsets in ``raw``, sorted by start; ``clean`` is the reader's
    own cleaning of a paragraph.
    """
    plain = clean(raw)
    if SENTINEL in raw:
        return plain, None
    marked = clean(_mark(raw, spans))
    offsets = [m.start() - i for i, m in enumerate(re.finditer(SENTINEL, marked))]
    if len(offsets) != len(spans) or marked.replace(SENTINEL, "") != plain:
        return plain, None
    return plain, offsets


def locate_mentions(
    sections: list[dict],
    paragraphs: Iterable[tuple[str, list[tuple[str | None, int, int]]]],
    clean: Callable[[str], str],
) -> list[Mention]:
    """Mentions with their place in ``sections`` (the reader's output).

    ``paragraphs``: every raw paragraph in reading order, as (raw text, [(entry id, start, end), ...]).
    A paragraph with markers is cleaned and found among the stored paragraphs at or after the previous
    match (readers keep order and only drop empty paragraphs and footnotes), so no reader has to report
    how it grouped sections. A marker whose paragraph is not stored gets null coordinates.
    """
    flat = [(si, pi, text) for si, section in enumerate(sections) for pi, text in enumerate(section["paragraphs"])]
    cursor = 0
    mentions: list[Mention] = []
    for raw, markers in paragraphs:
        if not markers:
            continue
        markers = sorted(markers, key=lambda m: (m[1], m[2]))
        text, offsets = clean_offsets(raw, [(s, e) for _, s, e in markers], clean)
        found = next((k for k in range(cursor, len(flat)) if flat[k][2] == text), None) if text else None
        if found is not None:
            cursor = found + 1
            section_idx, para_idx, _ = flat[found]
        for i, (entry_id, _, _) in enumerate(markers):
            mentions.append({
                "entry_id": entry_id,
                "section_idx": section_idx if found is not None else None,
                "para_idx": para_idx if found is not None else None,
                "char_offset": offsets[i] if found is not None and offsets is not None else None,
            })
    return mentions


def bibliography(entries: list[BibEntry], mentions: list[Mention]) -> dict:
    problem = None if entries else NO_BIBLIOGRAPHY
    return {"entries": dedupe_entries(entries), "mentions": mentions, "problem": problem}


def failed_bibliography(exc: Exception) -> dict:
    """What a reader stores when parsing the bibliography raised: the paper itself is kept."""
    return {"entries": [], "mentions": [], "problem": f"{BIBLIOGRAPHY_ERROR}: {type(exc).__name__}: {exc}"[:300]}


def safe_bibliography(parse: Callable[[], dict]) -> dict:
    try:
        return parse()
    except Exception as exc:  # noqa: BLE001 - a bibliography problem must never cost the paper
        return failed_bibliography(exc)
