"""GROBID TEI XML, one file per paper: the usual output of PDF parsing."""

from __future__ import annotations

import codecs
import re

from lxml import etree

from ratio_spark.pipeline.ingest.dates import canonical_paper_id, paper_id_from_path, resolve_date
from ratio_spark.pipeline.ingest.records import ParsedRecord, Reason, reject
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.core.text import dehyphenate

FORMAT = "tei"
_NS = {"tei": "http://www.tei-c.org/ns/1.0"}
_WS = re.compile(r"\s+")
# Inside a paragraph these carry no prose: formulas, footnote markers and figure/table debris.
_SKIP_INLINE = {f"{{{_NS['tei']}}}{tag}" for tag in ("formula", "note", "figure", "table")}


def _text_of(element: etree._Element) -> str:
    parts: list[str] = []

    def walk(node: etree._Element) -> None:
        if node.text and node.tag not in _SKIP_INLINE:
            parts.append(node.text)
        for child in node:
            if child.tag not in _SKIP_INLINE:
                walk(child)
            if child.tail:
                parts.append(child.tail)

    walk(element)
    return _WS.sub(" ", "".join(parts)).strip()


def _utf16_xml(data: bytes) -> bool:
    if not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    try:
        return data.decode("utf-16").lstrip().startswith("<")
    except UnicodeDecodeError:
        return False


def _clean(text: str, options: ReaderOptions) -> str:
    return dehyphenate(text) if options.dehyphenate else text


def _sections(root: etree._Element, options: ReaderOptions) -> list[dict]:
    sections: list[dict] = []
    abstract = [
        _clean(_text_of(p), options) for p in root.iterfind(".//tei:teiHeader//tei:abstract//tei:p", _NS)
    ]
    abstract = [p for p in abstract if p]
    if abstract:
        sections.append({"heading": "Abstract", "paragraphs": abstract})
    for div in root.iterfind(".//tei:text/tei:body//tei:div", _NS):
        head = div.find("tei:head", _NS)
        paragraphs = [_clean(_text_of(p), options) for p in div.findall("tei:p", _NS)]
        paragraphs = [p for p in paragraphs if p]
        if paragraphs:
            sections.append({"heading": _text_of(head) if head is not None else None, "paragraphs": paragraphs})
    return sections


def parse_tei(data: bytes, source_path: str, options: ReaderOptions) -> list[ParsedRecord]:
    """Parse one TEI file into a paper record, or a reject saying why it cannot be used."""
    paper_id = canonical_paper_id(paper_id_from_path(source_path)) or None
    if not data.strip():
        return [reject(FORMAT, source_path, Reason.EMPTY_FILE, "the file has no content", paper_id)]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Other encodings are fine when the XML says which: a declared encoding, or a UTF-16 byte-order mark
        # in front of text that is UTF-16 XML.
        declared = data.lstrip().startswith(b"<?xml") and b"encoding=" in data[:200]
        if not (declared or _utf16_xml(data)):
            return [reject(FORMAT, source_path, Reason.UNDECODABLE_BYTES, f"not valid UTF-8: {exc}", paper_id)]
    try:
        # collect_ids=False: GROBID sometimes repeats an xml:id (formula_15), harmless for reading.
        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, collect_ids=False)
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        reason = Reason.UNDECODABLE_BYTES if "encoding" in str(exc).lower() or "utf-8" in str(exc).lower() else Reason.MALFORMED_XML
        return [reject(FORMAT, source_path, reason, f"XML parser: {exc}", paper_id)]
    if root.tag != f"{{{_NS['tei']}}}TEI":
        return [reject(FORMAT, source_path, Reason.UNEXPECTED_SHAPE, f"root element is {root.tag!r}, not TEI", paper_id)]
    if not paper_id:
        return [reject(FORMAT, source_path, Reason.MISSING_ID, "no paper id in the file name", None)]

    title_el = root.find(".//tei:teiHeader//tei:titleStmt/tei:title", _NS)
    title = _text_of(title_el) if title_el is not None else None
    candidates: list[tuple[str, object]] = []
    for date_el in root.iterfind(".//tei:teiHeader/tei:fileDesc/tei:publicationStmt/tei:date", _NS):
        if date_el.get("when"):
            candidates.append(("tei_header_when", date_el.get("when")))
        candidates.append(("tei_header_text", _text_of(date_el)))
    date, rule, failure = resolve_date(candidates, paper_id, options.date_rules, options.min_year, options.max_year)
    if date is None:
        reason, detail = failure.split("|", 1)
        return [reject(FORMAT, source_path, reason, detail, paper_id)]

    sections = _sections(root, options)
    body_chars = sum(len(p) for s in sections for p in s["paragraphs"])
    if body_chars < options.min_body_chars:
        return [
            reject(FORMAT, source_path, Reason.EMPTY_BODY,
                   f"{body_chars} characters of body text (minimum {options.min_body_chars})", paper_id)
        ]
    return [
        {
            "paper_id": paper_id,
            "pub_date": date["pub_date"],
            "date_precision": date["date_precision"],
            "date_source": rule,
            "title": title,
            "sections": sections,
            "source_format": FORMAT,
            "source_path": source_path,
            "reject_reason": None,
            "reject_detail": None,
        }
    ]
