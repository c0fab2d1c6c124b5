"""A small OpenAI-compatible stand-in for the routes local servers lack: /v1/files and /v1/batches.

Why it exists: neither llama.cpp nor any local server offers the Batch API, and CI cannot reach
OpenAI. The stand-in stores uploaded JSONL, and "runs" a batch by replaying each line against a
real chat-completions server (the local llama.cpp server), then serves output and error files in
OpenAI's format. Every other route (chat completions, models) is proxied to that server, counting
what passes, so tests can prove how many times each request was really answered.

``replay`` can be replaced by a function (for unit tests that need answers a real model will not
give on demand, e.g. invalid JSON or a failed line).
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


def messages_fingerprint(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


class BatchStandIn:
    def __init__(self, upstream: str | None = None, replay: Callable[[dict], tuple[int, dict]] | None = None):
        self.upstream = upstream.rstrip("/") if upstream else None
        self.replay = replay or self._replay_upstream
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.hold = threading.Event()  # set: batches stay in_progress until release()
        self.lock = threading.Lock()
        self.routes = Counter()  # "POST /v1/batches" -> calls
        self.answered = Counter()  # messages fingerprint -> 200 answers from upstream (proxied or replayed)
        self.in_flight = 0
        self.peak_in_flight = 0
        self.auth_headers: set[str] = set()
        self._threads: list[threading.Thread] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload: dict | bytes, content_type: str = "application/json"):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self):
                standin._note(self)
                status, payload, ctype = standin.handle_get(self.path)
                self._send(status, payload, ctype)

            def do_POST(self):
                standin._note(self)
                status, payload = standin.handle_post(self.path, self.headers, self._body())
                self._send(status, payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # -- plumbing

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def _note(self, handler) -> None:
        with self.lock:
            self.routes[f"{handler.command} {handler.path.split('?')[0]}"] += 1
            if handler.headers.get("Authorization"):
                self.auth_headers.add(handler.headers["Authorization"])

    def release(self) -> None:
        self.hold.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def route_count(self, prefix: str) -> int:
        return sum(n for route, n in self.routes.items() if route.startswith(prefix))

    # -- upstream

    def _replay_upstream(self, body: dict) -> tuple[int, dict]:
        if not self.upstream:
            return 502, {"error": {"message": "no upstream", "type": "server_error"}}
        request = urllib.request.Request(f"{self.upstream}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with self.lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                status, payload = response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, {"error": {"message": exc.read().decode(errors="replace")[:300]}}
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            status, payload = 502, {"error": {"message": f"upstream unreachable: {exc}", "type": "server_error"}}
        finally:
            with self.lock:
                self.in_flight -= 1
        if status == 200:
            with self.lock:
                self.answered[messages_fingerprint(body.get("messages", []))] += 1
        return status, payload

    # -- routes

    def handle_get(self, path: str):
        path = path.split("?")[0]
        if path.startswith("/v1/files/") and path.endswith("/content"):
            file_id = path[len("/v1/files/"):-len("/content")]
            if file_id not in self.files:
                return 404, {"error": {"message": f"no file {file_id}"}}, "application/json"
            return 200, self.files[file_id]["data"], "application/octet-stream"
        if path.startswith("/v1/batches/"):
            batch = self.batches.get(path[len("/v1/batches/"):])
            if batch is None:
                return 404, {"error": {"message": "no such batch"}}, "application/json"
            return 200, self._public(batch), "application/json"
        if self.upstream:
            try:
                with urllib.request.urlopen(self.upstream + path[len("/v1"):], timeout=30) as response:
                    return response.status, response.read(), "application/json"
            except (urllib.error.URLError, OSError) as exc:
                return 502, {"error": {"message": str(exc)}}, "application/json"
        return 404, {"error": {"message": path}}, "application/json"

    def handle_post(self, path: str, headers, raw: bytes):
        path = path.split("?")[0]
        if path == "/v1/files":
            fields = self._multipart(headers.get("Content-Type", ""), raw)
            file_id = f"file-{len(self.files) + 1:04d}"
            self.files[file_id] = {"data": fields["file"][1], "filename": fields["file"][0],
                                   "purpose": fields["purpose"][1].decode()}
            return 200, self._file_object(file_id)
        if path == "/v1/batches":
            request = json.loads(raw)
            if request.get("input_file_id") not in self.files:
                return 400, {"error": {"message": "unknown input_file_id"}}
            batch_id = f"batch_{len(self.batches) + 1:04d}"
            lines = [json.loads(line) for line in self.files[request["input_file_id"]]["data"].decode().splitlines() if line.strip()]
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": request["endpoint"], "completion_window": "24h",
                "input_file_id": request["input_file_id"], "status": "in_progress", "created_at": int(time.time()),
                "output_file_id": None, "error_file_id": None, "metadata": request.get("metadata"),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            }
            thread = threading.Thread(target=self._run_batch, args=(batch_id, lines), daemon=True)
            self._threads.append(thread)
            thread.start()
            return 200, self._public(self.batches[batch_id])
        if path == "/v1/chat/completions":
            return self.replay(json.loads(raw))
        return 404, {"error": {"message": f"no route {path}"}}

    def _run_batch(self, batch_id: str, lines: list[dict]) -> None:
        while self.hold.is_set():
            time.sleep(0.05)
        batch = self.batches[batch_id]
        outputs, errors = [], []
        for i, line in enumerate(lines):
            status, payload = self.replay(line["body"])
            row = {"id": f"batch_req_{batch_id}_{i}", "custom_id": line["custom_id"],
                   "response": {"status_code": status, "request_id": f"req_{i}", "body": payload}, "error": None}
            (outputs if status == 200 else errors).append(row)
            counts = batch["request_counts"]
            counts["completed" if status == 200 else "failed"] += 1
        batch["output_file_id"] = self._store(f"{batch_id}_output.jsonl", outputs) if outputs else None
        batch["error_file_id"] = self._store(f"{batch_id}_errors.jsonl", errors) if errors else None
        batch["status"] = "completed"

    def _store(self, name: str, rows: list[dict]) -> str:
        file_id = f"file-{len(self.files) + 1:04d}"
        self.files[file_id] = {"data": "".join(json.dumps(r) + "\n" for r in rows).encode(), "filename": name,
                               "purpose": "batch_output"}
        return file_id

    def _file_object(self, file_id: str) -> dict:
        f = self.files[file_id]
        return {"id": file_id, "object": "file", "bytes": len(f["data"]), "created_at": int(time.time()),
                "filename": f["filename"], "purpose": f["purpose"], "status": "processed"}

    @staticmethod
    def _public(batch: dict) -> dict:
        return {k: v for k, v in batch.items()}

    @staticmethod
    def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        fields = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
        return fields


def crash_midway(llm_server, client, work: Callable[[], object], answers: int) -> dict:
    """Run ``work()`` in a thread; SIGKILL the real server once ``client``'s cache holds ``answers`` answers,
    wait for ``work`` to end, and restart the server on the same port (so the endpoint and the cache keys stay
    the same). Returns ``{"result": what work returned}`` (empty when it raised)."""
    outcome: dict = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("result", work()))
    worker.start()
    try:
        deadline = time.monotonic() + 600
        while client.cache.count() < answers and time.monotonic() < deadline and worker.is_alive():
            time.sleep(0.1)
        assert client.cache.count() >= answers, f"the server answered fewer than {answers} requests in 600 s"
        llm_server.kill()  # SIGKILL: in-flight requests get no answer
        worker.join(timeout=600)
    finally:
        if not llm_server.running:
            llm_server.start()
    return outcome
