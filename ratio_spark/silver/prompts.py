"""Judging prompts: versioned files, one per (move, variant), read by ``core.prompts.read_prompt`` and checked at
start-up.

A prompt file is ``<move>/<name>-v<N>.md``: YAML front matter (``id``, ``move``, ``description``) and a
body that becomes the system message. A changed wording gets a new version (a new file), so verdicts in
the ``silver`` table and in the LLM cache always name the exact text that produced them; the sha256 of
the body is recorded as well, so an edit without a new version is still visible.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ratio_spark.core.errors import UserError
from ratio_spark.core.prompts import read_prompt
from ratio_spark.core.schema import MOVES
from ratio_spark.silver.pairs import judge_text

# The verdict every prompt must produce. ``reason`` comes first so that a model that writes its answer
# in order explains before it decides. ``maxLength`` keeps a grammar-constrained small model (llama.cpp)
# from rambling past max_tokens into truncated JSON (the local gemma did, then was re-asked twice):
# 200 characters are at most ~200 tokens, so the answer always closes within the default 256 tokens;
# "one short sentence" fits easily.
VERDICT_SCHEMA: dict = {
    "type": "object",
    "properties": {"reason": {"type": "string", "maxLength": 200}, "accept": {"type": "boolean"}},
    "required": ["reason", "accept"],
    "additionalProperties": False,
}


class PromptError(UserError, ValueError):
    """A prompt file is malformed, or a configured prompt id does not exist."""


@dataclass(frozen=True)
class JudgePrompt:
    move: str
    prompt_id: str  # e.g. "ordered-v1": the name and its version
    description: str
    system: str
    sha256: str  # of the body, first 12 hex digits

    @property
    def version(self) -> str:
        return self.prompt_id.rsplit("-", 1)[1]

    def messages(self, query: str, marker: str, gold: str) -> list[dict]:
        """System: the prompt. User: the marker, then the pair as ``query. Marker, gold`` (appendix E)."""
        marker_shown = " ".join(marker.split())
        marker_shown = marker_shown[:1].upper() + marker_shown[1:]
        user = f"Marker: {marker_shown}\nPassage: {judge_text(query, marker, gold)}"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def _files(prompt_dir: str | Path | None):
    if prompt_dir is None:
        root = resources.files("ratio_spark.silver") / "prompts"
    else:
        root = Path(prompt_dir)
        if not root.is_dir():
            raise PromptError(f"prompt folder {root} does not exist")
    for move_dir in sorted(root.iterdir(), key=lambda p: p.name):
        if move_dir.is_dir():
            for entry in sorted(move_dir.iterdir(), key=lambda p: p.name):
                if entry.name.endswith(".md"):
                    yield move_dir.name, entry


def load_prompts(prompt_dir: str | Path | None = None) -> dict[str, dict[str, JudgePrompt]]:
    """Every prompt, by move and id. Fails on a file whose id, move or body does not check out."""
    prompts: dict[str, dict[str, JudgePrompt]] = {}
    for move, entry in _files(prompt_dir):
        where = f"{move}/{entry.name}"
        file = read_prompt(entry, PromptError, where)
        meta, body, prompt_id = file.meta, file.system, file.id
        if meta.get("move") != move or move not in MOVES:
            raise PromptError(f"{where}: move {meta.get('move')!r} must be the folder name, one of {MOVES}")
        if "JSON" not in body:
            raise PromptError(f"{where}: the body must ask for a JSON answer (JSON mode requires the word)")
        sha = hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]
        prompts.setdefault(move, {})[prompt_id] = JudgePrompt(
            move=move, prompt_id=prompt_id, description=str(meta.get("description", "")), system=body, sha256=sha
        )
    if not prompts:
        raise PromptError(f"no prompt files found under {prompt_dir or 'the packaged prompts'}")
    return prompts


def select_prompts(
    prompts: dict[str, dict[str, JudgePrompt]], selection: dict[str, list[str]]
) -> dict[str, list[JudgePrompt]]:
    """The configured prompts per move, in order; an unknown id names the ids that exist."""
    chosen: dict[str, list[JudgePrompt]] = {}
    for move, ids in selection.items():
        known = prompts.get(move, {})
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise PromptError(
                f"silver.prompts.{move}: unknown prompt id(s) {unknown}; available: {sorted(known) or 'none'}"
            )
        chosen[move] = [known[i] for i in ids]
    return chosen
