"""The ``inspire:`` configuration section (``ratio-spark inspire``; docs/inspire.md), typed and validated.

Pure pydantic, no import of ``ratio_spark.config`` (which embeds it as one field) and nothing heavy.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ratio_spark.core.schema import PrefixMode
from ratio_spark.core.strict import RegexPattern, StrictModel


class TargetsConfig(StrictModel):
    """Which papers become targets: published in [start, end], not surveys, at most ``max_targets``
    (a seeded sample, in paper id order, when there are more)."""

    start: dt.date = dt.date(2018, 1, 1)
    end: dt.date = dt.date(2018, 12, 31)
    max_targets: int | None = Field(None, ge=1)
    seed: int = 13
    exclude_title_regex: RegexPattern = r"(?i)\b(survey|review|overview|tutorial)\b"


    @model_validator(mode="after")
    def _ordered(self) -> "TargetsConfig":
        if self.end < self.start:
            raise ValueError(f"targets.end {self.end} is before targets.start {self.start}")
        return self


class TierRule(StrictModel):
    """A target's reference gets ``tier`` when it has at least ``min_mentions`` in-text mentions and, if
    ``in_method_section``, at least one of them in a section whose heading matches ``method_heading_regex``."""

    tier: int = Field(ge=1, le=3)
    min_mentions: int = Field(1, ge=0)
    in_method_section: bool = False


def default_rules() -> list[TierRule]:
    return [
        TierRule(tier=3, min_mentions=3, in_method_section=True),
        TierRule(tier=2, min_mentions=2),
        TierRule(tier=2, min_mentions=1, in_method_section=True),
        TierRule(tier=1, min_mentions=1),
    ]


class GradingConfig(StrictModel):
    """How antecedents are graded into tiers T1-T3 (T0: not an antecedent, removed).

    ``rule``: the first of ``rules`` that matches, in order (default: T3 = 3+ mentions with one in a method
    section; T2 = 2+ mentions, or one in a method section; T1 = cited in the text once; T0 = listed in
    the bibliography but never cited in the text). ``llm``: the endpoint ``model`` grades each reference
    from the target's abstract, the reference's title and abstract, and the sentences that cite it; an
    answer that fails falls back to the rule and is counted.
    """

    grader: Literal["rule", "llm"] = "rule"
    rules: list[TierRule] = Field(default_factory=default_rules)
    method_heading_regex: RegexPattern = (
        r"(?i)\b(method|methods|methodology|approach|model|models|architecture|algorithm|framework|"
        r"proposed|our|system|training|learning|implementation)\b"
    )
    gains: dict[int, float] = Field(default_factory=lambda: {1: 1.0, 2: 3.0, 3: 7.0})  # the paper's conceptual gains
    max_antecedents: int = Field(10, ge=1)  # the paper caps the graded set at ten (by gain, then mentions)
    min_antecedents: int = Field(2, ge=1)  # targets with fewer graded antecedents are dropped
    model: str | None = None  # an endpoint of the llm: section, for grader: llm
    max_tokens: int = Field(200, ge=16)


    @field_validator("gains")
    @classmethod
    def _three_tiers(cls, value: dict[int, float]) -> dict[int, float]:
        if sorted(value) != [1, 2, 3] or any(g <= 0 for g in value.values()):
            raise ValueError("gains must give a positive gain for each of the tiers 1, 2 and 3")
        return value

    @model_validator(mode="after")
    def _model_for_llm(self) -> "GradingConfig":
        if self.grader == "llm" and not self.model:
            raise ValueError("grading.grader llm needs grading.model (an endpoint name of the llm: section)")
        return self


class BriefConfig(StrictModel):
    """The problem brief: the target's problem statement with its solution redacted.

    ``extractive``: the abstract's sentences before its first contribution sentence
    (``contribution_regex``: the first sentence that announces the authors' own work). ``llm``: the
    endpoint ``model`` rewrites title + abstract (at most ``max_abstract_chars``) into a brief; a failed
    answer falls back to the extractive brief.
    A brief sharing ``flag_title_overlap`` or more of the target title's content words is flagged
    (the paper's lexical check), not dropped.
    """

    mode: Literal["extractive", "llm"] = "extractive"
    model: str | None = None
    max_abstract_chars: int = Field(1800, ge=200)
    max_tokens: int = Field(400, ge=32)
    # A contribution sentence announces the authors' own work: "we (also) propose|present|show|use ...",
    # "this paper describes ...", "in this paper", "our approach|model|...", "the proposed", "novel".
    # "We consider / study / focus on X" states the problem and is kept.
    contribution_regex: RegexPattern = (
        r"(?i)\b(?:(?:we|this (?:paper|work|article|study|note))(?:\s+(?:\w+ly|also|then|first|further|here|now))*"
        r"\s+(?:propos|present|introduc|describ|develop|design|build|built|creat|collect|construct|seek|aim|use|"
        r"employ|apply|extend|adapt|leverag|train|formulat|cast|frame|show|demonstrat|find|achiev|obtain|outperform|"
        r"evaluat|compar|releas|provid|offer|explor|investigat|tackl|address|argu|report|perform|conduct|experiment|"
        r"test|analy[sz]|examin|learn|model|implement|combin|augment|improv|incorporat|exploit|enhanc|annotat|"
        r"make|treat|view|reformulat|establish|identif|captur|integrat|util)\w*"
        r"|in this (?:paper|work|article|study)|here,? we|our (?:approach|method|model|system|framework|results?|"
        r"experiments?|work|analysis|findings|contributions?|algorithm|technique|architecture)|the proposed|novel)\b"
    )
    min_brief_words: int = Field(12, ge=1)
    flag_title_overlap: float = Field(0.5, ge=0, le=1)


    @model_validator(mode="after")
    def _model_for_llm(self) -> "BriefConfig":
        if self.mode == "llm" and not self.model:
            raise ValueError("brief.mode llm needs brief.model (an endpoint name of the llm: section)")
        return self


class SearchConfig(StrictModel):
    """The date-gated search service (TimeMachine): what it indexes and what one episode may do."""

    fields: list[Literal["title", "abstract", "body"]] = Field(default_factory=lambda: ["title", "abstract"])
    max_body_chars: int = Field(20_000, ge=0)  # body text indexed per paper when fields has body
    budget: int = Field(20, ge=1)  # search_papers calls per episode
    default_limit: int = Field(10, ge=1)
    max_limit: int = Field(20, ge=1)
    snippet_chars: int = Field(600, ge=0)  # abstract characters returned per result
    dense_prefix: PrefixMode = "none"  # not instructions: a search has no move to instruct

    @field_validator("dense_prefix")
    @classmethod
    def _no_move_here(cls, value: str) -> str:
        if value == "instructions":
            raise ValueError("the search service has no move to instruct: use none, generic or recommended")
        return value


class AgentConfig(StrictModel):
    """The agent harness. ``tool_choice``: ``auto`` (the model decides), ``required`` (OpenAI: some tool
    each turn), ``scripted`` (names the tool each turn: search_papers until the budget or turn limit is
    near, then submit_answer; for servers such as llama-cpp-python's that support only a named tool).
    ``tool_results_role``: ``user`` for chat formats without a tool role (gemma drops tool messages).
    ``constrain_submission``: the submit_answer schema enumerates the ids exposed so far."""

    model: str | None = None  # an endpoint of the llm: section
    max_turns: int = Field(24, ge=1)  # model calls per episode
    max_malformed: int = Field(5, ge=0)  # turns without a valid tool call before the episode is abandoned
    max_tokens: int = Field(400, ge=8)
    tool_choice: Literal["auto", "required", "scripted"] = "auto"
    tool_results_role: Literal["tool", "user"] = "tool"
    constrain_submission: bool = False
    scripted_searches: int = Field(3, ge=0)  # scripted: searches before the submission


class ScoringConfig(StrictModel):
    k: int = Field(10, ge=1)
    require_exposed: bool = True  # a submitted id the episode never saw is dropped (so G_selected <= G_exposed)
    multi_hit: list[int] = Field(default_factory=lambda: [1, 3, 5])
    first_exposures: int = Field(50, ge=1)  # exposure recall among the first N unique ids (the paper's 50)
    bootstrap_resamples: int = Field(2000, ge=100)
    confidence: float = Field(0.95, gt=0, lt=1)
    seed: int = 0


class InspireConfig(StrictModel):
    """``ratio-spark inspire``: build instances from the Delta tables, serve them, run policies, score."""

    root: str = "data/inspire"  # instance versions live in <root>/<version>/
    version: str = "v1"
    targets: TargetsConfig = Field(default_factory=TargetsConfig)
    cutoff_months: int = Field(3, ge=0)  # cutoff = target date minus this many months
    max_age_years: int | None = Field(4, ge=0)  # antecedents older than this (before the cutoff) stay unlabelled
    grading: GradingConfig = Field(default_factory=GradingConfig)
    brief: BriefConfig = Field(default_factory=BriefConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    scoring: ScoringConfig = Field(default_factory=ScoringConfig)

    @field_validator("version")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", value):
            raise ValueError("version must be a folder name (letters, digits, '.', '_', '-')")
        return value
