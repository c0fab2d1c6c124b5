"""Throughput of ingest + segmentation on a TEI corpus with local[2], against bare reads (docs/performance-log.md).

Three timings over the same files, each a full Spark action, after an untimed warm-up (JVM, page cache,
Python workers, the Spark NLP pipeline):
  raw_read      binaryFile read, sum of bytes: what it costs to touch the data at all
  parse_only    ingest's readers (TEI -> papers) and a count of paragraphs: the corpus read as papers
  parse_segment the same plus Spark NLP segmentation and normalisation, counting sentences
plus the real job (run_stage: ingest then segment, writing the Delta tables).

    python benchmarks/ingest_segment_throughput.py --corpus ../shared/corpora/acl-emnlp-2014-2018-grobid-tei.tar.gz

With ``--papers`` (a papers table), only the segment stage's work, per engine and per core: the papers cached
in memory, then ``segment_papers`` (explode the paragraphs, mask, split, restore, normalise, the ids) computed
column by column into a ``noop`` sink, each engine in turn, ``--repeats`` times interleaved, on ``--master``
(``local[1]``: one core); wall and CPU seconds (the process tree's). Also the explode alone, and with
``--split-alone`` each engine's split without the normalisation.

    python benchmarks/ingest_segment_throughput.py --papers /work/data/acl/tables/papers --master 'local[1]'
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tarfile
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from ratio_spark.config import load_config
from ratio_spark.core.provenance import shared_folder
from ratio_spark.pipeline.ingest import ingest
from ratio_spark.pipeline.segment import explode_paragraphs, segment_papers, split_sentences
from ratio_spark.pipeline.session import build_spark_session
from ratio_spark.pipeline.runner import run_stage

REPO = Path(__file__).resolve().parents[1]


def extracted(corpus: Path, workdir: Path) -> Path:
    """An archive is extracted once (file-per-paper input is how corpora of any size are read)."""
    if corpus.is_dir():
        return corpus
    target = workdir / corpus.name.split(".")[0]
    if not (target / ".done").exists():
        with tarfile.open(corpus) as archive:
            archive.extractall(target, filter="data")
        (target / ".done").write_text("")
    return target


def timed(label, action, results):
    started = time.perf_counter()
    value = action()
    seconds = time.perf_counter() - started
    results[label] = {"seconds": round(seconds, 2), "count": value}
    print(f"{label:<16} {seconds:8.1f} s   count={value}", flush=True)
    return value


def tree_cpu_seconds() -> float:
    """CPU seconds of this process and all its descendants (the JVM, the Python workers), reaped ones included:
    on a shared machine the CPU an action took says more than its wall time."""
    import psutil

    total = 0.0
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            t = process.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def noop(frame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def segment_rates(args) -> None:
    """The segment stage's work alone, per engine, interleaved repeats (see the module docstring)."""
    import statistics

    cores = int(args.master.split("[")[1].rstrip("]"))
    config = load_config(REPO / "conf/acl.yaml", [f"spark.master={args.master}"])
    spark = build_spark_session(config.spark, spark_nlp=True)
    papers = spark.read.format("delta").load(args.papers).select("paper_id", "pub_date", "sections")
    if args.fraction < 1:
        papers = papers.sample(fraction=args.fraction, seed=0)
    papers = papers.cache()
    n_papers = papers.count()
    engines = args.engines.split(",")
    configs = {e: config.segment.model_copy(update={"engine": e}) for e in engines}
    n_sentences = {e: segment_papers(papers, configs[e]).count() for e in engines}  # also the warm-up
    n_paragraphs = explode_paragraphs(papers).count()
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for repeat in range(args.repeats):
        timings = {"explode": lambda: noop(explode_paragraphs(papers))}
        for e in engines:
            if args.split_alone:
                timings[f"{e}_split"] = lambda e=e: noop(split_sentences(explode_paragraphs(papers), configs[e]))
            timings[f"{e}_segment"] = lambda e=e: noop(segment_papers(papers, configs[e]))
        for label, action in timings.items():
            started, cpu_started = time.perf_counter(), tree_cpu_seconds()
            action()
            runs.setdefault(label, []).append(round(time.perf_counter() - started, 2))
            cpu.setdefault(label, []).append(round(tree_cpu_seconds() - cpu_started, 2))
        print(f"repeat {repeat + 1}: " + ", ".join(f"{k} {v[-1]} s ({cpu[k][-1]} CPU s)" for k, v in runs.items())
              + f"; load {os.getloadavg()[0]:.2f}", flush=True)
    results = {"papers_table": args.papers, "fraction": args.fraction, "master": args.master, "cores": cores, "papers": n_papers,
               "paragraphs": n_paragraphs, "sentences": n_sentences, "runs": runs,
               "median_seconds": {k: statistics.median(v) for k, v in runs.items()},
               "cpu_seconds": cpu, "median_cpu_seconds": {k: statistics.median(v) for k, v in cpu.items()},
               "load_average_end": os.getloadavg()}
    results["sentences_per_second_per_core"] = {
        label: round(n_sentences[label.rsplit("_", 1)[0]] / seconds / cores)
        for label, seconds in results["median_seconds"].items() if label != "explode"}
    results["sentences_per_cpu_second"] = {
        label: round(n_sentences[label.rsplit("_", 1)[0]] / seconds)
        for label, seconds in results["median_cpu_seconds"].items() if label != "explode"}
    spark.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(shared_folder() / "corpora/acl-emnlp-2014-2018-grobid-tei.tar.gz"))
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "ratio-spark-bench"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/ingest_segment_throughput.json"))
    parser.add_argument("--papers", help="a papers table: time only the segment stage's work, per engine (see above)")
    parser.add_argument("--engines", default="rules,sparknlp", help="with --papers: the segment.engine values")
    parser.add_argument("--repeats", type=int, default=3, help="with --papers: interleaved repeats")
    parser.add_argument("--split-alone", action="store_true", help="with --papers: also time each split without normalisation")
    parser.add_argument("--fraction", type=float, default=1.0, help="with --papers: a sample of the papers (seed 0)")
    args = parser.parse_args()
    if args.papers:
        segment_rates(args)
        return

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = extracted(Path(args.corpus), workdir)
    config = load_config(
        REPO / "conf/acl.yaml",
        [f"spark.master={args.master}", f"inputs.0.path={corpus}", f"tables.root={workdir / 'tables'}"],
    )
    spark = build_spark_session(config.spark, spark_nlp=config.segment.engine == "sparknlp")
    results: dict = {}
    # Warm the JVM and the OS page cache so the first timing is not charged for them.
    spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(str(corpus)).agg(F.sum("length")).collect()

    timed("raw_read", lambda: spark.read.format("binaryFile").option("recursiveFileLookup", "true")
          .load(str(corpus)).agg(F.sum(F.length("content"))).first()[0], results)
    papers = ingest(spark, config).papers
    # Start the Python workers (the readers run lxml in them) and load the Spark NLP pipeline, untimed,
    # so that neither timing below is charged for a fixed cost the other does not pay.
    started = time.perf_counter()
    segment_papers(papers.limit(20), config.segment).count()
    results["warm_up_seconds"] = round(time.perf_counter() - started, 2)
    n_paragraphs = timed("parse_only", lambda: explode_paragraphs(papers).count(), results)
    n_sentences = timed("parse_segment", lambda: segment_papers(papers, config.segment).count(), results)
    n_papers = papers.count()

    started = time.perf_counter()
    ingest_summary = run_stage(spark, config, "ingest")
    segment_summary = run_stage(spark, config, "segment")
    job_seconds = time.perf_counter() - started
    results["job_ingest_segment_write"] = {"seconds": round(job_seconds, 2), "count": segment_summary["sentences"]}

    results["papers"] = n_papers
    results["paragraphs"] = n_paragraphs
    results["sentences"] = n_sentences
    results["papers_per_second"] = round(n_papers / results["parse_segment"]["seconds"], 1)
    results["sentences_per_second"] = round(n_sentences / results["parse_segment"]["seconds"], 1)
    results["job_papers_per_second"] = round(ingest_summary["papers"] / job_seconds, 1)
    results["job_sentences_per_second"] = round(segment_summary["sentences"] / job_seconds, 1)
    results["segment_over_parse_only"] = round(results["parse_segment"]["seconds"] / results["parse_only"]["seconds"], 2)
    results["segment_over_raw_read"] = round(results["parse_segment"]["seconds"] / results["raw_read"]["seconds"], 2)
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "master": args.master}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
