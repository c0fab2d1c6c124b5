"""Problem briefs (the paper's A.4): the target's problem with its solution redacted.

Extractive: the abstract's sentences (from the ``sentences`` table) before the first contribution
sentence ("we propose", "this paper presents", ...): the part of an abstract that states the problem.
LLM: a rewrite of title + abstract through ``LLMClient`` (cached), falling back to the extractive brief.
Either way the brief's overlap with the target title's content words is recorded and flagged above a
threshold (the paper's lexical check), never used to drop a target.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from ratio_spark.inspire.settings import BriefConfig

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
BRIEF_PROMPT = "brief.v1.txt"
BRIEF_SCHEMA = {
    "type": "object",
    "properties": {"brief": {"type": "string", "minLength": 1, "maxLength": 1600}},
    "required": ["brief"],
}


def extractive_brief(abstract_sentences: list[str], config: BriefConfig) -> str | None:
    """The sentences before the first contribution sentence, or None when they are too few words."""
    contribution = re.compile(config.contribution_regex)
    kept = []
    for sentence in abstract_sentences:
        if contribution.search(sentence):
            break
        kept.append(sentence.strip())
    brief = " ".join(s for s in kept if s)
    return brief if len(brief.split()) >= config.min_brief_words else None


def brief_requests(targets, config: BriefConfig):
    from ratio_spark.core.prompts import read_prompt
    from ratio_spark.llm import ChatRequest

    prompt = read_prompt(PROMPTS_DIR / BRIEF_PROMPT)
    return [
        ChatRequest(f"brief:{t.paper_id}", prompt.render(title=t.title or "", abstract=t.abstract[: config.max_abstract_chars]),
                    BRIEF_SCHEMA, max_tokens=config.max_tokens)
        for t in targets
    ]


@lru_cache(maxsize=1)
def _analyzer():
    from ratio_spark.evaluation.retrieval.analyzer import Analyzer

    return Analyzer()


def title_overlap(brief: str, title: str | None) -> float:
    """Share of the title's content words (stemmed, stopwords removed) that the brief contains."""
    analyzer = _analyzer()
    words = set(analyzer.unigrams(title or ""))
    return round(len(words & set(analyzer.unigrams(brief))) / len(words), 3) if words else 0.0
