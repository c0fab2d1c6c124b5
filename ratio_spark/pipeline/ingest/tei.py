"""GROBID TEI XML, one file per paper: the usual output of PDF parsing."""

from __future__ import annotations

from lxml import etree

from ratio_spark.pipeline.ingest import bibliography as bib
from ratio_spark.pipeline.ingest.dates import canonical_paper_id, paper_id_from_path, resolve_date
from ratio_spark.core.schema import Reason
from ratio_spark.pipeline.ingest.records import ParsedRecord, license_name, paper_record, reject
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.xmldoc import parse_xml
from ratio_spark.core.text import collapse_whitespace, dehyphenate

FORMAT = "tei"
_NS = {"tei": "http://www.tei-c.org/ns/1.0"}
# Inside a paragraph these carry no prose: formulas, footnote markers and figure/table debris.
_SKIP_INLINE = {f"{{{_NS['tei']}}}{tag}" for tag in ("formula", "note", "figure", "table")}
_REF = f"{{{_NS['tei']}}}ref"
_XML_ID = "{http://www.w3.org/XML/1998/namespace}id"
_FORENAME, _SURNAME = (f"{{{_NS['tei']}}}{tag}" for tag in ("forename", "surname"))


def _raw_text(element: etree._Element, markers: list | None = None) -> str:
    """The element's text before whitespace clean-up; ``markers`` collects (entry id, start, end) of each
    ``<ref type="bibr">`` in it (entry id None when the marker names no entry)."""
    parts: list[str] = []
    length = 0

    def add(text: str) -> None:
        nonlocal length
        parts.append(text)
        length += len(text)

    def walk(node: etree._Element) -> None:
        start = length
        if node.text and node.tag not in _SKIP_INLINE:
            add(node.text)
        for child in node:
            if child.tag not in _SKIP_INLINE:
                walk(child)
            if child.tail:
                add(child.tail)
        if markers is not None and node.tag == _REF and node.get("type") == "bibr":
            target = (node.get("target") or "").strip().lstrip("#") or None
            markers.append((target, start, length))

    walk(element)
    return "".join(parts)


def _text_of(element: etree._Element) -> str:
    return collapse_whitespace(_raw_text(element))


def _abstract_paragraphs(root: etree._Element) -> list[etree._Element]:
    return list(root.iterfind(".//tei:teiHeader//tei:abstract//tei:p", _NS))


def _body_divs(root: etree._Element) -> list[tuple[etree._Element | None, list[etree._Element]]]:
    """(head, paragraphs) of each body div, in reading order."""
    return [(div.find("tei:head", _NS), div.findall("tei:p", _NS))
            for div in root.iterfind(".//tei:text/tei:body//tei:div", _NS)]


def _sections(root: etree._Element, options: ReaderOptions) -> list[dict]:
    sections: list[dict] = []
    abstract = [options.clean(_text_of(p)) for p in _abstract_paragraphs(root)]
    abstract = [p for p in abstract if p]
    if abstract:
        sections.append({"heading": "Abstract", "paragraphs": abstract})
    for head, elements in _body_divs(root):
        paragraphs = [options.clean(_text_of(p)) for p in elements]
        paragraphs = [p for p in paragraphs if p]
        if paragraphs:
            sections.append({"heading": _text_of(head) if head is not None else None, "paragraphs": paragraphs})
    return sections


def _first(parent: etree._Element | None, *paths: str) -> etree._Element | None:
    """The first element found by any of ``paths`` (lxml elements without children are falsy: no ``or``)."""
    for path in paths:
        found = parent.find(path, _NS) if parent is not None else None
        if found is not None:
            return found
    return None


def _authors(part: etree._Element | None) -> list[str]:
    names = []
    for pers in part.iterfind("tei:author/tei:persName", _NS) if part is not None else []:
        parts = [_text_of(n) for n in pers if n.tag in (_FORENAME, _SURNAME)]
        names.append(" ".join(p for p in parts if p))
    return names


def _bib_entry(struct: etree._Element, options: ReaderOptions) -> bib.BibEntry | None:
    """One ``biblStruct``: the work's title is the analytic title, or the monograph's (a book, a
    preprint) when there is no analytic part; a journal title alone is the venue, not a title."""
    entry_id = struct.get(_XML_ID)
    if not entry_id:
        return None
    clean = dehyphenate if options.dehyphenate else None

    def field(element: etree._Element | None) -> str | None:
        return bib.clean_field(_text_of(element), clean) if element is not None else None

    analytic, monogr = struct.find("tei:analytic", _NS), struct.find("tei:monogr", _NS)
    if analytic is not None:
        title = field(_first(analytic, "tei:title[@type='main']", "tei:title"))
        venue = field(_first(monogr, "tei:title"))
    else:
        title = field(_first(monogr, "tei:title[@level='m']"))
        venue = field(_first(monogr, "tei:title[@level='j']"))
    venue = venue or field(_first(struct, ".//tei:meeting"))
    date = _first(struct, ".//tei:imprint/tei:date")
    year = bib.find_year(date.get("when") or _text_of(date)) if date is not None else None
    ids = [((i.get("type") or "").lower(), _text_of(i)) for i in struct.iterfind(".//tei:idno", _NS)]
    every = " ".join([text for _, text in ids] + [p.get("target") or "" for p in struct.iterfind(".//tei:ptr", _NS)])
    typed_doi = next((bib.find_doi(text) for kind, text in ids if kind == "doi"), None)
    typed_arxiv = next((bib.find_arxiv_id(text, assume_arxiv=True) for kind, text in ids if kind == "arxiv"), None)
    return bib.entry(
        entry_id, title=title, authors=_authors(analytic if analytic is not None else monogr), year=year,
        venue=venue, doi=typed_doi or bib.find_doi(every), arxiv_id=typed_arxiv or bib.find_arxiv_id(every),
        acl_id=bib.find_acl_id(every),
    )


def _bibliography(root: etree._Element, sections: list[dict], options: ReaderOptions) -> dict:
    """Entries of ``<listBibl>`` and the ``<ref type="bibr">`` markers of the stored paragraphs."""
    entries = [e for e in (_bib_entry(s, options) for s in root.iterfind(".//tei:listBibl/tei:biblStruct", _NS)) if e]
    paragraphs = []
    for p in [*_abstract_paragraphs(root), *(p for _, elements in _body_divs(root) for p in elements)]:
        markers: list = []
        raw = _raw_text(p, markers)
        paragraphs.append((raw, markers))
    mentions = bib.locate_mentions(sections, paragraphs, options.clean)
    return bib.bibliography(entries, mentions)


def _license(root: etree._Element) -> str | None:
    """``publicationStmt/availability/licence`` (its ``target`` URL, else its text); a copyright line in
    ``availability/p`` (GROBID's usual) is not a licence."""
    node = root.find(".//tei:teiHeader/tei:fileDesc/tei:publicationStmt/tei:availability/tei:licence", _NS)
    return license_name(node.get("target"), _text_of(node)) if node is not None else None


def parse_tei(data: bytes, source_path: str, options: ReaderOptions) -> list[ParsedRecord]:
    """Parse one TEI file into a paper record, or a reject saying why it cannot be used."""
    paper_id = canonical_paper_id(paper_id_from_path(source_path)) or None
    root, failure = parse_xml(data, FORMAT, source_path, paper_id, collect_ids=False)
    if failure:
        return failure
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
    shortfall = options.body_shortfall(sections)
    if shortfall:
        return [reject(FORMAT, source_path, Reason.EMPTY_BODY, shortfall, paper_id)]
    bibliography = bib.safe_bibliography(lambda: _bibliography(root, sections, options))
    return [paper_record(FORMAT, source_path, paper_id, title, sections, date, rule, bibliography, _license(root))]
