"""The ``citations`` stage: ``papers`` (their ``bibliography`` column) + ``sentences`` -> ``references``.

One row per bibliography entry of every paper, with its in-text mentions and the corpus paper it cites.

Mentions to sentences: a reader stores each marker at ``(section_idx, para_idx, char_offset)`` in the
paper's cleaned text (``ratio_spark.pipeline.ingest.bibliography``); segmentation keeps each sentence's
``char_start`` in the same paragraph, so the mention's sentence is the paragraph's last sentence that
starts at or before the offset (an equi-join on the paragraph, then ``max_by``).

Resolution (``docs/inspire.md``), in order, first match wins:

1. **ids**: the entry's ACL Anthology id, Semantic Scholar id, DOI or arXiv id equals a corpus
   ``paper_id`` (case-insensitive; in that order of trust when two ids disagree);
2. **title + year**: the entry's normalised title (lowercase, every run of non-letters and non-digits
   a single space) equals a corpus paper's, the title has at least ``min_title_words`` words, and the
   years differ by at most ``year_tolerance`` (an entry without a year matches only a title that one
   corpus paper has). Several papers within the tolerance: the closest year wins; a tie is
   ``ambiguous_title`` and stays unresolved.

A match to the citing paper itself is a ``self_citation`` (not resolved: a paper is not its own
antecedent). Two entries of one paper that resolve to the same corpus paper are kept, the later one
naming the first in ``duplicate_of``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ratio_spark.core.errors import ReconciliationError
from ratio_spark.core.schema import TABLES
from ratio_spark.pipeline.settings import CitationsConfig

ID_KINDS = ("acl_id", "s2_id", "doi", "arxiv_id")  # order of trust when an entry's ids disagree
# Where a mention ends up; every mention gets exactly one (the summary reconciles them).
MENTION_OUTCOMES = ("in_sentence", "no_entry_id", "unknown_entry", "outside_kept_text", "offset_unknown", "no_sentence")


def title_key(title: Column) -> Column:
    """Lowercase, every run of characters that are not letters or digits one space, trimmed (JVM)."""
    return F.trim(F.regexp_replace(F.lower(title), r"[^\p{L}\p{N}]+", " "))


def bibliography_entries(papers: DataFrame) -> DataFrame:
    """One row per bibliography entry, with its position in the bibliography."""
    return papers.select(
        "paper_id", "pub_date", F.posexplode("bibliography.entries").alias("entry_idx", "entry"),
    ).select("paper_id", "pub_date", "entry_idx", "entry.*")


def mention_outcomes(papers: DataFrame, sentences: DataFrame) -> DataFrame:
    """One row per mention: entry id, section heading, sentence id (when found) and its ``outcome``."""
    # The headings taken before the explode: so the scan reads them alone, not the sections' paragraphs.
    mentions = papers.select(
        "paper_id", F.col("sections.heading").alias("headings"), "bibliography.entries", "bibliography.mentions",
    ).select(
        "paper_id", "headings", "entries", F.posexplode("mentions").alias("mention_idx", "mention"),
    ).select(
        "paper_id", "mention_idx", "mention.*",
        F.exists("entries", lambda e: e["entry_id"] == F.col("mention.entry_id")).alias("entry_known"),
        F.col("headings")[F.col("mention.section_idx")].alias("section_heading"),
    )
    starts = sentences.select(
        "paper_id", "section_idx", "para_idx", F.col("char_start").alias("s_start"), "sentence_id",
    )
    keys = ["paper_id", "section_idx", "para_idx"]
    placed = (
        mentions.filter(F.col("char_offset").isNotNull())
        .join(starts, keys, "inner")
        .filter(F.col("s_start") <= F.col("char_offset"))
        .groupBy("paper_id", "mention_idx")
        .agg(F.max_by("sentence_id", "s_start").alias("sentence_id"))
    )
    out = mentions.join(placed, ["paper_id", "mention_idx"], "left")
    outcome = (
        F.when(F.col("entry_id").isNull(), "no_entry_id")
        .when(~F.col("entry_known"), "unknown_entry")
        .when(F.col("section_idx").isNull(), "outside_kept_text")
        .when(F.col("char_offset").isNull(), "offset_unknown")
        .when(F.col("sentence_id").isNull(), "no_sentence")
        .otherwise("in_sentence")
    )
    return out.select("paper_id", "mention_idx", "entry_id", "section_heading", "sentence_id", outcome.alias("outcome"))


def mentions_per_entry(outcomes: DataFrame) -> DataFrame:
    """mention_count (every mention of a known entry), sentence ids and section headings in text order."""
    ordered = F.array_sort(F.collect_list(F.struct("mention_idx", "sentence_id", "section_heading")))
    return (
        outcomes.filter(F.col("entry_id").isNotNull() & (F.col("outcome") != "unknown_entry"))
        .groupBy("paper_id", "entry_id")
        .agg(F.count("*").alias("mention_count"), ordered.alias("_m"))
        .select(
            "paper_id", "entry_id", "mention_count",
            F.filter(F.transform("_m", lambda m: m["sentence_id"]), lambda s: s.isNotNull()).alias("mention_sentence_ids"),
            F.filter(F.transform("_m", lambda m: m["section_heading"]), lambda s: s.isNotNull()).alias("mention_sections"),
        )
    )


def _corpus(papers: DataFrame) -> DataFrame:
    return papers.select(
        F.col("paper_id").alias("c_paper_id"), F.col("pub_date").alias("c_pub_date"),
        F.lower("paper_id").alias("c_key"), title_key(F.col("title")).alias("c_title_key"),
        F.year("pub_date").alias("c_year"),
    )


def resolve_entries(entries: DataFrame, papers: DataFrame, config: CitationsConfig) -> DataFrame:
    """Add resolved_paper_id, resolved_pub_date, resolved_by and resolution_status (rules in the module doc)."""
    corpus = _corpus(papers)
    key = ["paper_id", "entry_id"]
    by_id = (
        entries.select(*key, F.explode(F.array(*[
            F.struct(F.lit(rank).alias("rank"), F.lit(kind).alias("kind"), F.lower(F.col(kind)).alias("value"))
            for rank, kind in enumerate(ID_KINDS)
        ])).alias("id"))
        .filter(F.col("id.value").isNotNull())
        .join(corpus, F.col("id.value") == F.col("c_key"))
        .groupBy(*key)
        .agg(F.min_by(F.struct("c_paper_id", "c_pub_date", F.col("id.kind").alias("kind")), F.col("id.rank")).alias("m"))
        .select(*key, F.col("m.c_paper_id").alias("id_paper"), F.col("m.c_pub_date").alias("id_date"),
                F.col("m.kind").alias("id_kind"))
    )
    # The title's key once per entry (a regular expression over every title): the match and the status read it.
    entries = entries.withColumn("_t_key", title_key(F.col("title")))
    has_title = (F.col("_t_key") != "") & (F.size(F.split("_t_key", " ")) >= config.min_title_words)
    titled = entries.filter(has_title).select(*key, "year", F.col("_t_key").alias("t_key"))
    candidates = titled.join(corpus, F.col("t_key") == F.col("c_title_key")).withColumn(
        "gap", F.abs(F.col("year") - F.col("c_year"))
    )
    # An entry without a year: only a title that one corpus paper has; else the closest year within tolerance.
    candidates = candidates.filter(F.col("gap").isNull() | (F.col("gap") <= config.year_tolerance))
    best = Window.partitionBy(*key)
    by_title = (
        candidates.withColumn("best_gap", F.min("gap").over(best))
        .filter(F.col("gap").eqNullSafe(F.col("best_gap")))
        .groupBy(*key)
        .agg(F.countDistinct("c_paper_id").alias("n"), F.first("c_paper_id").alias("t_paper"),
             F.first("c_pub_date").alias("t_date"))
    )
    out = entries.join(by_id, key, "left").join(by_title, key, "left")
    via_title = F.col("id_paper").isNull() & (F.col("n") == 1)
    resolved = F.when(F.col("id_paper").isNotNull(), F.col("id_paper")).when(via_title, F.col("t_paper"))
    status = (
        F.when(resolved == F.col("paper_id"), "self_citation")
        .when(resolved.isNotNull(), "resolved")
        .when(F.col("n") > 1, "ambiguous_title")
        .when(~F.coalesce(has_title, F.lit(False)), "no_usable_title")
        .otherwise("no_match")
    )
    is_resolved = status == "resolved"
    return out.select(
        *[c for c in entries.columns if c != "_t_key"],
        F.when(is_resolved, resolved).alias("resolved_paper_id"),
        F.when(is_resolved, F.when(F.col("id_paper").isNotNull(), F.col("id_date")).otherwise(F.col("t_date")))
        .alias("resolved_pub_date"),
        F.when(is_resolved, F.when(F.col("id_paper").isNotNull(), F.col("id_kind")).otherwise(F.lit("title_year")))
        .alias("resolved_by"),
        status.alias("resolution_status"),
    )


def mark_duplicates(references: DataFrame) -> DataFrame:
    """``duplicate_of``: the first entry (by position) of the same paper that resolves to the same paper."""
    first = Window.partitionBy("paper_id", "resolved_paper_id").orderBy("entry_idx")
    return references.withColumn(
        "duplicate_of",
        F.when(F.col("resolved_paper_id").isNotNull() & (F.row_number().over(first) > 1), F.first("entry_id").over(first)),
    )


def build_references(papers: DataFrame, sentences: DataFrame, config: CitationsConfig) -> tuple[DataFrame, DataFrame]:
    """(references, mention outcomes): the table, and one row per mention for the summary's counts."""
    outcomes = mention_outcomes(papers, sentences)
    entries = bibliography_entries(papers)
    resolved = resolve_entries(entries, papers, config)
    references = resolved.join(mentions_per_entry(outcomes), ["paper_id", "entry_id"], "left").select(
        *resolved.columns,
        F.coalesce("mention_count", F.lit(0)).alias("mention_count"),
        F.coalesce("mention_sentence_ids", F.array().cast("array<string>")).alias("mention_sentence_ids"),
        F.coalesce("mention_sections", F.array().cast("array<string>")).alias("mention_sections"),
    )
    return mark_duplicates(references).select(*TABLES["references"].column_names), outcomes


def citations_summary(papers: DataFrame, references: DataFrame, outcomes: DataFrame) -> dict[str, Any]:
    """The stage's counts: papers by bibliography problem, entries by resolution, mentions by outcome (every
    mention gets exactly one outcome: a mismatch raises ``ReconciliationError``)."""
    problem = F.when(F.col("bibliography").isNull(), "format_without_bibliography").otherwise(
        F.coalesce(F.split("bibliography.problem", ":").getItem(0), F.lit("none"))
    )
    problems = {r["problem"]: r["count"] for r in papers.groupBy(problem.alias("problem")).count().collect()}
    by_outcome = {r["outcome"]: r["count"] for r in outcomes.groupBy("outcome").count().collect()}
    n_mentions = papers.select(F.sum(F.size(F.coalesce("bibliography.mentions", F.array())))).first()[0] or 0
    by_status = {r["resolution_status"]: r["count"] for r in references.groupBy("resolution_status").count().collect()}
    by_rule = {r["resolved_by"]: r["count"] for r in references.filter(F.col("resolved_by").isNotNull())
               .groupBy("resolved_by").count().collect()}
    if sum(by_outcome.values()) != n_mentions:
        raise ReconciliationError(f"citations: {n_mentions} mentions but {sum(by_outcome.values())} outcomes")
    return {
        "papers": sum(problems.values()),
        "papers_by_bibliography_problem": dict(sorted(problems.items(), key=lambda kv: -kv[1])),
        "bibliography_entries": sum(by_status.values()),
        "entries_by_resolution_status": dict(sorted(by_status.items(), key=lambda kv: -kv[1])),
        "resolved_by_rule": dict(sorted(by_rule.items(), key=lambda kv: -kv[1])),
        "duplicate_entries": references.filter(F.col("duplicate_of").isNotNull()).count(),
        "mentions": n_mentions,
        "mentions_by_outcome": {k: by_outcome.get(k, 0) for k in MENTION_OUTCOMES},
    }
