"""The release: per split Parquet and JSONL of queries and candidates, and BEIR/MTEB folders per move.

Layout under ``ReleaseConfig.root``::

    parquet/<split>/queries/part-*.parquet       Spark's writer, every column, paper ids and dates
    parquet/<split>/candidates/part-*.parquet
    jsonl/<split>/queries.jsonl                  the same rows, one JSON object per line
    jsonl/<split>/candidates.jsonl
    beir/<move>/<split>/corpus.jsonl             {"_id", "title": "", "text"}: the split's whole shared pool
    beir/<move>/<split>/queries.jsonl            {"_id", "text", "gold_candidate_id", "exclude_candidate_ids"}:
                                                 the move's queries in that split (BEIR reads _id and text)
    beir/<move>/<split>/qrels/<split>.tsv        "query-id<TAB>corpus-id<TAB>score", score 1 (the gold)
    beir/<move>/<split>/excluded.tsv             "query-id<TAB>corpus-id": candidates to skip when scoring
                                                 (the query's own text in the pool; not a BEIR file)
    stats/<stats table>.jsonl                    stats_split_sizes, stats_yield, stats_marker_matches
    README.md                                    the dataset card (``pipeline/dataset_card.py``): Hugging Face
                                                 ``configs:``, licence, counts, how it was built, the hashes
    manifest.json                                counts per split and move, licence, sha256 of every file; last

The three moves share one pool, so every move's ``corpus.jsonl`` of a split is the same file. Keeping
them separate lets a BEIR loader open each (move, split) folder on its own
(``GenericDataLoader(folder).load(split)``). A (move, split) without queries gets no BEIR folder,
because BEIR's loader fails on an empty query set. The manifest lists such folders under
``beir_skipped``.

Spark's Parquet part files are renamed ``part-00000.parquet``, ... (and its ``_SUCCESS`` and ``.crc`` files
removed), so that a rerun gives the same file names and the same hashes.

The JSONL and BEIR files are single files, written on the driver. Rows stream through
``toLocalIterator`` one partition at a time, sorted by id, so the files are the same on every
rerun. The driver never holds a whole pool, but every row passes through it. That is fine for the
release (the paper's largest pool has 13.8M short sentences), and Spark still writes the Parquet.

``root`` must be a filesystem path that the driver and the executors share: a local path in local
mode, or a shared mount on a cluster (``/dbfs/...`` or ``/Volumes/...`` on Databricks, NFS, EFS).
To publish to object storage, sync the folder afterwards.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterator

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from ratio_spark.core.config import ConfigError
from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.core.provenance import sha256_file
from ratio_spark.pipeline.dataset_card import CARD_FILE, ReleaseAbout, write_card

OWNED_ENTRIES = ("parquet", "jsonl", "beir", "stats", CARD_FILE, "manifest.json")  # what a rerun replaces


def _local_root(root: str | os.PathLike) -> Path:
    text = str(root)
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith("file:"):
        text = text[len("file:"):]
    elif "://" in text:
        raise ConfigError(
            f"release.root {text!r} must be a filesystem path shared by driver and executors "
            "(JSONL/BEIR files are written on the driver); write locally or to a mount and sync it"
        )
    return Path(text).resolve()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, Row):
        return {k: _jsonable(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _line(record: dict[str, Any]) -> str:
    return json.dumps({k: _jsonable(v) for k, v in record.items()}, ensure_ascii=False) + "\n"


def _rows(df: DataFrame, order: list[str]) -> Iterator[Row]:
    """Stream rows to the driver a partition at a time, in a stable order."""
    return df.orderBy(*order).toLocalIterator(prefetchPartitions=True)


def _open(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8", newline="\n")


def release_about(config, stats: dict[str, list[dict]]) -> ReleaseAbout:
    """The dataset card's facts from the configuration (licence, inputs, lexicon, split ranges, code version) and
    the ``stats_*`` rows."""
    import ratio_spark
    from ratio_spark.core.provenance import git_state

    splits = config.splits
    ranges = ({name: f"{r.start} .. {r.end}" for name, r in splits.ranges().items()} if splits.rolling is None else
              {"rolling": f"validation {splits.rolling.validation_months} and test {splits.rolling.test_months} "
                          "month(s) ending with the latest paper's month"})
    git = git_state()
    release = config.release
    return ReleaseAbout(
        name=release.name, license=release.license, license_note=release.license_note,
        inputs=[f"{i.name} ({i.format})" for i in config.inputs], lexicon=config.mining.lexicon, splits=ranges,
        code={"version": ratio_spark.__version__, "commit": git.get("commit"), "dirty": git.get("dirty")},
        stats={name: [{k: _jsonable(v) for k, v in row.items()} for row in rows] for name, rows in stats.items()},
    )


def _tidy_parquet(folder: Path) -> None:
    """Spark's part files under stable names (``part-00000.parquet``, in Spark's order); its markers removed."""
    for marker in [*folder.glob("_*"), *folder.glob(".*.crc")]:
        marker.unlink()
    for i, part in enumerate(sorted(folder.glob("part-*.parquet"))):
        part.rename(folder / f"part-{i:05d}.parquet")


def _write_stats(base: Path, stats: dict[str, list[dict]]) -> None:
    for name, rows in stats.items():
        with _open(base / "stats" / f"{name}.jsonl") as out:
            for row in rows:
                out.write(_line(row))


def export_release(
    queries: DataFrame, candidates: DataFrame, root: str | os.PathLike, moves: tuple[str, ...] = MOVES,
    about: ReleaseAbout | None = None,
) -> dict[str, Any]:
    """Write the release under ``root``. A rerun replaces it. Returns the manifest.

    ``about`` is what the dataset card says beside the counts (licence, inputs, lexicon, splits, the stats rows
    copied to ``stats/``). ``manifest.json`` is written last: a release folder without it comes from a run that
    did not finish.
    """
    about = about or ReleaseAbout()
    base = _local_root(root)
    base.mkdir(parents=True, exist_ok=True)
    for name in OWNED_ENTRIES:
        target = base / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()

    manifest: dict[str, Any] = {"splits": {}, "beir": {}, "beir_skipped": [], "files": {}}
    for split in SPLITS:
        q_split = queries.filter(F.col("split") == split)
        c_split = candidates.filter(F.col("split") == split)
        for name, df, key in (("queries", q_split, "query_id"), ("candidates", c_split, "candidate_id")):
            folder = base / "parquet" / split / name
            df.orderBy(key).write.mode("overwrite").parquet(folder.as_uri())
            _tidy_parquet(folder)

        # One pass over the split's queries writes the JSONL and every move's BEIR queries and qrels.
        per_move: dict[str, int] = {}
        n_queries = 0
        with ExitStack() as stack:
            jsonl = stack.enter_context(_open(base / "jsonl" / split / "queries.jsonl"))
            handles: dict[str, tuple[Any, Any, Any]] = {}
            for row in _rows(q_split, ["move", "query_id"]):
                n_queries += 1
                jsonl.write(_line(row.asDict()))
                move = row["move"]
                if move not in handles:
                    folder = base / "beir" / move / split
                    qrels = stack.enter_context(_open(folder / "qrels" / f"{split}.tsv"))
                    qrels.write("query-id\tcorpus-id\tscore\n")
                    excluded = stack.enter_context(_open(folder / "excluded.tsv"))
                    excluded.write("query-id\tcorpus-id\n")
                    handles[move] = (stack.enter_context(_open(folder / "queries.jsonl")), qrels, excluded)
                    per_move[move] = 0
                beir_queries, qrels, excluded = handles[move]
                per_move[move] += 1
                beir_queries.write(_line({"_id": row["query_id"], "text": row["query_text"],  # BEIR reads _id, text
                                          "gold_candidate_id": row["gold_candidate_id"],
                                          "exclude_candidate_ids": list(row["exclude_candidate_ids"] or [])}))
                qrels.write(f"{row['query_id']}\t{row['gold_candidate_id']}\t1\n")
                for cid in row["exclude_candidate_ids"] or []:
                    excluded.write(f"{row['query_id']}\t{cid}\n")

        # One pass over the split's pool writes the JSONL and the BEIR corpus, copied to every move.
        n_candidates = 0
        staging = base / "beir" / f".corpus-{split}.jsonl"
        with _open(base / "jsonl" / split / "candidates.jsonl") as jsonl, _open(staging) as corpus:
            for row in _rows(c_split, ["candidate_id"]):
                n_candidates += 1
                jsonl.write(_line(row.asDict()))
                corpus.write(_line({"_id": row["candidate_id"], "title": "", "text": row["text"]}))
        for move in sorted(per_move):
            shutil.copyfile(staging, base / "beir" / move / split / "corpus.jsonl")
        staging.unlink()

        manifest["splits"][split] = {"queries": n_queries, "candidates": n_candidates, "queries_by_move": per_move}
        for move in sorted(set(moves) | set(per_move)):
            if per_move.get(move):
                manifest["beir"].setdefault(move, {})[split] = {"queries": per_move[move], "corpus": n_candidates}
            else:
                manifest["beir_skipped"].append(f"{move}/{split}")

    manifest["files"] = {
        "parquet": "parquet/<split>/{queries,candidates}/part-*.parquet",
        "jsonl": "jsonl/<split>/{queries,candidates}.jsonl",
        "beir": "beir/<move>/<split>/{corpus.jsonl,queries.jsonl,qrels/<split>.tsv,excluded.tsv}",
        "stats": "stats/<stats table>.jsonl",
        "card": CARD_FILE,
    }
    manifest["name"], manifest["license"] = about.name, about.license
    _write_stats(base, about.stats)
    data_files = sorted(p for name in ("parquet", "jsonl", "beir", "stats") for p in (base / name).rglob("*") if p.is_file())
    hashes = {p.relative_to(base).as_posix(): sha256_file(p) for p in data_files}
    columns = {name: [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
               for name, df in (("queries", queries), ("candidates", candidates))}
    card = write_card(base, manifest, about, hashes, columns)
    manifest["sha256"] = {**hashes, CARD_FILE: sha256_file(card)}
    tmp = base / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, base / "manifest.json")
    return manifest
