"""JATS XML, one article per file: PubMed Central's open-access subset, PLOS, eLife (JATS 1.0-1.3, NLM 2.x/3.0).

What becomes prose: the ``<p>`` paragraphs of the article's own ``<abstract>`` and ``<body>`` (not of its
``<sub-article>`` decision letters and replies, nor of ``<back>``), each list item a paragraph of its own.
Figures, tables, captions, display formulae, supplementary material, boxed text, quotes and footnotes never
reach a paragraph; an inline formula does only as a short symbol ("k", "g(t)"). Citations ``<xref ref-type="bibr">`` keep their text, so author-year ones read as the citation
filter of ``mine`` expects ("(Smith et al., 2012)"); a numeric one that the text does not bracket (a
superscript, a bare number) is written in brackets ("[3-5]"), which the B.1 normalisation removes as it does
for every bracketed number. The rules, the dates and the rejects: docs/formats.md, "jats".
"""

from __future__ import annotations

import re
from collections import Counter

from lxml import etree

from ratio_spark.core.schema import Reason
from ratio_spark.pipeline.ingest import bibliography as bib
from ratio_spark.pipeline.ingest.dates import paper_id_from_path, resolve_date
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.records import ParsedRecord, license_name, paper_record, reject
from ratio_spark.pipeline.ingest.xmldoc import parse_xml
from ratio_spark.core.text import collapse_whitespace, dehyphenate

FORMAT = "jats"
# Elements whose content is not prose, wherever they sit: display objects and their captions, formulae,
# notes, quotes, code, labels ("1.", "Figure 2"). Their tail text (what follows them) is kept.
_NOT_PROSE = frozenset({
    "fig", "fig-group", "table-wrap", "table-wrap-group", "table", "graphic", "media", "supplementary-material",
    "inline-supplementary-material", "disp-formula", "disp-formula-group", "math", "tex-math",
    "chem-struct-wrap", "chem-struct", "array", "alternatives", "inline-graphic", "boxed-text", "fn", "fn-group",
    "table-wrap-foot", "caption", "disp-quote", "code", "preformat", "def-list", "glossary", "statement",
    "speech", "verse-group", "label", "ref-list", "sec-meta", "private-char", "object-id",
})
# Display objects named in a body_without_prose reject's detail.
_DISPLAY = ("fig", "fig-group", "table-wrap", "table-wrap-group", "media", "supplementary-material", "disp-formula",
            "graphic", "boxed-text", "chem-struct-wrap", "code")
# An inline formula whose MathML reads as at most this many characters is a symbol in the sentence ("k",
# "g(t)", "pSTAT5"), kept as its text; a longer one (or TeX only) is left out like a display formula.
_MAX_INLINE_FORMULA_CHARS = 12
# Cross-references that are markers, not words: footnote and affiliation symbols.
_NOTE_XREFS = frozenset({"fn", "table-fn", "aff", "corresp", "author-notes"})
# A numeric citation ("3", "3a", "3-5", "1, 4"); four digits is a year ("Smith (2006, 2007)").
_NUMERIC_CITATION = re.compile(r"^\s*\d{1,3}[a-z]?(?:\s*(?:[-\u2010-\u2014,;]|and)\s*\d{1,3}[a-z]?)*\s*$")
# What a parenthesis of numeric citations holds besides them: "(1, 2)", "(3-5; 8)".
_CITATION_GROUP = re.compile(r"[\s\d,;\u2010-\u2014-]*")
# Brackets of a citation range or list written one number at a time ("[2]-[4]", "[2], [5]") as one bracket, so
# that the normalisation removes them whole; the sentinel of ``bibliography`` may stand before a number.
_SPLIT_BRACKETS = re.compile(r"(?<=\d)\]([ ]?[,\u2013-][ ]?)(" + bib.SENTINEL + r"?)\[(?=" + bib.SENTINEL + r"?\d)")
# Wrappers that may hold the one article of a file: PMC's efetch and OAI-PMH answers.
_WRAPPERS = ("pmc-articleset", "OAI-PMH")
_HTML = re.compile(rb"^\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html)[\s>]", re.IGNORECASE | re.DOTALL)
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
# Extra abstracts kept after the article's main one, under their own titles: eLife digests, PLOS author summaries.
_SUMMARY_TYPES = ("executive-summary", "summary", "author-summary", "plain-language-summary")


def _tag(node) -> str | None:
    """An element's name without namespace; None for comments and processing instructions."""
    tag = node.tag
    if not isinstance(tag, str):
        return None
    return tag.rpartition("}")[2] if tag.startswith("{") else tag


class _Prose:
    """The prose of one element as pieces of (raw text, citation markers): a new piece where a paragraph or
    a list item starts, so each ``<p>`` and each list item is a paragraph of its own."""

    def __init__(self) -> None:
        self.pieces: list[tuple[str, list[tuple[str | None, int, int]]]] = []
        self._parts: list[str] = []
        self._markers: list[tuple[str | None, int, int]] = []
        self._length = 0
        self._open_paren: int | None = None  # where "(" opens a group of numeric citations

    def _add(self, text: str) -> None:
        if self._open_paren is not None and ")" in text:
            text = self._close_citation_parenthesis(text)
        self._parts.append(text)
        self._length += len(text)

    def _close_citation_parenthesis(self, text: str) -> str:
        """"(1, 2)" of numeric citations becomes "[1, 2]" (same length: the markers stay where they are)."""
        joined, close = "".join(self._parts), text.index(")")
        start, self._open_paren = self._open_paren, None
        if not _CITATION_GROUP.fullmatch(joined[start + 1:] + text[:close]):
            return text
        self._parts = [joined[:start] + "[" + joined[start + 1:]]
        return text[:close] + "]" + text[close + 1:]

    def _flush(self) -> None:
        if self._parts or self._markers:
            self.pieces.append(("".join(self._parts), self._markers))
        self._parts, self._markers, self._length, self._open_paren = [], [], 0, None

    def _enclosed(self) -> bool:
        """Inside an open bracket or parenthesis of the piece so far: a number there is bracketed already."""
        text = "".join(self._parts)
        return text.rfind("[") > text.rfind("]") or text.rfind("(") > text.rfind(")")

    def _children(self, node) -> None:
        if node.text:
            self._add(node.text)
        for child in node:
            self.walk(child)
            if child.tail:
                self._add(child.tail)

    def _citation(self, node) -> None:
        text = "".join(node.itertext())
        numeric = bool(_NUMERIC_CITATION.match(text))
        if numeric and self._open_paren is None:
            so_far = "".join(self._parts)
            if so_far.rfind("(") > max(so_far.rfind(")"), so_far.rfind("[")):
                self._open_paren = so_far.rfind("(")
        start = self._length
        self._add(f"[{text.strip()}]" if numeric and not self._enclosed() else text)
        for rid in (node.get("rid") or "").split() or [None]:
            self._markers.append((rid, start, self._length))

    def _citation_group(self, node) -> bool:
        """A superscript of numeric citations only ("<sup>3-5</sup>"): written as one bracket."""
        xrefs = list(node.iter("xref"))
        return (bool(xrefs) and all(x.get("ref-type") == "bibr" for x in xrefs)
                and bool(_NUMERIC_CITATION.match("".join(node.itertext()))) and not self._enclosed())

    def _formula(self, node) -> None:
        math = next((n for n in node.iter() if _tag(n) == "math"), None)
        text = collapse_whitespace("".join(math.itertext())) if math is not None else ""
        if len(text) <= _MAX_INLINE_FORMULA_CHARS:
            self._add(text)

    def walk(self, node) -> None:
        tag = _tag(node)
        if tag == "inline-formula":
            self._formula(node)
            return
        if tag is None or tag in _NOT_PROSE or (tag == "xref" and node.get("ref-type") in _NOTE_XREFS):
            return
        if tag == "xref" and node.get("ref-type") == "bibr":
            self._citation(node)
        elif tag in ("p", "list", "list-item"):
            self._flush()
            self._children(node)
            self._flush()
        elif tag == "sup" and self._citation_group(node):
            self._add("[")
            self._children(node)
            self._add("]")
        elif tag == "break":
            self._add(" ")
        else:
            self._children(node)

    @classmethod
    def of(cls, node) -> list[tuple[str, list[tuple[str | None, int, int]]]]:
        prose = cls()
        prose.walk(node)
        prose._flush()
        return prose.pieces


def _inline_text(node) -> str:
    """An element's prose on one line (titles, headings, bibliography fields)."""
    return collapse_whitespace(" ".join(raw for raw, _ in _Prose.of(node))) if node is not None else ""


class _Sections:
    """Sections in reading order with their raw paragraphs (for the citation offsets)."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self.sections: list[dict] = []
        self.raw: list[tuple[str, list]] = []

    def clean(self, text: str) -> str:
        """The reader's cleaning of a paragraph: every reader's (``ReaderOptions.clean``), then "[2]-[4]" as "[2-4]"."""
        return _SPLIT_BRACKETS.sub(r"\1\2", self.options.clean(text))

    def add(self, container, heading: str | None, flat: bool = False) -> None:
        """``container``'s paragraphs, lists and ``<sec>``s, each ``<sec>`` a section under its title (with
        ``flat``: all in one section under ``heading``). Anything else in it is not prose."""
        self._add(container, heading, flat, None)

    def _add(self, container, heading: str | None, flat: bool, current: dict | None) -> dict | None:
        for child in container:
            tag = _tag(child)
            if tag in ("p", "list"):
                for raw, markers in _Prose.of(child):
                    self.raw.append((raw, markers))
                    text = self.clean(raw)
                    if not text:
                        continue
                    if current is None:
                        current = {"heading": heading, "paragraphs": []}
                        self.sections.append(current)
                    current["paragraphs"].append(text)
            elif tag == "sec" and flat:
                current = self._add(child, heading, True, current)
            elif tag == "sec":
                self._add(child, self.clean(_inline_text(_child(child, "title"))) or heading, False, None)
                current = None  # paragraphs after a subsection start a new section under this heading
        return current


# Below, JATS elements are found by their plain names: ``_strip_namespace`` has run.


def _child(node, name: str):
    """The first child element named ``name`` (lxml elements without children are falsy: no ``or``)."""
    return node.find(name) if node is not None else None


def _children(node, name: str) -> list:
    return node.findall(name) if node is not None else []


def _strip_namespace(article) -> None:
    """JATS in a namespace (PMC's OAI-PMH answers): its elements by their plain names, as everywhere else."""
    namespace = etree.QName(article).namespace
    if namespace is None:
        return
    prefix = f"{{{namespace}}}"
    for node in article.iter():
        if isinstance(node.tag, str) and node.tag.startswith(prefix):
            node.tag = node.tag[len(prefix):]


def _article(root) -> tuple[etree._Element | None, tuple[str, str] | None]:
    """(the ``<article>`` element, None) or (None, (reason, why there is no one JATS article here))."""
    name = _tag(root)
    if name == "article":
        return root, None
    if name in _WRAPPERS:
        found = [n for n in root.iter() if _tag(n) == "article"]
        if len(found) == 1:
            return found[0], None
        return None, (Reason.UNEXPECTED_SHAPE if found else Reason.NOT_JATS,
                      f"a <{name}> holding {len(found)} articles: one article per file")
    hint = " (a GROBID TEI file: use format tei)" if name == "TEI" else " (an HTML page)" if name and name.lower() == "html" else ""
    return None, (Reason.NOT_JATS, f"the root element is <{name}>, not <article>{hint}")


def _not_xml(data: bytes) -> str | None:
    """Why these bytes are plainly no JATS XML (not XML at all, an HTML page), or None."""
    if not data.strip() or data.startswith(_BOMS[1:]):
        return None
    head = data[3:] if data.startswith(_BOMS[0]) else data
    if not head.lstrip().startswith(b"<"):
        start = head.lstrip()[:30].decode("utf-8", "replace")
        return f"not XML: it starts with {start!r}"
    if _HTML.match(head):
        return "an HTML page, not JATS XML"
    return None


def _paper_id(meta, source_path: str) -> str | None:
    """The article's DOI (lowercase), else its PMC id (PMC1234567), else its PubMed id (pmid:123), else the file name."""
    ids: dict[str, str] = {}
    for node in _children(meta, "article-id"):
        ids.setdefault((node.get("pub-id-type") or "").lower(), collapse_whitespace("".join(node.itertext())))
    if doi := bib.find_doi(ids.get("doi")):
        return doi
    pmc = re.sub(r"^pmc", "", ids.get("pmcid") or ids.get("pmc") or "", flags=re.IGNORECASE)
    if pmc.isdigit():
        return f"PMC{pmc}"
    if (ids.get("pmid") or "").isdigit():
        return f"pmid:{ids['pmid']}"
    return paper_id_from_path(source_path) or None


# date_source of each kind of <pub-date>, in the order they are tried: electronic publication first.
_DATE_KINDS = ("jats_epub", "jats_pub", "jats_ppub", "jats_collection", "jats_pmc_release")


def _date_kind(node) -> str | None:
    pub_type, date_type = node.get("pub-type"), node.get("date-type")
    medium = node.get("publication-format")
    if pub_type in ("epub", "epub-ppub") or (medium == "electronic" and date_type in (None, "pub")):
        return "jats_epub"
    if pub_type == "ppub" or (medium == "print" and date_type in (None, "pub")):
        return "jats_ppub"
    if date_type == "pub" or (pub_type is None and date_type is None):
        return "jats_pub"
    if "collection" in (pub_type, date_type):
        return "jats_collection"
    if pub_type == "pmc-release":
        return "jats_pmc_release"
    return None  # corrected, retracted, nihms-submitted, ...: not when the article came out


def _date_value(node) -> str | None:
    """ISO when the parts are numbers ("2013-02-11", "2013-02", "2013"), else "Month Year" free text."""
    iso = (node.get("iso-8601-date") or "").strip()
    if iso:
        return iso
    year, month, day = (collapse_whitespace(node.findtext(part) or "") for part in ("year", "month", "day"))
    month = month or collapse_whitespace(node.findtext("season") or "")
    if not year:
        return None
    if not month:
        return year
    if not month.isdigit():
        return f"{month} {year}"
    return f"{year}-{int(month):02d}" + (f"-{int(day):02d}" if day.isdigit() else "")


def _date_candidates(meta) -> list[tuple[str, str]]:
    found = [(kind, _date_value(node)) for node in _children(meta, "pub-date") if (kind := _date_kind(node))]
    return sorted(found, key=lambda item: _DATE_KINDS.index(item[0]))  # stable: document order within a kind


def _license(meta) -> str | None:
    """The first ``<license>``: its ALI reference (JATS 1.2+), its link, the links and words of its text."""
    permissions = _child(meta, "permissions")
    node = next(permissions.iter("license"), None) if permissions is not None else None
    if node is None:
        return None
    refs = ["".join(n.itertext()) for n in node.iter() if _tag(n) == "license_ref"]
    links = [v for n in node.iter() if isinstance(n.tag, str) for k, v in n.attrib.items() if etree.QName(k).localname == "href"]
    text = _inline_text(_child(node, "license-p"))
    return license_name(*refs, *links, text, node.get("license-type"))


def _abstracts(meta, sections: _Sections) -> None:
    abstracts = _children(meta, "abstract")
    main = next((a for a in abstracts if (a.get("abstract-type") or "abstract") == "abstract"), None)
    if main is not None:
        sections.add(main, "Abstract", flat=True)
    for abstract in abstracts:
        kind = abstract.get("abstract-type")
        if abstract is not main and kind in _SUMMARY_TYPES:
            heading = sections.clean(_inline_text(_child(abstract, "title"))) or kind
            sections.add(abstract, heading, flat=True)


def _display_objects(body) -> str:
    counts = Counter(n.tag for n in body.iter(*_DISPLAY))
    return ", ".join(f"{n} <{tag}>" for tag, n in counts.most_common()) or "only headings or empty elements"


def _plain(node) -> str:
    """All the text of a bibliography element (no prose rules: a field holds no figure or footnote)."""
    return collapse_whitespace("".join(node.itertext())) if node is not None else ""


def _field(node, clean) -> str | None:
    return bib.clean_field(_plain(node), clean) if node is not None else None


def _first(citation, *names: str):
    """The first element of the first of ``names`` that occurs (a priority order, not document order)."""
    return next((n for name in names for n in citation.iter(name)), None)


def _authors(citation) -> list[str]:
    groups = [g for g in citation.iter("person-group") if g.get("person-group-type") in (None, "author")]
    names = []
    for parent in groups[:1] or [citation]:
        for node in parent:
            tag = _tag(node)
            if tag == "name":
                parts = [_plain(_child(node, p)) for p in ("given-names", "surname")]
                names.append(" ".join(p for p in parts if p))
            elif tag in ("string-name", "collab"):
                names.append(_plain(node))
    return names


def _bib_entry(ref, options: ReaderOptions) -> bib.BibEntry | None:
    """One ``<ref>``: its structured citation (``element-citation``, else ``mixed-citation``, ``nlm-citation``,
    ``citation``). The work's title is the article, chapter or data title, or the source for a book; a
    journal's source is the venue."""
    entry_id = ref.get("id")
    if not entry_id:
        return None
    clean = dehyphenate if options.dehyphenate else None
    citation = _first(ref, "element-citation", "mixed-citation", "nlm-citation", "citation")
    if citation is None:
        text = " ".join(ref.itertext())
        return bib.entry(entry_id, year=bib.find_year(text), doi=bib.find_doi(text))
    title = _field(_first(citation, "article-title", "chapter-title", "data-title", "part-title"), clean)
    venue = _field(_first(citation, "source"), clean)
    if title is None and (citation.get("publication-type") or citation.get("citation-type")) != "journal":
        title, venue = venue, None  # a book, a report, a web page: the source is the work
    venue = venue or _field(_first(citation, "conf-name"), clean)
    ids = {(n.get("pub-id-type") or "").lower(): collapse_whitespace("".join(n.itertext())) for n in citation.iter("pub-id")}
    links = " ".join(v for n in citation.iter() if isinstance(n.tag, str)
                     for k, v in n.attrib.items() if etree.QName(k).localname == "href")
    every = " ".join([*ids.values(), links, " ".join(citation.itertext())])
    year = _first(citation, "year")  # else the first 19xx/20xx of an unstructured citation
    pmid = ids.get("pmid", "")
    return bib.entry(
        entry_id, title=title, authors=_authors(citation), year=bib.find_year(_plain(year) if year is not None else " ".join(citation.itertext())),
        venue=venue, doi=bib.find_doi(ids.get("doi")) or bib.find_doi(every),
        arxiv_id=bib.find_arxiv_id(ids.get("arxiv"), assume_arxiv=True) or bib.find_arxiv_id(every),
        acl_id=bib.find_acl_id(every), pmid=pmid if pmid.isdigit() else None,
    )


def _bibliography(article, sections: _Sections, options: ReaderOptions) -> dict:
    """Entries of the article's ``<ref-list>``s and the ``<xref ref-type="bibr">`` markers of its paragraphs."""
    refs = [n for part in (_child(article, "back"), _child(article, "body")) if part is not None for n in part.iter("ref")]
    entries = [e for e in (_bib_entry(r, options) for r in refs) if e]
    return bib.bibliography(entries, bib.locate_mentions(sections.sections, sections.raw, sections.clean))


def parse_jats(data: bytes, source_path: str, options: ReaderOptions) -> list[ParsedRecord]:
    """One JATS file into a paper record, or a reject saying why it cannot be used."""
    fallback_id = paper_id_from_path(source_path) or None
    if (why := _not_xml(data)) is not None:
        return [reject(FORMAT, source_path, Reason.NOT_JATS, why, fallback_id)]
    root, failure = parse_xml(data, FORMAT, source_path, fallback_id, html_entities=True, detect_truncation=True)
    if failure:
        return failure
    article, failure = _article(root)
    if article is None:
        return [reject(FORMAT, source_path, *failure, fallback_id)]
    _strip_namespace(article)
    meta = _child(_child(article, "front"), "article-meta")
    if meta is None:
        return [reject(FORMAT, source_path, Reason.UNEXPECTED_SHAPE, "no <front>/<article-meta>", fallback_id)]
    paper_id = _paper_id(meta, source_path)
    if not paper_id:
        return [reject(FORMAT, source_path, Reason.MISSING_ID, "no DOI, PMC id or PubMed id, and no file name", None)]

    date, rule, failure = resolve_date(_date_candidates(meta), paper_id, options.date_rules, options.min_year,
                                       options.max_year)
    if date is None:
        reason, detail = failure.split("|", 1)
        return [reject(FORMAT, source_path, reason, detail, paper_id)]

    body = _child(article, "body")
    if body is None:
        return [reject(FORMAT, source_path, Reason.NO_BODY, "the article has no <body> (metadata or abstract only)", paper_id)]
    sections = _Sections(options)
    _abstracts(meta, sections)
    in_abstract = len(sections.sections)
    sections.add(body, None)
    if len(sections.sections) == in_abstract:
        if not "".join(body.itertext()).strip() and not len(body):
            return [reject(FORMAT, source_path, Reason.NO_BODY, "the article's <body> is empty", paper_id)]
        return [reject(FORMAT, source_path, Reason.BODY_WITHOUT_PROSE,
                       f"the <body> holds {_display_objects(body)} and no paragraph of prose", paper_id)]
    shortfall = options.body_shortfall(sections.sections)
    if shortfall:
        return [reject(FORMAT, source_path, Reason.EMPTY_BODY, shortfall, paper_id)]
    title = _inline_text(_child(_child(meta, "title-group"), "article-title"))
    bibliography = bib.safe_bibliography(lambda: _bibliography(article, sections, options))
    return [paper_record(FORMAT, source_path, paper_id, title, sections.sections, date, rule, bibliography,
                         _license(meta))]
