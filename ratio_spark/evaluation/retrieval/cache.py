"""Embeddings on disk, keyed by what determines them: the model (its path and weight files), the prefix,
the text set (a pool's content hash, or a hash of the query texts), normalisation and maximum length.
A second evaluation of the same pool with the same model and prefix loads instead of encoding.

Layout: ``<root>/<model slug>/<key digest>.npy`` (float32, one row per text) and ``.json`` beside it
(the key in clear, so a folder can be inspected and pruned by hand). Writes go through a temporary file
and a rename, so an interrupted run never leaves a half file that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ratio_spark.core.paths import cache_dir


def default_cache_root() -> Path:
    return cache_dir("embeddings")


def model_fingerprint(path_or_name: str) -> str:
    """A local model folder: its path plus the size and mtime of its weight files; a hub name: the name."""
    path = Path(path_or_name)
    if not path.is_dir():
        return path_or_name
    parts = [str(path.resolve())]
    for weight in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        stat = weight.stat()
        parts.append(f"{weight.name}:{stat.st_size}:{int(stat.st_mtime)}")
    return "|".join(parts)


def texts_digest(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\x1e")
    return digest.hexdigest()[:16]


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    encoded_texts: int = 0


class EmbeddingCache:
    def __init__(self, root: str | Path | None = None, enabled: bool = True):
        self.root = Path(root) if root else default_cache_root()
        self.enabled = enabled
        self.stats = CacheStats()

    def path_for(self, key: dict) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(str(key.get("model_name", "model"))).name)[:60] or "model"
        return self.root / slug / f"{digest}.npy"

    def get_or_encode(self, key: dict, texts: Sequence[str], encode: Callable[[Sequence[str]], np.ndarray]) -> np.ndarray:
        path = self.path_for(key)
        if self.enabled and path.is_file():
            embeddings = np.load(path)
            if embeddings.shape[0] == len(texts):
                self.stats.hits += 1
                return embeddings
        embeddings = np.ascontiguousarray(encode(texts), dtype=np.float32)
        self.stats.misses += 1
        self.stats.encoded_texts += len(texts)
        if self.enabled:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
            np.save(tmp, embeddings)
            os.replace(tmp, path)
            path.with_suffix(".json").write_text(json.dumps({**key, "rows": len(texts), "dim": int(embeddings.shape[1])},
                                                            indent=2, sort_keys=True))
        return embeddings
