"""The figures the paper reports, as DataFrames to write as Delta tables (``stats_*``).

* ``stats_split_sizes``: the shape of Table 5. For each split it gives the queries per move and the pool
  sentences per source (gold of each move, distractor of each category), plus a total row.
* ``stats_marker_matches``: the "Data" side of Table 4. For each marker entry (an extendable
  connective counts once, with all its extensions) it gives the matched pairs and papers.
* ``stats_marker_sources``: Table 4's "Data" columns. For each move or category and each lexicon
  source it gives the markers with at least one match, plus ``all`` rows.
* ``stats_yield``: pairs per 1,000 consecutive sentence pairs examined, per move and category. The
  paper's figures are about 7.6 (Specify), 0.61 (Address) and 0.043 (Broaden) out of 366.6M pairs.

The functions are pure DataFrame -> DataFrame, but ``stats_split_sizes``: it builds its few dozen rows from the
pools' counts (``pools.pool_counts``), so a move with no queries shows 0 instead of vanishing.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ratio_spark.core.schema import DISTRACTOR_CATEGORIES, MOVES, SPLITS, TABLES
from ratio_spark.pipeline.pools import key_hashes, text_key


def _label() -> Column:
    """The move of a move pair, the category of a distractor (a function: columns need a live session)."""
    return F.coalesce(F.col("move"), F.col("category"))


def stats_split_sizes(spark: SparkSession, query_counts: dict[tuple, int], candidate_counts: dict[tuple, int]) -> DataFrame:
    """One row per (split, group, label): ``queries`` and pool ``sentences``. The rows are sorted like Table 5.

    ``query_counts`` and ``candidate_counts`` are ``pools.pool_counts``: a few dozen numbers, so the rows are built
    here rather than by joins. ``group`` is ``move`` (label = the move; its sentences are ``gold_<move>``
    candidates), ``distractor`` (label = the category; 0 queries: distractors are never queries) or ``total``.
    Every move and category of every split has a row, a 0 where nothing was counted.
    """
    queries: dict[tuple, int] = {}
    sentences: dict[tuple, int] = {}
    for split in SPLITS:
        queries.update({(split, "move", m): 0 for m in MOVES} | {(split, "distractor", c): 0 for c in DISTRACTOR_CATEGORIES})
    for (split, move), n in query_counts.items():
        queries[(split, "move", move)] = queries.get((split, "move", move), 0) + n
    for (split, source), n in candidate_counts.items():
        found = re.match(r"^(gold|distractor)_(.+)$", source or "")
        key = (split, "move" if found and found[1] == "gold" else "distractor", found[2] if found else "")
        sentences[key] = sentences.get(key, 0) + n
    keys = set(queries) | set(sentences)
    rows = [(split, group, label, queries.get((split, group, label), 0), sentences.get((split, group, label), 0))
            for split, group, label in keys]
    for split in {row[0] for row in rows}:
        here = [row for row in rows if row[0] == split]
        rows.append((split, "total", "total", sum(r[3] for r in here), sum(r[4] for r in here)))
    rank = {name: i for i, name in enumerate(SPLITS)}
    group_order = {"move": 0, "distractor": 1, "total": 2}
    rows.sort(key=lambda r: (rank.get(r[0], 99), r[0] or "", group_order[r[1]], r[2] or ""))
    # One partition: one file, its rows in Table 5's order.
    return spark.createDataFrame(rows, TABLES["stats_split_sizes"].ddl).coalesce(1)


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
    query, gold = text_key(F.col("query_text")), text_key(F.col("gold_text"))
    # A pair is counted by the hashes of its keys (``pools.key_hashes``), not by its texts: the distinct count
    # then shuffles 16 bytes a row instead of two sentences three times (the rollup's grouping sets).
    keyed = mined_pairs.select(
        "role", _label().alias("label"), *[h.alias(f"_pair_h{i}") for i, h in enumerate(key_hashes(query, gold))],
    )
    # One pass over the keys: per (role, label), and per role (the move row is "all": a (query, gold) pair under
    # two moves counts once, as in the paper's total).
    grouped = keyed.rollup("role", "label").agg(
        F.grouping_id().alias("_level"), F.count("*").alias("pairs_mined"),
        F.countDistinct("_pair_h0", "_pair_h1").alias("pairs"),
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
