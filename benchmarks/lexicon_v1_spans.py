"""Review sheets for lexicon v1: the most frequent sentence-opening spans and seeded sample pairs.

Reproduces the evidence behind ``lexicons/v1`` (the paper's manual curation, §4.1 and appendix A):
counts the span before the first comma (at most seven words) over the ACL/EMNLP 2014-2018 sentences
table and, optionally, ScisummNet; prints the top spans; and writes, for each of the top spans, a CSV
of k randomly sampled consecutive pairs whose second sentence opens with the span and a comma. It also
writes one sheet per candidate extendable prefix ("to address" + up to five words + comma), so the
choice of extendable connectives can be re-checked. Same inputs and seed, same sheets.

    .venv/bin/python benchmarks/lexicon_v1_spans.py /tmp/lexicon-v1-review \\
        --sentences /tmp/acl-tables/sentences --top 400 --k 15 --seed 2014

Output folder: spans.csv (rank, span, counts, share of paragraph-initial openings), sheets/NNN_<span>.csv,
extensions/<prefix>.csv, and README.txt with the arguments used.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ratio_spark.config import load_config
from ratio_spark.core.provenance import shared_folder
from ratio_spark.lexicon.curation.extensions import Prefix, sample_extensions
from ratio_spark.pipeline.segment import SENTENCE_COLUMNS, add_normalisation
from ratio_spark.pipeline.session import build_spark_session
from ratio_spark.pipeline.pairs import consecutive_pairs
from ratio_spark.lexicon.curation.spans import opening_span, opening_spans, sample_pairs_for_spans

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SCISUMMNET = shared_folder() / "corpora" / "scisummnet-2019-sentences-xml.tar.gz"

# Prefixes considered as extendable connectives (appendix A); each gets a review sheet of its extensions.
CANDIDATE_PREFIXES = [
    "to address", "to mitigate", "to overcome", "to solve", "to tackle", "to alleviate", "to remedy",
    "to handle", "to deal with", "to avoid", "to resolve", "to circumvent", "to counter", "to fix",
    "to reduce", "to prevent", "to cope with", "to combat", "to compensate for", "to account for",
    "to illustrate", "to generalize", "more specifically", "for instance", "for example",
]
MAX_EXTENSION_WORDS = 5


def read_scisummnet(spark: SparkSession, archive: Path) -> DataFrame:
    """ScisummNet's <S> sentences as a sentences table: one paragraph per <ABSTRACT>/<SECTION>.

    ScisummNet has no paragraphs, so consecutive sentences of a section count as consecutive; the
    normalisation and flags are the segment stage's own (``add_normalisation``).
    """
    rows = []
    with tarfile.open(archive) as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(".xml"):
                continue
            data = tar.extractfile(member).read()
            try:
                root = ET.fromstring(data)
            except ET.ParseError:
                from lxml import etree  # tolerate the few malformed files

                root = ET.fromstring(etree.tostring(etree.fromstring(data, etree.XMLParser(recover=True))))
            paper_id = "scisummnet:" + Path(member.name).stem
            blocks = [e for e in root if e.tag in ("ABSTRACT", "SECTION")]
            for section_idx, block in enumerate(blocks):
                heading = block.get("title") or block.tag.lower()
                for sent_idx, s in enumerate(block.iter("S")):
                    text = re.sub(r"\s+", " ", "".join(s.itertext())).strip()
                    if text:
                        rows.append((paper_id, section_idx, heading, 0, sent_idx, text))
    schema = "paper_id string, section_idx int, section_heading string, para_idx int, sent_idx int, text string"
    frame = spark.createDataFrame(rows, schema)
    frame = (
        frame.withColumn("pub_date", F.lit(None).cast("date"))
        .withColumn("char_start", F.lit(None).cast("int"))
        .withColumn("char_end", F.lit(None).cast("int"))
        .withColumn("sentence_id", F.concat_ws(":", "paper_id", "section_idx", "para_idx", "sent_idx"))
    )
    return add_normalisation(frame, load_config(None, []).segment).select(*SENTENCE_COLUMNS)


def span_table(corpora: dict[str, DataFrame], max_words: int) -> DataFrame:
    """One row per span: occurrences per corpus, total, and paragraph-initial openings (cannot refer back)."""
    table = None
    for name, sentences in corpora.items():
        counts = opening_spans(sentences, max_words).withColumnRenamed("occurrences", name)
        table = counts if table is None else table.join(counts, "span", "full_outer")
    table = table.fillna(0, subset=list(corpora))
    table = table.withColumn("total", sum((F.col(n) for n in corpora), F.lit(0)))
    everything = _union(corpora.values())
    initial = (
        everything.where(F.col("norm_flag").isNull() & (F.col("sent_idx") == 0))
        .select(opening_span(F.col("norm_text"), max_words).alias("span"))
        .where(F.col("span").isNotNull())
        .groupBy("span")
        .agg(F.count(F.lit(1)).alias("paragraph_initial"))
    )
    return table.join(initial, "span", "left").fillna(0, subset=["paragraph_initial"])


def _union(frames) -> DataFrame:
    frames = list(frames)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "span"


def _write_csv(path: Path, header: list[str], rows) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


SHEET_COLUMNS = ["sample_rank", "paper_id", "first_sentence_id", "second_sentence_id", "first_text", "second_text"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="/tmp/lexicon-v1-review", help="folder for the review sheets")
    parser.add_argument("--sentences", default="/tmp/acl-tables/sentences", help="Delta sentences table")
    parser.add_argument("--scisummnet", default=str(DEFAULT_SCISUMMNET), help="ScisummNet archive, or 'none'")
    parser.add_argument("--top", type=int, default=400, help="spans to review")
    parser.add_argument("--k", type=int, default=15, help="sampled pairs per span")
    parser.add_argument("--seed", type=int, default=2014)
    parser.add_argument("--max-words", type=int, default=7)
    parser.add_argument("--print", dest="print_n", type=int, default=400, help="spans to print")
    args = parser.parse_args(argv)

    out = Path(args.out)
    (out / "sheets").mkdir(parents=True, exist_ok=True)
    (out / "extensions").mkdir(parents=True, exist_ok=True)
    spark = build_spark_session(load_config(None, []).spark)

    corpora = {"acl": spark.read.format("delta").load(args.sentences)}
    if args.scisummnet.lower() != "none":
        corpora["scisummnet"] = read_scisummnet(spark, Path(args.scisummnet)).cache()
    for name, frame in corpora.items():
        print(f"{name}: {frame.select('paper_id').distinct().count()} papers, {frame.count()} sentences")

    spans = span_table(corpora, args.max_words).orderBy(F.desc("total"), F.asc("span")).limit(args.top)
    top = spans.collect()
    names = list(corpora)
    header = ["rank", "span", *names, "total", "paragraph_initial"]
    _write_csv(out / "spans.csv", header,
               [[i, r.span, *[r[n] for n in names], r.total, r.paragraph_initial] for i, r in enumerate(top, 1)])
    print(f"\n{'rank':>4}  {'total':>6}  " + "  ".join(f"{n:>10}" for n in names) + "  para-initial  span")
    for i, r in enumerate(top[: args.print_n], 1):
        counts = "  ".join(f"{r[n]:>10}" for n in names)
        print(f"{i:>4}  {r.total:>6}  {counts}  {r.paragraph_initial / max(r.total, 1):>12.0%}  {r.span}")

    pairs = consecutive_pairs(_union(corpora.values())).cache()
    span_frame = spark.createDataFrame([(r.span,) for r in top], "span string")
    samples = sample_pairs_for_spans(pairs, span_frame, args.k, args.seed).select("span", *SHEET_COLUMNS).collect()
    by_span: dict[str, list] = {}
    for row in samples:
        by_span.setdefault(row.span, []).append(row)
    for i, r in enumerate(top, 1):
        rows = sorted(by_span.get(r.span, []), key=lambda x: x.sample_rank)
        _write_csv(out / "sheets" / f"{i:03d}_{_slug(r.span)}.csv", SHEET_COLUMNS, [[x[c] for c in SHEET_COLUMNS] for x in rows])

    # The move only labels the sample; every candidate prefix is sampled the same way.
    extension_rows = sample_extensions(pairs, [Prefix(p, "address") for p in CANDIDATE_PREFIXES], args.k, args.seed).select(
        "prefix", "span", *SHEET_COLUMNS
    ).collect()
    for prefix in CANDIDATE_PREFIXES:
        rows = sorted((x for x in extension_rows if x.prefix == prefix), key=lambda x: x.sample_rank)
        _write_csv(out / "extensions" / f"{_slug(prefix)}.csv", ["span", *SHEET_COLUMNS],
                   [[x.span, *[x[c] for c in SHEET_COLUMNS]] for x in rows])
    extension_counts = (
        pairs.where(F.col("second_norm_flag").isNull())
        .select(opening_span(F.col("second_norm_text"), None).alias("span"))
        .where(F.col("span").isNotNull())
        .groupBy("span").count().collect()
    )
    print("\nextendable prefix candidates: pairs whose second sentence opens with prefix (+ up to 5 words) + comma")
    for prefix in CANDIDATE_PREFIXES:
        n_words = len(prefix.split(" "))
        hits = [
            (r.span, r["count"]) for r in extension_counts
            if (r.span == prefix or r.span.startswith(prefix + " ")) and len(r.span.split(" ")) <= n_words + MAX_EXTENSION_WORDS
        ]
        distinct = len(hits)
        print(f"  {prefix:<20} {sum(c for _, c in hits):>6} pairs, {distinct:>5} distinct openings")

    (out / "README.txt").write_text(
        "Written by benchmarks/lexicon_v1_spans.py with " + " ".join(sys.argv[1:] if argv is None else argv) + "\n"
        f"sentences={args.sentences} scisummnet={args.scisummnet} top={args.top} k={args.k} seed={args.seed} "
        f"max_words={args.max_words}\n",
        encoding="utf-8",
    )
    print(f"\nreview sheets: {out}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
