"""OpenAI Batch API runner behind ``LLMClient.run_batch``: resumable, cache-first, nothing sent twice.

Why a state folder: a batch runs for minutes to hours, longer than a process may live. Every step
is recorded in ``state_dir/state.json`` (written atomically) the moment it happens:

    input-NNNN.jsonl        the batch lines as uploaded (custom_id = the request's cache key)
    input-NNNN.meta.jsonl   custom_id -> the caller's request_id and the JSON schema (to validate answers)
    state.json              per batch: input_file_id, batch_id, status, output/error file ids, ingested
    output-NNNN.jsonl       the downloaded output file; errors-NNNN.jsonl the downloaded error file

A rerun reads the state and continues where the last run stopped: uploads a file not yet uploaded,
creates a batch not yet created, polls a running batch, downloads and ingests a finished one.
Requests already in the cache are never put in a batch. Answers that are not valid JSON for their
schema are re-asked synchronously (bounded, like ``complete_json``). Requests the batch failed are
reported as errors and sent again, in a new batch, by the next run. No file here holds an API key.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from ratio_spark.llm.cache import AnswerCache
from ratio_spark.llm.requests import ChatRequest, ChatResult, LLMError, PreparedRequest, parse_answer
from ratio_spark.llm.settings import ModelEndpoint

TERMINAL = ("completed", "failed", "expired", "cancelled")
CHAT_URL = "/v1/chat/completions"
MAX_FILE_BYTES = 190 * 1024 * 1024  # OpenAI accepts batch input files up to 200 MB
STATE_VERSION = 1


class BatchNotFinished(LLMError):
    """Raised when ``max_wait_s`` passes before the batches finish; they keep running, rerun to collect."""

    exit_code = 1  # not the user's mistake: the work is unfinished, and a rerun collects it

    def __init__(self, batch_ids: list[str], state_dir: Path):
        self.batch_ids = batch_ids
        self.state_dir = state_dir
        super().__init__(f"batches {', '.join(batch_ids)} still running; run again with the same state_dir "
                         f"({state_dir}) to collect them")


def _snake(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_") or "unknown"


class Client(Protocol):
    """What the runner uses of the client that owns it (``LLMClient``: the client imports the runner, so the
    runner names only this public surface, never the client's module or its private members)."""

    cache: AnswerCache

    def sdk(self, endpoint: ModelEndpoint) -> Any: ...
    def call_with_retries(self, endpoint: ModelEndpoint, fn: Callable[[], Any]) -> tuple[Any, str | None, str | None]: ...
    def validator(self, schema: dict) -> Any: ...
    def ask(self, endpoint: ModelEndpoint, prepared: PreparedRequest, **options: Any) -> ChatResult: ...
    def ask_many(self, endpoint: ModelEndpoint, indexes: list[int], work: Callable[[int], ChatResult], results: list,
                 progress: str | None) -> None: ...
    def count_usage(self, name: str, **deltas: int) -> None: ...
    def sleep(self, seconds: float) -> None: ...


class BatchRunner:
    def __init__(self, client: Client, endpoint: ModelEndpoint, state_dir: Path, *, poll_interval_s: float,
                 max_wait_s: float | None, max_requests_per_batch: int):
        self.client = client
        self.endpoint = endpoint
        self.state_dir = state_dir
        self.poll_interval_s = poll_interval_s
        self.max_wait_s = max_wait_s
        self.max_requests = max(1, int(max_requests_per_batch))
        self.failed: dict[str, tuple[str, str | None]] = {}  # custom_id -> (error, detail), this run

    # -- state

    @property
    def state_path(self) -> Path:
        return self.state_dir / "state.json"

    def _load_state(self) -> dict[str, Any]:
        identity = {"endpoint": self.endpoint.name, "base_url": self.endpoint.base_url, "model": self.endpoint.model}
        if not self.state_path.exists():
            return {"version": STATE_VERSION, **identity, "batches": []}
        try:
            state = json.loads(self.state_path.read_text())
        except json.JSONDecodeError as exc:
            raise LLMError(f"{self.state_path} is not valid JSON ({exc}); move it away to start afresh") from None
        theirs = {k: state.get(k) for k in identity}
        if theirs != identity:
            raise LLMError(f"{self.state_dir} holds batches of {theirs}, not {identity}; use another state_dir")
        return state

    def _save(self, state: dict[str, Any]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.state_path)

    # -- the run

    def run(self, prepared: list[PreparedRequest], todo: dict[str, list[int]], results: list) -> None:
        """Answer the requests of ``todo`` (cache key -> indexes of ``prepared``; the client's cache has none of
        them) into ``results[idxs[0]]``, under an exclusive lock on the state folder (two runs on one folder
        would submit twice)."""
        import fcntl

        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LLMError(f"another run is using the batch state folder {self.state_dir}") from None
            try:
                self._run(prepared, todo, results)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _run(self, prepared: list[PreparedRequest], todo: dict[str, list[int]], results: list) -> None:
        client, endpoint = self.client, self.endpoint
        state = self._load_state()
        self._finish(state)  # resume: batches of an earlier, interrupted run
        answered = client.cache.get_many(todo)
        to_send = [prepared[idxs[0]] for key, idxs in todo.items() if key not in answered and key not in self.failed]
        if to_send:
            self._write_batches(state, to_send)
            self._finish(state)
            answered = client.cache.get_many(todo)
        for key, idxs in todo.items():
            first = prepared[idxs[0]].request.request_id
            if key in answered:
                hit = answered[key]
                result = ChatResult(first, endpoint.name, hit.data, None, False, hit.prompt_tokens, hit.completion_tokens)
            else:
                error, detail = self.failed.get(key, ("not_answered", "the batch returned no line for this request"))
                result = ChatResult(first, endpoint.name, None, error, False, detail=detail)
            results[idxs[0]] = result

    # -- writing and submitting

    def _write_batches(self, state: dict[str, Any], to_send: list[PreparedRequest]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        chunk: list[tuple[str, str]] = []
        size = 0
        for p in to_send:
            line = json.dumps({"custom_id": p.key, "method": "POST", "url": CHAT_URL, "body": p.body}, ensure_ascii=False)
            meta = json.dumps({"custom_id": p.key, "request_id": p.request.request_id, "schema": p.request.schema,
                               "max_tokens": p.request.max_tokens}, ensure_ascii=False)
            if chunk and (len(chunk) >= self.max_requests or size + len(line) > MAX_FILE_BYTES):
                self._add_entry(state, chunk)
                chunk, size = [], 0
            chunk.append((line, meta))
            size += len(line.encode("utf-8")) + 1
        if chunk:
            self._add_entry(state, chunk)

    def _add_entry(self, state: dict[str, Any], chunk: list[tuple[str, str]]) -> None:
        index = len(state["batches"])
        stem = f"input-{index:04d}"
        (self.state_dir / f"{stem}.jsonl").write_text("".join(line + "\n" for line, _ in chunk), encoding="utf-8")
        (self.state_dir / f"{stem}.meta.jsonl").write_text("".join(meta + "\n" for _, meta in chunk), encoding="utf-8")
        state["batches"].append({
            "index": index, "input": f"{stem}.jsonl", "meta": f"{stem}.meta.jsonl", "n_requests": len(chunk),
            "input_file_id": None, "batch_id": None, "status": None,
            "output_file_id": None, "error_file_id": None, "ingested": False, "created_at": time.time(),
        })
        self._save(state)

    def _api(self, what: str, fn):
        result, error, detail = self.client.call_with_retries(self.endpoint, fn)
        if error:
            raise LLMError(f"Batch API {what} failed for endpoint {self.endpoint.name!r}: {error} ({detail}); "
                           f"the state in {self.state_dir} is kept, run again to resume")
        return result

    def _submit(self, state: dict[str, Any], entry: dict[str, Any]) -> None:
        sdk = self.client.sdk(self.endpoint)
        if not entry["input_file_id"]:
            path = self.state_dir / entry["input"]
            uploaded = self._api("upload", lambda: sdk.files.create(file=(path.name, path.read_bytes()), purpose="batch"))
            entry["input_file_id"] = uploaded.id
            self._save(state)
        if not entry["batch_id"]:
            batch = self._api("create", lambda: sdk.batches.create(
                input_file_id=entry["input_file_id"], endpoint=CHAT_URL, completion_window="24h",
                metadata={"source": "ratio-spark", "endpoint": self.endpoint.name[:64]},
            ))
            entry["batch_id"], entry["status"] = batch.id, batch.status
            self._save(state)

    # -- polling, downloading, ingesting

    def _finish(self, state: dict[str, Any]) -> None:
        open_entries = [e for e in state["batches"] if not e["ingested"]]
        if not open_entries:
            return
        for entry in open_entries:
            self._submit(state, entry)
        self._poll(state, open_entries)
        for entry in open_entries:
            self._ingest(state, entry)

    def _poll(self, state: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        from tqdm.auto import tqdm

        sdk = self.client.sdk(self.endpoint)
        started = time.monotonic()
        bar = tqdm(total=sum(e["n_requests"] for e in entries), desc=f"batch {self.endpoint.name}", unit="req",
                   disable=None)
        try:
            while True:
                done_requests = 0
                for entry in entries:
                    if entry["status"] in TERMINAL and entry.get("polled_final"):
                        done_requests += entry["n_requests"]
                        continue
                    batch = self._api("poll", lambda: sdk.batches.retrieve(entry["batch_id"]))
                    entry["status"] = batch.status
                    entry["output_file_id"] = batch.output_file_id
                    entry["error_file_id"] = batch.error_file_id
                    if batch.errors is not None and getattr(batch.errors, "data", None):
                        entry["batch_errors"] = [f"{e.code}: {e.message}" for e in batch.errors.data][:20]
                    counts = batch.request_counts
                    if batch.status in TERMINAL:
                        entry["polled_final"] = True
                        done_requests += entry["n_requests"]
                    elif counts is not None:
                        done_requests += (counts.completed or 0) + (counts.failed or 0)
                    self._save(state)
                bar.n = done_requests
                bar.set_postfix_str(", ".join(sorted({str(e["status"]) for e in entries})))
                bar.refresh()
                if all(e["status"] in TERMINAL for e in entries):
                    return
                if self.max_wait_s is not None and time.monotonic() - started >= self.max_wait_s:
                    raise BatchNotFinished([e["batch_id"] for e in entries if e["status"] not in TERMINAL], self.state_dir)
                self.client.sleep(self.poll_interval_s)
        finally:
            bar.close()

    def _download(self, file_id: str | None, target: Path) -> list[dict]:
        if not file_id:
            return []
        if not target.exists():  # already downloaded by a run that died while ingesting
            sdk = self.client.sdk(self.endpoint)
            content = self._api("download", lambda: sdk.files.content(file_id))
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(content.read())
            os.replace(tmp, target)
        lines = []
        for line_no, line in enumerate(target.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    lines.append(json.loads(line))
                except json.JSONDecodeError:
                    raise LLMError(f"{target}:{line_no} is not JSON; delete the file to download it again") from None
        return lines

    def _ingest(self, state: dict[str, Any], entry: dict[str, Any]) -> None:
        client, endpoint = self.client, self.endpoint
        index = entry["index"]
        bodies = {}
        for line in (self.state_dir / entry["input"]).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            bodies[row["custom_id"]] = row["body"]
        metas = {}
        for line in (self.state_dir / entry["meta"]).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            metas[row["custom_id"]] = row
        outputs = self._download(entry["output_file_id"], self.state_dir / f"output-{index:04d}.jsonl")
        errors = self._download(entry["error_file_id"], self.state_dir / f"errors-{index:04d}.jsonl")
        seen: set[str] = set()
        to_reask: list[tuple[PreparedRequest, str, tuple[int, int], str | None]] = []
        for row in outputs + errors:
            cid = row.get("custom_id")
            if cid not in bodies:
                continue
            seen.add(cid)
            response = row.get("response") or {}
            status = response.get("status_code")
            body = response.get("body") or {}
            if row.get("error") or status != 200:
                err = row.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
                code = f"http_{status}" if status and status != 200 else _snake(err.get("code") or "batch_error")
                self.failed[cid] = (code, str(err.get("message") or "")[:300] or None)
                continue
            usage = body.get("usage") or {}
            pt, ct = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            client.count_usage(endpoint.name, batch_requests=1, prompt_tokens=pt, completion_tokens=ct,
                               batch_prompt_tokens=pt, batch_completion_tokens=ct)
            choices = body.get("choices") or []
            content = (choices[0].get("message") or {}).get("content") if choices else None
            finish_reason = choices[0].get("finish_reason") if choices else None
            meta = metas[cid]
            request = ChatRequest(meta["request_id"], bodies[cid]["messages"], meta["schema"], meta.get("max_tokens", 256))
            prepared = PreparedRequest(request, bodies[cid], cid)
            data, error, detail = parse_answer(content, client.validator(meta["schema"]))
            if data is not None:
                client.cache.put(cid, endpoint=endpoint.name, model=endpoint.model, request_id=meta["request_id"],
                                 data=data, prompt_tokens=pt, completion_tokens=ct, via="batch")
            elif endpoint.max_invalid_retries > 0:
                to_reask.append((prepared, content or "", (pt, ct), finish_reason))
            else:
                if finish_reason == "length":
                    error, detail = "truncated", f"the answer hit max_tokens ({detail})"
                self.failed[cid] = (error, detail)
        for cid in bodies:
            if cid not in seen:
                reason = entry.get("batch_errors") or [f"the batch ended {entry['status']}"]
                self.failed[cid] = (_snake(f"batch_{entry['status']}"), "; ".join(reason)[:300])
        if to_reask:
            results: list[ChatResult | None] = [None] * len(to_reask)
            client.ask_many(
                endpoint, list(range(len(to_reask))),
                lambda i: client.ask(endpoint, to_reask[i][0], first_answer=to_reask[i][1], tokens=to_reask[i][2],
                                     first_finish_reason=to_reask[i][3], via="batch+reask"),
                results, progress=f"re-ask {endpoint.name}",
            )
            for (prepared, _, _, _), result in zip(to_reask, results):
                if result.error:
                    self.failed[prepared.key] = (result.error, result.detail)
        entry["ingested"] = True
        self._save(state)
