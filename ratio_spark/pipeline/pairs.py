"""Consecutive sentence pairs: the raw material of mining and of lexicon curation."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ratio_spark.pipeline.ordered_pairs import PARAGRAPH_KEY

# The sentence columns each side of a pair carries, as first_<column> / second_<column>.
PAIR_SENTENCE_COLUMNS = ("sentence_id", "sent_idx", "text", "norm_text", "norm_flag")


def consecutive_pairs(sentences: DataFrame) -> DataFrame:
    """sentences -> one row per pair (i, i+1) of sentences of the same paragraph.

    Pairs never cross a paragraph or section boundary: a marker refers back to the sentence just
    before it, which a new paragraph does not guarantee. ``lead`` over the paragraph plus a check
    that the next sent_idx is exactly i+1 keeps pairs strictly consecutive even if rows are missing.
    Columns: paper_id, pub_date, section_idx, para_idx, first_*/second_* for sentence_id,
    sent_idx, text, norm_text, norm_flag, and context_norm_text (the sentence before the first, if any).
    """
    paragraph = Window.partitionBy(*PARAGRAPH_KEY).orderBy("sent_idx")
    following = {c: F.lead(c).over(paragraph) for c in PAIR_SENTENCE_COLUMNS}
    previous_is_adjacent = F.lag("sent_idx").over(paragraph) == F.col("sent_idx") - 1
    pairs = sentences.select(
        *PARAGRAPH_KEY,
        "pub_date",
        *[F.col(c).alias(f"first_{c}") for c in PAIR_SENTENCE_COLUMNS],
        *[following[c].alias(f"second_{c}") for c in PAIR_SENTENCE_COLUMNS],
        F.when(previous_is_adjacent, F.lag("norm_text").over(paragraph)).alias("context_norm_text"),
    )
    return pairs.where(F.col("second_sent_idx") == F.col("first_sent_idx") + 1)
