"""``ratio-spark inspire serve``: the date-gated search service (FastAPI on 127.0.0.1).

An episode is one policy working on one instance. It sees the brief and the cutoff and has two tools:
``search_papers(query, limit)`` over the papers published strictly before the cutoff (never the target),
with a search budget, and ``submit_answer(paper_ids)``, which ends the episode. Every call, valid or
not, is appended to the episode's trajectory file (``<trajectories>/<run_id>/<episode_id>.jsonl``): what
was asked, which ids came back and which of them were new (first exposure), errors, the canonical
submission and the final status. Tool-level errors (malformed arguments, unknown tool, exhausted budget)
are answers with ``ok: false`` that a policy can read and recover from; they count as calls.

Endpoints: ``GET /health``, ``GET /tools`` (OpenAI tool schemas), ``POST /episodes`` {instance_id,
run_id}, ``POST /episodes/{id}/search_papers`` {query, limit}, ``POST /episodes/{id}/submit_answer``
{paper_ids}, ``POST /episodes/{id}/call`` {name, arguments: object or the raw JSON string a model
wrote; a null name logs a turn in which the model called no tool}, ``POST /episodes/{id}/finish`` {reason} (the policy stopped without submitting), ``GET
/episodes/{id}`` (status and remaining budget only).

Requests follow the services' one policy (``core/web.py``): bodies over 64 KB get 413, strict bodies, a
one-line 422 that never echoes the input. A body refused on an episode's tool route (a list as ``name``,
arguments nested too deep) is also logged in the episode as a malformed call, like the tool-level errors.
Run ids are safe folder names (``RUN_ID_PATTERN``: no ``..``); queries have at most ``MAX_QUERY_CHARS``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from ratio_spark.core import web
from ratio_spark.core.web import ServiceThread  # noqa: F401  (the CLI and tests serve the app with it)
from ratio_spark.inspire.instances import Instance, InstanceSet
from ratio_spark.inspire.manifest import sha256_json
from ratio_spark.inspire.search import DateGatedSearch
from ratio_spark.inspire.settings import ScoringConfig, SearchConfig

RUNNING, SUBMITTED, EMPTY, NO_SUBMISSION = "running", "submitted", "empty_submission", "no_submission"
MALFORMED_KINDS = ("malformed_arguments", "invalid_arguments", "unknown_tool", "no_tool_call")
# A run id names a folder of the trajectories: letters, digits, '.', '_', ':', '-', not starting with a dot
# (so never '..' or '.', and no hidden folder).
RUN_ID_PATTERN = r"[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,99}"
MAX_QUERY_CHARS = 4000  # an extractive brief (an abstract's opening) is well under it
TOOL_ROUTES = {"call": None, "search_papers": "search_papers", "submit_answer": "submit_answer"}


def tool_schemas(search: SearchConfig, max_submission: int) -> list[dict]:
    """The two tools in OpenAI's function-calling format (the policy-visible interface)."""
    return [
        {"type": "function", "function": {
            "name": "search_papers",
            "description": "Search titles and abstracts of papers published before the cutoff. Returns paper ids, "
                           "titles, years and abstract snippets.",
            "parameters": {"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "description": "search query"},
                "limit": {"type": "integer", "minimum": 1, "maximum": search.max_limit,
                          "description": f"number of results (default {search.default_limit})"},
            }, "required": ["query"]},
        }},
        {"type": "function", "function": {
            "name": "submit_answer",
            "description": f"Submit up to {max_submission} paper ids from the search results, most useful first. "
                           "Ends the episode.",
            "parameters": {"type": "object", "properties": {
                "paper_ids": {"type": "array", "items": {"type": "string"}, "maxItems": max_submission,
                              "description": "ranked paper ids"},
            }, "required": ["paper_ids"]},
        }},
    ]


def normalise_query(query: str) -> str:
    return re.sub(r"\s+", " ", query.strip().lower())


@dataclass
class Episode:
    episode_id: str
    run_id: str
    instance: Instance
    log_path: Path
    searches: int = 0
    calls: int = 0
    exposed: dict[str, int] = field(default_factory=dict)  # id -> turn of first exposure, in order
    status: str = RUNNING
    lock: threading.Lock = field(default_factory=threading.Lock)

    def log(self, event: dict) -> None:
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({**event, "time": round(time.time(), 3)}, ensure_ascii=False) + "\n")


class InspireService:
    """The episodes and their tools, independent of HTTP (the FastAPI app below only routes to it)."""

    def __init__(self, instances: InstanceSet, search: DateGatedSearch, settings: SearchConfig,
                 scoring: ScoringConfig, trajectories: str | Path):
        import jsonschema

        self.instances = instances
        self.search = search
        self.settings = settings
        self.max_submission = scoring.k
        self.require_exposed = scoring.require_exposed
        self.trajectories = Path(trajectories)
        self.tools = tool_schemas(settings, self.max_submission)
        self._validators = {t["function"]["name"]: jsonschema.Draft202012Validator(t["function"]["parameters"])
                            for t in self.tools}
        self.protocol = {
            "instances": instances.manifest["version"], "instances_sha256": sha256_json(instances.manifest["instances"]),
            "corpus_sha256": instances.manifest["corpus"]["sha256"], "backend": search.backend.name,
            "fields": settings.fields, "budget": settings.budget, "max_limit": settings.max_limit,
            "max_submission": self.max_submission, "require_exposed": self.require_exposed,
            "tools_sha256": sha256_json(self.tools),
        }
        self.protocol_sha256 = sha256_json(self.protocol)
        self._episodes: dict[str, Episode] = {}
        self._lock = threading.Lock()

    # -- episodes

    def start(self, instance_id: str, run_id: str) -> dict:
        """A new episode (an existing one with the same run and instance is replaced: a rerun)."""
        if not re.fullmatch(RUN_ID_PATTERN, run_id):
            raise ValueError("run_id must be 1-100 letters, digits, '.', '_', ':' or '-', not starting with '.'")
        instance = self.instances.get(instance_id)
        episode_id = f"{run_id}.{instance_id}"
        folder = self.trajectories / run_id
        if folder.resolve().parent != self.trajectories.resolve():  # belt and braces: never outside the folder
            raise ValueError(f"run_id {run_id!r} does not name a folder inside the trajectories folder")
        folder.mkdir(parents=True, exist_ok=True)
        log_path = folder / f"{episode_id}.jsonl"
        log_path.write_text("")
        episode = Episode(episode_id, run_id, instance, log_path)
        with self._lock:
            self._episodes[episode_id] = episode
        episode.log({"event": "start", "episode_id": episode_id, "run_id": run_id, "instance_id": instance_id,
                     "cutoff": str(instance.cutoff), "protocol": self.protocol, "protocol_sha256": self.protocol_sha256})
        return {"episode_id": episode_id, "instance_id": instance_id, "brief": instance.brief,
                "cutoff": str(instance.cutoff), "search_budget": self.settings.budget,
                "max_submission": self.max_submission, "tools": self.tools}

    def episode(self, episode_id: str) -> Episode:
        with self._lock:
            episode = self._episodes.get(episode_id)
        if episode is None:
            raise KeyError(episode_id)
        return episode

    def state(self, episode: Episode) -> dict:
        return {"episode_id": episode.episode_id, "status": episode.status, "calls": episode.calls,
                "remaining_searches": self.settings.budget - episode.searches}

    def finish(self, episode: Episode, reason: str) -> dict:
        with episode.lock:
            if episode.status == RUNNING:
                episode.status = NO_SUBMISSION
                episode.log({"event": "end", "status": NO_SUBMISSION, "reason": reason[:200], "calls": episode.calls})
            return self.state(episode)

    # -- tools

    def call(self, episode: Episode, name: Any, arguments: Any) -> dict:
        """One tool call as a policy made it: ``arguments`` is an object or the raw JSON text."""
        with episode.lock:
            if episode.status != RUNNING:
                return self._error(episode, name, "episode_finished", f"the episode is {episode.status}", count=False)
            episode.calls += 1
            if name is None:  # the model answered in text: logged with what it wrote
                return self._error(episode, None, "no_tool_call", "answer with a call to search_papers or submit_answer",
                                   raw=arguments)
            if not isinstance(name, str) or name not in self._validators:
                return self._error(episode, name, "unknown_tool", f"no tool {name!r}; use search_papers or submit_answer",
                                   raw=arguments)
            if isinstance(arguments, str) or arguments is None:
                try:  # strict=False: raw newlines inside strings, as grammar-constrained local models write them
                    arguments = json.loads(arguments or "{}", strict=False)
                except json.JSONDecodeError as exc:
                    return self._error(episode, name, "malformed_arguments", f"arguments are not JSON: {exc.msg}",
                                       raw=arguments)
            errors = sorted(self._validators[name].iter_errors(arguments), key=lambda e: list(e.path))
            if errors:
                return self._error(episode, name, "invalid_arguments", schema_error_line(errors[0]), raw=arguments)
            if name == "search_papers":
                return self._search(episode, arguments["query"], int(arguments.get("limit") or self.settings.default_limit))
            return self._submit(episode, arguments["paper_ids"])

    def refuse(self, episode: Episode, tool: Any, line: str) -> None:
        """A request body the HTTP layer refused on a tool route (answered 422): a malformed call of the
        episode, counted and logged like the tool-level errors."""
        with episode.lock:
            if episode.status == RUNNING:
                episode.calls += 1
                kind = "unknown_tool" if line.startswith("body.name") else "malformed_arguments"
                self._error(episode, tool, kind, line)

    def _error(self, episode: Episode, name: Any, kind: str, detail: str, raw: Any = None, count: bool = True) -> dict:
        if count:
            episode.log({"event": "error", "turn": episode.calls,
                         "tool": name if isinstance(name, str) or name is None else repr(name),
                         "kind": kind, "detail": detail, "raw": raw if isinstance(raw, (str, dict, list, type(None))) else repr(raw)})
        return {"ok": False, "error": kind, "detail": detail, "done": episode.status != RUNNING,
                "remaining_searches": self.settings.budget - episode.searches}

    def _search(self, episode: Episode, query: str, limit: int) -> dict:
        if episode.searches >= self.settings.budget:
            return self._error(episode, "search_papers", "budget_exhausted",
                               f"all {self.settings.budget} searches are used: call submit_answer")
        episode.searches += 1
        hits = self.search.search(query, min(limit, self.settings.max_limit), episode.instance.cutoff,
                                  {episode.instance.target_id})
        returned = [pid for pid, _ in hits]
        new = [pid for pid in returned if pid not in episode.exposed]
        for pid in new:
            episode.exposed[pid] = episode.calls
        episode.log({"event": "search", "turn": episode.calls, "query": query, "limit": limit,
                     "returned_ids": returned, "new_ids": new})
        results = [self.search.describe(self.search.index[pid], self.settings.snippet_chars) for pid in returned]
        return {"ok": True, "results": results, "done": False,
                "remaining_searches": self.settings.budget - episode.searches}

    def _submit(self, episode: Episode, paper_ids: list[str]) -> dict:
        """Canonical submission: ids stripped, duplicates keep their first rank, ids the episode cannot
        see (unknown, on/after the cutoff, the target) dropped, ids never exposed dropped when required,
        (the schema allows at most ``max_submission``). Nothing left: an empty submission, which scores zero."""
        visible = self.search.visible(episode.instance.cutoff, {episode.instance.target_id})
        ranking, dropped = [], {"duplicate": [], "not_visible": [], "not_exposed": []}
        for raw in paper_ids:
            pid = raw.strip()
            if pid in ranking:
                dropped["duplicate"].append(pid)
            elif pid not in self.search.index or not visible[self.search.index[pid]]:
                dropped["not_visible"].append(pid)
            elif self.require_exposed and pid not in episode.exposed:
                dropped["not_exposed"].append(pid)
            else:
                ranking.append(pid)
        episode.status = SUBMITTED if ranking else EMPTY
        episode.log({"event": "submit", "turn": episode.calls, "raw_ids": paper_ids, "ranking": ranking, "dropped": dropped})
        episode.log({"event": "end", "status": episode.status, "reason": "submit_answer", "calls": episode.calls})
        return {"ok": True, "submitted": ranking, "dropped": {k: len(v) for k, v in dropped.items()}, "done": True,
                "status": episode.status, "remaining_searches": self.settings.budget - episode.searches}


def schema_error_line(error) -> str:
    """One line for a jsonschema error; a value over a length limit is measured, not echoed."""
    where = "/".join(str(p) for p in error.path) or "arguments"
    if error.validator in ("maxLength", "minLength", "maxItems") and isinstance(error.instance, (str, list)):
        bound = "at most" if error.validator.startswith("max") else "at least"
        unit = "characters" if isinstance(error.instance, str) else "items"
        return f"{where}: {bound} {error.validator_value} {unit} (got {len(error.instance)})"
    return f"{where}: {error.message}"[:300]


class StartBody(web.StrictBody):
    instance_id: str = Field(max_length=200)
    run_id: str = Field("default", pattern=f"^{RUN_ID_PATTERN}$")


class CallBody(web.StrictBody):
    name: str | None = None  # None: the model answered in text, no tool call
    arguments: dict[str, Any] | str | None = None  # an object, or the raw JSON text a model wrote


class FinishBody(web.StrictBody):
    reason: str = "stopped"


def create_app(service: InspireService):
    """The FastAPI routes over an InspireService."""
    from fastapi import APIRouter, Body, HTTPException, Request

    def refused(request: Request, line: str) -> None:
        episode = getattr(request.state, "episode", None)
        route = getattr(request.scope.get("route"), "path", "").rsplit("/", 1)[-1]
        if episode is not None and route in TOOL_ROUTES:
            service.refuse(episode, TOOL_ROUTES[route] or "(refused request)", line)

    app = web.policy_app(on_refused=refused, title="Inspire search service", description=__doc__)

    def episode_first(request: Request) -> None:
        """The guard of the episode routes: the episode in the path exists, before the body is read."""
        episode_id = request.path_params["episode_id"]
        try:
            request.state.episode = service.episode(episode_id)
        except KeyError:
            raise HTTPException(404, f"unknown episode {episode_id[:200]!r}") from None

    episodes = APIRouter(route_class=web.policy_route(episode_first))  # below, the guard found the episode

    @app.get("/health")
    def health() -> dict:
        return {"ok": True, "instances": len(service.instances.instances), "backend": service.search.backend.name}

    @app.get("/tools")
    def tools() -> list[dict]:
        return service.tools

    @app.post("/episodes")
    def start(body: StartBody) -> dict:
        try:
            return service.start(body.instance_id, body.run_id)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None

    @episodes.get("/episodes/{episode_id}")
    def state(episode_id: str) -> dict:
        return service.state(service.episode(episode_id))

    @episodes.post("/episodes/{episode_id}/call")
    def call(episode_id: str, body: CallBody) -> dict:
        return service.call(service.episode(episode_id), body.name, body.arguments)

    @episodes.post("/episodes/{episode_id}/search_papers")
    def search_papers(episode_id: str, arguments: dict = Body(...)) -> dict:
        return service.call(service.episode(episode_id), "search_papers", arguments)

    @episodes.post("/episodes/{episode_id}/submit_answer")
    def submit_answer(episode_id: str, arguments: dict = Body(...)) -> dict:
        return service.call(service.episode(episode_id), "submit_answer", arguments)

    @episodes.post("/episodes/{episode_id}/finish")
    def finish(episode_id: str, body: FinishBody) -> dict:
        return service.finish(service.episode(episode_id), body.reason)

    app.include_router(episodes)
    return app
