"""Policies that run episodes against the Inspire service over HTTP: the LLM agent and one-shot baselines.

The agent loop (the paper's B.1 protocol): the system and user prompts (``prompts/agent.v1.txt``) carry
the brief, the cutoff and the budget; each turn the model answers through ``LLMClient.chat_with_tools``
(any OpenAI-compatible endpoint, cached); every tool call it makes is forwarded *as written* to the
service's ``/call`` endpoint, so malformed calls are judged and logged in one place; the service's
answer goes back to the model. The episode ends at a submission, after ``max_turns`` model calls, or
after ``max_malformed`` turns without a valid call; an episode that ends without a submission scores
zero. A failed model call (HTTP error, timeout) ends the episode the same way, counted.

Baselines (no model): one ``search_papers`` call with the brief as the query and ``limit = k``, then
``submit_answer`` with the returned ids in order: BM25 or dense one-shot retrieval, through the same
service, trajectory files and scorer as the agent.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ratio_spark.inspire.settings import AgentConfig

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
AGENT_PROMPT = "agent.v1.txt"


class ServiceClient:
    """The service's HTTP API (httpx)."""

    def __init__(self, base_url: str, timeout_s: float = 120):
        import httpx

        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s)

    def _post(self, path: str, body: dict) -> dict:
        response = self._http.post(path, json=body)
        response.raise_for_status()
        return response.json()

    def start(self, instance_id: str, run_id: str) -> dict:
        return self._post("/episodes", {"instance_id": instance_id, "run_id": run_id})

    def call(self, episode_id: str, name: Any, arguments: Any) -> dict:
        return self._post(f"/episodes/{episode_id}/call", {"name": name, "arguments": arguments})

    def finish(self, episode_id: str, reason: str) -> dict:
        return self._post(f"/episodes/{episode_id}/finish", {"reason": reason})

    def close(self) -> None:
        self._http.close()


@dataclass
class EpisodeRecord:
    """What the policy side knows of an episode (the service's trajectory file has the rest)."""

    run_id: str
    instance_id: str
    episode_id: str
    policy: str
    status: str
    turns: int = 0  # model calls
    malformed_turns: int = 0  # turns without any valid tool call
    llm_errors: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_turns: int = 0
    seconds: float = 0.0


def one_shot(service: ServiceClient, instance_id: str, run_id: str, k: int, policy: str) -> EpisodeRecord:
    """The non-agent baseline: search once with the brief, submit what came back, in order."""
    started = time.time()
    episode = service.start(instance_id, run_id)
    found = service.call(episode["episode_id"], "search_papers", {"query": episode["brief"], "limit": k})
    ids = [r["paper_id"] for r in found.get("results", [])]
    done = service.call(episode["episode_id"], "submit_answer", {"paper_ids": ids})
    return EpisodeRecord(run_id, instance_id, episode["episode_id"], policy, done.get("status", "error"),
                         seconds=round(time.time() - started, 3))


def _tools_for_turn(tools: list[dict], exposed: list[str], constrain: bool) -> list[dict]:
    """The tools as sent this turn; with ``constrain`` the submission may only name ids seen so far.

    Length bounds (``maxLength``) stay with the service, which enforces them: a server that turns the schema
    into a grammar (llama.cpp) expands ``maxLength: 4000`` into a rule per character and fails to parse it."""
    out = json.loads(json.dumps(tools))
    for tool in out:
        for prop in tool["function"]["parameters"].get("properties", {}).values():
            prop.pop("maxLength", None)
        if constrain and exposed and tool["function"]["name"] == "submit_answer":
            tool["function"]["parameters"]["properties"]["paper_ids"]["items"]["enum"] = sorted(set(exposed))
    return out


def _tool_choice(settings: AgentConfig, searches_done: int, turns_left: int):
    if settings.tool_choice == "auto":
        return None
    if settings.tool_choice == "required":
        return "required"
    name = "search_papers" if searches_done < settings.scripted_searches and turns_left > 1 else "submit_answer"
    return {"type": "function", "function": {"name": name}}


def _result_messages(call: dict, answer: dict, role: str) -> list[dict]:
    content = json.dumps(answer, ensure_ascii=False)
    if role == "tool":
        return [{"role": "tool", "tool_call_id": call["id"], "content": content}]
    return [{"role": "user", "content": f"Result of {call['name']}: {content}"}]


def _assistant_message(result, role: str) -> dict:
    if role == "tool":
        calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for c in result.tool_calls]
        return {"role": "assistant", "content": result.content, **({"tool_calls": calls} if calls else {})}
    text = result.content or ""
    for c in result.tool_calls:
        text += f"\nCall {c['name']} {c['arguments']}"
    return {"role": "assistant", "content": text.strip() or "(no answer)"}


def agent_episode(service: ServiceClient, client, model: str, instance_id: str, run_id: str,
                  settings: AgentConfig) -> EpisodeRecord:
    """One episode of the LLM agent (see the module doc)."""
    from ratio_spark.core.prompts import read_prompt
    from ratio_spark.llm import ToolChatRequest

    started = time.time()
    episode = service.start(instance_id, run_id)
    eid = episode["episode_id"]
    record = EpisodeRecord(run_id, instance_id, eid, f"agent:{model}", "running")
    messages = read_prompt(PROMPTS_DIR / AGENT_PROMPT).render(
        brief=episode["brief"], cutoff=episode["cutoff"], budget=str(episode["search_budget"]),
        max_submission=str(episode["max_submission"]))
    exposed: list[str] = []
    searches = 0
    done = False
    while not done and record.turns < settings.max_turns:
        tools = _tools_for_turn(episode["tools"], exposed, settings.constrain_submission)
        choice = _tool_choice(settings, searches, settings.max_turns - record.turns)
        result = client.chat_with_tools(ToolChatRequest(f"{eid}:{record.turns}", messages, tools, choice,
                                                        settings.max_tokens), model)
        record.turns += 1
        if result.error:
            record.llm_errors.append(result.error)
            break
        record.prompt_tokens += result.prompt_tokens
        record.completion_tokens += result.completion_tokens
        record.cached_turns += int(result.cached)
        messages = [*messages, _assistant_message(result, settings.tool_results_role)]
        valid = False
        for call in result.tool_calls:
            answer = service.call(eid, call["name"], call["arguments"])
            valid = valid or answer.get("ok", False)
            if call["name"] == "search_papers" and answer.get("ok"):
                searches += 1
                exposed += [r["paper_id"] for r in answer["results"]]
            messages += _result_messages(call, answer, settings.tool_results_role)
            if answer.get("done"):
                done, record.status = True, answer.get("status", "submitted")
                break
        if not result.tool_calls:  # logged by the service as a no_tool_call error, with the text
            answer = service.call(eid, None, (result.content or "")[:500])
            messages.append({"role": "user", "content": answer["detail"]})
        if not valid:
            record.malformed_turns += 1
            if record.malformed_turns > settings.max_malformed:
                break
    if not done:
        reason = "llm_error" if record.llm_errors else (
            "too_many_malformed_turns" if record.malformed_turns > settings.max_malformed else "turn_limit")
        record.status = service.finish(eid, reason)["status"]
    record.seconds = round(time.time() - started, 3)
    return record


def write_records(path: str | Path, records: list[EpisodeRecord]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")
