"""Sentence segmentation with Spark NLP's rule-based SentenceDetector, entirely in the JVM.

Spark NLP's built-in abbreviation list misses much scientific usage ("Fig. 3", "Eq. (2)", "Sec. 4",
"et al. (2019)"), so the periods of configured abbreviations are masked with a private-use
character before detection and restored after it; the mask, the detector and the normalisation are
all JVM expressions, with no Python on the path. Tuning is measured in docs/segmentation.md.
"""

from __future__ import annotations

from pyspark.ml import Pipeline
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ratio_spark.core.config import SegmentConfig
from ratio_spark.core.schema import TABLES, Reason
from ratio_spark.core.text import trie_alternation
from ratio_spark.pipeline.normalize import normalize_column
from ratio_spark.pipeline.tables import drop_rows

MASK = "\ue000"  # stands in for a period that does not end a sentence; never survives to the output
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


def sentence_pipeline(config: SegmentConfig) -> Pipeline:
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


def split_sentences(paragraphs: DataFrame, config: SegmentConfig, text_col: str = "para_text") -> DataFrame:
    """Add one row per sentence: (sent_idx, char_start, char_end, text) to the paragraph's columns."""
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


def add_normalisation(sentences: DataFrame, config: SegmentConfig) -> DataFrame:
    """norm_text (the paper's B.1) and norm_flag: why a sentence is unusable, or null.

    norm_text is computed once, in its own projection, and the flag reads the column: written as
    one expression, Spark would evaluate the ten normalisation regexes once per reference.
    """
    normalised = sentences.withColumn("norm_text", normalize_column(F.col("text")))
    norm = F.col("norm_text")
    letters = F.length(F.regexp_replace(norm, r"[^\p{L}]", ""))
    flag = (
        F.when(F.length(norm) == 0, F.lit(Reason.EMPTY_AFTER_CLEANING))
        .when(letters < F.length(norm) * F.lit(config.min_letters_ratio), F.lit(Reason.MALFORMED_FEW_LETTERS))
        .otherwise(F.lit(None).cast("string"))
    )
    return normalised.withColumn("norm_flag", flag)


def segment_papers(papers: DataFrame, config: SegmentConfig) -> DataFrame:
    """papers -> sentences, with ids that are stable across reruns."""
    sentences = add_normalisation(split_sentences(explode_paragraphs(papers), config), config)
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
