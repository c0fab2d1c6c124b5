"""Manual curation (paper §4.1, appendix A): frequent sentence-opening spans and review sheets.

For every clean sentence, the span before its first comma counts if it has at most seven words; the
most frequent spans are candidate markers. For each, K consecutive pairs whose second sentence opens
with it are sampled (a seeded hash order: the same seed gives the same pairs on any cluster). A
curator reads the sheets and fills in the decisions file; ``ratio-spark lexicon build`` reads it.

Outputs of ``write_review`` in one folder:

    spans.csv       rank, span, occurrences, paragraph_initial, sampled_pairs, in_lexicon
    pairs.csv       rank, span, sample_rank, paper_id, first/second sentence ids and texts
    review.html     the same, readable, one self-contained page (no scripts, no external files)
    decisions.tsv   span, decision, label, note (+ rank, occurrences, in_lexicon); an existing file is
                    kept and only new spans are appended, so rerunning never loses a curator's work
    review.json     the arguments, counts and inputs of the run

Spans already in the lexicon are marked (``in_lexicon``: ``move:address``, ``distractor:contrast``,
or ``move:address via to address`` when an extendable prefix covers the span), and their decision
is pre-filled from the lexicon with a note saying so; the curator may change it.
"""

from __future__ import annotations

import csv
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ratio_spark.lexicon.loader import Lexicon
from ratio_spark.lexicon.curation.formats import Decision, read_decisions, write_decisions
from ratio_spark.lexicon.matcher import PairCutter
from ratio_spark.lexicon.curation.spans import opening_span, opening_spans, sample_pairs_for_spans

PAIR_COLUMNS = ("paper_id", "first_sentence_id", "second_sentence_id", "first_text", "second_text")
DECISION_EXTRA = ("rank", "occurrences", "in_lexicon")


@dataclass
class SpanRow:
    rank: int
    span: str
    occurrences: int
    paragraph_initial: int
    in_lexicon: str = ""
    pairs: list[dict] = field(default_factory=list)


def span_counts(sentences: DataFrame, max_words: int = 7) -> DataFrame:
    """(span, occurrences, paragraph_initial): every clean sentence's opening span, counted corpus-wide.

    ``paragraph_initial`` counts the openings of a paragraph's first sentence, which cannot refer
    back to a previous sentence: a span with a high share there is unlikely to be a marker.
    """
    initial = (
        sentences.where(F.col("norm_flag").isNull() & (F.col("sent_idx") == 0))
        .select(opening_span(F.col("norm_text"), max_words).alias("span"))
        .where(F.col("span").isNotNull())
        .groupBy("span")
        .agg(F.count(F.lit(1)).alias("paragraph_initial"))
    )
    return (
        opening_spans(sentences, max_words)
        .join(initial, "span", "left")
        .fillna(0, subset=["paragraph_initial"])
    )


def top_spans(sentences: DataFrame, top: int, max_words: int = 7, only: list[str] | None = None) -> list[SpanRow]:
    """The ``top`` most frequent spans (ties by span text), or the attested spans among ``only``."""
    counts = span_counts(sentences, max_words if only is None else 10_000)
    if only is not None:
        wanted = sentences.sparkSession.createDataFrame([(s,) for s in sorted(set(only))], "span string")
        counts = counts.join(F.broadcast(wanted), "span")
    rows = counts.orderBy(F.desc("occurrences"), F.asc("span"))
    rows = rows.limit(top) if top else rows
    return [SpanRow(i, r.span, r.occurrences, r.paragraph_initial) for i, r in enumerate(rows.collect(), start=1)]


def lexicon_status(span: str, cutter: PairCutter | None) -> str:
    """How the lexicon already covers ``span``: exact entry, extendable prefix, or not at all ("")."""
    if cutter is None:
        return ""
    found = cutter.match(span + ", x")
    if found is None or found.text != span:
        return ""
    marker = found.marker
    status = f"{marker.role}:{marker.label}"
    return status if marker.text == span else f"{status} via {marker.text}"


def sample_pairs(pairs: DataFrame, spans: list[SpanRow], k: int, seed: int) -> None:
    """Attach up to k seeded sample pairs (of ``pairs``) to each span (in place), ordered by sample rank."""
    if not spans or k <= 0:
        return
    spark = pairs.sparkSession
    frame = spark.createDataFrame([(s.span,) for s in spans], "span string")
    sampled = sample_pairs_for_spans(pairs, frame, k, seed)
    by_span: dict[str, list] = {}
    for row in sampled.select("span", "sample_rank", *PAIR_COLUMNS).collect():
        by_span.setdefault(row.span, []).append(row.asDict())
    for s in spans:
        s.pairs = sorted(by_span.get(s.span, []), key=lambda r: r["sample_rank"])


def mine_spans(
    sentences: DataFrame,
    pairs: DataFrame,
    top: int = 400,
    per_span: int = 15,
    seed: int = 0,
    max_words: int = 7,
    lexicon: Lexicon | None = None,
    only: list[str] | None = None,
) -> list[SpanRow]:
    """Top spans of ``sentences`` (or the attested ones among ``only``), their lexicon status and sample pairs.

    ``pairs``: the consecutive pairs of ``sentences`` (``ratio_spark.pipeline.pairs.consecutive_pairs``, which
    the caller applies: the lexicon package sits below the pipeline and never imports it)."""
    spans = top_spans(sentences, top, max_words, only)
    cutter = PairCutter(lexicon) if lexicon is not None else None
    for s in spans:
        s.in_lexicon = lexicon_status(s.span, cutter)
    sample_pairs(pairs, spans, per_span, seed)
    return spans


# ---------------------------------------------------------------------------------------------
# Review sheets
# ---------------------------------------------------------------------------------------------


def _prefill(span: SpanRow, lexicon: Lexicon | None) -> Decision:
    extra = {"rank": str(span.rank), "occurrences": str(span.occurrences), "in_lexicon": span.in_lexicon}
    if not span.in_lexicon or lexicon is None:
        return Decision(span.span, "", "", "", extra)
    role_label, _, via = span.in_lexicon.partition(" via ")
    role, label = role_label.split(":")
    decision = "accept" if role == "move" else "distractor"
    note = f"in lexicon {lexicon.version}" + (f" (covered by extendable {via})" if via else "") + "; re-check on these pairs"
    return Decision(span.span, decision, label, note, extra)


def merge_decisions(path: Path, spans: list[SpanRow], lexicon: Lexicon | None) -> dict[str, int]:
    """Write decisions.tsv: keep every existing row as it is, append undecided (or pre-filled) rows for new spans."""
    existing = read_decisions(path) if path.exists() else []
    known = {d.span for d in existing}
    added = [_prefill(s, lexicon) for s in spans if s.span not in known]
    extra_columns = list(DECISION_EXTRA)
    for d in existing:
        extra_columns += [c for c in d.extra if c not in extra_columns]
    write_decisions(path, [*existing, *added], tuple(extra_columns))
    return {
        "kept": len(existing),
        "added": len(added),
        "prefilled_from_lexicon": sum(1 for d in added if d.decision),
    }


def _bold_opening(text: str) -> str:
    """HTML of a sentence with its opening span (up to the first comma) in bold."""
    head, comma, tail = (text or "").partition(",")
    if not comma:
        return html.escape(text or "")
    return f"<b>{html.escape(head)}</b>,{html.escape(tail)}"


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em} h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:.25em .5em;text-align:left}
th{background:#f4f4f4} .num{text-align:right} .lex{color:#06c;font-weight:600}
ol.pairs li{margin:.6em 0} .first{color:#666} .second{margin-left:1.5em}
.ids{font-size:.75em;color:#999} .meta{color:#555;font-size:.9em} code{background:#f4f4f4;padding:0 .2em}
"""


def render_html(spans: list[SpanRow], title: str, meta: dict) -> str:
    """One self-contained review page: a table of spans, then each span's sampled pairs."""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<p class='meta'>" + " · ".join(f"{html.escape(str(k))}: {html.escape(str(v))}" for k, v in meta.items()) + "</p>",
        "<p>Decide each span in <code>decisions.tsv</code>: <code>accept</code> + a move (address, broaden, "
        "specify) only if <em>every</em> sampled pair signals the move <em>and</em> the span refers back to the "
        "previous sentence; <code>distractor</code> + a category (contrast, similarity, continuation, inference, "
        "other) for a discourse opener that signals none of the moves; <code>reject</code> for anything else. "
        "The second sentence of each pair opens with the span (in bold); the first sentence is shown above it.</p>",
        "<table><tr><th>rank</th><th>span</th><th>occurrences</th><th>paragraph-initial</th><th>pairs</th><th>in lexicon</th></tr>",
    ]
    for s in spans:
        share = f"{s.paragraph_initial / s.occurrences:.0%}" if s.occurrences else "-"
        parts.append(
            f"<tr><td class='num'>{s.rank}</td><td><a href='#s{s.rank}'>{html.escape(s.span)}</a></td>"
            f"<td class='num'>{s.occurrences}</td><td class='num'>{share}</td><td class='num'>{len(s.pairs)}</td>"
            f"<td class='lex'>{html.escape(s.in_lexicon)}</td></tr>"
        )
    parts.append("</table>")
    for s in spans:
        lex = f" <span class='lex'>[{html.escape(s.in_lexicon)}]</span>" if s.in_lexicon else ""
        parts.append(f"<h2 id='s{s.rank}'>{s.rank}. {html.escape(s.span)}{lex}</h2>")
        parts.append(f"<p class='meta'>{s.occurrences} sentence openings, {s.paragraph_initial} paragraph-initial; "
                     f"{len(s.pairs)} sampled pairs</p><ol class='pairs'>")
        for p in s.pairs:
            parts.append(
                f"<li><div class='first'>{html.escape(p['first_text'] or '')}</div>"
                f"<div class='second'>{_bold_opening(p['second_text'])}</div>"
                f"<div class='ids'>{html.escape(p['paper_id'] or '')} · {html.escape(p['second_sentence_id'] or '')}</div></li>"
            )
        parts.append("</ol>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_review(out: str | Path, spans: list[SpanRow], lexicon: Lexicon | None, meta: dict, title: str = "Span review") -> dict:
    """Write spans.csv, pairs.csv, review.html, decisions.tsv and review.json; return counts."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "spans.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["rank", "span", "occurrences", "paragraph_initial", "sampled_pairs", "in_lexicon"])
        for s in spans:
            writer.writerow([s.rank, s.span, s.occurrences, s.paragraph_initial, len(s.pairs), s.in_lexicon])
    with (out / "pairs.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["rank", "span", "sample_rank", *PAIR_COLUMNS])
        for s in spans:
            for p in s.pairs:
                writer.writerow([s.rank, s.span, p["sample_rank"], *[p[c] for c in PAIR_COLUMNS]])
    (out / "review.html").write_text(render_html(spans, title, meta), encoding="utf-8")
    decisions = merge_decisions(out / "decisions.tsv", spans, lexicon)
    summary = {
        **meta,
        "spans": len(spans),
        "spans_in_lexicon": sum(1 for s in spans if s.in_lexicon),
        "sampled_pairs": sum(len(s.pairs) for s in spans),
        "spans_with_fewer_pairs_than_asked": sum(1 for s in spans if len(s.pairs) < meta.get("per_span", 0)),
        "decisions": decisions,
        "files": {name: str(out / name) for name in ("spans.csv", "pairs.csv", "review.html", "decisions.tsv")},
    }
    (out / "review.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return summary
