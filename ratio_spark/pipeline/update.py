"""The living benchmark: ``ratio-spark update --inputs new/`` adds papers to an existing benchmark.

1. The new inputs go through ``ingest`` into a staging root (``<tables.root>/_update``), under the ingest
   contract (every record is a paper or a reject, reconciled).
2. Each staged paper is compared with ``papers`` by paper id and a content hash (every column but
   ``source_path``): new, changed or unchanged. Only new and changed papers go on, through ``segment``
   (Spark NLP: the costly stage) in the staging root, under its contract (drops written, reconciled).
3. The staged rows replace those papers' rows in the benchmark tables, one Delta commit per table
   (``sentences``, segment's ``drops``; then the ingest and segment rows of ``stats_drops`` recounted),
   and last ``papers`` by a Delta ``MERGE`` on ``paper_id`` (inserted or updated). Each replacement is
   reconciled: rows after = rows before - the replaced papers' old rows + the staged rows. The merged
   tables are then compacted (Delta ``OPTIMIZE``).
4. ``mine`` runs on those papers only (``stages.mine_papers_stage``), plus the papers that share a (query,
   gold) text with them: the duplicate rule keeps the smallest pair id of a text corpus-wide, so those are
   ranked again together, against the pairs every other paper keeps. Their rows of ``mined_pairs`` and of
   mine's ``drops`` are replaced (one commit each, reconciled the same way), ``stats_mining`` is corrected
   by the pairs examined before and after.
5. ``pools`` rebuilds only the splits whose pairs changed and the later ones (the cross-split rule drops a
   text from a split when an earlier split has it), or every split when rolling windows moved
   (``splits_to_rebuild``): their ``queries``, ``candidates`` and drops are replaced (``replaceWhere`` on
   ``split``); the reconciliation, the leakage checks and the statistics cover every split.
   ``citations`` (a new paper can be the one an old bibliography entry cites) and ``export`` (the release
   files) run again over the whole tables. The result equals a full rebuild from the same inputs
   (tests/pipeline/test_update.py).
6. A row of ``releases`` records the release: every table's Delta version (read any of them back with
   ``read_release``: Delta time travel, ``versionAsOf``), row counts, and the diff against the previous
   release (new queries per split and move, pool growth per split).

One update at a time: an update holds an exclusive lock on ``<tables.root>/_update.lock`` (``fcntl.flock``,
released by the kernel when the process ends, so a killed update leaves no stale lock) from before it stages
anything until its release is written; a second update on the same tables stops at once with one line naming
the update that holds it (``UpdateConflict``, exit 1: the run could not go on, the input was fine; run it again
after the first). On a root that is not a local folder (``s3://``, ``dbfs:/``) there is no lock: Delta's
optimistic concurrency still refuses a commit that conflicts with a concurrent one, and that refusal is the
same one line naming the table. Readers are never blocked: ``evaluate`` reads each table at one version
(Delta snapshot isolation) and its manifest names that version.

Nothing new or changed: nothing is written, no table gets a version. A killed update is finished by the
next one: ``papers`` is merged after the tables derived from it, so a rerun stages the same papers again;
and a table version that the latest release does not record (``unfinished``) means an update stopped after
its first write: the next one runs mine, citations, pools and export over the whole tables (a full rebuild
of the derived tables, exact whatever the stop left).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import socket
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ratio_spark.core.errors import MissingTableError, RunFailure, UserError
from ratio_spark.core.schema import MOVES, SPLITS, TABLES
from ratio_spark.pipeline.settings import PipelineConfig
from ratio_spark.pipeline.stage import reconcile
from ratio_spark.pipeline.runner import log, run_stage, write_stats_drops
from ratio_spark.pipeline.tables import in_predicate, read_table, table_location, write_table

STAGED = ("ingest", "segment")  # run on the new and changed papers only
INCREMENTAL = ("mine", "pools")  # some papers mined again, some splits rebuilt (the module's docstring)
REBUILT = ("citations", "export")  # over the whole tables: references resolve across the corpus
DERIVED = ("mine", "citations", "pools", "export")  # after a stopped update: all of them, over the whole tables
CONTENT_COLUMNS = tuple(c for c in TABLES["papers"].column_names if c != "source_path")


class UpdateError(UserError):
    """An update that cannot start: no benchmark to update, tables older than the code, or no inputs."""


class UpdateConflict(RunFailure):
    """Another update is writing the same tables (its lock is held, or Delta refused a conflicting commit):
    nothing of this run went wrong but its timing; run it again when the other one has finished."""


def _lock_path(config: PipelineConfig) -> str | None:
    root = config.tables.root
    return None if "://" in root or root.startswith("dbfs:") else os.path.join(root, "_update.lock")


@contextlib.contextmanager
def update_lock(config: PipelineConfig):
    """Hold the tables' update lock (see the module's docstring); ``UpdateConflict`` when another update has it."""
    import fcntl

    path = _lock_path(config)
    if path is None:
        log(f"update: {config.tables.root} is not a local folder: no update lock, run one update at a time "
            "(Delta refuses a conflicting commit)")
        yield
        return
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UpdateConflict(f"another `ratio-spark update` is writing the tables at {config.tables.root} "
                                 f"({holder}): run this one again when it has finished") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}, since "
                     f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}")
        handle.flush()
        try:
            yield
        finally:
            handle.truncate(0)
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_no_update_running(config: PipelineConfig) -> None:
    """The lock probed before the JVM starts, so a second update stops in a moment (``update`` takes it)."""
    with update_lock(config):
        pass


def _is_delta_conflict(exc: BaseException) -> bool:
    try:
        from delta.exceptions import DeltaConcurrentModificationException
    except ImportError:  # pragma: no cover
        DeltaConcurrentModificationException = ()  # noqa: N806
    return isinstance(exc, DeltaConcurrentModificationException) or "io.delta.exceptions.Concurrent" in str(exc)[:2000]


def content_hash() -> F.Column:
    """SHA-256 of a paper's content: a paper delivered again from another file is unchanged."""
    return F.sha2(F.to_json(F.struct(*CONTENT_COLUMNS)), 256)


def staging_config(config: PipelineConfig, inputs: str) -> PipelineConfig:
    """The same settings, tables in ``<root>/_update``, the first input's reader on the new folder."""
    if not config.inputs:
        raise UpdateError("update needs an input in the configuration (inputs:) to read the new papers with")
    tables = config.tables.model_copy(update={"root": f"{config.tables.root.rstrip('/')}/_update", "overrides": {}})
    new_input = config.inputs[0].model_copy(update={"path": inputs, "name": f"{config.inputs[0].name}-update"})
    return config.model_copy(update={"tables": tables, "inputs": [new_input]})


def delta_table(spark: SparkSession, config: PipelineConfig, name: str):
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, table_location(config, name))


def table_version(spark: SparkSession, config: PipelineConfig, name: str) -> int | None:
    try:
        return delta_table(spark, config, name).history(1).first()["version"]
    except Exception:  # not a Delta table (yet)
        return None


def benchmark_tables(spark: SparkSession, config: PipelineConfig) -> dict[str, int]:
    """Every declared table present under the configuration, with its current Delta version."""
    versions = {name: table_version(spark, config, name) for name in TABLES if name != "releases"}
    return {name: v for name, v in versions.items() if v is not None}


def check_tables_are_current(spark: SparkSession, config: PipelineConfig) -> None:
    """Tables written by older code (a column added since) cannot take this code's rows: say so before anything
    is staged or written, not after the new papers were ingested. Each table is opened once (its schema); a
    table not written yet is skipped."""
    for name in TABLES:
        try:
            columns = set(read_table(spark, config, name).columns)
        except MissingTableError:
            continue
        if missing := [c for c in TABLES[name].column_names if c not in columns]:
            raise UpdateError(f"table {name!r} at {table_location(config, name)} is older than this code (missing "
                              f"column(s) {missing}): rebuild the benchmark with `ratio-spark run`, then update it")


def read_release(spark: SparkSession, config: PipelineConfig, table: str, release: int | None = None) -> DataFrame:
    """``table`` as release ``release`` (the latest when None) left it: Delta time travel to its version."""
    releases = read_table(spark, config, "releases")
    if release is None:
        release = releases.agg(F.max("release")).first()[0]
    row = releases.filter(F.col("release") == release).first()
    if row is None:
        raise UpdateError(f"no release {release} in {table_location(config, 'releases')}")
    if table not in row["table_versions"]:
        raise UpdateError(f"release {release} has no table {table!r}")
    return (spark.read.format("delta").option("versionAsOf", row["table_versions"][table])
            .load(table_location(config, table)))


@dataclass
class Classified:
    new: DataFrame
    changed: DataFrame
    n_new: int
    n_changed: int
    n_unchanged: int

    @property
    def papers(self) -> DataFrame:
        return self.new.unionByName(self.changed)


def classify(staged: DataFrame, current: DataFrame) -> Classified:
    """Staged papers against the benchmark's, by id and content hash."""
    known = current.select("paper_id", content_hash().alias("_current_hash"))
    labelled = staged.withColumn("_hash", content_hash()).join(known, "paper_id", "left")
    new = labelled.filter(F.col("_current_hash").isNull())
    changed = labelled.filter(F.col("_current_hash").isNotNull() & (F.col("_hash") != F.col("_current_hash")))
    counts = {r["kind"]: r["count"] for r in labelled.groupBy(
        F.when(F.col("_current_hash").isNull(), "new").when(F.col("_hash") != F.col("_current_hash"), "changed")
        .otherwise("unchanged").alias("kind")).count().collect()}
    columns = TABLES["papers"].column_names
    return Classified(new.select(*columns), changed.select(*columns), counts.get("new", 0), counts.get("changed", 0),
                      counts.get("unchanged", 0))


def id_predicate(paper_ids: list[str], stage_column: str | None = None, stages: tuple[str, ...] = ()) -> str:
    where = in_predicate("paper_id", paper_ids)
    if stage_column:
        where = f"{in_predicate(stage_column, stages)} AND {where}"
    return where


def replace_papers_rows(spark: SparkSession, config: PipelineConfig, staging: PipelineConfig,
                        paper_ids: list[str]) -> dict[str, str]:
    """``sentences`` and segment's ``drops``: the staged rows replace those of the papers, one commit each,
    reconciled against the counts before."""
    balances = {}
    for name, where, staged_rows in [
        ("sentences", id_predicate(paper_ids), read_table(spark, staging, "sentences")),
        ("drops", id_predicate(paper_ids, "stage", ("segment",)),
         read_table(spark, staging, "drops").filter(F.col("stage") == "segment")),
    ]:
        table = read_table(spark, config, name)
        before, replaced = table.count(), table.filter(where).count()
        added = staged_rows.count()
        write_table(staged_rows.select(*TABLES[name].column_names), table_location(config, name),
                    TABLES[name].partition_by, replace_where=where)
        after = read_table(spark, config, name).count()
        balances[name] = reconcile("update", f"{name} rows (before - replaced + staged)", before - replaced + added,
                                   {name: after}, {})
    return balances


def recount_drops(spark: SparkSession, config: PipelineConfig) -> None:
    """The ingest and segment rows of ``stats_drops``, from the merged ``rejects`` and ``drops``."""
    by_stage = {"ingest": read_table(spark, config, "rejects").withColumn("stage", F.lit("ingest")),
                "segment": read_table(spark, config, "drops")}
    for stage, drops in by_stage.items():
        counts = {r["reason"]: r["count"] for r in drops.filter(F.col("stage") == stage).groupBy("reason").count().collect()}
        write_stats_drops(spark, config, stage, dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))


MERGED = ("papers", "rejects", "sentences", "drops")  # the tables an update adds files to, update after update


def compact(spark: SparkSession, config: PipelineConfig) -> None:
    """Delta OPTIMIZE (bin-packing) of the tables updates merge into: each MERGE or replaceWhere adds files,
    and reads slow down with many small ones. A version with no data change; time travel still reads the
    old files (until VACUUM)."""
    for name in MERGED:
        delta_table(spark, config, name).optimize().executeCompaction()


def merge_papers(spark: SparkSession, config: PipelineConfig, papers: DataFrame) -> None:
    """Delta MERGE on paper_id: new papers inserted, changed ones updated, in one commit."""
    (delta_table(spark, config, "papers").alias("t").merge(papers.alias("s"), "t.paper_id = s.paper_id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


def merge_rejects(spark: SparkSession, config: PipelineConfig, rejects: DataFrame) -> None:
    """Rejects of the new inputs not already recorded (by source path and reason)."""
    (delta_table(spark, config, "rejects").alias("t")
     .merge(rejects.alias("s"), "t.source_path = s.source_path AND t.reason = s.reason")
     .whenNotMatchedInsertAll().execute())


def unfinished(spark: SparkSession, config: PipelineConfig, release: Any) -> bool:
    """A table has a version ``release`` does not record: an update stopped after its first write (or a
    stage ran by hand since)."""
    return benchmark_tables(spark, config) != dict(release["table_versions"])


def splits_to_rebuild(spark: SparkSession, config: PipelineConfig, before_version: int, papers: list[str]) -> tuple[str, ...]:
    """The splits whose pools can change when ``papers``' rows of ``mined_pairs`` change (version
    ``before_version`` -> now): the splits of their rows before and after, and every later split (the
    cross-split rule reads the earlier splits); every split when the rolling windows moved."""
    from ratio_spark.pipeline.splits import assign_splits, resolve_splits

    before = (spark.read.format("delta").option("versionAsOf", before_version)
              .load(table_location(config, "mined_pairs")))
    after = read_table(spark, config, "mined_pairs")
    ranges = resolve_splits(after, config.splits)
    if resolve_splits(before, config.splits).ranges() != ranges.ranges():
        return SPLITS
    where = in_predicate("paper_id", papers)
    touched = assign_splits(before.filter(where).unionByName(after.filter(where)), ranges).pairs
    ranks = [SPLITS.index(r["split"]) for r in touched.select("split").distinct().collect()]
    return SPLITS[min(ranks):] if ranks else ()


def release_counts(spark: SparkSession, config: PipelineConfig, versions: dict[str, int]) -> dict[str, Any]:
    """Rows per table, queries per split and move, pool sentences per split, at the given versions."""

    def at(name: str) -> DataFrame:
        return spark.read.format("delta").option("versionAsOf", versions[name]).load(table_location(config, name))

    rows = {name: at(name).count() for name in versions}
    queries = {f"{r['split']}/{r['move']}": r["count"] for r in at("queries").groupBy("split", "move").count().collect()} \
        if "queries" in versions else {}
    pools = {r["split"]: r["count"] for r in at("candidates").groupBy("split").count().collect()} \
        if "candidates" in versions else {}
    return {"rows": rows, "queries": queries, "pool": pools}


def latest_release(spark: SparkSession, config: PipelineConfig) -> Any:
    if table_version(spark, config, "releases") is None:
        return None
    return read_table(spark, config, "releases").orderBy(F.desc("release")).first()


def write_release(spark: SparkSession, config: PipelineConfig, inputs: str, classified: dict[str, int]) -> dict[str, Any]:
    """Append a row to ``releases``: versions, counts and the diff against the previous release."""
    previous = latest_release(spark, config)
    versions = benchmark_tables(spark, config)
    counts = release_counts(spark, config, versions)
    number = 0 if previous is None else previous["release"] + 1
    diff: dict[str, Any] = {}
    if previous is not None:
        before = json.loads(previous["counts"])
        diff = {
            "new_queries": {f"{s}/{m}": counts["queries"].get(f"{s}/{m}", 0) - before["queries"].get(f"{s}/{m}", 0)
                            for s in SPLITS for m in MOVES},
            "pool_growth": {s: counts["pool"].get(s, 0) - before["pool"].get(s, 0) for s in SPLITS},
            "rows": {n: counts["rows"][n] - before["rows"].get(n, 0) for n in counts["rows"]},
        }
    row = (number, dt.datetime.now(dt.timezone.utc).replace(tzinfo=None), inputs, classified.get("new", 0),
           classified.get("changed", 0), classified.get("unchanged", 0), versions, json.dumps(counts, sort_keys=True),
           json.dumps(diff, sort_keys=True))
    frame = spark.createDataFrame([row], TABLES["releases"].ddl)
    frame.write.format("delta").mode("append").save(table_location(config, "releases"))
    return {"release": number, "table_versions": versions, **counts, "diff": diff}


def update(spark: SparkSession, config: PipelineConfig, inputs: str) -> dict[str, Any]:
    """Add the papers under ``inputs`` to the benchmark under ``config`` (see the module's docstring), holding
    the update lock; a commit Delta refuses because of a concurrent writer is an ``UpdateConflict``."""
    if table_version(spark, config, "papers") is None:
        raise UpdateError(f"no benchmark to update at {table_location(config, 'papers')}: run `ratio-spark run` first")
    with update_lock(config):
        try:
            return _update(spark, config, inputs)
        except Exception as exc:
            if not _is_delta_conflict(exc):
                raise
            line = next((part.strip() for part in str(exc).splitlines() if "Concurrent" in part), str(exc)[:300])
            raise UpdateConflict(f"a concurrent writer changed the tables at {config.tables.root} while this update "
                                 f"committed ({line[:300]}): run it again; the next update finishes what this one "
                                 "started") from None


def _update(spark: SparkSession, config: PipelineConfig, inputs: str) -> dict[str, Any]:
    from ratio_spark.pipeline.stages import MINE_PAPERS
    from ratio_spark.pipeline.mine import pairs_examined

    check_tables_are_current(spark, config)
    staging = staging_config(config, inputs)
    shutil.rmtree(staging.tables.root, ignore_errors=True)
    try:
        summary: dict[str, Any] = {"inputs": inputs, "stages": {}}
        summary["stages"]["ingest"] = run_stage(spark, staging, "ingest")
        staged = classify(read_table(spark, staging, "papers"), read_table(spark, config, "papers"))
        new_rejects = read_table(spark, staging, "rejects").join(
            read_table(spark, config, "rejects").select("source_path", "reason"), ["source_path", "reason"], "left_anti")
        n_rejects = new_rejects.count()
        kinds = {"new": staged.n_new, "changed": staged.n_changed, "unchanged": staged.n_unchanged}
        summary.update(papers=kinds, new_rejects=n_rejects)
        log(f"update: {staged.n_new} new, {staged.n_changed} changed, {staged.n_unchanged} unchanged paper(s), "
            f"{n_rejects} new reject(s)")
        previous = latest_release(spark, config)
        pending = previous is not None and unfinished(spark, config, previous)
        if staged.n_new + staged.n_changed + n_rejects == 0 and not pending:
            log("update: nothing new or changed: no table written")
            return {**summary, "release": None}
        if previous is None:  # the benchmark as it stands becomes release 0, the base of the first diff
            write_release(spark, config, "(before the first update)", {})
        if n_rejects:
            merge_rejects(spark, config, new_rejects)
        paper_ids = sorted(r["paper_id"] for r in staged.papers.select("paper_id").collect())
        if paper_ids:
            write_table(staged.papers, table_location(staging, "papers"))  # segment only these
            summary["stages"]["segment"] = run_stage(spark, staging, "segment")
            old_sentences = read_table(spark, config, "sentences").filter(id_predicate(paper_ids))
            examined_before = pairs_examined(old_sentences)  # stats_mining loses these, gains the new ones
            summary["replaced"] = replace_papers_rows(spark, config, staging, paper_ids)
            merge_papers(spark, config, read_table(spark, staging, "papers"))
        recount_drops(spark, config)
        compact(spark, config)
        if pending:  # an update stopped half-way: the derived tables from scratch
            log(f"update: the tables have versions the last release does not record: {', '.join(DERIVED)} run over "
                "the whole tables")
            for stage in DERIVED:
                summary["stages"][stage] = run_stage(spark, config, stage)
            summary.update(incremental=[*STAGED], rerun=list(DERIVED), splits_rebuilt=list(SPLITS))
        elif paper_ids:
            mined_before = table_version(spark, config, "mined_pairs")
            summary["stages"]["mine"] = run_stage(spark, config, MINE_PAPERS, papers=paper_ids,
                                                  examined_before=examined_before)
            mined = summary["stages"]["mine"].pop("paper_ids_mined")  # not for the printed summary
            rebuilt = splits_to_rebuild(spark, config, mined_before, mined)
            log(f"update: rebuilding the pools of split(s) {', '.join(rebuilt) or '(none)'}")
            summary["stages"]["pools"] = run_stage(spark, config, "pools", splits=rebuilt)
            for stage in REBUILT:
                summary["stages"][stage] = run_stage(spark, config, stage)
            summary.update(incremental=[*STAGED, *INCREMENTAL], rerun=list(REBUILT), splits_rebuilt=list(rebuilt))
        else:  # new rejects only: no paper, pair or pool changed
            summary.update(incremental=["ingest"], rerun=[], splits_rebuilt=[])
        summary["release"] = write_release(spark, config, inputs, kinds)
        return summary
    finally:
        shutil.rmtree(staging.tables.root, ignore_errors=True)
