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

The JSONL and BEIR files are single files (BEIR and MTEB read one ``corpus.jsonl`` per folder), written
by the executors: each task of a sorted frame (queries by move and id, the pool by id) formats its rows
with ``json.dumps`` and writes one part per file under ``.export-parts/``; the driver then concatenates
each file's parts in partition order, which is the sort order, counting the lines it copies. So the
files are the same on every rerun and the same bytes as when the driver wrote them row by row, and the
counts in the manifest (which the stage reconciles with the tables) are the lines of the files as
written. The driver only copies bytes, at disk speed; the per-row work spreads over the executors.

``root`` must be a filesystem path that the driver and the executors share: a local path in local
mode, or a shared mount on a cluster (``/dbfs/...`` or ``/Volumes/...`` on Databricks, NFS, EFS).
To publish to object storage, sync the folder afterwards.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import uuid
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from ratio_spark.core.config import ConfigError
from ratio_spark.core.errors import ReconciliationError
from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.core.provenance import sha256_file
from ratio_spark.pipeline.dataset_card import CARD_FILE, ReleaseAbout, write_card

PARTS = ".export-parts"  # the executors' parts of the JSONL and BEIR files, removed once they are concatenated
OWNED_ENTRIES = ("parquet", "jsonl", "beir", "stats", CARD_FILE, "manifest.json", PARTS)  # what a rerun replaces
QRELS_HEADER, EXCLUDED_HEADER = "query-id\tcorpus-id\tscore\n", "query-id\tcorpus-id\n"


def _local_root(root: str | os.PathLike) -> Path:
    text = str(root)
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith("file:"):
        text = text[len("file:"):]
    elif re.match(r"[A-Za-z][A-Za-z0-9+.-]+:/", text):  # s3://, dbfs:/ (a local folder named "dbfs:" otherwise)
        raise ConfigError(
            f"release.root {text!r} must be a filesystem path shared by driver and executors "
            "(the JSONL/BEIR files are assembled with file I/O), e.g. /dbfs/...; write locally or to a mount and sync it"
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


def _query_lines(row: dict[str, Any], split: str) -> Iterator[tuple[str, str]]:
    """A query's line in each file it belongs to, as (file under the release root, text)."""
    query_id, gold, excluded = row["query_id"], row["gold_candidate_id"], list(row["exclude_candidate_ids"] or [])
    folder = f"beir/{row['move']}/{split}"
    yield f"jsonl/{split}/queries.jsonl", _line(row)
    yield f"{folder}/queries.jsonl", _line({"_id": query_id, "text": row["query_text"],  # BEIR reads _id, text
                                            "gold_candidate_id": gold, "exclude_candidate_ids": excluded})
    yield f"{folder}/qrels/{split}.tsv", f"{query_id}\t{gold}\t1\n"
    for cid in excluded:
        yield f"{folder}/excluded.tsv", f"{query_id}\t{cid}\n"


def _corpus_file(split: str) -> str:
    return f"beir/corpus-{split}.jsonl"  # a key only: assembled into every move's beir/<move>/<split>/corpus.jsonl


def _candidate_lines(row: dict[str, Any], split: str, corpus: bool) -> Iterator[tuple[str, str]]:
    yield f"jsonl/{split}/candidates.jsonl", _line(row)
    if corpus:
        yield _corpus_file(split), _line({"_id": row["candidate_id"], "title": "", "text": row["text"]})


# Column types whose values come out of Arrow's ``to_pylist`` as they come out of a Spark Row (a timestamp or a map
# would not: tz-aware datetimes, lists of pairs), so the lines are the ones the driver wrote row by row before.
_ARROW_SAFE = re.compile(r"(string|date|int|bigint|double|boolean|array<(string|date|int|bigint|double|boolean)>)")
PART_SCHEMA = "file string, part string, lines bigint, bytes bigint, partition int"


def _write_part(batches, staging: str, lines_of: Callable[[dict], Iterable[tuple[str, str]]]):
    """On an executor: one partition's lines, one part per file (``<staging>/<file>/part-<partition>``).

    Each part is written under a temporary name and renamed when complete, so a retried or speculative task
    replaces it whole. Yields (file, part, lines, bytes, partition) for the driver to check and concatenate.
    """
    import pyarrow as pa
    from pyspark import TaskContext

    index = TaskContext.get().partitionId()  # the sorted frame's partition: this part's place in the file
    handles, counts, attempt = {}, Counter(), uuid.uuid4().hex
    try:
        for batch in batches:
            for row in batch.to_pylist():
                for name, text in lines_of(row):
                    if name not in handles:
                        part = Path(staging, name, f"part-{index:05d}")
                        part.parent.mkdir(parents=True, exist_ok=True)
                        handles[name] = (part, open(f"{part}.{attempt}.tmp", "w", encoding="utf-8", newline="\n"))
                    handles[name][1].write(text)
                    counts[name] += 1
    finally:
        for _, out in handles.values():
            out.close()
    written = []
    for name, (part, _) in handles.items():
        os.replace(f"{part}.{attempt}.tmp", part)
        written.append({"file": name, "part": str(part), "lines": counts[name], "bytes": part.stat().st_size,
                        "partition": index})
    yield pa.RecordBatch.from_pylist(written, schema=pa.schema([("file", pa.string()), ("part", pa.string()),
                                                                ("lines", pa.int64()), ("bytes", pa.int64()),
                                                                ("partition", pa.int32())]))


def _write_parts(df: DataFrame, staging: Path, lines_of: Callable[[dict], Iterable[tuple[str, str]]]
                 ) -> dict[str, list[tuple[str, int, int]]]:
    """Every file's parts, written by the executors from ``df`` (sorted), in partition order: the file's order."""
    unsafe = [f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields
              if not _ARROW_SAFE.fullmatch(f.dataType.simpleString())]
    if unsafe:
        raise ValueError(f"export writes JSON lines of string, number, date and array columns, not {', '.join(unsafe)}")
    written = df.mapInArrow(partial(_write_part, staging=str(staging), lines_of=lines_of), PART_SCHEMA).collect()
    parts: dict[str, list[tuple[str, int, int]]] = {}
    for w in sorted(written, key=lambda w: (w["file"], w["partition"])):
        parts.setdefault(w["file"], []).append((w["part"], w["lines"], w["bytes"]))
    return parts


def _same(what: str, n: int, other: str, m: int) -> None:
    """Two files that must hold the same rows: a difference means rows were lost or doubled in between."""
    if n != m:
        raise ReconciliationError(f"export: {what} {n} but {other} {m}")


def _assemble(parts: list[tuple[str, int, int]], target: Path, header: str = "") -> int:
    """Concatenate the parts into ``target`` in order, after ``header``; returns the lines copied (header not
    counted), counted from the bytes, which must equal the lines the tasks said they wrote."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = 0
    with target.open("wb") as out:
        out.write(header.encode("utf-8"))
        for part, _, size in parts:
            if not os.path.isfile(part) or os.path.getsize(part) != size:
                raise ReconciliationError(f"export: part {part} of {target} is missing or not the {size} bytes its task wrote")
            with open(part, "rb") as chunks:
                while chunk := chunks.read(1 << 20):
                    lines += chunk.count(b"\n")
                    out.write(chunk)
    if lines != sum(n for _, n, _ in parts):
        raise ReconciliationError(f"export: {target} has {lines} lines but its parts' tasks wrote "
                                  f"{sum(n for _, n, _ in parts)}")
    return lines


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

        # One pass over the split's queries writes the JSONL and every move's BEIR queries, qrels and exclusions.
        staging = base / PARTS / split
        parts = _write_parts(q_split.orderBy("move", "query_id"), staging / "queries",
                             partial(_query_lines, split=split))
        n_queries = _assemble(parts.get(f"jsonl/{split}/queries.jsonl", []), base / "jsonl" / split / "queries.jsonl")
        per_move: dict[str, int] = {}
        for move in sorted({name.split("/")[1] for name in parts if name.startswith("beir/")}):
            folder = f"beir/{move}/{split}"
            per_move[move] = _assemble(parts[f"{folder}/queries.jsonl"], base / folder / "queries.jsonl")
            qrels = _assemble(parts[f"{folder}/qrels/{split}.tsv"], base / folder / "qrels" / f"{split}.tsv", QRELS_HEADER)
            _same(f"{split} {move}: BEIR queries", per_move[move], "qrels lines", qrels)
            _assemble(parts.get(f"{folder}/excluded.tsv", []), base / folder / "excluded.tsv", EXCLUDED_HEADER)
        _same(f"{split}: JSONL queries", n_queries, "BEIR queries of all moves", sum(per_move.values()))

        # One pass over the split's pool writes the JSONL and the BEIR corpus, copied to every move.
        parts = _write_parts(c_split.orderBy("candidate_id"), staging / "candidates",
                             partial(_candidate_lines, split=split, corpus=bool(per_move)))
        n_candidates = _assemble(parts.get(f"jsonl/{split}/candidates.jsonl", []),
                                 base / "jsonl" / split / "candidates.jsonl")
        corpora = [base / "beir" / move / split / "corpus.jsonl" for move in sorted(per_move)]
        if corpora:
            corpus = _assemble(parts.get(_corpus_file(split), []), corpora[0])
            _same(f"{split}: JSONL candidates", n_candidates, "BEIR corpus lines", corpus)
        for copy in corpora[1:]:
            shutil.copyfile(corpora[0], copy)
        if staging.exists():  # a split without rows has no parts
            shutil.rmtree(staging)

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
    shutil.rmtree(base / PARTS, ignore_errors=True)
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
