"""Reranking prompts: versioned files, read by ``core.prompts.read_prompt`` and checked at start-up.

A prompt file is ``prompts/<name>-v<N>.md``: YAML front matter with ``id`` (the file name), a
``description``, the ``relations`` line of every move (the Ratio paper's appendix H.3, word for word, in
``listwise-v1``), the ``user`` template and the ``reask`` template (the follow-up to an answer with
repeated, out-of-range or missing indices); the body is the system template. Templates use ``$name``
placeholders (``string.Template``): the system message needs ``$relation`` and ``$select`` (and may use
``$count``), the user message ``$query``, ``$candidates`` (and ``$count``). A new wording is a new file;
the sha256 of the whole file is recorded in the manifest, so an edit without a new version is visible,
and the LLM cache is keyed by the full request, so an edited prompt is never answered from old entries.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ratio_spark.core.errors import UserError
from ratio_spark.core.prompts import PromptFile, read_prompt
from ratio_spark.core.schema import MOVES

SYSTEM_PLACEHOLDERS = ({"relation", "select"}, {"count"})  # (required, optional)
USER_PLACEHOLDERS = ({"query", "candidates"}, {"count"})
REASK_PLACEHOLDERS = ({"problems"}, {"select", "count"})


class PromptError(UserError, ValueError):
    """A prompt file is malformed, or the configured prompt id does not exist."""


@dataclass(frozen=True)
class RerankPrompt:
    prompt_id: str  # e.g. "listwise-v1": the name and its version
    description: str
    relations: dict[str, str]  # move -> the relation line of the system message
    system: str  # template
    user: str  # template
    reask: str  # template of the follow-up when an answer has repeated, out-of-range or missing indices
    sha256: str  # of the whole file
    path: str

    def messages(self, move: str, query: str, candidates: list[str], select: int) -> list[dict]:
        """System: the instruction with the move's relation line. User: the query and the candidates,
        numbered from 1 in the order given (first-stage order)."""
        numbered = "\n".join(f"[{i}] {' '.join(text.split())}" for i, text in enumerate(candidates, start=1))
        values = {"relation": self.relations[move], "select": str(select), "count": str(len(candidates)),
                  "query": " ".join(query.split()), "candidates": numbered}
        return [{"role": "system", "content": string.Template(self.system).substitute(values)},
                {"role": "user", "content": string.Template(self.user).substitute(values)}]

    def reask_message(self, problems: str, select: int, count: int) -> dict:
        values = {"problems": problems, "select": str(select), "count": str(count)}
        return {"role": "user", "content": string.Template(self.reask).substitute(values)}


def _placeholders(template: str) -> set[str]:
    return {m.group("named") or m.group("braced") for m in string.Template.pattern.finditer(template)
            if m.group("named") or m.group("braced")}


def _check_template(template: str, allowed: tuple[set[str], set[str]], where: str) -> None:
    required, optional = allowed
    found = _placeholders(template)
    if required - found:
        raise PromptError(f"{where}: the template lacks ${', $'.join(sorted(required - found))}")
    if found - required - optional:
        raise PromptError(f"{where}: unknown placeholder(s) ${', $'.join(sorted(found - required - optional))} "
                          f"(allowed: {sorted(required | optional)})")


def checked_prompt(file: PromptFile) -> RerankPrompt:
    """A reranking prompt from its file (``core.prompts.read_prompt``): relations, templates, placeholders."""
    meta, where = file.meta, file.path
    relations = meta.get("relations")
    if not isinstance(relations, dict) or set(relations) != set(MOVES) or not all(
            isinstance(v, str) and v.strip() for v in relations.values()):
        raise PromptError(f"{where}: 'relations' must give one non-empty line for each of {list(MOVES)}")
    user, reask = meta.get("user"), meta.get("reask")
    if not isinstance(user, str) or not user.strip():
        raise PromptError(f"{where}: 'user' (the user message template) is missing")
    if not isinstance(reask, str) or not reask.strip():
        raise PromptError(f"{where}: 'reask' (the follow-up for an unusable answer) is missing")
    system = file.system
    if "JSON" not in system:
        raise PromptError(f"{where}: the system message must ask for a JSON answer (JSON mode requires the word)")
    _check_template(system, SYSTEM_PLACEHOLDERS, f"{where} (system)")
    _check_template(user, USER_PLACEHOLDERS, f"{where} (user)")
    _check_template(reask, REASK_PLACEHOLDERS, f"{where} (reask)")
    return RerankPrompt(prompt_id=file.id, description=str(meta.get("description", "")).strip(),
                        relations={m: relations[m].strip() for m in MOVES}, system=system, user=user.strip(),
                        reask=reask.strip(), sha256=file.sha256, path=file.path)


def prompt_path(prompt_id: str, prompt_dir: str | Path | None = None) -> Path:
    root = Path(prompt_dir) if prompt_dir else Path(str(resources.files("ratio_spark.rerank") / "prompts"))
    return root / f"{prompt_id}.md"


def load_prompt(prompt_id: str, prompt_dir: str | Path | None = None) -> RerankPrompt:
    """The prompt ``<prompt_dir>/<id>.md`` (default: the packaged prompts), checked; an unknown id names
    the ids that exist."""
    path = prompt_path(prompt_id, prompt_dir)
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.md")) if path.parent.is_dir() else []
        raise PromptError(f"rerank.prompt: no prompt {prompt_id!r} in {path.parent}; available: {known or 'none'}")
    return checked_prompt(read_prompt(path, PromptError))
