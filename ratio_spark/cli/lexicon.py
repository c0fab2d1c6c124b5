"""lexicon: build marker lexicons (span review, extensions, patterns, build, Table 4 report).

    ratio-spark lexicon spans      --conf C --top 400 --per-span 15 --out DIR     (Spark)
    ratio-spark lexicon extensions --conf C --prefixes P.tsv --out extension.tsv  (Spark)
    ratio-spark lexicon patterns   --out pattern.tsv
    ratio-spark lexicon accept     --decisions D.tsv --out spans.tsv
    ratio-spark lexicon build      --out lexicons/v4 --candidates DIR --decisions D.tsv --base v3
    ratio-spark lexicon report     --conf C --lexicon lexicons/v4 --against mined_pairs --out DIR  (Spark)

The Spark subcommands read the ``sentences`` (or ``mined_pairs``) table of the configuration's
``tables.root`` and build their own session from ``spark:`` (``ratio_spark.pipeline.session``); under
spark-submit, ``jobs/lexicon_*.py`` call this same command.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ratio_spark.core.schema import DEFAULT_MAX_EXTENSION_WORDS
from ratio_spark.cli.common import comma_list

SPARK_SUBCOMMANDS = ("spans", "extensions", "report")


def _log(message: str) -> None:
    print(f"[ratio-spark lexicon {time.strftime('%H:%M:%S')}] {message}", flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ratio_spark.cli.common import add_config_args

    sub = parser.add_subparsers(dest="lexicon_command", required=True, metavar="{spans,extensions,patterns,accept,build,report}")

    spans = sub.add_parser("spans", help="frequent sentence-opening spans with sampled pairs: review sheets and a decisions file")
    add_config_args(spans)
    spans.add_argument("--out", required=True, help="folder for spans.csv, pairs.csv, review.html, decisions.tsv")
    spans.add_argument("--top", type=int, help="most frequent spans to review (default 400, the paper's; with --phrases: all)")
    spans.add_argument("--per-span", type=int, default=15, help="sampled consecutive pairs per span (paper: 15)")
    spans.add_argument("--seed", type=int, default=0, help="sampling seed (same seed, same pairs)")
    spans.add_argument("--max-words", type=int, default=7, help="longest span counted, in words (paper: 7)")
    spans.add_argument("--lexicon", help="mark (and pre-fill decisions for) spans this lexicon already has; default: mining.lexicon")
    spans.add_argument("--no-lexicon", action="store_true", help="do not mark spans already in a lexicon")
    spans.add_argument("--phrases", help="review these phrases instead of the top spans: a candidates or decisions TSV, "
                       "or a text file with one phrase a line; only attested ones get sheets (--top caps them)")
    spans.add_argument("--title", default="", help="title of review.html")

    ext = sub.add_parser("extensions", help="every extension (up to a comma) of extendable prefixes, with counts, as candidates")
    add_config_args(ext)
    ext.add_argument("--out", required=True, help="candidates TSV to write (e.g. lexicons/v2/candidates/extension.tsv)")
    ext.add_argument("--prefixes", help="TSV with columns prefix, move (, note)")
    ext.add_argument("--prefix", action="append", default=[], metavar="PREFIX=MOVE", help='e.g. --prefix "to address=address" (repeatable)')
    ext.add_argument("--from-lexicon", help="also take the extendable markers of this lexicon as prefixes")
    ext.add_argument("--max-words", type=int, default=5, help="words after the prefix, up to the comma (paper: 5)")
    ext.add_argument("--sheets", help="also write review sheets (sampled pairs per prefix) to this folder")
    ext.add_argument("--per-prefix", type=int, default=15, help="sampled pairs per prefix in the sheets")
    ext.add_argument("--seed", type=int, default=0)
    ext.add_argument("--corpus", default="", help="corpus name recorded in provenance")

    pat = sub.add_parser("patterns", help="expand Hearst-style templates with inflected term lists into candidates")
    pat.add_argument("--out", required=True, help="candidates TSV to write (e.g. lexicons/v2/candidates/pattern.tsv)")
    pat.add_argument("--patterns", help="pattern folder with templates.tsv and terms/ (default: the shipped lexicons/patterns)")
    pat.add_argument("--moves", default="address,broaden,specify", help="comma-separated moves to expand")
    pat.add_argument("--templates", help="comma-separated template ids (default: all)")
    pat.add_argument("--summary-json")

    acc = sub.add_parser("accept", help="accepted span decisions -> candidates TSV (source manual)")
    acc.add_argument("--decisions", required=True, action="append", help="decisions TSV (repeatable)")
    acc.add_argument("--out", required=True, help="candidates TSV to write (e.g. lexicons/v2/candidates/spans.tsv)")

    bld = sub.add_parser("build", help="merge candidates, decisions and a base lexicon into a lexicon version")
    bld.add_argument("--out", required=True, help="lexicon folder to write (e.g. lexicons/v2)")
    bld.add_argument("--candidates", help="folder of candidates TSVs (spans, extension, llm, pattern; labels.tsv)")
    bld.add_argument("--candidate-file", action="append", default=[], help="an extra candidates TSV (repeatable)")
    bld.add_argument("--decisions", action="append", default=[], help="decisions TSV (repeatable)")
    bld.add_argument("--base", help="earlier lexicon version to start from (e.g. v1)")
    bld.add_argument("--extensions", choices=("prefix", "enumerate"), default="prefix",
                     help="prefix: one extendable marker per prefix (default); enumerate: every attested extension")
    bld.add_argument("--require-decision", action="append", default=[], metavar="SOURCE",
                     help="keep this source's candidates only where a decision accepts them (repeatable)")
    bld.add_argument("--ordinals", help="ordinals.txt to use (default: the base's, else v1's)")
    bld.add_argument("--max-extension-words", type=int, default=DEFAULT_MAX_EXTENSION_WORDS,
                     help="words an extendable prefix may take before its comma (default: %(default)s, as mining)")
    bld.add_argument("--summary-json")

    rep = sub.add_parser("report", help="Table 4: markers by source and move, and how many occur in a corpus")
    add_config_args(rep)
    rep.add_argument("--lexicon", help="lexicon folder or version (default: mining.lexicon)")
    rep.add_argument("--against", choices=("mined_pairs", "pairs", "sentences", "none"), default="pairs",
                     help="what 'occurs' means (default pairs: opens the second sentence of a consecutive pair)")
    rep.add_argument("--out", required=True, help="folder for table4.md, table4.csv, markers.csv, report.json")


def _load_config(args):
    from ratio_spark.config import load_config

    return load_config(args.conf, args.overrides)


def _read_phrases(path: str) -> list[str]:
    from ratio_spark.core.files import read_text
    from ratio_spark.lexicon.curation.formats import LexiconInputError, normalise_marker, read_candidates, read_decisions

    p = Path(path)
    if not p.is_file():
        raise LexiconInputError(f"--phrases {path}: file not found")
    header = read_text(p, LexiconInputError).split("\n", 1)[0].split("\t")
    if "marker" in header and "move" in header:
        return sorted({c.marker for c in read_candidates(p)})
    if "span" in header and "decision" in header:
        return sorted({d.span for d in read_decisions(p)})
    phrases = (normalise_marker(line.split("#", 1)[0]) for line in p.read_text(encoding="utf-8").splitlines())
    return sorted({x for x in phrases if x})


def _lexicon_or_none(name: str | None):
    from ratio_spark.lexicon.loader import load_lexicon

    return load_lexicon(name) if name else None


def _spark(config):
    from ratio_spark.pipeline.session import build_spark_session

    return build_spark_session(config.spark)


def _run_spans(args) -> dict:
    from ratio_spark.lexicon.curation.span_review import mine_spans, write_review
    from ratio_spark.pipeline.pairs import consecutive_pairs
    from ratio_spark.pipeline.tables import read_table, table_location

    config = _load_config(args)
    lexicon = None if args.no_lexicon else _lexicon_or_none(args.lexicon or config.mining.lexicon)
    only = _read_phrases(args.phrases) if args.phrases else None
    spark = _spark(config)
    sentences = read_table(spark, config, "sentences")
    top = args.top if args.top is not None else (0 if only is not None else 400)
    what = f"{len(only)} given phrases" if only is not None else f"the top {top} spans"
    _log(f"spans: counting opening spans of {table_location(config, 'sentences')}, sampling {args.per_span} pairs for {what}")
    spans = mine_spans(sentences, consecutive_pairs(sentences), top, args.per_span, args.seed, args.max_words, lexicon,
                       only)
    meta = {"sentences": table_location(config, "sentences"), "top": top or None,
            "phrases": args.phrases, "per_span": args.per_span, "seed": args.seed, "max_words": args.max_words,
            "lexicon": lexicon.version if lexicon else None}
    title = args.title or (f"Phrase review ({Path(args.phrases).name})" if only is not None else f"Top {top} opening spans")
    summary = write_review(args.out, spans, lexicon, meta, title)
    if only is not None:
        summary["phrases_given"] = len(only)
        summary["phrases_attested"] = len(spans)
    return {"command": "lexicon spans", **summary}


def _run_extensions(args) -> dict:
    from ratio_spark.lexicon.curation.extensions import (
        collect_extensions,
        extension_candidates,
        parse_prefix_arg,
        prefixes_from_lexicon,
        read_prefixes,
        sample_extensions,
    )
    from ratio_spark.lexicon.curation.formats import LexiconInputError, write_candidates
    from ratio_spark.lexicon.curation.span_review import PAIR_COLUMNS, SpanRow, write_review
    from ratio_spark.pipeline.pairs import consecutive_pairs
    from ratio_spark.pipeline.tables import read_table, table_location

    prefixes = read_prefixes(args.prefixes) if args.prefixes else []
    prefixes += [parse_prefix_arg(v) for v in args.prefix]
    if args.from_lexicon:
        prefixes += prefixes_from_lexicon(_lexicon_or_none(args.from_lexicon))
    unique = {}
    for p in prefixes:
        if p.prefix in unique and unique[p.prefix].move != p.move:
            raise LexiconInputError(f"prefix {p.prefix!r} is given for two moves: {unique[p.prefix].move} and {p.move}")
        unique.setdefault(p.prefix, p)
    prefixes = list(unique.values())
    if not prefixes:
        raise LexiconInputError("no prefixes: give --prefixes, --prefix or --from-lexicon")
    config = _load_config(args)
    spark = _spark(config)
    sentences = read_table(spark, config, "sentences")
    _log(f"extensions: {len(prefixes)} prefixes, up to {args.max_words} words up to a comma, over {table_location(config, 'sentences')}")
    pairs = consecutive_pairs(sentences)
    rows = [r.asDict() for r in collect_extensions(sentences, pairs, prefixes, args.max_words).collect()]
    candidates = extension_candidates(rows, prefixes, args.corpus)
    written = write_candidates(args.out, candidates)
    per_prefix = {}
    for p in prefixes:
        mine = [r for r in rows if r["prefix"] == p.prefix]
        per_prefix[p.prefix] = {"move": p.move, "extensions": len(mine), "sentences": sum(r["sentences"] for r in mine),
                                "pairs": sum(r["pairs"] for r in mine)}
    summary = {"command": "lexicon extensions", "prefixes": len(prefixes), "candidates_written": written, "out": args.out,
               "by_prefix": per_prefix}
    if args.sheets:
        sampled = sample_extensions(pairs, prefixes, args.per_prefix, args.seed, args.max_words)
        by_prefix: dict[str, list] = {}
        for r in sampled.select("prefix", "sample_rank", *PAIR_COLUMNS).collect():
            by_prefix.setdefault(r.prefix, []).append(r.asDict())
        sheets = [SpanRow(i, p.prefix, per_prefix[p.prefix]["sentences"], 0, f"candidate prefix ({p.move})",
                          sorted(by_prefix.get(p.prefix, []), key=lambda r: r["sample_rank"]))
                  for i, p in enumerate(sorted(prefixes, key=lambda p: -per_prefix[p.prefix]["sentences"]), start=1)]
        meta = {"sentences": table_location(config, "sentences"), "per_span": args.per_prefix, "seed": args.seed,
                "max_words": args.max_words}
        summary["sheets"] = write_review(args.sheets, sheets, None, meta, "Extendable prefixes: sampled extensions")["files"]
    return summary


def _run_patterns(args) -> dict:
    from ratio_spark.lexicon.curation.formats import write_candidates
    from ratio_spark.lexicon.curation.patterns import DEFAULT_PATTERNS_DIR, expand_patterns

    moves = tuple(comma_list(args.moves))
    templates = [t.strip() for t in args.templates.split(",")] if args.templates else None
    expansion = expand_patterns(args.patterns or DEFAULT_PATTERNS_DIR, moves, templates)
    written = write_candidates(args.out, expansion.candidates)
    return {"command": "lexicon patterns", "patterns": str(args.patterns or DEFAULT_PATTERNS_DIR), "out": args.out,
            "candidates_by_template": expansion.by_template, "candidates_by_move": expansion.by_move,
            "duplicates_across_templates": expansion.duplicates, "candidates_written": written}


def _run_accept(args) -> dict:
    from ratio_spark.lexicon.curation.formats import decisions_to_candidates, read_decisions, write_candidates

    candidates, counts = [], {}
    for path in args.decisions:
        decisions = read_decisions(path)
        counts[path] = {d: sum(1 for x in decisions if x.decision == d) for d in ("accept", "distractor", "reject", "")}
        candidates += decisions_to_candidates(decisions, Path(path).name)
    written = write_candidates(args.out, candidates)
    return {"command": "lexicon accept", "decisions": counts, "accepted_written": written, "out": args.out}


def _run_build(args) -> dict:
    from ratio_spark.lexicon.curation.build import build_lexicon

    result = build_lexicon(
        args.out, candidates_dir=args.candidates, candidate_files=args.candidate_file, decisions_files=args.decisions,
        base=args.base, extensions=args.extensions, require_decision=tuple(args.require_decision), ordinals=args.ordinals,
        max_extension_words=args.max_extension_words, command="ratio-spark lexicon " + " ".join(sys.argv[2:]),
    )
    return {"command": "lexicon build", **{k: v for k, v in result.summary.items() if k not in ("details", "command")},
            "out": args.out}


def _run_report(args) -> dict:
    from ratio_spark.lexicon.loader import load_lexicon
    from ratio_spark.lexicon.curation.report import lexicon_report
    from ratio_spark.pipeline.pairs import consecutive_pairs
    from ratio_spark.pipeline.tables import read_table

    config = _load_config(args)
    name = args.lexicon or config.mining.lexicon
    lexicon = load_lexicon(name)
    against = None if args.against == "none" else args.against
    spark = sentences = mined = pairs = None
    if against is not None:
        spark = _spark(config)
        if against == "mined_pairs":
            mined = read_table(spark, config, "mined_pairs")
        else:
            sentences = read_table(spark, config, "sentences")
            pairs = consecutive_pairs(sentences) if against == "pairs" else None
        _log(f"report: matching lexicon {lexicon.version} against {against} of {config.tables.root}")
    summary = lexicon_report(args.out, lexicon, name, spark, against, sentences, mined, config.tables.root,
                             config.mining.require_comma, config.mining.max_extension_words, pairs)
    return {"command": "lexicon report", **summary}


RUNNERS = {"spans": _run_spans, "extensions": _run_extensions, "patterns": _run_patterns, "accept": _run_accept,
           "build": _run_build, "report": _run_report}


def run(args) -> int:
    from ratio_spark.cli.common import print_summary, write_summary

    summary = RUNNERS[args.lexicon_command](args)
    print_summary(summary)
    write_summary(getattr(args, "summary_json", None), summary)
    return 0
