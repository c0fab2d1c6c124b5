"""A run killed midway and rerun gives the same rows. (The jobs under spark-submit, from a zip and a wheel:
tests/test_cluster_recipe.py.)"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from ratio_spark.core.config import load_config
from ratio_spark.pipeline.stages import PIPELINE, STAGES

from conftest import REPO_ROOT

SAMPLE = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"
VENV_BIN = Path(sys.executable).parent


def small_corpus(root: Path, n: int) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    for path in sorted(SAMPLE.glob("P17-*.gz"))[:n]:
        shutil.copy(path, corpus / path.name)
    return corpus


def job_env() -> dict:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


def table_rows(location: str) -> list:
    frame = DeltaTable(location).to_pandas()
    return sorted(map(str, frame.astype(str).itertuples(index=False)))


@pytest.mark.slow
def test_a_run_killed_midway_then_rerun_gives_the_same_rows(tmp_path, spark):
    corpus = small_corpus(tmp_path, 6)
    overrides = [f"inputs.0.path={corpus}"]
    reference = load_config(
        REPO_ROOT / "conf" / "sample.yaml",
        overrides + [f"tables.root={tmp_path / 'ref'}", f"release.root={tmp_path / 'ref-release'}"],
    )
    for stage in PIPELINE:
        STAGES[stage](spark, reference)

    tables = tmp_path / "tables"
    cmd = [str(VENV_BIN / "ratio-spark"), "run", "--conf", str(REPO_ROOT / "conf" / "sample.yaml"),
           "--set", f"tables.root={tables}", "--set", f"inputs.0.path={corpus}",
           "--set", f"release.root={tmp_path / 'release'}"]
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
    # Second run completes; every table equals the uninterrupted reference.
    done = subprocess.run(cmd, capture_output=True, text=True, env=job_env(), cwd=REPO_ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("papers", "rejects", "sentences", "mined_pairs", "queries", "candidates"):
        assert table_rows(str(tables / name)) == table_rows(reference.tables.location(name)), name
    assert (tmp_path / "release" / "manifest.json").read_text() == (tmp_path / "ref-release" / "manifest.json").read_text()
