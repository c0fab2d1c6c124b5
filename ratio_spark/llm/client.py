"""The project's one LLM client: JSON answers from any OpenAI-compatible endpoint, cached on disk.

Every LLM use (lexicon generation and labelling, the silver judge, reranking) goes through
``LLMClient.complete_json`` (synchronous calls, bounded concurrency) or ``LLMClient.run_batch``
(OpenAI's Batch API, half the price, hours of latency). Both share one policy:

- the answer must parse as JSON and validate against the request's schema; otherwise the model is
  re-asked with the validation error, at most ``max_invalid_retries`` times;
- transient failures (connection, timeout, 429, 5xx) are retried by ``tenacity`` with exponential backoff
  and jitter (at least a 429's Retry-After), at most ``max_retries`` times; the SDK's own retries are off,
  so this is the only policy and every retry is counted;
- every valid answer is committed to the sqlite cache the moment it arrives, keyed by the full
  request, so a killed run loses only what was in flight and a rerun pays only for what is missing;
- one bad request becomes ``ChatResult.error``; nothing raises for it, nothing is cached for it;
- the API key is read from the environment when the endpoint is first used and is never logged,
  stored in settings, cache rows or batch state files.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from ratio_spark.llm.batch import BatchRunner
from ratio_spark.llm.cache import AnswerCache
from ratio_spark.llm.requests import (
    USAGE_FIELDS,
    ChatRequest,
    ChatResult,
    LLMError,
    PreparedRequest,
    ToolChatRequest,
    ToolChatResult,
    Validators,
    build_body,
    build_tool_body,
    cache_key,
    parse_answer,
    reask_message,
)
from ratio_spark.llm.settings import LLMConfig, ModelEndpoint

# ---------------------------------------------------------------------------------------------- client


class LLMClient:
    """JSON answers from named endpoints, with retries, a concurrency limit, an on-disk cache and usage."""

    def __init__(
        self,
        settings: LLMConfig,
        *,
        http_client=None,  # an httpx.Client for every endpoint (tests pass one with a MockTransport)
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.settings = settings
        self._endpoints = {m.name: m for m in settings.models}
        self.cache = AnswerCache(Path(settings.cache_dir).expanduser() / "answers.sqlite")
        self._http_client = http_client
        self.sleep = sleep  # time.sleep; tests pass a fake clock
        self._sdk_clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._usage: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(USAGE_FIELDS, 0))
        self._validators = Validators()

    # -- endpoints and the SDK

    def endpoint(self, name: str) -> ModelEndpoint:
        try:
            return self._endpoints[name]
        except KeyError:
            known = ", ".join(sorted(self._endpoints)) or "none configured (add them under llm.models)"
            raise LLMError(f"unknown LLM endpoint {name!r}; known: {known}") from None

    def sdk(self, endpoint: ModelEndpoint):
        """The ``openai.OpenAI`` client of an endpoint (built on first use; SDK retries off)."""
        with self._lock:
            if endpoint.name not in self._sdk_clients:
                import openai

                key = os.environ.get(endpoint.api_key_env)
                if not key:
                    if endpoint.base_url is None:
                        raise LLMError(
                            f"endpoint {endpoint.name!r} calls OpenAI but the environment variable "
                            f"{endpoint.api_key_env} is not set"
                        )
                    key = "no-key"  # local servers (llama.cpp, vLLM without --api-key) ignore it
                self._sdk_clients[endpoint.name] = openai.OpenAI(
                    api_key=key, base_url=endpoint.base_url, max_retries=0,
                    timeout=endpoint.timeout_s, http_client=self._http_client,
                )
            return self._sdk_clients[endpoint.name]

    # -- usage

    def count_usage(self, name: str, **deltas: int) -> None:
        """Add ``deltas`` (fields of ``USAGE_FIELDS``) to an endpoint's usage; thread-safe."""
        with self._lock:
            row = self._usage[name]
            for key, value in deltas.items():
                row[key] += int(value)

    def usage(self) -> dict[str, dict[str, int]]:
        """Per endpoint name: requests, cached, failed, prompt_tokens, completion_tokens (tokens spent by
        this client, sync and batch together), plus http_calls, retries, invalid_retries, batch_requests,
        batch_prompt_tokens, batch_completion_tokens."""
        with self._lock:
            return {name: dict(row) for name, row in self._usage.items()}

    def cost_usd(self, name: str) -> float | None:
        """Estimated spend of this client on one endpoint, or None when the endpoint has no prices."""
        endpoint = self.endpoint(name)
        if endpoint.input_usd_per_mtok is None or endpoint.output_usd_per_mtok is None:
            return None
        row = self.usage().get(name, dict.fromkeys(USAGE_FIELDS, 0))
        sync_in = row["prompt_tokens"] - row["batch_prompt_tokens"]
        sync_out = row["completion_tokens"] - row["batch_completion_tokens"]
        price = lambda tin, tout: (tin * endpoint.input_usd_per_mtok + tout * endpoint.output_usd_per_mtok) / 1e6  # noqa: E731
        return price(sync_in, sync_out) + endpoint.batch_discount * price(row["batch_prompt_tokens"], row["batch_completion_tokens"])

    def usage_report(self) -> str:
        """A small table of usage (and cost, where the endpoint has prices) for the end of a run."""
        lines = [f"{'endpoint':<24} {'requests':>8} {'cached':>7} {'failed':>6} {'http':>6} {'retries':>7} "
                 f"{'re-asks':>7} {'prompt tok':>11} {'compl tok':>10} {'cost USD':>9}"]
        for name, row in sorted(self.usage().items()):
            cost = self.cost_usd(name) if name in self._endpoints else None
            lines.append(
                f"{name:<24} {row['requests']:>8} {row['cached']:>7} {row['failed']:>6} {row['http_calls']:>6} "
                f"{row['retries']:>7} {row['invalid_retries']:>7} {row['prompt_tokens']:>11} "
                f"{row['completion_tokens']:>10} {('%.4f' % cost) if cost is not None else '-':>9}"
            )
        return "\n".join(lines)

    # -- preparing requests

    def prepare(self, requests: Iterable[ChatRequest], endpoint: ModelEndpoint) -> list[PreparedRequest]:
        prepared = []
        for request in requests:
            if not isinstance(request, ChatRequest):
                raise LLMError(f"expected ChatRequest, got {type(request).__name__}")
            self._validators.get(request.schema)
            body = build_body(endpoint, request)
            prepared.append(PreparedRequest(request, body, cache_key(endpoint, body)))
        return prepared

    def validator(self, schema: dict):
        return self._validators.get(schema)

    # -- one HTTP call with the transient-error policy

    def _backoff(self, endpoint: ModelEndpoint, attempt: int, retry_after: float | None) -> float:
        delay = min(endpoint.retry_backoff_max_s, endpoint.retry_backoff_s * (2**attempt))
        delay *= 0.5 + random.random() / 2
        if retry_after is not None:
            delay = max(delay, min(retry_after, endpoint.retry_backoff_max_s))
        return delay

    def call_with_retries(self, endpoint: ModelEndpoint, fn: Callable[[], Any]) -> tuple[Any, str | None, str | None]:
        """Run ``fn`` (one API call) under the transient-error policy (tenacity): (result, error, detail)."""
        import openai
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

        def attempt() -> Any:
            self.count_usage(endpoint.name, http_calls=1)
            return fn()

        retrying = Retrying(
            # APITimeoutError is an APIConnectionError; InternalServerError is any 5xx. Other errors are final.
            retry=retry_if_exception_type((openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)),
            stop=stop_after_attempt(endpoint.max_retries + 1),
            wait=lambda state: self._backoff(endpoint, state.attempt_number - 1, _retry_after(state.outcome.exception())),
            sleep=self.sleep,
            before_sleep=lambda state: self.count_usage(endpoint.name, retries=1),
            reraise=True,
        )
        try:
            return retrying(attempt), None, None
        except openai.APITimeoutError:
            return None, "timeout", f"no answer within {endpoint.timeout_s}s"
        except openai.APIConnectionError as exc:
            return None, "connection_error", str(exc)
        except openai.APIStatusError as exc:  # 429 and 5xx after the retries; 400, 401, 404 at once
            return None, f"http_{exc.status_code}", _status_detail(exc)
        except openai.APIError as exc:  # e.g. a body that is not a chat completion
            return None, "api_error", str(exc)[:300]

    def _send(self, endpoint: ModelEndpoint, body: dict[str, Any]):
        client = self.sdk(endpoint)
        standard = {"model", "messages", "response_format", "temperature", "max_tokens", "max_completion_tokens",
                    "tools", "tool_choice"}
        kwargs = {k: v for k, v in body.items() if k in standard}
        extra = {k: v for k, v in body.items() if k not in standard}
        return self.call_with_retries(
            endpoint, lambda: client.chat.completions.create(**kwargs, extra_body=extra or None)
        )

    # -- one request: send, validate, re-ask, cache

    def ask(self, endpoint: ModelEndpoint, prepared: PreparedRequest, *, first_answer: str | None = None,
            first_finish_reason: str | None = None, tokens: tuple[int, int] = (0, 0), via: str = "sync") -> ChatResult:
        """Answer one prepared request (``first_answer``: an invalid answer already received, e.g. from a
        batch, to re-ask from). Valid answers are committed to the cache before returning."""
        request, body = prepared.request, prepared.body
        validator = self._validators.get(request.schema)
        messages = list(body["messages"])
        prompt_tokens, completion_tokens = tokens
        error = detail = None
        pending_answer = first_answer
        for attempt in range(endpoint.max_invalid_retries + 1):
            if pending_answer is None:
                response, error, detail = self._send(endpoint, {**body, "messages": messages})
                if error:
                    break
                if response.usage is not None:
                    pt, ct = response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0
                    prompt_tokens, completion_tokens = prompt_tokens + pt, completion_tokens + ct
                    self.count_usage(endpoint.name, prompt_tokens=pt, completion_tokens=ct)
                if not response.choices:
                    error, detail = "empty_response", "the server returned no choices"
                    break
                content = response.choices[0].message.content
                finish_reason = response.choices[0].finish_reason
            else:
                content, pending_answer, finish_reason = pending_answer, None, first_finish_reason
            data, error, detail = parse_answer(content, validator)
            if data is None and finish_reason == "length":
                error, detail = "truncated", f"the answer hit max_tokens={request.max_tokens} ({detail})"
            if data is not None:
                self.cache.put(prepared.key, endpoint=endpoint.name, model=endpoint.model, request_id=request.request_id,
                               data=data, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, via=via)
                return ChatResult(request.request_id, endpoint.name, data, None, False, prompt_tokens, completion_tokens)
            if attempt < endpoint.max_invalid_retries:
                self.count_usage(endpoint.name, invalid_retries=1)
                messages = [*messages, {"role": "assistant", "content": content or ""}, reask_message(detail, request.schema)]
        return ChatResult(request.request_id, endpoint.name, None, error, False, prompt_tokens, completion_tokens, detail)

    # -- the public API

    def complete_json(self, requests: Iterable[ChatRequest], model: str, *, progress: str | None = None) -> list[ChatResult]:
        """Results in request order. Each answer is written to the on-disk cache (sqlite, keyed by a hash
        of the full request: base_url, model id, messages, schema, max_tokens, temperature, json_mode) as
        soon as it arrives, so a killed run loses nothing and a rerun costs nothing. Errors become
        ChatResult.error (never raise for one bad request); errors are not cached."""
        endpoint = self.endpoint(model)
        prepared = self.prepare(requests, endpoint)

        def ask_missing(todo: dict[str, list[int]], results: list) -> None:
            if todo:
                self.ask_many(endpoint, [idxs[0] for idxs in todo.values()], lambda i: self.ask(endpoint, prepared[i]),
                              results, progress)

        return self.answer(endpoint, prepared, ask_missing)

    def answer(self, endpoint: ModelEndpoint, prepared: list[PreparedRequest],
               ask_missing: Callable[[dict[str, list[int]], list], None]) -> list[ChatResult]:
        """What every transport shares: cached answers first; then ``ask_missing(todo, results)`` fills
        ``results[idxs[0]]`` for each missing key of ``todo`` (key -> the indexes that want it; called even when
        nothing is missing, so that a batch run still collects the batches of an interrupted one); identical
        requests share one answer; failures are counted. Results in request order."""
        results: list[ChatResult | None] = [None] * len(prepared)
        todo = self._from_cache(endpoint, prepared, results)
        ask_missing(todo, results)
        # Identical requests in one call are asked once; the others get the same answer.
        for idxs in todo.values():
            for i in idxs[1:]:
                results[i] = replace(results[idxs[0]], request_id=prepared[i].request.request_id)
        self.count_usage(endpoint.name, failed=sum(1 for r in results if r.error))
        return results  # type: ignore[return-value]

    def _from_cache(self, endpoint: ModelEndpoint, prepared: list[PreparedRequest], results: list) -> dict[str, list[int]]:
        """Fill cached results in place; return the missing keys with the indexes that want them."""
        self.count_usage(endpoint.name, requests=len(prepared))
        hits = self.cache.get_many(p.key for p in prepared)
        todo: dict[str, list[int]] = {}
        for i, p in enumerate(prepared):
            hit = hits.get(p.key)
            if hit is not None:
                results[i] = ChatResult(p.request.request_id, endpoint.name, hit.data, None, True)
            else:
                todo.setdefault(p.key, []).append(i)
        self.count_usage(endpoint.name, cached=len(prepared) - sum(len(v) for v in todo.values()))
        return todo

    def ask_many(self, endpoint: ModelEndpoint, indexes: list[int], work: Callable[[int], ChatResult],
                 results: list, progress: str | None) -> None:
        """Run ``work`` over indexes with at most ``max_concurrency`` in flight; Ctrl-C cancels the queue."""
        from tqdm.auto import tqdm

        bar = tqdm(total=len(indexes), desc=progress, disable=progress is None, unit="req")
        pool = ThreadPoolExecutor(max_workers=min(endpoint.max_concurrency, len(indexes)) or 1,
                                  thread_name_prefix=f"llm-{endpoint.name}")
        try:
            futures: dict[Future, int] = {pool.submit(work, i): i for i in indexes}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    results[futures[future]] = future.result()
                    bar.update(1)
                    if results[futures[future]].error:
                        bar.set_postfix_str(f"last error: {results[futures[future]].error}")
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            bar.close()
        pool.shutdown(wait=True)

    def chat_with_tools(self, request: ToolChatRequest, model: str) -> ToolChatResult:
        """One tool-using turn, under the same transient-error policy and cache as ``complete_json``.

        The answer (text, tool calls with their raw argument strings, finish reason) is cached as it came,
        valid or not: whether a tool call is malformed is the caller's business, and a rerun of the same
        conversation replays the same answer. Errors of the call itself are returned, not cached.
        """
        endpoint = self.endpoint(model)
        body = build_tool_body(endpoint, request)
        key = cache_key(endpoint, body)
        self.count_usage(endpoint.name, requests=1)
        hit = self.cache.get(key)
        if hit is not None:
            self.count_usage(endpoint.name, cached=1)
            return ToolChatResult(request.request_id, endpoint.name, hit.data["content"], hit.data["tool_calls"],
                                  hit.data["finish_reason"], None, True)
        response, error, detail = self._send(endpoint, body)
        if error is None and not response.choices:
            error, detail = "empty_response", "the server returned no choices"
        if error:
            self.count_usage(endpoint.name, failed=1)
            return ToolChatResult(request.request_id, endpoint.name, None, [], None, error, False, detail=detail)
        pt = ct = 0
        if response.usage is not None:
            pt, ct = response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0
            self.count_usage(endpoint.name, prompt_tokens=pt, completion_tokens=ct)
        choice = response.choices[0]
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                 for c in (choice.message.tool_calls or []) if getattr(c, "function", None) is not None]
        data = {"content": choice.message.content, "tool_calls": calls, "finish_reason": choice.finish_reason}
        self.cache.put(key, endpoint=endpoint.name, model=endpoint.model, request_id=request.request_id, data=data,
                       prompt_tokens=pt, completion_tokens=ct)
        return ToolChatResult(request.request_id, endpoint.name, data["content"], calls, data["finish_reason"], None,
                              False, pt, ct)

    def run_batch(self, requests: Iterable[ChatRequest], model: str, *, state_dir: str | Path,
                  poll_interval_s: float = 30, max_wait_s: float | None = None,
                  max_requests_per_batch: int = 50_000) -> list[ChatResult]:
        """OpenAI Batch API: JSONL -> files.create -> batches.create -> poll -> download -> cache.
        Resumable: the batch id is kept in state_dir; a rerun picks up the running batch; cached
        requests are never sent again. ``max_wait_s``: stop polling after that long and raise
        ``BatchNotFinished`` (the batch keeps running; call again to collect it)."""
        endpoint = self.endpoint(model)
        runner = BatchRunner(self, endpoint, Path(state_dir).expanduser(), poll_interval_s=poll_interval_s,
                             max_wait_s=max_wait_s, max_requests_per_batch=max_requests_per_batch)
        prepared = self.prepare(requests, endpoint)
        return self.answer(endpoint, prepared, lambda todo, results: runner.run(prepared, todo, results))

    def choose_transport(self, model: str, mode: str, n_requests: int, batch_min_requests: int) -> str:
        """``sync`` or ``batch`` for ``mode`` (auto / sync / batch). ``auto``: the Batch API only for OpenAI
        itself (no base_url) and a run large enough to wait for. (A rerun whose answers are all cached
        sends nothing either way.)"""
        if mode != "auto":
            return mode
        endpoint = self.endpoint(model)
        return "batch" if endpoint.base_url is None and n_requests >= batch_min_requests else "sync"

    def send(self, requests: list[ChatRequest], model: str, *, transport: str, state_dir: str | Path | None = None,
             poll_interval_s: float = 30, max_wait_s: float | None = None, progress: str | None = None) -> list[ChatResult]:
        """``complete_json`` or ``run_batch`` (in ``state_dir``), by ``transport``: results in request order."""
        if transport == "batch":
            if state_dir is None:
                raise LLMError("the Batch API needs a state folder to resume from")
            return self.run_batch(requests, model, state_dir=state_dir, poll_interval_s=poll_interval_s,
                                  max_wait_s=max_wait_s)
        return self.complete_json(requests, model, progress=progress)

    def close(self) -> None:
        self.cache.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _status_detail(exc) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return str(message)[:300]


def _retry_after(exc) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
