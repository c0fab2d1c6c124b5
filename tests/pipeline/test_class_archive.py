"""The JVM class archive of local sessions (pipeline/class_archive.py): written by `ratio-spark jars --class-archive`,
mapped by every local session that finds it, ignored without harm when it does not fit.

Each session runs in its own process (the archive is a JVM start option); the JVM's class-loading log says where
each class came from: "shared objects file (top)" is the archive this project wrote (the JDK's own is the base)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ratio_spark.core import paths
from ratio_spark.pipeline.class_archive import archive_path, with_java_options
from ratio_spark.pipeline.jars import ensure_jars
from ratio_spark.pipeline.session import LOCAL_GC_OPTION

pytestmark = pytest.mark.spark

SESSION = """
import sys
from ratio_spark.config import load_config
from ratio_spark.pipeline.session import build_spark_session
spark = build_spark_session(load_config(None, sys.argv[2:]).spark)
spark.range(10).write.format("delta").save(sys.argv[1])
assert spark.read.format("delta").load(sys.argv[1]).count() == 10
print("java options:", spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", ""))
management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
print("collectors:", [bean.getName() for bean in management.getGarbageCollectorMXBeans()])
spark.stop()
"""


@pytest.fixture(scope="module")
def jars_cache(tmp_path_factory) -> Path:
    """A jars cache of its own (a copy of Delta Lake's jars) with the class archive written into it."""
    cache = tmp_path_factory.mktemp("jars-cache")
    delta = ensure_jars(wanted=("delta",))[0].parent
    shutil.copytree(delta, cache / "spark35" / "delta")
    result = subprocess.run([sys.executable, "-m", "ratio_spark.cli.main", "jars", "--class-archive"],
                            env=_env(cache), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "class archive:" in result.stderr
    return cache


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "RATIO_SPARK_JARS_CACHE": str(cache)}


def _session(cache: Path, tmp_path: Path, *settings: str) -> tuple[str, list[str]]:
    """Run SESSION with the JVM logging where its classes came from: (its output, the log's lines)."""
    log = tmp_path / "classes.log"
    options = f"spark.conf.spark.driver.extraJavaOptions=-Xlog:class+load=info:file={log}"
    result = subprocess.run([sys.executable, "-c", SESSION, str(tmp_path / "table"), options, *settings],
                            env=_env(cache), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout + result.stderr, log.read_text().splitlines()


def _archive(cache: Path) -> Path:
    [archive] = (cache / "spark35" / "class-archive").glob("*.jsa")
    return archive


def test_the_archive_is_written_where_sessions_look_for_it(jars_cache):
    jars = sorted((jars_cache / "spark35" / "delta").glob("*.jar"))
    assert archive_path(jars, jars_cache / "spark35") == _archive(jars_cache)
    assert _archive(jars_cache).stat().st_size > 10_000_000  # Spark's and Delta's classes
    assert not list((jars_cache / "spark35" / "class-archive").glob("*.partial"))


def test_a_local_session_maps_the_archive_and_keeps_the_configured_java_options(jars_cache, tmp_path):
    output, classes = _session(jars_cache, tmp_path)
    from_archive = [line for line in classes if "shared objects file (top)" in line]
    assert any("org.apache.spark.SparkContext " in line for line in from_archive)
    assert any("org.apache.spark.sql.delta." in line for line in from_archive)
    assert len(from_archive) > 5000
    # the configuration's own options and the archive's, both
    assert f"-XX:SharedArchiveFile={_archive(jars_cache)}" in output and "-Xlog:class+load" in output


def test_a_local_session_runs_the_throughput_collector_unless_the_configuration_chooses_one(jars_cache, tmp_path):
    output, classes = _session(jars_cache, tmp_path)
    assert LOCAL_GC_OPTION in output and "PS Scavenge" in output  # the parallel collector's young generation
    assert [line for line in classes if "shared objects file (top)" in line]  # the archive still maps
    log = tmp_path / "g1.log"
    chosen = f"spark.conf.spark.driver.extraJavaOptions=-XX:+UseG1GC -Xlog:class+load=info:file={log}"
    result = subprocess.run([sys.executable, "-c", SESSION, str(tmp_path / "g1"), chosen],
                            env=_env(jars_cache), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert LOCAL_GC_OPTION not in result.stdout and "G1 Young Generation" in result.stdout


def test_class_archive_false_starts_without_it(jars_cache, tmp_path):
    output, classes = _session(jars_cache, tmp_path, "spark.class_archive=false")
    assert "SharedArchiveFile" not in output
    assert not [line for line in classes if "shared objects file (top)" in line]
    assert any("org.apache.spark.SparkContext " in line for line in classes)  # the log itself works


def test_an_archive_that_does_not_fit_is_ignored_without_a_word(jars_cache, tmp_path):
    """A damaged archive (or one of another JDK build): the JVM loads its classes as usual, says nothing."""
    damaged = tmp_path / "cache"
    shutil.copytree(jars_cache / "spark35" / "delta", damaged / "spark35" / "delta")
    archive = archive_path(sorted((damaged / "spark35" / "delta").glob("*.jar")), damaged / "spark35")
    archive.parent.mkdir()
    archive.write_bytes(os.urandom(100_000))
    output, classes = _session(damaged, tmp_path)
    assert f"-XX:SharedArchiveFile={archive}" in output
    assert not [line for line in classes if "shared objects file (top)" in line]
    assert "cds" not in output.lower().replace("-xlog:cds", "")


def test_the_archive_follows_the_jars_and_is_not_used_when_one_changes(tmp_path):
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    before = archive_path([jar], tmp_path)
    jar.write_bytes(b"other")
    assert archive_path([jar], tmp_path) != before


def test_java_options_are_added_after_the_configured_ones():
    assert with_java_options({}, "-Xb")["spark.driver.extraJavaOptions"] == "-Xb"
    merged = with_java_options({"spark.driver.extraJavaOptions": "-Xa", "k": "v"}, "-Xb")
    assert merged == {"spark.driver.extraJavaOptions": "-Xa -Xb", "k": "v"}


def test_a_cluster_configuration_gets_one_line_instead_of_an_archive(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ratio_spark.cli.main", "jars", "--class-archive",
                             "--set", "spark.master=spark://127.0.0.1:7077"],
                            env=_env(Path(paths.cache_dir("jars"))), capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert "class archive serves local sessions" in line and "Traceback" not in result.stderr
