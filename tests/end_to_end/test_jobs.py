"""A run killed midway and rerun gives the same rows. (The jobs under spark-submit, from a zip and a wheel:
tests/end_to_end/test_cluster_recipe.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ratio_spark.config import load_config
from ratio_spark.pipeline.runner import run_stage
from ratio_spark.pipeline.stages import PIPELINE

from conftest import REPO_ROOT, release_manifest, table_rows

VENV_BIN = Path(sys.executable).parent


def job_env() -> dict:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


@pytest.mark.slow
def test_a_run_killed_midway_then_rerun_gives_the_same_rows(sample_benchmark, spark, tmp_path):
    """`ratio-spark run` on the shared sample, SIGKILLed while it writes the sentences table; the stages then
    rerun over what it left (in this session: no second cold JVM) give every table of the uninterrupted run
    (tests/conftest.py) row for row, and the same release manifest."""
    reference = sample_benchmark.config
    overrides = [f"tables.root={tmp_path / 'tables'}", f"inputs.0.path={sample_benchmark.corpus.folder}",
                 f"release.root={tmp_path / 'release'}"]
    cmd = [str(VENV_BIN / "ratio-spark"), "run", "--conf", str(REPO_ROOT / "conf" / "sample.yaml")]
    for override in overrides:
        cmd += ["--set", override]
    # First run: killed hard while it writes the sentences table.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=job_env(),
                            cwd=REPO_ROOT, start_new_session=True)
    for line in proc.stdout:
        if "segment:" in line:
            time.sleep(3)
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode != 0
    assert (tmp_path / "tables" / "papers" / "_delta_log").is_dir()  # it got as far as the stage before
    # The rerun, with the configuration the command resolved, completes; every table equals the reference.
    config = load_config(REPO_ROOT / "conf" / "sample.yaml", overrides)
    for stage in PIPELINE:
        run_stage(spark, config, stage)
    for name in ("papers", "rejects", "sentences", "references", "mined_pairs", "drops", "queries", "candidates"):
        assert table_rows(config.tables.location(name)) == table_rows(reference.tables.location(name)), name
    assert release_manifest(tmp_path / "release") == release_manifest(Path(reference.release.root))
