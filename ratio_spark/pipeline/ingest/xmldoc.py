"""Bytes to an XML tree for the XML readers (TEI, JATS): the encoding, syntax and truncation checks in one place.

A unit must be UTF-8, or say which encoding it uses (an ``encoding=`` in its XML declaration, or a UTF-16
byte-order mark in front of UTF-16 XML): a byte replaced silently would corrupt text. The parser never
reads a DTD, resolves external entities or touches the network; with ``html_entities`` a named entity that
only a DTD would define (``&nbsp;``, ``&ndash;``: JATS DTDs declare the HTML and ISO sets) is read as its
character (without a DTD it would fail the file, or, under a DOCTYPE, vanish from the text).
"""

from __future__ import annotations

import codecs
import re
from html.entities import html5

from lxml import etree

from ratio_spark.core.schema import Reason
from ratio_spark.pipeline.ingest.records import ParsedRecord, reject

_XML_ENTITIES = {"amp", "lt", "gt", "quot", "apos"}
_NAMED_ENTITY = re.compile(rb"&([A-Za-z][A-Za-z0-9]*);")
_FIRST_ELEMENT = re.compile(rb"<([A-Za-z_][\w.:-]*)[\s/>]")


def _utf16_xml(data: bytes) -> bool:
    if not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    try:
        return data.decode("utf-16").lstrip().startswith("<")
    except UnicodeDecodeError:
        return False


def _html_entities_as_characters(data: bytes) -> bytes:
    def replace(match: re.Match) -> bytes:
        name = match.group(1).decode("ascii")
        char = html5.get(name + ";")
        if name in _XML_ENTITIES or char is None:
            return match.group(0)
        return "".join(f"&#{ord(c)};" for c in char).encode("ascii")

    return _NAMED_ENTITY.sub(replace, data)


def _cut_short(data: bytes) -> str | None:
    """The root element's name when the file does not end with its closing tag (a cut file), else None."""
    match = _FIRST_ELEMENT.search(data)
    if match is None:
        return None
    name = match.group(1)
    tail = data.rstrip()
    complete = tail.endswith(b"</" + name + b">") or (tail.endswith(b"/>") and b"</" not in tail)  # or <article/>
    if complete:
        return None
    return name.decode("ascii", "replace")


def parse_xml(data: bytes, fmt: str, source_path: str, paper_id: str | None, *, html_entities: bool = False,
              detect_truncation: bool = False, collect_ids: bool = True) -> tuple[etree._Element | None, list[ParsedRecord] | None]:
    """(root, None), or (None, [reject]) saying why the bytes are no XML tree: ``empty_file``,
    ``undecodable_bytes``, ``malformed_xml``, or ``truncated_file`` with ``detect_truncation`` (a file that
    ends before its root element closes). ``collect_ids=False`` lets an ``xml:id`` repeat (GROBID writes
    ``formula_15`` twice); it also makes libxml2 fail on a DOCTYPE with a network URL, which JATS files have."""

    def fail(reason: str, detail: str) -> tuple[None, list[ParsedRecord]]:
        return None, [reject(fmt, source_path, reason, detail, paper_id)]

    if not data.strip():
        return fail(Reason.EMPTY_FILE, "the file has no content")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        declared = data.lstrip().startswith(b"<?xml") and b"encoding=" in data[:200]
        if not (declared or _utf16_xml(data)):
            return fail(Reason.UNDECODABLE_BYTES, f"not valid UTF-8: {exc}")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, collect_ids=collect_ids,
                             load_dtd=False)
    try:
        # Named entities first: with a DOCTYPE, libxml2 keeps an undefined one as an empty entity node.
        return etree.fromstring(_html_entities_as_characters(data) if html_entities else data, parser), None
    except etree.XMLSyntaxError as exc:
        message = str(exc)
    if "encoding" in message.lower() or "utf-8" in message.lower():
        return fail(Reason.UNDECODABLE_BYTES, f"XML parser: {message}")
    if detect_truncation and (root := _cut_short(data)) is not None:
        return fail(Reason.TRUNCATED_FILE, f"the XML ends before its root element <{root}> closes (truncated: {message}); "
                                           "fix: copy or download the file again")
    return fail(Reason.MALFORMED_XML, f"XML parser: {message}")
