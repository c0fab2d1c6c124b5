"""The whole judge path against a real model: llama.cpp + gemma 3 270M on 127.0.0.1 (the ``llm_server``
fixture), real HTTP, real JSON-constrained decoding, the real on-disk cache and a real server crash.

The 270M base model proves the plumbing, not judgment: the tests check that every verdict is a valid
answer that lands in the right row, never what it says. Only ``test_http_failures_*`` uses a mocked
transport (httpx.MockTransport), for HTTP 500s, which a real server cannot be made to return on demand.
"""

from __future__ import annotations


import pandas as pd
import pytest

from ratio_spark.silver.build import build_silver
from ratio_spark.silver.settings import SilverConfig
from ratio_spark.silver.table import read_silver

from conftest import REPO_ROOT, SILVER_FIXTURE, read_jsonl

pytestmark = pytest.mark.slow

EXAMPLE_LABELS = REPO_ROOT / "data" / "silver-example" / "labels.csv"

SMALL = {"address": 1, "broaden": 1, "specify": 1}  # one pair per move


def requests_for(config: SilverConfig) -> int:
    """Requests a build of ``config`` sends: every prompt of its move for each sampled pair."""
    return sum(n * len(config.prompts[move]) for move, n in config.sample.items())


def _location(silver_tables, tmp_path):
    def location(name: str) -> str:
        return str(silver_tables / name) if name in ("queries", "candidates") else str(tmp_path / "tables" / name)
    return location


def _local(llm_server, **update):
    """The server's endpoint, one request at a time with a long timeout: llama.cpp answers one request
    at a time, and on a loaded CPU a queued request would time out and be re-sent while the server still
    works on the abandoned one."""
    return llm_server.endpoint().model_copy(update={"max_concurrency": 1, "timeout_s": 600, **update})


def _client(endpoint, tmp_path, **kw):
    from ratio_spark.llm import LLMClient, LLMConfig

    return LLMClient(LLMConfig(models=[endpoint], cache_dir=str(tmp_path / "llm-cache")), **kw)


def _check_table(table: pd.DataFrame, config: SilverConfig, n: int) -> None:
    assert len(table) == n and table["query_id"].is_unique
    for row in table.itertuples(index=False):
        verdicts = list(row.verdicts)
        assert [v["prompt_id"] for v in verdicts] == config.prompts[row.move]
        assert all(v["error"] is None and isinstance(v["accept"], bool) and v["reason"] for v in verdicts)
        assert row.accepted == all(v["accept"] for v in verdicts)
        assert row.status == ("accepted" if row.accepted else "rejected")


def test_build_with_the_local_model_then_rerun_from_the_cache(llm_server, silver_tables, tmp_path):
    config = SilverConfig(sample=SMALL, model="gemma-local")
    location = _location(silver_tables, tmp_path)
    n_pairs, n_requests = sum(SMALL.values()), requests_for(config)
    first = build_silver(config, location, _client(_local(llm_server), tmp_path))
    table = read_silver(location("silver"), "test")
    _check_table(table, config, n_pairs)
    assert set(table["judge_model"]) == {"gemma-local"} and set(table["judge_model_id"]) == {"gemma-3-270m"}
    cost = first.run.cost_report()
    assert cost["requests"].sum() == n_requests and cost["sent"].sum() == n_requests and cost["cached"].sum() == 0
    assert (cost["paid_prompt_tokens"] > 0).all() and (cost["paid_completion_tokens"] > 0).all()
    assert first.counts()["sampled"].sum() == n_pairs

    second = build_silver(config, location, _client(_local(llm_server), tmp_path))  # a fresh client
    again = second.run.cost_report()
    assert again["cached"].sum() == n_requests and again["sent"].sum() == 0
    assert again["paid_prompt_tokens"].sum() == 0 and again["paid_completion_tokens"].sum() == 0
    rerun_table = read_silver(location("silver"), "test")
    cols = ["query_id", "status", "accepted"]
    pd.testing.assert_frame_equal(rerun_table[cols].sort_values("query_id").reset_index(drop=True),
                                  table[cols].sort_values("query_id").reset_index(drop=True))
    assert [list(v) for v in rerun_table.sort_values("query_id")["verdicts"]] == [
        [{**x, "cached": True} for x in v] for v in table.sort_values("query_id")["verdicts"]]


def test_a_server_crash_midway_then_a_rerun_gives_each_verdict_exactly_once(llm_server, silver_tables, tmp_path):
    """The server is SIGKILLed after a few answers and restarted on the same port; the rerun sends only
    what is missing. A counting proxy (tests/llm_standin.py) in front of the real server proves that the
    server answered each request exactly once over both runs."""
    from llm_standin import BatchStandIn, crash_midway, messages_fingerprint

    from ratio_spark.llm.requests import build_body

    config = SilverConfig(sample={"address": 2, "specify": 1, "broaden": 0}, model="gemma-local")
    n_requests = requests_for(config)  # 6: three answered before the crash leave some unanswered
    location = _location(silver_tables, tmp_path)
    proxy = BatchStandIn(upstream=llm_server.base_url)
    endpoint = _local(llm_server, base_url=proxy.base_url, max_retries=0)  # fail at once when the server is gone
    client = _client(endpoint, tmp_path)
    outcome = crash_midway(llm_server, client, lambda: build_silver(config, location, client), answers=3)
    try:
        first = outcome["result"]
        answered = client.cache.count()
        assert 3 <= answered < n_requests
        table = read_silver(location("silver"), "test")
        assert first.run.verdicts["error"].notna().sum() == n_requests - answered
        assert (table["status"] == "failed").any() and table.query("status == 'failed'")["accepted"].isna().all()

        rerun = build_silver(config, location, _client(endpoint, tmp_path))
        cost = rerun.run.cost_report()
        assert cost["cached"].sum() == answered and cost["sent"].sum() == n_requests - answered
        assert cost["failed"].sum() == 0
        assert _client(endpoint, tmp_path).cache.count() == n_requests
        _check_table(read_silver(location("silver"), "test"), config, sum(config.sample.values()))
        # the first run's verdicts are kept, not asked again
        before = first.run.verdicts[first.run.verdicts["error"].isna()].set_index(["query_id", "prompt_id"])["accept"]
        after = rerun.run.verdicts.set_index(["query_id", "prompt_id"])["accept"]
        assert (after.loc[before.index] == before).all()
        # the real server answered each request exactly once over both runs
        from ratio_spark.silver.pairs import load_pairs
        from ratio_spark.silver.prompts import VERDICT_SCHEMA, load_prompts
        from ratio_spark.llm import ChatRequest

        pairs = load_pairs(location, "test").set_index("query_id")
        prompts = load_prompts()
        fingerprints = []
        for qid, prompt_id in after.index:
            pair = pairs.loc[qid]
            messages = prompts[pair.move][prompt_id].messages(pair.query_text_original, pair.marker, pair.gold_text_original)
            body = build_body(endpoint, ChatRequest("x", messages, VERDICT_SCHEMA, config.max_tokens))
            fingerprints.append(messages_fingerprint(body["messages"]))
        assert [proxy.answered[fp] for fp in fingerprints] == [1] * n_requests
    finally:
        proxy.close()


def test_batch_mode_through_a_batch_api_stand_in(llm_server, silver_tables, tmp_path):
    """mode=batch: the OpenAI Batch API path (files, batches, poll, download), served by the stand-in in
    tests/llm_standin.py, which replays each uploaded line against the real local server."""
    from llm_standin import BatchStandIn

    standin = BatchStandIn(upstream=llm_server.base_url)
    try:
        endpoint = _local(llm_server, base_url=standin.base_url, name="gemma-batch")
        config = SilverConfig(sample={"address": 1, "specify": 0, "broaden": 0}, model="gemma-batch", mode="batch",
                              batch_state_dir=str(tmp_path / "batches"), batch_poll_interval_s=0.2)
        location = _location(silver_tables, tmp_path)
        result = build_silver(config, location, _client(endpoint, tmp_path))
        assert result.run.transport == "batch"
        assert standin.route_count("POST /v1/files") == 1 and standin.route_count("POST /v1/batches") == 1
        _check_table(read_silver(location("silver"), "test"), config, sum(config.sample.values()))
        assert result.run.usage["gemma-batch"]["batch_requests"] == requests_for(config)
    finally:
        standin.close()


def test_http_failures_become_failed_pairs_and_only_they_are_retried(silver_tables, tmp_path):
    """Mocked transport: HTTP 500 for some requests (a real server cannot fail on demand)."""
    import json

    import httpx

    from ratio_spark.llm import ModelEndpoint

    calls = {"n": 0}
    broken = {"on": True}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        body = json.loads(request.content)
        text = json.dumps(body["messages"])
        if broken["on"] and "SPECIFY" in text:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        answer = {"reason": "fine", "accept": "ADDRESS" in text}
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(answer)}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        })

    endpoint = ModelEndpoint(name="mock", model="m", base_url="http://mock.invalid/v1", max_retries=0,
                             json_mode="json_object")
    config = SilverConfig(sample={"address": 2, "specify": 2, "broaden": 0}, model="mock")
    location = _location(silver_tables, tmp_path)
    first = build_silver(config, location, _client(endpoint, tmp_path, http_client=httpx.Client(
        transport=httpx.MockTransport(handler))))
    table = read_silver(location("silver"), "test").set_index("query_id")
    assert (table.query("move == 'specify'")["status"] == "failed").all()
    assert table.query("move == 'specify'")["accepted"].isna().all()
    assert (table.query("move == 'address'")["status"] == "accepted").all()
    errors = first.run.verdicts.set_index("move")["error"]
    assert errors.loc["specify"].str.startswith("http_500").all() and errors.loc["address"].isna().all()
    specify_requests = config.sample["specify"] * len(config.prompts["specify"])
    assert first.run.cost_report().set_index("move").loc["specify", "failed"].sum() == specify_requests

    broken["on"] = False
    calls["n"] = 0
    second = build_silver(config, location, _client(endpoint, tmp_path, http_client=httpx.Client(
        transport=httpx.MockTransport(handler))))
    assert calls["n"] == specify_requests  # only the failed requests are sent again
    table = read_silver(location("silver"), "test")
    assert (table["status"] != "failed").all()
    assert second.run.cost_report()["cached"].sum() == requests_for(config) - specify_requests


def test_agreement_command_on_the_example_labels_with_the_local_model(llm_server, silver_tables, tmp_path, capsys):
    """``silver agreement`` end to end: the example labels' Broaden pairs, every Broaden prompt variant of the
    prompt folder judged by the real local model, the table printed, the selection written as a conf fragment
    that loads. The folder holds three of the packaged Broaden prompts (fewer requests than all five)."""
    import json as _json
    from importlib import resources

    from ratio_spark.cli.main import main
    from ratio_spark.config import load_config
    from ratio_spark.silver.agreement import load_labels

    variants = ["ordered-v1", "directional-v1", "minimal-v1"]
    packaged = resources.files("ratio_spark.silver") / "prompts" / "broaden"
    (tmp_path / "prompts" / "broaden").mkdir(parents=True)
    for name in variants:
        (tmp_path / "prompts" / "broaden" / f"{name}.md").write_text((packaged / f"{name}.md").read_text("utf-8"), "utf-8")
    labelled = load_labels(EXAMPLE_LABELS)["query_id"]
    broaden = [r["query_id"] for r in read_jsonl(SILVER_FIXTURE / "queries.jsonl") if r["move"] == "broaden"]
    endpoint = _local(llm_server).model_dump(include={"name", "model", "base_url", "json_mode", "fold_system_prompt",
                                                      "max_concurrency", "timeout_s"})
    selection = tmp_path / "selection.yaml"
    code = main([
        "silver", "agreement", "--set", f"tables.root={silver_tables}", "--set", f"llm.cache_dir={tmp_path / 'llm'}",
        "--set", f"silver.prompt_dir={tmp_path / 'prompts'}",
        "--set", f"llm.models=[{_json.dumps(endpoint)}]", "--labels", str(EXAMPLE_LABELS), "--moves", "broaden",
        "--out", str(tmp_path / "agreement.csv"), "--write-selection", str(selection),
    ])
    assert code == 0
    out = capsys.readouterr().out
    assert "calibration annotator: helper-silver" in out and "Both (AND)" in out
    table = pd.read_csv(tmp_path / "agreement.csv")
    assert set(table["move"]) == {"broaden"} and (table["n"] == labelled.isin(broaden).sum()).all()
    assert set(table["system"]) == {*variants, "Both (AND)"}
    chosen = load_config(str(selection)).silver.prompts["broaden"]
    assert len(chosen) == 2 and set(table.query("selected")["system"]) == set(chosen)


def test_build_and_anaphora_commands_with_the_local_model(llm_server, silver_tables, tmp_path, capsys):
    """``ratio-spark silver build`` then ``silver anaphora``, as a user runs them (endpoint from --set)."""
    import json as _json

    from ratio_spark.cli.main import main

    endpoint = _local(llm_server).model_dump(include={"name", "model", "base_url", "json_mode", "fold_system_prompt",
                                                      "max_concurrency", "timeout_s"})
    sample = {"address": 1, "specify": 0, "broaden": 0}
    common = ["--set", f"tables.root={silver_tables}", "--set", f"tables.overrides.silver={tmp_path / 'silver'}",
              "--set", f"silver.sample={_json.dumps(sample)}"]
    code = main(["silver", "build", *common, "--set", f"llm.cache_dir={tmp_path / 'llm'}",
                 "--set", f"llm.models=[{_json.dumps(endpoint)}]", "--cost-json", str(tmp_path / "cost.json")])
    assert code == 0
    out = capsys.readouterr().out
    assert "silver test" in out and "LLM client usage" in out and "accept_rate" in out
    report = _json.loads((tmp_path / "cost.json").read_text())
    n_requests = requests_for(SilverConfig(sample=sample))
    assert sum(r["sampled"] for r in report["counts"]) == sum(sample.values())
    assert sum(r["sent"] for r in report["cost"]) == n_requests
    assert report["client_usage"]["gemma-local"]["requests"] == n_requests
    assert main(["silver", "anaphora", *common]) == 0
    assert "explicit anaphors" in capsys.readouterr().out


def test_short_circuit_asks_the_second_prompt_only_after_an_accept(llm_server, silver_tables, tmp_path):
    from ratio_spark.silver.judge import SKIPPED

    config = SilverConfig(sample={"address": 1, "specify": 2, "broaden": 0}, model="gemma-local", short_circuit=True)
    location = _location(silver_tables, tmp_path)
    result = build_silver(config, location, _client(_local(llm_server), tmp_path))
    v = result.run.verdicts
    n_pairs = sum(config.sample.values())
    first, second = v[v.position == 0].set_index("query_id"), v[v.position == 1].set_index("query_id")
    assert len(first) == n_pairs and len(second) == n_pairs and first["error"].isna().all()
    for qid, row in first.iterrows():
        if row.accept:
            assert second.at[qid, "error"] is None or pd.isna(second.at[qid, "error"])
        else:
            assert second.at[qid, "error"] == SKIPPED
    cost = result.run.cost_report()
    accepted_first = int(first["accept"].sum())
    assert cost["sent"].sum() == n_pairs + accepted_first and cost["skipped"].sum() == n_pairs - accepted_first
    table = read_silver(location("silver"), "test").set_index("query_id")
    assert (table["accepted"] == [bool(first.at[q, "accept"]) and bool(second.at[q, "accept"] is True)
                                  for q in table.index]).all()
