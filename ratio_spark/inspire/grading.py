"""Grading a target's cited antecedents into tiers (the paper's A.3): a documented rule, or an LLM grader.

A target may list one corpus paper under several bibliography entries (duplicates); they are merged
into one ``CitedPaper`` first, with their mentions added up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ratio_spark.inspire.settings import GradingConfig

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
GRADE_PROMPT = "grade_antecedent.v1.txt"
GRADE_SCHEMA = {
    "type": "object",
    "properties": {
        "rationale": {"type": "string", "maxLength": 300},
        "role": {"type": "string", "maxLength": 60},
        "tier": {"type": "integer", "minimum": 0, "maximum": 3},
    },
    "required": ["rationale", "role", "tier"],
}


@dataclass
class CitedPaper:
    """One corpus paper a target cites, its bibliography entries merged."""

    paper_id: str
    pub_date: object  # datetime.date
    entry_ids: list[str] = field(default_factory=list)
    mention_count: int = 0
    mention_sections: list[str] = field(default_factory=list)
    mention_sentence_ids: list[str] = field(default_factory=list)
    tier: int = 0
    grader: str = "rule"
    role: str | None = None
    rationale: str | None = None

    def method_mentions(self, method_heading: re.Pattern) -> int:
        return sum(1 for heading in self.mention_sections if heading and method_heading.search(heading))


def merge_entries(rows: list[dict]) -> list[CitedPaper]:
    """Resolved references of one target -> one CitedPaper per cited corpus paper (entries in bibliography order)."""
    merged: dict[str, CitedPaper] = {}
    for row in sorted(rows, key=lambda r: r["entry_idx"]):
        cited = merged.setdefault(row["resolved_paper_id"], CitedPaper(row["resolved_paper_id"], row["resolved_pub_date"]))
        cited.entry_ids.append(row["entry_id"])
        cited.mention_count += int(row["mention_count"] or 0)
        cited.mention_sections.extend(row["mention_sections"] or [])
        cited.mention_sentence_ids.extend(row["mention_sentence_ids"] or [])
    return list(merged.values())


def rule_tier(cited: CitedPaper, config: GradingConfig, method_heading: re.Pattern) -> int:
    """The tier of the first rule that matches (0: none does, not an antecedent)."""
    in_method = cited.method_mentions(method_heading) > 0
    for rule in config.rules:
        if cited.mention_count >= rule.min_mentions and (in_method or not rule.in_method_section):
            return rule.tier
    return 0


def grade_by_rule(cited: list[CitedPaper], config: GradingConfig) -> None:
    method_heading = re.compile(config.method_heading_regex)
    for paper in cited:
        paper.tier, paper.grader = rule_tier(paper, config, method_heading), "rule"


def grading_requests(target, cited: list[CitedPaper], papers: dict, contexts: dict[str, str]):
    """One ChatRequest per cited paper: target title and abstract, cited title and abstract, citing sentences."""
    from ratio_spark.core.prompts import read_prompt
    from ratio_spark.llm import ChatRequest

    prompt = read_prompt(PROMPTS_DIR / GRADE_PROMPT)
    requests = []
    for paper in cited:
        source = papers.get(paper.paper_id)
        sentences = [contexts[s] for s in paper.mention_sentence_ids if s in contexts][:5]
        messages = prompt.render(
            target_title=target.title or "", target_abstract=target.abstract[:1800],
            cited_title=(source.title if source else "") or "", cited_abstract=(source.abstract if source else "")[:1200],
            contexts="\n".join(f"- {s}" for s in sentences) or "(no citing sentence found)",
        )
        requests.append(ChatRequest(f"{target.paper_id}->{paper.paper_id}", messages, GRADE_SCHEMA))
    return requests


def apply_llm_grades(cited: list[CitedPaper], results, config: GradingConfig) -> int:
    """Take each valid LLM grade; a failed one keeps the rule's tier (grader ``rule_fallback``). Returns failures."""
    failures = 0
    for paper, result in zip(cited, results):
        if result.data is None:
            failures += 1
            paper.grader = "rule_fallback"
            continue
        paper.tier = int(result.data["tier"])
        paper.grader = f"llm:{result.model}"
        paper.role = str(result.data.get("role") or "")[:60] or None
        paper.rationale = str(result.data.get("rationale") or "")[:300] or None
    return failures


def select_antecedents(cited: list[CitedPaper], config: GradingConfig) -> list[CitedPaper]:
    """Graded papers (tier >= 1), highest gain first, then most mentioned, then id; at most max_antecedents."""
    graded = [p for p in cited if p.tier >= 1]
    graded.sort(key=lambda p: (-config.gains[p.tier], -p.mention_count, p.paper_id))
    return graded[: config.max_antecedents]
