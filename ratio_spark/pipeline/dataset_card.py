"""The release's dataset card: ``README.md`` in Hugging Face's format, so that ``datasets.load_dataset(<release
folder>, <config>)`` loads it and a person reads what it is.

The YAML header declares each config's features (types from the tables, not guessed from rows), names the licence (``release.license``, from the corpus) and one ``configs:`` entry per table:

* ``queries`` and ``candidates``: every column, one split per temporal split (the release's JSON lines; the
  Parquet files hold the same rows);
* per move, the BEIR/MTEB files: ``<move>-queries`` (``_id``, ``text``, ``gold_candidate_id``,
  ``exclude_candidate_ids``: the query's own sentence in the pool, to leave out of its ranking) and
  ``<move>-corpus`` (the split's whole shared pool: ``_id``, ``title``, ``text``), one split per split that has
  queries of the move.

Every config is JSON lines: ``datasets`` reads all configs of a folder with the builder it infers from the first,
so Parquet and TSV files cannot be configs beside them (the qrels TSV of BEIR are the queries' gold ids).

The body gives the counts (queries by move, pool sizes), how the release was built (code version, lexicon, split
ranges, inputs, the yields of the ``stats_*`` tables), and the sha256 of every data file, as ``manifest.json``
records them. Plain Python: the export writes it on the driver after the data files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ratio_spark.core.markdown import markdown_table
from ratio_spark.core.schema import MOVES, SPLITS

CARD_FILE = "README.md"
STATS_TABLES = ("stats_split_sizes", "stats_yield", "stats_marker_matches")  # copied into the release's stats/


@dataclass
class ReleaseAbout:
    """What the card says beside the counts: where the release came from and under which licence."""

    name: str = "Ratio"
    license: str = "unknown"  # a Hugging Face licence id (cc-by-4.0, other, unknown)
    license_note: str = ""  # attribution, or what "other" means
    inputs: list[str] = field(default_factory=list)  # "name (format)"
    lexicon: str = ""
    splits: dict[str, str] = field(default_factory=dict)  # split -> "start .. end"
    code: dict[str, Any] = field(default_factory=dict)  # version, commit, dirty
    stats: dict[str, list[dict]] = field(default_factory=dict)  # STATS_TABLES name -> rows


def card_configs(manifest: dict) -> list[dict]:
    """The ``configs:`` of the YAML header: only splits and moves with rows (an empty data file list fails). All are
    JSON lines: ``datasets`` reads every config of a folder with the builder of the first one."""
    splits = manifest["splits"]
    configs = []
    for name in ("queries", "candidates"):
        files = [{"split": s, "path": f"jsonl/{s}/{name}.jsonl"} for s in SPLITS if splits.get(s, {}).get(name)]
        if files:
            configs.append({"config_name": name, "data_files": files})
    for move in MOVES:
        move_splits = [s for s in SPLITS if s in manifest["beir"].get(move, {})]
        for part, file in (("queries", "queries.jsonl"), ("corpus", "corpus.jsonl")):
            if move_splits:
                configs.append({"config_name": f"{move}-{part}",
                                "data_files": [{"split": s, "path": f"beir/{move}/{s}/{file}"} for s in move_splits]})
    return configs


# Spark SQL type -> Hugging Face feature; dates are ISO strings in the JSON lines.
_HF_TYPES = {"string": "string", "date": "string", "timestamp": "string", "bigint": "int64", "int": "int32",
             "smallint": "int16", "double": "float64", "float": "float32", "boolean": "bool"}
BEIR_FEATURES = {
    "queries": [("_id", "string"), ("text", "string"), ("gold_candidate_id", "string"),
                ("exclude_candidate_ids", "array<string>")],
    "corpus": [("_id", "string"), ("title", "string"), ("text", "string")],
}


def hf_features(columns: list[tuple[str, str]]) -> list[dict]:
    """A config's features from (column, Spark SQL type): declared, so that ``datasets`` does not guess them from
    the first rows (an ``exclude_candidate_ids`` that is empty in one split would become a list of nulls)."""
    out = []
    for name, kind in columns:
        inner = kind[len("array<"):-1] if kind.startswith("array<") else None
        out.append({"name": name, "sequence": _HF_TYPES.get(inner, "string")} if inner is not None
                   else {"name": name, "dtype": _HF_TYPES.get(kind, "string")})
    return out


def _size_category(rows: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                        (10_000_000, "1M<n<10M")):
        if rows < limit:
            return name
    return "10M<n<100M"


def card_text(manifest: dict, about: ReleaseAbout, hashes: dict[str, str],
              columns: dict[str, list[tuple[str, str]]] | None = None) -> str:
    """The whole README.md: YAML header, then what it is, how to load it, counts, how it was built, hashes.
    ``columns``: the (column, Spark SQL type) of ``queries`` and ``candidates`` as released."""
    splits = manifest["splits"]
    rows = sum(s["queries"] + s["candidates"] for s in splits.values())
    configs = card_configs(manifest)
    kinds = {**(columns or {}), **{c["config_name"]: BEIR_FEATURES[c["config_name"].rsplit("-", 1)[1]]
                                   for c in configs if c["config_name"] not in ("queries", "candidates")}}
    header = {"pretty_name": about.name, "license": about.license, "language": ["en"],
              "task_categories": ["text-retrieval"], "size_categories": [_size_category(rows)],
              "tags": ["ratio", "scientific-papers", "inspiration-retrieval", "discourse-markers", "ratio-spark"],
              "configs": configs,
              "dataset_info": [{"config_name": c["config_name"], "features": hf_features(kinds[c["config_name"]])}
                               for c in configs if c["config_name"] in kinds]}
    configs = "\n".join(f"- `{c['config_name']}`: " + ", ".join(f["split"] for f in c["data_files"])
                        for c in header["configs"])
    counts = markdown_table(["split", *MOVES, "queries", "pool (candidates)"],
                    [[s, *(splits[s]["queries_by_move"].get(m, 0) for m in MOVES), splits[s]["queries"],
                      splits[s]["candidates"]] for s in SPLITS if s in splits])
    built = [f"- code: ratio-spark {about.code.get('version', '?')}"
             + (f", commit {about.code['commit']}" if about.code.get("commit") else "")
             + (" (with uncommitted changes)" if about.code.get("dirty") else ""),
             f"- inputs: {', '.join(about.inputs) or 'not recorded'}",
             f"- lexicon: {about.lexicon or 'not recorded'}",
             "- temporal splits by publication date: " + ("; ".join(f"{k} {v}" for k, v in about.splits.items())
                                                          or "not recorded")]
    yields = [r for r in about.stats.get("stats_yield", []) if r.get("role") == "move"]
    if yields:
        built.append("\nYield of the mined pairs (distinct query-gold pairs per 1,000 consecutive sentence pairs; "
                     "stats/stats_yield.jsonl):\n\n" + markdown_table(
                         ["move", "pairs", "per 1,000 pairs examined"],
                         [[r["label"], r["pairs"], f"{r['pairs_per_1000']:.2f}"]
                          for r in sorted(yields, key=lambda r: (r["label"] == "all", r["label"]))]))
    files = markdown_table(["file", "sha256"], [[f"`{path}`", digest] for path, digest in sorted(hashes.items())])
    licence = f"`{about.license}`" + (f": {about.license_note}" if about.license_note else "")
    body = f"""# {about.name}

The Ratio benchmark of scientific inspiration retrieval (Sharon & Hope, 2026), mined from full-text papers by
ratio-spark: consecutive sentence pairs whose second sentence opens with a discourse marker of a move. For a problem, a way to **address** it; for a claim, a **broader** formulation; for a
general statement, a **specific** instance. Each query is ranked against its split's whole shared pool of
candidates, minus the query's own sentence (`exclude_candidate_ids`).

## Loading

```python
import datasets
queries = datasets.load_dataset("<this folder>", "queries")       # every column; splits {', '.join(s for s in SPLITS if s in splits)}
pool = datasets.load_dataset("<this folder>", "candidates")
specify = datasets.load_dataset("<this folder>", "specify-queries") # per move: _id, text, gold (+ specify-corpus)
```

Configs:

{configs}

MTEB: `ratio_spark.evaluation.mteb_tasks.ratio_tasks("<this folder>")` (ratio-spark's docs/evaluation.md).

## Counts

{counts}

## How it was built

The pipeline `ingest → segment → citations → mine → pools → export` (Spark, Delta Lake, Spark NLP); the splits are
temporal and leakage-checked, a text belongs to the earliest split it occurs in, and the pool of a split holds the
gold sentences of all three moves and the distractors of that split's papers (ratio-spark's
docs/benchmark-tables.md).

{chr(10).join(built)}

## Licence

{licence}

## Files

`manifest.json` holds these hashes (and this card's). `parquet/` and `jsonl/` hold the same rows; `beir/` is
BEIR's layout (`GenericDataLoader(folder).load(split)`), with `excluded.tsv` beside each qrels file.

{files}
"""
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n\n" + body


def write_card(root: Path, manifest: dict, about: ReleaseAbout, hashes: dict[str, str],
               columns: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    path = root / CARD_FILE
    path.write_text(card_text(manifest, about, hashes, columns), encoding="utf-8", newline="\n")
    return path
