"""Typed settings for the LLM client: named endpoints and the on-disk cache.

Pure pydantic on ``core.strict.StrictModel`` (a misspelt key fails at start-up) and no import of
``ratio_spark.config``, so the config module can embed ``LLMConfig`` as its ``llm:`` section.
An API key is never part of the settings: only the *name* of the environment variable that holds it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from ratio_spark.core import paths
from ratio_spark.core.strict import StrictModel

JsonMode = Literal["json_schema", "json_object_schema", "json_object"]


class ModelEndpoint(StrictModel):
    """One model behind an OpenAI-compatible API (OpenAI, vLLM, a llama.cpp server)."""

    model_config = ConfigDict(frozen=True)

    name: str  # our label, e.g. "gemma-local", "gpt-4o-mini"; usage and labels are reported under it
    model: str  # the server's model id
    base_url: str | None = None  # None -> OpenAI's default; e.g. http://127.0.0.1:8080/v1
    # Names the server in the cache key instead of base_url, for a model reached at changing addresses
    # (the bundled local server on another port answers from the same cache). None: base_url.
    cache_identity: str | None = None
    api_key_env: str = "OPENAI_API_KEY"  # env var holding the key; the key itself is never logged or written
    # json_schema: OpenAI structured outputs; json_object_schema: llama.cpp's
    # response_format={"type": "json_object", "schema": ...}; json_object: plain JSON mode (the schema is
    # then stated in the prompt)
    json_mode: JsonMode = "json_schema"
    fold_system_prompt: bool = False  # True for chat formats that drop system messages (gemma)
    max_concurrency: int = Field(4, ge=1, le=256)
    timeout_s: float = Field(120, gt=0)
    max_retries: int = Field(5, ge=0)  # transient errors (connection, timeout, 429, 5xx), exponential backoff
    max_invalid_retries: int = Field(2, ge=0)  # re-ask when the answer is not valid JSON for the schema
    temperature: float | None = 0.0  # None: not sent (reasoning models accept only their default)
    # Additive knobs (defaults keep the contract's behaviour):
    retry_backoff_s: float = Field(1.0, ge=0)  # first backoff; doubles per retry (with jitter), capped below
    retry_backoff_max_s: float = Field(60.0, ge=0)
    # OpenAI's reasoning models refuse max_tokens and want max_completion_tokens; llama.cpp and vLLM
    # read max_tokens.
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # Extra request fields sent as-is and part of the cache key, e.g. {"reasoning_effort": "medium"}.
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # Prices in USD per million tokens, for the cost estimate in the usage report (None: not priced).
    # batch_discount: the share of the price a Batch API token costs (OpenAI: 0.5).
    input_usd_per_mtok: float | None = None
    output_usd_per_mtok: float | None = None
    batch_discount: float = Field(0.5, ge=0, le=1)

    @field_validator("name", "model")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https:// (got {value!r})")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        # Guard against a key pasted where the variable *name* belongs: it would end up in config dumps.
        if value.startswith("sk-") or len(value) > 64 or not value.replace("_", "").isalnum():
            raise ValueError("api_key_env is the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key")
        return value


class LLMConfig(StrictModel):
    """The ``llm:`` section of the configuration: every endpoint the project may call, and the cache."""

    models: list[ModelEndpoint] = Field(default_factory=list)
    cache_dir: str = Field(default_factory=lambda: str(paths.cache_dir("llm")))

    @model_validator(mode="after")
    def _unique_names(self) -> "LLMConfig":
        names = [m.name for m in self.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"endpoint names must be unique; repeated: {dupes}")
        return self


class LLMTransportConfig(StrictModel):
    """How a command's requests reach its endpoint, the same block in every section that judges or reranks with an
    LLM (``silver:``, ``rerank:``; ``LLMClient.choose_transport`` and ``LLMClient.send`` read it).

    ``sync``: concurrent chat calls (any OpenAI-compatible server); ``batch``: the OpenAI Batch API (half price,
    hours); ``auto``: batch for an OpenAI endpoint (no base_url) from ``batch_min_requests`` uncached requests,
    sync otherwise. A batch keeps its state in ``batch_state_dir`` (None: the command's own folder), so that a
    rerun resumes it; ``batch_max_wait_s`` stops polling (the batch keeps running; rerun to collect it).
    """

    mode: Literal["auto", "sync", "batch"] = "auto"
    batch_min_requests: int = Field(default=1000, ge=1)
    batch_state_dir: str | None = None
    batch_poll_interval_s: float = Field(default=30, gt=0)
    batch_max_wait_s: float | None = Field(default=None, ge=0)
