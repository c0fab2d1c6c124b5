"""Dense retrieval with sentence-transformers and faiss (the paper's appendix C).

Prefix modes (``dense:<model>:<mode>``):

* ``none``: the texts as they are.
* ``generic``: ``"query: "`` before each query and ``"document: "`` before each candidate (the paper's generic
  prefix, used for all-mpnet-base-v2 and every untuned baseline).
* ``recommended``: the model's own prompts (``prompts`` in its sentence-transformers config, e.g. Qwen3's
  query instruction), else a known pair by model name (ModernBERT-embed and nomic-embed ``search_query: `` /
  ``search_document: ``, E5 ``query: `` / ``passage: ``, BGE's query instruction), else none (MiniLM and
  MPNet recommend none).
* ``instructions``: the paper's per-move instruction for the query, in ``instruction_template``
  (``"Instruct: {instruction}\\nQuery: "``, the Qwen3 / Stella form); candidates get the recommended
  document prefix. The pool is encoded once and shared by the three moves.

Embeddings are L2-normalised, so inner product is cosine. Exact search is a faiss ``IndexFlatIP``; ``ivf``
(``IndexIVFFlat``) and ``hnsw`` (``IndexHNSWFlat``) are approximate options for pools of millions, and
then every search is also run exactly and the recall of the approximate top-k against the exact top-k is
reported. With faiss-gpu and a visible GPU the flat and IVF indexes move to the GPU (same code); the
encoder runs on CUDA when torch sees one.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ratio_spark.core.schema import PREFIX_MODES
from ratio_spark.evaluation.data import CandidatePool
from ratio_spark.evaluation.retrieval.base import PROGRESS_MIN, Retriever
from ratio_spark.evaluation.retrieval.cache import EmbeddingCache, model_fingerprint, texts_digest

GENERIC_PREFIXES = ("query: ", "document: ")
MOVE_INSTRUCTIONS = {  # the paper's appendix C, word for word
    "address": "Given a scientific statement describing a research problem or limitation, retrieve a passage that "
               "addresses, solves, or mitigates that problem.",
    "broaden": "Given a specific scientific statement, retrieve a passage that generalizes it into a broader claim, "
               "principle, or framing.",
    "specify": "Given a general scientific statement, retrieve a passage that makes it more concrete through a "
               "specific instance, detail, or special case.",
}
DEFAULT_INSTRUCTION_TEMPLATE = "Instruct: {instruction}\nQuery: "
# Developers' recommended prefixes for models whose config does not carry them (matched on the lowercased name).
KNOWN_RECOMMENDED = (
    ("modernbert-embed", ("search_query: ", "search_document: ")),
    ("nomic-embed", ("search_query: ", "search_document: ")),
    ("e5-", ("query: ", "passage: ")),
    ("bge-", ("Represent this sentence for searching relevant passages: ", "")),
)


def recommended_prefixes(model, model_name: str) -> tuple[str, str, str]:
    """(query prefix, document prefix, where they came from)."""
    prompts = dict(getattr(model, "prompts", None) or {})
    query_key = next((k for k in ("query", "s2p_query", "search_query") if k in prompts), None)
    if query_key is not None:
        document = next((prompts[k] for k in ("document", "passage", "search_document") if k in prompts), "")
        return prompts[query_key], document, f"model config prompts ({query_key})"
    lowered = model_name.lower()
    for needle, (query, document) in KNOWN_RECOMMENDED:
        if needle in lowered:
            return query, document, f"known prefixes for *{needle}*"
    return "", "", "none recommended"


def embedding_dimension(model) -> int:
    """sentence-transformers 6 renamed ``get_sentence_embedding_dimension``; support both."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


def faiss_gpu_available() -> bool:
    import faiss

    return hasattr(faiss, "StandardGpuResources") and getattr(faiss, "get_num_gpus", lambda: 0)() > 0


def build_faiss_index(embeddings: np.ndarray, kind: str = "flat", nlist: int | None = None, nprobe: int = 64,
                      hnsw_m: int = 32, ef_construction: int = 200, ef_search: int = 128, use_gpu: bool | None = None):
    """An inner-product index over normalised embeddings; on the GPU when faiss-gpu sees one (flat, ivf)."""
    import faiss

    n, dim = embeddings.shape
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "ivf":
        nlist = nlist or max(1, min(int(4 * np.sqrt(n)), n // 39 or 1))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = embeddings
        if n > nlist * 256:  # faiss trains on at most 256 points per list anyway
            sample = embeddings[np.random.default_rng(0).choice(n, nlist * 256, replace=False)]
        index.train(sample)
        index.nprobe = min(nprobe, nlist)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        index.hnsw.efSearch = ef_search
    else:
        raise ValueError(f"unknown index kind {kind!r}; choose flat, ivf or hnsw")
    if (faiss_gpu_available() if use_gpu is None else use_gpu) and kind != "hnsw":
        index = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    index.add(embeddings)
    return index


def overlap_recall(approx_rows: np.ndarray, exact_rows: np.ndarray) -> float:
    """Mean over queries of |approximate top-k ∩ exact top-k| / |exact top-k|."""
    values = []
    for approx, exact in zip(approx_rows, exact_rows):
        exact_set = {int(i) for i in exact if i >= 0}
        if exact_set:
            values.append(len(exact_set & {int(i) for i in approx if i >= 0}) / len(exact_set))
    return float(np.mean(values)) if values else float("nan")


class DenseRetriever(Retriever):
    def __init__(
        self,
        model: str,
        prefix: str = "generic",
        *,
        batch_size: int = 64,
        device: str | None = None,
        cache: EmbeddingCache | None = None,
        index_kind: str = "flat",
        nlist: int | None = None,
        nprobe: int = 64,
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        max_seq_length: int | None = None,
        instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE,
        aliases: dict[str, str] | None = None,
        progress: bool = True,
    ):
        from ratio_spark.evaluation.models import display_name

        if prefix not in PREFIX_MODES:
            raise ValueError(f"unknown prefix mode {prefix!r}; choose from {list(PREFIX_MODES)}")
        self.model_name = model
        self.prefix_mode = prefix
        self.batch_size = batch_size
        self.device = device
        self.cache = cache or EmbeddingCache()
        self.index_kind = index_kind
        self.index_params = dict(nlist=nlist, nprobe=nprobe, hnsw_m=hnsw_m, ef_construction=ef_construction,
                                 ef_search=ef_search)
        self.max_seq_length = max_seq_length
        self.instruction_template = instruction_template
        self.aliases = aliases or {}
        self.progress = progress
        self.name = f"dense:{model}:{prefix}"
        suffix = {"none": "no prefix", "generic": "generic prefix", "recommended": "recommended prefix",
                  "instructions": "per-move instruction"}[prefix]
        self.label = f"{display_name(model)} ({suffix})" + ("" if index_kind == "flat" else f" [{index_kind}]")
        self._model = None
        self._model_path: str | None = None
        self._index = None
        self._embeddings: np.ndarray | None = None
        self._exact = None
        self._pool_size = 0
        self.ann_recall: dict[str, float] = {}

    @classmethod
    def from_model(cls, model, name: str, prefix: str = "generic", **kwargs) -> "DenseRetriever":
        """A retriever over a model already in memory (training validates the model it is training).

        ``name`` stands for the model in prefixes (``recommended`` matches known names) and labels. The
        embedding cache is off: the weights change between calls, the cache key would not.
        """
        kwargs.setdefault("cache", EmbeddingCache(enabled=False))
        retriever = cls(name, prefix, **kwargs)
        retriever._model = model
        retriever._model_path = name
        return retriever

    # ---------------------------------------------------------------- model and prefixes
    @property
    def model(self):
        if self._model is None:
            from ratio_spark.evaluation.models import load_sentence_transformer, resolve_model

            self._model_path = resolve_model(self.model_name, self.aliases)
            self._model = load_sentence_transformer(self.model_name, self.device, self.aliases)
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    def prefixes(self, move: str) -> tuple[str, str]:
        """(query prefix, document prefix) for a move under this retriever's prefix mode."""
        if self.prefix_mode == "none":
            return "", ""
        if self.prefix_mode == "generic":
            return GENERIC_PREFIXES
        query, document, _ = recommended_prefixes(self.model, self._model_path or self.model_name)
        if self.prefix_mode == "recommended":
            return query, document
        return self.instruction_template.format(instruction=MOVE_INSTRUCTIONS[move]), document

    def _key(self, prefix: str, content: str, kind: str) -> dict:
        model = self.model
        return {
            "model_name": self.model_name,
            "model": model_fingerprint(self._model_path or self.model_name),
            "prefix": prefix,
            "content": content,
            "kind": kind,
            "normalized": True,
            "max_seq_length": int(model.max_seq_length or 0),
        }

    def encode(self, texts: Sequence[str], prefix: str, desc: str = "") -> np.ndarray:
        if self.progress and desc:
            print(f"  {self.name}: encoding {len(texts)} {desc}", flush=True)
        return self.model.encode(
            list(texts), prompt=prefix or None, batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=self.progress and len(texts) >= PROGRESS_MIN,
        ).astype(np.float32)

    # ---------------------------------------------------------------- pool
    def embed_pool(self, pool: CandidatePool) -> np.ndarray:
        """The pool's embeddings (cached); a sub-pool takes its rows from its parent's."""
        if pool.parent is not None:
            return self.embed_pool(pool.parent)[np.asarray(pool.parent_rows, dtype=np.int64)]
        _, document_prefix = self.prefixes("address")  # the document side does not depend on the move
        return self.cache.get_or_encode(self._key(document_prefix, pool.version, "pool"), pool.texts,
                                        lambda texts: self.encode(texts, document_prefix, "candidates"))

    def index(self, pool: CandidatePool) -> None:
        embeddings = self.embed_pool(pool)
        self._embeddings = embeddings
        self._index = build_faiss_index(embeddings, self.index_kind, **self.index_params)
        self._exact = build_faiss_index(embeddings, "flat") if self.index_kind != "flat" else None
        self._pool_size = len(pool)

    def score_pool(self, text: str) -> np.ndarray:
        """Cosine with every pool row, the query side of the prefix mode without a move (not ``instructions``)."""
        if self._embeddings is None:
            raise RuntimeError(f"{self.name}: index a pool first")
        if self.prefix_mode == "instructions":
            raise ValueError(f"{self.name}: a per-move instruction needs a move")
        return self._embeddings @ self.encode([text], self.prefixes("address")[0])[0]

    def search(self, texts: Sequence[str], move: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self._index is None:
            raise RuntimeError(f"{self.name}: index a pool first")
        query_prefix, _ = self.prefixes(move)
        embeddings = self.cache.get_or_encode(self._key(query_prefix, texts_digest(texts), "queries"), texts,
                                              lambda batch: self.encode(batch, query_prefix, f"{move} queries"))
        k = min(k, self._pool_size)
        scores, rows = self._index.search(embeddings, k)
        if self._exact is not None:
            _, exact_rows = self._exact.search(embeddings, k)
            self.ann_recall[move] = overlap_recall(rows, exact_rows)
        return scores, rows

    def describe(self) -> dict:
        info = {**super().describe(), "model": self.model_name, "model_path": self._model_path,
                "prefix_mode": self.prefix_mode, "index": self.index_kind}
        if self._model is not None:
            query, document = self.prefixes("address")
            info.update(query_prefix=query if self.prefix_mode != "instructions" else self.instruction_template,
                        document_prefix=document, dimension=embedding_dimension(self._model),
                        max_seq_length=self._model.max_seq_length, device=str(self._model.device))
            if self.prefix_mode in ("recommended", "instructions"):
                info["prefix_source"] = recommended_prefixes(self._model, self._model_path or self.model_name)[2]
        if self.ann_recall:
            info["ann_recall_vs_exact"] = self.ann_recall
        return info
