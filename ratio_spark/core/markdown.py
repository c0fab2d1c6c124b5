"""The one Markdown table writer: every table a results folder or a report shows people (evaluation, rerank,
training, the lexicon's Table 4, Inspire, model cards) is laid out here; callers format their own cells."""

from __future__ import annotations

from typing import Iterable, Sequence


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """``| a | b |`` lines: the header, the ``|---|---|`` rule, one line per row (cells as ``str`` gives them)."""
    def line(cells: Sequence[object]) -> str:
        return "| " + " | ".join(str(c) for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(row) for row in rows)])
