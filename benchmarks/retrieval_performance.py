"""Retrieval performance on the CPU at the size of the paper's test pool (~400K sentences).

Each phase runs in its own process, so that its peak RSS is its own:

* ``encode``: sentences/s of each model on real pool sentences (sentence-transformers, batch 64, CPU);
* ``faiss``: exact ``IndexFlatIP`` build and top-100 search over a 400K x d pool, plus IVF and HNSW build,
  search and recall@100 against exact. The pool's embeddings are the encoded real sentences tiled to 400K rows
  with a little noise (then re-normalised): encoding 400K sentences on 2 cores would take hours, and faiss' cost
  depends on the shape, not on the values;
* ``bm25``: analysing (tokenise, stopwords, stemming) and indexing 400K real sentences, replicated from the
  corpus' pools, and top-100 search, for the unigram and bigram variants.

    python benchmarks/retrieval_performance.py --tables /path/to/tables/acl --out benchmarks/results/retrieval_performance.json
    # or in parts, adding to the same report:
    python benchmarks/retrieval_performance.py --tables ... --models minilm --bm25 1,2
    python benchmarks/retrieval_performance.py --tables ... --models mpnet --bm25 '' --append

The figures go to docs/performance.md (section "Retrieval evaluation") with this command line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def real_sentences(tables: str, limit: int | None = None) -> list[str]:
    """Every split's pool sentences and query sentences of a tables root, in a fixed order."""
    from ratio_spark.core.delta import read_delta
    from ratio_spark.core.schema import SPLITS

    texts: list[str] = []
    for split in SPLITS:
        pool = read_delta(Path(tables) / "candidates", ["candidate_id", "text"], [("split", "=", split)])
        texts += pool.sort_by("candidate_id")["text"].to_pylist()
    return texts[:limit] if limit else texts


def replicate(texts: list[str], size: int) -> list[str]:
    return [texts[i % len(texts)] for i in range(size)]


def phase_encode(args) -> dict:
    from ratio_spark.evaluation.models import load_sentence_transformer

    texts = real_sentences(args.tables)
    sample = texts[:: max(1, len(texts) // args.encode_sentences)][: args.encode_sentences]
    model = load_sentence_transformer(args.model, "cpu")
    model.encode(sample[:64], batch_size=64)  # warm-up
    started, cpu_started = time.perf_counter(), time.process_time()
    embeddings = model.encode(sample, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    np.save(args.embeddings_out, embeddings.astype(np.float32))
    # CPU seconds (all threads) say what the work costs whatever else runs on the machine
    return {"model": args.model, "sentences": len(sample), "seconds": seconds, "sentences_per_second": len(sample) / seconds,
            "cpu_seconds": cpu_seconds, "sentences_per_cpu_second": len(sample) / cpu_seconds,
            "dimension": int(embeddings.shape[1]), "mean_words": float(np.mean([len(t.split()) for t in sample])),
            "peak_rss_mb": peak_rss_mb()}


def tiled_pool(embeddings: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pool = np.tile(embeddings, (size // len(embeddings) + 1, 1))[:size]
    pool = pool + rng.normal(0, 0.02, pool.shape).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    return np.ascontiguousarray(pool, dtype=np.float32)


def phase_faiss(args) -> dict:
    import faiss

    from ratio_spark.evaluation.retrieval.dense import build_faiss_index, overlap_recall

    base = np.load(args.embeddings_in)
    pool = tiled_pool(base, args.pool_size)
    queries = tiled_pool(base[::-1], args.queries, seed=1)
    out: dict = {"pool": int(pool.shape[0]), "dimension": int(pool.shape[1]), "queries": args.queries, "k": 100,
                 "faiss_threads": faiss.omp_get_max_threads(), "pool_mb": pool.nbytes / 2**20}

    def timed(kind: str, index_pool: np.ndarray, **params):
        started, cpu_started = time.perf_counter(), time.process_time()
        index = build_faiss_index(index_pool, kind, **params)
        built, built_cpu = time.perf_counter() - started, time.process_time() - cpu_started
        started, cpu_started = time.perf_counter(), time.process_time()
        _, rows = index.search(queries, 100)
        searched, searched_cpu = time.perf_counter() - started, time.process_time() - cpu_started
        return index, rows, {"build_seconds": built, "build_cpu_seconds": built_cpu, "search_seconds": searched,
                             "search_cpu_seconds": searched_cpu, "ms_per_query": 1000 * searched / len(queries)}

    _, exact_rows, out["flat"] = timed("flat", pool)
    _, rows, out["ivf"] = timed("ivf", pool, nlist=args.nlist, nprobe=args.nprobe)
    out["ivf"].update(nlist=args.nlist, nprobe=args.nprobe, recall_at_100_vs_exact=overlap_recall(rows, exact_rows))
    # HNSW on a smaller pool (its build is the slow part on 2 cores); exact search on the same rows for recall
    hnsw_pool = pool[: args.hnsw_size]
    _, exact_small, flat_small = timed("flat", hnsw_pool)
    _, rows, out["hnsw"] = timed("hnsw", hnsw_pool, hnsw_m=32, ef_construction=200, ef_search=128)
    out["hnsw"].update(pool=int(hnsw_pool.shape[0]), m=32, ef_construction=200, ef_search=128,
                       recall_at_100_vs_exact=overlap_recall(rows, exact_small), flat_ms_per_query_same_pool=flat_small["ms_per_query"])
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def phase_bm25(args) -> dict:
    from ratio_spark.evaluation.data import CandidatePool
    from ratio_spark.evaluation.retrieval.base import retrieve
    from ratio_spark.evaluation.data import Query
    from ratio_spark.evaluation.retrieval.bm25 import BM25Retriever

    texts = real_sentences(args.tables)
    pool_texts = replicate(texts, args.pool_size)
    ids = [f"c{i:016x}" for i in range(len(pool_texts))]
    pool = CandidatePool("bench", ids, pool_texts, [""] * len(ids), [()] * len(ids), [None] * len(ids))
    queries = [Query(f"q{i}", "specify", texts[(i * 7919) % len(texts)], ("c0",)) for i in range(args.queries)]
    retriever = BM25Retriever(args.ngram, progress=False)
    started, cpu_started = time.perf_counter(), time.process_time()
    retriever.index(pool)
    indexed, index_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    started, cpu_started = time.perf_counter(), time.process_time()
    retrieve(retriever, queries, pool, "specify", 100)
    searched, search_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {"variant": f"bm25-{args.ngram}", "pool": len(pool_texts), "distinct_sentences": len(set(texts)),
            "vocabulary": len(retriever._vocab), "index_seconds": indexed, "index_cpu_seconds": index_cpu,
            "search_cpu_seconds": search_cpu, "queries": len(queries),
            "search_seconds": searched, "ms_per_query": 1000 * searched / len(queries), "peak_rss_mb": peak_rss_mb()}


def run_phase(argv: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"phase {argv[:2]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", default=str(REPO / "data" / "tables" / "sample"), help="tables root with candidates")
    parser.add_argument("--models", default="minilm,mpnet")
    parser.add_argument("--pool-size", type=int, default=400_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--encode-sentences", type=int, default=1000)
    parser.add_argument("--nlist", type=int, default=1024)
    parser.add_argument("--nprobe", type=int, default=32)
    parser.add_argument("--hnsw-size", type=int, default=50_000)
    parser.add_argument("--bm25", default="1,2", help="BM25 variants to time (n-gram orders; '' for none)")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "retrieval_performance.json"))
    parser.add_argument("--append", action="store_true", help="add to an existing report instead of starting anew")
    parser.add_argument("--phase", choices=["encode", "faiss", "bm25"], help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--ngram", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--embeddings-out", help=argparse.SUPPRESS)
    parser.add_argument("--embeddings-in", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        result = {"encode": phase_encode, "faiss": phase_faiss, "bm25": phase_bm25}[args.phase](args)
        print(json.dumps(result))
        return 0

    common = ["--tables", args.tables, "--pool-size", str(args.pool_size), "--queries", str(args.queries)]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Phases add to an existing report, so a long run can be split (e.g. --models mpnet --skip-bm25 later).
    report: dict = json.loads(out.read_text()) if out.exists() and args.append else {}
    report.setdefault("runs", []).append({"command": " ".join(["python", *sys.argv]), "started": time.strftime("%Y-%m-%d %H:%M"),
                                          "cpus": os.cpu_count(), "platform": platform.platform(),
                                          "load_average_at_start": os.getloadavg()})
    report.setdefault("encode", {})
    report.setdefault("faiss", {})
    report.setdefault("bm25", {})

    def save() -> None:
        report["runs"][-1]["load_average_now"] = os.getloadavg()
        out.write_text(json.dumps(report, indent=2))

    work = out.with_suffix("")
    for model in [m for m in args.models.split(",") if m]:
        emb = f"{work}.{model}.npy"
        print(f"encode: {model}", flush=True)
        report["encode"][model] = run_phase([*common, "--phase", "encode", "--model", model, "--encode-sentences",
                                             str(args.encode_sentences), "--embeddings-out", emb])
        save()
        print(f"faiss: {model} embeddings tiled to {args.pool_size}", flush=True)
        report["faiss"][model] = run_phase([*common, "--phase", "faiss", "--embeddings-in", emb, "--nlist", str(args.nlist),
                                            "--nprobe", str(args.nprobe), "--hnsw-size", str(args.hnsw_size)])
        save()
        Path(emb).unlink()
    for ngram in [int(n) for n in args.bm25.split(",") if n]:
        print(f"bm25-{ngram}: {args.pool_size} sentences", flush=True)
        report["bm25"][f"bm25-{ngram}"] = run_phase([*common, "--phase", "bm25", "--ngram", str(ngram)])
        save()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
