"""The cluster recipe (README "On a cluster") through the real spark-submit, from outside the repository:
the zip via --py-files, run as the README writes it, and the wheel installed without its dependencies with
the shipped Databricks configuration and provided jars. Both run the whole pipeline, ingest .. export, on a
slice of the bundled sample; nothing may resolve from the checkout (issue 12), the lexicons included: they live
in the repository's top-level lexicons/ and must travel in the zip and the wheel (issue 29)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

from conftest import REPO_ROOT
from ratio_spark.pipeline.jars import ensure_jars
from ratio_spark.pipeline.stages import PIPELINE

VENV_BIN = Path(sys.executable).parent
SAMPLE = REPO_ROOT / "data" / "sample" / "acl-emnlp-tei"
# Two real papers per year of the sample's splits (train 2016, validation 2017, test 2018).
SLICE = ["P16-1001", "P16-1008", "P17-1001", "P17-1008", "P18-1001", "P18-1009"]
RECIPE_MARK = "<!-- cluster recipe: tests/end_to_end/test_cluster_recipe.py runs the next block as written -->"
LEXICONS = REPO_ROOT / "lexicons"  # the shipped lexicons: beside the package, not in it


def readme_recipe() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    block = text.split(RECIPE_MARK, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert "spark-submit" in block and "ratio-spark zip" in block
    return block


def shipped_lexicon_files() -> set[str]:
    return {p.relative_to(LEXICONS).as_posix() for p in LEXICONS.rglob("*") if p.is_file()}


def copy_sample_slice(root: Path) -> Path:
    folder = root / "data" / "sample" / "acl-emnlp-tei"
    folder.mkdir(parents=True)
    for name in SLICE:
        shutil.copy(SAMPLE / f"{name}.tei.xml.gz", folder)
    return folder


def clean_env(**extra: str) -> dict:
    """The venv's tools first on PATH, and no PYTHONPATH pointing into a checkout."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}", "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def check_whole_run(stdout: str, tables: Path, release: Path) -> None:
    for stage in PIPELINE:
        assert f"== {stage} ==" in stdout, stage
    papers = DeltaTable(str(tables / "papers")).to_pandas()
    assert sorted(papers["paper_id"]) == SLICE
    for name in ("sentences", "mined_pairs", "queries", "candidates"):
        assert len(DeltaTable(str(tables / name)).to_pandas()) > 0, name
    manifest = json.loads((release / "manifest.json").read_text())
    assert set(manifest["splits"]) == {"train", "validation", "test"}
    # mined with the shipped lexicon v1 (conf/sample.yaml's default), read from the zip or the wheel
    assert set(DeltaTable(str(tables / "mined_pairs")).to_pandas()["lexicon_version"]) == {"v1"}


@pytest.mark.slow
def test_the_readme_recipe_runs_as_written_from_the_zip(tmp_path):
    """`ratio-spark zip` zips the installed package (this checkout, editable) and the top-level lexicons/; the copy
    holds no package and no lexicons, so the run can read them only from the zip."""
    work = tmp_path / "checkout"
    shutil.copytree(REPO_ROOT / "jobs", work / "jobs")
    shutil.copytree(REPO_ROOT / "conf", work / "conf")
    copy_sample_slice(work)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_recipe()], cwd=work, capture_output=True,
                            text=True, env=clean_env(RATIO_SPARK_LOG_DIR=str(tmp_path / "logs")), timeout=1500)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert f"from {work / 'ratio_spark.zip'}/ratio_spark" in result.stdout  # the zip ran, not a checkout
    with zipfile.ZipFile(work / "ratio_spark.zip") as archive:
        names = archive.namelist()
    prefix = "ratio_spark/lexicons/"
    assert {n.removeprefix(prefix) for n in names if n.startswith(prefix) and not n.endswith("/")} == shipped_lexicon_files()
    assert "ratio_spark/lexicon/loader.py" in names and not any("__pycache__" in n for n in names)
    assert not (work / "lexicons").exists() and not (work / "ratio_spark").exists()
    check_whole_run(result.stdout, work / "data" / "tables" / "sample", work / "data" / "release" / "sample")


@pytest.mark.slow
def test_the_whole_pipeline_runs_from_the_wheel_as_on_databricks(tmp_path):
    source = tmp_path / "source"
    for folder in ("ratio_spark", "lexicons"):
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO_ROOT / name, source)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "Deprecat" not in built.stdout + built.stderr  # current packaging metadata: a quiet build
    wheel = next((tmp_path / "dist").glob("ratio_spark-*.whl"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=600)
    # the runtime files the code finds by name, not by a path into a checkout; the lexicons mapped into the package
    installed = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    assert {"ratio_spark/conf/databricks.yaml", "ratio_spark/conf/training/minilm.yaml"} <= installed
    assert {f"ratio_spark/lexicons/{v}/markers.tsv" for v in ("v1", "v2", "v3")} | {
        "ratio_spark/lexicons/prompts/moves.v1.yaml", "ratio_spark/lexicons/patterns/templates.tsv"} <= installed
    assert not (site / "lexicons").exists()

    job = tmp_path / "job"  # a working directory with no package in it: only the job file, a conf and the data
    (job / "jobs").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "jobs" / "run.py", job / "jobs")
    corpus = copy_sample_slice(job)
    (job / "job.yaml").write_text(yaml.safe_dump({
        "extends": "databricks",  # the shipped configuration, read from the installed wheel
        # Sized for the slice (Databricks sizes its own): Delta's 50 snapshot partitions are for long logs, and
        # took a third of this run's time (107 -> 76 s with 2, under spark-submit).
        "spark": {"conf": {"spark.sql.shuffle.partitions": "4", "spark.databricks.delta.snapshotPartitions": "2"}},
        "tables": {"root": str(job / "tables")},
        "release": {"root": str(job / "release")},
        "inputs": [{"name": "sample", "format": "tei", "path": str(corpus), "date_rules": ["source", "anthology_id"]}],
        "splits": {"train": {"start": "2016-01-01", "end": "2016-12-31"},
                   "validation": {"start": "2017-01-01", "end": "2017-12-31"},
                   "test": {"start": "2018-01-01", "end": "2018-12-31"}},
    }))
    jars = ",".join(str(j) for j in ensure_jars())  # what the cluster provides (Delta Lake, Spark NLP)
    result = subprocess.run(
        [str(VENV_BIN / "spark-submit"), "--master", "local[2]", "--jars", jars, "jobs/run.py", "--conf", "job.yaml"],
        cwd=job, capture_output=True, text=True, timeout=1500,
        env=clean_env(PYTHONPATH=str(site), RATIO_SPARK_LOG_DIR=str(tmp_path / "logs")),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert f"from {site / 'ratio_spark'}" in result.stdout  # the installed wheel ran, not a checkout
    check_whole_run(result.stdout, job / "tables", job / "release")


@pytest.mark.slow
def test_spark_submit_without_the_jars_stops_at_once_with_the_fix(tmp_path):
    result = subprocess.run(
        [str(VENV_BIN / "spark-submit"), "--master", "local[1]", str(REPO_ROOT / "jobs" / "run.py"),
         "--conf", str(REPO_ROOT / "conf" / "sample.yaml"), "--set", f"tables.root={tmp_path}",
         "--set", f"inputs.0.path={SAMPLE}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
             "RATIO_SPARK_LOG_DIR": str(tmp_path / "logs")},
    )
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-3000:]
    # spark-submit merges the Python driver's stderr into its stdout.
    ours = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert len(ours) == 1 and "--jars" in ours[0] and "Traceback" not in result.stdout + result.stderr
