"""References at ingest: bibliography entries and in-text mentions from real TEI and S2ORC records, and
the ``citations`` stage that links mentions to sentences and resolves entries to corpus papers.

Expectations are read from the source files here, independently of the readers (lxml over the TEI,
the JSON's own cite spans), never copied from a run.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from lxml import etree

from ratio_spark.core.text import dehyphenate
from ratio_spark.pipeline.ingest import bibliography as bib
from ratio_spark.pipeline.ingest.options import ReaderOptions
from ratio_spark.pipeline.ingest.s2orc import parse_s2orc_2020, parse_s2orc_current
from ratio_spark.pipeline.ingest.tei import parse_tei

from conftest import FIXTURES, REPO_ROOT

SAMPLE = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"
TEI = "{http://www.tei-c.org/ns/1.0}"
NS = {"t": TEI[1:-1]}
XML_ID = "{http://www.w3.org/XML/1998/namespace}id"


def aclsum_file(name: str) -> Path:
    import aclsum

    return Path(os.path.dirname(aclsum.__file__)) / "dataset" / "paper_jsons" / f"{name}.json"


def tei_record(path: Path, data: bytes | None = None) -> dict:
    data = data if data is not None else gzip.decompress(path.read_bytes())
    [record] = parse_tei(data, str(path), ReaderOptions(input_name="t", format="tei"))
    assert record["reject_reason"] is None, record["reject_detail"]
    return record


def squash(text: str) -> str:
    return dehyphenate(re.sub(r"\s+", " ", text).strip())


def text_at(record: dict, mention: dict) -> str:
    return record["sections"][mention["section_idx"]]["paragraphs"][mention["para_idx"]][mention["char_offset"]:]


# ----------------------------------------------------------------------------------------- TEI


def test_tei_entries_and_every_mention_sit_exactly_where_the_marker_is():
    path = SAMPLE / "P18-1001.tei.xml.gz"
    root = etree.fromstring(gzip.decompress(path.read_bytes()))
    structs = root.findall(".//t:listBibl/t:biblStruct", NS)
    refs = [r for r in root.iterfind(".//t:body//t:div/t:p//t:ref[@type='bibr']", NS)]
    record = tei_record(path)
    entries, mentions = record["bibliography"]["entries"], record["bibliography"]["mentions"]
    assert [e["entry_id"] for e in entries] == [s.get(XML_ID) for s in structs]
    assert len(mentions) == len(refs) > 20
    # Mentions come in reading order, as the markers do; each sits where its marker's text starts.
    assert [m["entry_id"] for m in mentions] == [(r.get("target") or "").lstrip("#") or None for r in refs]
    for mention, ref in zip(mentions, refs):
        assert text_at(record, mention).startswith(squash("".join(ref.itertext())))


def test_tei_entry_fields_and_ids_come_from_the_struct():
    path = SAMPLE / "P18-1001.tei.xml.gz"
    root = etree.fromstring(gzip.decompress(path.read_bytes()))
    entries = {e["entry_id"]: e for e in tei_record(path)["bibliography"]["entries"]}
    for struct in root.iterfind(".//t:listBibl/t:biblStruct", NS):
        entry = entries[struct.get(XML_ID)]
        analytic = struct.find("t:analytic/t:title", NS)
        title = analytic if analytic is not None else struct.find("t:monogr/t:title[@level='m']", NS)
        assert entry["title"] == (squash("".join(title.itertext())) if title is not None else None)
        when = struct.find(".//t:imprint/t:date", NS)
        year = int(when.get("when")[:4]) if when is not None and when.get("when") else None
        assert entry["year"] == (year if year and 1900 <= year < 2100 else None)  # GROBID writes "1217" too
        doi = struct.find(".//t:idno[@type='doi']", NS)
        if doi is not None:
            assert entry["doi"] == doi.text.strip().lower()
        ptrs = [p.get("target") for p in struct.iterfind(".//t:ptr", NS)]
        arxiv = [re.search(r"arxiv\.org/abs/(\d{4}\.\d{4,5})", p) for p in ptrs]
        for match in filter(None, arxiv):
            assert entry["arxiv_id"] == match.group(1)
    assert sum(1 for e in entries.values() if e["arxiv_id"]) >= 3


def _add_entries(data: bytes, extra: list[str], mention_of: str) -> bytes:
    """The real TEI with biblStructs appended and one marker to ``mention_of`` in its first body paragraph."""
    root = etree.fromstring(data)
    listbibl = root.find(".//t:listBibl", NS)
    for xml in extra:
        listbibl.append(etree.fromstring(xml))
    first_p = root.find(".//t:body//t:div/t:p", NS)
    ref = etree.SubElement(first_p, f"{TEI}ref", type="bibr", target=f"#{mention_of}")
    ref.text = "(Again, 2017)"
    ref.tail = " done."
    return etree.tostring(root)


def struct_xml(xml_id: str, title: str | None, year: int, ptr: str | None = None) -> str:
    title_xml = f'<title level="a" type="main">{title}</title>' if title else ""
    ptr_xml = f'<ptr target="{ptr}"/>' if ptr else ""
    return (f'<biblStruct xmlns="{TEI[1:-1]}" xml:id="{xml_id}"><analytic>{title_xml}{ptr_xml}</analytic>'
            f'<monogr><title level="m">Proc. of ACL</title><imprint><date type="published" when="{year}"/></imprint>'
            f'</monogr></biblStruct>')


def test_entries_without_title_repeated_ids_and_no_bibliography_never_fail_a_paper():
    path = SAMPLE / "P18-1001.tei.xml.gz"
    data = gzip.decompress(path.read_bytes())
    changed = _add_entries(data, [struct_xml("b900", None, 2017), struct_xml("b0", "A repeated id", 2001)], "b900")
    record = tei_record(path, changed)
    entries = record["bibliography"]["entries"]
    untitled = [e for e in entries if e["entry_id"] == "b900"]
    assert untitled and untitled[0]["title"] is None and untitled[0]["year"] == 2017
    assert [e["entry_id"] for e in entries].count("b0") == 1  # the first b0 wins
    assert next(e for e in entries if e["entry_id"] == "b0")["title"] != "A repeated id"
    added = [m for m in record["bibliography"]["mentions"] if m["entry_id"] == "b900"]
    assert len(added) == 1 and text_at(record, added[0]).startswith("(Again, 2017) done.")
    # No listBibl at all: the paper is kept, the bibliography says why it is empty.
    root = etree.fromstring(data)
    for listbibl in root.findall(".//t:listBibl", NS):
        listbibl.getparent().remove(listbibl)
    bare = tei_record(path, etree.tostring(root))
    assert bare["bibliography"]["entries"] == [] and bare["bibliography"]["problem"] == bib.NO_BIBLIOGRAPHY
    assert bare["sections"] == tei_record(path)["sections"]


# ----------------------------------------------------------------------------------------- S2ORC


def test_s2orc_2020_entries_and_cite_spans_from_a_real_aclsum_paper():
    path = aclsum_file("2020.acl-main.669")
    paper = json.loads(path.read_text())
    [record] = parse_s2orc_2020(path.read_bytes(), str(path), ReaderOptions(input_name="a", format="s2orc_2020"))
    entries, mentions = record["bibliography"]["entries"], record["bibliography"]["mentions"]
    bib_entries = paper["pdf_parse"]["bib_entries"]
    assert [e["entry_id"] for e in entries] == list(bib_entries)
    assert [e["title"] for e in entries] == [squash(b["title"]) or None for b in bib_entries.values()]
    assert [e["year"] for e in entries] == [b["year"] for b in bib_entries.values()]
    spans = [s for p in paper["pdf_parse"]["abstract"] + paper["pdf_parse"]["body_text"]
             for s in sorted(p["cite_spans"], key=lambda s: (s["start"], s["end"]))]
    assert len(mentions) == len(spans) > 20
    for mention, span in zip(mentions, spans):
        assert mention["entry_id"] == span["ref_id"]
        assert text_at(record, mention).startswith(squash(span["text"]))


def test_s2orc_2020_ids_and_a_broken_bibliography():
    path = aclsum_file("2020.acl-main.669")
    paper = json.loads(path.read_text())
    first = next(iter(paper["pdf_parse"]["bib_entries"]))
    paper["pdf_parse"]["bib_entries"][first]["other_ids"] = {"DOI": ["10.18653/v1/P17-1001"], "arXiv": ["arXiv:1409.0473v7"]}
    options = ReaderOptions(input_name="a", format="s2orc_2020")
    [record] = parse_s2orc_2020(json.dumps(paper).encode(), str(path), options)
    entry = record["bibliography"]["entries"][0]
    assert (entry["doi"], entry["acl_id"], entry["arxiv_id"]) == ("10.18653/v1/p17-1001", "P17-1001", "1409.0473")
    paper["pdf_parse"]["bib_entries"] = ["not", "an", "object"]
    [broken] = parse_s2orc_2020(json.dumps(paper).encode(), str(path), options)
    assert broken["reject_reason"] is None and broken["sections"] == record["sections"]
    assert broken["bibliography"]["problem"].startswith(bib.BIBLIOGRAPHY_ERROR)


def test_s2orc_current_bibentry_and_bibref_annotations():
    line = (FIXTURES / "references" / "s2orc_current.jsonl").read_bytes().strip()
    obj = json.loads(line)
    text, notes = obj["content"]["text"], {k: json.loads(v) for k, v in obj["content"]["annotations"].items()}
    [record] = parse_s2orc_current(line, "x.jsonl#line-1", ReaderOptions(input_name="c", format="s2orc_current"))
    entries, mentions = record["bibliography"]["entries"], record["bibliography"]["mentions"]
    assert [e["entry_id"] for e in entries] == [s["attributes"]["id"] for s in notes["bibentry"]]
    assert [e["s2_id"] for e in entries[:3]] == ["2001", "2002", None]
    assert [e["title"] for e in entries] == [
        next((text[t["start"]:t["end"]] for t in notes["bibtitle"] if b["start"] <= t["start"] < b["end"]), None)
        for b in notes["bibentry"]]
    assert len(mentions) == len(notes["bibref"]) > 20
    for mention, span in zip(mentions, sorted(notes["bibref"], key=lambda s: (s["start"], s["end"]))):
        assert mention["entry_id"] == span["attributes"].get("ref_id")
        assert text_at(record, mention).startswith(squash(text[span["start"]:span["end"]]))


def test_offsets_are_dropped_rather_than_guessed_when_cleaning_cannot_be_followed():
    raw = "A  study (Smith, 2010) and\ue010 more."
    text, offsets = bib.clean_offsets(raw, [(9, 21)], lambda t: re.sub(r"\s+", " ", t))
    assert offsets is None and text == "A study (Smith, 2010) and\ue010 more."
    text, offsets = bib.clean_offsets("A  study- ing (Smith, 2010)", [(14, 27)], lambda t: dehyphenate(re.sub(r"\s+", " ", t)))
    assert text == "A studying (Smith, 2010)" and text[offsets[0]:] == "(Smith, 2010)"


def test_id_helpers():
    assert bib.find_acl_id("http://www.aclweb.org/anthology/P06-1014.pdf") == "P06-1014"
    assert bib.find_acl_id("https://aclanthology.org/2020.acl-main.447") == "2020.acl-main.447"
    assert bib.find_arxiv_id("arX- iv:1410.5401") == "1410.5401"
    assert bib.find_arxiv_id("CoRR abs/1601.03764") == "1601.03764"
    assert bib.find_arxiv_id("pages 1410.5401") is None  # a number is no arXiv id without context
    assert bib.find_doi("doi: 10.1007/s10579- 009-9081-4.") == "10.1007/s10579-009-9081-4"


# ----------------------------------------------------------------------------------------- Spark


@pytest.fixture(scope="module")
def citations_run(spark, tmp_path_factory):
    """ingest + segment + citations over four real sample papers, one of them (D18-1256) with added
    entries (a duplicate of a cited corpus paper, a self-citation, an untitled entry with an Anthology
    URL, an untitled entry with nothing), plus S2ORC records: aclsum's N10-1045 (2020 shape), the
    current-release fixture (corpus id 3001, whose first two entries are matched to corpus ids 2001 and
    2002), and three JSONL papers they cite: 2001, 2002 and the Moses paper (a title N10-1045 cites)."""
    from ratio_spark.config import load_config
    from ratio_spark.pipeline.runner import run_stage
    from ratio_spark.pipeline.settings import InputConfig

    root = tmp_path_factory.mktemp("refs")
    corpus = root / "corpus"
    corpus.mkdir()
    for name in ("D17-1259", "P17-1162", "D16-1066"):
        shutil.copy(SAMPLE / f"{name}.tei.xml.gz", corpus)
    data = gzip.decompress((SAMPLE / "D18-1256.tei.xml.gz").read_bytes())
    own_title = "".join(etree.fromstring(data).find(".//t:titleStmt/t:title", NS).itertext())
    cited_title = "".join(etree.fromstring(gzip.decompress((SAMPLE / "D17-1259.tei.xml.gz").read_bytes()))
                          .find(".//t:titleStmt/t:title", NS).itertext())
    extra = [
        struct_xml("b900", cited_title, 2017),
        struct_xml("b901", own_title, 2018),
        struct_xml("b902", None, 2016, ptr="http://www.aclweb.org/anthology/D16-1066"),
        struct_xml("b903", None, 2016),
    ]
    (corpus / "D18-1256.tei.xml").write_bytes(_add_entries(data, extra, "b900"))
    (root / "s2orc2020").mkdir()
    shutil.copy(FIXTURES / "readers" / "s2orc_2020" / "N10-1045.json", root / "s2orc2020")
    current = root / "current"
    (current / "s2orc").mkdir(parents=True)
    (current / "papers").mkdir()
    shutil.copy(FIXTURES / "references" / "s2orc_current.jsonl", current / "s2orc" / "part-0.jsonl")
    (current / "papers" / "papers.jsonl").write_text(json.dumps({"corpusid": 3001, "publicationdate": "2020-07-05"}) + "\n")
    entries = json.loads(json.loads((current / "s2orc" / "part-0.jsonl").read_text())["content"]["annotations"]["bibentry"])
    text = json.loads((current / "s2orc" / "part-0.jsonl").read_text())["content"]["text"]
    titles = {"b0": "Extracting semantic relations for scholarly knowledge base construction",
              "b1": "Algorithms for scoring coreference chains"}
    assert all(titles[e["attributes"]["id"]] in text[e["start"]:e["end"]] for e in entries[:2])
    body = "A paper of the corpus that others cite; its text only needs to be long enough to be kept. " * 4
    cited = [("2001", titles["b0"], "2018"), ("2002", titles["b1"], "1998"),
             ("moses-2007", "Moses: Open Source Toolkit for Statistical Machine Translation", "2007")]
    (root / "jsonl").mkdir()
    (root / "jsonl" / "cited.jsonl").write_text("".join(
        json.dumps({"paper_id": pid, "title": title, "pub_date": year,
                    "sections": [{"heading": "Abstract", "paragraphs": [body]}]}) + "\n" for pid, title, year in cited))
    config = load_config(REPO_ROOT / "conf" / "sample.yaml", [f"tables.root={root / 'tables'}", f"inputs.0.path={corpus}"])
    config.inputs = [*config.inputs,
                     InputConfig(name="aclsum", format="s2orc_2020", path=str(root / "s2orc2020")),
                     InputConfig(name="current", format="s2orc_current", path=str(current / "s2orc"),
                                 metadata_path=str(current / "papers")),
                     InputConfig(name="cited", format="jsonl", path=str(root / "jsonl"))]
    summaries = {stage: run_stage(spark, config, stage) for stage in ("ingest", "segment", "citations")}
    from deltalake import DeltaTable

    tables = {name: DeltaTable(str(root / "tables" / name)).to_pandas() for name in ("papers", "sentences", "references")}
    return summaries, tables, {"own": own_title, "cited": cited_title}


@pytest.mark.spark
@pytest.mark.slow
def test_citations_resolve_by_id_and_title_and_mark_self_and_duplicates(citations_run):
    summaries, tables, titles = citations_run
    refs = tables["references"].set_index(["paper_id", "entry_id"])
    papers = tables["papers"]
    assert len(refs) == sum(len(b["entries"]) for b in papers.bibliography if b is not None)
    assert summaries["citations"]["papers_by_bibliography_problem"]["format_without_bibliography"] == 3  # the JSONL papers
    d18 = refs.loc["D18-1256"]
    key = lambda t: re.sub(r"[^\w]+", " ", (t or "").lower()).replace("_", " ").strip()  # noqa: E731
    # Independently: every entry of the four papers whose title equals a corpus paper's title within a year.
    corpus = {key(t): (pid, d.year) for pid, t, d in zip(papers.paper_id, papers.title, papers.pub_date)}
    ids = set(papers.paper_id)
    expected = {}
    for pid, bibliography in zip(papers.paper_id, papers.bibliography):
        for entry in (bibliography["entries"] if bibliography is not None else []):
            if any(entry[k] in ids for k in ("acl_id", "s2_id", "doi", "arxiv_id")):
                continue  # resolved by id first
            hit = corpus.get(key(entry["title"]))
            if hit and entry["title"] and len(key(entry["title"]).split()) >= 3 and hit[0] != pid \
                    and (entry["year"] is None or abs(entry["year"] - hit[1]) <= 1):
                expected[(pid, entry["entry_id"])] = hit[0]
    by_title = refs[refs.resolved_by == "title_year"]
    assert dict(zip(by_title.index, by_title.resolved_paper_id)) == expected and len(expected) >= 3
    assert d18.loc["b902"].resolved_paper_id == "D16-1066" and d18.loc["b902"].resolved_by == "acl_id"
    assert d18.loc["b901"].resolution_status == "self_citation" and d18.loc["b901"].resolved_paper_id is None
    assert d18.loc["b903"].resolution_status == "no_usable_title"
    first = d18[(d18.resolved_paper_id == "D17-1259") & d18.duplicate_of.isna()]
    assert len(first) == 1 and d18.loc["b900"].duplicate_of == first.index[0]
    assert summaries["citations"]["duplicate_entries"] == int(refs.duplicate_of.notna().sum()) >= 1
    # S2ORC: the current release's matched corpus ids, and a 2020-shape entry by its title and year.
    assert [(refs.loc[("3001", e)].resolved_paper_id, refs.loc[("3001", e)].resolved_by) for e in ("b0", "b1")] == \
        [("2001", "s2_id"), ("2002", "s2_id")]
    assert (refs.loc[("N10-1045", "BIBREF3")].resolved_paper_id, refs.loc[("N10-1045", "BIBREF3")].resolved_by) == \
        ("moses-2007", "title_year")


@pytest.mark.spark
@pytest.mark.slow
def test_each_mention_lands_in_the_sentence_that_holds_it(citations_run):
    summaries, tables, _ = citations_run
    sentences = tables["sentences"].set_index("sentence_id")
    refs = tables["references"]
    papers = tables["papers"].set_index("paper_id")
    outcome = summaries["citations"]["mentions_by_outcome"]
    n_mentions = sum(len(b["mentions"]) for b in papers.bibliography if b is not None)
    assert sum(outcome.values()) == summaries["citations"]["mentions"] == n_mentions
    assert outcome["in_sentence"] == sum(len(ids) for ids in refs.mention_sentence_ids) > 50
    n_headings = 0
    for paper_id, bibliography in papers.bibliography.dropna().items():
        assert {m["entry_id"] for m in bibliography["mentions"]} - {None} <= set(refs[refs.paper_id == paper_id].entry_id)
        # Each entry's mention sections: the headings of its mentions' sections, in text order.
        headings = [s["heading"] for s in papers.sections[paper_id]]
        for entry in refs[refs.paper_id == paper_id].itertuples():
            expected = [headings[m["section_idx"]] for m in bibliography["mentions"]
                        if m["entry_id"] == entry.entry_id and m["section_idx"] is not None
                        and headings[m["section_idx"]] is not None]
            assert list(entry.mention_sections) == expected
            n_headings += len(expected)
        for mention in bibliography["mentions"]:
            if mention["entry_id"] is None:
                continue
            para = papers.sections[paper_id][mention["section_idx"]]["paragraphs"][mention["para_idx"]]
            row = refs[(refs.paper_id == paper_id) & (refs.entry_id == mention["entry_id"])].iloc[0]
            holders = [sentences.loc[s] for s in row.mention_sentence_ids]
            # The marker's first characters lie inside one of the entry's mention sentences.
            assert any(h.section_idx == mention["section_idx"] and h.para_idx == mention["para_idx"]
                       and h.char_start <= mention["char_offset"] < h.char_end
                       and para[h.char_start:h.char_end] == h.text for h in holders)
    assert n_headings > 50
    added = refs[(refs.paper_id == "D18-1256") & (refs.entry_id == "b900")].iloc[0]
    assert added.mention_count == 1 and "(Again, 2017)" in sentences.loc[added.mention_sentence_ids[0]].text
