"""The annotation web app: FastAPI, server-rendered HTML, one small script, no external resources.

An annotator opens a personal link (``/t/<token>``): the token goes into an HttpOnly, SameSite=Strict
cookie and the browser lands on the first query not yet complete. Pages and the JSON API accept the
cookie or ``Authorization: Bearer <token>``. No or a wrong token: 401; someone else's assignment: 403;
the admin account sees progress only. Each click is one POST, saved in its own transaction before the
answer returns. Tokens are compared in constant time (``Study.authenticate``) and never logged: the
access log names the route template (``/t/{token}``), never the path.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path
from typing import Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ratio_spark.humaneval.study import MAX_COMMENT_CHARS, Account, Study, StudyError

HERE = Path(__file__).resolve().parent
COOKIE = "humaneval_token"
log = logging.getLogger("ratio_spark.humaneval.app")

# What an annotator reads for each move: the paper's framing of candidates as inspirations (appendix G).
MOVE_GUIDES = {
    "address": ("Address", "The query states a problem, limitation or need. A candidate is useful if it would "
                "help you address it: a method, solution or mitigation you could build on."),
    "broaden": ("Broaden", "The query states a specific finding, claim or method. A candidate is useful if it would "
                "help you broaden it: a more general claim, principle or framing that it is a case of."),
    "specify": ("Specify", "The query states a general idea, problem or method. A candidate is useful if it would "
                "help you find a concrete example of it: a specific instance, detail or special case."),
}

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LabelIn(_Body):
    candidate_id: str = Field(min_length=1, max_length=200)
    useful: bool


class PreferenceIn(_Body):
    preference: Literal["A", "B", "tie"]


class CommentIn(_Body):
    comment: str = Field(max_length=MAX_COMMENT_CHARS)


def create_app(study_path: str | Path) -> FastAPI:
    study = Study(study_path)
    app = FastAPI(title="ratio-spark human evaluation", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=HERE / "templates")
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.middleware("http")
    async def headers_and_log(request: Request, call_next):
        started = time.perf_counter()
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        route = getattr(request.scope.get("route"), "path", None)
        if route is None:  # never the raw path: a mistyped link still holds most of a token
            route = "/static/*" if request.url.path.startswith("/static/") else "<unmatched>"
        log.info("%s %s %s %.0f ms", request.method, route, response.status_code, 1000 * (time.perf_counter() - started))
        return response

    @app.exception_handler(StarletteHTTPException)
    async def error_page(request: Request, exc: StarletteHTTPException):
        if request.url.path.startswith("/api/") or request.url.path.startswith("/static/"):
            return await http_exception_handler(request, exc)
        return templates.TemplateResponse(request, "error.html", {"status": exc.status_code, "message": exc.detail},
                                          status_code=exc.status_code)

    def account_of(request: Request) -> Account | None:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else request.cookies.get(COOKIE)
        return study.authenticate(token)

    def signed_in(request: Request) -> Account:
        account = account_of(request)
        if account is None:
            raise HTTPException(401, "Not signed in, or the token is wrong. Open your personal link again.")
        return account

    def owned(request: Request, assignment_id: int) -> Account:
        account = signed_in(request)
        owner = study.owner(assignment_id)
        if owner is None:
            raise HTTPException(404, f"There is no query {assignment_id} in this study.")
        if account.name != owner:
            raise HTTPException(403, "This query is assigned to someone else.")
        return account

    def answer(change) -> dict:
        try:
            return change()
        except StudyError as exc:
            raise HTTPException(422, str(exc)) from None

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return Response(status_code=204)

    @app.get("/t/{token}")
    def sign_in(token: str, request: Request):
        account = study.authenticate(token)
        if account is None:
            raise HTTPException(401, "This link is not valid for this study. Check that you copied all of it.")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    @app.get("/", response_class=HTMLResponse)
    def start(request: Request):
        account = signed_in(request)
        if account.role == "admin":
            return RedirectResponse("/admin", status_code=303)
        pending = [a for a in study.assignments_of(account.name) if not a["complete"]]
        return RedirectResponse(f"/assignments/{pending[0]['assignment_id']}" if pending else "/done", status_code=303)

    @app.get("/assignments/{assignment_id}", response_class=HTMLResponse)
    def assignment_page(assignment_id: int, request: Request):
        account = owned(request, assignment_id)
        study.mark_opened(assignment_id)
        item = study.assignment(assignment_id)
        mine = study.assignments_of(account.name)
        index = next(i for i, a in enumerate(mine) if a["assignment_id"] == assignment_id)
        ranks = {side: {c["candidate_id"]: c["rank"] for c in entries} for side, entries in item["lists"].items()}
        return templates.TemplateResponse(request, "assignment.html", {
            "item": item, "guide": MOVE_GUIDES.get(item["move"], (item["move"].capitalize(), "")),
            "ranks": ranks, "annotator": account.name,
            "previous": mine[index - 1]["assignment_id"] if index > 0 else None,
            "next": mine[index + 1]["assignment_id"] if index + 1 < len(mine) else None,
            "complete_count": sum(a["complete"] for a in mine),
        })

    @app.get("/done", response_class=HTMLResponse)
    def done_page(request: Request):
        account = signed_in(request)
        if account.role != "annotator":
            raise HTTPException(403, "The admin account has no queries to label.")
        mine = study.assignments_of(account.name)
        return templates.TemplateResponse(request, "done.html", {
            "annotator": account.name, "assignments": mine, "complete_count": sum(a["complete"] for a in mine)})

    @app.get("/admin", response_class=HTMLResponse)
    def admin_page(request: Request):
        if signed_in(request).role != "admin":
            raise HTTPException(403, "Progress is for the study's admin account.")
        return templates.TemplateResponse(request, "admin.html", {"progress": study.progress(), "meta": study.meta()})

    @app.get("/api/progress")
    def progress(request: Request) -> list[dict]:
        if signed_in(request).role != "admin":
            raise HTTPException(403, "Progress is for the study's admin account.")
        return study.progress()

    @app.get("/api/assignments/{assignment_id}")
    def state(assignment_id: int, request: Request) -> dict:
        owned(request, assignment_id)
        return study.state(assignment_id)

    @app.post("/api/assignments/{assignment_id}/labels")
    def label(assignment_id: int, body: LabelIn, request: Request) -> dict:
        owned(request, assignment_id)
        return answer(lambda: study.set_label(assignment_id, body.candidate_id, body.useful))

    @app.post("/api/assignments/{assignment_id}/preference")
    def preference(assignment_id: int, body: PreferenceIn, request: Request) -> dict:
        owned(request, assignment_id)
        return answer(lambda: study.set_preference(assignment_id, body.preference))

    @app.post("/api/assignments/{assignment_id}/comment")
    def comment(assignment_id: int, body: CommentIn, request: Request) -> dict:
        owned(request, assignment_id)
        return answer(lambda: study.set_comment(assignment_id, body.comment))

    return app


def serve(study_path: str | Path, host: str = "127.0.0.1", port: int = 8765, on_ready=print) -> None:
    """Serve the app until interrupted. ``port=0`` takes a free port; ``on_ready(url)`` learns the address."""
    import uvicorn

    app = create_app(study_path)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # from here on connections wait in the backlog until uvicorn accepts them
    except OSError as exc:
        sock.close()
        raise StudyError(f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port, or 0 for a free one") from None
    bound = sock.getsockname()[1]
    config = uvicorn.Config(app, access_log=False, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    on_ready(f"http://{shown}:{bound}")
    server.run(sockets=[sock])
