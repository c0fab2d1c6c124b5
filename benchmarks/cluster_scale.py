"""The pipeline after ingest (segment, citations, mine, pools, export) at k x the ACL corpus, in local[2] and on a
two-worker standalone cluster (ratio_spark.pipeline.standalone: 1 core, 1.5 GB each): wall time per stage,
sentences/s and pairs/s per core, peak memory of the whole process tree (driver, JVMs, Python workers, and
the cluster's master, workers and executors), and shuffle bytes per stage (Spark's REST API). docs/performance.md.

The k x corpus is the ingested ACL ``papers`` table unioned k times, copy i under the ids ``<paper_id>~r<i>``
(copy 0 keeps the real ids; a table ingested before references has no bibliography, and citations then
resolves nothing). The copies' texts are the same, so mine examines and matches k x the pairs, but
its corpus-wide duplicate rule (Reason.DUPLICATE_PAIR) drops the copies' pairs: pools and export see 1x.

    python benchmarks/cluster_scale.py --papers /work/data/acl/tables/papers --scales 1,4,16 \\
        --masters local,standalone --out benchmarks/results/cluster_scale_2026-12-02.json

Each run is added to ``--out`` as it finishes (a run of the same master and scale already there is replaced),
so the scales can be measured in several invocations.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGES = ("segment", "citations", "mine", "pools", "export")


class PeakMemory:
    """Samples the summed RSS of the given processes and all their descendants every half second."""

    def __init__(self, roots):
        import psutil

        self.roots = [psutil.Process(p) for p in roots]
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for root in self.roots:
                try:
                    for proc in [root, *root.children(recursive=True)]:
                        total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(0.5)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def shuffle_bytes(ui: str, app_id: str) -> int:
    with urllib.request.urlopen(f"{ui}/api/v1/applications/{app_id}/stages", timeout=30) as response:
        stages = json.load(response)
    return sum(s.get("shuffleWriteBytes", 0) for s in stages)


def child(args: argparse.Namespace) -> None:
    """One scale on one master, in this process: replicate the papers, run the stages, print a JSON line."""
    from pyspark.sql import functions as F

    from ratio_spark.core.config import load_config
    from ratio_spark.core.schema import BIBLIOGRAPHY_TYPE, TABLES
    from ratio_spark.pipeline.runner import run_stage
    from ratio_spark.pipeline.session import build_spark_session
    from ratio_spark.pipeline.standalone import free_port

    work = Path(args.workdir)
    overrides = [f"spark.master={args.master}", f"tables.root={work / 'tables'}", f"release.root={work / 'release'}",
                 "spark.conf.spark.ui.enabled=true", f"spark.conf.spark.ui.port={free_port()}"]
    if args.package_zip:
        overrides.append(f"spark.conf.spark.submit.pyFiles={args.package_zip}")
        overrides.append("spark.conf.spark.driver.memory=1g")
    config = load_config(REPO / "conf" / "acl.yaml", overrides)
    spark = build_spark_session(config.spark)
    ui, app_id = spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId
    papers = spark.read.format("delta").load(args.papers)
    if "bibliography" not in papers.columns:  # a table ingested before references existed: none to resolve
        papers = papers.withColumn("bibliography", F.lit(None).cast(BIBLIOGRAPHY_TYPE))
    papers = papers.select(*TABLES["papers"].column_names)
    copies = [papers.withColumn("paper_id", F.concat("paper_id", F.lit(f"~r{i}")) if i else F.col("paper_id"))
              for i in range(args.scale)]
    replicated = copies[0]
    for copy in copies[1:]:
        replicated = replicated.unionByName(copy)
    started = time.time()
    replicated.write.format("delta").mode("overwrite").save(config.tables.location("papers"))
    result = {"master": args.master, "scale": args.scale, "replicate_seconds": round(time.time() - started, 1),
              "stages": {}}
    before = shuffle_bytes(ui, app_id)
    for stage in STAGES:
        started = time.time()
        summary = run_stage(spark, config, stage)
        after = shuffle_bytes(ui, app_id)
        result["stages"][stage] = {"seconds": round(time.time() - started, 1), "shuffle_write_bytes": after - before}
        before = after
        if stage == "segment":
            result["papers"], result["sentences"] = summary["papers"], summary["sentences"]
        if stage == "mine":
            result["pairs_examined"] = summary["consecutive_pairs_examined"]
            result["mined_pairs"] = summary["mined_pairs"]
    result["queries"] = spark.read.format("delta").load(config.tables.location("queries")).count()
    from delta.tables import DeltaTable

    result["optimize"] = {}
    for name in ("papers", "sentences", "mined_pairs"):  # what `ratio-spark update` compacts costs, and gives
        table = DeltaTable.forPath(spark, config.tables.location(name))
        files, size = (table.detail().first()[k] for k in ("numFiles", "sizeInBytes"))
        started = time.time()
        table.optimize().executeCompaction()
        result["optimize"][name] = {"files_before": files, "files_after": table.detail().first()["numFiles"],
                                    "bytes": size, "seconds": round(time.time() - started, 1)}
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


def measure(master: str, scale: int, papers: str, cores: int) -> dict:
    from ratio_spark.pipeline.standalone import StandaloneCluster

    work = Path(tempfile.mkdtemp(prefix=f"ratio-spark-scale-{master}-{scale}x-"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    command = [sys.executable, __file__, "--child", "--papers", papers, "--scale", str(scale), "--workdir", str(work)]
    cluster = None
    if master == "standalone":
        cluster = StandaloneCluster(workers=2, cores=1, memory="1536m", root=work / "cluster").start()
        package_zip = work / "ratio_spark.zip"
        with zipfile.ZipFile(package_zip, "w") as archive:
            for path in sorted((REPO / "ratio_spark").rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(REPO))
        command += ["--master", cluster.master_url, "--package-zip", str(package_zip)]
    else:
        command += ["--master", "local[2]"]
    try:
        started = time.time()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        roots = [proc.pid] + ([d.process.pid for d in cluster.daemons.values()] if cluster else [])
        lines = []
        with PeakMemory(roots) as memory:
            for line in proc.stdout:
                lines.append(line)
                print(line, end="", flush=True)
            proc.wait()
        if proc.returncode != 0:
            raise SystemExit(f"{master} {scale}x failed:\n" + "".join(lines[-40:]))
        result = json.loads(next(line for line in lines if line.startswith("RESULT "))[len("RESULT "):])
    finally:
        if cluster:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)  # the k x tables and the executors' copies of the jars
    total = sum(s["seconds"] for s in result["stages"].values())
    result.update(
        wall_seconds=round(time.time() - started, 1), stages_seconds=round(total, 1), cores=cores,
        peak_rss_gib=round(memory.peak / 2**30, 2),
        sentences_per_s_per_core=round(result["sentences"] / result["stages"]["segment"]["seconds"] / cores),
        pairs_per_s_per_core=round(result["pairs_examined"] / result["stages"]["mine"]["seconds"] / cores),
        load_before=os.getloadavg(),
    )
    return result


def _run_key(result: dict) -> tuple[str, int]:
    """A run's master kind and scale (a standalone master's URL has a new port each time)."""
    return ("local" if result["master"].startswith("local") else "standalone", result["scale"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--papers", required=True, help="an ingested papers Delta table (e.g. the ACL corpus')")
    parser.add_argument("--scales", default="1,2")
    parser.add_argument("--masters", default="local,standalone")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/cluster_scale.json"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--package-zip", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else []
    for master in args.masters.split(","):
        for scale in map(int, args.scales.split(",")):
            load = os.getloadavg()
            result = measure(master, scale, args.papers, cores=2)
            result["load_before"] = load
            result["load_after"] = os.getloadavg()
            results = [r for r in results if _run_key(r) != _run_key(result)] + [result]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
