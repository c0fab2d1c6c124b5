"""Progress a person can read in a log file: whole lines only (phases side by side never share one), a line from
Spark's status tracker every interval while a stage runs (tasks done/total, time left), and no carriage-return bar
when the output is not a terminal (a real `ratio-spark run` into a file)."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from ratio_spark.pipeline import runner

LINE = re.compile(r"^\[ratio-spark (\d\d:\d\d:\d\d)\] (.*)$")


class SlowStream:
    """A stdout whose every write lets other threads run in between, as a busy log file does."""

    def __init__(self):
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        time.sleep(0.002)
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_lines_of_phases_side_by_side_never_share_a_line(monkeypatch):
    stream = SlowStream()
    monkeypatch.setattr(sys, "stdout", stream)
    start = threading.Barrier(4)

    def phase(name: str) -> None:
        start.wait()
        for i in range(20):
            runner.log(f"pools: {name} step {i}")

    threads = [threading.Thread(target=phase, args=(f"phase-{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = "".join(stream.parts).splitlines()
    assert len(lines) == 80
    assert all(LINE.match(line) and line.count("[ratio-spark") == 1 for line in lines), lines[:5]


def test_durations_read_as_a_person_says_them():
    assert [runner.duration(s) for s in (4.4, 65, 3599, 7620)] == ["4 s", "1 min 05 s", "59 min 59 s", "2 h 07 min"]


@pytest.mark.spark
def test_the_tracker_reports_a_real_job_every_interval_with_tasks_done_and_time_left(spark):
    """A Spark job of 8 tasks of 1.5 s on 2 cores (about 6 s), reported every 0.7 s."""
    said: list[tuple[float, str]] = []
    job = spark.sparkContext.range(0, 8, numSlices=8).map(lambda x: time.sleep(1.5) or x)
    with runner.SparkProgress(spark, lambda line: said.append((time.time(), line)), 0.7, lambda: ["segmenting"]):
        started = time.time()
        assert job.count() == 8
        finished = time.time()
        time.sleep(1.0)  # driver work after the job: the tracker says so
    during = [(t, line) for t, line in said if started < t < finished]
    assert len(during) >= 5
    gaps = [b[0] - a[0] for a, b in zip(during, during[1:])]
    assert max(gaps) < 1.5, gaps
    stage_lines = [line for _, line in during
                   if re.fullmatch(r"Spark stage \d+ \(count\) \(segmenting\): \d/8 tasks done, \d running.*", line)]
    assert len(stage_lines) >= 4
    done = [int(re.search(r"(\d)/8 tasks done", line).group(1)) for line in stage_lines]
    assert done == sorted(done) and done[-1] > done[0]
    assert any(re.search(r", about \d+ s left$", line) for line in stage_lines)  # once tasks finished, an estimate
    after = [line for t, line in said if t > finished + 0.1]
    assert after and after[-1].startswith("working on the driver (segmenting): no Spark task running")


@pytest.mark.slow
def test_segmentation_logged_to_a_file_has_whole_lines_no_carriage_return_and_progress_every_interval(
        sample_segmented, spark, tmp_path):
    """`ratio-spark segment ... > log.txt 2>&1` (a subprocess with its own JVM) over eight of the shared sample's
    papers, with a 3 s progress interval: the file holds no carriage return (Spark's console bar is off), every
    line of ours is whole, and while segmentation runs no more than the interval (plus slack for the log's
    one-second stamps) passes without a line."""
    config = sample_segmented.copy_tables(tmp_path)
    papers = config.tables.location("papers")
    eight = spark.read.format("delta").load(papers).orderBy("paper_id").limit(8).localCheckpoint()
    eight.write.format("delta").mode("overwrite").save(papers)
    log = tmp_path / "log.txt"
    cmd = [str(Path(sys.executable).parent / "ratio-spark"), "segment", "--conf", str(REPO_ROOT / "conf" / "sample.yaml"),
           "--set", f"inputs.0.path={sample_segmented.corpus.folder}", "--set", f"tables.root={config.tables.root}",
           "--set", "spark.progress_interval_s=3", "--set", "spark.conf.spark.driver.memory=1g"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("wb") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT, timeout=600).returncode
    text = log.read_bytes().decode("utf-8")
    assert code == 0, text[-3000:]
    assert "\r" not in text
    ours = [line for line in text.splitlines() if "[ratio-spark" in line]
    assert all(LINE.match(line) and line.count("[ratio-spark") == 1 for line in ours), ours
    stamps = [(dt.datetime.strptime(LINE.match(line).group(1), "%H:%M:%S"), LINE.match(line).group(2)) for line in ours]
    segment = [(t, message) for t, message in stamps if message.startswith("segment: ")]
    assert len(segment) >= 3
    gaps = [(b[0] - a[0]).total_seconds() % 86400 for a, b in zip(segment, segment[1:])]
    assert max(gaps) <= 3 + 2, list(zip(gaps, [m for _, m in segment[1:]]))
    assert any("tasks done" in message for _, message in segment)
    # The phase names the engine that runs (the default: the rules), not another one.
    assert any("(the rules engine)" in message for _, message in segment) and "SentenceDetector" not in text
    assert "== segment ==" in text
