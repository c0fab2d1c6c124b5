"""Build the silver set of a split: load pairs, sample, judge with the selected prompts, write ``silver``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd

from ratio_spark.silver.judge import JudgeRun, combine, judge_pairs
from ratio_spark.silver.pairs import load_pairs
from ratio_spark.silver.prompts import load_prompts, select_prompts
from ratio_spark.silver.sampling import Sample, sample_pairs
from ratio_spark.silver.settings import SilverConfig
from ratio_spark.silver.table import silver_rows, write_silver

if TYPE_CHECKING:
    from ratio_spark.llm import LLMClient


@dataclass
class SilverBuild:
    sample: Sample
    run: JudgeRun
    outcome: pd.DataFrame  # query_id, status, accepted
    location: str

    def counts(self) -> pd.DataFrame:
        """Per move: sampled, accepted, rejected, failed (sampled = accepted + rejected + failed)."""
        joined = self.sample.pairs[["query_id", "move"]].merge(self.outcome, on="query_id", how="left")
        counts = joined.pivot_table(index="move", columns="status", values="query_id", aggfunc="count", fill_value=0)
        for status in ("accepted", "rejected", "failed"):
            if status not in counts.columns:
                counts[status] = 0
        counts = counts[["accepted", "rejected", "failed"]]
        counts.insert(0, "sampled", joined.groupby("move").size())
        counts["accept_rate"] = counts["accepted"] / (counts["accepted"] + counts["rejected"]).where(lambda s: s > 0)
        assert (counts["sampled"] == counts[["accepted", "rejected", "failed"]].sum(axis=1)).all()
        return counts.reset_index()


def build_silver(
    silver: SilverConfig,
    location: Callable[[str], str],
    client: "LLMClient",
    *,
    split: str | None = None,
) -> SilverBuild:
    split = split or silver.split
    pairs = load_pairs(location, split)
    sample = sample_pairs(pairs, silver.sample, seed=silver.seed, stratify_by=silver.stratify_by)
    moves = sorted(sample.pairs["move"].unique())
    prompts = select_prompts(load_prompts(silver.prompt_dir), {m: silver.prompts[m] for m in moves})
    state_dir = Path(silver.batch_state_dir or f"{location('silver').rstrip('/')}_batches") / split
    run = judge_pairs(
        client, sample.pairs, prompts, model=silver.model, mode=silver.mode, batch_state_dir=state_dir,
        batch_min_requests=silver.batch_min_requests, batch_poll_interval_s=silver.batch_poll_interval_s,
        batch_max_wait_s=silver.batch_max_wait_s, short_circuit=silver.short_circuit,
        max_tokens=silver.max_tokens,
    )
    outcome = combine(run.verdicts)
    table = silver_rows(sample.pairs, run.verdicts, outcome, model=run.model, model_id=run.model_id, seed=silver.seed)
    out = location("silver")
    write_silver(table, out)
    return SilverBuild(sample=sample, run=run, outcome=outcome, location=out)
