"""Mine query-gold pairs: consecutive sentences whose second sentence opens with a lexicon marker.

Pairs are formed in the JVM (a window over each paragraph), a JVM pre-filter keeps the pairs whose
second sentence opens with some marker (one regex over a trie of the markers), and the Aho-Corasick matching and the
cutting rules (``ratio_spark.lexicon.matcher``) run over Arrow batches with ``mapInArrow``, the automaton
built once on the driver and broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ratio_spark.core.schema import TABLES, Reason
from ratio_spark.lexicon.loader import Lexicon
from ratio_spark.lexicon.matcher import PairCutter, cut_original
from ratio_spark.pipeline.pairs import consecutive_pairs
from ratio_spark.pipeline.tables import drop_rows

if TYPE_CHECKING:  # the Python workers import this module for the Arrow batches: keep pydantic out of it
    from ratio_spark.core.config import MiningConfig

# ---------------------------------------------------------------------------------------------
# Pairs and matching
# ---------------------------------------------------------------------------------------------

_MATCH_FIELDS = [
    T.StructField("role", T.StringType()),
    T.StructField("move", T.StringType()),
    T.StructField("category", T.StringType()),
    T.StructField("marker", T.StringType()),
    T.StructField("marker_entry", T.StringType()),
    T.StructField("marker_source", T.StringType()),
    T.StructField("query_cut", T.StringType()),
    T.StructField("query_cut_original", T.StringType()),
    T.StructField("gold_cut", T.StringType()),
    T.StructField("gold_cut_original", T.StringType()),
    T.StructField("drop_reason", T.StringType()),
]


def pairs_for_mining(sentences: DataFrame) -> DataFrame:
    """Sentence i and i+1 of the same paragraph (``pairs.consecutive_pairs``), named as mining uses them."""
    return consecutive_pairs(sentences).select(
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
    }
    return {reason: pattern for reason, pattern in by_reason.items() if pattern}


def pair_cutter(lexicon: Lexicon, config: MiningConfig) -> PairCutter:
    """The ``PairCutter`` of the ``mining:`` configuration (built on the driver, then broadcast)."""
    return PairCutter(
        lexicon, require_comma=config.require_comma, max_extension_words=config.max_extension_words,
        min_chars=config.min_chars, query_clause_words=config.query_opening_clause_words,
        citation_patterns=citation_patterns(config),
    )


def prefilter(pairs: DataFrame, cutter: PairCutter) -> DataFrame:
    """Keep pairs whose second sentence opens with some marker at a word boundary, perhaps after an ordinal
    (a JVM regex over a trie of the markers), so only likely matches cross into Python; ``PairCutter``
    applies the full rules."""
    return pairs.filter(F.col("second_norm").rlike(cutter.opening_regex()))


_PAIR_INPUTS = ("query_norm", "query_original", "query_flag", "second_norm", "second_original", "second_flag")


def cut_pair(cutter: PairCutter, query_norm: str | None, query_original: str | None, query_flag: str | None,
             second_norm: str | None, second_original: str | None, second_flag: str | None) -> list | None:
    """One consecutive pair -> the values of ``_MATCH_FIELDS``, or None when no marker opens the second sentence."""
    second = second_norm or ""
    found = cutter.match(second)
    if found is None:
        return None
    marker = found.marker
    gold = cutter.strip_ordinal(second[found.rest_start:])
    removed_from_second = second[: len(second) - len(gold)] if second.endswith(gold) else second[: found.rest_start]
    query_norm = query_norm or ""
    query = cutter.strip_query_opening(query_norm)
    removed_from_query = query_norm[: len(query_norm) - len(query)] if query_norm.endswith(query) else ""
    drop = None
    if second_flag is not None or (marker.is_move and query_flag is not None):
        drop = Reason.MALFORMED_SENTENCE
    elif citation := cutter.citation(*((query, gold) if marker.is_move else (gold,))):
        drop = citation
    elif marker.is_move and len(query) < cutter.min_chars:
        drop = Reason.SHORT_QUERY
    elif len(gold) < cutter.min_chars:
        drop = Reason.SHORT_GOLD
    query_cut_original = cut_original(query_original, removed_from_query)
    return [
        marker.role,
        marker.label if marker.is_move else None,
        None if marker.is_move else marker.label,
        found.text,
        marker.text,
        marker.source,
        query,
        query_cut_original if query_cut_original is not None else query_original,
        gold,
        cut_original(second_original, removed_from_second),
        drop,
    ]


def _cut_batch(cutter: PairCutter, batch: pa.RecordBatch) -> list[list]:
    """``cut_pair`` over an Arrow batch, column by column (the values of ``_MATCH_FIELDS``, None where no match)."""
    columns = [batch.column(name).to_pylist() for name in _PAIR_INPUTS]
    out: list[list] = [[] for _ in _MATCH_FIELDS]
    empty = [None] * len(_MATCH_FIELDS)
    for values in zip(*columns):
        row = cut_pair(cutter, *values) or empty
        for column, value in zip(out, row):
            column.append(value)
    return out


def match_markers(pairs: DataFrame, cutter: PairCutter, spark: SparkSession) -> DataFrame:
    """Apply the broadcast automaton to Arrow batches of pairs; adds the _MATCH_FIELDS columns."""
    broadcast = spark.sparkContext.broadcast(cutter)
    out_schema = T.StructType(pairs.schema.fields + _MATCH_FIELDS)
    arrow_fields = [pa.field(f.name, pa.string()) for f in _MATCH_FIELDS]

    def run(batches):
        local = broadcast.value
        for batch in batches:
            values = _cut_batch(local, batch)
            arrays = batch.columns + [pa.array(v, type=pa.string()) for v in values]
            yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(list(batch.schema) + arrow_fields))

    return pairs.mapInArrow(run, out_schema)


def pairs_examined(sentences: DataFrame) -> dict[int | None, int]:
    """Publication year -> consecutive pairs of ``sentences``: what ``Mining.examined`` counts (``stats_mining``)."""
    return {r["year"]: r["count"] for r in pairs_for_mining(sentences).groupBy(F.year("pub_date").alias("year")).count().collect()}


def pair_id_column() -> F.Column:
    return F.concat(F.lit("p"), F.substring(F.sha2(F.concat_ws("|", "query_sentence_id", "gold_sentence_id"), 256), 1, 16))


@dataclass
class Mining:
    """``scanned``: one row per consecutive pair, its publication ``year`` and, when the pre-filter passes it,
    the pair's columns (``_pair``; null otherwise); ``examined``: (year, count) of the consecutive pairs the
    matcher looked at; ``matched`` and ``examined`` both read ``scanned``, so a stage that persists it forms
    the pairs (one shuffle of the sentences) once;
    ``matched``: every pair whose second sentence opens with a marker, with its ``drop_reason`` (null: kept) and
    its rank among the kept pairs of the same (query, gold) text; ``mined``: the ``mined_pairs`` rows;
    ``drops``: the matched pairs that are not rows, with their reason; ``displaced``: the pairs kept elsewhere
    (``mine_pairs``'s ``kept_elsewhere``) that a matched pair with a smaller pair id now makes duplicates. All
    lazy; ``mined`` and ``drops`` both read ``matched``, so a stage that persists ``matched`` runs the matching
    and the de-duplication once."""

    scanned: DataFrame
    examined: DataFrame
    matched: DataFrame
    mined: DataFrame
    drops: DataFrame
    displaced: DataFrame


DUPLICATE_OF = "same query and gold text as "  # the detail of a duplicate_pair drop, before the kept pair's id


def mine_pairs(spark: SparkSession, sentences: DataFrame, lexicon: Lexicon, config: MiningConfig,
               kept_elsewhere: DataFrame | None = None) -> Mining:
    """sentences -> pairs examined, matched pairs, ``mined_pairs`` rows (de-duplicated) and the drops.

    ``kept_elsewhere``: ``mined_pairs`` rows of papers that are not in ``sentences`` (an update mines only some
    papers). The duplicate rule ranks the matched pairs together with them, so a matched pair whose text one
    of them has with a smaller pair id is a duplicate of it, as in a mine of every paper at once.
    """
    cutter = pair_cutter(lexicon, config)
    pairs = pairs_for_mining(sentences)
    scanned = pairs.select(F.year("pub_date").alias("year"),
                           F.when(F.col("second_norm").rlike(cutter.opening_regex()), F.struct(*pairs.columns)).alias("_pair"))
    candidates = scanned.filter(F.col("_pair").isNotNull()).select("_pair.*")
    cut = match_markers(candidates, cutter, spark).filter(
        F.col("role").isNotNull()
    ).withColumn("pair_id", pair_id_column()).withColumn("_elsewhere", F.lit(False))
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
    examined = scanned.groupBy("year").count()
    return Mining(scanned=scanned, examined=examined, matched=matched, mined=mined.select(*TABLES["mined_pairs"].column_names),
                  drops=drops, displaced=displaced)


def papers_sharing_texts(mined_pairs: DataFrame, drops: DataFrame, texts: DataFrame) -> DataFrame:
    """The papers (``paper_id``) with a kept pair, or a ``duplicate_pair`` drop, of one of ``texts``
    (``query_text``, ``gold_text``): mining them again with the papers of ``texts`` re-ranks every pair of
    those texts. A drop records the gold text only, so a drop of the same gold with another query counts too
    (more papers than needed, never fewer)."""
    kept = mined_pairs.join(texts, ["query_text", "gold_text"], "left_semi").select("paper_id")
    duplicates = drops.filter(F.col("reason") == Reason.DUPLICATE_PAIR).join(
        texts.select(F.col("gold_text").alias("text")).distinct(), "text", "left_semi").select("paper_id")
    return kept.unionByName(duplicates).distinct()
