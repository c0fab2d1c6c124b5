"""The whole pipeline on a real Spark standalone cluster (tests/conftest.py ``standalone_cluster``: a master and
two 1-core workers), the package shipped to the executors as a zip (``--py-files``), driven by spark-submit as
on a cluster: its tables and release equal those of the same slice run in ``local[2]``, row for row, although a
worker is SIGKILLed during segment and another during mine; a driver SIGKILLed during mine leaves only whole
committed tables behind, and the rerun gives the reference rows with no duplicate.

Each cluster run takes minutes here, so one run proves both that the cluster gives local mode's tables and that
losing workers changes no row (a run with the kills that equals local mode proves the run without them would)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from conftest import REPO_ROOT, assert_same_tables, release_manifest, sample_config, table_names, table_rows
from ratio_spark.config import Config
from ratio_spark.pipeline.jars import ensure_jars
from ratio_spark.pipeline.package_zip import write_package_zip
from ratio_spark.pipeline.runner import run_stage
from ratio_spark.pipeline.stages import PIPELINE
from test_cluster_recipe import clean_env, copy_sample_slice

pytestmark = [pytest.mark.spark, pytest.mark.slow]
VENV_BIN = Path(sys.executable).parent


@dataclass
class Slice:
    corpus: Path
    package_zip: Path
    reference: Config  # the slice run in local[2] in this test session


def finished_stage_rows(location: Path, finished=("ingest", "segment")) -> list[str]:
    frame = DeltaTable(str(location)).to_pandas()
    return sorted(map(str, frame[frame["stage"].isin(finished)].astype(str).itertuples(index=False)))


@pytest.fixture(scope="module")
def slice_run(spark, tmp_path_factory) -> Slice:
    """Six real papers (two per split year) run through every stage in the session's local[2] Spark, and the
    package zipped as the executors receive it."""
    root = tmp_path_factory.mktemp("standalone-slice")
    corpus = copy_sample_slice(root)
    package_zip = write_package_zip(root / "ratio_spark.zip")
    reference = sample_config(corpus, root / "local" / "tables", root / "local" / "release")
    for stage in PIPELINE:
        run_stage(spark, reference, stage)
    return Slice(corpus, package_zip, reference)


@dataclass
class Submitted:
    returncode: int
    lines: list[str]
    tables: Path
    release: Path

    @property
    def output(self) -> str:
        return "".join(self.lines)


def submit(cluster, run: Slice, target: Path, on_line: Callable[[str, subprocess.Popen], None] | None = None,
           timeout: float = 1200) -> Submitted:
    """``spark-submit jobs/run.py`` against the cluster, with the package zip and the jars, from a clean
    environment (no PYTHONPATH); ``on_line`` sees each line of the driver's output as it comes."""
    command = [str(VENV_BIN / "spark-submit"), "--master", cluster.master_url, "--driver-memory", "1g",
               "--jars", ",".join(map(str, ensure_jars())), "--py-files", str(run.package_zip),
               str(REPO_ROOT / "jobs" / "run.py"), "--conf", str(REPO_ROOT / "conf" / "sample.yaml")]
    # Delta's 50 partitions for a table's snapshot are for long logs; the slice's are short: 2, as local mode has
    # them (``session._LOCAL_DEFAULTS``; docs/performance.md, "The test suite").
    for override in (f"spark.master={cluster.master_url}", f"inputs.0.path={run.corpus}",
                     f"tables.root={target / 'tables'}", f"release.root={target / 'release'}",
                     "spark.conf.spark.databricks.delta.snapshotPartitions=2"):
        command += ["--set", override]
    target.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(command, cwd=target, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=clean_env(RATIO_SPARK_LOG_DIR=str(target / "logs")), start_new_session=True)
    timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line, proc)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Submitted(proc.returncode, lines, target / "tables", target / "release")


def executor_folders(cluster, worker: str) -> list[Path]:
    return sorted((cluster.root / worker).glob("app-*/*"))


def forget_applications(cluster) -> None:
    """The executors' folders hold a copy of every jar (~280 MB each): drop them once a test has looked."""
    import shutil

    for worker in ("worker-1", "worker-2"):
        for app in (cluster.root / worker).glob("app-*"):
            shutil.rmtree(app, ignore_errors=True)


def test_the_pipeline_on_two_workers_gives_the_tables_of_local_mode_though_workers_are_killed(
        standalone_cluster, slice_run, tmp_path):
    """The package zip ran the driver and reached each worker's executors. worker-1 is SIGKILLed (with its
    executor) once segment starts, and restarted; worker-2 likewise once mine starts. Spark reruns the lost tasks
    on the executor that remains; the tables and the release equal local mode's."""
    killed: dict[str, str] = {}  # stage -> the worker SIGKILLed while it ran

    def kill_during(line: str, proc) -> None:
        for stage, worker in (("segment", "worker-1"), ("mine", "worker-2")):
            if stage not in killed and line.startswith("[ratio-spark") and f" {stage}: " in line:
                time.sleep(2)  # into the stage's first job
                standalone_cluster.kill_worker(worker)
                killed[stage] = worker
                if stage == "segment":
                    standalone_cluster.launch_worker(worker)  # back in time for mine, where the other one goes

    run = submit(standalone_cluster, slice_run, tmp_path / "cluster", on_line=kill_during)
    assert run.returncode == 0, run.output[-4000:]
    assert f"from {slice_run.package_zip}/ratio_spark" in run.output  # the zip ran the driver, not a checkout
    for worker in ("worker-1", "worker-2"):  # each worker ran an executor, which received the zip
        folders = executor_folders(standalone_cluster, worker)
        assert folders and all((f / "ratio_spark.zip").is_file() for f in folders), worker
    assert killed == {"segment": "worker-1", "mine": "worker-2"}
    assert run.output.count("Lost executor") >= 2, run.output[-4000:]  # the driver saw both executors go
    assert_same_tables(run.tables, Path(slice_run.reference.tables.root))
    assert release_manifest(run.release) == release_manifest(Path(slice_run.reference.release.root))
    standalone_cluster.launch_worker("worker-2")
    standalone_cluster.wait_for_workers(2)  # the cluster is whole again for the next test
    forget_applications(standalone_cluster)


def test_a_driver_killed_during_mine_leaves_whole_tables_and_the_rerun_no_duplicate(
        standalone_cluster, slice_run, spark, tmp_path):
    """SIGKILL of the driver while mine writes: every table on disk is one committed Delta version, equal to
    the reference (papers .. references) or absent (mined_pairs and after); the master drops the application
    and its executors. Rerunning every stage over it gives the reference rows, none twice."""
    reference = Path(slice_run.reference.tables.root)

    def kill_during_mine(line: str, proc) -> None:
        if line.startswith("[ratio-spark") and " mine: writing mined_pairs ..." in line:  # the writes begin
            time.sleep(1)
            os.killpg(proc.pid, signal.SIGKILL)

    run = submit(standalone_cluster, slice_run, tmp_path / "cluster", on_line=kill_during_mine)
    assert run.returncode == -signal.SIGKILL, run.output[-4000:]
    assert "== mine ==" not in run.output
    left = table_names(run.tables)
    assert {"papers", "rejects", "sentences", "references"} <= set(left)
    # A table whose first commit the kill prevented (mine writes its tables side by side): no version, no rows.
    for name in sorted({p.name for p in run.tables.iterdir() if (p / "_delta_log").is_dir()} - set(left)):
        with pytest.raises(TableNotFoundError):
            DeltaTable(str(run.tables / name))
    for name in left:  # committed tables are whole: the same rows as the reference's, none missing, none twice
        if name not in ("drops", "stats_drops"):
            assert table_rows(run.tables / name) == table_rows(reference / name), name
    for name in ("drops", "stats_drops"):  # written by every stage, one commit per stage: the finished stages'
        assert finished_stage_rows(run.tables / name) == finished_stage_rows(reference / name), name
    deadline = time.time() + 60
    while time.time() < deadline and standalone_cluster.state().get("activeapps"):
        time.sleep(1)
    assert not standalone_cluster.state().get("activeapps"), "the master still runs the killed driver's application"
    config = sample_config(slice_run.corpus, run.tables, run.release)
    for stage in PIPELINE:  # the rerun (in local mode: the rows, not the cluster, are under test here)
        run_stage(spark, config, stage)
    assert_same_tables(run.tables, reference)
    forget_applications(standalone_cluster)
