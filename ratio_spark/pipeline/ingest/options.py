"""What a reader needs to know, flattened from the configuration so it ships cheaply to executors."""

from __future__ import annotations

from dataclasses import dataclass, field

from ratio_spark.core.text import collapse_whitespace, dehyphenate
from ratio_spark.pipeline.settings import IngestConfig, InputConfig


@dataclass(frozen=True)
class ReaderOptions:
    input_name: str
    format: str
    date_rules: list[str] = field(default_factory=lambda: ["source", "anthology_id"])
    min_year: int = 1900
    max_year: int = 2100
    min_body_chars: int = 200
    dehyphenate: bool = True
    exclude_path_regex: str | None = None

    @classmethod
    def from_config(cls, inp: InputConfig, ingest: IngestConfig) -> "ReaderOptions":
        return cls(
            input_name=inp.name,
            format=inp.format,
            date_rules=list(inp.date_rules),
            min_year=ingest.min_year,
            max_year=ingest.max_year,
            min_body_chars=ingest.min_body_chars,
            dehyphenate=inp.dehyphenate,
            exclude_path_regex=inp.exclude_path_regex,
        )

    def clean(self, text: str) -> str:
        """A paragraph or heading as every reader keeps it: whitespace collapsed, PDF hyphens joined (if asked)."""
        text = collapse_whitespace(text)
        return dehyphenate(text) if self.dehyphenate else text

    def body_shortfall(self, sections: list[dict]) -> str | None:
        """Why the paper's text is too short to keep (``Reason.EMPTY_BODY``'s detail), or None."""
        body_chars = sum(len(p) for s in sections for p in s["paragraphs"])
        if body_chars < self.min_body_chars:
            return f"{body_chars} characters of body text (minimum {self.min_body_chars})"
        return None
