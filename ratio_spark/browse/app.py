"""The benchmark browser: a read-only web page over a release and its results (FastAPI, server-rendered HTML, the
human-evaluation app's stack and security headers; no script, no external resource).

``/`` lists the queries, filtered by split, move, marker and text; ``/queries/<id>`` shows a query with its gold
and each results folder's top 10, ranks and the gold marked; ``/stats`` shows the split sizes, the markers and the
yields as plots (PNG, rendered once at start). A bad filter, an unknown id or page is a 4xx page with one line
that says why; nothing is ever written.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from ratio_spark.browse.data import MAX_TEXT_FILTER, Benchmark
from ratio_spark.browse.plots import all_plots
from ratio_spark.core.schema import MOVES, SPLITS
from ratio_spark.core.web import bind
from ratio_spark.humaneval.app import SECURITY_HEADERS

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
log = logging.getLogger("ratio_spark.browse.app")


def _shown(value: str, limit: int = 60) -> str:
    """A user's value inside a message: printable, short."""
    value = CONTROL.sub("?", value)
    return repr(value if len(value) <= limit else value[:limit] + "…")


def _choice(value: str | None, allowed, what: str) -> str | None:
    if not value:
        return None
    if value not in allowed:
        raise HTTPException(400, f"Unknown {what} {_shown(value)}: choose one of {', '.join(allowed)}.")
    return value


def _text_filter(value: str | None, what: str) -> str | None:
    if not value:
        return None
    if len(value) > MAX_TEXT_FILTER:
        raise HTTPException(400, f"The {what} filter is {len(value)} characters long; at most {MAX_TEXT_FILTER}.")
    if CONTROL.search(value):
        raise HTTPException(400, f"The {what} filter holds control characters.")
    return value


def create_app(benchmark: Benchmark) -> FastAPI:
    app = FastAPI(title="ratio-spark benchmark browser", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=HERE / "templates")
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    plots = all_plots(benchmark)
    markers = benchmark.markers
    splits = [s for s in SPLITS if s in benchmark.manifest["splits"]]
    title = benchmark.manifest.get("name") or benchmark.release.name

    @app.middleware("http")
    async def headers(request: Request, call_next):
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    def error_page(request: Request, status: int, message: str):
        return templates.TemplateResponse(request, "error.html", {"status": status, "message": message,
                                                                         "title": title}, status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if exc.status_code != 404 or exc.detail != "Not Found" else "There is no such page."
        return error_page(request, exc.status_code, message)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, exc: RequestValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or "request"
        return error_page(request, 422, f"{where}: {first.get('msg', 'invalid')}.")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return Response(status_code=204)

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, split: str | None = None, move: str | None = None, marker: str | None = None,
              q: str | None = None, page: int = 1):
        filters = {"split": _choice(split, splits, "split"), "move": _choice(move, MOVES, "move"),
                   "marker": _text_filter(marker, "marker"), "q": _text_filter(q, "text")}
        if page < 1:
            raise HTTPException(400, f"Page {page} does not exist: pages start at 1.")
        found = benchmark.find(filters["split"], filters["move"], filters["marker"], filters["q"])
        pages = max(1, -(-len(found) // PAGE_SIZE))
        if page > pages:
            raise HTTPException(404, f"Page {page} does not exist: these filters give {pages} page(s).")
        shown = found[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
        keep = {k: v for k, v in filters.items() if v}
        return templates.TemplateResponse(request, "index.html", {
            "title": title, "rows": shown, "total": len(found), "page": page, "pages": pages, "filters": keep,
            "splits": splits, "moves": MOVES, "markers": markers, "manifest": benchmark.manifest,
            "systems": len(benchmark.systems)})

    @app.get("/queries/{query_id}", response_class=HTMLResponse)
    def query_page(query_id: str, request: Request):
        shown = benchmark.show(query_id)
        if shown is None:
            raise HTTPException(404, f"There is no query {_shown(query_id)} in this release.")
        return templates.TemplateResponse(request, "query.html", {"title": title, "shown": shown})

    @app.get("/stats", response_class=HTMLResponse)
    def stats_page(request: Request):
        return templates.TemplateResponse(request, "stats.html", {
            "title": title, "plots": list(plots), "manifest": benchmark.manifest, "splits": splits, "moves": MOVES,
            "yields": [r for r in benchmark.stats.get("stats_yield", []) if r.get("role") == "move"]})

    @app.get("/plots/{name}.png")
    def plot(name: str):
        if name not in plots:
            raise HTTPException(404, f"There is no plot {_shown(name)}.")
        return Response(plots[name], media_type="image/png")

    return app


def serve(benchmark: Benchmark, host: str = "127.0.0.1", port: int = 8766, on_ready=print) -> None:
    """Serve until interrupted; ``port=0`` takes a free port and ``on_ready(url)`` learns the address."""
    import uvicorn

    app = create_app(benchmark)
    sock = bind(host, port)
    on_ready(f"http://{f'[{host}]' if ':' in host else host}:{sock.getsockname()[1]}")
    uvicorn.Server(uvicorn.Config(app, access_log=False, log_level="warning")).run(sockets=[sock])
