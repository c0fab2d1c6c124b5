"""The project's LLM client (see docs/llm.md): one way to ask any OpenAI-compatible model for JSON.

    from ratio_spark.llm import LLMClient, LLMConfig, ModelEndpoint, ChatRequest, ChatResult
"""

from ratio_spark.llm.batch import BatchNotFinished
from ratio_spark.llm.client import LLMClient
from ratio_spark.llm.requests import ChatRequest, ChatResult, LLMError, ToolChatRequest, ToolChatResult
from ratio_spark.llm.settings import LLMConfig, ModelEndpoint

__all__ = ["BatchNotFinished", "ChatRequest", "ChatResult", "LLMClient", "LLMConfig", "LLMError", "ModelEndpoint",
           "ToolChatRequest", "ToolChatResult"]
