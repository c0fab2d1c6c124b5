"""The LLM client's own overhead, and the local test server's latency.

    PYTHONPATH=. .venv/bin/python benchmarks/llm_client_overhead.py [--n 2000] [--local 6]

1. Client overhead without a model: N requests answered at once by an in-process transport
   (httpx.MockTransport; no network, no model), at concurrency 8: SDK call, JSON-schema validation
   and one sqlite commit per answer. Then the same N requests again, all from the cache.
2. With --local K: K requests to the real local llama.cpp server (gemma 3 270M), at concurrency 1 and 2
   (distinct prompts, so nothing is cached), latency per answer.
Prints a Markdown table (docs/llm.md quotes it with the machine's load average).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import httpx

from ratio_spark.llm import ChatRequest, LLMClient, LLMConfig, ModelEndpoint

SCHEMA = {"type": "object", "properties": {"label": {"type": "string", "enum": ["yes", "no"]},
                                           "reason": {"type": "string", "maxLength": 60}},
          "required": ["label", "reason"]}
ANSWER = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": '{"label": "yes", "reason": "fine"}'}}],
          "usage": {"prompt_tokens": 300, "completion_tokens": 12, "total_tokens": 312}}


def requests(n: int, tag: str) -> list[ChatRequest]:
    return [ChatRequest(f"{tag}{i}", [{"role": "system", "content": "Judge the pair. " * 20},
                                      {"role": "user", "content": f"Query {i}. Marker. Gold {i}. {tag}"}], SCHEMA, 128)
            for i in range(n)]


def client_overhead(n: int) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        endpoint = ModelEndpoint(name="instant", model="m", base_url="http://instant.invalid/v1", max_concurrency=8)
        http = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=ANSWER)))
        client = LLMClient(LLMConfig(models=[endpoint], cache_dir=tmp), http_client=http)
        batch = requests(n, "overhead")
        start = time.perf_counter()
        fresh = client.complete_json(batch, "instant")
        cold = time.perf_counter() - start
        start = time.perf_counter()
        cached = LLMClient(LLMConfig(models=[endpoint], cache_dir=tmp)).complete_json(batch, "instant")
        warm = time.perf_counter() - start
        assert all(r.data for r in fresh) and all(r.cached for r in cached)
        return [(f"{n} requests, instant in-process transport, concurrency 8", f"{cold:.2f} s ({n / cold:,.0f} req/s)"),
                (f"the same {n} requests again, all from the cache", f"{warm:.2f} s ({n / warm:,.0f} req/s)")]


def local_latency(k: int) -> list[tuple[str, str]]:
    from ratio_spark.llm.local_server import LocalLlamaServer

    rows = []
    with LocalLlamaServer() as server, tempfile.TemporaryDirectory() as tmp:
        for concurrency in (1, 2):
            endpoint = server.endpoint().model_copy(update={"max_concurrency": concurrency})
            client = LLMClient(LLMConfig(models=[endpoint], cache_dir=tmp))
            batch = requests(k, f"local-c{concurrency}-")
            start = time.perf_counter()
            failed = [r.error for r in client.complete_json(batch, endpoint.name) if r.error]
            total = time.perf_counter() - start
            usage = client.usage()[endpoint.name]
            rows.append((f"{k} requests to the local gemma 3 270M server ({server.n_threads} thread), concurrency {concurrency}",
                         f"{total:.1f} s, {total / k:.1f} s per answer, {usage['prompt_tokens'] // k} prompt + "
                         f"{usage['completion_tokens'] // k} completion tokens each, {usage['http_calls']} HTTP calls"
                         + (f", failed: {failed}" if failed else "")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--local", type=int, default=0)
    args = parser.parse_args()
    rows = client_overhead(args.n)
    if args.local:
        rows += local_latency(args.local)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| measurement | result |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print("\n" + json.dumps(dict(rows), indent=1))


if __name__ == "__main__":
    main()
