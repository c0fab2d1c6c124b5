"""Sentence-opening spans: the raw material of manual lexicon curation.

The paper (§4.1, appendix A) curates markers from the span before a sentence's first comma, when that
span has at most seven words: the most frequent spans are candidate markers, and curators read
randomly sampled pairs whose second sentence opens with each one. These functions compute exactly that
with Spark SQL expressions only (no Python UDFs), so they run in the JVM on any corpus size and can be
reused by the lexicon toolkit. They read the ``sentences`` table (``ratio_spark.pipeline.segment``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F


def opening_span(norm_text: Column, max_words: int | None = 7) -> Column:
    """The text before the first comma if it has 1..max_words words (any number if None), else null.

    Trimmed, so "however , we" and "however, we" give the same span; a sentence without a comma has
    no opening span (the comma is what separates a marker from the content, §4.1).
    """
    span = F.trim(F.substring_index(norm_text, ",", 1))
    keep = F.length(span) > 0
    if max_words is not None:
        keep = keep & (F.size(F.split(span, " ")) <= max_words)
    return F.when((F.instr(norm_text, ",") > 0) & keep, span)


def opening_spans(sentences: DataFrame, max_words: int = 7) -> DataFrame:
    """sentences -> (span, occurrences), most frequent first; clean sentences only (norm_flag null).

    Counts every sentence, not only second sentences of pairs, as the paper does, so a span that
    opens paragraphs (where it cannot refer back) is counted too; the review reads pairs to judge it.
    """
    spans = sentences.where(F.col("norm_flag").isNull()).select(
        opening_span(F.col("norm_text"), max_words).alias("span")
    )
    return (
        spans.where(F.col("span").isNotNull())
        .groupBy("span")
        .agg(F.count(F.lit(1)).alias("occurrences"))
        .orderBy(F.desc("occurrences"), F.asc("span"))
    )


def sample_pairs_for_spans(pairs: DataFrame, spans: DataFrame, k: int = 15, seed: int = 0) -> DataFrame:
    """Up to k pairs per span whose (clean) second sentence opens with that span and a comma.

    ``spans`` needs a ``span`` column (e.g. the top rows of ``opening_spans``). The sample is a
    seeded hash order of the two sentence ids, not ``rand``: it does not depend on partitioning or
    on the other pairs, so the same seed gives the same pairs on any cluster and reruns can be
    re-checked. Returns the pair columns plus ``span`` and ``sample_rank`` (1..k).
    """
    # No word limit here: the span list already decides which spans matter.
    opened = pairs.where(F.col("second_norm_flag").isNull()).withColumn(
        "span", opening_span(F.col("second_norm_text"), None)
    )
    matched = opened.join(F.broadcast(spans.select("span").distinct()), "span")
    order = F.xxhash64(F.lit(seed), F.col("first_sentence_id"), F.col("second_sentence_id"))
    rank = F.row_number().over(Window.partitionBy("span").orderBy(order, "second_sentence_id"))
    return matched.withColumn("sample_rank", rank).where(F.col("sample_rank") <= k)
