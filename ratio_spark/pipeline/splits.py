"""Temporal splits (the paper's §4.2 and appendix B.2): every pair goes to the split of its paper's date.

A split is a date range, both ends inclusive (``SplitsConfig``). A pair whose paper has no date, or a
date outside every range, belongs to no split. Such pairs are kept in a separate frame with a reason
(``Reason.MISSING_PUB_DATE``, ``Reason.PUB_DATE_OUTSIDE_SPLITS``) and written to ``drops`` by the pools
stage, so that in = assigned + out of range. Nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ratio_spark.core.schema import SPLITS, Reason
from ratio_spark.pipeline.settings import SplitsConfig
from ratio_spark.pipeline.tables import drop_rows


def split_of(pub_date: Column, splits_config: SplitsConfig) -> Column:
    """The split whose inclusive range holds ``pub_date``, or null. The config guarantees disjoint ranges."""
    out: Column | None = None
    for name in SPLITS:
        rng = splits_config.ranges()[name]
        cond = pub_date.between(F.lit(rng.start), F.lit(rng.end))
        out = F.when(cond, F.lit(name)) if out is None else out.when(cond, F.lit(name))
    return out.otherwise(F.lit(None).cast("string"))


def split_rank(split: Column) -> Column:
    """0 for train, 1 for validation, 2 for test: the order of the splits in time."""
    out: Column | None = None
    for rank, name in enumerate(SPLITS):
        out = F.when(split == name, F.lit(rank)) if out is None else out.when(split == name, F.lit(rank))
    return out.otherwise(F.lit(None).cast("int"))


@dataclass
class SplitAssignment:
    """``labelled``: every input row plus its ``split`` (null: none); ``pairs``: the rows that fall in a
    split; ``out_of_range``: the rows that fall in none, plus ``reason``."""

    labelled: DataFrame
    pairs: DataFrame
    out_of_range: DataFrame

    @property
    def drops(self) -> DataFrame:
        """The out-of-range rows as drops (``tables.drop_rows``)."""
        date = F.coalesce(F.col("pub_date").cast("string"), F.lit("no date"))
        return drop_rows(self.out_of_range, F.col("reason"), "pair_id", split="split", role="role",
                         text="gold_text", detail=F.concat(F.lit("paper dated "), date))

    @cached_property
    def _counts(self) -> dict[tuple, dict[str, int]]:
        """(level, split, role or reason) -> ``pairs`` (input rows) and ``papers`` (distinct paper ids), for the
        levels ``split_role``, ``split`` and ``split_reason`` (split and reason None where they do not apply).

        One small Spark job of grouping sets, a few dozen rows back: ``summary`` and the pools stage's
        reconciliation read it, so they need no scan of their own, and the driver never holds a row per paper.
        """
        rows = self.labelled.sparkSession.sql(
            "SELECT split, role, reason, grouping_id() AS level, count(*) AS pairs, "
            "count(DISTINCT paper_id) AS papers FROM {labelled} "
            "GROUP BY GROUPING SETS ((split, role), (split), (split, reason))",
            labelled=self.labelled.select("split", "role", "paper_id", _out_of_range_reason().alias("reason")),
        ).collect()
        levels = {1: ("split_role", "role"), 3: ("split", None), 2: ("split_reason", "reason")}
        out = {}
        for r in rows:
            level, by = levels[r["level"]]
            out[(level, r["split"], r[by] if by else None)] = {"pairs": r["pairs"], "papers": r["papers"]}
        return out

    def rows_by_split_and_role(self) -> dict[tuple, int]:
        """Input rows per (split, role), split None out of range."""
        return {(split, role): n["pairs"] for (level, split, role), n in self._counts.items() if level == "split_role"}

    def summary(self) -> dict[str, Any]:
        """Counts of pairs and papers per split and out of range."""
        none = {"pairs": 0, "papers": 0}
        per_split = {split: n for (level, split, _), n in self._counts.items() if level == "split"}
        return {
            "pairs_by_split": {s: per_split.get(s, none) for s in SPLITS},
            "pairs_assigned": sum(n["pairs"] for split, n in per_split.items() if split is not None),
            "pairs_out_of_range": per_split.get(None, none)["pairs"],
            "papers_out_of_range": per_split.get(None, none)["papers"],
            "out_of_range_by_reason": dict(sorted(
                (reason, n) for (level, split, reason), n in self._counts.items() if level == "split_reason" and split is None
            )),
        }


def resolve_splits(mined_pairs: DataFrame, splits_config: SplitsConfig) -> SplitsConfig:
    """The configured ranges, or with ``splits.rolling`` the windows ending with the latest mined date."""
    if splits_config.rolling is None:
        return splits_config
    return splits_config.resolved(mined_pairs.agg(F.max("pub_date")).first()[0])


def assign_splits(mined_pairs: DataFrame, splits_config: SplitsConfig) -> SplitAssignment:
    """Add ``split`` by ``pub_date``. Rows outside every range go to ``out_of_range`` with a reason.

    The split is a function of the paper's date only. So a paper lands in one split unless its rows
    disagree on the date, and ``leakage.check_leakage`` catches that case.
    """
    labelled = mined_pairs.withColumn("split", split_of(F.col("pub_date"), splits_config))
    pairs = labelled.filter(F.col("split").isNotNull())
    out_of_range = labelled.filter(F.col("split").isNull()).withColumn("reason", _out_of_range_reason())
    return SplitAssignment(labelled=labelled, pairs=pairs, out_of_range=out_of_range)


def _out_of_range_reason() -> Column:
    """Why a row of ``SplitAssignment.labelled`` is in no split; null for a row in a split."""
    return (
        F.when(F.col("split").isNotNull(), F.lit(None).cast("string"))
        .when(F.col("pub_date").isNull(), F.lit(Reason.MISSING_PUB_DATE))
        .otherwise(F.lit(Reason.PUB_DATE_OUTSIDE_SPLITS))
    )
