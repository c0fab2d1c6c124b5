"""S2ORC JSON: the 2020 release (``pdf_parse`` paragraph lists) and the current release (text + offsets).

``s2orc_2020``: one paper per JSON object (a ``*.json`` file, or a line of a ``*.jsonl`` file) with
``paper_id``, ``title``, ``year`` and ``pdf_parse.abstract`` / ``pdf_parse.body_text`` paragraph lists.

``s2orc_current``: one paper per line with ``corpusid`` and ``content.text`` plus
``content.annotations`` whose values are JSON *strings* of ``{start, end}`` character spans. The
record carries no date: it comes from the separate papers dataset (``metadata_path``), joined by
corpusid in Spark by ``read_s2orc_current``.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ratio_spark.core.config import ConfigError
from ratio_spark.core.text import dehyphenate
from ratio_spark.pipeline.ingest import bibliography as bib
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.dates import paper_id_from_path, resolve_date
from ratio_spark.core.schema import Reason
from ratio_spark.pipeline.ingest.records import RECORD_COLUMNS, ParsedRecord, license_name, paper_record, reject
from ratio_spark.pipeline.ingest.spark_io import read_records
from ratio_spark.pipeline.settings import InputConfig

FORMAT_2020 = "s2orc_2020"
FORMAT_CURRENT = "s2orc_current"
# date_source of a parsed s2orc_current paper until read_s2orc_current joins its metadata.
PENDING_METADATA = "pending_metadata"


class _Reject(Exception):
    """Raised inside a parser to turn the current record into a reject (reason, detail, paper id if known)."""

    def __init__(self, reason: str, detail: str, paper_id: str | None = None):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.paper_id = paper_id


def _load_json(data: bytes) -> Any:
    """Strict UTF-8 (a replaced byte would silently corrupt text), then JSON."""
    if not data.strip():
        raise _Reject(Reason.EMPTY_FILE, "no content")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Reject(Reason.UNDECODABLE_BYTES, f"not valid UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Reject(Reason.MALFORMED_JSON, f"JSON parser: {exc}") from None


def _date(options: ReaderOptions, candidates: list[tuple[str, Any]], paper_id: str) -> tuple[dict, str]:
    date, rule, failure = resolve_date(candidates, paper_id, options.date_rules, options.min_year, options.max_year)
    if date is None:
        raise _Reject(*failure.split("|", 1))
    return date, rule


def _check_body(sections: list[dict], options: ReaderOptions) -> None:
    shortfall = options.body_shortfall(sections)
    if shortfall:
        raise _Reject(Reason.EMPTY_BODY, shortfall)


# ---------------------------------------------------------------------------------------------
# S2ORC 2020
# ---------------------------------------------------------------------------------------------


def _paragraph_texts(items: Any, where: str, options: ReaderOptions) -> list[tuple[str | None, str]]:
    """(cleaned section heading or None, raw text) of a pdf_parse paragraph list."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise _Reject(Reason.UNEXPECTED_SHAPE, f"{where} is {type(items).__name__}, not a list of paragraphs")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise _Reject(Reason.UNEXPECTED_SHAPE, f"{where} holds a paragraph without a text string")
        section = item.get("section")
        out.append(((options.clean(section) or None) if isinstance(section, str) else None, item["text"]))
    return out


def _group_2020(abstract: list[str], body: list[tuple[str | None, str]], options: ReaderOptions) -> list[dict]:
    """Abstract first, then consecutive paragraphs with the same section as one section.

    Trailing paragraphs without a section are GROBID footnotes that S2ORC appends to body_text;
    they are skipped, as the TEI reader skips notes.
    """
    while body and body[-1][0] is None:
        body = body[:-1]
    sections: list[dict] = []
    for heading, text in body:
        text = options.clean(text)
        if not text:
            continue
        if sections and sections[-1]["heading"] == heading:
            sections[-1]["paragraphs"].append(text)
        else:
            sections.append({"heading": heading, "paragraphs": [text]})
    abstract = [p for p in (options.clean(t) for t in abstract) if p]
    return ([{"heading": "Abstract", "paragraphs": abstract}] if abstract else []) + sections


def _paper_id_2020(obj: dict, pdf_parse: dict, source_path: str) -> str | None:
    """The record's paper_id; for one-paper files, the file name when the id is the name cut at a dot.

    S2ORC-style tooling cuts new-style ACL Anthology ids at the first dot: aclsum's
    ``2020.acl-main.282.json`` says ``"paper_id": "2020"``. The file name then is the real id.
    """
    raw = obj.get("paper_id") or pdf_parse.get("paper_id")
    paper_id = str(raw).strip() if isinstance(raw, (str, int)) and not isinstance(raw, bool) else ""
    if not paper_id:
        return None
    if "#line-" not in source_path:
        name = paper_id_from_path(source_path)
        if name.startswith(paper_id + "."):
            return name
    return paper_id


def _parse_2020(data: bytes, source_path: str, options: ReaderOptions) -> ParsedRecord:
    obj = _load_json(data)
    if not isinstance(obj, dict):
        raise _Reject(Reason.UNEXPECTED_SHAPE, f"top level is {type(obj).__name__}, not an object")
    # A merged 2020 record nests pdf_parse; a bare pdf_parses shard line is the pdf_parse itself.
    pdf_parse = obj.get("pdf_parse", obj if "body_text" in obj else None)
    if not isinstance(pdf_parse, dict):
        raise _Reject(Reason.UNEXPECTED_SHAPE, "no pdf_parse object with body_text")
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    paper_id = _paper_id_2020(obj, pdf_parse, source_path)
    if paper_id is None:
        raise _Reject(Reason.MISSING_ID, "no paper_id")
    try:
        abstract = [t for _, t in _paragraph_texts(pdf_parse.get("abstract"), "pdf_parse.abstract", options)]
        body = _paragraph_texts(pdf_parse.get("body_text"), "pdf_parse.body_text", options)
        if not abstract:  # PDF parse found no abstract: use the metadata's, when there is one
            text = obj.get("abstract") or metadata.get("abstract")
            abstract = [text] if isinstance(text, str) else []
        year = obj.get("year") if obj.get("year") not in (None, "") else metadata.get("year")
        date, rule = _date(options, [("year", year)], paper_id)
        sections = _group_2020(abstract, body, options)
        _check_body(sections, options)
    except _Reject as exc:
        exc.paper_id = paper_id
        raise
    bibliography = bib.safe_bibliography(lambda: _bibliography_2020(pdf_parse, sections, options))
    return paper_record(FORMAT_2020, source_path, paper_id, obj.get("title") or metadata.get("title"), sections, date, rule,
                        bibliography)


def _author_name(author: Any) -> str:
    if not isinstance(author, dict):
        return ""
    middle = author.get("middle") or []
    parts = [author.get("first") or "", *(middle if isinstance(middle, list) else [middle]), author.get("last") or ""]
    return " ".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


def _bibliography_2020(pdf_parse: dict, sections: list[dict], options: ReaderOptions) -> dict:
    """``bib_entries`` (keyed BIBREF0, ...) and the ``cite_spans`` of the abstract and body paragraphs.

    Ids: ``other_ids`` DOI / arXiv lists, ``links`` (the matched Semantic Scholar paper id), and ACL
    Anthology ids found in DOIs, URLs or the raw reference string.
    """
    clean = dehyphenate if options.dehyphenate else None
    entries = []
    raw_entries = pdf_parse.get("bib_entries") or {}
    if not isinstance(raw_entries, dict):
        raise ValueError(f"bib_entries is {type(raw_entries).__name__}, not an object")
    for key, item in raw_entries.items():
        if not isinstance(item, dict):
            continue
        other = item.get("other_ids") if isinstance(item.get("other_ids"), dict) else {}
        ids_text = " ".join(str(v) for values in other.values() for v in (values if isinstance(values, list) else [values]))
        urls = item.get("urls") if isinstance(item.get("urls"), list) else []
        every = " ".join([ids_text, *map(str, urls), str(item.get("link") or ""), str(item.get("raw_text") or "")])
        doi = next((bib.find_doi(str(v)) for v in other.get("DOI") or []), None)
        arxiv = next((bib.find_arxiv_id(str(v), assume_arxiv=True) for v in other.get("arXiv") or []), None)
        authors = item.get("authors") if isinstance(item.get("authors"), list) else []
        entries.append(bib.entry(
            str(key), title=bib.clean_field(item.get("title"), clean), authors=[_author_name(a) for a in authors],
            year=item.get("year"), venue=bib.clean_field(item.get("venue"), clean), doi=doi or bib.find_doi(ids_text),
            arxiv_id=arxiv, acl_id=bib.find_acl_id(every), s2_id=item.get("links") if isinstance(item.get("links"), (str, int)) else None,
        ))
    paragraphs = []
    for item in [*(pdf_parse.get("abstract") or []), *(pdf_parse.get("body_text") or [])]:
        spans = item.get("cite_spans") if isinstance(item, dict) else None
        markers = [(s.get("ref_id") or None, int(s["start"]), int(s["end"])) for s in spans or []
                   if isinstance(s, dict) and isinstance(s.get("start"), int) and isinstance(s.get("end"), int)]
        paragraphs.append((item.get("text") or "", markers))
    mentions = bib.locate_mentions(sections, paragraphs, options.clean)
    return bib.bibliography(entries, mentions)


def _run(parse, fmt: str, data: bytes, source_path: str, options: ReaderOptions) -> list[ParsedRecord]:
    try:
        return [parse(data, source_path, options)]
    except _Reject as exc:
        return [reject(fmt, source_path, exc.reason, exc.detail, exc.paper_id)]


def parse_s2orc_2020(data: bytes, source_path: str, options: ReaderOptions) -> list[ParsedRecord]:
    """One S2ORC 2020 JSON object (a whole file or one line) into a paper or a reject."""
    return _run(_parse_2020, FORMAT_2020, data, source_path, options)


# ---------------------------------------------------------------------------------------------
# S2ORC current release
# ---------------------------------------------------------------------------------------------


def _spans(annotations: dict, name: str, strict: bool = True) -> list[tuple[int, int]]:
    """Sorted (start, end) spans of one annotation; its value is a JSON string (or null)."""
    raw = annotations.get(name)
    if raw in (None, ""):
        return []
    try:
        items = json.loads(raw) if isinstance(raw, str) else raw
        spans = [(int(s["start"]), int(s["end"])) for s in items]
    except json.JSONDecodeError as exc:
        if not strict:
            return []
        raise _Reject(Reason.MALFORMED_JSON, f"annotations.{name} is not JSON: {exc}") from None
    except (TypeError, KeyError, ValueError):
        if not strict:
            return []
        raise _Reject(Reason.UNEXPECTED_SHAPE, f"annotations.{name} is not a list of {{start, end}} spans") from None
    return sorted(spans)


def _sections_current(text: str, annotations: dict, options: ReaderOptions) -> list[dict]:
    """Abstract spans first; each paragraph goes under the last section header that starts before it."""
    abstract_spans = _spans(annotations, "abstract")
    headers = _spans(annotations, "sectionheader")
    sections: list[dict] = []
    abstract = [p for p in (options.clean(text[s:e]) for s, e in abstract_spans) if p]
    if abstract:
        sections.append({"heading": "Abstract", "paragraphs": abstract})
    current_header = -1  # index into headers; -1: before the first header
    section: dict | None = None
    for start, end in _spans(annotations, "paragraph"):
        if any(a <= start < b for a, b in abstract_spans):
            continue  # already taken as abstract
        header = current_header
        while header + 1 < len(headers) and headers[header + 1][0] <= start:
            header += 1
        paragraph = options.clean(text[start:end])
        if not paragraph:
            continue
        if section is None or header != current_header:
            heading = options.clean(text[headers[header][0]:headers[header][1]]) if header >= 0 else None
            section = {"heading": heading or None, "paragraphs": []}
            sections.append(section)
            current_header = header
        section["paragraphs"].append(paragraph)
    return sections


def _parse_current(data: bytes, source_path: str, options: ReaderOptions) -> ParsedRecord:
    obj = _load_json(data)
    if not isinstance(obj, dict):
        raise _Reject(Reason.UNEXPECTED_SHAPE, f"top level is {type(obj).__name__}, not an object")
    corpusid = obj.get("corpusid")
    if isinstance(corpusid, str) and corpusid.strip().isdigit():
        corpusid = int(corpusid)
    if corpusid is None or corpusid == "":
        raise _Reject(Reason.MISSING_ID, "no corpusid")
    if not isinstance(corpusid, int) or isinstance(corpusid, bool):
        raise _Reject(Reason.UNEXPECTED_SHAPE, f"corpusid is {corpusid!r}, not an integer")
    paper_id = str(corpusid)
    try:
        content = obj.get("content")
        if not isinstance(content, dict):
            raise _Reject(Reason.UNEXPECTED_SHAPE, "no content object")
        text = content.get("text") or ""
        annotations = content.get("annotations") or {}
        if not isinstance(text, str) or not isinstance(annotations, dict):
            raise _Reject(Reason.UNEXPECTED_SHAPE, "content.text is not a string or annotations not an object")
        sections = _sections_current(text, annotations, options)
        _check_body(sections, options)
    except _Reject as exc:
        exc.paper_id = paper_id
        raise
    title_spans = _spans(annotations, "title", strict=False)
    title = " ".join(text[s:e] for s, e in title_spans) if title_spans else None
    bibliography = bib.safe_bibliography(lambda: _bibliography_current(text, annotations, sections, options))
    return paper_record(FORMAT_CURRENT, source_path, paper_id, title, sections, None, PENDING_METADATA, bibliography,
                        _license_current(content))


def _license_current(content: dict) -> str | None:
    """``content.source.oainfo.license`` (Unpaywall's code: ``CCBY``, ``CCBYNC``, ``PUBLICDOMAIN``, ...)."""
    source = content.get("source") if isinstance(content.get("source"), dict) else {}
    oainfo = source.get("oainfo") if isinstance(source.get("oainfo"), dict) else {}
    return license_name(oainfo.get("license"))


def _annotation_items(annotations: dict, name: str) -> list[dict]:
    """Spans of one annotation with their ``attributes`` (the JSON-string value parsed)."""
    raw = annotations.get(name)
    if raw in (None, ""):
        return []
    items = json.loads(raw) if isinstance(raw, str) else raw
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("start"), int) and isinstance(i.get("end"), int)]


def _bibliography_current(text: str, annotations: dict, sections: list[dict], options: ReaderOptions) -> dict:
    """``bibentry`` spans (attributes ``id`` and ``matched_paper_id``, the cited paper's corpus id) with
    the ``bibtitle`` / ``bibauthor`` / ``bibvenue`` spans inside them, and ``bibref`` markers (attribute
    ``ref_id``) located in the abstract and paragraph spans. The year is the first year in the entry's
    text; DOI, arXiv and ACL ids are read from it too."""
    clean = dehyphenate if options.dehyphenate else None

    def inside(name: str, start: int, end: int) -> list[str]:
        return [text[i["start"]:i["end"]] for i in parts[name] if start <= i["start"] and i["end"] <= end]

    parts = {name: _annotation_items(annotations, name) for name in ("bibtitle", "bibauthor", "bibvenue")}
    entries = []
    for index, item in enumerate(sorted(_annotation_items(annotations, "bibentry"), key=lambda i: i["start"])):
        attributes = item.get("attributes") if isinstance(item.get("attributes"), dict) else {}
        start, end = item["start"], item["end"]
        raw = text[start:end]
        titles = inside("bibtitle", start, end)
        venues = inside("bibvenue", start, end)
        entries.append(bib.entry(
            str(attributes.get("id") or attributes.get("ref_id") or f"b{index}"),
            title=bib.clean_field(titles[0], clean) if titles else None,
            authors=[bib.clean_field(a) or "" for a in inside("bibauthor", start, end)],
            year=bib.find_year(raw), venue=bib.clean_field(venues[0], clean) if venues else None,
            doi=bib.find_doi(raw), arxiv_id=bib.find_arxiv_id(raw), acl_id=bib.find_acl_id(raw),
            s2_id=attributes.get("matched_paper_id"),
        ))
    refs = []
    for item in _annotation_items(annotations, "bibref"):
        attributes = item.get("attributes") if isinstance(item.get("attributes"), dict) else {}
        refs.append((str(attributes["ref_id"]) if attributes.get("ref_id") is not None else None, item["start"], item["end"]))
    abstract = _spans(annotations, "abstract")
    body = [(s, e) for s, e in _spans(annotations, "paragraph") if not any(a <= s < b for a, b in abstract)]
    paragraphs = [
        (text[start:end], [(ref, s - start, e - start) for ref, s, e in refs if start <= s < end])
        for start, end in sorted(abstract + body)
    ]
    mentions = bib.locate_mentions(sections, paragraphs, options.clean)
    return bib.bibliography(entries, mentions)


def parse_s2orc_current(data: bytes, source_path: str, options: ReaderOptions) -> list[ParsedRecord]:
    """One line of the current S2ORC release. A paper comes back undated (date_source
    ``pending_metadata``): only ``read_s2orc_current`` can date it, from the papers dataset."""
    return _run(_parse_current, FORMAT_CURRENT, data, source_path, options)


# The columns of the papers dataset that dating needs; all read as strings so ints and strings both load.
METADATA_SCHEMA = T.StructType(
    [
        T.StructField("corpusid", T.StringType()),
        T.StructField("publicationdate", T.StringType()),
        T.StructField("year", T.StringType()),
        T.StructField("title", T.StringType()),
        T.StructField("externalids", T.StructType([T.StructField("ACL", T.StringType())])),
    ]
)
_DATED_SCHEMA = T.StructType(
    [
        T.StructField("meta_corpusid", T.StringType()),
        T.StructField("meta_title", T.StringType()),
        T.StructField("meta_pub_date", T.DateType()),
        T.StructField("meta_date_precision", T.StringType()),
        T.StructField("meta_date_source", T.StringType()),
        T.StructField("meta_reason", T.StringType()),
        T.StructField("meta_detail", T.StringType()),
    ]
)


def _date_metadata(options: ReaderOptions):
    """mapInArrow function: resolve each metadata row's date with the same rules as every reader."""
    arrow_schema = to_arrow_schema(_DATED_SCHEMA)

    def run(batches):
        for batch in batches:
            rows = []
            for row in batch.to_pylist():
                candidates = [("publicationdate", row["publicationdate"]), ("year", row["year"])]
                acl_id = (row["externalids"] or {}).get("ACL")
                date, rule, failure = resolve_date(candidates, acl_id, options.date_rules, options.min_year,
                                                   options.max_year)
                reason, detail = failure.split("|", 1) if failure else (None, None)
                rows.append({
                    "meta_corpusid": row["corpusid"],
                    "meta_title": row["title"],
                    "meta_pub_date": date["pub_date"] if date else None,
                    "meta_date_precision": date["date_precision"] if date else None,
                    "meta_date_source": rule,
                    "meta_reason": reason,
                    "meta_detail": f"corpusid {row['corpusid']}: {detail}" if detail else None,
                })
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    return run


def read_s2orc_current(spark: SparkSession, inp: InputConfig, options: ReaderOptions) -> DataFrame:
    """Read current-release S2ORC lines and date them from the papers dataset, joined in Spark.

    Dates are resolved on the (narrow) metadata rows before the join, with ``resolve_date`` (rules
    ``source`` = publicationdate then year, ``anthology_id`` = externalids.ACL), so the full texts
    cross into Python only once. A paper without a metadata row is rejected as ``missing_metadata``;
    duplicate metadata rows for one corpusid keep one arbitrary row, so the join never multiplies papers.
    """
    if not inp.metadata_path:
        raise ConfigError(f"input {inp.name!r}: format s2orc_current needs metadata_path (the papers dataset)")
    records = read_records(spark, inp.path, options)
    metadata = (
        spark.read.schema(METADATA_SCHEMA).json(inp.metadata_path)
        .filter(F.col("corpusid").isNotNull())
        .dropDuplicates(["corpusid"])
        .mapInArrow(_date_metadata(options), _DATED_SCHEMA)
    )
    pending = F.col("reject_reason").isNull() & F.col("date_source").eqNullSafe(PENDING_METADATA)
    done = records.filter(~pending)
    joined = records.filter(pending).join(
        metadata, F.col("paper_id") == F.col("meta_corpusid"), "left"
    )
    reason = (
        F.when(F.col("meta_corpusid").isNull(), F.lit(Reason.MISSING_METADATA))
        .otherwise(F.col("meta_reason"))
    )
    detail = F.when(
        F.col("meta_corpusid").isNull(),
        F.concat(F.lit("no row for corpusid "), F.col("paper_id"), F.lit(" in the papers dataset")),
    ).otherwise(F.col("meta_detail"))
    is_paper = reason.isNull()

    def if_paper(column):
        return F.when(is_paper, column)

    dated = joined.select(
        "paper_id",
        if_paper(F.col("meta_pub_date")).alias("pub_date"),
        if_paper(F.col("meta_date_precision")).alias("date_precision"),
        if_paper(F.col("meta_date_source")).alias("date_source"),
        if_paper(F.coalesce("meta_title", "title")).alias("title"),
        if_paper(F.col("sections")).alias("sections"),
        if_paper(F.col("bibliography")).alias("bibliography"),
        if_paper(F.col("license")).alias("license"),
        "source_format",
        "source_path",
        reason.alias("reject_reason"),
        detail.alias("reject_detail"),
    )
    return done.select(*RECORD_COLUMNS).unionByName(dated.select(*RECORD_COLUMNS))
