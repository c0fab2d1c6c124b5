"""Versioned prompt files, read one way: every prompt of the project is a ``PromptFile`` from ``read_prompt``.

Two layouts, told apart by the suffix:

* ``<name>-v<N>.md`` (the silver judge, the reranker): YAML front matter (``---`` / mapping / ``---``) whose
  ``id`` is the file name, then a body, the system template; the front matter may hold more templates
  (the reranker's ``user`` and ``reask``) and what the caller checks (``move``, ``relations``).
* ``<name>.v<N>.txt`` (lexicon generation and labelling, Inspire's briefs, grader and agent): ``#`` header
  comments, then a ``[system]`` and a ``[user]`` section.

A new wording is a new file (the version is part of the name); the sha256 of the whole file goes in the
manifests. A missing, non-UTF-8 or malformed file is one line naming it, as the caller's error type.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ratio_spark.core.errors import UserError
from ratio_spark.core.files import read_text

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

MD_ID = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*-v\d+$")  # listwise-v1, ordered-v1
TXT_NAME = re.compile(r"[a-z_]+\.v\d+\.txt")  # generate_markers.v1.txt


class PromptFileError(UserError, ValueError):
    """A prompt file that is missing or malformed (callers pass their own error type)."""


@dataclass(frozen=True)
class PromptFile:
    file: str  # the file name, e.g. "generate_markers.v1.txt", "listwise-v1.md"
    id: str  # the name with its version: "generate_markers.v1", "listwise-v1"
    path: str
    system: str  # the system template
    user: str | None  # the user template of a sectioned file (an .md file keeps its others in ``meta``)
    meta: dict  # the front matter of an .md file, else {}
    sha256: str  # of the whole file
    error: type[Exception] = field(default=PromptFileError, repr=False, compare=False)

    def render(self, **values: str) -> list[dict]:
        """The system and user messages, ``$placeholders`` filled (``string.Template``)."""
        try:
            system = string.Template(self.system).substitute(values)
            user = string.Template(self.user or "").substitute(values)
        except KeyError as exc:
            raise self.error(f"prompt {self.file} needs a value for ${exc.args[0]}") from None
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def split_front_matter(text: str, where: str, error: type[Exception] = PromptFileError) -> tuple[dict, str]:
    """(the front matter as a mapping, the body stripped and ending in one newline); ``error`` names ``where``."""
    if not text.startswith("---\n"):
        raise error(f"{where}: a prompt file starts with '---' and YAML front matter")
    try:
        head, body = text[4:].split("\n---\n", 1)
        meta = yaml.safe_load(head) or {}
    except (ValueError, yaml.YAMLError) as exc:
        raise error(f"{where}: unreadable front matter ({exc})") from None
    if not isinstance(meta, dict):
        raise error(f"{where}: the front matter must be a mapping")
    return meta, body.strip() + "\n"


def _sections(text: str, where: str, error: type[Exception]) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if current is None and line.startswith("#"):
            continue  # header comments
        if line.strip() in ("[system]", "[user]"):
            current = line.strip()[1:-1]
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    if set(sections) != {"system", "user"}:
        raise error(f"{where} must have a [system] and a [user] section (found {sorted(sections)})")
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def read_prompt(path: str | os.PathLike | Traversable, error: type[Exception] = PromptFileError,
                where: str | None = None) -> PromptFile:
    """The prompt file at ``path`` (a path or a packaged resource), checked for its layout; ``where`` names it
    in messages (default: the path)."""
    path = Path(path) if isinstance(path, (str, os.PathLike)) else path
    name, where = path.name, where or str(path)
    if not name.endswith(".md"):
        if not TXT_NAME.fullmatch(name):
            raise error(f"prompt file name {name!r} must look like name.vN.txt (the version is part of the name)")
        if not path.is_file():
            raise error(f"prompt file not found: {path}")
    text = read_text(path, error)
    if name.endswith(".md"):
        meta, system = split_front_matter(text, where, error)
        prompt_id, user = str(meta.get("id", "")), None
        if prompt_id != name.removesuffix(".md") or not MD_ID.match(prompt_id):
            raise error(f"{where}: id {prompt_id!r} must equal the file name and look like name-v1")
    else:
        meta, prompt_id = {}, name.removesuffix(".txt")
        sections = _sections(text, str(path), error)
        system, user = sections["system"], sections["user"]
    return PromptFile(file=name, id=prompt_id, path=str(path), system=system, user=user, meta=meta,
                      sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), error=error)
