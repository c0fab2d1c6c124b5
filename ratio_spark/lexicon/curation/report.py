"""The paper's Table 4 for a lexicon: markers by source and move, and how many occur in a corpus.

*Lexicon* counts the markers of each source and move (a marker's source is the first source that
produced it; an extendable connective counts once, however many extensions it has). *Data* counts
those that occur in the corpus, by one of three measures:

* ``mined_pairs``: the marker entry of at least one row of a ``mined_pairs`` table mined with this
  lexicon version (the paper's "occur in at least one extracted pair");
* ``pairs``: the marker opens the (clean) second sentence of at least one consecutive pair;
* ``sentences``: the marker opens at least one clean sentence.

``pairs`` and ``sentences`` use the mining matcher itself (``ratio_spark.lexicon.matcher.PairCutter``: longest
marker, comma rule, extensions), broadcast to Arrow batches, so "occurs" means what mining would match.

Outputs: ``table4.md`` (readable), ``table4.csv`` (role, label, source, lexicon_markers,
data_markers, matches), ``markers.csv`` (one row per marker with its matches) and ``report.json``.
"""

from __future__ import annotations

import csv
import json
import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ratio_spark.core.markdown import markdown_table
from ratio_spark.core.schema import DEFAULT_MAX_EXTENSION_WORDS
from ratio_spark.core.schema import DISTRACTOR_CATEGORIES, MARKER_SOURCES, MOVES
from ratio_spark.core.text import python_strings
from ratio_spark.core.tsv import read_tsv
from ratio_spark.lexicon.curation.formats import LexiconInputError
from ratio_spark.lexicon.loader import Lexicon, lexicon_folder
from ratio_spark.lexicon.matcher import PairCutter

AGAINST = ("mined_pairs", "pairs", "sentences")
SOURCE_NAMES = {"manual": "Manual curation", "extension": "Extendable connective", "llm": "LLM generation", "pattern": "Pattern expansion"}


def read_provenance(folder: str | Path) -> dict[str, dict]:
    """marker -> provenance (empty for lexicons without the column, such as v1)."""
    out: dict[str, dict] = {}
    for _, row in read_tsv(lexicon_folder(folder) / "markers.tsv", ("marker",)):
        raw = row.get("provenance", "")
        try:
            out[row["marker"]] = json.loads(raw) if raw else {}
        except ValueError:
            out[row["marker"]] = {}
    return out


def unit_of(marker: str, source: str, provenance: dict) -> str:
    """What Table 4 counts as one marker: an enumerated extension counts as its prefix."""
    extension = provenance.get("extension") if isinstance(provenance.get("extension"), dict) else None
    if source == "extension" and extension and extension.get("prefix"):
        return extension["prefix"]
    return marker


# ---------------------------------------------------------------------------------------------
# Occurrences (Spark)
# ---------------------------------------------------------------------------------------------

_OCCURRENCE_FIELDS = [T.StructField("marker_entry", T.StringType()), T.StructField("marker", T.StringType())]


def match_openings(texts: DataFrame, lexicon: Lexicon, require_comma: bool = True, max_extension_words: int = DEFAULT_MAX_EXTENSION_WORDS) -> DataFrame:
    """(marker_entry, marker) for every row of ``texts`` (a ``norm_text`` column) that opens with a marker. The
    pre-filter runs in the Python workers (``PairCutter.may_open_column``), as mine's pass does: Java's regex over the trie of a
    lexicon of thousands of candidates, the lexicons curation reports on, ran ~7x slower (docs/performance.md)."""
    spark = texts.sparkSession
    cutter = PairCutter(lexicon, require_comma, max_extension_words)
    broadcast = spark.sparkContext.broadcast(cutter)
    arrow_schema = pa.schema([pa.field("marker_entry", pa.string()), pa.field("marker", pa.string())])

    def run(batches):
        local = broadcast.value
        for batch in batches:
            entries, markers = [], []
            column = batch.column("norm_text")
            opening = column.filter(local.may_open_column(column))
            for text in python_strings(opening):
                found = local.match(text)
                if found is not None:
                    entries.append(found.marker.text)
                    markers.append(found.text)
            yield pa.RecordBatch.from_arrays([pa.array(entries, pa.string()), pa.array(markers, pa.string())], schema=arrow_schema)

    return texts.select("norm_text").mapInArrow(run, T.StructType(_OCCURRENCE_FIELDS))


def occurrences(
    spark: SparkSession,
    lexicon: Lexicon,
    against: str,
    sentences: DataFrame | None = None,
    mined_pairs: DataFrame | None = None,
    require_comma: bool = True,
    max_extension_words: int = DEFAULT_MAX_EXTENSION_WORDS,
    pairs: DataFrame | None = None,
) -> tuple[dict[str, dict], dict]:
    """marker entry -> {matches, variants}, and what was examined. What ``against`` names is given: the
    ``sentences`` table, the ``mined_pairs`` table, or the consecutive ``pairs`` of the sentences
    (``ratio_spark.pipeline.pairs.consecutive_pairs``, applied by the caller: the lexicon package sits below the
    pipeline)."""
    if against not in AGAINST:
        raise ValueError(f"against must be one of {AGAINST}, got {against!r}")
    if against == "mined_pairs":
        if mined_pairs is None:
            raise ValueError("against=mined_pairs needs the mined_pairs table")
        versions = [r[0] for r in mined_pairs.select("lexicon_version").distinct().collect()]
        if versions and versions != [lexicon.version]:
            raise LexiconInputError(
                f"mined_pairs was mined with lexicon {versions}, not {lexicon.version!r}: mine with this lexicon "
                f"first (--set mining.lexicon=...), or report against pairs or sentences"
            )
        matched = mined_pairs.select("marker_entry", "marker")
        examined = {"mined_pairs": mined_pairs.count()}
    elif against == "sentences":
        if sentences is None:
            raise ValueError("against=sentences needs the sentences table")
        texts = sentences.where(F.col("norm_flag").isNull()).select("norm_text")
    else:
        if pairs is None:
            raise ValueError("against=pairs needs the consecutive pairs of the sentences table")
        texts = pairs.where(F.col("second_norm_flag").isNull()).select(F.col("second_norm_text").alias("norm_text"))
    if against != "mined_pairs":
        examined = {f"clean_{against}": texts.count()}
        matched = match_openings(texts, lexicon, require_comma, max_extension_words)
    rows = matched.groupBy("marker_entry").agg(F.count(F.lit(1)).alias("matches"), F.countDistinct("marker").alias("variants")).collect()
    return {r.marker_entry: {"matches": r.matches, "variants": r.variants} for r in rows}, examined


# ---------------------------------------------------------------------------------------------
# The table (plain Python)
# ---------------------------------------------------------------------------------------------


def table4(lexicon: Lexicon, provenance: dict[str, dict], found: dict[str, dict] | None) -> tuple[list[dict], list[dict]]:
    """(rows by role, label, source; rows by marker). ``found`` None: the Data columns are left empty."""
    units: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    data_units: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    matches: dict[tuple[str, str, str], int] = defaultdict(int)
    per_marker = []
    for m in lexicon.markers:
        key = (m.role, m.label, m.source)
        unit = unit_of(m.text, m.source, provenance.get(m.text, {}))
        units[key].add(unit)
        hit = (found or {}).get(m.text, {"matches": 0, "variants": 0})
        if hit["matches"]:
            data_units[key].add(unit)
            matches[key] += hit["matches"]
        per_marker.append({"marker": m.text, "role": m.role, "label": m.label, "source": m.source,
                           "extendable": m.extendable, "unit": unit, **hit})
    rows = []
    for role, labels in (("move", MOVES), ("distractor", DISTRACTOR_CATEGORIES)):
        for label in labels:
            for source in (*MARKER_SOURCES, "all"):
                keys = [(role, label, s) for s in MARKER_SOURCES] if source == "all" else [(role, label, source)]
                lex = set().union(*(units[k] for k in keys))
                data = set().union(*(data_units[k] for k in keys))
                if source != "all" and not lex:
                    continue
                rows.append({"role": role, "label": label, "source": source, "lexicon_markers": len(lex),
                             "data_markers": len(data) if found is not None else None,
                             "matches": sum(matches[k] for k in keys) if found is not None else None})
    per_marker.sort(key=lambda r: (r["role"] != "move", r["label"], -r["matches"], r["marker"]))
    return rows, per_marker


def produced_by_source(lexicon: Lexicon, provenance: dict[str, dict], found: dict[str, dict] | None) -> list[dict]:
    """Per source: the move markers it produced (``provenance.sources``; a marker an earlier source also
    produced counts here too), how many of them are new (credited to it in Table 4), and how many occur."""
    out = []
    for source in MARKER_SOURCES:
        produced, new, data = set(), set(), set()
        for m in lexicon.markers:
            if not m.is_move:
                continue
            p = provenance.get(m.text, {})
            if source not in (p.get("sources") or [m.source]):
                continue
            unit = (m.label, unit_of(m.text, m.source, p))
            produced.add(unit)
            if m.source == source:
                new.add(unit)
            if found is not None and (found.get(m.text) or {}).get("matches"):
                data.add(unit)
        out.append({"source": source, "produced": len(produced), "new": len(new),
                    "already_produced": len(produced - new), "data": len(data) if found is not None else None})
    return out


def _count(value) -> str:
    return "–" if value is None else f"{value:,}"


def _cell(rows: list[dict], role: str, label: str, source: str, column: str) -> str:
    row = next((r for r in rows if (r["role"], r["label"], r["source"]) == (role, label, source)), None)
    value = row[column] if row is not None else (0 if rows and (rows[0]["data_markers"] is not None or column == "lexicon_markers") else None)
    return "–" if value is None else f"{value:,}"


def render_markdown(lexicon: Lexicon, rows: list[dict], per_marker: list[dict], meta: dict, top: int = 10,
                    produced: list[dict] | None = None, candidates: dict | None = None) -> str:
    has_data = meta.get("against") is not None
    lines = [f"# Table 4 for lexicon {lexicon.version}", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items() if k not in ("files",)]
    lines += ["", "Markers by source and move. Lexicon: markers in the lexicon; Data: markers that occur"
              + (f" ({meta['against']})" if has_data else " (not measured)")
              + ". An extendable connective counts as one marker. A marker's source is the first that produced it.", ""]
    header = ["Source", *(f"{m.capitalize()} {side}" for m in MOVES for side in ("lexicon", "data")), "Total lexicon",
              "Total data"]
    table = []
    for source in (*MARKER_SOURCES, "all"):
        name = "Total" if source == "all" else SOURCE_NAMES[source]
        cells = []
        lex_total = data_total = 0
        for move in MOVES:
            cells += [_cell(rows, "move", move, source, "lexicon_markers"), _cell(rows, "move", move, source, "data_markers")]
            row = next((r for r in rows if (r["role"], r["label"], r["source"]) == ("move", move, source)), None)
            lex_total += row["lexicon_markers"] if row else 0
            data_total += (row["data_markers"] or 0) if row else 0
        total_data = f"{data_total:,}" if has_data else "–"
        table.append([name, *cells, f"{lex_total:,}", total_data])
    lines.append(markdown_table(header, table))
    if produced:
        lines += ["", "Move markers each source produced. Candidates: what the source proposed (build.json); produced: "
                  "its markers in the lexicon, including those credited to another source (an earlier one, or the extension row for a prefix); new: those credited to it above. Base-lexicon markers are not candidates.", "",
                  markdown_table(["Source", "Candidates", "Produced", "Credited to another source", "New", "Produced, in data"],
                                 [[SOURCE_NAMES[p["source"]], _count((candidates or {}).get(p["source"])), f"{p['produced']:,}",
                                   f"{p['already_produced']:,}", f"{p['new']:,}", _count(p["data"])] for p in produced])]
    lines += ["", "Distractor markers by category.", "",
              markdown_table(["Category", "Lexicon", "Data", "Matches"],
                             [[category, *(_cell(rows, "distractor", category, "all", column)
                                           for column in ("lexicon_markers", "data_markers", "matches"))]
                              for category in DISTRACTOR_CATEGORIES])]
    if has_data:
        lines += ["", f"Matches per move (the {meta['against']} that open with a marker of the move), and the {top} most frequent markers.", ""]
        for move in MOVES:
            total = _cell(rows, "move", move, "all", "matches")
            hits = [r for r in per_marker if r["role"] == "move" and r["label"] == move and r["matches"]][:top]
            listed = ", ".join(f"{r['marker']} ({r['matches']:,})" for r in hits) or "none"
            lines.append(f"- **{move}**: {total} matches; {listed}")
    return "\n".join(lines) + "\n"


def write_report(out: str | Path, lexicon: Lexicon, rows: list[dict], per_marker: list[dict], meta: dict,
                 produced: list[dict] | None = None, candidates: dict | None = None) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "table4.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["role", "label", "source", "lexicon_markers", "data_markers", "matches"])
        writer.writeheader()
        writer.writerows(rows)
    with (out / "markers.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["marker", "role", "label", "source", "extendable", "unit", "matches", "variants"])
        writer.writeheader()
        writer.writerows(per_marker)
    (out / "table4.md").write_text(render_markdown(lexicon, rows, per_marker, meta, produced=produced, candidates=candidates), encoding="utf-8")
    totals = {r["label"]: {"lexicon": r["lexicon_markers"], "data": r["data_markers"], "matches": r["matches"]}
              for r in rows if r["role"] == "move" and r["source"] == "all"}
    summary = {**meta, "moves": totals, "by_source": produced or [], "files": {n: str(out / n) for n in ("table4.md", "table4.csv", "markers.csv")}}
    (out / "report.json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    return summary


def lexicon_report(
    out: str | Path,
    lexicon: Lexicon,
    folder: str | Path,
    spark: SparkSession | None = None,
    against: str | None = None,
    sentences: DataFrame | None = None,
    mined_pairs: DataFrame | None = None,
    corpus: str = "",
    require_comma: bool = True,
    max_extension_words: int = DEFAULT_MAX_EXTENSION_WORDS,
    pairs: DataFrame | None = None,
) -> dict:
    """Compute and write the report; ``against`` None gives the Lexicon side only (no Spark needed); the
    frame ``against`` names is given (``occurrences``)."""
    started = time.time()
    found, examined = None, {}
    if against is not None:
        if spark is None:
            raise ValueError("the Data columns need a SparkSession")
        found, examined = occurrences(spark, lexicon, against, sentences, mined_pairs, require_comma, max_extension_words,
                                      pairs)
    provenance = read_provenance(folder)
    rows, per_marker = table4(lexicon, provenance, found)
    build_file = lexicon_folder(folder) / "build.json"
    candidates = json.loads(build_file.read_text(encoding="utf-8")).get("candidates_by_source") if build_file.is_file() else None
    meta = {"lexicon": lexicon.version, "lexicon_folder": str(lexicon_folder(folder)), "markers": len(lexicon.markers),
            "against": against, "corpus": corpus or None, **examined}
    summary = write_report(out, lexicon, rows, per_marker, meta, produced_by_source(lexicon, provenance, found), candidates)
    summary["seconds"] = round(time.time() - started, 1)
    return summary
