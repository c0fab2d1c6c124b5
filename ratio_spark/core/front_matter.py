"""Files with YAML front matter (``---`` / mapping / ``---`` / body): the versioned prompt files of the silver
judge and of the reranker."""

from __future__ import annotations

import yaml


def split_front_matter(text: str, where: str, error: type[Exception] = ValueError) -> tuple[dict, str]:
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
