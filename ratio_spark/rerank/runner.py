"""Rerank the first-stage systems of an evaluation, and add each reranked pipeline as a system of its own.

Used by ``ratio-spark evaluate --rerank <endpoint>`` (the retrievers it just ran) and ``ratio-spark rerank``
(runs read from disk). The reranked system ``<first stage>+rerank:<endpoint>`` is scored like any other
(every query of the move, failures as zero), so the results tables, the funnel, the intervals and the
paired tests cover it; its per-query rows carry ``rerank_status`` and ``first_stage_gold_rank``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager

import pandas as pd

from ratio_spark.core.markdown import markdown_table
from ratio_spark.evaluation.data import BenchmarkSplit
from ratio_spark.evaluation.runner import EvaluationResult, add_system
from ratio_spark.evaluation.runs import run_folder_name
from ratio_spark.rerank.listwise import DEFECTS, QueryRerank, rerank_move
from ratio_spark.rerank.prompts import RerankPrompt, load_prompt
from ratio_spark.rerank.settings import RerankConfig

if TYPE_CHECKING:
    from ratio_spark.llm import LLMClient

# The columns of the counts that a command prints (all of them go to rerank/counts.csv).
CONSOLE_COLUMNS = ["system", "move", "queries", "not_sent", "reranked", "repaired", "failed", "requests", "cached",
                   "reasks", "answers_with_defects"]
COUNT_COLUMNS = ["system", "first_stage", "move", "queries", "not_sent", "sent", "reranked", "repaired", "failed", "requests",
                 "cached", "reasks", "answers_with_defects", *(f"{d}_numbers" for d in DEFECTS), "prompt_tokens",
                 "completion_tokens"]


def reranked_name(system: str, model: str) -> str:
    return f"{system}+rerank:{model}"


@dataclass
class RerankReport:
    """What reranking did: counts per (system, move), each query's record, the client's usage."""

    model: str
    model_id: str
    prompt: RerankPrompt
    settings: RerankConfig
    counts: pd.DataFrame
    records: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    usage: dict = field(default_factory=dict)
    usage_report: str = ""
    cost_usd: float | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return int(self.counts["failed"].sum()) if not self.counts.empty else 0

    def summary(self) -> dict:
        return {"model": self.model, "model_id": self.model_id, "prompt": self.prompt.prompt_id,
                "prompt_sha256": self.prompt.sha256, "settings": self.settings.model_dump(mode="json"),
                "counts": self.counts.to_dict("records"), "client_usage": self.usage, "cost_usd": self.cost_usd,
                "seconds": round(self.seconds, 1)}

    def markdown(self) -> str:
        s = self.settings
        windows = ("one request per query" if s.window >= s.candidates else
                   f"sliding windows of {s.window} (carrying the best {s.select} upwards)")
        lines = [
            f"# LLM reranking: {self.model} ({self.model_id}), prompt {self.prompt.prompt_id}", "",
            f"The first-stage top {s.candidates}, {windows}; the model returns its {s.select} best; the others keep "
            f"their first-stage order. Queries whose gold is outside the top {s.candidates} are "
            + ("not sent (their top-10 metrics cannot change)." if s.skip_unexposed else "sent too.")
            + f" Repair rule: up to {s.max_reasks} re-ask(s) for repeated, out-of-range or missing numbers, then the "
            "missing slots are filled in first-stage order (`repaired`). A failed query scores zero. Prompt sha256 "
            f"`{self.prompt.sha256[:16]}`.", "",
            markdown_table(["system", "move", "queries", "not sent", "sent", "reranked", "repaired", "failed", "requests",
                            "cached", "re-asks", "answers with defects", "duplicate / out of range / missing numbers",
                            "prompt tok", "completion tok"],
                           [[r.system, r.move, r.queries, r.not_sent, r.sent, r.reranked, r.repaired, r.failed, r.requests,
                             r.cached, r.reasks, r.answers_with_defects,
                             f"{r.duplicate_numbers} / {r.out_of_range_numbers} / {r.missing_numbers}", r.prompt_tokens,
                             r.completion_tokens] for r in self.counts.itertuples(index=False)]),
        ]
        lines += ["", "LLM client usage (this run; cached answers cost nothing):", "", "```", self.usage_report, "```", ""]
        return "\n".join(lines)

    def console(self) -> str:
        """The counts and the client's usage, for the end of a command."""
        with pd.option_context("display.width", 200, "display.max_columns", 30):
            table = self.counts[CONSOLE_COLUMNS].to_string(index=False)
        return "\n== rerank ==\n  " + table.replace("\n", "\n  ") + "\n\nLLM client usage:\n" + self.usage_report

    def failure_note(self) -> str | None:
        """One line when a query failed (a rerun retries only those), else None."""
        if not self.failed:
            return None
        return (f"{self.failed} queries failed; they score zero in every table. Run the same command again: answered "
                "requests come from the cache, only the failed ones are sent.")

    def manifest_inputs(self, endpoint) -> dict[str, dict]:
        """The prompt file and the endpoint's identity (never its key), for the run manifest."""
        from ratio_spark.evaluation.manifest import files_entry, llm_entry

        return {f"prompt:rerank/{self.prompt.prompt_id}": files_entry(self.prompt.path, prompt_id=self.prompt.prompt_id),
                f"llm:{self.model}": llm_entry(endpoint, max_tokens=self.settings.max_tokens)}

    def write(self, folder: str | Path) -> dict[str, str]:
        folder = Path(folder)
        written = {}
        (folder / "rerank").mkdir(parents=True, exist_ok=True)
        self.counts.to_csv(folder / "rerank" / "counts.csv", index=False)
        written["rerank/counts.csv"] = str(folder / "rerank" / "counts.csv")
        for (system, move), records in self.records.items():
            path = folder / "rerank" / run_folder_name(system) / f"{move}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        written["rerank/<system>/<move>.jsonl"] = f"{len(self.records)} files"
        (folder / "rerank.md").write_text(self.markdown())
        written["rerank.md"] = str(folder / "rerank.md")
        return written


def _count_row(system: str, first_stage: str, move: str, outcomes: list[QueryRerank]) -> dict:
    statuses = pd.Series([o.status for o in outcomes], dtype=object).value_counts().to_dict()
    row = {"system": system, "first_stage": first_stage, "move": move, "queries": len(outcomes),
           "not_sent": statuses.get("not_sent", 0), "reranked": statuses.get("reranked", 0),
           "repaired": statuses.get("repaired", 0), "failed": statuses.get("failed", 0),
           "requests": sum(o.requests for o in outcomes), "cached": sum(o.cached for o in outcomes),
           "reasks": sum(o.reasks for o in outcomes),
           "answers_with_defects": sum(1 for o in outcomes for w in o.windows for a in w["answers"]
                                       if any(a.get(d) for d in DEFECTS)),
           "prompt_tokens": sum(o.prompt_tokens for o in outcomes),
           "completion_tokens": sum(o.completion_tokens for o in outcomes)}
    for defect in DEFECTS:
        row[f"{defect}_numbers"] = sum(o.defects.get(defect, 0) for o in outcomes)
    row["sent"] = row["reranked"] + row["repaired"] + row["failed"]
    if row["queries"] != row["not_sent"] + row["sent"]:  # every query is accounted for, once
        raise RuntimeError(f"rerank counts do not reconcile for {system} ({move}): {row}")
    return row


def rerank_systems(result: EvaluationResult, data: BenchmarkSplit, client: "LLMClient", settings: RerankConfig, *,
                   model: str, state_dir: str | Path, log: Callable[[str], None] = print) -> RerankReport:
    """Rerank every first-stage system of ``result`` (or those named in ``settings.systems``) on every move,
    and add the reranked pipelines to ``result``."""
    import time

    prompt = load_prompt(settings.prompt, settings.prompt_dir)
    first_stages = [s for s in result.systems if not s.get("first_stage")]
    known = [s["name"] for s in first_stages]
    unknown = sorted(set(settings.systems or []) - set(known))
    if unknown:
        raise ValueError(f"rerank.systems names {unknown}, which this run does not have; it has {known}")
    chosen = [s for s in first_stages if settings.systems is None or s["name"] in settings.systems]
    endpoint = client.endpoint(model)
    started = time.perf_counter()
    rows, records = [], {}
    for system in chosen:
        name = reranked_name(system["name"], model)
        rankings, columns = {}, {}
        for move, queries in data.queries.items():
            first = result.rankings.get((system["name"], move))
            if not queries or first is None:
                continue
            depth = max((len(r.ids) for r in first.values()), default=0)
            if depth < settings.candidates:
                log(f"[{name}] note: the first-stage run of {move} holds {depth} candidates per query, fewer than "
                    f"rerank.candidates={settings.candidates}; the reranker sees {depth}")
            outcomes = rerank_move(client, prompt, settings, move, queries, first, data.pool, model=model,
                                   request_prefix=f"{system['name']}:", state_dir=Path(state_dir) / run_folder_name(system["name"]))
            rankings[move] = {o.query_id: o.ranking for o in outcomes}
            columns.update({(move, o.query_id): {"rerank_status": o.status,
                                                 "first_stage_gold_rank": o.first_stage_gold_rank} for o in outcomes})
            rows.append(_count_row(name, system["name"], move, outcomes))
            records[(name, move)] = [o.record() for o in outcomes]
            r = rows[-1]
            log(f"[{name}] {move}: {r['queries']} queries, {r['not_sent']} not sent, {r['reranked']} reranked, "
                f"{r['repaired']} repaired, {r['failed']} failed ({r['requests']} requests, {r['cached']} cached)")
        add_system(result, data, {
            "name": name, "label": f"{system['label']} + rerank ({model})", "first_stage": system["name"],
            "reranker": {"model": model, "model_id": endpoint.model, "prompt": prompt.prompt_id,
                         "prompt_sha256": prompt.sha256, "candidates": settings.candidates, "window": settings.window,
                         "select": settings.select},
        }, rankings, columns)
    counts = pd.DataFrame(rows, columns=COUNT_COLUMNS)
    return RerankReport(model=model, model_id=endpoint.model, prompt=prompt, settings=settings, counts=counts,
                        records=records, usage=client.usage(), usage_report=client.usage_report(),
                        cost_usd=client.cost_usd(model), seconds=time.perf_counter() - started)


def rerank_with_endpoint(result: EvaluationResult, data: BenchmarkSplit, settings: RerankConfig,
                         open_client: Callable[[], ContextManager], results_folder: str | Path, *,
                         log: Callable[[str], None] = print) -> tuple[RerankReport, dict]:
    """The second stage of ``evaluation.workflow.write_evaluation``: rerank the first-stage systems of ``result`` in
    place with the endpoint ``settings.model``. ``open_client()`` yields (client, endpoint name), opened only now
    (a local server starts after the first stage). Returns (report, manifest inputs). An interrupt, a batch still running or a bad answer
    reach the caller (a rerun resumes from the cache)."""
    state_dir = Path(settings.batch_state_dir or Path(results_folder) / "rerank" / "batches")
    result.window = settings.candidates
    with open_client() as (client, name):
        report = rerank_systems(result, data, client, settings, model=name, state_dir=state_dir, log=log)
        inputs = report.manifest_inputs(client.endpoint(name))
    return report, inputs
