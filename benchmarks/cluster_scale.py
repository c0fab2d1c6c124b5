"""The whole pipeline (ingest, segment, citations, mine, pools, export) at k x the ACL corpus, in local[2] and on
a two-worker standalone cluster (ratio_spark.pipeline.standalone: 1 core, 1.5 GB each): wall time per stage (and
each stage's ``phase_seconds``), what each stage counted, rates per core, peak memory of the whole process tree
(driver, JVMs, Python workers, and the cluster's master, workers and executors; in local mode each stage's and each
compaction's own peak too), and shuffle bytes per stage
(Spark's REST API). docs/performance.md, "Scale".

The k x corpus is replicas 0..k-1 of ``benchmarks/scale_replicas.py`` (replica 0 is the corpus; each other one
is every paper again, its words varied, its ids and date its own), so that every stage's input, the mined
pairs, queries and candidates included, grows k-fold:

    python benchmarks/scale_replicas.py --corpus ../shared/corpora/acl-emnlp-2014-2018-grobid-tei.tar.gz \\
        --out /work/data/scale/tei --replicas 16
    python benchmarks/cluster_scale.py --replicas /work/data/scale/tei --scales 1,4,16 --masters local \\
        --out benchmarks/results/cluster_scale_replicas.json

Each run is added to ``--out`` as it finishes (a run of the same master and scale already there is replaced),
so the scales can be measured in several invocations. ``--event-log DIR`` keeps Spark's event log of each run.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGES = ("ingest", "segment", "citations", "mine", "pools", "export")


class ProcessTree:
    """Samples the given processes and all their descendants every ``interval`` s: the peak of their summed RSS,
    and their CPU seconds so far (user + system; a process that ended keeps its last sample), a figure the
    machine's load hardly changes, unlike wall time."""

    def __init__(self, roots, interval: float = 0.5):
        import psutil

        self.roots = [psutil.Process(p) for p in roots]
        self.interval = interval
        self.peak = 0
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        import psutil

        total = 0
        for root in self.roots:
            try:
                for proc in [root, *root.children(recursive=True)]:
                    with proc.oneshot():
                        total += proc.memory_info().rss
                        times = proc.cpu_times()
                    self._cpu[proc.pid] = times.user + times.system
            except psutil.Error:  # ended between the listing and the sample
                pass
        self.peak = max(self.peak, total)

    def cpu_seconds(self) -> float:
        self.sample()
        return sum(self._cpu.values())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def shuffle_bytes(ui: str, app_id: str) -> int | None:
    """The session's shuffle bytes written so far, or None when its UI does not answer (a loaded machine)."""
    for _ in range(3):
        try:
            with urllib.request.urlopen(f"{ui}/api/v1/applications/{app_id}/stages", timeout=60) as response:
                return sum(s.get("shuffleWriteBytes", 0) for s in json.load(response))
        except OSError:
            time.sleep(5)
    return None


def _counts(stage: str, summary: dict) -> dict:
    """What a stage's summary says it read and wrote, for the k-fold check."""
    if stage == "ingest":
        return {"input_records": summary["input_records"], "papers": summary["papers"], "rejected": summary["dropped"]}
    if stage == "segment":
        return {"sentences": summary["sentences"]}
    if stage == "citations":
        return {"bibliography_entries": summary["bibliography_entries"],
                "resolved": summary["entries_by_resolution_status"].get("resolved", 0),
                "resolved_by_rule": summary["resolved_by_rule"]}
    if stage == "mine":
        return {"pairs_examined": summary["consecutive_pairs_examined"], "mined_pairs": summary["mined_pairs"]}
    if stage == "pools":
        return {"queries": {s: v["queries"] for s, v in summary["splits"].items()},
                "candidates": {s: v["candidates"] for s, v in summary["splits"].items()}}
    return {"released": summary["splits"]}


def child(args: argparse.Namespace) -> None:
    """One scale on one master, in this process: run every stage over the replicas, print a JSON line."""
    from scale_replicas import replica_config

    from ratio_spark.config import load_config
    from ratio_spark.pipeline.runner import run_stage
    from ratio_spark.pipeline.session import build_spark_session
    from ratio_spark.pipeline.standalone import free_port

    work = Path(args.workdir)
    overrides = [f"spark.master={args.master}", f"tables.root={work / 'tables'}", f"release.root={work / 'release'}",
                 "spark.conf.spark.ui.enabled=true", f"spark.conf.spark.ui.port={free_port()}"]
    if args.event_log:
        Path(args.event_log).mkdir(parents=True, exist_ok=True)
        overrides += ["spark.conf.spark.eventLog.enabled=true",
                      f"spark.conf.spark.eventLog.dir={Path(args.event_log).resolve().as_uri()}"]
    overrides += args.set or []
    if args.package_zip:
        overrides.append(f"spark.conf.spark.submit.pyFiles={args.package_zip}")
        overrides.append("spark.conf.spark.driver.memory=1g")
    config = replica_config(load_config(args.conf, overrides), Path(args.replicas), args.scale)
    spark = build_spark_session(config.spark)
    ui, app_id = spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId
    result = {"master": args.master, "scale": args.scale, "app_id": app_id, "stages": {}}
    before = shuffle_bytes(ui, app_id)
    # CPU of this driver, its JVM and its Python workers (a standalone cluster's executors are not counted).
    with ProcessTree([os.getpid()], interval=0.2) as tree:
        for stage in args.stages.split(","):
            load = os.getloadavg()[0]
            tree.peak = 0  # each stage's own peak
            started, cpu = time.time(), tree.cpu_seconds()
            summary = run_stage(spark, config, stage)
            seconds, cpu = time.time() - started, tree.cpu_seconds() - cpu
            after = shuffle_bytes(ui, app_id)
            result["stages"][stage] = {
                "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1),
                "shuffle_write_bytes": after - before if None not in (after, before) else None,
                "load_before": round(load, 1), "peak_rss_gib": round(tree.peak / 2**30, 2),
                "counts": _counts(stage, summary),
                "phase_seconds": summary.get("phase_seconds", {})}
            before = after
    from delta.tables import DeltaTable

    read = lambda name: spark.read.format("delta").load(config.tables.location(name))  # noqa: E731
    written = lambda name: DeltaTable.isDeltaTable(spark, config.tables.location(name))  # noqa: E731 (--stages)
    result["sizes"] = {name: read(name).count() for name in ("papers", "sentences", "mined_pairs", "queries", "candidates")
                       if written(name)}
    if written("stats_mining"):
        result["sizes"]["pairs_examined"] = read("stats_mining").agg({"pairs_examined": "sum"}).first()[0]
    if args.keep:  # the tables stay for later runs of some stages: no compaction
        print("RESULT " + json.dumps(result), flush=True)
        return spark.stop()
    result["optimize"] = {}
    for name in ("papers", "sentences", "mined_pairs"):  # what `ratio-spark update` compacts costs, and gives
        table = DeltaTable.forPath(spark, config.tables.location(name))
        files, size = (table.detail().first()[k] for k in ("numFiles", "sizeInBytes"))
        started = time.time()
        with ProcessTree([os.getpid()], interval=0.2) as tree:
            table.optimize().executeCompaction()
        result["optimize"][name] = {"files_before": files, "files_after": table.detail().first()["numFiles"],
                                    "bytes": size, "seconds": round(time.time() - started, 1),
                                    "peak_rss_gib": round(tree.peak / 2**30, 2)}
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


def measure(master: str, scale: int, replicas: str, conf: Path, cores: int, event_log: str | None,
            overrides: list[str], stages: str = ",".join(STAGES), keep: Path | None = None) -> dict:
    """One run in its own process; ``keep``: its tables stay in ``keep/<master>-<scale>x`` (a run that does not
    start with ingest reads them there)."""
    from ratio_spark.pipeline.package_zip import write_package_zip
    from ratio_spark.pipeline.standalone import StandaloneCluster

    if keep is None:
        work = Path(tempfile.mkdtemp(prefix=f"ratio-spark-scale-{master}-{scale}x-"))
    else:
        work = keep / f"{master}-{scale}x"
        if stages.startswith("ingest"):
            shutil.rmtree(work, ignore_errors=True)
        elif not (work / "tables").is_dir():
            raise SystemExit(f"{work} holds no tables: run the stages before {stages.split(',')[0]} with --keep {keep}")
        work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    command = [sys.executable, __file__, "--child", "--replicas", replicas, "--scale", str(scale), "--workdir", str(work),
               "--conf", str(conf), "--stages", stages, *[f"--set={o}" for o in overrides]]
    if keep is not None:
        command += ["--keep", str(keep)]
    if event_log:
        command += ["--event-log", event_log]
    cluster = None
    if master == "standalone":
        cluster = StandaloneCluster(workers=2, cores=1, memory="1536m", root=work / "cluster").start()
        package_zip = write_package_zip(work / "ratio_spark.zip")
        command += ["--master", cluster.master_url, "--package-zip", str(package_zip)]
    else:
        command += ["--master", "local[2]"]
    try:
        started = time.time()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        roots = [proc.pid] + ([d.process.pid for d in cluster.daemons.values()] if cluster else [])
        lines = []
        with ProcessTree(roots) as memory:
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
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)  # the k x tables and the executors' copies of the jars
        else:
            shutil.rmtree(work / "cluster", ignore_errors=True)
    total = sum(s["seconds"] for s in result["stages"].values())
    result.update(wall_seconds=round(time.time() - started, 1), stages_seconds=round(total, 1), cores=cores,
                  peak_rss_gib=round(memory.peak / 2**30, 2))
    return result


# What each stage's rate counts: its input's unit (ingest: papers written; pools: mined pairs; export: rows released).
RATE_UNITS = {
    "ingest": ("papers", lambda r: r["sizes"]["papers"]),
    "segment": ("sentences", lambda r: r["sizes"]["sentences"]),
    "citations": ("sentences", lambda r: r["sizes"]["sentences"]),
    "mine": ("examined pairs", lambda r: r["sizes"]["pairs_examined"]),
    "pools": ("mined pairs", lambda r: r["sizes"]["mined_pairs"]),
    "export": ("released rows", lambda r: r["sizes"]["queries"] + r["sizes"]["candidates"]),
}


def growth_report(results: list[dict]) -> str:
    """Per master and stage: wall and CPU seconds at each scale; between consecutive scales the marginal rate per
    core (the extra work over the extra wall time, per core) and per CPU second; over the last three scales the
    marginal growth against linear: (t3 - t2) / (t2 - t1) over (n3 - n2) / (n2 - n1), 1.0 when time grows
    linearly with the input."""
    lines = []
    for kind in sorted({_run_key(r)[0] for r in results}):
        runs = sorted((r for r in results if _run_key(r)[0] == kind), key=lambda r: r["scale"])
        lines.append(f"{kind}: scales " + ", ".join(f"{r['scale']}x (load {r['load_before'][0]:.1f})" for r in runs))
        for stage, (unit, size) in RATE_UNITS.items():
            if not all(stage in r["stages"] for r in runs):
                continue
            cells = [f"{r['stages'][stage]['seconds']:.1f} s / {r['stages'][stage].get('cpu_seconds', 0):.1f} CPU s"
                     f" ({size(r):,} {unit})" for r in runs]
            steps = []
            for a, b in zip(runs, runs[1:]):
                work = size(b) - size(a)
                wall = b["stages"][stage]["seconds"] - a["stages"][stage]["seconds"]
                cpu = b["stages"][stage].get("cpu_seconds", 0) - a["stages"][stage].get("cpu_seconds", 0)
                per_core = f"{work / wall / b['cores']:,.0f}/s/core" if wall > 0 else "-"
                per_cpu = f"{work / cpu:,.0f}/CPU s" if cpu > 0 else "-"
                steps.append(f"{a['scale']}x->{b['scale']}x: {per_core}, {per_cpu}")
            for measure in ("seconds", "cpu_seconds"):
                if len(runs) >= 3:
                    (a, b, c), t = runs[-3:], (lambda r: r["stages"][stage].get(measure, 0))
                    if t(b) > t(a):
                        growth = ((t(c) - t(b)) / (t(b) - t(a))) / ((size(c) - size(b)) / (size(b) - size(a)))
                        steps.append(f"growth ({'wall' if measure == 'seconds' else 'CPU'}) {growth:.2f} x linear")
            lines.append(f"  {stage} [{unit}]: " + " | ".join(cells) + "\n      " + "; ".join(steps))
    return "\n".join(lines)


def _run_key(result: dict) -> tuple[str, int]:
    """A run's master kind and scale (a standalone master's URL has a new port each time)."""
    return ("local" if result["master"].startswith("local") else "standalone", result["scale"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas",
                        help="the replicas' folder (benchmarks/scale_replicas.py); as many as the largest scale")
    parser.add_argument("--conf", type=Path, default=REPO / "conf" / "acl.yaml",
                        help="the corpus' configuration (the one the replicas were made with)")
    parser.add_argument("--scales", default="1,2")
    parser.add_argument("--masters", default="local,standalone")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/cluster_scale.json"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--scale", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--package-zip", help=argparse.SUPPRESS)
    parser.add_argument("--event-log", help="a folder for Spark's event log of each run (kept)")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help="the stages to run, in order (those after ingest read the tables of an earlier --keep run)")
    parser.add_argument("--keep", type=Path, help="keep each run's tables under KEEP/<master>-<k>x (no compaction)")
    parser.add_argument("--set", action="append", help="a configuration override (KEY=VALUE), as ratio-spark --set")
    parser.add_argument("--report", action="store_true", help="print the growth table of the runs in --out, run nothing")
    args = parser.parse_args()
    if args.child:
        return child(args)
    from scale_replicas import replica_config

    from ratio_spark.config import load_config

    out = Path(args.out)
    if args.report:
        return print(growth_report(json.loads(out.read_text())))
    unknown = set(args.stages.split(",")) - set(STAGES)
    if unknown:
        parser.error(f"--stages: {', '.join(sorted(unknown))} is not a stage ({', '.join(STAGES)})")
    if not args.replicas:
        parser.error("--replicas is required (the folder benchmarks/scale_replicas.py wrote)")
    try:  # the replicas are there before any run starts
        replica_config(load_config(args.conf), Path(args.replicas), max(map(int, args.scales.split(","))))
    except ValueError as exc:
        parser.error(str(exc))
    results = json.loads(out.read_text()) if out.exists() else []
    for master in args.masters.split(","):
        for scale in map(int, args.scales.split(",")):
            load = os.getloadavg()
            result = measure(master, scale, args.replicas, args.conf, cores=2, event_log=args.event_log,
                             overrides=args.set or [], stages=args.stages, keep=args.keep)
            result["load_before"] = load
            result["load_after"] = os.getloadavg()
            results = [r for r in results if _run_key(r) != _run_key(result)] + [result]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
