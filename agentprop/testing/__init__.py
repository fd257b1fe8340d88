"""Test helpers for agentprop users: run agents against scripted, offline model APIs.

:class:`MessagesServer` speaks enough of the Anthropic Messages API for the official SDK to
work against it through ``base_url``; :class:`OpenAIServer` does the same for the OpenAI SDK
(Chat Completions and Responses, streamed or not). The builder functions make the scripted
replies of both. :class:`LlamaServer` puts a real local model (a GGUF file, through
llama-cpp-python, imported only when it starts) behind the same OpenAI-compatible endpoint.
:func:`correct_typos`, :func:`as_corrected` and :func:`as_simplified` help simulated agents read explored inputs as a person
would.
"""

from __future__ import annotations

from agentprop.testing.llama_server import LlamaOptions, LlamaServer
from agentprop.testing.messages_server import (
    Handler,
    MessagesServer,
    RecordedRequest,
    Reply,
    ReplyLike,
    drop_connection,
    error_reply,
    http_date_in,
    malformed_reply,
    message_reply,
    overloaded_reply,
    rate_limit_reply,
    respond_reply,
    slow_reply,
    text_block,
    text_reply,
    tool_use_block,
    tool_use_reply,
)
from agentprop.testing.openai_server import OpenAIServer, raw_arguments_block, raw_arguments_reply
from agentprop.testing.typos import as_corrected, as_simplified, correct_typos

__all__ = [
    "Handler",
    "LlamaOptions",
    "LlamaServer",
    "MessagesServer",
    "OpenAIServer",
    "RecordedRequest",
    "Reply",
    "as_corrected",
    "as_simplified",
    "correct_typos",
    "ReplyLike",
    "drop_connection",
    "error_reply",
    "http_date_in",
    "malformed_reply",
    "message_reply",
    "overloaded_reply",
    "rate_limit_reply",
    "raw_arguments_block",
    "raw_arguments_reply",
    "respond_reply",
    "slow_reply",
    "text_block",
    "text_reply",
    "tool_use_block",
    "tool_use_reply",
]
