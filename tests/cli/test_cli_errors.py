"""The error contract of the real command (issue 12): a user error is one line on stderr and exit code 2, never a
stack trace; the trace goes to a log file, and --debug prints it. Spark errors caused by user input are mapped
to such lines too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ratio_spark.core.errors import describe_error
from ratio_spark.pipeline.stages import PIPELINE, STAGES

SAMPLE_CONF = str(REPO_ROOT / "conf" / "sample.yaml")
CLI = [sys.executable, "-m", "ratio_spark.cli.main"]


def run_cli(args: list[str], tmp_path: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "RATIO_SPARK_LOG_DIR": str(tmp_path / "logs"), "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, cwd=cwd or tmp_path, timeout=300)


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def bad_yaml(tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text("tables:\n  root: [unclosed\ninputs: []\n")
    return str(path)


def file_as_root(tmp_path: Path) -> str:
    (tmp_path / "a-file").write_text("not a folder")
    return str(tmp_path / "a-file" / "tables")


def parquet_not_delta(tmp_path: Path) -> str:
    """A tables root whose mined_pairs is a folder of Parquet files without a Delta log."""
    (tmp_path / "plain" / "mined_pairs").mkdir(parents=True)
    (tmp_path / "plain" / "mined_pairs" / "part-0.parquet").write_bytes(b"PAR1")
    return str(tmp_path / "plain")


# (case, command line from tmp_path, words the one line must contain)
CASES = [
    ("missing input path", lambda t: ["ingest", "--conf", SAMPLE_CONF, "--set", f"inputs.0.path={t / 'nowhere'}"],
     ["input acl-emnlp-sample", "does not exist"]),
    ("glob that matches nothing", lambda t: ["ingest", "--conf", SAMPLE_CONF, "--set", f"inputs.0.path={t}/*.jsonl.gz"],
     ["matches nothing"]),
    ("unknown lexicon", lambda t: ["mine", "--conf", SAMPLE_CONF, "--set", "mining.lexicon=v9",
                                   "--set", f"tables.root={t}"], ["no lexicon 'v9'", "v1, v2"]),
    ("unresolvable model", lambda t: ["evaluate", "--set", f"tables.root={t}", "--retrievers", "dense:no-such-model"],
     ["model 'no-such-model'", "nothing is downloaded"]),
    ("malformed --set", lambda t: ["run", "--conf", SAMPLE_CONF, "--set", "mining.lexicon"], ["must look like key.path=value"]),
    ("--set path into a value", lambda t: ["run", "--conf", SAMPLE_CONF, "--set", "spark.master.cores=2"],
     ["spark.master.cores", "does not lead to a setting"]),
    ("unknown --set key", lambda t: ["run", "--conf", SAMPLE_CONF, "--set", "mining.lexicn=v2"],
     ["mining.lexicn", "unknown key"]),
    ("bad YAML", lambda t: ["run", "--conf", bad_yaml(t)], ["not valid YAML", "line 3"]),
    ("missing configuration file", lambda t: ["run", "--conf", str(t / "nope.yaml")], ["configuration file not found"]),
    ("tables root that is not writable", lambda t: ["ingest", "--conf", SAMPLE_CONF, "--set", f"tables.root={file_as_root(t)}"],
     ["tables root", "is a file, not a folder"]),
    ("table that does not exist yet", lambda t: ["pools", "--conf", SAMPLE_CONF, "--set", f"tables.root={t}"],
     ["table mined_pairs", "does not exist yet", "ratio-spark mine"]),
    ("table folder that is not a Delta table", lambda t: ["pools", "--conf", SAMPLE_CONF, "--set",
                                                          f"tables.root={parquet_not_delta(t)}"],
     ["table mined_pairs", "is not a Delta table", "no _delta_log"]),
]


@pytest.mark.parametrize("case,args,words", CASES, ids=[c[0] for c in CASES])
def test_a_user_error_is_one_line_and_exit_code_2(case, args, words, tmp_path):
    result = run_cli(args(tmp_path), tmp_path, cwd=REPO_ROOT)
    assert result.returncode == 2, result.stderr
    line = one_line(result)
    assert line.startswith("ratio-spark ") and ": error: " in line
    for word in words:
        assert word in line, line


def test_the_trace_goes_to_a_log_file_and_debug_prints_it(tmp_path):
    args = ["mine", "--conf", SAMPLE_CONF, "--set", "mining.lexicon=v9", "--set", f"tables.root={tmp_path}"]
    quiet = run_cli(args, tmp_path, cwd=REPO_ROOT)
    logs = list((tmp_path / "logs").glob("mine-*.log"))
    assert quiet.returncode == 2 and len(logs) == 1
    assert "Traceback" in logs[0].read_text() and "PreflightError" in logs[0].read_text()
    loud = run_cli([*args, "--debug"], tmp_path, cwd=REPO_ROOT)
    assert loud.returncode == 2 and "Traceback" in loud.stderr and "PreflightError" in loud.stderr
    assert loud.stderr.strip().splitlines()[-1] == one_line(quiet)  # the same line ends it


def test_check_runs_the_preflight_alone(tmp_path):
    result = run_cli(["run", "--check", "--conf", SAMPLE_CONF, "--set", f"tables.root={tmp_path / 'tables'}",
                      "--set", f"release.root={tmp_path / 'release'}"], tmp_path, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert PIPELINE == ("ingest", "segment", "citations", "mine", "pools", "export")
    assert "== pre-flight: ingest, segment, citations, mine, pools, export ==" in result.stdout
    assert "0 failed" in result.stdout and "input acl-emnlp-sample" in result.stdout
    assert not (tmp_path / "tables").exists()  # nothing ran, nothing was created
    failing = run_cli(["export", "--check", "--conf", SAMPLE_CONF, "--set", f"tables.root={tmp_path}"], tmp_path, cwd=REPO_ROOT)
    assert failing.returncode == 2
    assert "FAIL  table queries" in failing.stdout and "FAIL  table candidates" in failing.stdout


@pytest.mark.parametrize("job", [*PIPELINE, "run"])
def test_every_stage_has_a_job(job, tmp_path):
    """The spark-submit entry points are wired to their stage: their pre-flight names what the stage reads
    (its contract's first input)."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "jobs" / f"{job}.py"), "--check", "--conf", SAMPLE_CONF,
                             "--set", f"tables.root={tmp_path}"], capture_output=True, text=True, cwd=REPO_ROOT,
                            env={**os.environ, "RATIO_SPARK_LOG_DIR": str(tmp_path / "logs")}, timeout=300)
    reads = next(iter(STAGES[job].reads), None) if job != "run" else None
    assert {"segment": "papers", "citations": "papers", "mine": "sentences", "pools": "mined_pairs",
            "export": "queries"}.get(job) == reads
    assert result.returncode == (0 if reads is None else 2), result.stdout + result.stderr
    assert f"== pre-flight: {', '.join(PIPELINE) if job == 'run' else job} ==" in result.stdout
    if reads:
        assert f"FAIL  table {reads}" in result.stdout


def _with_a_file_deleted(spark, location):
    """A Delta table whose log lists a data file that is not there (deleted outside Delta)."""
    spark.range(10).write.format("delta").save(str(location))
    next(location.glob("*.parquet")).unlink()
    return spark.read.format("delta").load(str(location))


def _damaged(spark, location):
    """A Parquet file overwritten with bytes that are not Parquet (its checksum file kept)."""
    spark.range(10).coalesce(1).write.parquet(str(location))
    damaged = next(location.glob("*.parquet"))
    damaged.write_bytes(b"not parquet" * 100)
    return damaged


def _read_by_the_workers(spark, path):
    """``mine``'s pass reading a Parquet file in the Python workers (``ordered_pairs.file_batches``)."""
    from ratio_spark.pipeline.ordered_pairs import file_batches

    pieces = [(f"file:{path}", 0, 1 << 40)]
    return spark.range(0, 1, 1, 1).mapInArrow(lambda ids: file_batches(pieces, ids), "sentence_id string")


@pytest.mark.spark
def test_spark_errors_from_user_input_become_lines(spark, tmp_path):
    """Real Spark exceptions (as a remote location would raise them past the pre-flight), mapped by describe_error."""
    attempts = {
        "missing table": (lambda: spark.read.format("delta").load(str(tmp_path / "none")).count(), "does not exist"),
        "not a Delta table": (lambda: spark.read.format("delta").load(str(tmp_path)).count(), "is not a Delta table"),
        "unknown column": (lambda: spark.range(2).select("nope").count(), "lacks the column `nope`"),
        "table under a file": (lambda: spark.range(2).write.format("delta").save(file_as_root(tmp_path)),
                               "cannot create a table at"),
        "unknown scheme": (lambda: spark.read.text("nosuchfs://bucket/x").count(), "no file system for 'nosuchfs://'"),
        "a data file deleted by hand": (lambda: _with_a_file_deleted(spark, tmp_path / "gone").collect(),
                                        "a data file of a table is missing: file:"),
        "a damaged data file, Spark's scan": (lambda: spark.read.parquet(str(_damaged(spark, tmp_path / "scan"))).collect(),
                                              "a data file of a table is damaged: file:"),
        "a damaged data file, the workers' read": (lambda: _read_by_the_workers(spark, _damaged(spark, tmp_path / "own")).collect(),
                                                   "a data file of a table is damaged: file:"),
    }
    for name, (attempt, words) in attempts.items():
        with pytest.raises(Exception) as caught:
            attempt()
        report = describe_error(caught.value)
        assert report.exit_code == 2 and report.expected, (name, report)
        assert words in report.message and "\n" not in report.message, (name, report.message)


def test_an_unexpected_error_says_where_its_trace_is():
    report = describe_error(ZeroDivisionError("division by zero"))
    assert report.exit_code == 1 and not report.expected
    assert report.message == "unexpected ZeroDivisionError: division by zero"


@pytest.mark.parametrize("args", [["humaneval", "serve", "--study", "s.sqlite", "--port", "99999"],
                                  ["inspire", "serve", "--trajectories", "t", "--port", "-1"],
                                  ["browse", "--release", "r", "--port", "65536"]], ids=lambda a: " ".join(a[:2]))
def test_a_port_outside_0_65535_is_a_usage_error_not_a_bind_trace(args, tmp_path):
    result = run_cli(args, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "OverflowError" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith(f"argument --port: '{args[-1]}' is not a port (0-65535; 0 takes a free one)")
