"""Segmentation quality and speed: re-split ScisummNet's reference sentences and score the sentence boundaries.

ScisummNet (2019) ships 978 ACL papers already split into sentences
(``<PAPER><ABSTRACT|SECTION><S sid=...>``). For every section (and the abstract) the reference
sentences are joined with single spaces into one text; that text is split again by each segmenter:
the pipeline's engines (``ratio_spark.pipeline.segment.split_sentences``: ``rules``, the default, and
``sparknlp``) under several ``SegmentConfig`` variants, Spark NLP's SentenceDetector alone with its
defaults, and nupunkt, BlingFire and pysbd, the first two also on the text our masking left (the
``sparknlp`` engine's JVM masking). A boundary is the character offset where a sentence ends in the joined
text (the end of the text itself is not counted: every segmenter finds it). Predicted and reference
boundaries are compared per section and micro-averaged into precision, recall and F1.

The reference is itself an automatic segmentation with systematic errors (see NEVER_FINAL), so
each segmenter also gets a "corrected" score against the reference without those boundaries.

Speed: reference sentences per second on one core. The Spark segmenters run on ``--master`` (default
``local[1]``, one core) over the cached texts, timed as one Spark action that computes every output column
(a ``noop`` write), after a warm-up; the Python segmenters run in this process.

The papers are split by id into a tuning half and a test half (``paper_half``: the parity of the id's
SHA-256): settings are chosen on the tuning half and reported on the test half.

    .venv/bin/python benchmarks/segmentation_quality.py --half test --variants ENGINES   # the engines table
    .venv/bin/python benchmarks/segmentation_quality.py --half tuning   # every variant and segmenter
    .venv/bin/python benchmarks/segmentation_quality.py --limit 50 --variants ours sparknlp

Results go to ``--out`` as JSON and Markdown (default ``results/segmentation_quality.{json,md}``).
docs/segmentation.md has the figures and the remaining errors.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import random
import re
import tarfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from ratio_spark.core.provenance import shared_folder
from ratio_spark.pipeline.settings import SegmentConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ARCHIVE = shared_folder() / "corpora" / "scisummnet-2019-sentences-xml.tar.gz"
DEFAULT_OUT = REPO_ROOT / "results" / "segmentation_quality"

# The reference splits after abbreviations that never end a sentence ("shown in Fig. | 1",
# "(cf. | Figure 2)", "Grant No. | IRI-9619124", "Brown et al. | (1993)"); the corrected score
# drops these boundaries from the reference, so that a split there counts as a false alarm.
NEVER_FINAL = re.compile(
    r"(?<![\w.])(?:Figs?|Eqs?|Eqns?|Equ|Secs?|Sect|Tabs?|Alg|Nos?|Vol|pp|cf|c\.f|e\.g|i\.e|viz|vs|approx"
    r"|Dr|Prof|Mrs?|Ms)\.$"
)
ET_AL = re.compile(r"\bet al\.$")

# The pipeline's segmenter under several settings, each a set of overrides of the SegmentConfig defaults
# ("ours" is the defaults themselves: what the pipeline runs, engine rules; "sparknlp" the other engine).
VARIANTS: dict[str, dict] = {
    "ours": {},
    "sparknlp": {"engine": "sparknlp"},
    "no_abbreviation_list": {"abbreviations": []},
    "no_et_al_protection": {"protect_et_al": False},
    "sparknlp_no_abbreviation_list": {"engine": "sparknlp", "abbreviations": []},
    "sparknlp_no_et_al_protection": {"engine": "sparknlp", "protect_et_al": False},
    "sparknlp_with_spark_nlp_abbreviations": {"engine": "sparknlp", "use_abbreviations": True},
    "sparknlp_no_keep_semicolons": {"engine": "sparknlp", "keep_semicolons": False},
    "sparknlp_with_detect_lists": {"engine": "sparknlp", "detect_lists": True},
    "sparknlp_no_custom_bounds": {"engine": "sparknlp", "custom_bounds": []},
}
# Spark NLP's SentenceDetector with its own defaults, on the unmasked text.
SPARK_NLP_DEFAULTS = {
    "engine": "sparknlp", "abbreviations": [], "protect_et_al": False, "use_abbreviations": True,
    "detect_lists": True, "custom_bounds": [],
}
# Segmenters from PyPI, one Python process: out of the box, and "_masked" on the text the sparknlp engine's
# masking leaves (its JVM regexes: abbreviations, et al., runs of periods, periods before , ; : a lowercase
# word or a closer; each mask one character, so offsets hold).
PYTHON_SEGMENTERS = ["nupunkt", "nupunkt_masked", "blingfire", "blingfire_masked", "pysbd"]
BASELINES = ["spark_nlp_defaults", *PYTHON_SEGMENTERS]
# `--variants ENGINES`: the side-by-side table of docs/segmentation.md.
ENGINES = ["ours", "sparknlp", "spark_nlp_defaults", *PYTHON_SEGMENTERS]


@dataclass
class Section:
    """One abstract or section: the joined reference text and where its sentences end."""

    key: str  # "<paper id>:<n>"
    text: str
    boundaries: set[int]  # reference sentence ends, the end of the text excluded
    n_sentences: int
    doubtful: set[int]  # the reference's own errors among them (NEVER_FINAL)

    @property
    def corrected(self) -> set[int]:
        return self.boundaries - self.doubtful


# ---------------------------------------------------------------------------------------------
# Reference: reading the archive


def clean_sentence(raw: str) -> str:
    """A reference sentence as text: XML escapes undone (some are escaped twice), whitespace collapsed."""
    return " ".join(html.unescape(raw).split())


def join_sentences(sentences: list[str]) -> tuple[str, set[int]]:
    """Join sentences with single spaces; return the text and the offsets where sentences end."""
    text = " ".join(sentences)
    ends, offset = set(), 0
    for sentence in sentences:
        offset += len(sentence)
        ends.add(offset)
        offset += 1
    ends.discard(len(text))
    return text, ends


def doubtful_boundaries(text: str, boundaries: set[int]) -> set[int]:
    """Reference boundaries right after an abbreviation that never ends a sentence."""
    out = set()
    for b in boundaries:
        before, after = text[max(0, b - 12):b], text[b + 1:b + 2]
        if NEVER_FINAL.search(before) or (ET_AL.search(before) and after in "(0123456789"):
            out.add(b)
    return out


def paper_sections(paper_id: str, xml: bytes) -> list[Section]:
    """Every element with sentences of its own (ABSTRACT, SECTION, ...) becomes one section.

    The sentence with sid 0 directly under PAPER is the title. 62 papers have no SECTION at all and
    keep their whole body as sentences directly under PAPER: that body is one section.
    """
    root = ET.fromstring(xml)
    sections = []
    for element in root.iter():
        sentences = [
            clean_sentence("".join(s.itertext()))
            for s in element.findall("S")
            if not (element is root and s.get("sid") == "0")
        ]
        sentences = [s for s in sentences if s]
        if sentences:
            text, ends = join_sentences(sentences)
            key = f"{paper_id}:{len(sections)}"
            sections.append(Section(key, text, ends, len(sentences), doubtful_boundaries(text, ends)))
    return sections


HALVES = ("all", "tuning", "test")


def paper_half(paper_id: str) -> str:
    """``tuning`` or ``test``: the parity of the SHA-256 of the paper id, so a paper's half never depends on
    which other papers are read (475 tuning and 503 test papers of the 978)."""
    return "test" if int(hashlib.sha256(paper_id.encode("utf-8")).hexdigest(), 16) % 2 else "tuning"


def read_sections(archive: str | Path, limit: int | None = None, half: str = "all") -> tuple[list[str], list[Section]]:
    """Read the papers of one half (``HALVES``) straight from the tar.gz (no extraction); the first
    ``limit`` of them by paper id."""
    if half not in HALVES:
        raise ValueError(f"half {half!r} must be one of {HALVES}")
    papers: dict[str, bytes] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".xml"):
                papers[Path(member.name).stem] = tar.extractfile(member).read()
    paper_ids = sorted(p for p in papers if half == "all" or paper_half(p) == half)[:limit]
    sections = [s for paper_id in paper_ids for s in paper_sections(paper_id, papers[paper_id])]
    return paper_ids, sections


# ---------------------------------------------------------------------------------------------
# Scoring


def boundaries_from_spans(text: str, spans: list[tuple[int, int]]) -> set[int]:
    """Predicted sentence ends from (start, end) character spans; trailing whitespace and the end of
    the text are not boundaries."""
    ends = {start + len(text[start:end].rstrip()) for start, end in spans}
    return {e for e in ends if 0 < e < len(text.rstrip())}


def score(predicted: dict[str, set[int]], reference: dict[str, set[int]]) -> dict:
    """Micro-averaged boundary precision, recall and F1 over the sections of ``reference``."""
    tp = fp = fn = 0
    for key, ref in reference.items():
        pred = predicted.get(key, set())
        tp += len(pred & ref)
        fp += len(pred - ref)
        fn += len(ref - pred)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


# ---------------------------------------------------------------------------------------------
# Segmenters: each returns {"predicted": {section key: boundaries}, "seconds", "sentences", ...}


def spark_segment(spark, sections: list[Section], config: SegmentConfig, mask: bool = True) -> dict:
    """Split every section in Spark: split_sentences (``mask=False``: the SentenceDetector alone on
    the raw text). Timed as one action over the cached texts that computes every column (a noop write);
    then collected for scoring. Also counts sentences that still hold a mask character or are not exactly
    their span of the input (a period not restored, a wrong offset)."""
    from pyspark.sql import functions as F

    from ratio_spark.pipeline.segment import sentence_pipeline, split_sentences

    frame = spark.createDataFrame([(s.key, s.text) for s in sections], "key string, section_text string").cache()
    frame.count()
    if mask:
        sentences = split_sentences(frame, config, "section_text")
    else:
        raw = frame.withColumn("masked_text", F.col("section_text"))
        sentences = (
            sentence_pipeline(config).fit(raw.limit(0)).transform(raw)
            # explode_outer + filter, as in split_sentences: a plain explode lets Spark push
            # "size(sentences) > 0" down and run the annotator more than once per text.
            .select("key", F.explode_outer("sentences").alias("a"))
            .filter(F.col("a").isNotNull())
            .select("key", F.col("a.begin").alias("char_start"), (F.col("a.end") + 1).alias("char_end"),
                    F.col("a.result").alias("text"))
        )
    sentences = sentences.select("key", "char_start", "char_end", "text")
    started = time.perf_counter()
    sentences.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    rows = sentences.collect()
    frame.unpersist()

    texts = {s.key: s.text for s in sections}
    spans: dict[str, list[tuple[int, int]]] = {}
    with_mask = not_verbatim = 0
    for row in rows:
        spans.setdefault(row.key, []).append((row.char_start, row.char_end))
        with_mask += any(ch in row.text for ch in PRIVATE_OR_CONTROL)
        not_verbatim += row.text != texts[row.key][row.char_start:row.char_end]
    return {
        "predicted": {key: boundaries_from_spans(texts[key], s) for key, s in spans.items()},
        "seconds": seconds, "sentences": len(rows),
        "sentences_with_mask": with_mask, "sentences_not_verbatim": not_verbatim,
    }


PRIVATE_OR_CONTROL = "\ue000\ue001" + "".join(chr(c) for c in range(1, 9))  # the masks of both engines


def masked_texts(spark, sections: list[Section]) -> list[str]:
    """Each section's text as the sparknlp engine's masking leaves it (same length: one mask per character)."""
    from pyspark.sql import functions as F

    from ratio_spark.pipeline.segment import mask_abbreviation_periods

    frame = spark.createDataFrame([(i, s.text) for i, s in enumerate(sections)], "i int, text string")
    rows = frame.select("i", mask_abbreviation_periods(F.col("text"), SegmentConfig()).alias("masked")).collect()
    masked = dict(rows)
    return [masked[i] for i in range(len(sections))]


def python_splitter(name: str):
    """A function text -> sentences of the PyPI segmenter ``name`` (without "_masked")."""
    if name == "pysbd":
        import pysbd

        return pysbd.Segmenter(language="en", clean=False).segment
    if name == "nupunkt":
        import nupunkt

        return nupunkt.sent_tokenize
    if name == "blingfire":
        import blingfire

        return lambda text: blingfire.text_to_sentences(text).split("\n")
    raise ValueError(name)


def python_segment(name: str, sections: list[Section], texts: list[str] | None = None) -> dict:
    """Split every section with a PyPI segmenter (one process), locating each returned sentence in the text in
    order; ``texts``: what to split instead of the sections' own texts (the masked ones, same offsets)."""
    split = python_splitter(name)
    texts = texts or [s.text for s in sections]
    predicted, n_sentences, unaligned = {}, 0, 0
    started = time.perf_counter()
    for section, text in zip(sections, texts):
        spans, offset = [], 0
        for sentence in split(text):
            sentence = sentence.strip()
            start = text.find(sentence, offset)
            if not sentence or start < 0:
                unaligned += bool(sentence)
                continue
            spans.append((start, start + len(sentence)))
            offset = start + len(sentence)
        n_sentences += len(spans)
        predicted[section.key] = boundaries_from_spans(section.text, spans)
    seconds = time.perf_counter() - started
    return {"predicted": predicted, "seconds": seconds, "sentences": n_sentences, "unaligned_sentences": unaligned}


# ---------------------------------------------------------------------------------------------
# The benchmark


def sample_errors(predicted: dict[str, set[int]], sections: list[Section], n: int = 20, width: int = 40) -> list[dict]:
    """A random sample of missed and spurious boundaries (against the corrected reference), in context."""
    out = []
    for section in sections:
        pred, ref = predicted.get(section.key, set()), section.corrected
        for kind, offsets in (("missed", ref - pred), ("spurious", pred - ref)):
            for offset in sorted(offsets):
                context = section.text[max(0, offset - width):offset] + " | " + section.text[offset:offset + width]
                out.append({"section": section.key, "kind": kind, "context": context})
    return random.Random(0).sample(out, min(n, len(out)))


def evaluate(run: dict, sections: list[Section], n_errors: int) -> dict:
    """Scores (against the reference and the corrected reference) and a few errors of one run."""
    result = score(run["predicted"], {s.key: s.boundaries for s in sections})
    result["corrected"] = score(run["predicted"], {s.key: s.corrected for s in sections})
    result.update({k: v for k, v in run.items() if k != "predicted"})
    result["errors"] = sample_errors(run["predicted"], sections, n_errors)
    return result


def run_benchmark(
    spark, sections: list[Section], variants: list[str] | None = None, n_errors: int = 20, cores: int = 1,
) -> dict:
    """Score the segmenters ``variants`` on ``sections``: {name: result}; ``cores``: the Spark master's."""
    names = list(VARIANTS) + BASELINES if variants is None else variants
    reference_sentences = sum(s.n_sentences for s in sections)
    results, masked = {}, None
    if spark is not None:
        # Warm the JVM side (annotator classes, code generation, the Python workers) so the first runtime is comparable.
        for engine in {VARIANTS[n].get("engine", "rules") for n in names if n in VARIANTS} | {"rules"}:
            spark_segment(spark, sections[:5], SegmentConfig(engine=engine))
    for name in names:
        if name in PYTHON_SEGMENTERS:
            if name.endswith("_masked") and masked is None:
                masked = masked_texts(spark, sections)
            run = python_segment(name.removesuffix("_masked"), sections, masked if name.endswith("_masked") else None)
            run["cores"] = 1
        elif name == "spark_nlp_defaults":
            run = spark_segment(spark, sections, SegmentConfig(**SPARK_NLP_DEFAULTS), mask=False)
            run["cores"] = cores
        else:
            run = spark_segment(spark, sections, SegmentConfig(**VARIANTS[name]))
            run["overrides"] = VARIANTS[name]
            run["cores"] = cores
        run["sentences_per_second_per_core"] = reference_sentences / run["seconds"] / run["cores"]
        results[name] = evaluate(run, sections, n_errors)
        print(f"{name}: F1 {results[name]['f1']:.4f}, corrected {results[name]['corrected']['f1']:.4f}, "
              f"{run['sentences_per_second_per_core']:,.0f} sentences/s per core", flush=True)
    return results


def markdown_table(results: dict) -> str:
    lines = [
        "| segmenter | precision | recall | F1 | F1, corrected reference | missed | spurious | sentences | seconds "
        "| sentences/s per core |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['precision']:.4f} | {r['recall']:.4f} | {r['f1']:.4f} | {r['corrected']['f1']:.4f} "
            f"| {r['fn']} | {r['fp']} | {r['sentences']} | {r['seconds']:.1f} "
            f"| {r['sentences_per_second_per_core']:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", default=str(DEFAULT_ARCHIVE), help="ScisummNet sentences tar.gz")
    parser.add_argument("--half", choices=HALVES, default="all",
                        help="the papers of one half (tuning: choose settings; test: report them)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N papers (by id) of the half")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="results path; .json and .md are written")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS) + BASELINES + ["ENGINES"],
                        help="default: all; ENGINES: " + " ".join(ENGINES))
    parser.add_argument("--master", default="local[1]", help="the Spark master (local[1]: speed per core)")
    args = parser.parse_args(argv)
    if args.variants and "ENGINES" in args.variants:
        args.variants = list(dict.fromkeys(v for name in args.variants for v in (ENGINES if name == "ENGINES" else [name])))

    from ratio_spark.config import load_config
    from ratio_spark.pipeline.session import build_spark_session

    paper_ids, sections = read_sections(args.archive, args.limit, args.half)
    summary = {
        "archive": Path(args.archive).name, "half": args.half, "papers": len(paper_ids), "sections": len(sections),
        "reference_sentences": sum(s.n_sentences for s in sections),
        "reference_boundaries": sum(len(s.boundaries) for s in sections),
        "doubtful_reference_boundaries": sum(len(s.doubtful) for s in sections),
    }
    print(", ".join(f"{k}: {v}" for k, v in summary.items()))

    spark_config = load_config(None, ["spark.conf.spark.ui.showConsoleProgress=false", f"spark.master={args.master}"]).spark
    needs_spark = args.variants is None or set(args.variants) - {"pysbd", "nupunkt", "blingfire"}
    spark = build_spark_session(spark_config, spark_nlp=True) if needs_spark else None  # both engines
    summary["spark_master"] = spark_config.master
    summary["segment_config"] = SegmentConfig().model_dump()
    cores = int(args.master.split("[")[1].rstrip("]")) if args.master.startswith("local[") and "*" not in args.master else 1
    summary["cores"] = cores
    summary["load_average"] = os.getloadavg()
    summary["results"] = run_benchmark(spark, sections, args.variants, cores=cores)
    summary["load_average_after"] = os.getloadavg()
    if spark is not None:
        spark.stop()

    table = markdown_table(summary["results"])
    print(table)
    out = Path(args.out)
    out = out.with_suffix("") if out.suffix in (".json", ".md") else out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    header = (
        f"# Segmentation quality\n\n{summary['papers']} ScisummNet papers"
        f"{'' if args.half == 'all' else f' ({args.half} half)'}, {summary['sections']} sections, "
        f"{summary['reference_sentences']} reference sentences, {summary['reference_boundaries']} boundaries "
        f"({summary['doubtful_reference_boundaries']} of them reference errors, dropped in the corrected score); "
        f"Spark master {spark_config.master}.\n\n"
    )
    out.with_suffix(".md").write_text(header + table + "\n")
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
