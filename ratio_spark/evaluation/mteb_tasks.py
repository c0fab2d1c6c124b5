"""The benchmark as MTEB retrieval tasks: one task per (move, split), over a release folder or the tables.

    import mteb
    from ratio_spark.evaluation.mteb_tasks import RatioModel, ratio_tasks
    results = mteb.evaluate(RatioModel("minilm", prefix="instructions"), tasks=ratio_tasks("data/release/sample"))

Each task ranks a move's queries of a split against the split's **whole shared pool**, as ``ratio-spark
evaluate`` does (``evaluation/data.py`` reads either source), and scores MTEB's metrics (nDCG@10 main, MRR@k,
Recall@k) at the paper's cutoffs. Two rules of the paper that MTEB does not know are kept here:

* **The query's own sentence is excluded from its ranking** (``exclude_candidate_ids``): the task wraps the
  model's search so that a query's excluded candidates never reach the scores (it asks for as many more
  candidates as the most a query excludes, then drops them).
* **The move's query prompt goes to queries only.** A task carries its move's instruction (the paper's
  appendix C) as MTEB's query prompt (``metadata.prompt = {"query": ...}``): MTEB's instruction-model wrappers
  apply it to queries only. ``RatioModel`` wraps **any** sentence-transformers model so that it encodes as
  ``dense:<model>:<prefix>`` does in ``ratio-spark evaluate`` (the same ``DenseRetriever`` prefixes and
  ``encode``): with ``prefix="instructions"`` the query gets the move's instruction in the instruction
  template and a candidate the model's document prefix; ``generic`` is ``query: `` / ``document: ``. A plain
  ``SentenceTransformer`` works too (MTEB then uses the model's own prompts).

MTEB's embedding cache (``mteb.models.CachedEmbeddingWrapper``) once ignored the prompt type, so that a
query's vector was reused for the same text as a candidate (mteb issue #5383): Ratio hits exactly that case,
since a query's own sentence can be in the pool. ``tests/evaluation/test_mteb_tasks.py`` checks that the cache keeps the
two apart and that cached and fresh scores agree.

A task's name carries a digest of its queries and pool (``RatioSpecify-test-1a2b3c4d``), so MTEB's results
cache never answers for another release under the same name; the digest is also the task's dataset revision.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence, get_args

from ratio_spark.core.schema import MOVES
from ratio_spark.evaluation.data import BenchmarkDataError, BenchmarkSplit, QuerySet, load_split
from ratio_spark.evaluation.metrics import CUTOFFS
from ratio_spark.evaluation.retrieval.dense import DEFAULT_INSTRUCTION_TEMPLATE, MOVE_INSTRUCTIONS, PREFIX_MODES

try:
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.models import (CrossEncoderProtocol, EncoderProtocol, SearchCrossEncoderWrapper, SearchEncoderWrapper,
                             SearchProtocol, SentenceTransformerEncoderWrapper)
    from mteb.types import PromptType
except ImportError as exc:  # the eval extra brings mteb
    raise ImportError(f"the MTEB tasks need the package mteb: pip install 'ratio-spark[eval]' ({exc})") from None

MOVE_OF_INSTRUCTION = {instruction: move for move, instruction in MOVE_INSTRUCTIONS.items()}


def split_digest(data: BenchmarkSplit, move: str) -> str:
    """A content hash of a move's queries (id, text, gold, exclusions) and the split's pool."""
    digest = hashlib.sha256(f"{data.split}\x1f{move}\x1f{data.pool.version}".encode())
    for query in data.queries[move]:
        digest.update("\x1f".join((query.query_id, query.text, *query.gold_ids, "|", *query.exclude_ids)).encode())
        digest.update(b"\x1e")
    return digest.hexdigest()


def _license(name: str | None) -> str | None:
    from mteb.types._metadata import Licenses

    allowed = {value for part in get_args(Licenses) for value in get_args(part)} or set(get_args(Licenses))
    return name if name in allowed else None


def ratio_task(data: BenchmarkSplit, move: str, source: str = "", license: str | None = None) -> "RatioRetrieval":
    """The MTEB task of one move of a loaded split."""
    if not data.queries.get(move):
        raise BenchmarkDataError(f"the {data.split} split holds no {move} queries: no MTEB task for it")
    digest = split_digest(data, move)
    metadata = TaskMetadata(
        name=f"Ratio{move.capitalize()}-{data.split}-{digest[:8]}",
        description=(f"Ratio {move}: rank the split's whole shared pool ({len(data.pool)} sentences) for each "
                     f"{move} query, minus the query's own sentence (Sharon & Hope, 2026). Source: {source}"),
        reference=None,
        dataset={"path": source or "ratio-spark", "revision": digest},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=[data.split],
        eval_langs=["eng-Latn"],
        main_score="ndcg_at_10",
        domains=["Academic", "Written"],
        license=_license(license),
        annotations_creators="derived",
        sample_creation="found",
        prompt={"query": MOVE_INSTRUCTIONS[move]},
        bibtex_citation="",
    )
    task_class = type(f"Ratio{move.capitalize()}Retrieval", (RatioRetrieval,), {"metadata": metadata})
    return task_class(data, move)


class RatioRetrieval(AbsTaskRetrieval):
    """One move's queries of one split against the split's whole pool, each minus its own sentence. MTEB keeps a
    task's metadata on its class, so ``ratio_task`` makes a subclass per (move, split, content)."""

    k_values = CUTOFFS

    def __init__(self, data: BenchmarkSplit, move: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.ratio, self.move = data, move
        self.excluded = {q.query_id: frozenset(q.exclude_ids) for q in data.queries[move] if q.exclude_ids}
        self._top_k = max(self.k_values)

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """The split as MTEB's datasets (read from the release or the tables when the task was made)."""
        if self.data_loaded:
            return
        from datasets import Dataset

        pool, queries = self.ratio.pool, self.ratio.queries[self.move]
        self.dataset = {"default": {self.ratio.split: {
            "corpus": Dataset.from_dict({"id": pool.ids, "title": [""] * len(pool), "text": pool.texts}),
            "queries": Dataset.from_dict({"id": [q.query_id for q in queries], "text": [q.text for q in queries]}),
            "relevant_docs": {q.query_id: {gold: 1 for gold in q.gold_ids} for q in queries},
            "top_ranked": None,
        }}}
        self.data_loaded = True

    def _evaluate_subset(self, model, data_split, **kwargs: Any):
        return super()._evaluate_subset(ExcludingSearch(model, self.excluded), data_split, **kwargs)


class ExcludingSearch:
    """A model's search with each query's excluded candidates taken out before MTEB scores the results."""

    def __init__(self, model, excluded: dict[str, frozenset[str]]):
        if isinstance(model, EncoderProtocol) and not isinstance(model, SearchProtocol):
            model = SearchEncoderWrapper(model)
        elif isinstance(model, CrossEncoderProtocol):
            model = SearchCrossEncoderWrapper(model)
        self.model, self.excluded = model, excluded
        self.mteb_model_meta = model.mteb_model_meta
        self.widen = max((len(ids) for ids in excluded.values()), default=0)

    def index(self, corpus, **kwargs: Any) -> None:
        self.model.index(corpus, **kwargs)

    def search(self, queries, *, top_k: int, **kwargs: Any):
        results = self.model.search(queries, top_k=top_k + self.widen, **kwargs)
        kept = {}
        for query_id, scores in results.items():
            excluded = self.excluded.get(query_id, frozenset())
            ranked = sorted(((cid, s) for cid, s in scores.items() if cid not in excluded), key=lambda p: (-p[1], p[0]))
            kept[query_id] = dict(ranked[:top_k])
        return kept


def ratio_tasks(source: str | Path, splits: Sequence[str] = ("test",), moves: Sequence[str] = MOVES,
                queries: QuerySet = "all", silver_location: str | Path | None = None,
                license: str | None = None) -> list[RatioRetrieval]:
    """One task per (move, split) with queries, from a release folder or a tables root. ``license`` (an MTEB
    licence id) defaults to the release's dataset card (``release.license``) when there is one."""
    tasks = []
    if license is None:
        license = release_license(source)
    for split in splits:
        data = load_split(source, split, moves=moves, queries=queries, silver_location=silver_location)
        tasks += [ratio_task(data, move, str(source), license) for move in moves if data.queries.get(move)]
    if not tasks:
        raise BenchmarkDataError(f"no queries of {list(moves)} in the split(s) {list(splits)} of {source}")
    return tasks


def release_license(source: str | Path) -> str | None:
    """The licence in a release's manifest (``export`` records the configured ``release.license``)."""
    import json

    manifest = Path(source) / "manifest.json"
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("license")
    except (OSError, ValueError):
        return None


class RatioModel(SentenceTransformerEncoderWrapper):
    """Any sentence-transformers model for MTEB, encoding as ``ratio-spark evaluate``'s ``dense:<model>:<prefix>``:
    the move's query prefix (read from the Ratio task's query prompt) on queries only, the document prefix on
    candidates. On a task that is not Ratio's it is MTEB's own sentence-transformers wrapper."""

    def __init__(self, model: Any = "minilm", prefix: str = "instructions", *,
                 instruction_template: str = DEFAULT_INSTRUCTION_TEMPLATE, device: str | None = None,
                 batch_size: int = 64, aliases: dict[str, str] | None = None):
        from ratio_spark.evaluation.models import display_name, load_sentence_transformer
        from ratio_spark.evaluation.retrieval.dense import DenseRetriever

        if prefix not in PREFIX_MODES:
            raise ValueError(f"unknown prefix mode {prefix!r}; choose from {list(PREFIX_MODES)}")
        name = model if isinstance(model, str) else (model.model_card_data.model_name or "model")
        st_model = load_sentence_transformer(model, device, aliases) if isinstance(model, str) else model
        super().__init__(st_model)
        self.dense = DenseRetriever.from_model(st_model, name, prefix, instruction_template=instruction_template,
                                               batch_size=batch_size, progress=False)
        # The prefix mode changes every vector: MTEB's results cache must not take one mode's scores for another's.
        self.mteb_model_meta = self.mteb_model_meta.model_copy(
            update={"name": f"ratio-spark/{display_name(name)}-{prefix}".replace(" ", "_"), "revision": prefix})

    def encode(self, inputs, *, task_metadata, hf_split: str, hf_subset: str, prompt_type=None, **kwargs: Any):
        prompt = task_metadata.prompt
        move = MOVE_OF_INSTRUCTION.get(prompt.get("query")) if isinstance(prompt, dict) else None
        if move is None or prompt_type not in (PromptType.query, PromptType.document):
            return super().encode(inputs, task_metadata=task_metadata, hf_split=hf_split, hf_subset=hf_subset,
                                  prompt_type=prompt_type, **kwargs)
        query_prefix, document_prefix = self.dense.prefixes(move)
        texts = [text for batch in inputs for text in batch["text"]]
        return self.dense.encode(texts, query_prefix if prompt_type == PromptType.query else document_prefix)
