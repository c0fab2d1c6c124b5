"""Mine query-gold pairs: consecutive sentences whose second sentence opens with a lexicon marker.

Pairs are formed where the sentences are read, in reading order (``ordered_pairs``: no shuffle of the texts;
the few pairs a file split cuts are formed from the splits' edges), or, for a table not in reading order, by
a window over each paragraph (one shuffle of every sentence). A JVM pre-filter marks the sentences that some
marker may open (one regex over a trie of the markers), the Aho-Corasick automaton
(``ratio_spark.lexicon.matcher``, built once on the driver and broadcast) finds the marker in Arrow batches
with ``mapInArrow``, and the cutting rules and drops run in the JVM as Spark SQL expressions (``cut_pairs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ratio_spark.core.schema import TABLES, Reason
from ratio_spark.lexicon.loader import Lexicon
from ratio_spark.lexicon.matcher import SPACE_CHARACTERS, CutPatterns, PairCutter, cut_patterns
from ratio_spark.pipeline.ordered_pairs import BLOCK, KINDS, OPENS, PAIR_FIELDS, PARAGRAPH_KEY, SENTENCE_FIELDS, stream_partition
from ratio_spark.pipeline.pairs import consecutive_pairs
from ratio_spark.pipeline.tables import drop_rows, in_predicate

if TYPE_CHECKING:  # the Python workers import this module for the Arrow batches: keep pydantic out of it
    from ratio_spark.pipeline.settings import MiningConfig

# ---------------------------------------------------------------------------------------------
# Pairs and matching
# ---------------------------------------------------------------------------------------------

# What the automaton adds to a pair (role is null where no marker opens the second sentence):
# the entry's fields, the matched marker text, where the gold starts after the marker and its comma,
# and where the query's content starts after a marker and its comma that open it (null: none does).
_MARKER_ATTRIBUTES = ("role", "move", "category", "marker_entry", "marker_source")
_MATCH_FIELDS = [
    *(T.StructField(name, T.StringType()) for name in _MARKER_ATTRIBUTES),
    T.StructField("marker", T.StringType()),
    T.StructField("gold_start", T.IntegerType()),
    T.StructField("query_start", T.IntegerType()),
]
# What the rules add: the cut texts and the drop reason (null: kept).
CUT_COLUMNS = ("query_cut", "query_cut_original", "gold_cut", "gold_cut_original", "drop_reason")
# A matched pair as the de-duplication and the outputs read it (``Mining.matched``, without its rank).
MATCHED_COLUMNS = ("paper_id", "pub_date", "query_sentence_id", "gold_sentence_id", "context_text",
                   "role", "move", "category", "marker", "marker_entry", "marker_source", *CUT_COLUMNS)


def pairs_for_mining(sentences: DataFrame) -> DataFrame:
    """Sentence i and i+1 of the same paragraph (``pairs.consecutive_pairs``), named as mining uses them."""
    return _named_for_mining(consecutive_pairs(sentences))


def _named_for_mining(pairs: DataFrame) -> DataFrame:
    return pairs.select(
        "paper_id", "pub_date",
        F.col("first_sentence_id").alias("query_sentence_id"),
        F.col("first_text").alias("query_original"),
        F.col("first_norm_text").alias("query_norm"),
        F.col("first_norm_flag").alias("query_flag"),
        F.col("context_norm_text").alias("context_text"),
        F.col("second_sentence_id").alias("gold_sentence_id"),
        F.col("second_text").alias("second_original"),
        F.col("second_norm_text").alias("second_norm"),
        F.col("second_norm_flag").alias("second_flag"),
    )


def citation_patterns(config: MiningConfig) -> dict[str, str]:
    """The citation filter's pattern families that are on, keyed by their drop reason, in order."""
    families = config.citation_filter
    if not families.enabled:
        return {}
    by_reason = {
        Reason.CITATION_ET_AL: families.et_al,
        Reason.CITATION_AUTHOR_YEAR: families.author_year,
        Reason.CITATION_BRACKETS: families.brackets,
        Reason.CITATION_EMPTY_BRACKETS: families.empty_brackets,
        Reason.CITATION_PLACEHOLDERS: families.placeholders,
        Reason.CITATION_FORMULA_PLACEHOLDERS: families.formula_placeholders,
    }
    return {reason: pattern for reason, pattern in by_reason.items() if pattern}


def java_citation_patterns(spark: SparkSession, config: MiningConfig) -> dict[str, str]:
    """``citation_patterns`` as the JVM reads them: Java regexes with Unicode character classes (``(?U)``:
    ``\\w``, ``\\d``, ``\\b`` as in Python), each checked on the driver so that a pattern Java cannot read fails at
    start-up naming its key."""
    from ratio_spark.core.config import ConfigError

    patterns = {}
    names = {reason: reason.removeprefix("citation_") for reason in citation_patterns(config)}
    for reason, pattern in citation_patterns(config).items():
        java = "(?U)" + pattern
        try:
            spark.sparkContext._jvm.java.util.regex.Pattern.compile(java)
        except Exception as exc:  # py4j wraps the PatternSyntaxException
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"mining.citation_filter.{names[reason]}: not a regular expression Java reads "
                              f"({message}): {pattern!r}") from None
        patterns[reason] = java
    return patterns


def pair_cutter(lexicon: Lexicon, config: MiningConfig) -> PairCutter:
    """The ``PairCutter`` of the ``mining:`` configuration (built on the driver, then broadcast)."""
    return PairCutter(lexicon, require_comma=config.require_comma, max_extension_words=config.max_extension_words)


def prefilter(pairs: DataFrame, cutter: PairCutter) -> DataFrame:
    """Keep pairs whose second sentence opens with some marker at a word boundary, perhaps after an ordinal
    (a JVM regex over a trie of the markers), so only likely matches cross into Python; ``PairCutter``
    applies the full rules."""
    return pairs.filter(F.col("second_norm").rlike(cutter.opening_regex()))


def _match_batch(cutter: PairCutter, attributes: dict[str, pa.Array], batch: pa.RecordBatch) -> list[pa.Array]:
    """The automaton over one Arrow batch: the ``_MATCH_FIELDS`` arrays (the entry's fields taken by index)."""
    indices, markers, gold_starts, query_starts = [], [], [], []
    for second, query in zip(batch.column("second_norm").to_pylist(), batch.column("query_norm").to_pylist()):
        found = cutter.match(second) if second else None
        if found is None:
            indices.append(None), markers.append(None), gold_starts.append(None), query_starts.append(None)
            continue
        opening = cutter.match(query) if query else None
        indices.append(found.index), markers.append(found.text), gold_starts.append(found.rest_start)
        query_starts.append(opening.rest_start if opening is not None and opening.rest_start < len(query) else None)
    index = pa.array(indices, pa.int32())
    return [*(attributes[name].take(index) for name in _MARKER_ATTRIBUTES), pa.array(markers, pa.string()),
            pa.array(gold_starts, pa.int32()), pa.array(query_starts, pa.int32())]


def marker_attributes(cutter: PairCutter) -> dict[str, pa.Array]:
    """Each marker's ``_MARKER_ATTRIBUTES``, in the automaton's order."""
    markers = cutter.markers
    return {name: pa.array(values, pa.string()) for name, values in {
        "role": [m.role for m in markers],
        "move": [m.label if m.is_move else None for m in markers],
        "category": [None if m.is_move else m.label for m in markers],
        "marker_entry": [m.text for m in markers],
        "marker_source": [m.source for m in markers],
    }.items()}


def match_markers(pairs: DataFrame, cutter: PairCutter, spark: SparkSession) -> DataFrame:
    """Apply the broadcast automaton to Arrow batches of pairs; adds the _MATCH_FIELDS columns."""
    broadcast = spark.sparkContext.broadcast(cutter)
    out_schema = T.StructType(pairs.schema.fields + _MATCH_FIELDS)
    arrow_fields = [pa.field(f.name, pa.string() if f.dataType == T.StringType() else pa.int32()) for f in _MATCH_FIELDS]

    def run(batches):
        local = broadcast.value
        attributes = marker_attributes(local)
        for batch in batches:
            arrays = batch.columns + _match_batch(local, attributes, batch)
            yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(list(batch.schema) + arrow_fields))

    return pairs.mapInArrow(run, out_schema)


# ---------------------------------------------------------------------------------------------
# Pairs in reading order (``ordered_pairs``), or by a shuffle
# ---------------------------------------------------------------------------------------------

# Past these, a table is taken to be out of reading order and its pairs are formed by the shuffle: the edges
# and heads of a scan (collected on the driver), and the papers read again to place their heads.
MAX_LOOSE_ROWS = 100_000
MAX_PAPERS_READ_AGAIN = 1_000

_SCAN_FIELDS = [
    T.StructField("_kind", T.StringType()), T.StructField("year", T.IntegerType()), T.StructField("n", T.LongType()),
    T.StructField("at_block_start", T.BooleanType()),
    T.StructField("paper_id", T.StringType()), T.StructField("pub_date", T.DateType()),
    *(T.StructField(name, T.StringType()) for name in PAIR_FIELDS[2:]),
    *_MATCH_FIELDS,
    *(T.StructField(name, T.IntegerType()) for name in ("section_idx", "para_idx", "sent_idx")),
    *(T.StructField(name, T.StringType()) for name in ("sentence_id", "text", "norm_text", "norm_flag")),
]
_ARROW_TYPES = {"string": pa.string(), "integer": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(), "date": pa.date32()}


def _scan_in_order(sentences: DataFrame, cutter: PairCutter, spark: SparkSession) -> DataFrame:
    """One pass over the sentences as read (``ordered_pairs.PairStream``), the automaton applied to the complete
    pairs whose second sentence passes the pre-filter. Rows by ``_kind``: ``pair`` (a pair a marker opens, with
    the ``_MATCH_FIELDS``), ``count`` (``n`` complete pairs of a ``year``), ``edge`` (a sentence), ``head``."""
    frame = sentences.select(
        *[c for c in SENTENCE_FIELDS if c != "year"], F.year("pub_date").alias("year"),
        F.coalesce(F.col("norm_text").rlike(cutter.opening_regex()), F.lit(False)).alias(OPENS),
        F.xxhash64(F.input_file_name(), F.input_file_block_start()).alias(BLOCK),
    )
    schema = T.StructType(_SCAN_FIELDS)
    arrow_schema = pa.schema([pa.field(f.name, _ARROW_TYPES[f.dataType.typeName()]) for f in _SCAN_FIELDS])
    broadcast = spark.sparkContext.broadcast(cutter)

    def run(batches):
        local = broadcast.value
        attributes = marker_attributes(local)

        def rows(kind: str, n: int, columns: dict) -> pa.RecordBatch:
            given = {"_kind": pa.array([kind] * n, pa.string()), **columns}
            return pa.RecordBatch.from_arrays(
                [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type) for f in arrow_schema],
                schema=arrow_schema)

        def emit(pairs, counts, edges, heads):
            if pairs.num_rows:
                found = dict(zip([f.name for f in _MATCH_FIELDS], _match_batch(local, attributes, pairs)))
                opening = pc.is_valid(found["role"])
                if pc.any(opening).as_py():
                    kept = pairs.filter(opening)
                    yield rows("pair", kept.num_rows, {**{c: kept.column(c).combine_chunks() for c in kept.column_names},
                                                       **{k: v.filter(opening) for k, v in found.items()}})
            if counts:
                yield rows("count", len(counts), {"year": pa.array(list(counts), pa.int32()),
                                                  "n": pa.array(list(counts.values()), pa.int64())})
            for kind, table in (("edge", edges), ("head", heads)):
                if table.num_rows:
                    yield rows(kind, table.num_rows, {c: table.column(c).combine_chunks() for c in table.column_names})

        yield from stream_partition(batches, emit)

    return frame.mapInArrow(run, schema)


@dataclass
class _Pairs:
    """What mining reads of the consecutive pairs: ``scanned`` (the pass to persist), ``examined`` (year,
    count) and ``opening`` (the pairs a marker opens, with the ``_MATCH_FIELDS``); ``how``: in words."""

    scanned: DataFrame
    examined: DataFrame
    opening: DataFrame
    how: str


def _pairs_by_shuffle(sentences: DataFrame, cutter: PairCutter, spark: SparkSession, why: str) -> _Pairs:
    """The pairs by a window over each paragraph (one shuffle of every sentence; lazy), pre-filtered, matched."""
    pairs = pairs_for_mining(sentences)
    scanned = pairs.select(F.year("pub_date").alias("year"),
                           F.when(F.col("second_norm").rlike(cutter.opening_regex()), F.struct(*pairs.columns)).alias("_pair"))
    candidates = scanned.filter(F.col("_pair").isNotNull()).select("_pair.*")
    opening = match_markers(candidates, cutter, spark).filter(F.col("role").isNotNull())
    return _Pairs(scanned, scanned.groupBy("year").count(), opening, f"pairs formed by a shuffle ({why})")


def _pairs_in_order(sentences: DataFrame, cutter: PairCutter, spark: SparkSession) -> _Pairs:
    """The pairs of one pass in reading order (persisted: this runs it), and the pairs it left out (those whose
    second sentence is a head or follows one) formed by the window from the edges, or from the papers read
    again where an edge is missing. Falls back to the shuffle when the table is out of order."""
    from pyspark import StorageLevel

    scan = _scan_in_order(sentences, cutter, spark).persist(StorageLevel.MEMORY_AND_DISK)
    loose = scan.filter(F.col("_kind").isin("edge", "head")).select("_kind", *PARAGRAPH_KEY, "sent_idx", "at_block_start")
    if loose.count() > MAX_LOOSE_ROWS:  # (a count runs every split at once; a limit would run them a few at a time)
        scan.unpersist()
        return _pairs_by_shuffle(sentences, cutter, spark, f"over {MAX_LOOSE_ROWS:,} sentences out of reading order")
    loose = loose.collect()
    edges = {(r.paper_id, r.section_idx, r.para_idx, r.sent_idx) for r in loose if r._kind == "edge"}
    seconds, read_again = set(), set()
    for head in (r for r in loose if r._kind == "head"):
        key = (head.paper_id, head.section_idx, head.para_idx)
        if not head.at_block_start:  # out of order within a split: its predecessor is not among the edges
            read_again.add(head.paper_id)
        for second in (head.sent_idx, head.sent_idx + 1):
            seconds.add((*key, second))
            if any(i >= 0 and (*key, i) not in edges for i in (second - 1, second - 2)):
                read_again.add(head.paper_id)
    if len(read_again) > MAX_PAPERS_READ_AGAIN:
        scan.unpersist()
        return _pairs_by_shuffle(sentences, cutter, spark, f"{len(read_again):,} papers out of reading order")

    by_kind = {kind: scan.filter(F.col("_kind") == kind) for kind in KINDS}
    examined = by_kind["count"].groupBy("year").agg(F.sum("n").alias("count"))
    opening = by_kind["pair"].select(*PAIR_FIELDS, *(f.name for f in _MATCH_FIELDS))
    how = "pairs formed in reading order"
    if seconds:
        columns = [c for c in SENTENCE_FIELDS if c != "year"]
        rows = by_kind["edge"].select(*columns)
        if read_again:
            rows = rows.unionByName(sentences.filter(in_predicate("paper_id", sorted(read_again))).select(*columns))
        wanted = spark.createDataFrame(sorted(seconds), "paper_id string, section_idx int, para_idx int, second_sent_idx int")
        left_out = _named_for_mining(consecutive_pairs(rows.dropDuplicates([*PARAGRAPH_KEY, "sent_idx"])).join(
            F.broadcast(wanted), [*PARAGRAPH_KEY, "second_sent_idx"], "left_semi"))
        examined = examined.unionByName(left_out.groupBy(F.year("pub_date").alias("year")).count()).groupBy("year").agg(
            F.sum("count").alias("count"))
        opening = opening.unionByName(match_markers(prefilter(left_out, cutter), cutter, spark)
                                      .filter(F.col("role").isNotNull()).select(*opening.columns))
        how += (f" ({len(seconds):,} pair(s) across file splits formed from their edges"
                + (f", {len(read_again):,} paper(s) read again" if read_again else "") + ")")
    return _Pairs(scan, examined, opening, how)


# ---------------------------------------------------------------------------------------------
# The cutting rules and the drops, as Spark SQL expressions
# ---------------------------------------------------------------------------------------------

def _after(text: Column, removed: Column) -> Column:
    """``text`` without its first ``removed`` characters."""
    return text.substr(removed + 1, F.lit(2**31 - 1))


def _trim(function: str, text: Column) -> Column:
    """``ltrim``/``rtrim`` of ``text`` by every ``str.isspace`` character. (Spark's two-argument form takes the
    characters first.)"""
    return F.call_function(function, F.lit(SPACE_CHARACTERS), text)


def _strip_opening_comma(text: Column) -> Column:
    r"""``text`` without its leading spaces, one comma after them and the spaces after that, and its trailing
    spaces: the regex ``^\s*,?\s*|\s+$`` (Python's ``\s``) with trim functions, which run ~4x faster."""
    leading = _trim("ltrim", text)
    after_comma = F.when(leading.startswith(","), _after(leading, F.lit(1))).otherwise(leading)
    return _trim("rtrim", _trim("ltrim", after_comma))


def _matched_length(text: Column, pattern: str) -> Column:
    """The length of the match of ``pattern`` (anchored at the start) in ``text``; 0 where it does not match."""
    return F.length(F.regexp_extract(text, f"({pattern})", 1))


def _steps(frame: DataFrame, *steps: tuple[str, Column]) -> DataFrame:
    """``frame`` with each (name, column) added in turn: each intermediate value a column of its own, so the
    JVM computes it once however often the next steps read it."""
    for name, column in steps:
        frame = frame.withColumn(name, column)
    return frame


def _cut_at(text: str, length: str) -> Column:
    """Column ``text`` without its first ``length`` characters, when that is some but not all of it; else null."""
    return F.when((F.col(length) > 0) & (F.col(length) < F.length(text)), _after(F.col(text), F.col(length)))


def _gold_rule(frame: DataFrame, patterns: CutPatterns) -> DataFrame:
    """Rule 2 (``gold_cut``): the rest of the second sentence after the marker, with a list prefix and then an
    ordinal removed, twice (a second round only when the first removed something)."""
    def round_(source: str, target: str) -> list[tuple[str, Column]]:
        steps = [(f"{target}_l", F.regexp_replace(F.col(source), patterns.list_prefix, ""))]
        if patterns.ordinal is None:
            return steps + [(target, F.col(f"{target}_l"))]
        return steps + [(f"{target}_n", _matched_length(F.col(f"{target}_l"), patterns.ordinal)),
                        (target, F.coalesce(_cut_at(f"{target}_l", f"{target}_n"), F.col(f"{target}_l")))]

    frame = _steps(frame, ("_g0", _after(F.col("second_norm"), F.col("gold_start"))), *round_("_g0", "_g1"))
    frame = _steps(frame, ("_g2", F.when(F.col("_g1") == F.col("_g0"), F.col("_g1"))))  # unchanged: done
    second = round_("_g1", "_g3")
    frame = _steps(frame, *[(name, F.when(F.col("_g2").isNull(), column)) for name, column in second])
    frame = frame.withColumn("gold_cut", F.trim(F.coalesce("_g2", "_g3")))
    return frame.drop(*[c for c in frame.columns if c.startswith(("_g0", "_g1", "_g2", "_g3"))])


def _query_rule(frame: DataFrame, patterns: CutPatterns) -> DataFrame:
    """Rule 3 (``query_cut``): the first sentence after the marker that opens it (``query_start``, from the
    automaton), or else after an opening ordinal and its comma, or else after a short opening clause."""
    steps: list[tuple[str, Column]] = [("_q", F.coalesce(F.col("query_norm"), F.lit("")))]
    cuts = [F.trim(_after(F.col("_q"), F.col("query_start")))]  # null where no marker opens the query
    for name, pattern in (("_qo", patterns.ordinal_comma), ("_qc", patterns.opening_clause)):
        if pattern is not None:
            done = F.col("query_start").isNotNull()
            if name == "_qc" and patterns.ordinal_comma is not None:  # the ordinal cut, where it applies, wins
                done = done | ((F.col("_qo") > 0) & (F.col("_qo") < F.length("_q")))
            steps.append((name, F.when(~done, _matched_length(F.col("_q"), pattern))))
            cuts.append(F.trim(_cut_at("_q", name)))
    frame = _steps(frame, *steps, ("query_cut", F.coalesce(*cuts, F.col("_q"))))
    return frame.drop(*[name for name, _ in steps if name != "_q"])


def _original_rule(frame: DataFrame, original: str, normalised: str, cut: str, otherwise: Column, patterns: CutPatterns,
                   target: str) -> DataFrame:
    """``target``: the original text (column ``original``) without the words that the cut removed from its
    normalised text (column ``normalised`` minus its suffix ``cut``, or ``otherwise`` when ``cut`` is not a
    suffix), or null where the words do not align.

    The original keeps case, citations and spacing, so the words are found one after the other,
    case-insensitively, separated by spaces or commas, after an optional list marker ("(1) For example, we"),
    with one comma after them. Most originals spell the words exactly as the normalised text, case aside:
    a string comparison finds them. The rest need a pattern per row: the words, each quoted (``\\Q...\\E``:
    normalised text is lowercase, so it never holds ``\\E``), after the list marker or, failing that, at the start."""
    space = patterns.space
    removed = F.when(F.endswith(F.col(normalised), F.col(cut)),
                     F.col(normalised).substr(F.lit(1), F.length(normalised) - F.length(cut))).otherwise(otherwise)
    words_text = F.trim(F.regexp_replace(F.col("_o_removed"), "[ ,]+", " "))
    last_word_end = F.length(F.regexp_replace(F.col("_o_removed"), "[ ,]+$", ""))
    lead = F.length(F.regexp_extract(F.col(original), f"(?iu)({patterns.leading_list})", 1))
    quoted = F.array_join(F.transform(F.split(F.col("_o_words"), " "), lambda word: F.concat(F.lit("\\Q"), word, F.lit("\\E"))),
                          f"(?:{space}|,)+")
    pattern = F.concat(F.lit(f"(?iu)^({space}*"), quoted, F.lit(")"))
    spelled = F.call_function("regexp_extract", F.col(original), pattern, F.lit(1))
    after_lead = F.call_function("regexp_extract", _after(F.col(original), F.col("_o_lead")), pattern, F.lit(1))
    frame = _steps(
        frame,
        ("_o_removed", removed),
        ("_o_words", words_text),
        ("_o_lead", lead),
        ("_o_end", F.when(F.col("_o_words") == "", F.lit(0))
                    # the common case: no list marker, and the original opens with the normalised words
                    .when((F.col("_o_lead") == 0) & ~F.col("_o_removed").startswith(" ") & ~F.col("_o_removed").startswith(",")
                          & (F.lower(F.col(original).substr(F.lit(1), last_word_end))
                                                     == F.col("_o_removed").substr(F.lit(1), last_word_end)), last_word_end)),
        ("_o_after_lead", F.when(F.col("_o_end").isNull() & (F.col("_o_lead") > 0), F.length(after_lead))),
        ("_o_at_start", F.when(F.col("_o_end").isNull() & F.coalesce(F.col("_o_after_lead") == 0, F.lit(True)),
                               F.length(spelled))),
    )
    end = F.coalesce(F.col("_o_end"), F.when(F.col("_o_after_lead") > 0, F.col("_o_lead") + F.col("_o_after_lead")),
                     F.when(F.col("_o_at_start") > 0, F.col("_o_at_start")))
    rest = _strip_opening_comma(_after(F.col(original), end))
    frame = frame.withColumn(target, F.when(F.col("_o_words") == "", _trim("rtrim", _trim("ltrim", F.col(original))))
                                      .otherwise(rest))
    return frame.drop("_o_removed", "_o_words", "_o_lead", "_o_end", "_o_after_lead", "_o_at_start")


def cut_pairs(matched: DataFrame, patterns: CutPatterns, citations: dict[str, str], min_chars: int) -> DataFrame:
    """Rules 2-4 over pairs the automaton matched (``match_markers``, role not null), in the JVM: adds
    ``CUT_COLUMNS``. ``patterns``: ``cut_patterns(..., engine="java")``; ``citations``: drop reason -> Java
    regex (``citation_patterns``), checked in order."""
    cut = _query_rule(_gold_rule(matched, patterns), patterns)
    cut = _original_rule(cut, "second_original", "second_norm", "gold_cut",
                         F.col("second_norm").substr(F.lit(1), F.col("gold_start")), patterns, "gold_cut_original")
    cut = _original_rule(cut, "query_original", "_q", "query_cut", F.lit(""), patterns, "_query_cut_original")
    is_move = F.col("role") == "move"
    drop = F.when(F.col("second_flag").isNotNull() | (is_move & F.col("query_flag").isNotNull()), Reason.MALFORMED_SENTENCE)
    if citations:  # one search for any family first: most texts hold no citation
        any_citation = "|".join(f"(?:{pattern})" for pattern in citations.values())
        cut = _steps(cut, ("_c", F.col("gold_cut").rlike(any_citation) | (is_move & F.col("query_cut").rlike(any_citation))))
        for reason, pattern in citations.items():
            drop = drop.when(F.col("_c") & (F.col("gold_cut").rlike(pattern) | (is_move & F.col("query_cut").rlike(pattern))), reason)
    drop = (drop.when(is_move & (F.length("query_cut") < min_chars), Reason.SHORT_QUERY)
                .when(F.length("gold_cut") < min_chars, Reason.SHORT_GOLD))
    return (cut.withColumn("query_cut_original", F.coalesce(F.col("_query_cut_original"), F.col("query_original")))
               .withColumn("drop_reason", drop)
               .drop("_query_cut_original", "_q", "_c"))


def pairs_examined(sentences: DataFrame) -> dict[int | None, int]:
    """Publication year -> consecutive pairs of ``sentences``: what ``Mining.examined`` counts (``stats_mining``)."""
    return {r["year"]: r["count"] for r in pairs_for_mining(sentences).groupBy(F.year("pub_date").alias("year")).count().collect()}


def pair_id_column() -> F.Column:
    return F.concat(F.lit("p"), F.substring(F.sha2(F.concat_ws("|", "query_sentence_id", "gold_sentence_id"), 256), 1, 16))


@dataclass
class Mining:
    """``scanned``: the pass over the sentences that forms the pairs (in reading order: persisted already; by the
    shuffle: one row per consecutive pair, its ``year`` and, when the pre-filter passes it, the pair's columns);
    ``examined``: (year, count) of the consecutive pairs the matcher looked at; ``matched`` and ``examined``
    both read ``scanned``, so a stage that persists it forms the pairs once; ``pairing``: how, in words;
    ``matched``: every pair whose second sentence opens with a marker, with its ``drop_reason`` (null: kept) and
    its rank among the kept pairs of the same (query, gold) text; ``mined``: the ``mined_pairs`` rows;
    ``drops``: the matched pairs that are not rows, with their reason; ``displaced``: the pairs kept elsewhere
    (``mine_pairs``'s ``kept_elsewhere``) that a matched pair with a smaller pair id now makes duplicates. All
    lazy but a ``scanned`` in reading order; ``mined`` and ``drops`` both read ``matched``, so a stage that
    persists ``matched`` runs the matching and the de-duplication once."""

    scanned: DataFrame
    examined: DataFrame
    matched: DataFrame
    mined: DataFrame
    drops: DataFrame
    displaced: DataFrame
    pairing: str = ""


DUPLICATE_OF = "same query and gold text as "  # the detail of a duplicate_pair drop, before the kept pair's id


def mine_pairs(spark: SparkSession, sentences: DataFrame, lexicon: Lexicon, config: MiningConfig,
               kept_elsewhere: DataFrame | None = None, in_order: bool = True) -> Mining:
    """sentences -> pairs examined, matched pairs, ``mined_pairs`` rows (de-duplicated) and the drops.

    ``kept_elsewhere``: ``mined_pairs`` rows of papers that are not in ``sentences`` (an update mines only some
    papers). The duplicate rule ranks the matched pairs together with them, so a matched pair whose text one
    of them has with a smaller pair id is a duplicate of it, as in a mine of every paper at once.

    ``in_order``: form the pairs in reading order (one pass over the sentences, run here and persisted in
    ``scanned``), falling back to the shuffle for a table out of order; False: by the shuffle (lazy).
    """
    cutter = pair_cutter(lexicon, config)
    pairs = _pairs_in_order(sentences, cutter, spark) if in_order else _pairs_by_shuffle(sentences, cutter, spark, "asked")
    cut = cut_pairs(pairs.opening, cut_patterns(lexicon, config.query_opening_clause_words),
                    java_citation_patterns(spark, config), config.min_chars)
    # Only what the rows and drops need goes on to the de-duplication window (and its shuffle).
    cut = cut.select(*MATCHED_COLUMNS).withColumn("pair_id", pair_id_column()).withColumn("_elsewhere", F.lit(False))
    kept = F.col("drop_reason").isNull()
    if kept_elsewhere is not None:  # only those sharing a text with a matched pair can rank with one
        texts = cut.filter(kept).select("query_cut", "gold_cut").distinct()
        elsewhere = kept_elsewhere.select(F.col("query_text").alias("query_cut"), F.col("gold_text").alias("gold_cut"),
                                          "pair_id").join(texts, ["query_cut", "gold_cut"], "left_semi")
        cut = cut.unionByName(elsewhere.withColumn("_elsewhere", F.lit(True)), allowMissingColumns=True)
    # De-duplicate on (query, gold): the smallest pair id is kept, so reruns keep the same row. One window
    # (one shuffle) over all matched pairs: a dropped pair ranks only among pairs with its own drop reason,
    # and its rank is not used.
    first = Window.partitionBy("drop_reason", "query_cut", "gold_cut").orderBy("pair_id")
    ranked = cut.withColumn("_n", F.row_number().over(first)).withColumn("_first_pair_id", F.first("pair_id").over(first))
    matched = ranked.filter(~F.col("_elsewhere"))
    mined = matched.filter(kept & (F.col("_n") == 1)).select(
        "pair_id", "paper_id", "pub_date", "role", "move", "category", "marker", "marker_entry", "marker_source",
        F.lit(lexicon.version).alias("lexicon_version"),
        "query_sentence_id", "gold_sentence_id", "context_text",
        F.col("query_cut").alias("query_text"),
        F.col("query_cut_original").alias("query_text_original"),
        F.col("gold_cut").alias("gold_text"),
        F.col("gold_cut_original").alias("gold_text_original"),
    )
    marker = F.concat(F.lit("marker '"), F.col("marker"), F.lit("'; query: "), F.col("query_cut"))
    duplicate = F.concat(F.lit(DUPLICATE_OF), F.col("_first_pair_id"))
    drops = drop_rows(
        matched.filter(~kept | (F.col("_n") > 1)), F.coalesce("drop_reason", F.lit(Reason.DUPLICATE_PAIR)), "pair_id",
        role="role", text="gold_cut", detail=F.when(kept, duplicate).otherwise(marker),
    )
    displaced = ranked.filter(F.col("_elsewhere") & (F.col("_n") > 1)).select("pair_id", "_first_pair_id")
    return Mining(scanned=pairs.scanned, examined=pairs.examined, matched=matched,
                  mined=mined.select(*TABLES["mined_pairs"].column_names), drops=drops, displaced=displaced, pairing=pairs.how)


def papers_sharing_texts(mined_pairs: DataFrame, drops: DataFrame, texts: DataFrame) -> DataFrame:
    """The papers (``paper_id``) with a kept pair, or a ``duplicate_pair`` drop, of one of ``texts``
    (``query_text``, ``gold_text``): mining them again with the papers of ``texts`` re-ranks every pair of
    those texts. A drop records the gold text only, so a drop of the same gold with another query counts too
    (more papers than needed, never fewer)."""
    kept = mined_pairs.join(texts, ["query_text", "gold_text"], "left_semi").select("paper_id")
    duplicates = drops.filter(F.col("reason") == Reason.DUPLICATE_PAIR).join(
        texts.select(F.col("gold_text").alias("text")).distinct(), "text", "left_semi").select("paper_id")
    return kept.unionByName(duplicates).distinct()
