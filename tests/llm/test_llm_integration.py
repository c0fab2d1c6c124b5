"""The LLM client against a real local model server (llama.cpp + gemma 3 270M on 127.0.0.1).

Nothing is mocked here. The Batch API routes (/v1/files, /v1/batches), which no local server has,
come from tests/llm_standin.py: it stores the uploaded JSONL and replays each line against the real
server. The same stand-in proxies chat completions to the real server and counts the answers, so
the tests can prove that a request was answered exactly once across a crash and a rerun.
The 270M base model proves the plumbing (HTTP, JSON-constrained decoding, caching), not judgment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import jsonschema
import pytest

from llm_standin import BatchStandIn, messages_fingerprint
from conftest import REPO_ROOT
from ratio_spark.llm import ChatRequest, LLMClient, LLMConfig, ModelEndpoint
from ratio_spark.llm.requests import build_body

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "confidence": {"type": "string", "enum": ["low", "high"]}},
    "required": ["answer", "confidence"],
}
SECRET = "sk-integration-SECRET-5a4b3c2d1e"


def sums(n: int, start: int = 0, tag: str = "") -> list[ChatRequest]:
    return [
        ChatRequest(
            request_id=f"sum-{tag}{i}",
            messages=[{"role": "system", "content": "You are a calculator. Answer in JSON."},
                      {"role": "user", "content": f"What is {i} + {i + 1}? {tag}"}],
            schema=SCHEMA, max_tokens=24,
        )
        for i in range(start, start + n)
    ]


@pytest.fixture
def proxy(llm_server):
    standin = BatchStandIn(upstream=llm_server.base_url)
    yield standin
    standin.close()


def endpoint_via(standin: BatchStandIn, llm_server, **kw) -> ModelEndpoint:
    base = llm_server.endpoint().model_dump()
    # keyed by the stand-in's own URL: these tests count what goes through it
    base.update({"base_url": standin.base_url, "name": "gemma-proxied", "cache_identity": None, **kw})
    return ModelEndpoint(**base)


def test_local_server_answers_json_valid_against_the_schema_and_reruns_from_cache(llm_server, proxy, tmp_path):
    endpoint = endpoint_via(proxy, llm_server)
    settings = LLMConfig(models=[endpoint], cache_dir=str(tmp_path / "cache"))
    requests = sums(3)
    results = LLMClient(settings).complete_json(requests, "gemma-proxied")
    assert [r.request_id for r in results] == [r.request_id for r in requests]
    for result in results:
        assert result.error is None, (result.error, result.detail)
        jsonschema.validate(result.data, SCHEMA)
        assert not result.cached and result.prompt_tokens > 0 and result.completion_tokens > 0
    sent = [messages_fingerprint(build_body(endpoint, r)["messages"]) for r in requests]
    assert [proxy.answered[fp] for fp in sent] == [1, 1, 1]
    calls = proxy.route_count("POST /v1/chat/completions")
    # The gemma chat format drops system messages: the client folded it into the user message.
    assert all(m["role"] != "system" for m in build_body(endpoint, requests[0])["messages"])

    rerun = LLMClient(settings)  # a new process would see the same: the cache is on disk
    again = rerun.complete_json(requests, "gemma-proxied")
    assert [r.data for r in again] == [r.data for r in results] and all(r.cached for r in again)
    assert proxy.route_count("POST /v1/chat/completions") == calls  # no HTTP call the second time
    usage = rerun.usage()["gemma-proxied"]
    assert usage == {**usage, "requests": 3, "cached": 3, "http_calls": 0, "prompt_tokens": 0, "failed": 0}


def test_requests_run_concurrently_up_to_the_limit(llm_server, proxy, tmp_path):
    endpoint = endpoint_via(proxy, llm_server, max_concurrency=3)
    client = LLMClient(LLMConfig(models=[endpoint], cache_dir=str(tmp_path / "cache")))
    results = client.complete_json(sums(4, start=10), "gemma-proxied", progress="concurrency")
    assert all(r.data is not None for r in results), [(r.error, r.detail) for r in results]
    assert 2 <= proxy.peak_in_flight <= 3


def test_direct_endpoint_without_proxy(llm_server, tmp_path):
    client = LLMClient(LLMConfig(models=[llm_server.endpoint()], cache_dir=str(tmp_path / "cache")))
    [result] = client.complete_json(sums(1, start=40), "gemma-local")
    assert result.error is None and jsonschema.validate(result.data, SCHEMA) is None


BATCH_SCRIPT = """
import json, sys
from ratio_spark.llm import ChatRequest, LLMClient, LLMConfig
settings = LLMConfig.model_validate_json(open(sys.argv[1]).read())
requests = [ChatRequest(**r) for r in json.load(open(sys.argv[2]))]
LLMClient(settings).run_batch(requests, settings.models[0].name, state_dir=sys.argv[3], poll_interval_s=0.1)
"""


def test_batch_api_path_resumes_an_interrupted_batch_and_never_writes_the_key(llm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("RATIO_SPARK_TEST_KEY", SECRET)
    standin = BatchStandIn(upstream=llm_server.base_url)
    standin.hold.set()  # the batch stays in_progress until released
    try:
        endpoint = endpoint_via(standin, llm_server, name="gemma-batch", api_key_env="RATIO_SPARK_TEST_KEY")
        settings = LLMConfig(models=[endpoint], cache_dir=str(tmp_path / "cache"))
        requests = sums(3, start=20)
        state_dir = tmp_path / "batch-state"
        (tmp_path / "settings.json").write_text(settings.model_dump_json())
        (tmp_path / "requests.json").write_text(json.dumps(
            [{"request_id": r.request_id, "messages": list(r.messages), "schema": r.schema, "max_tokens": r.max_tokens}
             for r in requests]))
        # 1. A separate process submits the batch and polls; it is SIGKILLed while the batch runs.
        proc = subprocess.Popen(
            [sys.executable, "-c", BATCH_SCRIPT, str(tmp_path / "settings.json"), str(tmp_path / "requests.json"),
             str(state_dir)],
            env={**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT)}, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = json.loads((state_dir / "state.json").read_text()) if (state_dir / "state.json").exists() else {}
            if state.get("batches") and state["batches"][0]["batch_id"] and standin.route_count("GET /v1/batches/") >= 2:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.1)
        else:
            pytest.fail("the batch was not submitted within 60 s")
        proc.kill()
        proc.wait()
        assert standin.route_count("POST /v1/files") == 1 and standin.route_count("POST /v1/batches") == 1
        assert not standin.answered  # nothing answered yet: the batch is held

        # 2. The rerun picks up the running batch: no new upload, no new batch.
        standin.release()
        client = LLMClient(settings)
        results = client.run_batch(requests, "gemma-batch", state_dir=state_dir, poll_interval_s=0.2)
        for result in results:
            assert result.error is None, (result.error, result.detail)
            jsonschema.validate(result.data, SCHEMA)
            assert not result.cached
        assert standin.route_count("POST /v1/files") == 1 and standin.route_count("POST /v1/batches") == 1
        sent = [messages_fingerprint(build_body(endpoint, r)["messages"]) for r in requests]
        assert [standin.answered[fp] for fp in sent] == [1, 1, 1]
        usage = client.usage()["gemma-batch"]
        assert usage["batch_requests"] == 3 and usage["batch_prompt_tokens"] > 0 and usage["failed"] == 0

        # 3. A third run is served from the cache without touching the Batch API.
        calls_before = sum(standin.routes.values())
        again = LLMClient(settings).run_batch(requests, "gemma-batch", state_dir=state_dir, poll_interval_s=0.2)
        assert all(r.cached for r in again) and [r.data for r in again] == [r.data for r in results]
        assert sum(standin.routes.values()) == calls_before

        # The key was sent to the server, and is nowhere on disk.
        assert standin.auth_headers == {f"Bearer {SECRET}"}
        client.close()
        written = [p for p in tmp_path.rglob("*") if p.is_file() and p.parent != tmp_path]
        assert any(p.name == "answers.sqlite" for p in written) and any(p.name == "state.json" for p in written)
        for path in written:
            assert SECRET.encode() not in path.read_bytes(), path
    finally:
        standin.close()


def test_server_killed_mid_run_loses_nothing_and_answers_each_request_once(llm_server, tmp_path):
    """The session's server is SIGKILLed mid-run and started again on the same port (as the silver judge's
    crash test does), so no second model is loaded."""
    server = llm_server
    standin = BatchStandIn(upstream=server.base_url)
    try:
        endpoint = endpoint_via(standin, server, name="gemma-crash", max_concurrency=2, max_retries=1,
                                retry_backoff_s=0.05)
        settings = LLMConfig(models=[endpoint], cache_dir=str(tmp_path / "cache"))
        requests = sums(5, start=30)
        client = LLMClient(settings)
        first: list = []
        worker = threading.Thread(target=lambda: first.extend(client.complete_json(requests, "gemma-crash")))
        worker.start()
        deadline = time.monotonic() + 300
        while client.cache.count() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()  # SIGKILL mid-run: in-flight and queued requests fail
        worker.join(timeout=300)
        answered_first = [r.data is not None for r in first]
        assert 2 <= sum(answered_first) < len(requests), [(r.error, r.detail) for r in first]
        assert {r.error for r in first if r.data is None} <= {"http_502", "connection_error"}
        assert client.cache.count() == sum(answered_first)  # every answer that arrived was kept

        server.start()  # same port, so the same endpoint and cache keys
        second = LLMClient(settings).complete_json(requests, "gemma-crash")
        assert all(r.data is not None for r in second), [(r.error, r.detail) for r in second]
        assert [r.cached for r in second] == answered_first  # only the lost ones were asked again
        for before, after in zip(first, second):
            if before.data is not None:
                assert after.data == before.data
        sent = [messages_fingerprint(build_body(endpoint, r)["messages"]) for r in requests]
        assert [standin.answered[fp] for fp in sent] == [1] * len(requests)  # each answered exactly once
        assert client.cache.count() == len(requests)
    finally:
        standin.close()
        if not server.running:
            server.start()  # the session's server, for the tests after this one
