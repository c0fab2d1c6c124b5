"""LLM listwise reranking (ratio_spark.rerank): the prompt files, the repair rule, sliding windows, and the
whole path against a real model: llama.cpp + gemma 3 270M on 127.0.0.1 (the ``llm_server`` fixture), real HTTP,
JSON-constrained decoding, the on-disk cache, a real server crash, and both commands.

The 270M model proves the plumbing, not the ranking: the tests check that every answer lands where it
belongs, is repaired and counted by the documented rule, and is never paid for twice; never what it says.
Prompts are kept short (a few queries, 6 candidates) because the model takes seconds per request on 2 cores.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import FIXTURES, REPO_ROOT
from ratio_spark.core.provenance import shared_folder
from ratio_spark.evaluation.data import load_split
from ratio_spark.evaluation.runner import run_evaluation
from ratio_spark.evaluation.settings import EvaluationConfig
from ratio_spark.rerank.listwise import Windows, answer_schema, check_answer, fill_from_first_stage
from ratio_spark.rerank.prompts import PromptError, load_prompt
from ratio_spark.rerank.runner import rerank_systems
from ratio_spark.rerank.settings import RerankConfig

REPO = REPO_ROOT
TEST_PROMPTS = FIXTURES / "rerank"
PAPER = shared_folder() / "seeds" / "ratio-paper.txt"

# The Ratio paper, appendix H.3 ("Reranker"), the three relation lines, copied character for character.
H3_LINES = {
    "address": "Address: the candidate proposes, describes or evaluates a solution, improvement or mitigation for the "
               "problem, limitation or need stated in the query.",
    "broaden": "Broaden: the candidate states the query\u2019s research problem, idea or method in a MORE GENERAL form: "
               "the query is a specific instance or special case of what the candidate describes.",
    "specify": "Specify: the candidate states a MORE SPECIFIC instance, special case or concrete realisation of the "
               "research problem, idea or method described in the query.",
}


# ----------------------------------------------------------------------------------------------- prompts


def test_the_packaged_prompt_carries_the_papers_relation_lines_word_for_word():
    prompt = load_prompt("listwise-v1")
    assert prompt.relations == H3_LINES
    if PAPER.is_file():  # the seed text, where the checkout has it beside it
        text = PAPER.read_text(encoding="utf-8")
        for line in H3_LINES.values():
            assert f"\u2022 {line}" in text
    assert len(prompt.sha256) == 64


def test_the_messages_follow_the_paper():
    prompt = load_prompt("listwise-v1")
    messages = prompt.messages("broaden", "  A query\nsentence. ", ["First  candidate.", "Second one.", "Third."], 2)
    system, user = messages[0]["content"], messages[1]["content"]
    assert H3_LINES["broaden"] in system and H3_LINES["address"] not in system
    assert "JSON" in system and "2 candidates" in system and "1 to 3" in system
    assert user.startswith("Query: A query sentence.\n")
    assert "carries no information" in user
    assert user.endswith("[1] First candidate.\n[2] Second one.\n[3] Third.")
    reask = prompt.reask_message("1 repeated number", 2, 3)["content"]
    assert "1 repeated number" in reask and "2 different numbers from 1 to 3" in reask


def _write_prompt(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(text)
    return folder


GOOD = (TEST_PROMPTS / "echo-v1.md").read_text()


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("id: echo-v1", "id: other-v1"), "must equal the file name"),
    (lambda t: t.replace('  broaden: "Broaden: the candidate generalises the query."\n', ""), "'relations' must give"),
    (lambda t: t.replace("$relation", "$relation $colour"), "unknown placeholder(s) $colour"),
    (lambda t: t.replace("Query: $query", "Query:"), "lacks $query"),
    (lambda t: t.replace("reask: |-", "notes: |-"), "'reask'"),
    (lambda t: t.replace("JSON", "answer"), "JSON"),
    (lambda t: t[4:], "front matter"),
])
def test_a_broken_prompt_file_is_refused_with_its_reason(tmp_path, edit, message):
    folder = _write_prompt(tmp_path, "echo-v1", edit(GOOD))
    with pytest.raises(PromptError, match=message.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)")):
        load_prompt("echo-v1", folder)


def test_an_unknown_prompt_names_the_ones_there_are():
    with pytest.raises(PromptError, match=r"available: \['listwise-v1'\]"):
        load_prompt("listwise-v9")
    assert load_prompt("echo-v1", TEST_PROMPTS).prompt_id == "echo-v1"


# ----------------------------------------------------------------------------------------------- repair rule, windows


def test_the_repair_rule_keeps_first_occurrences_and_fills_in_first_stage_order():
    check = check_answer([3, 3, 0, 12, 1, 2.0, True, "4"], count=10, select=4)
    # 3 -> idx 2; 3 again: duplicate; 0 and 12: out of range; 1 -> idx 0; 2.0 -> idx 1; True, "4": not numbers
    assert check.picks == [2, 0, 1] and (check.duplicate, check.out_of_range, check.missing) == (1, 4, 1)
    assert check.defects == {"duplicate": 1, "out_of_range": 4, "missing": 1}
    assert "1 repeated number" in check.problems() and "4 out of range numbers" in check.problems()
    assert fill_from_first_stage(check.picks, 10, 4) == [2, 0, 1, 3]
    clean = check_answer([5, 1, 2], count=6, select=3)
    assert clean.picks == [4, 0, 1] and clean.defects == {}
    assert check_answer([], count=6, select=3).missing == 3 and fill_from_first_stage([], 6, 3) == [0, 1, 2]
    schema = answer_schema(10)
    assert schema["properties"]["ranking"]["maxItems"] == 10 and schema["required"] == ["ranking"]


@pytest.mark.parametrize("n, size, select", [(100, 100, 10), (100, 20, 10), (25, 20, 10), (37, 12, 3), (5, 8, 10)])
def test_sliding_windows_carry_the_best_to_the_top(n, size, select):
    relevance = np.random.default_rng(n * size).permutation(n)  # position -> how good it is (an oracle)
    windows = Windows(n, size, select)
    shown_sizes = []
    while windows.final is None:
        shown = windows.shown
        assert shown == sorted(shown) and len(shown) <= size  # first-stage order, never more than a window
        shown_sizes.append(len(shown))
        picks = sorted(range(len(shown)), key=lambda i: -relevance[shown[i]])[: windows.wanted]
        windows.advance(picks)
    expected_windows = 1 if size >= n else 1 + math.ceil((n - size) / (size - select))
    assert len(shown_sizes) == expected_windows
    # a perfect model finds the global best `select` through the windows, best first
    assert windows.final == sorted(range(n), key=lambda p: -relevance[p])[: min(select, n)]


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(ValueError, match="select"):
        RerankConfig(candidates=5, select=10)
    with pytest.raises(ValueError, match="must be larger than select"):
        RerankConfig(candidates=100, window=10, select=10)
    assert RerankConfig(candidates=100, window=100, select=10).window == 100


# ----------------------------------------------------------------------------------------------- the real model


def _local(llm_server, **update):
    """One request at a time with a long timeout (llama.cpp answers in turn; see test_silver_judge)."""
    return llm_server.endpoint().model_copy(update={"max_concurrency": 1, "timeout_s": 600, **update})


def _client(endpoint, tmp_path):
    from ratio_spark.llm import LLMClient, LLMConfig

    return LLMClient(LLMConfig(models=[endpoint], cache_dir=str(tmp_path / "llm-cache")))


def _first_stage(eval_tables, queries: int, moves=("specify",)):
    data = load_split(eval_tables, "test", moves=list(moves), max_queries=queries)
    settings = EvaluationConfig(retrievers=["bm25-1"], analyses=[], moves=list(moves), progress=False)
    return data, run_evaluation(data, settings, log=lambda _: None)


SMALL = dict(candidates=6, select=3, window=6, max_tokens=48)


def _check_reranked(result, data, settings: RerankConfig, system="bm25-1", name="bm25-1+rerank:gemma-local"):
    """Every reranked ranking is the first-stage ranking with only its top `select` changed, drawn from the
    first-stage top `candidates`; failed queries have no ranking; the per-query rows say which is which."""
    rows = result.per_query.set_index(["system", "query_id"])
    for move, queries in data.queries.items():
        for query in queries:
            first = result.rankings[(system, move)][query.query_id].ids
            new = result.rankings[(name, move)][query.query_id].ids
            status = rows.loc[(name, query.query_id), "rerank_status"]
            if status == "failed":
                assert new == [] and rows.loc[(name, query.query_id), "M@10"] == 0
                continue
            assert sorted(new) == sorted(first) and len(new) == len(first)
            assert set(new[: settings.select]) <= set(first[: settings.candidates])
            rest = [cid for cid in first if cid not in new[: settings.select]]
            assert new[settings.select:] == rest
            if status == "not_sent":
                assert new == first


@pytest.mark.slow
@pytest.mark.llm
def test_rerank_a_small_run_with_the_local_model_then_rerun_from_the_cache(llm_server, eval_tables, tmp_path):
    settings = RerankConfig(**SMALL)
    data, result = _first_stage(eval_tables, 3)
    client = _client(_local(llm_server), tmp_path)
    report = rerank_systems(result, data, client, settings, model="gemma-local", state_dir=tmp_path / "b")
    counts = report.counts.iloc[0]
    exposed = sum(1 for r in result.per_query.itertuples() if r.system == "bm25-1" and r.gold_rank == r.gold_rank
                  and r.gold_rank <= settings.candidates)
    assert counts["queries"] == 3 and counts["sent"] == exposed >= 1 and counts["not_sent"] == 3 - exposed
    assert counts["failed"] == 0 and counts["requests"] == exposed + counts["reasks"] and counts["cached"] == 0
    assert counts["prompt_tokens"] > 0 and counts["completion_tokens"] > 0
    _check_reranked(result, data, settings)
    assert result.metrics.query("system == 'bm25-1+rerank:gemma-local' and metric == 'M@10'")["queries"].iloc[0] == 3
    assert client.usage()["gemma-local"]["http_calls"] == counts["requests"]

    data2, result2 = _first_stage(eval_tables, 3)
    again_client = _client(_local(llm_server), tmp_path)  # a fresh client on the same cache
    again = rerank_systems(result2, data2, again_client, settings, model="gemma-local", state_dir=tmp_path / "b")
    assert again_client.usage()["gemma-local"]["http_calls"] == 0
    row = again.counts.iloc[0]
    assert row["cached"] == row["requests"] == counts["requests"] and row["prompt_tokens"] == 0
    key = ("bm25-1+rerank:gemma-local", "specify")
    assert {q: r.ids for q, r in result2.rankings[key].items()} == {q: r.ids for q, r in result.rankings[key].items()}


@pytest.mark.slow
@pytest.mark.llm
def test_the_repair_rule_runs_and_is_counted_against_the_real_model(llm_server, eval_tables, tmp_path):
    """A test prompt (tests/fixtures/rerank/echo-v1.md) has the model copy an answer with a repeated and an
    out-of-range number: the answer is re-asked once, then filled in first-stage order, and counted."""
    settings = RerankConfig(**SMALL, prompt="echo-v1", prompt_dir=str(TEST_PROMPTS), max_reasks=1)
    data, result = _first_stage(eval_tables, 1)
    report = rerank_systems(result, data, _client(_local(llm_server), tmp_path), settings, model="gemma-local",
                            state_dir=tmp_path / "b")
    records = report.records[("bm25-1+rerank:gemma-local", "specify")]
    sent = [r for r in records if r["status"] != "not_sent"]
    assert sent, "the first query's gold must be in the first-stage top 6 for this test"
    for record in sent:
        answers = record["windows"][0]["answers"]
        assert len(answers) == 2 and record["reasks"] == 1  # the answer, then one re-ask
        # recount the kept answer's defects independently of check_answer
        kept = answers[-1]["ranking"]
        valid = [n for n in kept if isinstance(n, int) and 1 <= n <= 6]
        expected = {"duplicate": len(valid) - len(set(valid)), "out_of_range": len(kept) - len(valid),
                    "missing": 3 - len(set(valid))}
        assert record["defects"] == {k: v for k, v in expected.items() if v}
        assert record["status"] == ("repaired" if expected["missing"] else "reranked")
        picks = list(dict.fromkeys(valid))  # first occurrences, in the model's order
        picks += [p for p in range(1, 7) if p not in picks][: 3 - len(picks)]  # filled in first-stage order
        assert record["windows"][0]["picks"] == picks
    counts = report.counts.iloc[0]
    assert counts["repaired"] == sum(r["status"] == "repaired" for r in records) >= 1
    assert counts["reasks"] == len(sent) and counts["answers_with_defects"] == 2 * len(sent)
    assert counts["missing_numbers"] == sum(r["defects"].get("missing", 0) for r in records)
    _check_reranked(result, data, settings)


@pytest.mark.slow
@pytest.mark.llm
def test_a_server_crash_midway_then_a_rerun_answers_each_query_exactly_once(llm_server, eval_tables, tmp_path):
    """The server is SIGKILLed after the first answer and restarted on the same port. The first run's
    unanswered queries fail and score zero (never skipped); the rerun sends only those. A counting proxy
    (tests/llm_standin.py) proves the real server answered each request exactly once over both runs."""
    from llm_standin import BatchStandIn, crash_midway, messages_fingerprint

    from ratio_spark.llm import ChatRequest
    from ratio_spark.llm.requests import build_body

    settings = RerankConfig(**SMALL, max_reasks=0)
    data, result = _first_stage(eval_tables, 6)
    proxy = BatchStandIn(upstream=llm_server.base_url)
    endpoint = _local(llm_server, base_url=proxy.base_url, max_retries=0)  # fail at once while the server is down
    client = _client(endpoint, tmp_path)
    outcome = crash_midway(llm_server, client, lambda: rerank_systems(
        result, data, client, settings, model="gemma-local", state_dir=tmp_path / "b"), answers=1)
    try:
        first = outcome["result"].counts.iloc[0]
        answered = client.cache.count()
        assert first["sent"] >= 2, "this test needs at least two queries whose gold is in the top 6"
        assert 1 <= answered < first["sent"] and first["failed"] == first["sent"] - answered
        failed = result.per_query.query("rerank_status == 'failed'")
        assert len(failed) == first["failed"] and (failed[["M@10", "R@10", "nDCG@10", "R@100"]] == 0).all().all()

        data2, result2 = _first_stage(eval_tables, 6)
        rerun_report = rerank_systems(result2, data2, _client(endpoint, tmp_path), settings, model="gemma-local",
                                      state_dir=tmp_path / "b")
        rerun = rerun_report.counts.iloc[0]
        assert rerun["failed"] == 0 and rerun["cached"] == answered and rerun["requests"] == first["sent"]
        _check_reranked(result2, data2, settings)
        # the real server answered each query's request exactly once over both runs
        prompt = load_prompt(settings.prompt)
        queries = {q.query_id: q for q in data2.queries["specify"]}
        fingerprints = []
        for record in rerun_report.records[("bm25-1+rerank:gemma-local", "specify")]:
            if record["status"] == "not_sent":
                continue
            shown = [data2.pool.texts[data2.pool.index[c]] for c in record["windows"][0]["candidate_ids"]]
            messages = prompt.messages("specify", queries[record["query_id"]].text, shown, settings.select)
            body = build_body(endpoint, ChatRequest("x", messages, answer_schema(settings.select), settings.max_tokens))
            fingerprints.append(messages_fingerprint(body["messages"]))
        assert len(fingerprints) == first["sent"]
        assert [proxy.answered[fp] for fp in fingerprints] == [1] * len(fingerprints)
    finally:
        proxy.close()


@pytest.mark.slow
@pytest.mark.llm
def test_batch_mode_through_a_batch_api_stand_in(llm_server, eval_tables, tmp_path):
    """mode=batch: OpenAI's Batch API path (files, batches, poll, download), served by the stand-in in
    tests/llm_standin.py, which replays each uploaded line against the real local server."""
    from llm_standin import BatchStandIn

    standin = BatchStandIn(upstream=llm_server.base_url)
    try:
        endpoint = _local(llm_server, base_url=standin.base_url, name="gemma-batch")
        settings = RerankConfig(**SMALL, mode="batch", batch_poll_interval_s=0.2, max_reasks=0)
        data, result = _first_stage(eval_tables, 1)
        client = _client(endpoint, tmp_path)
        report = rerank_systems(result, data, client, settings, model="gemma-batch", state_dir=tmp_path / "batches")
        counts = report.counts.iloc[0]
        assert counts["sent"] == 1 and counts["failed"] == 0
        assert standin.route_count("POST /v1/files") == 1 and standin.route_count("POST /v1/batches") == 1
        assert (tmp_path / "batches" / "bm25-1" / "specify" / "w1" / "state.json").is_file()
        assert client.usage()["gemma-batch"]["batch_requests"] == 1
        _check_reranked(result, data, settings, name="bm25-1+rerank:gemma-batch")
    finally:
        standin.close()


# ----------------------------------------------------------------------------------------------- the commands


def _conf(llm_server, tmp_path, tables: Path, **rerank) -> Path:
    endpoint = _local(llm_server).model_dump(mode="json")
    conf = {"tables": {"root": str(tables)},
            "llm": {"cache_dir": str(tmp_path / "llm-cache"), "models": [endpoint]},
            "rerank": {"model": endpoint["name"], **rerank}}
    path = tmp_path / "conf.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


@pytest.fixture()
def cli(capsys):
    """Run ``ratio-spark`` in this process: (exit status, stdout, stderr)."""
    from ratio_spark.cli.main import main

    def run(*argv: str) -> tuple[int, str, str]:
        status = main(list(argv))
        out = capsys.readouterr()
        return status, out.out, out.err
    return run


@pytest.mark.slow
@pytest.mark.llm
def test_evaluate_rerank_then_the_rerank_command_on_its_runs(llm_server, eval_tables, tmp_path, cli):
    """`evaluate --rerank` with sliding windows (6 candidates, windows of 4, 2 chosen: two requests per query),
    then `ratio-spark rerank --from-results` on its first-stage runs: the same reranked figures, every answer
    from the cache, and each folder with its funnel, intervals and manifest."""
    conf = _conf(llm_server, tmp_path, eval_tables, candidates=6, window=4, select=2, max_tokens=32)
    first = tmp_path / "first"
    status, out, err = cli("evaluate", "--conf", str(conf), "--retrievers", "bm25-1", "--moves", "specify",
                           "--max-queries", "1", "--analyses", "none", "--no-progress", "--results", str(first),
                           "--rerank", "gemma-local")
    assert status == 0, out[-2000:] + err[-2000:]
    summary = json.loads((first / "summary.json").read_text())
    counts = summary["rerank"]["counts"][0]
    assert counts["queries"] == 1 and counts["failed"] == 0
    assert counts["requests"] == 2 * counts["sent"] + counts["reasks"]  # two windows per sent query
    record = json.loads((first / "rerank" / "bm25-1_rerank_gemma-local" / "specify.jsonl").read_text())
    if record["status"] != "not_sent":
        assert [len(w["candidate_ids"]) for w in record["windows"]] == [4, 4]  # positions 3-6, then 1-2 + the 2 best
    for name in ("funnel.md", "funnel.csv", "funnel.png", "intervals.md", "significance.csv", "rerank.md",
                 "manifest.json", "runs/bm25-1/specify.trec", "runs/bm25-1_rerank_gemma-local/specify.trec"):
        assert (first / name).is_file(), name
    manifest = json.loads((first / "manifest.json").read_text())
    assert {"prompt:rerank/listwise-v1", "llm:gemma-local", "table:queries"} <= set(manifest["inputs"])
    assert manifest["inputs"]["llm:gemma-local"]["cache_identity"] == llm_server.cache_identity

    second = tmp_path / "second"
    status, out, err = cli("rerank", "--conf", str(conf), "--from-results", str(first), "--results", str(second))
    assert status == 0, out[-2000:] + err[-2000:]
    again = json.loads((second / "summary.json").read_text())
    assert again["rerank"]["client_usage"]["gemma-local"]["http_calls"] == 0
    assert again["rerank"]["counts"][0]["cached"] == counts["requests"]
    assert again["mrr_at_10_percent"] == summary["mrr_at_10_percent"]
    assert (second / "runs" / "bm25-1_rerank_gemma-local" / "specify.trec").read_text() == \
        (first / "runs" / "bm25-1_rerank_gemma-local" / "specify.trec").read_text()
    assert "run:bm25-1" in json.loads((second / "manifest.json").read_text())["inputs"]


def test_the_rerank_command_refuses_bad_requests(eval_tables, tmp_path, cli):
    status, _, err = cli("rerank", "--set", f"tables.root={eval_tables}", "--from-results", "x", "--run", "a=b")
    assert status == 2 and "either --from-results" in err
    (tmp_path / "run.trec").write_text("q1 Q0 c1 1 not-a-number bm25\n")
    status, _, err = cli("rerank", "--set", f"tables.root={eval_tables}", "--run", f"bm25={tmp_path / 'run.trec'}")
    assert status == 2 and "run.trec:1: score 'not-a-number' is not a number" in err
    (tmp_path / "run.trec").write_text("q-none Q0 c1 1 3.5 bm25\n")
    status, _, err = cli("rerank", "--set", f"tables.root={eval_tables}", "--run", f"bm25={tmp_path / 'run.trec'}")
    assert status == 2 and "holds none of the" in err
    status, _, err = cli("rerank", "--set", f"tables.root={eval_tables}", "--from-results", str(tmp_path))
    assert status == 2 and "not a results folder" in err
    status, _, err = cli("evaluate", "--set", f"tables.root={eval_tables}", "--retrievers", "bm25-1", "--analyses",
                         "none", "--max-queries", "1", "--no-progress", "--results", str(tmp_path / "r"),
                         "--rerank", "nowhere")
    assert status == 2 and "no endpoint named 'nowhere'" in err
