"""Mine query-gold pairs: consecutive sentences whose second sentence opens with a lexicon marker.

(Implementation in progress; the table contract below is what later stages rely on.)
"""

from __future__ import annotations

from pyspark.sql import types as T

# The ``mined_pairs`` table: one row per consecutive pair whose second sentence opens with a marker.
# role = move: a query-gold pair of ``move``; role = distractor: the second sentence, its marker
# removed, is a distractor of ``category`` (its query_* columns describe the first sentence, unused).
MINED_PAIRS_SCHEMA = T.StructType(
    [
        T.StructField("pair_id", T.StringType(), False),  # stable: hash of the two sentence ids
        T.StructField("paper_id", T.StringType(), False),
        T.StructField("pub_date", T.DateType(), True),
        T.StructField("role", T.StringType(), False),  # move | distractor
        T.StructField("move", T.StringType(), True),  # address | broaden | specify (role = move)
        T.StructField("category", T.StringType(), True),  # contrast | similarity | ... (role = distractor)
        T.StructField("marker", T.StringType(), False),  # the matched text, extension included, normalised
        T.StructField("marker_entry", T.StringType(), False),  # the lexicon entry (the prefix of an extension)
        T.StructField("marker_source", T.StringType(), False),  # manual | extension | llm | pattern
        T.StructField("lexicon_version", T.StringType(), False),
        T.StructField("query_sentence_id", T.StringType(), False),
        T.StructField("gold_sentence_id", T.StringType(), False),
        T.StructField("context_text", T.StringType(), True),  # the sentence before the query, normalised
        T.StructField("query_text", T.StringType(), False),  # normalised, leading discourse marker removed
        T.StructField("query_text_original", T.StringType(), False),
        T.StructField("gold_text", T.StringType(), False),  # normalised, marker and ordinal prefix removed
        T.StructField("gold_text_original", T.StringType(), True),
    ]
)
