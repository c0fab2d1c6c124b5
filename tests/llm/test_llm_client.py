"""Unit tests of the LLM client's policies: transient-error retries with backoff, re-asking on invalid
JSON, the cache, request building, settings validation.

Why a mocked transport (``httpx.MockTransport`` handed to the ``openai`` SDK as its ``http_client``):
these tests need a server that returns a 503, a 429 with Retry-After, a dropped connection or a
malformed answer *on demand*, and a real model cannot be made to fail that way. Everything that a
real server can show (JSON-constrained answers, concurrency, the Batch API path, a server killed
mid-run) is tested against the real llama.cpp server in tests/llm/test_llm_integration.py.
"""

from __future__ import annotations

import json

import httpx
import pytest
from pydantic import ValidationError

from ratio_spark.llm import ChatRequest, LLMClient, LLMConfig, LLMError, ModelEndpoint
from ratio_spark.llm.requests import build_body, fold_system_messages

SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["label"],
}
SECRET = "sk-unit-test-SECRET-0f9e8d7c"


def completion(content: str, prompt_tokens: int = 11, completion_tokens: int = 3, finish_reason: str = "stop") -> dict:
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class Scripted:
    """A transport handler that plays a script of responses and records every request body."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.bodies: list[dict] = []
        self.headers: list[httpx.Headers] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return step(request)
        return step


def ok(content: str = '{"label": "yes"}', **kw) -> httpx.Response:
    return httpx.Response(200, json=completion(content, **kw))


def status(code: int, headers: dict | None = None) -> httpx.Response:
    return httpx.Response(code, json={"error": {"message": f"status {code}", "type": "x"}}, headers=headers or {})


def make_client(tmp_path, handler, monkeypatch=None, sleeps=None, **endpoint_kw) -> LLMClient:
    if monkeypatch is not None:
        monkeypatch.setenv("RATIO_SPARK_UNIT_KEY", SECRET)
    defaults = dict(name="mock", model="m", base_url="http://mock.invalid/v1", api_key_env="RATIO_SPARK_UNIT_KEY",
                    max_retries=3, retry_backoff_s=0.5, max_concurrency=2)
    defaults.update(endpoint_kw)
    settings = LLMConfig(models=[ModelEndpoint(**defaults)], cache_dir=str(tmp_path / "cache"))
    record = sleeps if sleeps is not None else []
    return LLMClient(settings, http_client=httpx.Client(transport=httpx.MockTransport(handler)), sleep=record.append)


def req(i: int = 0, **kw) -> ChatRequest:
    return ChatRequest(request_id=f"r{i}", messages=[{"role": "user", "content": f"question {i}"}], schema=SCHEMA, **kw)


# ------------------------------------------------------------------------------------------- retries


def test_transient_errors_are_retried_with_growing_backoff(tmp_path):
    handler = Scripted(status(503), status(500), ok())
    sleeps: list[float] = []
    client = make_client(tmp_path, handler, sleeps=sleeps)
    [result] = client.complete_json([req()], "mock")
    assert result.data == {"label": "yes"} and result.error is None
    assert len(handler.bodies) == 3
    assert len(sleeps) == 2 and 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0
    usage = client.usage()["mock"]
    assert usage["http_calls"] == 3 and usage["retries"] == 2 and usage["failed"] == 0


def test_rate_limit_honours_retry_after(tmp_path):
    handler = Scripted(status(429, {"retry-after": "7"}), ok())
    sleeps: list[float] = []
    client = make_client(tmp_path, handler, sleeps=sleeps)
    [result] = client.complete_json([req()], "mock")
    assert result.data == {"label": "yes"}
    assert sleeps == [7.0]


def test_connection_errors_give_up_after_max_retries_and_are_not_cached(tmp_path):
    handler = Scripted(httpx.ConnectError("refused"))
    sleeps: list[float] = []
    client = make_client(tmp_path, handler, sleeps=sleeps, max_retries=2)
    [result] = client.complete_json([req()], "mock")
    assert result.data is None and result.error == "connection_error"
    assert len(handler.bodies) == 3 and len(sleeps) == 2
    assert client.cache.count() == 0
    assert client.usage()["mock"]["failed"] == 1
    # The next run asks again (errors are not cached) and succeeds.
    handler.steps = [ok()]
    [again] = client.complete_json([req()], "mock")
    assert again.data == {"label": "yes"} and not again.cached


def test_timeouts_are_transient(tmp_path):
    handler = Scripted(httpx.ReadTimeout("slow"), ok())
    client = make_client(tmp_path, handler)
    [result] = client.complete_json([req()], "mock")
    assert result.data == {"label": "yes"} and len(handler.bodies) == 2


def test_client_errors_are_not_retried(tmp_path):
    handler = Scripted(status(400))
    client = make_client(tmp_path, handler)
    [result] = client.complete_json([req()], "mock")
    assert result.error == "http_400" and "status 400" in result.detail
    assert len(handler.bodies) == 1


def test_sdk_retries_are_off(tmp_path):
    client = make_client(tmp_path, Scripted(ok()))
    assert client.sdk(client.endpoint("mock")).max_retries == 0


# ------------------------------------------------------------------------------------------- re-ask


def test_invalid_answers_are_re_asked_with_the_reason(tmp_path):
    handler = Scripted(ok("this is not json"), ok('{"label": "maybe"}'), ok('```json\n{"label": "no"}\n```'))
    client = make_client(tmp_path, handler, max_invalid_retries=2)
    [result] = client.complete_json([req()], "mock")
    assert result.data == {"label": "no"} and result.error is None
    assert len(handler.bodies) == 3
    second, third = handler.bodies[1]["messages"], handler.bodies[2]["messages"]
    assert second[1] == {"role": "assistant", "content": "this is not json"}
    assert "not valid JSON" in second[2]["content"]
    assert third[3]["content"] == '{"label": "maybe"}' and "'maybe' is not one of" in third[4]["content"]
    assert result.prompt_tokens == 33 and result.completion_tokens == 9  # all three calls
    assert client.usage()["mock"]["invalid_retries"] == 2


def test_truncated_answers_say_so(tmp_path):
    handler = Scripted(ok('{"label": "ye', finish_reason="length"))
    client = make_client(tmp_path, handler, max_invalid_retries=1)
    [result] = client.complete_json([req(max_tokens=5)], "mock")
    assert result.error == "truncated" and "max_tokens=5" in result.detail
    assert len(handler.bodies) == 2


def test_re_asking_is_bounded(tmp_path):
    handler = Scripted(ok('{"label": "maybe"}'))
    client = make_client(tmp_path, handler, max_invalid_retries=1)
    [result] = client.complete_json([req()], "mock")
    assert result.data is None and result.error == "schema_mismatch"
    assert len(handler.bodies) == 2
    assert client.cache.count() == 0


# ------------------------------------------------------------------------------------------- cache


def test_cache_hit_makes_no_http_call(tmp_path):
    handler = Scripted(ok())
    client = make_client(tmp_path, handler)
    first = client.complete_json([req(0), req(1)], "mock")
    assert [r.cached for r in first] == [False, False] and len(handler.bodies) == 2
    # A new client on the same cache folder (a rerun) pays nothing.
    handler.steps = [status(500)]
    rerun = make_client(tmp_path, handler)
    second = rerun.complete_json([req(1), req(0)], "mock")
    assert [r.request_id for r in second] == ["r1", "r0"]
    assert all(r.cached and r.data == {"label": "yes"} for r in second)
    assert len(handler.bodies) == 2
    usage = rerun.usage()["mock"]
    assert usage["requests"] == 2 and usage["cached"] == 2 and usage["http_calls"] == 0 and usage["prompt_tokens"] == 0


def test_cache_key_covers_the_whole_request(tmp_path):
    handler = Scripted(ok())
    client = make_client(tmp_path, handler)
    client.complete_json([req(0)], "mock")
    client.complete_json([req(0, max_tokens=99)], "mock")  # another max_tokens: another request
    other_schema = ChatRequest("r0", [{"role": "user", "content": "question 0"}], {**SCHEMA, "title": "x"})
    client.complete_json([other_schema], "mock")
    assert len(handler.bodies) == 3
    client.complete_json([req(0), req(0, max_tokens=99), other_schema], "mock")
    assert len(handler.bodies) == 3


def test_cache_identity_replaces_the_server_url_in_the_key(tmp_path):
    """The same model reached at another address (a local server on another port) answers from the cache
    when the endpoint names it by cache_identity; without it, another base_url is another request."""
    handler = Scripted(ok())
    make_client(tmp_path, handler, base_url="http://127.0.0.1:1111/v1", cache_identity="llama.cpp:w").complete_json(
        [req(0)], "mock")
    make_client(tmp_path, handler, base_url="http://127.0.0.1:2222/v1", cache_identity="llama.cpp:w").complete_json(
        [req(0)], "mock")
    assert len(handler.bodies) == 1
    make_client(tmp_path, handler, base_url="http://127.0.0.1:2222/v1", cache_identity="llama.cpp:other").complete_json(
        [req(0)], "mock")
    make_client(tmp_path, handler, base_url="http://127.0.0.1:2222/v1").complete_json([req(0)], "mock")
    assert len(handler.bodies) == 3


def test_local_server_cache_identity_names_the_weights_not_the_port(tmp_path):
    from ratio_spark.llm.local_server import LocalLlamaServer

    a, b = LocalLlamaServer(port=1111).endpoint(), LocalLlamaServer(port=2222).endpoint()
    assert a.base_url != b.base_url and a.cache_identity == b.cache_identity
    weights = tmp_path / "other.gguf"
    weights.write_bytes(b"x" * 10)
    assert LocalLlamaServer(model_path=weights, port=1111).endpoint().cache_identity != a.cache_identity
    assert LocalLlamaServer(port=1111, chat_format="chatml").endpoint().cache_identity != a.cache_identity


def test_identical_requests_in_one_call_are_asked_once(tmp_path):
    handler = Scripted(ok())
    client = make_client(tmp_path, handler)
    a = req(0)
    b = ChatRequest("other-id", a.messages, a.schema)
    results = client.complete_json([a, b], "mock")
    assert len(handler.bodies) == 1
    assert [r.request_id for r in results] == ["r0", "other-id"] and results[1].data == {"label": "yes"}


def test_api_key_is_sent_but_never_written(tmp_path, monkeypatch):
    handler = Scripted(ok())
    client = make_client(tmp_path, handler, monkeypatch=monkeypatch)
    client.complete_json([req(0), req(1)], "mock")
    assert handler.headers[0]["authorization"] == f"Bearer {SECRET}"
    client.close()
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path


def test_openai_endpoint_without_key_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("RATIO_SPARK_MISSING_KEY", raising=False)
    client = make_client(tmp_path, Scripted(ok()), base_url=None, api_key_env="RATIO_SPARK_MISSING_KEY")
    with pytest.raises(LLMError, match="RATIO_SPARK_MISSING_KEY is not set"):
        client.complete_json([req()], "mock")


def test_unknown_endpoint_and_bad_schema_are_clear_errors(tmp_path):
    client = make_client(tmp_path, Scripted(ok()))
    with pytest.raises(LLMError, match="unknown LLM endpoint 'nope'; known: mock"):
        client.complete_json([req()], "nope")
    with pytest.raises(LLMError, match="invalid JSON schema"):
        client.complete_json([ChatRequest("x", [{"role": "user", "content": "q"}], {"type": "nonsense"})], "mock")


# ------------------------------------------------------------------------------------------- requests


def test_fold_system_prompt_moves_the_system_text_into_the_first_user_message():
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
    folded = fold_system_messages(messages)
    assert folded[0] == {"role": "user", "content": "Be terse.\n\nHi"} and len(folded) == 3
    assert messages[1]["content"] == "Hi"  # the caller's messages are untouched
    endpoint = ModelEndpoint(name="g", model="g", base_url="http://x/v1", fold_system_prompt=True,
                             json_mode="json_object_schema")
    body = build_body(endpoint, ChatRequest("r", messages, SCHEMA, max_tokens=9))
    assert all(m["role"] != "system" for m in body["messages"])
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert body["max_tokens"] == 9 and body["temperature"] == 0.0


def test_json_modes_and_endpoint_options_shape_the_body():
    request = ChatRequest("r", [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], SCHEMA)
    structured = build_body(ModelEndpoint(name="o", model="gpt"), request)
    assert structured["response_format"]["type"] == "json_schema"
    assert structured["response_format"]["json_schema"]["schema"] == SCHEMA
    assert structured["messages"][0]["role"] == "system"
    plain = build_body(ModelEndpoint(name="o", model="gpt", json_mode="json_object", temperature=None,
                                     max_tokens_param="max_completion_tokens", extra_body={"reasoning_effort": "low"}),
                       request)
    assert plain["response_format"] == {"type": "json_object"}
    assert "JSON schema" in plain["messages"][-1]["content"] and '"enum"' in plain["messages"][-1]["content"]
    assert "temperature" not in plain and plain["max_completion_tokens"] == 256 and plain["reasoning_effort"] == "low"


def test_extra_body_reaches_the_server(tmp_path):
    handler = Scripted(ok())
    client = make_client(tmp_path, handler, extra_body={"reasoning_effort": "medium"}, temperature=None)
    client.complete_json([req()], "mock")
    assert handler.bodies[0]["reasoning_effort"] == "medium" and "temperature" not in handler.bodies[0]


def test_concurrency_is_bounded(tmp_path):
    import threading
    import time

    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def slow(request):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return ok()

    client = make_client(tmp_path, Scripted(slow), max_concurrency=3)
    results = client.complete_json([req(i) for i in range(12)], "mock")
    assert all(r.data for r in results)
    assert state["peak"] == 3


# ------------------------------------------------------------------------------------------- settings


def test_settings_reject_duplicates_keys_and_typos():
    with pytest.raises(ValidationError, match="unique"):
        LLMConfig(models=[ModelEndpoint(name="a", model="x"), ModelEndpoint(name="a", model="y")])
    with pytest.raises(ValidationError, match="NAME of an environment variable"):
        ModelEndpoint(name="a", model="x", api_key_env="sk-abc123")
    with pytest.raises(ValidationError, match="extra"):
        ModelEndpoint(name="a", model="x", api_key="sk-abc")
    with pytest.raises(ValidationError, match="base_url"):
        ModelEndpoint(name="a", model="x", base_url="localhost:8080")


def test_usage_report_prices_sync_and_batch_tokens(tmp_path):
    handler = Scripted(ok(prompt_tokens=1_000_000, completion_tokens=500_000))
    client = make_client(tmp_path, handler, input_usd_per_mtok=2.0, output_usd_per_mtok=8.0)
    client.complete_json([req()], "mock")
    assert client.cost_usd("mock") == pytest.approx(2.0 + 4.0)
    report = client.usage_report()
    assert "mock" in report and "6.0000" in report


# ------------------------------------------------------------------------------------------- batch policies


def test_batch_ingests_errors_re_asks_invalid_answers_and_resends_failures(tmp_path):
    """The Batch API stand-in (tests/llm_standin.py) with scripted answers instead of a model: a real
    model will not return invalid JSON or a failed line on demand."""
    from ratio_spark.llm import BatchNotFinished
    from llm_standin import BatchStandIn

    flaky = {"question 2": True}

    def replay(body):
        text = body["messages"][0]["content"]
        if text == "question 1" and len(body["messages"]) == 1:
            return 200, completion("not json at all")
        if text == "question 2" and flaky["question 2"]:
            return 500, {"error": {"message": "boom", "type": "server_error"}}
        return 200, completion('{"label": "yes"}')

    standin = BatchStandIn(replay=replay)
    try:
        settings = LLMConfig(models=[ModelEndpoint(name="b", model="m", base_url=standin.base_url,
                                                   api_key_env="RATIO_SPARK_UNIT_KEY", retry_backoff_s=0)],
                             cache_dir=str(tmp_path / "cache"))
        client = LLMClient(settings)
        state_dir = tmp_path / "state"
        results = client.run_batch([req(0), req(1), req(2)], "b", state_dir=state_dir, poll_interval_s=0.05)
        assert [r.error for r in results] == [None, None, "http_500"]
        assert results[1].data == {"label": "yes"}
        assert standin.route_count("POST /v1/chat/completions") == 1  # the one synchronous re-ask
        usage = client.usage()["b"]
        assert usage["batch_requests"] == 2 and usage["invalid_retries"] == 1 and usage["failed"] == 1
        state = json.loads((state_dir / "state.json").read_text())
        assert [b["ingested"] for b in state["batches"]] == [True]

        flaky["question 2"] = False
        again = client.run_batch([req(0), req(1), req(2)], "b", state_dir=state_dir, poll_interval_s=0.05)
        assert [r.cached for r in again] == [True, True, False] and all(r.data for r in again)
        assert standin.route_count("POST /v1/batches") == 2  # only the failed request went out again
        assert len(json.loads((state_dir / "state.json").read_text())["batches"]) == 2

        standin.hold.set()
        with pytest.raises(BatchNotFinished, match="run again with the same state_dir"):
            client.run_batch([req(5)], "b", state_dir=state_dir, poll_interval_s=0.05, max_wait_s=0.2)
        standin.release()
        [late] = client.run_batch([req(5)], "b", state_dir=state_dir, poll_interval_s=0.05)
        assert late.data == {"label": "yes"} and standin.route_count("POST /v1/batches") == 3
    finally:
        standin.close()


def test_batch_state_folder_admits_one_run_at_a_time(tmp_path):
    import fcntl

    state_dir = tmp_path / "state"
    state_dir.mkdir()
    with open(state_dir / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        client = make_client(tmp_path, Scripted(ok()))
        with pytest.raises(LLMError, match="another run is using the batch state folder"):
            client.run_batch([req()], "mock", state_dir=state_dir)


def test_raw_control_characters_inside_strings_are_accepted():
    from ratio_spark.llm.requests import Validators, parse_answer

    validator = Validators().get({"type": "object", "properties": {"reason": {"type": "string"}}})
    assert parse_answer('{"reason": "two\nlines\tand a tab"}', validator) == ({"reason": "two\nlines\tand a tab"}, None, None)
    assert parse_answer('{"reason": "cut', validator)[1] == "invalid_json"
