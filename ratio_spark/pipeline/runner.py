"""Run one stage (``pipeline/stage.py``) under its declarations.

Before the stage starts: every table it reads exists and has the columns it reads, or a one-line
``MissingTableError`` names the table, the missing columns and the stage to run first. While it runs,
the stage reaches tables only through a ``StageIO``: it reads the declared columns of its declared
inputs, writes only its declared outputs (each checked against ``core.schema.TABLES`` before anything is
committed) and writes its drops (reasons from ``core.schema.Reason``); its progress lines go through
``io.log`` and ``io.phase`` (a long phase with its time). After it returns: every declared output was
written, every balance it returned reconciles (the runner checks them: a stage cannot skip it), ``stats_drops``
gets the stage's counts by reason, and the summary has one shape for every stage.

Progress is plain lines, readable in a log file: each ``log`` call writes one whole line at once (phases that run
side by side never share a line), and while a stage runs, ``SparkProgress`` writes a line every
``spark.progress_interval_s`` seconds (25: no 30 s pass without a line) with the running Spark stages' tasks
done/total and the time left at the rate so far. Spark's own carriage-return bar is off when stderr is not a
terminal (``pipeline/session.py``).
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any, Callable, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ratio_spark.core.errors import ContractError, MissingTableError
from ratio_spark.core.schema import REASONS, TABLES, Table
from ratio_spark.pipeline.settings import PipelineConfig
from ratio_spark.pipeline.stage import Stage
from ratio_spark.pipeline.stages import STAGES, run_first
from ratio_spark.pipeline.tables import table_location, write_table


_LOG_LOCK = threading.Lock()


def log(message: str) -> None:
    """One line, written whole: ``print`` writes the text and its newline apart, so two threads could share a line."""
    line = f"[ratio-spark {time.strftime('%H:%M:%S')}] {message}\n"
    with _LOG_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``: short enough for a progress line."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class SparkProgress:
    """While a stage runs, a line every ``interval`` seconds from Spark's status tracker: the running Spark stages
    with their tasks done/total and the phases under way; or, when no Spark task runs, that the driver is at work
    (planning, Delta commits). Use as a context manager around the stage."""

    def __init__(self, spark: SparkSession, say: Callable[[str], None], interval: float, phases: Callable[[], list[str]]):
        self.tracker = spark.sparkContext.statusTracker()
        self.say, self.interval, self.phases = say, interval, phases
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ratio-spark-progress", daemon=True)
        self._first_seen: dict[tuple[int, int], tuple[float, int]] = {}  # (stage, attempt) -> (time, tasks done)
        self._started = time.time()

    def __enter__(self) -> "SparkProgress":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                line = self.report()
            except Exception as exc:  # noqa: BLE001 - a progress line must never fail the stage (the JVM may be stopping)
                line = f"progress unavailable ({type(exc).__name__})"
            self.say(line)

    def report(self) -> str:
        """The line of one tick (the tests call it too): what runs, its tasks done/total and, for one Spark stage
        whose tasks have started to finish, the time left at the rate seen so far."""
        infos = [i for i in map(self.tracker.getStageInfo, sorted(self.tracker.getActiveStageIds())) if i is not None]
        phases = self.phases()
        doing = f" ({', '.join(phases)})" if phases else ""
        if not infos:
            return f"working on the driver{doing}: no Spark task running, {duration(time.time() - self._started)} into the stage"
        total, done = sum(i.numTasks for i in infos), sum(i.numCompletedTasks for i in infos)
        running = sum(i.numActiveTasks for i in infos)
        # "save", "collect": the callsite is noise, and Delta's internal jobs are closures ("$anonfun$...")
        actions = ", ".join(sorted({"delta" if "$" in i.name else i.name.split(" at ")[0] for i in infos}))
        ids = ", ".join(str(i.stageId) for i in infos)
        line = f"Spark stage{'s' if len(infos) > 1 else ''} {ids} ({actions}){doing}: {done}/{total} tasks done, {running} running"
        if len(infos) == 1:
            now = time.time()
            seen_at, done_then = self._first_seen.setdefault((infos[0].stageId, infos[0].currentAttemptId), (now, done))
            if done > done_then and total > done:
                line += f", about {duration((total - done) * (now - seen_at) / (done - done_then))} left"
            elif now - seen_at >= 1:  # no task finished since it was first seen: how long it has run instead
                line += f", seen running for {duration(now - seen_at)}"
        return line


def side_by_side(tasks: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run each task in a thread of its own and return each one's result. Spark runs their jobs side by side,
    so one task's planning and Delta commits (driver work) overlap another's computation. Once all have
    finished, the first task (in the given order) that raised raises."""
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        futures = {name: pool.submit(task) for name, task in tasks.items()}
    return {name: future.result() for name, future in futures.items()}


def schema_problems(table: Table, schema: StructType) -> list[str]:
    """How ``schema`` differs from the declared table: missing columns, undeclared ones, other types."""
    have = {f.name: f.dataType.simpleString() for f in schema.fields}
    want = {c.name: c.type for c in table.columns}
    problems = []
    if missing := [c for c in want if c not in have]:
        problems.append(f"missing column(s) {missing}")
    if extra := [c for c in have if c not in want]:
        problems.append(f"undeclared column(s) {extra}")
    problems += [f"{c} is {have[c]}, declared {t}" for c, t in want.items() if c in have and have[c] != t]
    return problems


def _load_delta(spark: SparkSession, location: str) -> DataFrame | None:
    try:
        return spark.read.format("delta").load(location)
    except Exception:  # AnalysisException: no Delta table there
        return None


def check_inputs(spark: SparkSession, config: PipelineConfig, stage: Stage) -> dict[str, DataFrame]:
    """Each declared input, projected on the columns the stage reads; one clear line when it cannot be."""
    frames = {}
    for name, columns in stage.reads.items():
        location = table_location(config, name)
        first = run_first(name)
        frame = _load_delta(spark, location)
        if frame is None:
            raise MissingTableError(
                f"{stage.name} reads table {name!r} at {location}, which is not a Delta table: run {first} first"
            )
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise MissingTableError(
                f"{stage.name} reads table {name!r} at {location}, which lacks column(s) {missing}: "
                f"rerun {first} (the table is older than this code)"
            )
        frames[name] = frame.select(*columns)
    return frames


class StageIO:
    """What a stage may touch: its inputs, its outputs, its drops, its settings and file inputs, the configuration
    and the session."""

    def __init__(self, spark: SparkSession, config: PipelineConfig, stage: Stage, inputs: dict[str, DataFrame]):
        self.spark, self.config, self.stage = spark, config, stage
        self.settings = stage.setting(config, stage.settings) if stage.settings else None  # its section
        self._inputs = inputs
        self.written: dict[str, str] = {}  # table -> location, in the order written
        self.drop_counts: dict[tuple, int] | None = None  # (reason, split, role) -> rows, once drops are written
        self.phase_seconds: dict[str, float] = {}  # each ``phase`` and its time: the summary's profile
        self.running_phases: list[str] = []  # the phases under way, for the progress lines

    def read(self, name: str) -> DataFrame:
        if name not in self._inputs:
            raise ContractError(f"{self.stage.name} reads table {name!r}, which it does not declare")
        return self._inputs[name]

    def file(self, what: str) -> str:
        """The configured value of a declared file input (``Stage.files``): a lexicon's version or folder."""
        if what not in self.stage.files:
            raise ContractError(f"{self.stage.name} reads the file input {what!r}, which it does not declare")
        return self.stage.setting(self.config, self.stage.files[what])

    def log(self, message: str) -> None:
        log(f"{self.stage.name}: {message}")

    @contextmanager
    def phase(self, what: str) -> Iterator[None]:
        """A progress line before a long phase and one with its time after it: no minute passes without a word."""
        started = time.time()
        self.log(f"{what} ...")
        self.running_phases.append(what)
        try:
            yield
        finally:
            self.running_phases.remove(what)
        self.phase_seconds[what] = round(time.time() - started, 1)
        self.log(f"{what}: done in {self.phase_seconds[what]:.1f} s")

    def phases(self, tasks: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        """Independent phases side by side (``side_by_side``), each timed as a ``phase``: their times overlap."""

        def timed(what: str, task: Callable[[], Any]) -> Any:
            with self.phase(what):
                return task()

        return side_by_side({what: partial(timed, what, task) for what, task in tasks.items()})

    def _write(self, name: str, df: DataFrame, replace_where: str | None = None) -> DataFrame:
        table = TABLES[name]
        problems = schema_problems(table, df.schema)
        if problems:
            raise ContractError(f"{self.stage.name} writes table {name!r} unlike its declaration: " + "; ".join(problems))
        location = table_location(self.config, name)
        write_table(df.select(*table.column_names), location, table.partition_by, replace_where)
        self.written[name] = location
        return self.spark.read.format("delta").load(location)

    def write(self, name: str, df: DataFrame, replace_where: str | None = None) -> DataFrame:
        """Replace a declared output table (or, with ``replace_where``, the rows that match it: an update);
        returns the whole table as written (count that, not ``df``)."""
        if name not in self.stage.writes:
            raise ContractError(f"{self.stage.name} writes table {name!r}, which it does not declare")
        return self._write(name, df, replace_where)

    def write_all(self, frames: dict[str, DataFrame], replace_where: str | None = None) -> dict[str, DataFrame]:
        """``write`` each table, all at once (a thread each): Spark runs their jobs side by side, so one table's
        Delta commit and planning overlap another's computation. Returns each table as written."""
        return side_by_side({name: partial(self.write, name, df, replace_where) for name, df in frames.items()})

    def write_drops(self, drops: DataFrame, replace_where: str | None = None) -> dict[tuple, int]:
        """Write what the stage dropped and count it as written: (reason, split, role) -> rows.

        ``replace_where`` (an update): replace only the stage's drops that match it; the counts are still
        those of all the stage's drops as written.

        ``drops`` has the drops table's columns except ``stage`` and ``item`` (the runner adds both: the
        item follows from the reason); ingest passes rows of ``rejects``. A reason that the stage has not
        declared (``core.schema.Reason``) fails the stage.
        """
        target = self.stage.drops_table
        if target is None:
            raise ContractError(f"{self.stage.name} drops rows but it declares no drops table")
        if target == "drops":
            items = F.create_map(*[F.lit(x) for r in REASONS.values() for x in (r.code, r.item)])
            drops = drops.withColumn("stage", F.lit(self.stage.name)).withColumn("item", items[F.col("reason")])
            where = f"stage = '{self.stage.name}'" + (f" AND ({replace_where})" if replace_where else "")
            written = self._write(target, drops, replace_where=where)
            written = written.filter(F.col("stage") == self.stage.name)
        else:
            written = self._write(target, drops)
        keys = [c for c in ("reason", "split", "role") if c in written.columns]
        counts = {
            tuple(r[k] for k in keys) + (None,) * (3 - len(keys)): r["count"]
            for r in written.groupBy(*keys).count().collect()
        }
        undeclared = sorted({key[0] for key in counts} - set(self.stage.drop_reasons))
        if undeclared:
            raise ContractError(
                f"{self.stage.name} dropped rows for reason(s) {undeclared}, which are not its reasons in "
                f"ratio_spark/core/schema.py (declared: {list(self.stage.drop_reasons)})"
            )
        self.drop_counts = counts
        return counts

    def dropped_by_reason(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (reason, *_), n in (self.drop_counts or {}).items():
            out[reason] = out.get(reason, 0) + n
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def write_stats_drops(spark: SparkSession, config: PipelineConfig, stage: str, dropped: dict[str, int]) -> str:
    """Replace ``stage``'s rows of ``stats_drops`` with its counts by reason; returns the table's location."""
    rows = [(stage, reason, REASONS[reason].item, n) for reason, n in dropped.items()]
    location = table_location(config, "stats_drops")
    write_table(spark.createDataFrame(rows, TABLES["stats_drops"].ddl), location, TABLES["stats_drops"].partition_by,
                replace_where=f"stage = '{stage}'")
    return location


def run_stage(spark: SparkSession, config: PipelineConfig, stage: str | Stage, **options: Any) -> dict[str, Any]:
    """Check the inputs, run the stage, check that it wrote every declared output and reconcile its balances;
    returns its summary. ``options`` go to ``process`` (an update's: which papers to mine, which splits to build).

    The summary has one shape: ``stage``, the stage's own counts, ``dropped`` and ``dropped_by_reason`` (as
    written), ``reconciled`` (a line per balance), ``tables``, ``phase_seconds`` and ``seconds``."""
    stage = STAGES[stage] if isinstance(stage, str) else stage
    started = time.time()
    io = StageIO(spark, config, stage, check_inputs(spark, config, stage))
    with SparkProgress(spark, io.log, config.spark.progress_interval_s, lambda: list(io.running_phases)):
        outcome = stage.process(io, **options)
    expected = [*stage.writes, *([stage.drops_table] if stage.drops_table else [])]
    unwritten = [name for name in expected if name not in io.written]
    if unwritten:
        raise ContractError(f"{stage.name} finished without writing its declared table(s) {unwritten}")
    if not outcome.balances:
        raise ContractError(f"{stage.name} returned no balance: every stage accounts for the rows that came in")
    dropped = io.dropped_by_reason()
    reconciled = [balance.check(stage.name, dropped) for balance in outcome.balances]
    if stage.drops_table:
        io.written["stats_drops"] = write_stats_drops(spark, config, stage.name, dropped)
    return {"stage": stage.name, **outcome.counts, "dropped": sum(dropped.values()), "dropped_by_reason": dropped,
            "reconciled": reconciled, "tables": dict(io.written), "phase_seconds": io.phase_seconds,
            "seconds": round(time.time() - started, 1)}
