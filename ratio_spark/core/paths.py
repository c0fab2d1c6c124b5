"""Where the project caches what it fetches or computes once: ``~/.cache/ratio-spark/<kind>``.

One place, so that every cache is found (and cleaned) the same way. Each kind can be moved with its own
environment variable (CI caches a folder, a cluster puts models on a shared disk):

    jars        RATIO_SPARK_JARS_CACHE   Delta Lake and Spark NLP jars resolved with Maven
    models      RATIO_MODELS_DIR         sentence-transformers models and the local LLM's GGUF
    embeddings  RATIO_EMBEDDINGS_DIR     pool and query embeddings of the evaluation
    llm         (llm.cache_dir)          the LLM answer cache
    wheels      RATIO_WHEELS             the llama-cpp-python wheel scripts/setup.sh builds (shell)
    logs        RATIO_SPARK_LOG_DIR      the full trace of a command that failed (``ratio_spark.cli.main``)
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_KINDS = {
    "jars": "RATIO_SPARK_JARS_CACHE",
    "models": "RATIO_MODELS_DIR",
    "embeddings": "RATIO_EMBEDDINGS_DIR",
    "llm": None,
    "wheels": "RATIO_WHEELS",
    "logs": "RATIO_SPARK_LOG_DIR",
}


def cache_dir(kind: str) -> Path:
    """The cache folder of ``kind`` (not created): its environment variable, else ``~/.cache/ratio-spark/<kind>``."""
    if kind not in CACHE_KINDS:
        raise KeyError(f"unknown cache {kind!r}; known: {sorted(CACHE_KINDS)}")
    variable = CACHE_KINDS[kind]
    if variable and os.environ.get(variable):
        return Path(os.environ[variable]).expanduser()
    return Path.home() / ".cache" / "ratio-spark" / kind
