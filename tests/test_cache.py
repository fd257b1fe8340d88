"""The model-API cache: keys, modes, miss messages, secrets, crash safety, concurrency."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace as dataclasses_replace
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from agentprop._modelapi.cache import (
    REDACTED,
    ApiCache,
    CacheError,
    CacheMiss,
    CacheMode,
    cache_key,
    canonical_request,
    scrub_secrets,
)
from agentprop._modelapi.canonical import _slow_canonical_request
from agentprop._util.scrub import scrub_text
from agentprop.errors import AgentPropError, InvalidArgument
from agentprop.testing import MessagesServer, text_reply, tool_use_reply

FAKE_SECRET = "sk-ant-api03-FAKEFAKEFAKE-0123456789abcdef"


def request(text: str = "Where is order A1?", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-test-1",
        "max_tokens": 256,
        "system": "You are a support agent. Be brief.",
        "messages": [{"role": "user", "content": text}],
        "tools": [{"name": "get_order", "input_schema": {"type": "object"}}],
    }
    body.update(extra)
    return body


def response(text: str, *, input_tokens: int = 12, output_tokens: int = 3) -> dict[str, Any]:
    return {
        "id": f"msg_{abs(hash(text)) % 10**8}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-1",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


class Counter:
    """A fake API call that returns a new answer each time and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return response(f"sample {self.calls}")


# -- keys ----------------------------------------------------------------------------------------


def test_key_ignores_order_and_non_semantic_fields() -> None:
    a = request()
    b = dict(reversed(list(request().items())))
    assert cache_key(a, 0) == cache_key(b, 0)
    assert cache_key(a, 0) == cache_key(
        request(stream=False, metadata={"user_id": "u1"}, temperature=None), 0
    )


@pytest.mark.parametrize(
    "change",
    [
        {"model": "claude-test-2"},
        {"system": "You are a pirate."},
        {"messages": [{"role": "user", "content": "Where is order A2?"}]},
        {"tools": []},
        {"tool_choice": {"type": "any"}},
        {"temperature": 0.5},
        {"top_p": 0.9},
        {"top_k": 5},
        {"max_tokens": 257},
        {"stop_sequences": ["END"]},
        {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    ],
)
def test_every_answer_changing_field_changes_the_key(change: dict[str, Any]) -> None:
    assert cache_key(request(), 0) != cache_key(request(**change), 0)


def test_trial_index_is_part_of_the_key() -> None:
    keys = {cache_key(request(), trial) for trial in range(50)}
    assert len(keys) == 50
    with pytest.raises(InvalidArgument):
        cache_key(request(), -1)
    with pytest.raises(InvalidArgument):
        cache_key(request(), True)  # type: ignore[arg-type]


def test_sdk_content_blocks_key_like_their_dict_form() -> None:
    with MessagesServer([tool_use_reply("get_order", {"id": "A1"}, id="toolu_1")]) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="dummy", max_retries=0)
        first = client.messages.create(**request())
    as_models = request(
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": first.content},
        ]
    )
    as_dicts = request(
        messages=[
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_order",
                        "input": {"id": "A1"},
                    }
                ],
            },
        ]
    )
    assert cache_key(as_models, 3) == cache_key(as_dicts, 3)


def _hand_written_key(canonical: str, trial: int) -> str:
    """The documented derivation: SHA-256 of a version/trial header and the canonical JSON."""
    return hashlib.sha256(
        f"agentprop-api-cache/v1\ntrial={trial}\n{canonical}".encode()
    ).hexdigest()


PINNED_BODY: dict[str, Any] = {
    "model": "claude-test-1",
    "max_tokens": 256,
    "system": 'Be brief. été — "quoted"\n',
    "messages": [
        {"role": "user", "content": "Where is order A1?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "get_order", "input": {"id": "A1", "n": 2}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": '{"status": "shipped"}'}
            ],
        },
    ],
    "tools": [
        {
            "name": "get_order",
            "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
        }
    ],
    "temperature": 0.5,
    "top_k": 5,
    "stop_sequences": ["END"],
}
# Written by hand from the rules (sorted keys, no spaces, non-ASCII kept): a key must never
# change, or every recorded cache would stop replaying.
PINNED_CANONICAL = (
    '{"max_tokens":256,"messages":[{"content":"Where is order A1?","role":"user"},'
    '{"content":[{"id":"t1","input":{"id":"A1","n":2},"name":"get_order","type":"tool_use"}],"role":"assistant"},'
    '{"content":[{"content":"{\\"status\\": '
    '\\"shipped\\"}","tool_use_id":"t1","type":"tool_result"}],"role":"user"}],"model":"claude-'
    'test-1","stop_sequences":["END"],"system":"Be brief. été — '
    '\\"quoted\\"\\n","temperature":0.5,"tools":[{"input_schema":{"properties":{"id":{"type":'
    '"string"}},"type":"object"},"name":"get_order"}],"top_k":5}'
)


def test_keys_are_pinned_to_the_documented_derivation(tmp_path: Path) -> None:
    assert json.loads(PINNED_CANONICAL) == PINNED_BODY  # the hand-written text is this body
    expected = _hand_written_key(PINNED_CANONICAL, 7)
    assert cache_key(PINNED_BODY, 7) == expected
    # fields that cannot change the answer send the body the general way: same key
    assert (
        cache_key({**PINNED_BODY, "stream": False, "metadata": {"user_id": "u"}, "top_p": None}, 7)
        == expected
    )
    # the SDK's content blocks in place of dicts: same key
    blocks = [
        anthropic.types.ToolUseBlock(
            type="tool_use", id="t1", name="get_order", input={"id": "A1", "n": 2}
        )
    ]
    as_models = {
        **PINNED_BODY,
        "messages": [
            PINNED_BODY["messages"][0],
            {"role": "assistant", "content": blocks},
            PINNED_BODY["messages"][2],
        ],
    }
    assert cache_key(as_models, 7) == expected
    with ApiCache(tmp_path / "c.db", mode="read-write") as cache:
        assert cache.key(PINNED_BODY, trial=7) == expected
        stored = cache.get_or_call(PINNED_BODY, trial=7, call=Counter())
        assert stored.key == expected
    row = (
        sqlite3.connect(tmp_path / "c.db")
        .execute("SELECT key, request_json FROM responses")
        .fetchone()
    )
    assert row == (expected, PINNED_CANONICAL)


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, -0.0, 1.0, 1e300]),
    st.text(max_size=6),
    st.sampled_from(
        ["sk-ant-abcdef123", "x sk-ant-api03-XYZ_12 y", "registered-secret", 'a"b\\c\n']
    ),
)
_names = st.one_of(
    st.text(max_size=5),
    st.sampled_from(
        [
            "api_key",
            "X-Api-Key",
            "Authorization",
            "client_secret",
            "API_\u212aEY",
            "type",
            "content",
        ]
    ),
)
_json = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner), st.dictionaries(_names, inner, max_size=3)
    ),
    max_leaves=12,
)
_bodies = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["m", "claude-test-1"]),
        "messages": st.lists(st.dictionaries(_names, _json, max_size=3), max_size=3),
    },
    optional={
        "system": st.one_of(_leaf, st.lists(_json, max_size=2)),
        "tools": st.lists(_json, max_size=3),
        "tool_choice": _json,
        "temperature": _leaf,
        "api_key": _leaf,
        "metadata": _json,
    },
)


@settings(max_examples=300, deadline=None)
@given(
    _bodies,
    st.integers(0, 5),
    st.lists(st.sampled_from(["registered-secret", '"b', "sk-ant-abcdef123"]), max_size=2),
)
def test_fast_keys_equal_the_reference_derivation(
    body: dict[str, Any], trial: int, secrets: list[str]
) -> None:
    """Plain bodies take a fast, memoised path; whatever the body, its key and canonical form
    are those of the reference derivation (a plain copy, then the scrub, then JSON)."""
    try:
        reference = _slow_canonical_request(body, secrets)
        expected: Any = _hand_written_key(
            json.dumps(
                reference,
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            ),
            trial,
        )
    except (InvalidArgument, ValueError) as exc:
        expected = type(exc)
    for _ in range(2):  # the second time from the memo
        try:
            got: Any = cache_key(body, trial, secrets)
        except (InvalidArgument, ValueError) as exc:
            got = type(exc)
        assert got == expected
    if expected is not InvalidArgument and expected is not ValueError:
        assert canonical_request(body, secrets) == reference


@settings(max_examples=300, deadline=None)
@given(
    _bodies,
    st.integers(0, 5),
    st.lists(st.sampled_from(["registered-secret", '"b', "sk-ant-abcdef123"]), max_size=2),
)
def test_shaped_keys_equal_the_reference_derivation(
    body: dict[str, Any], trial: int, secrets: list[str]
) -> None:
    """Agents key a conversation's requests through a request shape (every field but the
    messages, worked out once): whatever the body, the shape either declines it or gives the
    reference key, and the body it builds is the body given."""
    try:
        reference = _slow_canonical_request(body, secrets)
        expected: Any = _hand_written_key(
            json.dumps(
                reference,
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
                allow_nan=False,
            ),
            trial,
        )
    except (InvalidArgument, ValueError) as exc:
        expected = type(exc)
    cache = ApiCache("unused.db", mode="off", secrets=secrets)
    shape = cache._request_shape(body)
    if shape is None:
        return  # such bodies are keyed the general way (the test above)
    for _ in range(2):  # the second time from the memo
        built = shape.body(body["messages"])
        assert built == body and list(built) == list(body)
        canonical = shape.canonical(body["messages"])
        if canonical is not None:
            assert expected not in (InvalidArgument, ValueError)
            assert canonical.key(trial) == expected
            assert json.loads(canonical.text) == reference


def test_a_request_shape_keeps_its_own_copy_and_keys_like_the_body(tmp_path: Path) -> None:
    """A shape builds every body from its private copy of the fields, so what is sent and what
    is keyed cannot drift apart when the caller's objects change afterwards; a shaped call
    reads and writes the very entries an unshaped call of the same body does."""
    tools: list[dict[str, Any]] = [
        {"name": "get_order", "input_schema": {"type": "object", "maxProperties": 1}}
    ]
    body = request(tools=tools)
    original = json.loads(json.dumps(body))
    with ApiCache(tmp_path / "c.db", mode="read-write") as cache:
        shape = cache._request_shape(body)
        assert shape is not None
        tools[0]["input_schema"]["maxProperties"] = True  # the caller changes its tools
        tools.append({"name": "cancel_order"})
        messages = [{"role": "user", "content": "Where is order A1?"}]
        built = shape.body(messages)
        assert built == original and built["messages"] is messages
        assert shape.canonical(messages).key(3) == cache_key(original, 3)  # type: ignore[union-attr]
        counter = Counter()

        async def call() -> dict[str, Any]:
            return counter()

        async def shaped() -> Any:
            return await cache._aget_or_call_shaped(shape, built, trial=3, call=call)

        first = asyncio.run(shaped())
        assert not first.from_cache and first.key == cache_key(original, 3)
        again = cache.get_or_call(original, trial=3, call=Counter())
        assert again.from_cache and again.response == first.response
        assert asyncio.run(shaped()).from_cache and counter.calls == 1
        # fields the cache must see whole (ignored fields, credentials, SDK objects) get no shape
        assert cache._request_shape({**original, "stream": True}) is None
        assert cache._request_shape({**original, "api_key": "x"}) is None
        assert cache._request_shape({**original, "tools": (tools[0],)}) is None


def test_in_place_changes_to_a_reused_object_change_the_key() -> None:
    """Agents send the same tools list with every request; the memo of its text must notice
    any change to it, even 1 -> True -> 1.0 (equal in Python, different in JSON)."""
    tools: list[dict[str, Any]] = [
        {"name": "get_order", "input_schema": {"type": "object", "maxProperties": 1}}
    ]
    body = request(tools=tools)
    keys = []
    for value in (1, True, 1.0, "1", 1):
        tools[0]["input_schema"]["maxProperties"] = value
        key = cache_key(body, 0)
        assert key == _hand_written_key(
            json.dumps(
                _slow_canonical_request(body, ()),
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
            ),
            0,
        )
        keys.append(key)
    assert len(set(keys)) == 4 and keys[0] == keys[-1]
    tools.append({"name": "cancel_order", "input_schema": {"type": "object"}})
    assert cache_key(body, 0) not in keys
    body["messages"][0]["content"] = "my key is sk-ant-api03-abcdefgh"
    assert "sk-ant" not in json.dumps(canonical_request(body))


def test_requests_must_look_like_messages_requests() -> None:
    with pytest.raises(InvalidArgument):
        canonical_request({"messages": []})
    with pytest.raises(InvalidArgument):
        canonical_request(request(temperature=float("nan")))
    with pytest.raises(InvalidArgument):
        canonical_request(request(extra=object()))


# -- modes -----------------------------------------------------------------------------------------


def test_read_write_hit_and_miss(tmp_path: Path) -> None:
    api = Counter()
    with ApiCache(tmp_path / "c.db", mode="read-write") as cache:
        first = cache.get_or_call(request(), trial=0, call=api)
        second = cache.get_or_call(request(), trial=0, call=api)
        assert api.calls == 1
        assert (first.from_cache, second.from_cache) == (False, True)
        assert first.response == second.response
        assert second.usage == {"input_tokens": 12, "output_tokens": 3}
        assert cache.stats.as_dict() == {"hits": 1, "misses": 1, "writes": 1, "calls": 1}


def test_chat_completions_usage_is_stored_in_the_token_columns(tmp_path: Path) -> None:
    # Chat Completions name their tokens prompt/completion: stored as 0 before, so the dry
    # run's dollars (and anything else reading the columns) saw free calls
    chat = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 41, "completion_tokens": 7, "total_tokens": 48},
    }
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        stored = cache.put(request(), trial=0, response=chat)
        assert (stored.input_tokens, stored.output_tokens) == (41, 7)
        cache.put(
            request("other"), trial=0, response=response("x", input_tokens=5, output_tokens=2)
        )
    with sqlite3.connect(path) as db:
        rows = sorted(db.execute("SELECT input_tokens, output_tokens FROM responses").fetchall())
    assert rows == [(5, 2), (41, 7)]


def test_trials_are_distinct_samples_and_replays_are_exact(tmp_path: Path) -> None:
    api = Counter()
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        recorded = [cache.get_or_call(request(), trial=t, call=api).response for t in range(5)]
    assert api.calls == 5
    assert len({json.dumps(r, sort_keys=True) for r in recorded}) == 5
    with ApiCache(path, mode="replay-only") as replay:
        replayed = [
            replay.get_or_call(request(), trial=t, call=api).response for t in (3, 0, 4, 1, 2)
        ]
    assert api.calls == 5
    assert replayed == [recorded[t] for t in (3, 0, 4, 1, 2)]


def test_sdk_message_round_trip(tmp_path: Path) -> None:
    with MessagesServer([tool_use_reply("get_order", {"id": "A1"}, text="Checking.")]) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="dummy", max_retries=0)
        with ApiCache(tmp_path / "c.db", mode="read-write") as cache:
            live = cache.get_or_call(
                request(), trial=0, call=lambda: client.messages.create(**request())
            )
            replay = cache.get_or_call(
                request(), trial=0, call=lambda: pytest.fail("should replay")
            )
        assert len(server.requests) == 1
    assert Message.model_validate(replay.response) == Message.model_validate(live.response)
    assert Message.model_validate(replay.response).content[1].input == {"id": "A1"}


def test_off_mode_neither_reads_nor_writes(tmp_path: Path) -> None:
    api = Counter()
    path = tmp_path / "c.db"
    with ApiCache(path, mode=CacheMode.OFF) as cache:
        for _ in range(3):
            assert not cache.get_or_call(request(), trial=0, call=api).from_cache
    assert api.calls == 3
    assert not path.exists()


def test_read_mode_replays_but_stores_nothing(tmp_path: Path) -> None:
    api = Counter()
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        cache.get_or_call(request(), trial=0, call=api)
    with ApiCache(path, mode="read") as cache:
        assert cache.get_or_call(request(), trial=0, call=api).from_cache
        assert not cache.get_or_call(request("new"), trial=0, call=api).from_cache
        assert cache.lookup(request("new"), trial=0) is None
        assert len(cache) == 1
    assert api.calls == 2


def test_write_mode_always_calls_and_overwrites(tmp_path: Path) -> None:
    api = Counter()
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        cache.get_or_call(request(), trial=0, call=api)
    with ApiCache(path, mode="write") as cache:
        fresh = cache.get_or_call(request(), trial=0, call=api)
    assert api.calls == 2 and not fresh.from_cache
    with ApiCache(path, mode="read") as cache:
        stored = cache.lookup(request(), trial=0)
    assert stored is not None and stored.response["content"][0]["text"] == "sample 2"


def test_replay_only_miss_shows_nearest_request_and_diff(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    api = Counter()
    with ApiCache(path, mode="read-write") as cache:
        cache.get_or_call(request(), trial=0, call=api)
        cache.get_or_call(
            request("Cancel my subscription please", model="claude-test-9"), trial=0, call=api
        )
    changed = request(system="You are a support agent. Be very brief.")
    with ApiCache(path, mode="replay-only") as replay:
        with pytest.raises(CacheMiss) as err:
            replay.get_or_call(changed, trial=0, call=api)
    assert api.calls == 2  # no API call on a replay-only miss
    miss = err.value
    assert isinstance(miss, AgentPropError)
    text = str(miss)
    assert "replay-only" in text and "trial 0" in text
    assert miss.nearest_key == cache_key(request(), 0)
    assert '-  "system": "You are a support agent. Be brief."' in text
    assert '+  "system": "You are a support agent. Be very brief."' in text
    assert "same model and trial" in text
    assert "read-write" in text  # the fix
    assert miss.diff is not None and miss.diff.startswith("--- recorded")


def test_replay_only_miss_for_an_unrecorded_trial(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        for trial in (0, 1):
            cache.get_or_call(request(), trial=trial, call=Counter())
    with ApiCache(path, mode="replay-only") as replay:
        with pytest.raises(CacheMiss, match=r"recorded for trial\(s\) 0, 1 but not for trial 2"):
            replay.get(request(), trial=2)


def test_replay_only_on_an_empty_cache(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    with ApiCache(path, mode="replay-only") as replay:
        with pytest.raises(CacheMiss, match="nothing has been recorded yet"):
            replay.get(request(), trial=0)
    assert not path.exists()


def test_default_mode_follows_ci() -> None:
    assert CacheMode.default({}) is CacheMode.READ_WRITE
    assert CacheMode.default({"CI": "true"}) is CacheMode.REPLAY_ONLY
    assert CacheMode.default({"CI": "1"}) is CacheMode.REPLAY_ONLY
    assert CacheMode.default({"CI": "false"}) is CacheMode.READ_WRITE
    assert (
        CacheMode.default({"CI": "true", "AGENTPROP_CACHE_MODE": "read_write"})
        is CacheMode.READ_WRITE
    )
    assert CacheMode.parse("Replay-Only") is CacheMode.REPLAY_ONLY
    with pytest.raises(InvalidArgument, match="replay-only"):
        CacheMode.parse("sometimes")


def test_default_mode_of_a_cache_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTPROP_CACHE_MODE", raising=False)
    monkeypatch.setenv("CI", "true")
    assert ApiCache(tmp_path / "a.db").mode is CacheMode.REPLAY_ONLY
    monkeypatch.delenv("CI")
    assert ApiCache(tmp_path / "b.db").mode is CacheMode.READ_WRITE


# -- secrets ---------------------------------------------------------------------------------------


def test_scrubber_redacts_credential_keys_and_key_shaped_strings() -> None:
    data = {
        "api_key": "x",
        "nested": [
            {"X-Api-Key": "y", "Authorization": "Bearer z", "keep": f"token {FAKE_SECRET} end"}
        ],
        "auth_token": {"deep": 1},
        "other": "registered-secret-value",
    }
    clean = scrub_secrets(data, secrets=["registered-secret-value"])
    assert clean == {
        "api_key": REDACTED,
        "nested": [
            {"X-Api-Key": REDACTED, "Authorization": REDACTED, "keep": f"token {REDACTED} end"}
        ],
        "auth_token": REDACTED,
        "other": REDACTED,
    }
    assert data["api_key"] == "x"  # input untouched


def test_secret_never_reaches_the_database_file(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    body = request(
        f"my key is {FAKE_SECRET}",
        metadata={"api_key": FAKE_SECRET},
        tools=[{"name": "call_api", "input_schema": {"type": "object"}, "x-api-key": FAKE_SECRET}],
    )
    call = {
        "type": "tool_use",
        "id": "t",
        "name": "call_api",
        "input": {"authorization": FAKE_SECRET},
    }
    body["messages"].append({"role": "assistant", "content": [call]})
    body["messages"].append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    )
    with MessagesServer([text_reply(f"echo {FAKE_SECRET}")]) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key=FAKE_SECRET, max_retries=0)
        with ApiCache(path, mode="read-write", secrets=[FAKE_SECRET]) as cache:
            result = cache.get_or_call(body, trial=0, call=lambda: client.messages.create(**body))
            assert FAKE_SECRET not in json.dumps(result.response)
            # the secret really was in play: the server saw it in the auth header and the body
            seen = server.requests[0]
            assert FAKE_SECRET in seen.headers.get("authorization", "") + seen.headers.get(
                "x-api-key", ""
            )
            assert FAKE_SECRET.encode() in seen.body
            assert cache.get(body, trial=0) is not None  # still a hit after scrubbing
    files = [p for p in tmp_path.iterdir() if p.name.startswith("c.db")]
    assert files
    for file in files:
        assert FAKE_SECRET.encode() not in file.read_bytes(), file.name
        assert b"FAKEFAKEFAKE" not in file.read_bytes(), file.name


def test_a_short_api_key_is_not_scrubbed_as_a_substring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a local server's key ("k", "loopback") is no secret worth blanking out of every text: the
    # old scrub made the cache refuse every entry ("k" is in "max_tokens") and showed a model
    # "loopback-writer" as "[REDACTED]-writer"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "loopback")
    assert scrub_text("model loopback-writer: not found") == "model loopback-writer: not found"
    with ApiCache(tmp_path / "c.db", mode="read-write", secrets=["k", "loopback"]) as cache:
        first = cache.get_or_call(request(model="loopback-writer"), trial=0, call=Counter())
        assert first.model == "loopback-writer"
        assert cache.get(request(model="loopback-writer"), trial=0) is not None
    assert cache_key(request(), 0, secrets=["k", "loopback"]) == cache_key(request(), 0)


# -- integrity -------------------------------------------------------------------------------------


def test_verify_and_reads_detect_tampering(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        cache.get_or_call(request(), trial=0, call=Counter())
        assert cache.verify() == []
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE responses SET response_json = replace(response_json, 'sample 1', 'forged')"
    )
    conn.commit()
    conn.close()
    with ApiCache(path, mode="read") as cache:
        assert any("checksum" in problem for problem in cache.verify())
        with pytest.raises(CacheError, match="fails its checksum"):
            cache.get(request(), trial=0)


def test_schema_version_mismatch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        cache.get_or_call(request(), trial=0, call=Counter())
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 999")
    conn.commit()
    conn.close()
    for mode in ("read-write", "replay-only"):
        with pytest.raises(CacheError, match="schema version 999"):
            ApiCache(path, mode=mode).get(request(), trial=0)


_WRITER = textwrap.dedent(
    """
    import sys
    from agentprop._modelapi.cache import ApiCache

    import os, time
    path, spans, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    go = sys.argv[4] if len(sys.argv) > 4 else None
    cache = ApiCache(path, mode="read-write")
    if go:  # start together with the other writers
        print("ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.005)
    keys = [i for span in spans.split(",") for i in range(*map(int, span.split("-")))]
    for i in keys:
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": f"q{i}"}]}
        stored = cache.put(body, trial=0, response={
            "type": "message", "model": "m",
            "content": [{"type": "text", "text": f"{tag}:{i}:" + "x" * 2000}],
            "usage": {"input_tokens": i, "output_tokens": 1},
        })
        print(i, stored.response["content"][0]["text"].split(":")[0], flush=True)
    """
)


def _body(i: int) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": f"q{i}"}]}


def test_sigkill_during_writes_leaves_a_consistent_cache(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), "0-1000000", "w"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    for _ in range(50):  # wait until it has committed 50 entries, then let it keep writing
        assert child.stdout.readline()
    time.sleep(0.2)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    with ApiCache(path, mode="read") as cache:
        assert cache.verify() == []
        count = len(cache)
        assert count >= 50
        # writes are sequential transactions: exactly entries 0..count-1 exist, each complete
        for i in range(count):
            entry = cache.lookup(_body(i), trial=0)
            assert entry is not None
            assert entry.response["content"][0]["text"] == f"w:{i}:" + "x" * 2000
            assert entry.input_tokens == i
        assert cache.lookup(_body(count), trial=0) is None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_several_processes_share_one_cache_file(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    # four writers: all write the shared keys 0..59, and each writes 20 keys of its own
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WRITER,
                str(path),
                f"0-60,{1000 + 100 * w}-{1020 + 100 * w}",
                f"w{w}",
                str(go),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    go.touch()
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)

    winners: dict[int, set[str]] = {}
    for out in outputs:
        for line in out.splitlines():
            i, winner = line.split()
            winners.setdefault(int(i), set()).add(winner)
    # first writer wins: every process that wrote a shared key got the same stored answer back
    assert all(len(tags) == 1 for tags in winners.values())
    with ApiCache(path, mode="read") as cache:
        assert cache.verify() == []
        assert len(cache) == 60 + 4 * 20
        for i in range(60):
            entry = cache.lookup(_body(i), trial=0)
            assert entry is not None
            assert entry.response["content"][0]["text"].split(":")[0] == next(iter(winners[i]))


def test_threads_and_async_tasks_share_one_cache(tmp_path: Path) -> None:
    cache = ApiCache(tmp_path / "c.db", mode="read-write")
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for i in range(40):
                got = cache.get_or_call(
                    _body(i % 20), trial=i // 20, call=lambda: response(f"t{w}")
                )
                again = cache.get_or_call(
                    _body(i % 20), trial=i // 20, call=lambda: pytest.fail("must hit")
                )
                assert again.response == got.response
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) == 40

    async def main() -> list[str]:
        async def one(i: int) -> str:
            async def call() -> dict[str, Any]:
                await asyncio.sleep(0.001)
                return response(f"async {i}")

            result = await cache.aget_or_call(_body(100 + i), trial=0, call=call)
            return str(result.response["content"][0]["text"])

        return await asyncio.gather(*[one(i) for i in range(20)])

    assert asyncio.run(main()) == [f"async {i}" for i in range(20)]
    assert len(cache) == 60 and cache.verify() == []
    cache.close()
    with pytest.raises(CacheError):
        len(cache)


def test_busy_retry_treats_a_callers_failed_attempt_as_its_first(tmp_path: Path) -> None:
    """A lookup tries SQLite once itself and hands a busy error to the retry loop, which
    sleeps, retries until the operation succeeds, and reports anything that is not busy as a
    cache file that cannot be used (a CacheError naming the file, never a raw SQLite error)."""
    cache = ApiCache(tmp_path / "c.db", mode="read-write", busy_timeout=5.0)
    attempts: list[float] = []

    def flaky() -> str:
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "ok"

    first = sqlite3.OperationalError("database is locked")
    start = time.monotonic()
    assert cache._busy_retry(flaky, first) == "ok"
    assert len(attempts) == 3
    assert attempts[0] - start >= 0.004  # it paused before its first own attempt
    with pytest.raises(CacheError, match="no such table") as info:
        cache._busy_retry(flaky, sqlite3.OperationalError("no such table: x"))
    assert str(tmp_path / "c.db") in str(info.value) and "fix: delete the file" in str(info.value)
    cache.close()


def test_reads_detect_a_tampered_request_text(tmp_path: Path) -> None:
    """Lookups read the stored request as bytes for the checksum: an edit of it, even one that
    keeps it valid JSON or puts non-ASCII text in it, still fails the checksum on read."""
    path = tmp_path / "c.db"
    with ApiCache(path, mode="read-write") as cache:
        stored = cache.get_or_call(request(), trial=0, call=Counter())
        assert cache.get(request(), trial=0) == dataclasses_replace(stored, from_cache=True)
    for edit in ("replace(request_json, '\"model\"', '\"model\" ')", "request_json || 'é'"):
        conn = sqlite3.connect(path)
        original = conn.execute("SELECT request_json FROM responses").fetchone()[0]
        conn.execute(f"UPDATE responses SET request_json = {edit}")
        conn.commit()
        with ApiCache(path, mode="read") as cache:
            with pytest.raises(CacheError, match="fails its checksum"):
                cache.get(request(), trial=0)
        conn.execute("UPDATE responses SET request_json = ?", (original,))
        conn.commit()
        conn.close()
        with ApiCache(path, mode="read") as cache:
            assert cache.get(request(), trial=0) is not None
