"""Recorded API caches keep replaying: the canonical text, hence every key, stays byte-identical.

``tests/data/api-cache-v1.sqlite`` was recorded by agentprop before request canonicalisation moved
out of the cache (commit b8a2e2a): one entry per request of :data:`REQUESTS` and trial of
:data:`TRIALS`, each answer naming its request and trial. A change to the canonical JSON (number
or string formatting, key order, what is scrubbed or left out) changes the keys, and this replay
misses. Regenerate the file only with a new ``SCHEMA_VERSION``: ``python tests/test_cache_compat.py
PATH`` records it with the agentprop on ``sys.path``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from agentprop._modelapi.cache import ApiCache, CacheMode, cache_key

RECORDED = Path(__file__).parent / "data" / "api-cache-v1.sqlite"
SECRET = "sk-ant-api03-COMPATCOMPAT-0123456789abcdef"
TRIALS = (0, 1, 58)

_TOOLS = [
    {
        "name": "get_account",
        "description": "Look up an account. Returns plan, status and the open orders.",
        "input_schema": {
            "type": "object",
            "properties": {
                "account_id": {"type": "string", "pattern": "^A[0-9]+$"},
                "verbose": {"type": "boolean", "default": False},
            },
            "required": ["account_id"],
        },
    },
    {
        "name": "respond",
        "input_schema": {
            "type": "object",
            "properties": {"decision": {"enum": ["REFUND", "DENY", None]}},
        },
    },
]
_OUTPUT_4K = "order O-1001: processing; " * 160


def _requests() -> list[dict[str, Any]]:
    anthropic_conversation = [
        {"role": "user", "content": "What plan am I on? — café, naïve, 日本語, 🙂"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_account",
                    "input": {"account_id": "A1"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": _OUTPUT_4K}],
        },
    ]
    return [
        # what the Anthropic agent sends, with a 4 KB tool output
        {
            "model": "claude-haiku-4-5",
            "max_tokens": 1024,
            "system": "You are SupportOps.\nBe brief.",
            "tools": _TOOLS,
            "messages": anthropic_conversation,
        },
        # numbers, escapes and control characters, keys out of order, None inside
        {
            "model": "claude-test-1",
            "temperature": 0.7,
            "top_p": 1.0,
            "top_k": 40,
            "max_tokens": 10**6,
            "stop_sequences": ["\n\nHuman:", "END"],
            "messages": [
                {
                    "role": "user",
                    "content": 'quote " backslash \\ tab \t nul \x00 bell \x07 del \x7f line-sep '
                    "\u2028 kelvin \u212a",
                    "z": [
                        1e-07,
                        1e16,
                        -0.0,
                        2.5e-300,
                        123456789012345678901234567890,
                        True,
                        None,
                        {},
                        [],
                    ],
                    "a": {"b": {"c": [0.1, 0.2, 3]}},
                }
            ],
        },
        # fields that cannot change the answer are left out
        {
            "model": "claude-test-1",
            "max_tokens": 64,
            "metadata": {"user_id": "u1"},
            "stream": False,
            "service_tier": None,
            "messages": [],
        },
        # secrets: a key-shaped string, a registered secret, a credential-named field
        {
            "model": "claude-test-1",
            "max_tokens": 64,
            "messages": [
                {"role": "user", "content": f"my key is {SECRET} and sk-proj-abcdefghijklmnop"}
            ],
            "tools": [
                {
                    "name": "t",
                    "input_schema": {"type": "object"},
                    "api_key": "hunter2",
                    "X-Api-Key": "x",
                }
            ],
        },
        # an SDK object in the conversation (dumped as the SDK sends it)
        {
            "model": "claude-test-1",
            "max_tokens": 64,
            "messages": [
                {"role": "user", "content": "Where is A1?"},
                {
                    "role": "assistant",
                    "content": [
                        anthropic.types.ToolUseBlock(
                            type="tool_use", id="t1", name="get_order", input={"id": "A1", "n": 2}
                        )
                    ],
                },
            ],
        },
        # OpenAI Chat Completions and Responses
        {
            "model": "gpt-4.1-mini",
            "max_completion_tokens": 512,
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "get_account", "parameters": _TOOLS[0]["input_schema"]},
                }
            ],
            "messages": [
                {"role": "system", "content": "You are SupportOps."},
                {"role": "user", "content": "What plan am I on?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_account", "arguments": '{"account_id":"A1"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": _OUTPUT_4K},
            ],
        },
        {
            "model": "gpt-4.1-mini",
            "max_output_tokens": 256,
            "instructions": "Be brief.",
            "input": [{"role": "user", "content": "Hi"}],
            "store": False,
        },
    ]


def _answer(index: int, trial: int) -> dict[str, Any]:
    return {
        "id": f"msg_{index}_{trial}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1",
        "content": [{"type": "text", "text": f"request {index}, trial {trial}"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10 + index, "output_tokens": trial + 1},
    }


REQUESTS = _requests()


@pytest.fixture
def recorded(tmp_path: Path) -> ApiCache:
    path = tmp_path / "api-cache.sqlite"
    shutil.copyfile(RECORDED, path)
    return ApiCache(path, mode=CacheMode.REPLAY_ONLY, secrets=[SECRET])


def test_a_cache_recorded_before_the_split_replays_every_request(recorded: ApiCache) -> None:
    for index, request in enumerate(REQUESTS):
        for trial in TRIALS:
            hit = recorded.get(request, trial=trial)
            assert hit is not None and hit.response["id"] == f"msg_{index}_{trial}", (index, trial)
    assert recorded.verify() == []


def test_a_request_shape_keys_as_the_recording_did(recorded: ApiCache) -> None:
    """The agents' path: the fields but the conversation canonicalised once, per shape."""
    shaped = []
    for index, request in enumerate(REQUESTS):
        field = "input" if "input" in request else "messages"
        shape = recorded._request_shape(request, field)
        canonical = None if shape is None else shape.canonical(request[field])
        if shape is None or canonical is None:  # SDK objects and secrets take the general path
            continue
        shaped.append(index)
        _, _, hit = recorded._begin(shape.body(request[field]), TRIALS[-1], shape)
        assert hit is not None and hit.response["id"] == f"msg_{index}_{TRIALS[-1]}"
        assert canonical.key(TRIALS[-1]) == cache_key(request, TRIALS[-1], [SECRET])
    assert shaped == [0, 1, 5, 6]


def _record(path: Path) -> None:
    cache = ApiCache(path, mode=CacheMode.WRITE, secrets=[SECRET])
    for index, request in enumerate(REQUESTS):
        for trial in TRIALS:
            cache.put(request, trial=trial, response=_answer(index, trial))
    cache.close()


if __name__ == "__main__":
    _record(Path(sys.argv[1]))
