"""Mine query-gold pairs: consecutive sentences whose second sentence opens with a lexicon marker.

Pairs are formed where the sentences are read, in reading order (``ordered_pairs``: no shuffle of the texts;
the few pairs a file split cuts are formed from the splits' edges), or, for a table not in reading order, by
a window over each paragraph (one shuffle of every sentence). In one Python pass (Arrow batches, ``mapInArrow``)
a pre-filter marks the sentences that some marker may open (one regex over a trie of the markers; the shuffle
runs it in the JVM, so that its cache holds only those pairs' texts), the Aho-Corasick automaton finds the
marker, and the cutting rules and drops cut the pair
(``ratio_spark.lexicon.matcher.PairRules``, built once on the driver and broadcast), so only the pairs a marker
opens come back to the JVM, cut, for the de-duplication and the writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ratio_spark.core.schema import TABLES, Reason
from ratio_spark.core.text import python_strings
from ratio_spark.lexicon.loader import Lexicon
from ratio_spark.lexicon.matcher import MARKER_FIELDS, PairCutter, PairRules, cut_patterns, marker_fields
from ratio_spark.pipeline.ordered_pairs import (
    BLOCK,
    FILE_COLUMNS,
    OPENS,
    PARAGRAPH_KEY,
    SENTENCE_FIELDS,
    file_batches,
    stream_partition,
)
from ratio_spark.pipeline.pairs import consecutive_pairs
from ratio_spark.pipeline.tables import drop_rows, in_predicate

if TYPE_CHECKING:  # the Python workers import this module for the Arrow batches: keep pydantic out of it
    from ratio_spark.pipeline.settings import MiningConfig

# ---------------------------------------------------------------------------------------------
# Pairs and matching
# ---------------------------------------------------------------------------------------------

# What the rules add to a pair a marker opens: the entry's fields, the matched marker text, the cut texts and the
# drop reason (null: kept).
CUT_COLUMNS = ("query_cut", "query_cut_original", "gold_cut", "gold_cut_original", "drop_reason")
_RULE_FIELDS = [T.StructField(name, T.StringType()) for name in (*MARKER_FIELDS, "marker", *CUT_COLUMNS)]
# What the rules read of a pair.
_RULE_INPUTS = ("query_norm", "query_original", "query_flag", "second_norm", "second_original", "second_flag")
# A matched pair as the de-duplication and the outputs read it (``Mining.matched``, without its rank).
MATCHED_COLUMNS = ("paper_id", "pub_date", "query_sentence_id", "gold_sentence_id", "context_text",
                   "role", "move", "category", "marker", "marker_entry", "marker_source", *CUT_COLUMNS)


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
        Reason.CITATION_PLACEHOLDERS: families.placeholders,
        Reason.CITATION_FORMULA_PLACEHOLDERS: families.formula_placeholders,
    }
    return {reason: pattern for reason, pattern in by_reason.items() if pattern}


def pair_cutter(lexicon: Lexicon, config: MiningConfig) -> PairCutter:
    """The ``PairCutter`` of the ``mining:`` configuration (built on the driver, then broadcast)."""
    return PairCutter(lexicon, require_comma=config.require_comma, max_extension_words=config.max_extension_words)


def pair_rules(lexicon: Lexicon, config: MiningConfig) -> PairRules:
    """The ``PairRules`` (rules 1-4) of the ``mining:`` configuration (built on the driver, then broadcast)."""
    return PairRules(pair_cutter(lexicon, config), cut_patterns(lexicon, config.query_opening_clause_words),
                     citation_patterns(config), config.min_chars)


def may_open_in_jvm(column: str, cutter: PairCutter) -> F.Column:
    """``PairCutter.may_open`` as a JVM regex over ``column`` (Java's ``\\w`` is ASCII-only, so a few
    non-boundaries pass; ``PairCutter.match`` decides): where the texts are not in Python yet, so only likely
    matches cross into Python. The pass in reading order holds them already and runs ``may_open_column`` instead
    (RE2 over the batch, then Python's ``re``): Java's regex over a trie of 18,613 markers took ~7x as long as over
    v1's (docs/performance.md)."""
    return F.col(column).rlike(cutter.opening_regex())


def _cut_batch(rules: PairRules, attributes: dict[str, pa.Array], batch: pa.RecordBatch | pa.Table
               ) -> tuple[pa.Array, list[pa.Array]]:
    """Rules 1-4 over one Arrow batch of pairs: a mask of the pairs a marker opens, and the ``_RULE_FIELDS``
    arrays of those pairs (the entry's fields taken by index)."""
    opens, indices, columns = [], [], [[] for _ in range(1 + len(CUT_COLUMNS))]
    for values in zip(*(python_strings(batch.column(name)) for name in _RULE_INPUTS)):
        cut = rules.cut(*values)
        opens.append(cut is not None)
        if cut is not None:
            indices.append(cut.found.index)
            for column, value in zip(columns, (cut.found.text, cut.query_cut, cut.query_cut_original, cut.gold_cut,
                                               cut.gold_cut_original, cut.drop_reason)):
                column.append(value)
    index = pa.array(indices, pa.int32())
    return pa.array(opens, pa.bool_()), [*(attributes[name].take(index) for name in MARKER_FIELDS),
                                         *(pa.array(column, pa.string()) for column in columns)]


def marker_attributes(cutter: PairCutter) -> dict[str, pa.Array]:
    """Each marker's ``MARKER_FIELDS``, in the automaton's order."""
    columns = zip(*map(marker_fields, cutter.markers))
    return {name: pa.array(values, pa.string()) for name, values in zip(MARKER_FIELDS, columns)}


def cut_matched(pairs: DataFrame, rules: PairRules, spark: SparkSession) -> DataFrame:
    """The pairs a marker opens, cut: the broadcast rules over Arrow batches of ``pairs`` (with the
    ``_RULE_INPUTS`` columns); adds the ``_RULE_FIELDS`` columns."""
    broadcast = spark.sparkContext.broadcast(rules)
    out_schema = T.StructType(pairs.schema.fields + _RULE_FIELDS)
    arrow_fields = [pa.field(f.name, pa.string()) for f in _RULE_FIELDS]

    def run(batches):
        local = broadcast.value
        attributes = marker_attributes(local.cutter)
        for batch in batches:
            opens, arrays = _cut_batch(local, attributes, batch)
            yield pa.RecordBatch.from_arrays([c.filter(opens) for c in batch.columns] + arrays,
                                             schema=pa.schema(list(batch.schema) + arrow_fields))

    return pairs.mapInArrow(run, out_schema)


# ---------------------------------------------------------------------------------------------
# Pairs in reading order (``ordered_pairs``), or by a shuffle
# ---------------------------------------------------------------------------------------------

# Past these, a table is taken to be out of reading order and its pairs are formed by the shuffle: the edges
# and heads of a scan (collected on the driver), and the papers whose paragraphs are read again to place their heads.
MAX_LOOSE_ROWS = 100_000
MAX_PAPERS_READ_AGAIN = 1_000

_SCAN_FIELDS = [
    T.StructField("_kind", T.StringType()), T.StructField("year", T.IntegerType()), T.StructField("n", T.LongType()),
    T.StructField("at_block_start", T.BooleanType()),
    T.StructField("paper_id", T.StringType()), T.StructField("pub_date", T.DateType()),
    *(T.StructField(name, T.StringType()) for name in ("query_sentence_id", "gold_sentence_id", "context_text")),
    *_RULE_FIELDS,
    *(T.StructField(name, T.IntegerType()) for name in ("section_idx", "para_idx", "sent_idx")),
    *(T.StructField(name, T.StringType()) for name in ("sentence_id", "text", "norm_text", "norm_flag")),
]
_ARROW_TYPES = {"string": pa.string(), "integer": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(), "date": pa.date32()}


def _arrow_uri(path: str) -> str:
    """A Hadoop path as Spark names a file (``file:/a b/c``: not percent-encoded) -> a URI pyarrow parses."""
    from urllib.parse import quote, urlsplit

    parts = urlsplit(path)
    return f"{parts.scheme}:" + (f"//{parts.netloc}" if parts.netloc else "") + quote(parts.path)


def _snapshot(spark: SparkSession, table: str) -> tuple[int, dict, str] | None:
    """The version, metadata (``partitionColumns``, ``configuration``) and location (a Hadoop path) of the snapshot
    of the Delta table at ``table`` that Spark's reads of it see now, from Delta's log as Spark loaded it (no job).
    None where Delta's classes do not answer so (another Delta version): ``pieces_to_read`` then asks Spark."""
    import json

    try:
        log = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
        snapshot = log.unsafeVolatileSnapshot()
        return int(snapshot.version()), json.loads(snapshot.metadata().json())["metaData"], str(log.dataPath())
    except Exception:  # py4j's errors, a key missing: Delta's internals are not an API
        return None


def _files_of(version: int, location: str) -> list[str] | None:
    """The data files of version ``version`` of the Delta table at ``location`` (Hadoop paths), as ``deltalake``
    lists them from the log: ~0.1 s, where Spark computes a snapshot's file list in a job (~6 s the first time in a
    session, docs/performance.md). None where ``deltalake`` cannot read the table (a scheme or credentials only
    Hadoop knows) or a path is not a plain file name in the table's folder."""
    try:
        from deltalake import DeltaTable

        paths = pa.table(DeltaTable(location, version=version).get_add_actions(flatten=True)).column("path").to_pylist()
    except Exception:  # deltalake's errors have no common base
        return None
    if any(not path or "/" in path or "%" in path or ":" in path for path in paths):
        return None
    return [location.rstrip("/") + "/" + path for path in paths]


def pieces_to_read(spark: SparkSession, sentences: DataFrame, table: str) -> tuple[list[tuple[str, int, int]] | None, str]:
    """The Parquet files of the Delta table at ``table``, which ``sentences`` reads whole, cut into pieces as
    Spark's scan cuts them (``spark.sql.files.maxPartitionBytes``), for the Python workers to read themselves
    (``ordered_pairs.file_batches``): (URI, first byte, end byte). None, and why not, for a table whose files do
    not hold its rows as they are (deletion vectors, column mapping, partition columns) or that pyarrow cannot
    read here."""
    import pyarrow.parquet as pq
    from delta.tables import DeltaTable

    snapshot = _snapshot(spark, table)
    if snapshot is not None:
        version, metadata, location = snapshot
        partition_columns, properties = metadata.get("partitionColumns") or [], metadata.get("configuration") or {}
    else:
        detail = DeltaTable.forPath(spark, table).detail().select("partitionColumns", "properties").first()
        partition_columns, properties = detail["partitionColumns"], detail["properties"] or {}
    if partition_columns:
        return None, "the table has partition columns"
    if properties.get("delta.enableDeletionVectors", "false").lower() == "true":
        return None, "the table has deletion vectors"
    if properties.get("delta.columnMapping.mode", "none").lower() != "none":
        return None, "the table has column mapping"
    listed = _files_of(version, location) if snapshot is not None else None
    files = [_arrow_uri(path) for path in (listed if listed is not None else sentences.inputFiles())]
    if not files:
        return [], ""
    try:
        filesystem, path = pyarrow.fs.FileSystem.from_uri(files[0])
        infos = filesystem.get_file_info([pyarrow.fs.FileSystem.from_uri(f)[1] for f in files])
        if gone := [f for f, info in zip(files, infos) if info.type == pyarrow.fs.FileType.NotFound]:
            return None, f"{len(gone)} of its files not found ({gone[0]})"  # (Spark's scan then says which)
        with filesystem.open_input_file(path) as handle:
            names = set(pq.ParquetFile(handle).schema_arrow.names)
        sizes = [info.size for info in infos]
    except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
        return None, f"pyarrow cannot read {files[0]} here ({exc.__class__.__name__})"
    if missing := sorted(set(FILE_COLUMNS) - names):
        return None, f"{files[0]} has no column(s) {', '.join(missing)}"
    split = spark._jsparkSession.sessionState().conf().filesMaxPartitionBytes()
    return [(uri, start, start + split) for uri, size in zip(files, sizes) for start in range(0, max(size, 1), split)], ""


def _scan_in_order(sentences: DataFrame, rules: PairRules, spark: SparkSession,
                   pieces: list[tuple[str, int, int]] | None = None) -> DataFrame:
    """One pass over the sentences as read (``ordered_pairs.PairStream``), the rules applied to the complete
    pairs whose second sentence passes the pre-filter. Rows by ``_kind``: ``pair`` (a pair a marker opens, cut:
    ``MATCHED_COLUMNS``), ``count`` (``n`` complete pairs of a ``year``), ``edge`` (a sentence), ``head``.
    ``pieces``: of the Parquet files of ``sentences`` (``pieces_to_read``), read by the Python workers, one Spark
    partition each; None: Spark's scan reads the sentences."""
    if pieces is None:
        frame = sentences.select(
            *[c for c in SENTENCE_FIELDS if c != "year"], F.year("pub_date").alias("year"),
            F.xxhash64(F.input_file_name(), F.input_file_block_start()).alias(BLOCK),
        )
    else:
        frame = spark.range(0, len(pieces), 1, max(1, len(pieces)))  # row i, alone in its partition: pieces[i]
    schema = T.StructType(_SCAN_FIELDS)
    arrow_schema = pa.schema([pa.field(f.name, _ARROW_TYPES[f.dataType.typeName()]) for f in _SCAN_FIELDS])
    broadcast = spark.sparkContext.broadcast(rules)

    def run(batches):
        local = broadcast.value
        attributes = marker_attributes(local.cutter)

        def rows(kind: str, n: int, columns: dict) -> pa.RecordBatch:
            given = {"_kind": pa.array([kind] * n, pa.string()), **columns}
            return pa.RecordBatch.from_arrays(
                [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type) for f in arrow_schema],
                schema=arrow_schema)

        def emit(pairs, counts, edges, heads):
            if pairs.num_rows:
                opens, arrays = _cut_batch(local, attributes, pairs)
                if pc.any(opens).as_py():
                    kept = pairs.select(["paper_id", "pub_date", "query_sentence_id", "gold_sentence_id", "context_text"]
                                        ).filter(opens)
                    yield rows("pair", kept.num_rows, {**{c: kept.column(c).combine_chunks() for c in kept.column_names},
                                                       **dict(zip([f.name for f in _RULE_FIELDS], arrays))})
            if counts:
                yield rows("count", len(counts), {"year": pa.array(list(counts), pa.int32()),
                                                  "n": pa.array(list(counts.values()), pa.int64())})
            for kind, table in (("edge", edges), ("head", heads)):
                if table.num_rows:
                    yield rows(kind, table.num_rows, {c: table.column(c).combine_chunks() for c in table.column_names})

        def with_opens(batches):  # the pre-filter (``PairCutter.may_open_column``)
            for batch in (batches if pieces is None else file_batches(pieces, batches)):
                opens = local.cutter.may_open_column(batch.column("norm_text"))
                yield pa.RecordBatch.from_arrays([*batch.columns, opens], schema=batch.schema.append(pa.field(OPENS, pa.bool_())))

        yield from stream_partition(with_opens(batches), emit)

    return frame.mapInArrow(run, schema)


@dataclass
class _Pairs:
    """What mining reads of the consecutive pairs: ``scanned`` (the pass to persist), ``examined`` (year,
    count) and ``matched`` (the pairs a marker opens, cut: ``MATCHED_COLUMNS``); ``how``: in words."""

    scanned: DataFrame
    examined: DataFrame
    matched: DataFrame  # with ``with_keys``' columns
    how: str


def _pairs_by_shuffle(sentences: DataFrame, rules: PairRules, spark: SparkSession, why: str) -> _Pairs:
    """The pairs by a window over each paragraph (one shuffle of every sentence), pre-filtered, cut."""
    from pyspark import StorageLevel

    pairs = pairs_for_mining(sentences)
    scanned = pairs.select(F.year("pub_date").alias("year"),
                           F.when(may_open_in_jvm("second_norm", rules.cutter), F.struct(*pairs.columns)).alias("_pair"))
    scanned = scanned.persist(StorageLevel.MEMORY_AND_DISK)  # run by ``mine_pairs`` (the hashes' count)
    candidates = scanned.filter(F.col("_pair").isNotNull()).select("_pair.*")
    matched = with_keys(cut_matched(candidates, rules, spark).select(*MATCHED_COLUMNS))
    return _Pairs(scanned, scanned.groupBy("year").count(), matched, f"pairs formed by a shuffle ({why})")


def _pairs_in_order(sentences: DataFrame, rules: PairRules, spark: SparkSession, table: str | None) -> _Pairs:
    """The pairs of one pass in reading order (persisted: this runs it), and the few it left out (those whose
    second sentence is a head or follows one) formed and cut on the driver from the collected edges, or from the
    sentences of their paragraphs read again where an edge is missing. Falls back to the shuffle when the table
    is out of order. ``table``: see ``mine_pairs``."""
    from pyspark import StorageLevel

    pieces, not_read = pieces_to_read(spark, sentences, table) if table is not None else (None, "")
    scan = with_keys(_scan_in_order(sentences, rules, spark, pieces), F.col("_kind") == "pair"
                     ).persist(StorageLevel.MEMORY_AND_DISK)
    columns = [c for c in SENTENCE_FIELDS if c != "year"]
    loose = scan.filter(F.col("_kind").isin("edge", "head", "count")).select("_kind", "year", "n", "at_block_start", *columns)
    # (A count runs every split at once; a limit would run them a few at a time. The count rows are one per batch
    # and year: few.)
    if loose.filter(F.col("_kind") != "count").count() > MAX_LOOSE_ROWS:
        scan.unpersist()
        return _pairs_by_shuffle(sentences, rules, spark, f"over {MAX_LOOSE_ROWS:,} sentences out of reading order")
    loose = loose.collect()
    at = {(r.paper_id, r.section_idx, r.para_idx, r.sent_idx): r for r in loose if r._kind == "edge"}
    seconds, read_again = set(), set()
    for head in (r for r in loose if r._kind == "head"):
        key = (head.paper_id, head.section_idx, head.para_idx)
        if not head.at_block_start:  # out of order within a split: its predecessor is not among the edges
            read_again.add(key)
        for second in (head.sent_idx, head.sent_idx + 1):
            seconds.add((*key, second))
            if any(i >= 0 and (*key, i) not in at for i in (second - 1, second - 2)):
                read_again.add(key)
    papers_again = sorted({key[0] for key in read_again})
    if len(papers_again) > MAX_PAPERS_READ_AGAIN:
        scan.unpersist()
        return _pairs_by_shuffle(sentences, rules, spark, f"{len(papers_again):,} papers out of reading order")

    examined_by_year: dict = {}
    for row in (r for r in loose if r._kind == "count"):
        examined_by_year[row.year] = examined_by_year.get(row.year, 0) + row.n
    matched = scan.filter(F.col("_kind") == "pair").select(*MATCHED_COLUMNS, "pair_id", "_group")
    how = "pairs formed in reading order" + (" (the Python workers read the Parquet files)" if pieces is not None else
                                             f" (Spark reads the sentences: {not_read})" if not_read else "")
    if seconds:
        if read_again:  # the sentences of those paragraphs (one Spark job)
            paragraphs = spark.createDataFrame(sorted(read_again), "paper_id string, section_idx int, para_idx int")
            again = sentences.filter(in_predicate("paper_id", papers_again)).join(
                F.broadcast(paragraphs), list(PARAGRAPH_KEY), "left_semi").select(*columns).collect()
            at.update({(r.paper_id, r.section_idx, r.para_idx, r.sent_idx): r for r in again})
        cut_rows = []
        for *key, second in sorted(seconds):  # the pair (second - 1, second), as ``consecutive_pairs`` forms it
            first, gold = at.get((*key, second - 1)), at.get((*key, second))
            if first is None or gold is None:
                continue
            context = at.get((*key, second - 2))
            year = first.pub_date.year if first.pub_date is not None else None
            examined_by_year[year] = examined_by_year.get(year, 0) + 1
            cut = rules.cut(first.norm_text, first.text, first.norm_flag, gold.norm_text, gold.text, gold.norm_flag)
            if cut is not None:
                cut_rows.append((first.paper_id, first.pub_date, first.sentence_id, gold.sentence_id,
                                 context.norm_text if context is not None else None, *cut.fields()))
        if cut_rows:
            schema = T.StructType([f for f in matched.schema.fields if f.name in MATCHED_COLUMNS])
            matched = matched.unionByName(with_keys(spark.createDataFrame(cut_rows, schema)))
        how += (f" ({len(seconds):,} pair(s) across file splits formed from their edges"
                + (f", {len(read_again):,} paragraph(s) read again" if read_again else "") + ")")
    examined = spark.createDataFrame(sorted(examined_by_year.items(), key=lambda item: (item[0] is None, item[0] or 0)),
                                     "year int, count long")
    return _Pairs(scan, examined, matched, how)


def pairs_examined(sentences: DataFrame) -> dict[int | None, int]:
    """Publication year -> consecutive pairs of ``sentences``: what ``Mining.examined`` counts (``stats_mining``)."""
    return {r["year"]: r["count"] for r in pairs_for_mining(sentences).groupBy(F.year("pub_date").alias("year")).count().collect()}


def pair_id_column() -> F.Column:
    return F.concat(F.lit("p"), F.substring(F.sha2(F.concat_ws("|", "query_sentence_id", "gold_sentence_id"), 256), 1, 16))


def with_keys(pairs: DataFrame, is_pair: F.Column | None = None) -> DataFrame:
    """``pairs`` (``MATCHED_COLUMNS``) with the ``pair_id`` of each row where ``is_pair``, and ``_group``: a 64-bit
    hash of a kept pair's (query, gold) text (null for a dropped one), which the de-duplication counts. Added to the
    pass before it is persisted, so that the hashes' count and the two writes read them instead of hashing every
    pair's texts and ids again (docs/performance.md)."""
    is_pair = F.lit(True) if is_pair is None else is_pair
    return pairs.withColumn("pair_id", F.when(is_pair, pair_id_column())).withColumn(
        "_group", F.when(is_pair & F.col("drop_reason").isNull(), F.xxhash64("query_cut", "gold_cut")))


@dataclass
class Mining:
    """``scanned``: the pass over the sentences that forms the pairs, persisted (the caller unpersists it; by the
    shuffle: one row per consecutive pair, its ``year`` and, when the pre-filter passes it, the pair's columns);
    ``examined``: (year, count) of the consecutive pairs the matcher looked at; ``n_matched``: how many pairs open
    with a marker (the rows of ``matched``, counted with the hashes, no job of their own); ``matched`` and
    ``examined`` both read ``scanned``, so a stage that persists it forms the pairs once; ``pairing``: how, in words;
    ``matched``: every pair whose second sentence opens with a marker, with its ``drop_reason`` (null: kept) and
    its rank among the kept pairs of the same (query, gold) text; ``mined``: the ``mined_pairs`` rows;
    ``drops``: the matched pairs that are not rows, with their reason; ``displaced``: the pairs kept elsewhere
    (``mine_pairs``'s ``kept_elsewhere``) that a matched pair with a smaller pair id now makes duplicates.
    ``mine_pairs`` runs the pass and counts the (query, gold) hashes; the rest is lazy. ``mined`` and ``drops``
    both read ``matched``, so a stage that persists ``matched`` runs the de-duplication once."""

    scanned: DataFrame
    examined: DataFrame
    n_matched: int
    matched: DataFrame
    mined: DataFrame
    drops: DataFrame
    displaced: DataFrame
    pairing: str = ""


DUPLICATE_OF = "same query and gold text as "  # the detail of a duplicate_pair drop, before the kept pair's id


def mine_pairs(spark: SparkSession, sentences: DataFrame, lexicon: Lexicon, config: MiningConfig,
               kept_elsewhere: DataFrame | None = None, in_order: bool = True, table: str | None = None) -> Mining:
    """sentences -> pairs examined, matched pairs, ``mined_pairs`` rows (de-duplicated) and the drops.

    ``kept_elsewhere``: ``mined_pairs`` rows of papers that are not in ``sentences`` (an update mines only some
    papers). The duplicate rule ranks the matched pairs together with them, so a matched pair whose text one
    of them has with a smaller pair id is a duplicate of it, as in a mine of every paper at once.

    ``in_order``: form the pairs in reading order (one pass over the sentences, run here and persisted in
    ``scanned``), falling back to the shuffle for a table out of order; False: by the shuffle (lazy).

    ``table``: the location of the Delta table that ``sentences`` reads whole (no filter): the pass in reading
    order then has the Python workers read its Parquet files (``pieces_to_read``) instead of Spark's scan.
    """
    rules = pair_rules(lexicon, config)
    pairs = _pairs_in_order(sentences, rules, spark, table) if in_order else _pairs_by_shuffle(sentences, rules, spark, "asked")
    cut = pairs.matched.withColumn("_elsewhere", F.lit(False))
    kept = F.col("drop_reason").isNull()
    if kept_elsewhere is not None:  # only those sharing a text with a matched pair can rank with one
        texts = cut.filter(kept).select("query_cut", "gold_cut").distinct()
        elsewhere = kept_elsewhere.select(F.col("query_text").alias("query_cut"), F.col("gold_text").alias("gold_cut"),
                                          "pair_id").join(texts, ["query_cut", "gold_cut"], "left_semi")
        cut = cut.unionByName(elsewhere.withColumn("_group", F.xxhash64("query_cut", "gold_cut"))
                              .withColumn("_elsewhere", F.lit(True)), allowMissingColumns=True)
    # De-duplicate the kept pairs on (query, gold): the smallest pair id is kept, so reruns keep the same row. The
    # window (a shuffle and a sort of the wide rows) ranks only the pairs whose (query, gold) shares its 64-bit hash
    # (``_group``) with another kept pair's: the hashes are counted first (8-byte keys), and the few shared come
    # back to the driver and are broadcast. Every other pair ranks first of its own (a dropped pair's rank is not
    # used). The same job counts the matched pairs: the hashes held once, and the dropped pairs, add up in one row.
    counts = cut.groupBy("_group").agg(F.count("*").alias("n"), F.count(F.when(~F.col("_elsewhere"), 1)).alias("here"))
    is_shared = (F.col("n") > 1) & F.col("_group").isNotNull()
    # (0, not null, for the rest: pandas would make the hashes floats)
    counts = counts.groupBy(F.when(is_shared, F.col("_group")).otherwise(F.lit(0)).alias("_group"),
                            is_shared.alias("shared")).agg(F.sum("here").alias("here")).toPandas()
    n_matched = int(counts["here"].sum())
    shared = counts.loc[counts["shared"].astype(bool), ["_group"]]
    shared = F.broadcast(spark.createDataFrame(shared.astype("int64"), "_group long"))
    first = Window.partitionBy("query_cut", "gold_cut").orderBy("pair_id")
    ranked = cut.join(shared, "_group", "left_anti").withColumn("_n", F.lit(1)).withColumn(
        "_first_pair_id", F.col("pair_id")).unionByName(cut.join(shared, "_group", "left_semi").withColumn(
            "_n", F.row_number().over(first)).withColumn("_first_pair_id", F.first("pair_id").over(first))).drop("_group")
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
    return Mining(scanned=pairs.scanned, examined=pairs.examined, n_matched=n_matched, matched=matched,
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
