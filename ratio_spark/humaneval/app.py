"""The annotation web app: FastAPI, server-rendered HTML, one small script, no external resources.

An annotator opens a personal link (``/t/<token>``): the token goes into an HttpOnly, SameSite=Strict
cookie and the browser lands on the first query not yet complete. Pages and the JSON API accept the
cookie or ``Authorization: Bearer <token>``. No or a wrong token: 401; someone else's assignment: 403;
the admin account sees progress only. Each click is one POST, saved in its own transaction before the
answer returns. Tokens are compared in constant time (``Study.authenticate``) and never logged: the
access log names the route template (``/t/{token}``), never the path. Requests follow the services' one
policy (``core/web.py``): the token is checked before the body is read, bodies over 64 KB get 413, bodies
are strict (``useful`` is JSON ``true`` or ``false``) and a refusal never echoes what was sent.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ratio_spark.core import web
from ratio_spark.humaneval.study import MAX_COMMENT_CHARS, Account, Study, StudyBusy, StudyError

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


class LabelIn(web.StrictBody):
    candidate_id: str = Field(min_length=1, max_length=200)
    useful: bool


class PreferenceIn(web.StrictBody):
    preference: Literal["A", "B", "tie"]


class CommentIn(web.StrictBody):
    comment: str = Field(max_length=MAX_COMMENT_CHARS)


def create_app(study_path: str | Path) -> FastAPI:
    study = Study(study_path)
    app = web.policy_app(title="ratio-spark human evaluation", docs_url=None, redoc_url=None, openapi_url=None)
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

    @app.exception_handler(StudyBusy)
    async def busy(request: Request, exc: StudyBusy):  # not the client's fault, and nothing was written
        return await error_page(request, StarletteHTTPException(503, str(exc)))

    def account_of(request: Request) -> Account | None:
        header = request.headers.get("authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else request.cookies.get(COOKIE)
        return study.authenticate(token)

    def sign_in_first(request: Request) -> None:
        """The guard of every route but the sign-in link: runs before the body is read."""
        request.state.account = account_of(request)
        if request.state.account is None:
            raise HTTPException(401, "Not signed in, or the token is wrong. Open your personal link again.")

    def signed_in(request: Request) -> Account:
        return request.state.account

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
        except StudyBusy:
            raise
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

    private = APIRouter(route_class=web.policy_route(sign_in_first))

    @private.get("/", response_class=HTMLResponse)
    def start(request: Request):
        account = signed_in(request)
        if account.role == "admin":
            return RedirectResponse("/admin", status_code=303)
        pending = [a for a in study.assignments_of(account.name) if not a["complete"]]
        return RedirectResponse(f"/assignments/{pending[0]['assignment_id']}" if pending else "/done", status_code=303)

    @private.get("/assignments/{assignment_id}", response_class=HTMLResponse)
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

    @private.get("/done", response_class=HTMLResponse)
    def done_page(request: Request):
        account = signed_in(request)
        if account.role != "annotator":
            raise HTTPException(403, "The admin account has no queries to label.")
        mine = study.assignments_of(account.name)
        return templates.TemplateResponse(request, "done.html", {
            "annotator": account.name, "assignments": mine, "complete_count": sum(a["complete"] for a in mine)})

    @private.get("/admin", response_class=HTMLResponse)
    def admin_page(request: Request):
        if signed_in(request).role != "admin":
            raise HTTPException(403, "Progress is for the study's admin account.")
        return templates.TemplateResponse(request, "admin.html", {"progress": study.progress(), "meta": study.meta()})

    @private.get("/api/progress")
    def progress(request: Request) -> list[dict]:
        if signed_in(request).role != "admin":
            raise HTTPException(403, "Progress is for the study's admin account.")
        return study.progress()

    @private.get("/api/assignments/{assignment_id}")
    def state(assignment_id: int, request: Request) -> dict:
        owned(request, assignment_id)
        return study.state(assignment_id)

    @private.post("/api/assignments/{assignment_id}/labels")
    def label(assignment_id: int, body: LabelIn, request: Request) -> dict:
        owned(request, assignment_id)
        return answer(lambda: study.set_label(assignment_id, body.candidate_id, body.useful))

    @private.post("/api/assignments/{assignment_id}/preference")
    def preference(assignment_id: int, body: PreferenceIn, request: Request) -> dict:
        owned(request, assignment_id)
        return answer(lambda: study.set_preference(assignment_id, body.preference))

    @private.post("/api/assignments/{assignment_id}/comment")
    def comment(assignment_id: int, body: CommentIn, request: Request) -> dict:
        owned(request, assignment_id)
        return answer(lambda: study.set_comment(assignment_id, body.comment))

    app.include_router(private)
    return app


def serve(study_path: str | Path, host: str = "127.0.0.1", port: int = 8765, on_ready=print) -> None:
    """Serve the app until interrupted. ``port=0`` takes a free port; ``on_ready(url)`` learns the address."""
    web.serve(create_app(study_path), host, port, on_ready)
