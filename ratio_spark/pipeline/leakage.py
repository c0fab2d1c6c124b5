"""Checks that stop the job when the benchmark would leak, or could not be scored as built.

A temporal split is worth something only if nothing from a later split was seen earlier (the
paper's §4.2). These checks run on the built ``queries`` and ``candidates`` before anything is
released. Each failure names the check, the split(s), the count and up to five examples.
``check_leakage`` gathers all failures and raises one ``LeakageError``, so one run shows every
problem. The checks:

* ``text_in_two_splits``: a normalised text is a query or a candidate in more than one split.
* ``paper_date_outside_split``: a row whose paper date is missing or outside its split's range.
* ``paper_in_two_splits``: a paper with rows in more than one split.
* ``distractor_is_gold``: within a split, one text is both a gold and a distractor.
* ``gold_is_distractor``: a query's gold candidate has a distractor source.
* ``duplicate_pool_text``: a split's pool holds the same normalised text twice.
* ``gold_missing``: a query's ``gold_candidate_id`` is not in its split's candidates.
* ``gold_excluded``: a query's exclusion list holds its own gold, so the query cannot be answered.
* ``duplicate_id``: a query id or a candidate id is not unique, or is in the wrong namespace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ratio_spark.core.errors import RunFailure
from ratio_spark.core.schema import SPLITS
from ratio_spark.pipeline.pools import key_hashes, text_key
from ratio_spark.pipeline.settings import SplitsConfig

MAX_EXAMPLES = 5
CHECKS = (
    "text_in_two_splits", "paper_date_outside_split", "paper_in_two_splits", "distractor_is_gold",
    "gold_is_distractor", "duplicate_pool_text", "gold_missing", "gold_excluded", "duplicate_id",
)


@dataclass
class LeakageFailure:
    check: str
    description: str
    splits: list[str]
    count: int
    examples: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{self.check} [{', '.join(self.splits) or '-'}]: {self.count} {self.description}"]
        lines += [f"    e.g. {example}" for example in self.examples]
        return "\n".join(lines)


class LeakageError(RunFailure, RuntimeError):
    """The built splits leak or cannot be scored; ``failures`` lists each failed check."""

    def __init__(self, failures: list[LeakageFailure]):
        self.failures = failures
        super().__init__(
            f"leakage check failed ({len(failures)} check(s)); nothing may be released from these tables:\n  "
            + "\n  ".join(str(f).replace("\n", "\n  ") for f in failures)
        )

    @property
    def checks(self) -> list[str]:
        return [f.check for f in self.failures]


def _evaluate(checks: list[tuple[str, str, DataFrame]]) -> list[LeakageFailure]:
    """Count every check in one Spark job, then fetch examples for the failed checks only.

    Each offending frame has one row per problem, with columns ``splits`` (array<string>) and ``example``.
    """
    tagged = None
    for check, _, offending in checks:
        frame = offending.select(F.lit(check).alias("check"), "splits", "example")
        tagged = frame if tagged is None else tagged.unionByName(frame)
    counts = {
        r["check"]: (r["n"], r["splits"])
        for r in tagged.groupBy("check")
        .agg(
            F.count("*").alias("n"),
            _time_order(F.flatten(F.collect_set("splits"))).alias("splits"),
        )
        .collect()
    }
    failures = []
    for check, description, offending in checks:
        if check not in counts:
            continue
        n, splits = counts[check]
        examples = [r["example"] for r in offending.orderBy("example").limit(MAX_EXAMPLES).collect()]
        failures.append(LeakageFailure(check, description, [s for s in splits if s is not None], n, examples))
    return failures


def _time_order(splits: Column) -> Column:
    """The distinct splits of an array in time order (train, validation, test), any unknown value last."""
    known = F.filter(F.array(*[F.lit(name) for name in SPLITS]), lambda name: F.array_contains(splits, name))
    return F.concat(known, F.array_sort(F.array_distinct(F.filter(splits, lambda name: ~name.isin(*SPLITS)))))


def _in_own_range(split: Column, pub_date: Column, splits_config: SplitsConfig) -> Column:
    cond = F.lit(False)
    for name in SPLITS:
        rng = splits_config.ranges()[name]
        cond = cond | ((split == name) & pub_date.between(F.lit(rng.start), F.lit(rng.end)))
    return F.coalesce(cond, F.lit(False))


def _quoted(column: str) -> Column:
    return F.concat(F.lit("'"), F.substring(F.col(column), 1, 90), F.lit("'"))


def _example(*parts: Column | str) -> Column:
    """A readable line for the error message: the parts joined by spaces (strings are literals)."""
    return F.concat_ws(" ", *[F.lit(p) if isinstance(p, str) else p for p in parts]).alias("example")


KEY_HASH = ("key_h0", "key_h1")


def _keyed(queries: DataFrame, candidates: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The columns the checks read, with each text's key (``pools.text_key``) in place of the text: lazy.

    The checks group texts by the key's hashes (``KEY_HASH``, ``pools.key_hashes``), not by the key: counting
    shuffles 16 bytes a text instead of the text. The key itself is read only for the examples of a failed check.
    """

    def with_key(frame: DataFrame, text: str, *columns: str) -> DataFrame:
        keyed = frame.select(*columns, text_key(F.col(text)).alias("key"))
        return keyed.select("*", *[h.alias(name) for h, name in zip(key_hashes(F.col("key")), KEY_HASH)])

    return (
        with_key(queries, "query_text", "split", "query_id", "paper_id", "pub_date", "gold_candidate_id",
                 "exclude_candidate_ids"),
        with_key(candidates, "text", "split", "candidate_id", "paper_id", "pub_date", "source"),
    )


def _offending(
    queries: DataFrame, candidates: DataFrame, splits_config: SplitsConfig
) -> list[tuple[str, str, DataFrame]]:
    """(check, description, offending rows) for every check over ``_keyed`` frames; lazy."""
    texts = queries.select("split", "key", *KEY_HASH, F.lit("query").alias("kind")).unionByName(
        candidates.select("split", "key", *KEY_HASH, F.lit("candidate").alias("kind"))
    )
    papers = queries.select("split", "paper_id", "pub_date").unionByName(
        candidates.select("split", "paper_id", "pub_date")
    ).distinct()
    pool = candidates.select("split", "candidate_id", "source", "key", *KEY_HASH)
    # F.min("key"): the text of the group, for the examples (Spark prunes it when only counting).
    by_text = pool.groupBy("split", *KEY_HASH).agg(
        F.min("key").alias("key"),
        F.count("*").alias("n"),
        F.max(F.col("source").startswith("gold_").cast("int")).alias("has_gold"),
        F.max(F.col("source").startswith("distractor_").cast("int")).alias("has_distractor"),
        F.array_sort(F.collect_list("source")).alias("sources"),
    )
    gold_join = queries.select("split", "query_id", "gold_candidate_id").join(
        pool.select("split", F.col("candidate_id").alias("gold_candidate_id"), "source"),
        ["split", "gold_candidate_id"], "left",
    )
    ids = queries.select("split", F.col("query_id").alias("id"), F.lit("q").alias("prefix")).unionByName(
        candidates.select("split", F.col("candidate_id").alias("id"), F.lit("c").alias("prefix"))
    )
    one_split = F.array(F.col("split")).alias("splits")
    return [
        ("text_in_two_splits", "text(s) are a query or candidate in more than one split",
         texts.groupBy(*KEY_HASH)
         .agg(_time_order(F.collect_set("split")).alias("splits"), F.array_sort(F.collect_set("kind")).alias("kinds"),
              F.min("key").alias("key"))
         .filter(F.size("splits") > 1)
         .select("splits", F.concat(_quoted("key"), F.lit(" in "), F.array_join("splits", "+"),
                                    F.lit(" as "), F.array_join("kinds", "+")).alias("example"))),
        ("paper_date_outside_split", "paper row(s) dated outside their split's range (or undated)",
         papers.filter(~_in_own_range(F.col("split"), F.col("pub_date"), splits_config)).select(
             one_split,
             _example("paper", F.col("paper_id"), "dated",
                      F.coalesce(F.col("pub_date").cast("string"), F.lit("null")), "in", F.col("split")))),
        ("paper_in_two_splits", "paper(s) have rows in more than one split",
         papers.groupBy("paper_id").agg(_time_order(F.collect_set("split")).alias("splits"))
         .filter(F.size("splits") > 1)
         .select("splits", F.concat_ws(" ", F.lit("paper"), F.col("paper_id"), F.lit("in"),
                                       F.array_join("splits", "+")).alias("example"))),
        ("distractor_is_gold", "text(s) are both a gold and a distractor in one split",
         by_text.filter((F.col("has_gold") == 1) & (F.col("has_distractor") == 1)).select(
             one_split,
             _example(_quoted("key"), "in", F.col("split"), "as", F.array_join("sources", "+")))),
        ("gold_is_distractor", "query gold(s) point to a distractor candidate",
         gold_join.filter(F.col("source").startswith("distractor_")).select(
             one_split,
             F.concat_ws(" ", F.lit("query"), F.col("query_id"), F.lit("gold"), F.col("gold_candidate_id"),
                         F.lit("is"), F.col("source"), F.lit("in"), F.col("split")).alias("example"))),
        ("duplicate_pool_text", "text(s) occur more than once in one split's pool",
         by_text.filter(F.col("n") > 1).select(
             one_split,
             _example(_quoted("key"), F.concat(F.lit("x"), F.col("n").cast("string")), "in", F.col("split")))),
        ("gold_missing", "query gold(s) are not in their split's candidates",
         gold_join.filter(F.col("source").isNull()).select(
             one_split,
             _example("query", F.col("query_id"), "gold", F.coalesce(F.col("gold_candidate_id"), F.lit("null")),
                      "missing from", F.col("split")))),
        ("gold_excluded", "query(ies) exclude their own gold",
         queries.filter(
             F.coalesce(F.array_contains("exclude_candidate_ids", F.col("gold_candidate_id")), F.lit(False))
         ).select(one_split, _example("query", F.col("query_id"), "excludes its gold", F.col("gold_candidate_id")))),
        ("duplicate_id", "id(s) are not unique or are outside their namespace (q... / c...)",
         ids.groupBy("id").agg(F.count("*").alias("n"), _time_order(F.collect_set("split")).alias("splits"),
                               F.first("prefix").alias("prefix"))
         .filter((F.col("n") > 1) | ~F.coalesce(F.col("id").rlike("^[qc][0-9a-f]{16}$")
                                               & F.col("id").startswith(F.col("prefix")), F.lit(False)))
         .select("splits", F.concat_ws(" ", F.lit("id"), F.coalesce(F.col("id"), F.lit("null")), F.lit("x"),
                                       F.col("n").cast("string")).alias("example"))),
    ]


def find_leaks(queries: DataFrame, candidates: DataFrame, splits_config: SplitsConfig) -> list[LeakageFailure]:
    """Run every check; return the failures (empty when the splits are clean).

    The checks read the two tables several times each: they read the narrow ``_keyed`` frames, persisted
    and filled (one job each) before the checks run, so each text is keyed once and the checks' parallel
    jobs read memory instead of the tables.
    """
    keyed = [frame.persist(StorageLevel.MEMORY_AND_DISK) for frame in _keyed(queries, candidates)]
    try:
        for frame in keyed:
            frame.count()
        return _evaluate(_offending(*keyed, splits_config))
    finally:
        for frame in keyed:
            frame.unpersist()


def check_leakage(queries: DataFrame, candidates: DataFrame, splits_config: SplitsConfig) -> dict[str, Any]:
    """Raise ``LeakageError`` if any check fails. Otherwise return a summary for the stage's report."""
    failures = find_leaks(queries, candidates, splits_config)
    if failures:
        raise LeakageError(failures)
    return {"leakage_checks_passed": list(CHECKS)}
