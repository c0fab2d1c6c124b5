"""Temporal splits (the paper's §4.2 and appendix B.2): every pair goes to the split of its paper's date.

A split is a date range, both ends inclusive (``SplitsConfig``). A pair whose paper has no date, or a
date outside every range, belongs to no split. Such pairs are kept in a separate frame with a reason
(``Reason.MISSING_PUB_DATE``, ``Reason.PUB_DATE_OUTSIDE_SPLITS``) and written to ``drops`` by the pools
stage, so that in = assigned + out of range. Nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ratio_spark.core.config import SplitsConfig
from ratio_spark.core.schema import SPLITS, Reason
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

    def summary(self) -> dict[str, Any]:
        """Counts of pairs and papers per split and out of range. Runs two small Spark jobs."""
        per_split = {
            r["split"]: {"pairs": r["pairs"], "papers": r["papers"]}
            for r in self.pairs.groupBy("split")
            .agg(F.count("*").alias("pairs"), F.countDistinct("paper_id").alias("papers"))
            .collect()
        }
        out = self.out_of_range.groupBy("reason").agg(
            F.count("*").alias("pairs"), F.countDistinct("paper_id").alias("papers")
        ).collect()
        out_papers = self.out_of_range.select("paper_id").distinct().count() if out else 0
        return {
            "pairs_by_split": {s: per_split.get(s, {"pairs": 0, "papers": 0}) for s in SPLITS},
            "pairs_assigned": sum(v["pairs"] for v in per_split.values()),
            "pairs_out_of_range": sum(r["pairs"] for r in out),
            "papers_out_of_range": out_papers,
            "out_of_range_by_reason": {r["reason"]: {"pairs": r["pairs"], "papers": r["papers"]} for r in out},
        }


def assign_splits(mined_pairs: DataFrame, splits_config: SplitsConfig) -> SplitAssignment:
    """Add ``split`` by ``pub_date``. Rows outside every range go to ``out_of_range`` with a reason.

    The split is a function of the paper's date only. So a paper lands in one split unless its rows
    disagree on the date, and ``leakage.check_leakage`` catches that case.
    """
    labelled = mined_pairs.withColumn("split", split_of(F.col("pub_date"), splits_config))
    pairs = labelled.filter(F.col("split").isNotNull())
    out_of_range = labelled.filter(F.col("split").isNull()).withColumn(
        "reason",
        F.when(F.col("pub_date").isNull(), F.lit(Reason.MISSING_PUB_DATE))
        .otherwise(F.lit(Reason.PUB_DATE_OUTSIDE_SPLITS)),
    )
    return SplitAssignment(labelled=labelled, pairs=pairs, out_of_range=out_of_range)
