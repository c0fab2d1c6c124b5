"""Extendable connectives (paper appendix A): every extension of a chosen prefix up to a comma.

For a prefix such as ``to address``, every clean sentence that opens with the prefix, then at most
five more words, then a comma, gives an extension (``to address this potential bias``). Extensions
are counted over the corpus (as sentence openings, and as second sentences of consecutive pairs,
which is what mining can use) and become candidates of the prefix's move, with the prefix, the
extension words and the counts in their provenance. The word rule is the matcher's
(``ratio_spark.lexicon.matcher``): words are runs without spaces or commas, so the counts here are what
mining with the prefix as an extendable marker would see.

Prefixes come from a TSV (``prefix``, ``move``, optional ``note``), from ``--prefix "to address=address"``
or from the extendable markers of an existing lexicon.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ratio_spark.core.schema import MOVES
from ratio_spark.core.tsv import read_tsv
from ratio_spark.lexicon.loader import Lexicon
from ratio_spark.lexicon.curation.formats import Candidate, LexiconInputError, normalise_marker
from ratio_spark.lexicon.curation.spans import opening_span

MAX_EXTENSION_WORDS = 5


@dataclass(frozen=True)
class Prefix:
    prefix: str
    move: str
    note: str = ""


def parse_prefix_arg(value: str) -> Prefix:
    """``"to address=address"`` -> Prefix; a clear error for anything else."""
    text, sep, move = value.rpartition("=")
    if not sep or not text.strip():
        raise LexiconInputError(f"--prefix {value!r} must look like 'to address=address'")
    return _checked(text, move, f"--prefix {value!r}")


def _checked(text: str, move: str, where: str) -> Prefix:
    prefix, move = normalise_marker(text), move.strip().lower()
    if not prefix or "," in prefix:
        raise LexiconInputError(f"{where}: prefix {text!r} is empty or contains a comma")
    if move not in MOVES:
        raise LexiconInputError(f"{where}: move {move!r} must be one of {MOVES}")
    return Prefix(prefix, move)


def read_prefixes(path: str | Path) -> list[Prefix]:
    """Read a prefixes TSV: prefix, move, note (optional)."""
    path = Path(path)
    out, problems = [], []
    for line_no, row in read_tsv(path, ("prefix", "move"), error=LexiconInputError):
        if not row["prefix"]:
            continue
        try:
            p = _checked(row["prefix"], row["move"], f"{path.name}:{line_no}")
            out.append(Prefix(p.prefix, p.move, row.get("note", "")))
        except LexiconInputError as exc:
            problems.append(str(exc))
    if problems:
        raise LexiconInputError(f"{path} has {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return out


def prefixes_from_lexicon(lexicon: Lexicon) -> list[Prefix]:
    return [Prefix(m.text, m.label, f"extendable in lexicon {lexicon.version}") for m in lexicon.markers if m.is_move and m.extendable]


def _prefix_frame(spark, prefixes: list[Prefix]) -> DataFrame:
    rows = [(p.prefix, p.move, len(p.prefix.split(" "))) for p in prefixes]
    return spark.createDataFrame(rows, "prefix string, move string, prefix_words int")


def _extends(span: F.Column, max_words: int) -> F.Column:
    """Join condition: ``span`` is the prefix, or the prefix + space + at most max_words more words."""
    words = F.size(F.split(span, " "))
    return ((span == F.col("prefix")) | span.startswith(F.concat(F.col("prefix"), F.lit(" ")))) & (
        words <= F.col("prefix_words") + max_words
    )


def collect_extensions(sentences: DataFrame, pairs: DataFrame, prefixes: list[Prefix],
                       max_words: int = MAX_EXTENSION_WORDS) -> DataFrame:
    """(prefix, move, extension, sentences, pairs): every attested extension of every prefix, with counts.

    ``sentences``: clean sentences that open with it and a comma; ``pairs``: of those, the ones that
    are the second sentence of a consecutive pair (what mining sees, before its drops). The argument
    ``pairs`` is the consecutive pairs of ``sentences`` (``ratio_spark.pipeline.pairs.consecutive_pairs``,
    applied by the caller: the lexicon package sits below the pipeline).
    """
    wanted = F.broadcast(_prefix_frame(sentences.sparkSession, prefixes))
    opened = sentences.where(F.col("norm_flag").isNull()).select(
        opening_span(F.col("norm_text"), None).alias("span"), "sentence_id"
    ).where(F.col("span").isNotNull())
    seconds = pairs.where(F.col("second_norm_flag").isNull()).select(
        F.col("second_sentence_id").alias("sentence_id"), F.lit(1).alias("is_second")
    )
    matched = opened.join(wanted, _extends(F.col("span"), max_words)).join(seconds, "sentence_id", "left")
    return (
        matched.groupBy("prefix", "move", F.col("span").alias("extension"))
        .agg(F.count(F.lit(1)).alias("sentences"), F.count("is_second").alias("pairs"))
        .orderBy("prefix", F.desc("sentences"), "extension")
    )


def sample_extensions(pairs: DataFrame, prefixes: list[Prefix], k: int, seed: int, max_words: int = MAX_EXTENSION_WORDS) -> DataFrame:
    """k seeded consecutive pairs per prefix whose second sentence opens with an extension and a comma.

    ``pairs`` is ``ratio_spark.pipeline.pairs.consecutive_pairs``. The order is a seeded hash of the sentence ids
    (as ``spans.sample_pairs_for_spans``), so the sample does not depend on partitioning.
    """
    wanted = F.broadcast(_prefix_frame(pairs.sparkSession, prefixes))
    opened = pairs.where(F.col("second_norm_flag").isNull()).withColumn(
        "span", opening_span(F.col("second_norm_text"), None)
    )
    matched = opened.join(wanted, _extends(F.col("span"), max_words))
    order = F.xxhash64(F.lit(seed), F.col("first_sentence_id"), F.col("second_sentence_id"))
    rank = F.row_number().over(Window.partitionBy("prefix").orderBy(order, "second_sentence_id"))
    return matched.withColumn("sample_rank", rank).where(F.col("sample_rank") <= k)


def extension_candidates(rows: list, prefixes: list[Prefix], corpus: str = "") -> list[Candidate]:
    """Collected extensions (rows of ``collect_extensions``) as candidates of the prefix's move.

    A chosen prefix with no attested extension still gets one candidate, itself, with zero counts:
    it was chosen by hand, and the build keeps it as an extendable marker for other corpora.
    """
    out = []
    attested = set()
    for r in rows:
        rest = r["extension"][len(r["prefix"]):].strip()
        provenance = {"prefix": r["prefix"], "extension": rest, "sentences": int(r["sentences"]), "pairs": int(r["pairs"])}
        if corpus:
            provenance["corpus"] = corpus
        out.append(Candidate(r["extension"], r["move"], "extension", provenance))
        attested.add(r["prefix"])
    for p in prefixes:
        if p.prefix not in attested:
            provenance = {"prefix": p.prefix, "extension": "", "sentences": 0, "pairs": 0, **({"corpus": corpus} if corpus else {})}
            out.append(Candidate(p.prefix, p.move, "extension", provenance))
    return out
