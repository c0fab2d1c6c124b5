"""The ``rerank:`` configuration section (LLM listwise reranking of a first-stage run, docs/rerank.md).

Pure pydantic with no import of ``ratio_spark.config``, so the config module can embed it. The
defaults follow the Ratio paper (appendix C, "LLM reranking"): the top 100 candidates in one window,
the 10 best returned, queries whose gold is outside the top 100 not sent.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from ratio_spark.llm.settings import LLMTransportConfig


class RerankConfig(LLMTransportConfig):
    """How a first-stage run is reranked listwise by an LLM endpoint of the ``llm:`` section. The transport
    fields (``mode``, ``batch_*``) are ``llm.settings.LLMTransportConfig``; ``batch_state_dir`` None:
    ``<results>/rerank/batches``; with sliding windows there is one batch per window round."""

    model: str = "gemma-local"  # an endpoint name from the llm: section
    prompt: str = "listwise-v1"  # a prompt id: ratio_spark/rerank/prompts/<id>.md
    prompt_dir: str | None = None  # None: the prompts shipped with the package
    candidates: int = Field(default=100, ge=1)  # first-stage candidates per query that the reranker sees
    select: int = Field(default=10, ge=1)  # indices the model returns: the new top of the ranking
    # Candidates per request. window >= candidates: one request per query (the paper). A smaller window
    # slides from the bottom of the list to the top, carrying each window's best `select` into the next
    # (for models with short contexts); it must exceed `select` to make progress.
    window: int = Field(default=100, ge=2)
    max_reasks: int = Field(default=1, ge=0)  # re-asks when an answer has repeated, out-of-range or missing indices
    # The paper does not send queries whose gold is outside the first-stage top `candidates` (their
    # top-10 metrics cannot change). false: send every query (what a deployed system would do).
    skip_unexposed: bool = True
    max_candidate_chars: int | None = Field(default=None, ge=20)  # cut long candidates (None: whole text)
    max_tokens: int = Field(default=200, ge=16)  # answer budget; reasoning models need thousands
    systems: list[str] | None = None  # evaluate --rerank: which retrievers to rerank (None: all)

    @model_validator(mode="after")
    def _consistent(self) -> "RerankConfig":
        if self.select > self.candidates:
            raise ValueError(f"select ({self.select}) cannot exceed candidates ({self.candidates})")
        if self.window < self.candidates and self.window <= self.select:
            raise ValueError(f"a sliding window ({self.window} < candidates {self.candidates}) must be larger than "
                             f"select ({self.select}), or it cannot carry its best candidates upwards")
        return self
