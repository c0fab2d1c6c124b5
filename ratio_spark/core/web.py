"""The one request policy of the project's two web services (``humaneval serve``, ``inspire serve``).

Both apps are FastAPI apps that other people and other programs talk to; they refuse bad requests the same
way, before any work is done for them:

* **Size**: a body over ``MAX_BODY_BYTES`` (64 KB) is answered 413 before it is read or parsed (FastAPI's
  ``max_body_size``: a declared ``Content-Length`` over the limit is refused unread, a chunked body once it
  passes the limit), so a 10 MB body cannot stall the event loop.
* **Checks before the body**: a route's ``guard`` (the annotator's token, the episode named in the path)
  runs before the body is read, so a request without a token is a 401 whatever its body holds.
* **Shape**: JSON nested deeper than ``MAX_JSON_DEPTH`` is refused before it is parsed (no RecursionError);
  bodies are ``StrictBody`` models (unknown fields refused, JSON ``true``/``false`` only for a boolean, no
  ``"yes"`` or ``1``).
* **Answers**: a refused body is a 422 with one line naming the field and what was wrong, never the input
  itself (a 10 MB field is not echoed back).
* **Binding**: ``serve`` binds the socket itself (``port=0`` takes a free one) and reports the port actually
  bound; 127.0.0.1 unless the caller says otherwise (``bind_notice`` says which).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from ratio_spark.core.errors import UserError

MAX_BODY_BYTES = 64 * 1024
MAX_JSON_DEPTH = 32
LOOPBACK = ("127.0.0.1", "::1", "localhost")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


class ServeError(UserError):
    """A service that cannot start: the address is taken or cannot be bound."""


class StrictBody(BaseModel):
    """A request body: unknown fields refused, no coercion (``"no"`` is not a boolean, ``"1"`` not a number)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def json_depth(data: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (strings skipped), without parsing it."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub(b"", data)):
        depth += 1 if bracket in (b"[", b"{") else -1
        deepest = max(deepest, depth)
    return deepest


def refusal_line(exc: RequestValidationError) -> str:
    """One line for a refused request: where and what, never the value sent."""
    errors = list(exc.errors())
    if not errors:
        return "the request is not valid"
    first = errors[0]
    if first.get("type") == "json_invalid":
        line = f"body: not valid JSON ({first.get('ctx', {}).get('error', 'decode error')})"
    else:
        where = ".".join(str(part)[:40] for part in first.get("loc", ())) or "request"
        line = f"{where}: {first.get('msg', 'invalid')}"
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more)"
    return line[:300]


def refuse(detail: str, where: tuple = ("body",)) -> RequestValidationError:
    """A refusal raised by the policy itself, answered like pydantic's."""
    return RequestValidationError([{"type": "value_error", "loc": where, "msg": detail, "input": None}])


class PolicyRoute(APIRoute):
    """A route that runs its ``guard(request)`` (in a worker thread: it may read a database) before the body
    is read, then refuses a JSON body nested too deep, then lets FastAPI parse and validate it."""

    guard: Callable[[Request], None] | None = None

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        guard, has_body = type(self).guard, self.body_field is not None

        async def checked(request: Request):
            if guard is not None:
                await run_in_threadpool(guard, request)
            if has_body and json_depth(await request.body()) > MAX_JSON_DEPTH:  # body() is limited and cached
                raise refuse(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            return await handler(request)

        return checked


def policy_route(guard: Callable[[Request], None] | None = None) -> type[APIRoute]:
    """The route class of an ``APIRouter`` whose routes all run ``guard`` first."""
    return type("GuardedRoute" if guard else "PolicyRoute", (PolicyRoute,), {"guard": staticmethod(guard) if guard else None})


def policy_app(on_refused: Callable[[Request, str], None] | None = None, **kwargs: Any) -> FastAPI:
    """A FastAPI app under this policy (``kwargs`` go to ``FastAPI``); its routes are ``PolicyRoute``s
    (an ``APIRouter(route_class=policy_route(guard))`` adds a guard). ``on_refused(request, line)`` learns of
    every refused body (Inspire logs it in the episode)."""
    app = FastAPI(max_body_size=MAX_BODY_BYTES, **kwargs)
    app.router.route_class = policy_route()

    @app.exception_handler(RequestValidationError)
    async def refused(request: Request, exc: RequestValidationError):
        line = refusal_line(exc)
        if on_refused is not None:
            await run_in_threadpool(on_refused, request, line)
        return JSONResponse({"detail": line}, status_code=422)

    return app


def bind_notice(host: str) -> str:
    """What the start-up banner says about who can reach the service."""
    if host in LOOPBACK:
        return f"bound to {host} only: other machines cannot reach it (--host to change)"
    return f"bound to {host}: reachable from other machines, over plain HTTP (no TLS, put a reverse proxy in front)"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: a free port); connections wait in its backlog until served."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port, or 0 for a "
                         "free one") from None
    return sock


def url_of(host: str, sock: socket.socket) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def _server(app, log_level: str = "warning"):
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, access_log=False, log_level=log_level, timeout_graceful_shutdown=2))


def serve(app, host: str = "127.0.0.1", port: int = 0, on_ready: Callable[[str], None] = print) -> None:
    """Serve ``app`` with uvicorn until interrupted; ``on_ready(url)`` learns the address actually bound."""
    sock = bind(host, port)
    server = _server(app)
    on_ready(url_of(host, sock))
    server.run(sockets=[sock])


class ServiceThread:
    """``app`` served by uvicorn in a background thread on ``host`` (a free port unless given); a context
    manager: ``with ServiceThread(app) as url: ...``."""

    def __init__(self, app, port: int = 0, host: str = "127.0.0.1"):
        self.host = host
        self.sock = bind(host, port)
        self.port = self.sock.getsockname()[1]
        self.server = _server(app)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, name="web-service",
                                       daemon=True)

    @property
    def url(self) -> str:
        return url_of(self.host, self.sock)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the service did not start on {self.url}")
            time.sleep(0.05)
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class ServiceProcess:
    """``ratio-spark <args>`` (a ``serve`` command) in a subprocess, ready once it prints the line starting
    with ``banner`` (the first ``http://`` word of it is ``url``); every line it prints is kept in ``lines``
    (the tests look for tokens in them). Tests and benchmarks serve the apps this way."""

    def __init__(self, args: list[str], banner: str, timeout_s: float = 300):
        self.process = subprocess.Popen([sys.executable, "-m", "ratio_spark.cli.main", *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        ready = threading.Event()

        def drain():
            for line in self.process.stdout:
                self.lines.append(line)
                if line.startswith(banner):
                    self.url = next(w for w in line.split() if w.startswith("http://")).rstrip(",/")
                    ready.set()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(timeout_s):
            self.process.kill()
            raise RuntimeError(f"ratio-spark {' '.join(args[:2])} did not start:\n" + "".join(self.lines))

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(30)
