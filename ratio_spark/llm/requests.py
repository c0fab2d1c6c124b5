"""What a request and its answer are, independent of how they are sent (sync or Batch API): the exact
body sent to the server, its cache key, and the parsing and validation of the answer."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from ratio_spark.llm.cache import request_key
from ratio_spark.llm.settings import ModelEndpoint
from ratio_spark.core.errors import UserError

OPENAI_BASE_URL = "https://api.openai.com/v1"
KEY_VERSION = 1  # bump when the request payload layout changes, so old cache rows are not reused wrongly
USAGE_FIELDS = (
    "requests", "cached", "failed", "prompt_tokens", "completion_tokens",
    "http_calls", "retries", "invalid_retries", "batch_requests", "batch_prompt_tokens", "batch_completion_tokens",
)


class LLMError(UserError, RuntimeError):
    """A configuration or usage problem (unknown endpoint, missing key, bad schema); not a per-request failure."""


@dataclass(frozen=True)
class ChatRequest:
    request_id: str  # the caller's id, e.g. f"{pair_id}:{prompt_id}"
    messages: tuple[dict, ...] | list[dict]  # OpenAI chat messages
    schema: dict  # JSON schema the answer must satisfy
    max_tokens: int = 256


@dataclass
class ChatResult:
    request_id: str
    model: str  # the endpoint's name
    data: dict | None  # parsed answer, valid against the schema
    error: str | None  # snake_case reason when data is None
    cached: bool  # served from the on-disk cache (tokens are then 0: nothing was spent now)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    detail: str | None = field(default=None, repr=False)  # human-readable detail of the error, if any


@dataclass(frozen=True)
class ToolChatRequest:
    """One turn of a tool-using conversation (the Inspire agent): the model answers with text and/or
    OpenAI-style tool calls, returned as they came, valid or not: the caller decides what is malformed."""

    request_id: str
    messages: tuple[dict, ...] | list[dict]
    tools: tuple[dict, ...] | list[dict]  # OpenAI tool definitions ({"type": "function", "function": {...}})
    tool_choice: str | dict | None = None  # None: not sent (the server's default, "auto")
    max_tokens: int = 512


@dataclass
class ToolChatResult:
    request_id: str
    model: str  # the endpoint's name
    content: str | None  # the assistant's text, if any
    tool_calls: list[dict]  # [{"id", "name", "arguments"}]; arguments is the raw string the model wrote
    finish_reason: str | None
    error: str | None  # snake_case reason when the call itself failed (http_500, timeout, empty_response, ...)
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    detail: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class PreparedRequest:
    """A request turned into the exact body sent to the server, and its cache key."""

    request: ChatRequest
    body: dict[str, Any]
    key: str


# ---------------------------------------------------------------------------------------------- helpers


def fold_system_messages(messages: list[dict]) -> list[dict]:
    """Prepend the system text to the first user message (for chat formats that drop system messages)."""
    system = [m["content"] for m in messages if m.get("role") == "system"]
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    text = "\n\n".join(str(s) for s in system)
    for message in rest:
        if message.get("role") == "user":
            message["content"] = f"{text}\n\n{message.get('content', '')}"
            return rest
    return [{"role": "user", "content": text}, *rest]


def response_format(json_mode: str, schema: dict) -> dict:
    if json_mode == "json_schema":
        name = re.sub(r"[^a-zA-Z0-9_-]", "_", str(schema.get("title") or "answer"))[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}
    if json_mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


def schema_instruction(schema: dict) -> str:
    return "Answer with a single JSON object that satisfies this JSON schema:\n" + json.dumps(schema, ensure_ascii=False)


def build_body(endpoint: ModelEndpoint, request: ChatRequest) -> dict[str, Any]:
    """The chat-completions body exactly as sent (sync) or written to a batch line."""
    messages = [dict(m) for m in request.messages]
    if not messages:
        raise LLMError(f"request {request.request_id!r} has no messages")
    if endpoint.json_mode == "json_object":
        # Plain JSON mode cannot carry a schema: state it in the prompt (OpenAI also requires the word JSON).
        for message in reversed(messages):
            if message.get("role") == "user":
                message["content"] = f"{message.get('content', '')}\n\n{schema_instruction(request.schema)}"
                break
        else:
            messages.append({"role": "user", "content": schema_instruction(request.schema)})
    if endpoint.fold_system_prompt:
        messages = fold_system_messages(messages)
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": messages,
        endpoint.max_tokens_param: int(request.max_tokens),
        "response_format": response_format(endpoint.json_mode, request.schema),
    }
    if endpoint.temperature is not None:
        body["temperature"] = endpoint.temperature
    body.update(endpoint.extra_body)
    return body


def build_tool_body(endpoint: ModelEndpoint, request: ToolChatRequest) -> dict[str, Any]:
    """The chat-completions body of a tool-using turn: no response_format; tools and tool_choice."""
    messages = [dict(m) for m in request.messages]
    if not messages:
        raise LLMError(f"request {request.request_id!r} has no messages")
    if endpoint.fold_system_prompt:
        messages = fold_system_messages(messages)
    body: dict[str, Any] = {"model": endpoint.model, "messages": messages, "tools": [dict(t) for t in request.tools],
                            endpoint.max_tokens_param: int(request.max_tokens)}
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    if endpoint.temperature is not None:
        body["temperature"] = endpoint.temperature
    body.update(endpoint.extra_body)
    return body


def cache_key(endpoint: ModelEndpoint, body: dict[str, Any]) -> str:
    server = endpoint.cache_identity or endpoint.base_url or OPENAI_BASE_URL
    return request_key({"v": KEY_VERSION, "base_url": server,
                        "json_mode": endpoint.json_mode, "body": body})


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_answer(content: str | None, validator) -> tuple[dict | None, str | None, str | None]:
    """(data, error, detail): the JSON object if it parses and validates, else the reason."""
    if content is None or not content.strip():
        return None, "invalid_json", "empty answer"
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text, strict=False)  # strict=False: raw newlines/tabs inside strings (llama.cpp grammars allow them)
    except json.JSONDecodeError as exc:
        return None, "invalid_json", f"not valid JSON: {exc.msg} at character {exc.pos}"
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "(top level)"
        return None, "schema_mismatch", f"{where}: {first.message}"[:500]
    if not isinstance(data, dict):
        return None, "schema_mismatch", "the answer must be a JSON object"
    return data, None, None


def reask_message(detail: str, schema: dict) -> dict:
    return {
        "role": "user",
        "content": f"Your previous answer was rejected ({detail}). Reply again with only a JSON object "
        f"that satisfies this JSON schema, and nothing else:\n{json.dumps(schema, ensure_ascii=False)}",
    }


class Validators:
    """Compiled jsonschema validators, one per distinct schema (schemas are checked once, up front)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_schema: dict[str, Any] = {}

    def get(self, schema: dict):
        import jsonschema

        text = json.dumps(schema, sort_keys=True)
        with self._lock:
            if text not in self._by_schema:
                cls = jsonschema.validators.validator_for(schema)
                try:
                    cls.check_schema(schema)
                except jsonschema.SchemaError as exc:
                    raise LLMError(f"invalid JSON schema: {exc.message}") from None
                self._by_schema[text] = cls(schema)
            return self._by_schema[text]
