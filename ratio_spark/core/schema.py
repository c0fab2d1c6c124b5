"""The project's shared vocabulary: moves, splits, categories, the Delta tables and every drop reason.

Plain data, no pyspark: the Spark half writes what is declared here, the Python half reads it, and
``docs/tables.md`` is generated from it (``ratio_spark.pipeline.stages.table_catalogue``).

* ``MOVES``, ``SPLITS``, ``DISTRACTOR_CATEGORIES``, ``MARKER_SOURCES``, ``ROLES``: the closed sets of values.
* ``TABLES``: every table the pipeline writes, with its columns (name, Spark type, one-line meaning).
  A stage that writes a column not listed here, or misses one, fails (``pipeline/runner.py``).
* ``Reason``: every code a stage may write when it rejects, drops or flags a row. A new reason is one
  line in that class: its code, the stage that uses it, what it removes and what it means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# --------------------------------------------------------------------------------------------- values

MOVES = ("address", "broaden", "specify")
# In time order: the cross-split rule in ``pipeline/pools.py`` keeps a text in the earliest split.
SPLITS = ("train", "validation", "test")
# Words an extendable connective may take before its comma ("to address this problem,"; the released benchmark
# allows 3): mining.max_extension_words and the lexicon tools default to it.
DEFAULT_MAX_EXTENSION_WORDS = 3
DISTRACTOR_CATEGORIES = ("contrast", "similarity", "continuation", "inference", "other")
MARKER_SOURCES = ("manual", "extension", "llm", "pattern")  # how a lexicon marker was found
ROLES = ("move", "distractor")  # a marker opens a query-gold pair of a move, or a distractor


# --------------------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark's simpleString: string, int, bigint, double, date, array<string>, struct<...>
    meaning: str


@dataclass(frozen=True)
class Table:
    name: str
    one_row_per: str
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def ddl(self) -> str:
        """``"paper_id string, pub_date date, ..."``: a schema Spark's ``createDataFrame`` accepts."""
        return ", ".join(f"{c.name} {c.type}" for c in self.columns)


def _table(name: str, one_row_per: str, columns: str, partition_by: tuple[str, ...] = ()) -> Table:
    """A table from one ``name | type | meaning`` line per column (the catalogue below stays readable)."""
    parsed = []
    for line in columns.strip().splitlines():
        column, type_, meaning = (part.strip() for part in line.split("|", 2))
        parsed.append(Column(column, type_, meaning))
    return Table(name, one_row_per, tuple(parsed), partition_by)


SECTIONS_TYPE = "array<struct<heading:string,paragraphs:array<string>>>"
# A paper's bibliography as the readers parse it (ratio_spark.pipeline.ingest.bibliography): its entries and
# the in-text mentions of them; the citations stage turns it into the `references` table.
BIBLIOGRAPHY_TYPE = (
    "struct<entries:array<struct<entry_id:string,title:string,authors:array<string>,year:int,venue:string,"
    "doi:string,arxiv_id:string,acl_id:string,s2_id:string,pmid:string>>,"
    "mentions:array<struct<entry_id:string,section_idx:int,para_idx:int,char_offset:int>>,problem:string>"
)

_TABLES = [
    _table("papers", "accepted paper", f"""
        paper_id | string | the corpus's id (ACL Anthology id, S2ORC corpusid, a JATS article's DOI, the JSONL paper_id)
        pub_date | date | publication date (first of the month or year when less precise)
        date_precision | string | day, month or year
        date_source | string | the date rule that gave pub_date (tei_header_when, anthology_id, ...)
        title | string | the title, whitespace collapsed
        sections | {SECTIONS_TYPE} | sections in reading order, the abstract first; paragraphs cleaned
        bibliography | {BIBLIOGRAPHY_TYPE} | bibliography entries and in-text mentions (null: the format has none)
        license | string | the paper's licence: an SPDX id for Creative Commons (CC-BY-4.0, CC0-1.0), else as the source states it (null: not stated; docs/formats.md)
        source_format | string | tei, jats, s2orc_2020, s2orc_current or jsonl
        source_path | string | the file (and tar member or line) the paper came from
    """),
    _table("rejects", "input record that could not be used (ingest's drops)", """
        source_path | string | the file (and tar member or line) of the record
        source_format | string | the reader that saw it
        paper_id | string | the paper id, when the reader found one
        reason | string | a code of Reason (stage ingest)
        detail | string | what exactly was wrong, readable
    """),
    _table("sentences", "sentence of a paper, in reading order", """
        sentence_id | string | paper_id:section_idx:para_idx:sent_idx, stable across reruns
        paper_id | string | the paper
        pub_date | date | the paper's date
        section_idx | int | position of the section in the paper
        section_heading | string | the section's heading, if any
        para_idx | int | position of the paragraph in the section
        sent_idx | int | position of the sentence in the paragraph
        char_start | int | first character of the sentence in the paragraph
        char_end | int | one past the last character
        text | string | the sentence as written
        norm_text | string | the paper's B.1 normalisation (lowercase, cleaned)
        norm_flag | string | why the sentence cannot be used (a Reason of stage segment), or null: flagged sentences are kept
    """),
    _table("references", "bibliography entry of a paper (the citations stage; docs/inspire.md)", """
        paper_id | string | the citing paper
        pub_date | date | the citing paper's date
        entry_idx | int | position of the entry in the paper's bibliography
        entry_id | string | the entry's id in the paper (TEI xml:id, S2ORC BIBREF id)
        title | string | the entry's title, as parsed
        authors | array<string> | the entry's authors, as parsed
        year | int | the entry's year
        venue | string | the entry's venue
        doi | string | DOI, when given
        arxiv_id | string | arXiv id, when given
        acl_id | string | ACL Anthology id, when given
        s2_id | string | Semantic Scholar / S2ORC id, when given
        pmid | string | PubMed id, when given (jats)
        mention_count | bigint | in-text mentions of the entry
        mention_sentence_ids | array<string> | sentences holding a mention, in text order
        mention_sections | array<string> | section headings of those mentions
        resolved_paper_id | string | the corpus paper it cites (null: unresolved)
        resolved_pub_date | date | that paper's date
        resolved_by | string | acl_id, s2_id, doi, arxiv_id or title_year
        resolution_status | string | resolved, self_citation, ambiguous_title, no_usable_title or no_match
        duplicate_of | string | an earlier entry of the same paper that resolves to the same paper
    """),
    _table("mined_pairs", "consecutive pair whose second sentence opens with a lexicon marker", """
        pair_id | string | p + 16 hex of the two sentence ids: stable across reruns
        paper_id | string | the paper
        pub_date | date | the paper's date
        role | string | move (a query-gold pair) or distractor (the second sentence is a distractor)
        move | string | address, broaden or specify (role move)
        category | string | contrast, similarity, continuation, inference or other (role distractor)
        marker | string | the matched text, extension included, normalised
        marker_entry | string | the lexicon entry (the prefix of an extension)
        marker_source | string | manual, extension, llm or pattern
        lexicon_version | string | the lexicon folder's name
        query_sentence_id | string | the first sentence
        gold_sentence_id | string | the second sentence
        context_text | string | the sentence before the query, normalised
        query_text | string | the first sentence, normalised, leading discourse marker removed
        query_text_original | string | the same, as written
        gold_text | string | the second sentence, normalised, marker and ordinal removed
        gold_text_original | string | the same, as written
    """),
    _table("stats_mining", "publication year", """
        lexicon_version | string | the lexicon mined with
        year | int | publication year (null: undated)
        pairs_examined | bigint | consecutive sentence pairs the matcher looked at
    """),
    _table("queries", "benchmark query", """
        split | string | train, validation or test
        move | string | address, broaden or specify
        query_id | string | q + 16 hex of (split, move, query text, gold text)
        query_text | string | normalised query sentence
        query_text_original | string | the query as written
        context_text | string | the sentence before the query
        gold_candidate_id | string | the gold sentence in the split's pool
        marker | string | the matched marker
        marker_entry | string | its lexicon entry
        paper_id | string | the paper
        pub_date | date | the paper's date
        pair_id | string | the mined pair it came from
        exclude_candidate_ids | array<string> | pool candidates to skip when scoring: the query's own text
    """, partition_by=("split",)),
    _table("candidates", "sentence in a split's shared pool", """
        split | string | train, validation or test
        candidate_id | string | c + 16 hex of (split, normalised text)
        text | string | normalised sentence
        text_original | string | the sentence as written
        source | string | gold_<move> or distractor_<category>
        gold_moves | array<string> | the moves for which this text is a gold in the split
        paper_id | string | the paper
        pub_date | date | the paper's date
    """, partition_by=("split",)),
    _table("stats_split_sizes", "(split, group, label): the shape of the paper's Table 5", """
        split | string | train, validation or test
        group | string | move, distractor or total
        label | string | the move or category (total: total)
        queries | bigint | queries of the move
        sentences | bigint | pool sentences of that source
    """),
    _table("stats_marker_matches", "marker entry: the data side of Table 4", """
        role | string | move or distractor
        label | string | the move or category
        marker_source | string | manual, extension, llm or pattern
        marker_entry | string | the lexicon entry
        pairs | bigint | mined pairs it matched
        papers | bigint | papers with such a pair
        marker_variants | bigint | distinct matched texts (extensions of an extendable entry)
    """),
    _table("stats_marker_sources", "(role, label, marker source), plus all: Table 4's data columns", """
        role | string | move or distractor
        label | string | the move or category
        marker_source | string | manual, extension, llm, pattern or all
        markers_matched | bigint | markers with at least one match
        pairs | bigint | mined pairs
    """),
    _table("stats_yield", "(role, label), plus (move, all): pairs per 1,000 consecutive pairs", """
        role | string | move or distractor
        label | string | the move or category (all: every move)
        pairs_mined | bigint | mined_pairs rows
        pairs | bigint | distinct (query, gold) texts
        consecutive_pairs_examined | bigint | from stats_mining
        pairs_per_1000 | double | pairs per 1,000 pairs examined
    """),
    _table("drops", "row a stage removed (ingest's are in rejects)", """
        stage | string | the stage that removed it
        reason | string | a code of Reason
        item | string | what was removed: paper, pair, query or candidate (Reason.item)
        item_id | string | its id: paper_id or pair_id
        paper_id | string | the paper it came from
        split | string | its split (pools), else null
        role | string | move or distractor (pairs), else null
        text | string | the removed text (the gold or candidate sentence, the query, the title)
        detail | string | what exactly happened, readable
    """, partition_by=("stage",)),
    _table("stats_drops", "(stage, reason): rows rejected or dropped", """
        stage | string | the stage
        reason | string | a code of Reason
        item | string | what was removed (Reason.item)
        rows | bigint | how many
    """, partition_by=("stage",)),
    _table("releases", "release of the living benchmark (`ratio-spark update`, docs/platform.md)", """
        release | int | 0 for the benchmark before its first update, then one per update
        created_at | timestamp | when the update finished (UTC)
        inputs | string | the folder or glob the update read
        papers_new | bigint | papers inserted
        papers_changed | bigint | papers whose content changed (updated, re-segmented)
        papers_unchanged | bigint | papers of the inputs already in the benchmark as they are (skipped)
        table_versions | map<string,bigint> | each table's Delta version: read it back with versionAsOf
        counts | string | JSON: rows per table, queries per split/move, pool sentences per split
        diff | string | JSON: new queries per split/move, pool growth per split, rows per table, since the previous release
    """),
]
TABLES: dict[str, Table] = {t.name: t for t in _TABLES}


# --------------------------------------------------------------------------------------------- reasons


@dataclass(frozen=True)
class DropReason:
    code: str
    stage: str  # the stage that writes it
    item: str  # what it removes: record, paper, pair, query, candidate; sentence for a flag
    meaning: str
    kept: bool = False  # a flag: the row stays in the output, marked (sentences.norm_flag)


REASONS: dict[str, DropReason] = {}


def _reason(code: str, stage: str, item: str, meaning: str, kept: bool = False) -> str:
    if code in REASONS:
        raise ValueError(f"reason {code!r} is declared twice")
    REASONS[code] = DropReason(code, stage, item, meaning, kept)
    return code


class Reason:
    """Every code a stage writes when it rejects, drops or flags a row (datatrove-style: a filter says why).

    Ingest's go to ``rejects``; the other stages' to ``drops`` (``TABLES``); both are counted in
    ``stats_drops``. A new reason is one line here; the runner refuses a code a stage has not declared.
    """

    # ingest: an input record that is not a paper (table rejects)
    EMPTY_FILE = _reason("empty_file", "ingest", "record", "the file is zero bytes, a per-file input holds only whitespace, or a tar archive holds no file")
    UNREADABLE_FILE = _reason("unreadable_file", "ingest", "record", "a compressed file or tar archive (or member) that is corrupt or not what its name says")
    TRUNCATED_FILE = _reason("truncated_file", "ingest", "record", "a compressed file or tar archive that ends early (line files and archives keep the records before the cut); jats: an XML file that ends before its root element closes")
    UNSUPPORTED_COMPRESSION = _reason("unsupported_compression", "ingest", "record", "a .zst, .lz4, .snappy, .br, .zip, .7z or .rar file")
    FILE_TOO_LARGE = _reason("file_too_large", "ingest", "record", "a file read whole that is over 2 GiB (Spark's binaryFile limit)")
    UNDECODABLE_BYTES = _reason("undecodable_bytes", "ingest", "record", "not valid UTF-8 (decoded strictly)")
    MALFORMED_XML = _reason("malformed_xml", "ingest", "record", "tei, jats: the XML parser fails")
    MALFORMED_JSON = _reason("malformed_json", "ingest", "record", "not JSON, or an s2orc_current annotation that is not JSON")
    UNEXPECTED_SHAPE = _reason("unexpected_shape", "ingest", "record", "valid JSON or XML of the wrong shape, or a reader exception")
    MISSING_ID = _reason("missing_id", "ingest", "record", "no paper id (tei: no file name)")
    MISSING_DATE = _reason("missing_date", "ingest", "record", "no rule gives a date and the record has no date value")
    UNPARSEABLE_DATE = _reason("unparseable_date", "ingest", "record", "a date value that no rule can read")
    DATE_OUT_OF_RANGE = _reason("date_out_of_range", "ingest", "record", "the dates fall outside ingest.min_year..max_year")
    EMPTY_BODY = _reason("empty_body", "ingest", "record", "abstract and body shorter than ingest.min_body_chars")
    MISSING_METADATA = _reason("missing_metadata", "ingest", "record", "s2orc_current: no row for the corpusid in the papers dataset")
    EXCLUDED_BY_PATH_RULE = _reason("excluded_by_path_rule", "ingest", "record", "the path matches the input's exclude_path_regex")
    NOT_JATS = _reason("not_jats", "ingest", "record", "jats: the unit is not a JATS article (another XML root such as TEI or HTML, or not XML at all)")
    NO_BODY = _reason("no_body", "ingest", "record", "jats: the article has no <body> (metadata or abstract only)")
    BODY_WITHOUT_PROSE = _reason("body_without_prose", "ingest", "record", "jats: the <body> holds figures, tables, formulae or supplementary material but no paragraph")
    DUPLICATE_PAPER_ID = _reason("duplicate_paper_id", "ingest", "record", "another record already has this paper id (the earlier input wins)")

    # segment: a paper that comes out with no sentence (table drops); flags on kept sentences (norm_flag)
    NO_PARAGRAPHS = _reason("no_paragraphs", "segment", "paper", "the paper has no paragraph text to segment")
    NO_SENTENCES_DETECTED = _reason("no_sentences_detected", "segment", "paper", "the sentence detector found no sentence in any paragraph")
    EMPTY_AFTER_CLEANING = _reason("empty_after_cleaning", "segment", "sentence", "the normalised text is empty", kept=True)
    MALFORMED_FEW_LETTERS = _reason("malformed_few_letters", "segment", "sentence", "fewer letters than segment.min_letters_ratio of the text", kept=True)

    # mine: a pair that opens with a marker but does not become a mined_pairs row
    MALFORMED_SENTENCE = _reason("malformed_sentence", "mine", "pair", "the gold (or a move's query) sentence is flagged by segment")
    SHORT_QUERY = _reason("short_query", "mine", "pair", "the query is shorter than mining.min_chars after cutting")
    SHORT_GOLD = _reason("short_gold", "mine", "pair", "the gold is shorter than mining.min_chars after cutting")
    # One reason per pattern family of mining.citation_filter (docs/mining.md): the query or gold, as cut,
    # contains a citation, so it would not read on its own (the released benchmark's noise removal).
    CITATION_ET_AL = _reason("citation_et_al", "mine", "pair", "a parenthesis containing \"et al.\" in the query or gold")
    CITATION_AUTHOR_YEAR = _reason("citation_author_year", "mine", "pair", "an author-year parenthesis in the query or gold")
    CITATION_BRACKETS = _reason("citation_brackets", "mine", "pair", "square brackets with a digit or \"et al.\" in the query or gold")
    CITATION_EMPTY_BRACKETS = _reason("citation_empty_brackets", "mine", "pair", "\"[]\" (a citation the PDF lost) in the query or gold")
    CITATION_PLACEHOLDERS = _reason("citation_placeholders", "mine", "pair",
                                    "a citation placeholder (\"[\\cite=key]\", \"{{cite:key}}\", \"<cit>\") in the query or gold")
    CITATION_FORMULA_PLACEHOLDERS = _reason("citation_formula_placeholders", "mine", "pair",
                                            "a formula placeholder (\"[formula]\", \"[math]\") in the query or gold")
    DUPLICATE_PAIR = _reason("duplicate_pair", "mine", "pair", "the same (query, gold) text as a pair with a smaller pair_id")

    # pools: splits (a pair outside every split), then the pool rules of pipeline/pools.py in order
    MISSING_PUB_DATE = _reason("missing_pub_date", "pools", "pair", "the pair's paper has no date, so no split")
    PUB_DATE_OUTSIDE_SPLITS = _reason("pub_date_outside_splits", "pools", "pair", "the paper's date is in no split's range")
    MISSING_LABEL = _reason("missing_label", "pools", "pair", "no move (role move) or no category (role distractor)")
    EMPTY_TEXT = _reason("empty_text", "pools", "pair", "the query or the gold text is empty")
    QUERY_EQUALS_GOLD = _reason("query_equals_gold", "pools", "pair", "the query and the gold are the same text")
    GOLD_SEEN_IN_EARLIER_SPLIT = _reason("gold_seen_in_earlier_split", "pools", "pair", "the gold text occurs in an earlier split")
    QUERY_SEEN_IN_EARLIER_SPLIT = _reason("query_seen_in_earlier_split", "pools", "query", "the query text occurs in an earlier split (its gold stays in the pool)")
    DUPLICATE_QUERY = _reason("duplicate_query", "pools", "query", "the same (split, move, query, gold) as a query with a smaller pair_id")
    DISTRACTOR_SEEN_IN_EARLIER_SPLIT = _reason("distractor_seen_in_earlier_split", "pools", "candidate", "the distractor text occurs in an earlier split")
    DISTRACTOR_IS_GOLD = _reason("distractor_is_gold", "pools", "candidate", "the distractor text is a gold of the split: the gold is kept")
    DUPLICATE_GOLD = _reason("duplicate_gold", "pools", "candidate", "the gold text is already a candidate of the split (merged)")
    DUPLICATE_DISTRACTOR = _reason("duplicate_distractor", "pools", "candidate", "the distractor text is already a candidate of the split (merged)")


def reasons_of(stage: str, kept: bool = False) -> tuple[str, ...]:
    """The codes a stage may write: its drops (``kept=False``) or its flags (``kept=True``)."""
    return tuple(r.code for r in REASONS.values() if r.stage == stage and r.kept == kept)


# --------------------------------------------------------------------------------------------- settings types

# The types of every settings field and command-line choice that names a move, a split or a dense prefix mode
# (pydantic reads a Literal; argparse reads the tuple as its ``choices``).
MoveName = Literal[MOVES]
SplitName = Literal[SPLITS]
# How a dense retriever prefixes queries and candidates: nothing, the generic "query: "/"passage: ", the
# model's own recommended prompts, or a per-move instruction (evaluation/retrieval/dense.py).
PREFIX_MODES = ("none", "generic", "recommended", "instructions")
PrefixMode = Literal[PREFIX_MODES]
