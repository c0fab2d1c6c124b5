"""Sentence segmentation: paragraphs -> sentences, two engines chosen by ``segment.engine``.

Both engines first mask the periods that cannot end a sentence (Spark NLP's own abbreviation list misses
much scientific usage: "Fig. 3", "Eq. (2)", "et al. (2019)"), then split the rest:

- ``rules`` (the default): the project's own rules, as RE2 regexes over whole Arrow batches in
  ``mapInArrow`` (pyarrow.compute: one C++ call per rule and batch, no Python per row). A sentence is a
  verbatim slice of its paragraph. 10-20x faster per core than Spark NLP, and a higher boundary F1.
- ``sparknlp``: the masking as JVM regexes, then Spark NLP's rule-based SentenceDetector (needs the Spark
  NLP jars). The engine of the first releases.

Quality and speed of both: docs/segmentation.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ratio_spark.core.errors import UserError
from ratio_spark.core.schema import TABLES, Reason
from ratio_spark.core.text import trie_alternation
from ratio_spark.pipeline.normalize import letter_counts, normalize_array, normalize_column
from ratio_spark.pipeline.settings import SegmentConfig
from ratio_spark.pipeline.tables import drop_rows

MASK = "\ue000"  # sparknlp engine: stands in for a period that does not end a sentence; never survives to the output
SEMICOLON_MASK = "\ue001"  # Spark NLP always splits at ";", which scientific prose uses inside sentences

SENTENCE_COLUMNS = TABLES["sentences"].column_names


def explode_paragraphs(papers: DataFrame) -> DataFrame:
    """papers -> one row per paragraph with its section and position."""
    return (
        papers.select("paper_id", "pub_date", F.posexplode("sections").alias("section_idx", "section"))
        .select(
            "paper_id", "pub_date", "section_idx",
            F.col("section.heading").alias("section_heading"),
            F.posexplode("section.paragraphs").alias("para_idx", "para_text"),
        )
    )


def mask_abbreviation_periods(text: Column, config: SegmentConfig) -> Column:
    """Replace periods that cannot end a sentence with MASK (JVM regexes)."""
    out = text
    # Periods after a word that keeps them, one pass: each alternative captures the word and the
    # replacement writes every group back (java.util.regex appends nothing for a group that did not
    # take part) followed by MASK in place of the period.
    after_a_word = []
    if config.abbreviations:
        # A trie of the names (escaped: "e.g" must not match "eXg"): one walk per position, not 43 tries.
        names = trie_alternation(sorted({a.strip(".") for a in config.abbreviations}))
        # "Fig. 3", "Eq. (2)", "cf. Smith": the abbreviation followed by more text on the same sentence.
        after_a_word.append(rf"(?<![\w.])({names})\.(?=\s*\S)")
    if config.protect_et_al:
        # "et al. (2019)", "et al., 2019", "et al. showed": not before a capitalised new sentence.
        after_a_word.append(r"\b(et al)\.(?=\s*[\(\[,;:a-z0-9])")
    if after_a_word:
        groups = "".join(f"${i + 1}" for i in range(len(after_a_word)))
        out = F.regexp_replace(out, "|".join(after_a_word), groups + MASK)
    # Periods that cannot end a sentence, one regex pass (each alternative masks one period and looks
    # only at characters that are not periods, so one pass equals the three it replaced):
    never_an_end = "|".join([
        # runs of periods ("...", ". . ."): only the last one may end a sentence, and only before a capital;
        r"\.(?=\s?\.)|(?<=\.\s?)\.(?!\s+[A-Z])",
        # right before , ; : a period never ends a sentence ("U.S.,", "approx.:"); before a lowercase word
        # it rarely does ("esp. the", "Proc. of", "e. g."): a sentence that starts with a lowercase
        # variable or name ("x_i is ...") is merged into the previous one, a smaller loss (measured);
        r"\.(?=[,;:]|\s+[a-z])",
        # before a closing bracket or quote the sentence ends after the closer, not between the two:
        # "(as shown above.) Next", "“stop.” Then" (SegmentConfig.custom_bounds splits after the closer).
        "\\.(?=[)\\]\u201d\u2019\"'])",
    ])
    out = F.regexp_replace(out, never_an_end, MASK)
    if config.keep_semicolons:
        out = F.replace(out, F.lit(";"), F.lit(SEMICOLON_MASK))  # a plain string replace, no regex
    return out


def sentence_pipeline(config: SegmentConfig):
    """The sparknlp engine's pyspark.ml Pipeline (DocumentAssembler + SentenceDetector)."""
    from pyspark.ml import Pipeline
    from sparknlp.annotator import SentenceDetector
    from sparknlp.base import DocumentAssembler

    assembler = DocumentAssembler().setInputCol("masked_text").setOutputCol("document").setCleanupMode("disabled")
    detector = (
        SentenceDetector()
        .setInputCols(["document"])
        .setOutputCol("sentences")
        .setUseAbbreviations(config.use_abbreviations)
        .setDetectLists(config.detect_lists)
        .setMinLength(config.min_length)
        .setMaxLength(config.max_length)
    )
    if config.custom_bounds:
        detector = detector.setCustomBounds(config.custom_bounds)
    if config.split_length:
        detector = detector.setSplitLength(config.split_length)
    # Both stages are transformers; fitting on an empty frame only assembles the pipeline.
    return Pipeline(stages=[assembler, detector])


def split_sentences(paragraphs: DataFrame, config: SegmentConfig, text_col: str = "para_text",
                    with_norm_text: bool = False) -> DataFrame:
    """One row per sentence: the paragraph's columns (less ``text_col``) and sent_idx, char_start, char_end, text;
    ``with_norm_text``: the rules engine also gives norm_text and norm_flag (``normalize_array``, ``flag_array``:
    null where only the JVM's case mapping is right), which ``add_normalisation`` completes."""
    if config.engine == "sparknlp":
        return split_sentences_sparknlp(paragraphs, config, text_col)
    return split_sentences_rules(paragraphs, config, text_col, with_norm_text)


def split_sentences_sparknlp(paragraphs: DataFrame, config: SegmentConfig, text_col: str = "para_text") -> DataFrame:
    """The sparknlp engine: JVM masking, Spark NLP's SentenceDetector, the masks restored."""
    from ratio_spark.pipeline.session import has_spark_nlp

    if not has_spark_nlp(paragraphs.sparkSession):
        raise UserError("segment.engine sparknlp needs the Spark NLP jars, and this Spark session was started without "
                        "them: start it with build_spark_session(..., spark_nlp=True) (the segment stage and `run` do), "
                        'or under spark-submit pass --jars "$(ratio-spark jars --comma --set segment.engine=sparknlp)"')
    masked = paragraphs.withColumn("masked_text", mask_abbreviation_periods(F.col(text_col), config))
    pipeline = sentence_pipeline(config)
    detected = pipeline.fit(masked.limit(0)).transform(masked)
    keep = [c for c in paragraphs.columns if c != text_col]
    # posexplode_outer, then a filter on its output: with a plain posexplode Spark infers
    # "size(sentences) > 0" and pushes it below the projection, which runs the whole Spark NLP
    # pipeline three times per paragraph (measured: 3.7x slower on the ACL corpus).
    return detected.select(
        *keep,
        F.posexplode_outer("sentences").alias("sent_idx", "annotation"),
    ).filter(F.col("annotation").isNotNull()).select(
        *keep,
        "sent_idx",
        F.col("annotation.begin").alias("char_start"),
        (F.col("annotation.end") + 1).alias("char_end"),
        F.translate(F.col("annotation.result"), MASK + SEMICOLON_MASK, ".;").alias("text"),
    )


# --- the rules engine: RE2 (pyarrow.compute) over whole Arrow batches ----------------------------------------
#
# RE2 has no lookaround, so each rule captures the context it needs and writes it back. Three passes:
# 1. mask the periods of abbreviations and "et al." (before more text) with the mask;
# 2. put a split mark after every possible end: a run of periods before a capital ("... Next"), a period
#    before whitespace (not after a period, nor after a lone capital: "J. Smith"), "!" or "?" after a
#    non-space, a closing bracket or quote after an end before a capital ("(see above.) Next");
# 3. take the mark back after a period that a lowercase word or another period follows ("esp. the", ". . .").
# The mask and the mark are control characters that the batch's texts do not contain (so restoring the mask
# gives the text back exactly), and the mask replaces "." one for one, so every piece has the length of its
# span of the paragraph.
_CONTROL_CHARACTERS = tuple(chr(c) for c in range(1, 9))  # the mask and the mark: the first two a batch lacks
_CLOSERS = "[)\\]\u201d\u2019\"']"


def abbreviation_rule(config: SegmentConfig, mask: str) -> tuple[str, str] | None:
    """Pass 1 (RE2): (pattern, replacement) that replace with ``mask`` the periods of abbreviations and "et al."; None: no pass."""
    names = trie_alternation(sorted({a.strip(".") for a in config.abbreviations}))
    by_name = rf"(^|[^\w.])({names})\."  # "Fig. 3", "(cf. Smith", "e.g. on"; not "xFig."
    et_al = r"\b(et al)\.(\s*[(\[,;:a-z0-9])"  # "et al. (2019)", "et al., 2019", "et al. showed"; not "et al. The"
    if config.abbreviations and config.protect_et_al:
        return f"{by_name}|{et_al}", r"\1\2\3" + mask + r"\4"
    if config.abbreviations:
        return by_name, r"\1\2" + mask
    if config.protect_et_al:
        return et_al, r"\1" + mask + r"\2"
    return None


def boundary_rules(mask: str, mark: str) -> tuple[str, str, str, str]:
    """Passes 2 and 3 (RE2): (pattern, replacement) that put ``mark`` after each possible end, then those that
    take it back."""
    put = (r"(\.(?:\s?\.)+)(\s+[A-Z])"  # a run of periods ends a sentence only before a capital
           r"|((?:[^.A-Z\s]|\S[A-Z]|[^.]\s)\.)(\s)"  # a period: not inside a run, not after a lone capital (initial)
           r"|([^\s!?][!?]+)(\s)"
           rf"|([.!?{mask}]{_CLOSERS}+)(\s[A-Z])")
    take_back = r"\." + mark + r"(\s+[a-z]|\s\.)"
    return put, r"\1\3\5\7" + mark + r"\2\4\6\8", take_back, r".\1"


def _absent_characters(texts: pa.Array) -> tuple[str, str]:
    """Two control characters that no text of ``texts`` contains: the mask and the split mark."""
    if not pc.any(pc.match_substring_regex(texts, f"[{''.join(_CONTROL_CHARACTERS)}]")).as_py():
        return _CONTROL_CHARACTERS[0], _CONTROL_CHARACTERS[1]  # one pass: the usual case
    absent = [c for c in _CONTROL_CHARACTERS if not pc.any(pc.match_substring(texts, c)).as_py()]
    if len(absent) < 2:
        raise ValueError(f"the texts of one Arrow batch contain {len(_CONTROL_CHARACTERS) - 1} of the control "
                         "characters U+0001-U+0008: no mask is left for the rules engine")
    return absent[0], absent[1]


def split_texts(texts: pa.Array, config: SegmentConfig) -> dict[str, np.ndarray | pa.Array]:
    """Split an Arrow string array into sentences, vectorised: for each sentence the index of its text
    (``parent``), its position there (``sent_idx``), its [char_start, char_end) in code points and its
    ``text``, exactly that span of the input. Null and blank texts have no sentences."""
    mask, mark = _absent_characters(texts)
    masked = texts
    abbreviations = abbreviation_rule(config, mask)
    if abbreviations is not None:
        masked = pc.replace_substring_regex(masked, *abbreviations)
    put, put_with, take_back, take_back_with = boundary_rules(mask, mark)
    marked = pc.replace_substring_regex(pc.replace_substring_regex(masked, put, put_with), take_back, take_back_with)
    pieces = pc.split_pattern(marked, mark)
    flat = pc.list_flatten(pieces)
    parent = np.asarray(pc.list_parent_indices(pieces), dtype=np.int64)
    first_piece = np.asarray(pieces.offsets, dtype=np.int64)[:-1][parent]  # index in flat of the text's first piece

    def within_text(values: np.ndarray) -> np.ndarray:  # exclusive running sum, restarting at each text
        before = np.cumsum(values) - values
        return before - before[first_piece]

    piece_chars = np.asarray(pc.utf8_length(flat), dtype=np.int64)
    left = pc.utf8_ltrim_whitespace(flat)
    text = pc.utf8_rtrim_whitespace(left)
    text_chars = np.asarray(pc.utf8_length(text), dtype=np.int64)
    start_chars = within_text(piece_chars) + piece_chars - np.asarray(pc.utf8_length(left), dtype=np.int64)
    keep = text_chars > 0
    parent, start_chars, text_chars = parent[keep], start_chars[keep], text_chars[keep]
    text = pc.replace_substring(text.filter(pa.array(keep)), mask, ".")  # the mask only ever stands for "."

    new_text = np.ones(len(parent), dtype=bool)
    new_text[1:] = parent[1:] != parent[:-1]
    firsts = np.flatnonzero(new_text)
    sent_idx = np.arange(len(parent)) - np.repeat(firsts, np.diff(np.append(firsts, len(parent))))
    return {"parent": parent, "sent_idx": sent_idx, "char_start": start_chars, "char_end": start_chars + text_chars,
            "text": text}


def split_sentences_rules(paragraphs: DataFrame, config: SegmentConfig, text_col: str = "para_text",
                          with_norm_text: bool = False) -> DataFrame:
    """The rules engine: ``split_texts`` (and ``normalize_array``) over each Arrow batch of paragraphs (``mapInArrow``)."""
    keep = [c for c in paragraphs.columns if c != text_col]
    schema = T.StructType(
        [paragraphs.schema[c] for c in keep]
        + [T.StructField(name, T.IntegerType(), False) for name in ("sent_idx", "char_start", "char_end")]
        + [T.StructField("text", T.StringType(), False)]
        + ([T.StructField("norm_text", T.StringType(), True), T.StructField("norm_flag", T.StringType(), True)]
           if with_norm_text else [])
    )
    names = schema.fieldNames()

    def split_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            found = split_texts(batch.column(text_col), config)
            carried = batch.select(keep).take(pa.array(found["parent"])).columns if keep else []
            positions = [pa.array(found[n], pa.int32()) for n in ("sent_idx", "char_start", "char_end")]
            normalised = []
            if with_norm_text:
                norm_text = normalize_array(found["text"])
                normalised = [norm_text, flag_array(norm_text, config)]
            yield pa.RecordBatch.from_arrays([*carried, *positions, found["text"], *normalised], names=names)

    return paragraphs.mapInArrow(split_batches, schema)


def flag_array(norm_text: pa.Array, config: SegmentConfig) -> pa.Array:
    """norm_flag of ``add_normalisation`` over an Arrow array, vectorised (null where norm_text is null)."""
    length = np.asarray(pc.fill_null(pc.utf8_length(norm_text), 0), dtype=np.int64)
    few_letters = letter_counts(pc.fill_null(norm_text, "")) < length * config.min_letters_ratio
    none = pa.scalar(None, pa.string())
    flag = pc.if_else(pa.array(length == 0), pa.scalar(str(Reason.EMPTY_AFTER_CLEANING)),
                      pc.if_else(pa.array(few_letters), pa.scalar(str(Reason.MALFORMED_FEW_LETTERS)), none))
    return pc.if_else(pc.is_null(norm_text), none, flag)


def add_normalisation(sentences: DataFrame, config: SegmentConfig) -> DataFrame:
    """norm_text (the paper's B.1) and norm_flag: why a sentence is unusable, or null.

    norm_text is computed once, in its own projection, and the flag reads the column: written as
    one expression, Spark would evaluate the ten normalisation regexes once per reference. A norm_text and
    norm_flag the rules engine already gave (``normalize_array``, ``flag_array``) are kept: the JVM's rules
    run only where they are null (``coalesce`` and ``when`` evaluate lazily).
    """
    jvm = normalize_column(F.col("text"))
    given = "norm_text" in sentences.columns
    normalised = sentences.withColumn("norm_text", F.coalesce(F.col("norm_text"), jvm) if given else jvm)
    if given:  # which rows the JVM normalised, before norm_text is overwritten
        normalised = sentences.withColumn("_by_jvm", F.col("norm_text").isNull()).withColumn(
            "norm_text", F.coalesce(F.col("norm_text"), jvm))
    norm = F.col("norm_text")
    letters = F.length(F.regexp_replace(norm, r"[^\p{L}]+", ""))  # runs, not characters: one match per gap
    flag = (
        F.when(F.length(norm) == 0, F.lit(Reason.EMPTY_AFTER_CLEANING))
        .when(letters < F.length(norm) * F.lit(config.min_letters_ratio), F.lit(Reason.MALFORMED_FEW_LETTERS))
        .otherwise(F.lit(None).cast("string"))
    )
    if given and "norm_flag" in sentences.columns:
        return normalised.withColumn("norm_flag", F.when(F.col("_by_jvm"), flag).otherwise(F.col("norm_flag"))).drop("_by_jvm")
    return normalised.withColumn("norm_flag", flag).drop("_by_jvm")


def segment_papers(papers: DataFrame, config: SegmentConfig) -> DataFrame:
    """papers -> sentences, with ids that are stable across reruns."""
    sentences = add_normalisation(split_sentences(explode_paragraphs(papers), config, with_norm_text=True), config)
    sentence_id = F.concat_ws(":", "paper_id", "section_idx", "para_idx", "sent_idx")
    return sentences.withColumn("sentence_id", sentence_id).select(*SENTENCE_COLUMNS)


def papers_without_sentences(papers: DataFrame, sentences: DataFrame) -> DataFrame:
    """The papers that entered segment and have no row in ``sentences``, as drops with the reason."""
    paragraphs = F.size(F.flatten(F.transform("sections", lambda s: s["paragraphs"])))  # -1 or null: no sections
    lost = papers.join(sentences.select("paper_id").distinct(), "paper_id", "left_anti").withColumn(
        "_paragraphs", F.greatest(F.coalesce(paragraphs, F.lit(0)), F.lit(0))
    )
    reason = F.when(F.col("_paragraphs") > 0, F.lit(Reason.NO_SENTENCES_DETECTED)).otherwise(F.lit(Reason.NO_PARAGRAPHS))
    return drop_rows(lost, reason, "paper_id", text="title",
                     detail=F.concat(F.col("_paragraphs").cast("string"), F.lit(" paragraph(s)")))
