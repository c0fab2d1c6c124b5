"""The figures the paper reports, as DataFrames to write as Delta tables (``stats_*``).

* ``stats_split_sizes``: the shape of Table 5. For each split it gives the queries per move and the pool
  sentences per source (gold of each move, distractor of each category), plus a total row.
* ``stats_marker_matches``: the "Data" side of Table 4. For each marker entry (an extendable
  connective counts once, with all its extensions) it gives the matched pairs and papers.
* ``stats_marker_sources``: Table 4's "Data" columns. For each move or category and each lexicon
  source it gives the markers with at least one match, plus ``all`` rows.
* ``stats_yield``: pairs per 1,000 consecutive sentence pairs examined, per move and category. The
  paper's figures are about 7.6 (Specify), 0.61 (Address) and 0.043 (Broaden) out of 366.6M pairs.

The functions are pure DataFrame -> DataFrame. Only ``stats_split_sizes`` needs the session, to build
the grid of expected rows, so a move with no queries shows 0 instead of vanishing.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ratio_spark.core.schema import DISTRACTOR_CATEGORIES, MOVES, SPLITS
from ratio_spark.pipeline.pools import text_key
from ratio_spark.pipeline.splits import split_rank



def _label() -> Column:
    """The move of a move pair, the category of a distractor (a function: columns need a live session)."""
    return F.coalesce(F.col("move"), F.col("category"))


def stats_split_sizes(queries: DataFrame, candidates: DataFrame) -> DataFrame:
    """One row per (split, group, label): ``queries`` and pool ``sentences``. The rows are sorted like Table 5.

    ``group`` is ``move`` (label = the move; its sentences are ``gold_<move>`` candidates),
    ``distractor`` (label = the category; 0 queries: distractors are never queries) or ``total``.
    """
    spark = queries.sparkSession
    grid = spark.createDataFrame(
        [(s, "move", m) for s in SPLITS for m in MOVES]
        + [(s, "distractor", c) for s in SPLITS for c in DISTRACTOR_CATEGORIES],
        "split string, group string, label string",
    )
    q = queries.groupBy("split", F.lit("move").alias("group"), F.col("move").alias("label")).agg(
        F.count("*").alias("queries")
    )
    source = F.regexp_extract(F.col("source"), r"^(gold|distractor)_(.+)$", 2)
    group = F.when(F.col("source").startswith("gold_"), F.lit("move")).otherwise(F.lit("distractor"))
    c = candidates.groupBy("split", group.alias("group"), source.alias("label")).agg(F.count("*").alias("sentences"))
    keys = (
        grid.unionByName(q.select("split", "group", "label"))
        .unionByName(c.select("split", "group", "label"))
        .distinct()
    )
    rows = (
        keys.join(q, ["split", "group", "label"], "left")
        .join(c, ["split", "group", "label"], "left")
        .select("split", "group", "label",
                F.coalesce("queries", F.lit(0)).cast("long").alias("queries"),
                F.coalesce("sentences", F.lit(0)).cast("long").alias("sentences"))
    )
    totals = rows.groupBy("split").agg(
        F.lit("total").alias("group"), F.lit("total").alias("label"),
        F.sum("queries").cast("long").alias("queries"), F.sum("sentences").cast("long").alias("sentences"),
    )
    out = rows.unionByName(totals)
    group_order = F.when(F.col("group") == "move", 0).when(F.col("group") == "distractor", 1).otherwise(2)
    return out.orderBy(F.coalesce(split_rank(F.col("split")), F.lit(99)), group_order, "label")


def stats_marker_matches(mined_pairs: DataFrame) -> DataFrame:
    """One row per (role, label, marker_source, marker_entry): matched pairs, papers, distinct surface forms.

    Computed on ``mined_pairs`` as extracted, before splitting and de-duplication: a marker "occurs in
    the data" if it matched at least one consecutive pair (Table 4, Data). ``marker_variants`` counts
    the matched extensions of an extendable connective (1 for a plain marker).
    """
    return (
        mined_pairs.groupBy("role", _label().alias("label"), "marker_source", "marker_entry")
        .agg(
            F.count("*").alias("pairs"),
            F.countDistinct("paper_id").alias("papers"),
            F.countDistinct("marker").alias("marker_variants"),
        )
        .orderBy("role", "label", F.desc("pairs"), "marker_entry")
    )


def stats_marker_sources(mined_pairs: DataFrame) -> DataFrame:
    """One row per (role, label, marker_source), plus ``all``: markers with at least one match and their pairs."""
    by_source = mined_pairs.groupBy("role", _label().alias("label"), "marker_source").agg(
        F.countDistinct("marker_entry").alias("markers_matched"), F.count("*").alias("pairs")
    )
    overall = mined_pairs.groupBy("role", _label().alias("label")).agg(
        F.lit("all").alias("marker_source"),
        F.countDistinct("marker_entry").alias("markers_matched"),
        F.count("*").alias("pairs"),
    )
    return by_source.unionByName(overall).orderBy("role", "label", F.col("marker_source") == "all", "marker_source")


def stats_yield(mined_pairs: DataFrame, consecutive_pairs_examined: int) -> DataFrame:
    """One row per (role, label), plus (move, all): pairs and pairs per 1,000 consecutive pairs examined.

    ``pairs_mined`` counts rows. ``pairs`` counts distinct (query, gold) texts, the paper's
    de-duplicated count (§4.2, 3,017,476 pairs), and the rate uses it. ``consecutive_pairs_examined``
    is the number of consecutive sentence pairs the matcher looked at (366.6M in the paper). The
    mining stage knows it; it cannot be recovered from ``mined_pairs``.
    """
    if isinstance(consecutive_pairs_examined, bool) or not isinstance(consecutive_pairs_examined, int):
        raise TypeError(f"consecutive_pairs_examined must be an int, got {consecutive_pairs_examined!r}")
    if consecutive_pairs_examined <= 0:
        raise ValueError(f"consecutive_pairs_examined must be positive, got {consecutive_pairs_examined}")
    keyed = mined_pairs.select(
        "role", _label().alias("label"),
        F.concat_ws("\u001f", text_key(F.col("query_text")), text_key(F.col("gold_text"))).alias("_pair_key"),
    )
    # One pass over the keys: per (role, label), and per role (the move row is "all": a (query, gold) pair under
    # two moves counts once, as in the paper's total).
    grouped = keyed.rollup("role", "label").agg(
        F.grouping_id().alias("_level"), F.count("*").alias("pairs_mined"), F.countDistinct("_pair_key").alias("pairs")
    )
    per_label = grouped.filter(F.col("_level") == 0).drop("_level")
    all_moves = grouped.filter((F.col("_level") == 1) & (F.col("role") == "move")).select(
        "role", F.lit("all").alias("label"), "pairs_mined", "pairs")
    examined = F.lit(consecutive_pairs_examined).cast(T.LongType())
    return (
        per_label.unionByName(all_moves)
        .withColumn("consecutive_pairs_examined", examined)
        .withColumn("pairs_per_1000", F.col("pairs") * F.lit(1000.0) / examined)
        .orderBy("role", F.col("label") == "all", F.desc("pairs"))
    )


def mined_pair_stats(mined_pairs: DataFrame, consecutive_pairs_examined: int) -> dict[str, DataFrame]:
    """The ``stats_*`` tables of the mined pairs alone, by table name (``stats_split_sizes`` counts the pools)."""
    return {
        "stats_marker_matches": stats_marker_matches(mined_pairs),
        "stats_marker_sources": stats_marker_sources(mined_pairs),
        "stats_yield": stats_yield(mined_pairs, consecutive_pairs_examined),
    }
