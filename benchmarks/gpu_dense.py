"""Dense retrieval on a GPU: does our encoder pick the GPU, do its embeddings match the CPU's, and how fast is it.

Runs ``DenseRetriever`` as ``ratio-spark evaluate`` does (device left to ``load_sentence_transformer``, which
takes CUDA when torch sees it) over real pool sentences, and reports:

* the device the model landed on;
* parity: cosine between these embeddings and reference embeddings of the same texts computed on the CPU
  (``--reference``, made by ``--make-reference`` on a machine without a GPU);
* encoding throughput in sentences/s, fp32 and fp16 (``model.half()``), per batch size, and the time to
  encode a pool of ``--pool-size`` sentences (the texts tiled to that size; the paper's test pool is ~400K);
* exact top-100 search (inner product on normalised embeddings, what faiss ``IndexFlatIP`` computes) as one
  torch matrix product on the GPU, checked against numpy on the CPU.

    # here (CPU): the texts and the reference embeddings
    python benchmarks/gpu_dense.py --make-reference --model minilm --tables data/tables/acl --workdir gpu-check
    # on the GPU machine
    python benchmarks/gpu_dense.py --model gpu-check/model --workdir gpu-check --out results.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

REFERENCE_TEXTS = 1000


def _texts(workdir: Path) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(workdir / "texts.parquet").column("text").to_pylist()


def make_reference(args) -> None:
    """Pool texts of a split (Parquet) and CPU embeddings of the first REFERENCE_TEXTS of them."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ratio_spark.core.delta import read_delta
    from ratio_spark.evaluation.retrieval.dense import GENERIC_PREFIXES, DenseRetriever

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    pool = read_delta(f"{args.tables}/candidates", ["candidate_id", "text"], [("split", "=", args.split)])
    pool = pool.sort_by("candidate_id")
    pq.write_table(pa.table({"text": pool.column("text")}), workdir / "texts.parquet", compression="zstd")
    retriever = DenseRetriever(args.model, device="cpu", progress=False)
    texts = pool.column("text").to_pylist()[:REFERENCE_TEXTS]
    np.save(workdir / "reference.npy", retriever.encode(texts, GENERIC_PREFIXES[1]))
    print(f"wrote {pool.num_rows} texts and {len(texts)} CPU reference embeddings to {workdir}")


def _rate(retriever, texts: list[str], prefix: str) -> tuple[float, np.ndarray]:
    import torch

    retriever.encode(texts[:256], prefix)  # warm-up: kernels, allocator
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    started = time.perf_counter()
    embeddings = retriever.encode(texts, prefix)
    return len(texts) / (time.perf_counter() - started), embeddings


def check(args) -> dict:
    import torch

    from ratio_spark.evaluation.retrieval.dense import GENERIC_PREFIXES, DenseRetriever

    workdir = Path(args.workdir)
    texts = _texts(workdir)[: args.max_texts]
    report: dict = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "pool_texts": len(texts)}
    retriever = DenseRetriever(args.model, batch_size=64, progress=False)
    report["device"] = str(retriever.model.device)
    report["loaded_dtype"] = str(retriever.model.dtype)
    retriever.model.float()  # fp32 first, whatever the checkpoint's dtype

    reference_path = workdir / "reference.npy"
    if reference_path.exists():
        reference = np.load(reference_path)
        here = retriever.encode(texts[: len(reference)], GENERIC_PREFIXES[1])
        cosine = (here * reference).sum(axis=1)
        report["parity_fp32"] = {"n": len(reference), "min_cosine": float(cosine.min()),
                                 "max_abs_diff": float(np.abs(here - reference).max())}

    rates = {}
    for batch_size in args.batch_sizes:
        retriever.batch_size = batch_size
        rates[f"fp32_b{batch_size}"], _ = _rate(retriever, texts, GENERIC_PREFIXES[1])
    retriever.model.half()
    for batch_size in args.batch_sizes:
        retriever.batch_size = batch_size
        rates[f"fp16_b{batch_size}"], fp16 = _rate(retriever, texts, GENERIC_PREFIXES[1])
    if reference_path.exists():
        cosine = (fp16[: len(reference)] * reference).sum(axis=1)
        report["parity_fp16"] = {"min_cosine": float(cosine.min()), "mean_cosine": float(cosine.mean())}
    report["sentences_per_second"] = {k: round(v) for k, v in rates.items()}

    best = max(rates, key=rates.get)
    retriever.batch_size = int(best.split("_b")[1])
    tiled = (texts * (args.pool_size // len(texts) + 1))[: args.pool_size]
    started = time.perf_counter()
    pool = retriever.encode(tiled, GENERIC_PREFIXES[1])
    report["pool_encode"] = {"sentences": len(tiled), "setting": best,
                             "seconds": round(time.perf_counter() - started, 1)}

    # Exact top-100 over the whole pool for 1,000 queries (pool rows as queries), on the GPU.
    device = retriever.model.device
    pool_gpu = torch.from_numpy(pool).to(device)
    queries = pool_gpu[:1000].clone()
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    started = time.perf_counter()
    scores, ids = torch.topk(queries @ pool_gpu.T, k=100, dim=1)
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    seconds = time.perf_counter() - started
    cpu_ids = np.argsort(-(pool[:50] @ pool.T), axis=1, kind="stable")[:, :10]
    cpu_scores = np.take_along_axis(pool[:50] @ pool.T, cpu_ids, axis=1)
    report["exact_search"] = {"queries": 1000, "pool": len(pool), "k": 100, "ms_per_query": round(1000 * seconds / 1000, 3),
                              "top10_score_diff_vs_cpu": float(np.abs(scores[:50, :10].float().cpu().numpy() - cpu_scores).max())}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm", help="alias, folder or sentence-transformers name")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--make-reference", action="store_true")
    parser.add_argument("--tables", help="tables root (with --make-reference)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[64, 256, 1024])
    parser.add_argument("--pool-size", type=int, default=400_000)
    parser.add_argument("--max-texts", type=int, default=None, help="use only the first N pool texts (a dry run)")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.make_reference:
        make_reference(args)
        return
    report = check(args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
