"""Listwise LLM reranking of one move's first-stage rankings (the Ratio paper, appendix C "LLM reranking").

For each query, the first-stage top ``candidates`` are shown to the model numbered in first-stage order;
the model answers ``{"ranking": [i1, ..., i10]}``, the numbers of its 10 best, best first. The new
ranking is those 10, then every other candidate in first-stage order (so only the top 10 can change).

**Windows.** With ``window >= candidates`` (the default, as in the paper) a query costs one request.
A smaller window slides from the bottom of the list to the top: the first request shows the last
``window`` candidates; each later one shows the previous request's ``select`` best plus the next
``window - select`` candidates above them, always in first-stage order; the last request's choice is
the new top. (For models whose context cannot hold 100 candidates.)

**The repair rule** (every answer goes through it; the counts are reported):

1. The answer must be JSON valid for ``answer_schema`` (an object with a list of at most ``select``
   integers); the LLM client re-asks a schema violation itself, up to ``max_invalid_retries`` times.
2. A number outside 1..n counts as ``out_of_range``, a number already given as ``duplicate``; both are
   dropped. Fewer than ``select`` usable numbers leave ``missing`` slots.
3. An answer with any such defect is re-asked, with the prompt's ``reask`` message naming the
   defects, up to ``max_reasks`` times; the latest answer is kept (a re-ask that fails keeps the
   answer before it).
4. If the kept answer still has missing slots, they are **filled in first-stage order** with the
   highest-ranked candidates not yet chosen; the query's status is then ``repaired``.

A query whose request fails (HTTP error, or an answer still invalid after the client's re-asks) is
``failed``: its ranking is empty, so it scores zero on every metric (failure as zero), never skipped.
A query whose gold is outside the first-stage top ``candidates`` is ``not_sent`` (with
``skip_unexposed``, the paper's rule: its top-10 metrics cannot change) and keeps its first-stage
ranking. Every request goes through ``LLMClient`` (cache, concurrency, retries, Batch API), so a rerun
costs nothing and a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ratio_spark.evaluation.data import CandidatePool, Query
from ratio_spark.evaluation.retrieval.base import Ranking
from ratio_spark.rerank.prompts import RerankPrompt
from ratio_spark.rerank.settings import RerankConfig

if TYPE_CHECKING:
    from ratio_spark.llm import ChatResult, LLMClient

STATUSES = ("reranked", "repaired", "not_sent", "failed")
DEFECTS = ("duplicate", "out_of_range", "missing")


def answer_schema(select: int) -> dict:
    """What the model must return: the numbers of its ``select`` best candidates, best first. Repeated or
    out-of-range numbers pass the schema on purpose: the repair rule handles and counts them."""
    return {
        "title": "rerank",
        "type": "object",
        "properties": {"ranking": {"type": "array", "items": {"type": "integer"}, "maxItems": select}},
        "required": ["ranking"],
        "additionalProperties": False,
    }


@dataclass
class AnswerCheck:
    """One answer read against a window of ``count`` candidates: the usable picks (0-based, best first)
    and what was wrong with it."""

    picks: list[int]
    duplicate: int = 0
    out_of_range: int = 0
    missing: int = 0

    @property
    def defects(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in DEFECTS if getattr(self, name)}

    def problems(self) -> str:
        words = {"duplicate": "repeated", "out_of_range": "out of range", "missing": "missing"}
        return ", ".join(f"{n} {words[name]} number{'s' if n > 1 else ''}" for name, n in self.defects.items())


def check_answer(ranking: Sequence, count: int, select: int) -> AnswerCheck:
    """Steps 2 of the repair rule: keep the first occurrence of each number in 1..count."""
    picks: list[int] = []
    seen: set[int] = set()
    duplicate = out_of_range = 0
    for item in ranking:
        number = int(item) if isinstance(item, (int, float)) and not isinstance(item, bool) and float(item).is_integer() else None
        if number is None or not 1 <= number <= count:
            out_of_range += 1
        elif number in seen:
            duplicate += 1
        elif len(picks) < select:
            seen.add(number)
            picks.append(number - 1)
    return AnswerCheck(picks, duplicate, out_of_range, select - len(picks))


def fill_from_first_stage(picks: list[int], count: int, select: int) -> list[int]:
    """Step 4 of the repair rule: complete the picks with the best-ranked candidates not yet chosen."""
    chosen = set(picks)
    return picks + [i for i in range(count) if i not in chosen][: select - len(picks)]


@dataclass
class Windows:
    """The windows of one query over positions 0..n-1 of its first-stage ranking (see the module doc)."""

    n: int
    size: int
    select: int
    start: int = field(init=False)
    members: list[int] = field(init=False)  # positions shown in the current window
    final: list[int] | None = None

    def __post_init__(self) -> None:
        self.start = max(0, self.n - self.size)
        self.members = list(range(self.start, self.n))

    @property
    def shown(self) -> list[int]:
        """The current window's positions in first-stage order (how the candidates are numbered)."""
        return sorted(self.members)

    @property
    def wanted(self) -> int:
        return min(self.select, len(self.members))

    def advance(self, picks: list[int]) -> None:
        """``picks``: indices into ``shown``, best first."""
        chosen = [self.shown[i] for i in picks]
        if self.start == 0:
            self.final = chosen
            return
        above = max(0, self.start - (self.size - self.select))
        self.members = list(range(above, self.start)) + chosen
        self.start = above


@dataclass
class QueryRerank:
    """The outcome for one query."""

    query_id: str
    status: str  # reranked | repaired | not_sent | failed
    ranking: Ranking
    first_stage_gold_rank: int | None
    requests: int = 0
    cached: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    defects: dict[str, int] = field(default_factory=dict)  # of the answers kept (after re-asks), summed
    error: str | None = None
    windows: list[dict] = field(default_factory=list)  # per request: shown candidate ids, answers, repair

    def record(self) -> dict:
        return {"query_id": self.query_id, "status": self.status, "first_stage_gold_rank": self.first_stage_gold_rank,
                "top": self.ranking.ids[:10], "requests": self.requests, "cached": self.cached, "reasks": self.reasks,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "defects": self.defects, "error": self.error, "windows": self.windows}


@dataclass
class _Open:
    query: Query
    first: Ranking
    ids: list[str]  # the first-stage top n
    windows: Windows
    outcome: QueryRerank
    messages: list[dict] = field(default_factory=list)
    answer: dict | None = None
    check: AnswerCheck | None = None


def _gold_rank(ranking: Ranking, query: Query) -> int | None:
    gold = set(query.gold_ids)
    return next((i for i, cid in enumerate(ranking.ids, start=1) if cid in gold), None)


def _new_ranking(first: Ranking, top_positions: list[int]) -> Ranking:
    """The chosen positions first (best first), then every other candidate in first-stage order; scores
    are rank-based (n, n-1, ...), so a TREC run of it sorts the same way."""
    chosen = set(top_positions)
    order = top_positions + [i for i in range(len(first.ids)) if i not in chosen]
    ids = [first.ids[i] for i in order]
    return Ranking(ids=ids, scores=[float(len(ids) - r) for r in range(len(ids))])


def rerank_move(
    client: "LLMClient",
    prompt: RerankPrompt,
    settings: RerankConfig,
    move: str,
    queries: Sequence[Query],
    rankings: dict[str, Ranking],
    pool: CandidatePool,
    *,
    model: str,
    request_prefix: str = "",
    state_dir: str | Path | None = None,
) -> list[QueryRerank]:
    """Rerank every query of one move; one outcome per query, in the order given."""
    from ratio_spark.llm import ChatRequest

    outcomes: list[QueryRerank] = []
    open_: list[_Open] = []
    for query in queries:
        first = rankings.get(query.query_id) or Ranking([], [])
        gold_rank = _gold_rank(first, query)
        outcome = QueryRerank(query.query_id, "not_sent", first, gold_rank)
        outcomes.append(outcome)
        ids = first.ids[: settings.candidates]
        if not ids or (settings.skip_unexposed and (gold_rank is None or gold_rank > settings.candidates)):
            continue
        outcome.status = "reranked"
        open_.append(_Open(query, first, ids, Windows(len(ids), settings.window, settings.select), outcome))

    # With sliding windows a query costs several requests; the first round alone decides the transport.
    transport = client.choose_transport(model, settings.mode, len(open_), settings.batch_min_requests)
    texts = pool.texts

    def text(cid: str) -> str:
        value = texts[pool.index[cid]]
        cut = settings.max_candidate_chars
        return value if cut is None or len(value) <= cut else value[: cut - 1].rstrip() + "…"

    def send(batch: list[_Open], label: str) -> list["ChatResult"]:
        requests = [ChatRequest(f"{request_prefix}{move}:{o.query.query_id}:{label}", o.messages,
                                answer_schema(o.windows.wanted), settings.max_tokens) for o in batch]
        state = Path(state_dir) / move / label if state_dir else None
        results = client.send(requests, model, transport=transport, state_dir=state,
                              poll_interval_s=settings.batch_poll_interval_s, max_wait_s=settings.batch_max_wait_s,
                              progress=f"rerank {request_prefix}{move} {label}")
        for o, result in zip(batch, results):
            o.outcome.requests += 1
            o.outcome.cached += int(result.cached)
            o.outcome.prompt_tokens += result.prompt_tokens
            o.outcome.completion_tokens += result.completion_tokens
        return results

    round_no = 0
    while active := [o for o in open_ if o.windows.final is None and o.outcome.status != "failed"]:
        round_no += 1
        for o in active:
            shown = [o.ids[p] for p in o.windows.shown]
            o.messages = prompt.messages(move, o.query.text, [text(cid) for cid in shown], o.windows.wanted)
            o.answer, o.check = None, None
            o.outcome.windows.append({"window": round_no, "candidate_ids": shown, "answers": []})
        for o, result in zip(active, send(active, f"w{round_no}")):
            if result.error:
                o.outcome.status, o.outcome.error = "failed", result.error
                o.outcome.windows[-1]["error"] = f"{result.error}: {result.detail or ''}".strip(": ")
                continue
            _take(o, result.data)
        for attempt in range(1, settings.max_reasks + 1):
            retry = [o for o in active if o.outcome.status != "failed" and o.check.defects]
            if not retry:
                break
            for o in retry:
                o.messages = [*o.messages, {"role": "assistant", "content": json.dumps(o.answer)},
                              prompt.reask_message(o.check.problems(), o.windows.wanted, len(o.windows.members))]
                o.outcome.reasks += 1
            for o, result in zip(retry, send(retry, f"w{round_no}r{attempt}")):
                if result.error:  # keep the answer before it; the repair rule fills what it lacks
                    o.outcome.windows[-1]["answers"].append({"error": result.error})
                    continue
                _take(o, result.data)
        for o in active:
            if o.outcome.status == "failed":
                continue
            picks = o.check.picks
            if o.check.missing:
                picks = fill_from_first_stage(picks, len(o.windows.members), o.windows.wanted)
                o.outcome.status = "repaired"
            for name, n in o.check.defects.items():
                o.outcome.defects[name] = o.outcome.defects.get(name, 0) + n
            o.outcome.windows[-1]["picks"] = [o.windows.shown[i] + 1 for i in picks]  # first-stage ranks
            o.windows.advance(picks)

    for o in open_:
        if o.outcome.status == "failed":
            o.outcome.ranking = Ranking([], [])  # failure as zero: no ranking, every metric 0
        else:
            o.outcome.ranking = _new_ranking(o.first, o.windows.final)
    return outcomes


def _take(o: _Open, data: dict) -> None:
    o.answer = data
    o.check = check_answer(data.get("ranking") or [], len(o.windows.members), o.windows.wanted)
    o.outcome.windows[-1]["answers"].append({"ranking": data.get("ranking"), **o.check.defects})
