"""The two-prompt LLM judge: every sampled pair is asked each selected prompt of its move, through the
project's LLM client (``ratio_spark.llm``); a pair is silver only if every selected prompt accepts it.

The client caches every answer on disk as soon as it arrives (keyed by the full request), so a killed or
failed run is resumed by running it again: answered requests come from the cache and cost nothing, and
only the missing ones are sent. Requests that failed are not cached and are retried by the rerun; until
then their pairs have ``status = failed`` and ``accepted = null``, never a silent reject.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pandas as pd

from ratio_spark.silver.prompts import VERDICT_SCHEMA, JudgePrompt

if TYPE_CHECKING:
    from ratio_spark.llm import ChatResult, LLMClient

SKIPPED = "skipped_after_reject"

VERDICT_COLUMNS = [
    "query_id", "move", "position", "prompt_id", "prompt_sha256", "accept", "reason", "error", "cached",
    "prompt_tokens", "completion_tokens",
]


def request_id(query_id: str, prompt: JudgePrompt) -> str:
    return f"{query_id}:{prompt.move}/{prompt.prompt_id}"


@dataclass
class JudgeRun:
    """The verdicts of one judge run (one row per pair and prompt) and how they were obtained."""

    verdicts: pd.DataFrame
    model: str  # the endpoint name
    model_id: str  # the server's model id
    transport: Literal["sync", "batch"]
    usage: dict = field(default_factory=dict)  # the client's own counters, per endpoint
    usage_report: str = ""  # the client's usage table (with a USD estimate where the endpoint has prices)
    cost_usd: float | None = None  # the client's estimate for this endpoint; None without prices

    def cost_report(self) -> pd.DataFrame:
        """Per move, prompt and model: requests, cached, sent, failed, skipped, and the tokens paid for
        in this run (cached answers cost nothing, so a rerun reports zero)."""
        v = self.verdicts
        skipped = v["error"].eq(SKIPPED)
        sent = ~v["cached"] & ~skipped
        frame = v.assign(
            requests=~skipped, cached_=v["cached"] & ~skipped, sent=sent,
            failed=v["error"].notna() & ~skipped, skipped=skipped,
            paid_prompt_tokens=v["prompt_tokens"].where(sent, 0),
            paid_completion_tokens=v["completion_tokens"].where(sent, 0),
        )
        report = (
            frame.groupby(["move", "prompt_id"], sort=True)[
                ["requests", "cached_", "sent", "failed", "skipped", "paid_prompt_tokens", "paid_completion_tokens"]
            ].sum().reset_index().rename(columns={"cached_": "cached"})
        )
        report.insert(2, "model", self.model)
        return report.astype({c: "int64" for c in report.columns if c not in ("move", "prompt_id", "model")})


def _to_verdict(query_id: str, position: int, prompt: JudgePrompt, result: "ChatResult") -> dict:
    accept = reason = None
    error = result.error
    if error is None:
        data = result.data or {}
        accept, reason = data.get("accept"), data.get("reason")
        if not isinstance(accept, bool) or not isinstance(reason, str):
            accept, reason, error = None, None, "schema_mismatch"
    return {
        "query_id": query_id, "move": prompt.move, "position": position, "prompt_id": prompt.prompt_id,
        "prompt_sha256": prompt.sha256, "accept": accept, "reason": reason, "error": error,
        "cached": bool(result.cached), "prompt_tokens": int(result.prompt_tokens or 0),
        "completion_tokens": int(result.completion_tokens or 0),
    }


def _skipped(query_id: str, position: int, prompt: JudgePrompt) -> dict:
    return {
        "query_id": query_id, "move": prompt.move, "position": position, "prompt_id": prompt.prompt_id,
        "prompt_sha256": prompt.sha256, "accept": None, "reason": None, "error": SKIPPED, "cached": False,
        "prompt_tokens": 0, "completion_tokens": 0,
    }


def judge_pairs(
    client: "LLMClient",
    pairs: pd.DataFrame,
    prompts: dict[str, list[JudgePrompt]],
    *,
    model: str,
    mode: Literal["auto", "sync", "batch"] = "sync",
    batch_state_dir: str | Path | None = None,
    batch_min_requests: int = 1000,
    batch_poll_interval_s: float = 30,
    batch_max_wait_s: float | None = None,
    short_circuit: bool = False,
    max_tokens: int = 256,
) -> JudgeRun:
    """Ask every pair (columns query_id, move, query_text_original, marker, gold_text_original) each
    prompt of its move. With ``short_circuit``, prompt k is asked only where prompts 1..k-1 accepted."""
    from ratio_spark.llm import ChatRequest

    missing = sorted(set(pairs["move"]) - set(prompts))
    if missing:
        raise ValueError(f"no prompts selected for move(s) {missing}")
    endpoint = client.endpoint(model)
    depth = max((len(p) for m, p in prompts.items() if m in set(pairs["move"])), default=0)
    transport = client.choose_transport(model, mode, len(pairs) * max(depth, 1), batch_min_requests)
    if transport == "batch" and batch_state_dir is None:
        raise ValueError("the Batch API needs a state folder (silver.batch_state_dir) to resume from")

    rows: list[dict] = []
    still_open = {qid: True for qid in pairs["query_id"]}
    positions = [0] if not short_circuit else list(range(depth))
    for stage, position in enumerate(positions):
        jobs: list[tuple] = []  # (pair row, prompt position, prompt)
        for pair in pairs.itertuples(index=False):
            move_prompts = prompts[pair.move]
            wanted = range(len(move_prompts)) if not short_circuit else [position] if position < len(move_prompts) else []
            for k in wanted:
                if short_circuit and not still_open[pair.query_id]:
                    rows.append(_skipped(pair.query_id, k, move_prompts[k]))
                else:
                    jobs.append((pair, k, move_prompts[k]))
        # Grouped by prompt: consecutive requests then share the system prompt as a prefix, which a
        # llama.cpp server evaluates once and reuses (on CPU, 2-3 s instead of 25+ s per request for the
        # local gemma model when prompts alternate).
        jobs.sort(key=lambda job: (job[2].move, job[1], job[0].query_id))
        requests = [
            ChatRequest(
                request_id=request_id(pair.query_id, prompt),
                messages=prompt.messages(pair.query_text_original, pair.marker, pair.gold_text_original),
                schema=VERDICT_SCHEMA,
                max_tokens=max_tokens,
            )
            for pair, _, prompt in jobs
        ]
        if not requests:
            continue
        label = f"judge {stage + 1}/{len(positions)}" if short_circuit else "judge"
        state = Path(batch_state_dir) / (f"stage{stage + 1}" if short_circuit else "all") if batch_state_dir else None
        results = client.send(requests, model, transport=transport, state_dir=state,
                              poll_interval_s=batch_poll_interval_s, max_wait_s=batch_max_wait_s, progress=label)
        by_id = {r.request_id: r for r in results}
        for (pair, k, prompt), req in zip(jobs, requests):
            verdict = _to_verdict(pair.query_id, k, prompt, by_id[req.request_id])
            rows.append(verdict)
            if verdict["accept"] is not True:
                still_open[pair.query_id] = False
    verdicts = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    verdicts = verdicts.sort_values(["query_id", "position"], kind="stable").reset_index(drop=True)
    return JudgeRun(verdicts=verdicts, model=model, model_id=endpoint.model, transport=transport,
                    usage=client.usage(), usage_report=client.usage_report(), cost_usd=client.cost_usd(model))


def combine(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per pair: ``status`` accepted / rejected / failed and ``accepted`` (the AND rule).

    A pair with a failed request is ``failed`` (accepted null) unless another prompt already rejected
    it: the AND rule then rejects it whatever the missing verdict says.
    """
    grouped = verdicts.groupby("query_id", sort=True)
    any_reject = grouped["accept"].apply(lambda s: bool((s == False).any()))  # noqa: E712 (nullable)
    any_failed = grouped["error"].apply(lambda s: bool((s.notna() & (s != SKIPPED)).any()))
    out = pd.DataFrame({"any_reject": any_reject, "any_failed": any_failed})
    out["status"] = out.apply(
        lambda r: "rejected" if r.any_reject else ("failed" if r.any_failed else "accepted"), axis=1
    )
    out["accepted"] = out["status"].map({"accepted": True, "rejected": False, "failed": None})
    return out[["status", "accepted"]].reset_index()
