"""Test helpers for agentprop users: run agents against scripted, offline model APIs.

:class:`MessagesServer` and :class:`OpenAIServer` answer the official SDKs from a script;
:class:`LlamaServer` puts a local GGUF model behind the OpenAI endpoint; the typo helpers let
simulated agents read explored inputs as a person would.
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
