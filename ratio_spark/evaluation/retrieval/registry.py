"""The one registry of retrievers and their one spec grammar: ``evaluation.retrievers`` (validated by the
settings), ``ratio-spark evaluate --retrievers`` (and ``--rerank`` on top of them), the hard-negative miner of
training and the backend of the Inspire search service (``inspire.search.make_backend``) all read a spec here.

    bm25-1 | bm25-2 | bm25-3          BM25 over word 1-, 2- or 3-grams (alias: bm25 = bm25-1)
    dense:<model>[:<prefix mode>]     a sentence-transformers bi-encoder (faiss); prefix: core.schema.PREFIX_MODES
    maxsim:<model>                    MaxSim over the token embeddings of a model

A new retriever is one ``register(RetrieverKind(...))`` call at the end of this module: how its specs are
written (for help and errors), how a spec parses, and how it is built (heavy imports inside ``build``, so that
validating a configuration never imports torch or faiss). Its class implements ``base.Retriever``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ratio_spark.core.errors import UserError
from ratio_spark.core.schema import PREFIX_MODES

MODELS_HELP = "model: minilm, mpnet, a folder or a sentence-transformers name"


class RetrieverSpecError(UserError, ValueError):
    """A retriever spec that no registered retriever reads (a ValueError too: in a settings validator it
    becomes the configuration's error naming the key)."""


@dataclass(frozen=True)
class RetrieverKind:
    name: str  # the ``kind`` of a parsed spec
    forms: tuple[str, ...]  # how its specs are written, for help and error messages
    parse: Callable[[str], dict | None]  # a spec -> its parameters, None when the spec is not of this kind
    # (parameters, the ``evaluation:`` settings, the embedding cache or None) -> a base.Retriever
    build: Callable[[dict, Any, Any], Any]
    aliases: dict[str, str] = field(default_factory=dict)  # another spelling -> the spec it stands for


KINDS: dict[str, RetrieverKind] = {}


def register(kind: RetrieverKind) -> None:
    if kind.name in KINDS:
        raise ValueError(f"retriever kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind


def spec_help() -> str:
    """Every spec form, aliases named: what ``--retrievers`` and an unknown spec's error list."""
    forms = []
    for kind in KINDS.values():
        for form in kind.forms:
            aliases = [alias for alias, target in kind.aliases.items() if target == form]
            forms.append(form + (f" (alias {', '.join(aliases)})" if aliases else ""))
    return ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else "".join(forms)


def parse_retriever_spec(spec: str) -> dict:
    """``bm25-2`` -> {kind: bm25, ngram: 2}; ``dense:mpnet:generic`` -> {kind: dense, model, prefix};
    ``maxsim:minilm`` -> {kind: maxsim, model}. A ValueError names the bad spec and the forms there are."""
    spec = spec.strip()
    for kind in KINDS.values():
        parsed = kind.parse(kind.aliases.get(spec, spec))
        if parsed is not None:
            return {"kind": kind.name, **parsed}
    raise RetrieverSpecError(f"unknown retriever {spec!r}: use {spec_help()} ({MODELS_HELP})")


def build_retriever(spec: str, settings, cache=None):
    """The retriever of ``spec`` under the ``evaluation:`` settings (BM25 parameters, dense batch size, index,
    device, model aliases, progress); ``cache``: the embedding cache of dense retrievers."""
    parsed = parse_retriever_spec(spec)
    retriever = KINDS[parsed["kind"]].build(parsed, settings, cache)
    retriever.name = spec  # the id the user typed, for file names and tables
    return retriever


# ---------------------------------------------------------------------------------------------- the retrievers


def _parse_bm25(spec: str) -> dict | None:
    return {"ngram": int(spec[-1])} if spec in ("bm25-1", "bm25-2", "bm25-3") else None


def _build_bm25(parsed: dict, settings, cache):
    from ratio_spark.evaluation.retrieval.bm25 import BM25Retriever

    return BM25Retriever(parsed["ngram"], k1=settings.bm25.k1, b=settings.bm25.b, method=settings.bm25.method,
                         progress=settings.progress)


def _model_spec(kind: str, takes_prefix: bool) -> Callable[[str], dict | None]:
    def parse(spec: str) -> dict | None:
        head, _, rest = spec.partition(":")
        if head != kind or not rest:
            return None
        model, prefix = rest, None
        front, _, tail = rest.rpartition(":")
        if front and tail in PREFIX_MODES:
            model, prefix = front, tail
        if prefix is not None and not takes_prefix:
            raise RetrieverSpecError(f"retriever {spec!r}: {kind} takes no prefix mode")
        return {"model": model, "prefix": prefix}

    return parse


def _build_dense(parsed: dict, settings, cache):
    from ratio_spark.evaluation.retrieval.dense import DenseRetriever

    dense, index = settings.dense, settings.dense.index
    return DenseRetriever(
        parsed["model"], parsed["prefix"] or dense.prefix, batch_size=dense.batch_size, device=dense.device,
        cache=cache, index_kind=index.kind, nlist=index.nlist, nprobe=index.nprobe, hnsw_m=index.hnsw_m,
        ef_construction=index.ef_construction, ef_search=index.ef_search, max_seq_length=dense.max_seq_length,
        instruction_template=dense.instruction_template, aliases=settings.models, progress=settings.progress,
    )


def _build_maxsim(parsed: dict, settings, cache):
    from ratio_spark.evaluation.retrieval.maxsim import MaxSimRetriever

    return MaxSimRetriever(parsed["model"], batch_size=settings.dense.batch_size, device=settings.dense.device,
                           aliases=settings.models, progress=settings.progress)


register(RetrieverKind("bm25", ("bm25-1", "bm25-2", "bm25-3"), _parse_bm25, _build_bm25, aliases={"bm25": "bm25-1"}))
register(RetrieverKind("dense", (f"dense:<model>[:<{'|'.join(PREFIX_MODES)}>]",), _model_spec("dense", True),
                       _build_dense))
register(RetrieverKind("maxsim", ("maxsim:<model>",), _model_spec("maxsim", False), _build_maxsim))
