"""A Messages API call posts its body as it is, through the SDK's request path.

``client.messages.create`` sorts a body's fields into its parameters and ``extra_body``, which
the SDK joins again into the same JSON, and wraps the answer in a response object that is read
back as JSON. The call now goes through the SDK client's ``post``: the same URL, headers, key,
API version and error classes; ``None`` fields are left out as before; fields the SDK does not
know travel as they are; the cache key of a call is unchanged. A body of plain JSON is encoded
as the SDK encodes it and posted as ``content=``: the same bytes, without the SDK's walk over
the body (a copy of every nested value, in Python)."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
from agentprop.testing import MessagesServer, error_reply, message_reply, text_block

anthropic = pytest.importorskip("anthropic")

BODY: dict[str, Any] = {
    "model": "claude-haiku-4-5",
    "max_tokens": 64,
    "temperature": None,
    "system": "Answer briefly.",
    "messages": [{"role": "user", "content": "hi"}],
    "a_server_field": {"kept": [1, 2]},
}


def _client(server: MessagesServer, cache: Path | bool = False) -> ModelClient:
    return ModelClient(
        ANTHROPIC_MESSAGES,
        "claude-haiku-4-5",
        base_url=server.base_url,
        api_key="k-test",
        cache=cache,
        max_concurrent_requests=4,
    )


def test_the_body_is_posted_as_it_is_without_messages_create(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anthropic.resources.messages.messages import AsyncMessages

    @functools.wraps(AsyncMessages.create)  # the same parameters, for any code that reads them
    def no_create(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the call went through messages.create")

    monkeypatch.setattr(AsyncMessages, "create", no_create)
    with MessagesServer(
        handler=lambda request: message_reply([text_block("hello")]), expected_api_key="k-test"
    ) as server:
        client = _client(server)
        reply = asyncio.run(client.call(BODY, trial=0))
        [request] = server.requests
    assert request.path == "/v1/messages" and request.method == "POST"
    assert request.json == {k: v for k, v in BODY.items() if v is not None}
    # the key as the SDK sends it (x-api-key, or a bearer token in recent SDKs)
    assert "k-test" in (
        request.headers.get("x-api-key"),
        request.headers.get("authorization", "")[7:],
    )
    assert request.headers["anthropic-version"]
    assert reply.response["content"][0]["text"] == "hello"


def test_a_posted_call_is_recorded_and_replayed_with_no_request(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    with MessagesServer(handler=lambda request: message_reply([text_block("hi")])) as server:
        asyncio.run(_client(server, cache).call(BODY, trial=0))
    with MessagesServer(handler=lambda request: pytest.fail("replayed from the cache")) as server:
        replayed = asyncio.run(_client(server, cache).call(BODY, trial=0))
        assert server.requests == []
    assert replayed.response["content"][0]["text"] == "hi"


def test_an_error_answer_raises_the_sdk_error_as_before() -> None:
    with MessagesServer(script=[error_reply(400, message="bad request")]) as server:
        client = _client(server)
        with pytest.raises(anthropic.BadRequestError, match="bad request"):
            asyncio.run(client.call(BODY, trial=0))


def _posted(monkeypatch: pytest.MonkeyPatch, body: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The request the server got for ``body``, and the keyword arguments of each ``post``."""
    posts: list[Any] = []
    post = anthropic.AsyncAnthropic.post

    async def spy(self: Any, path: str, **kwargs: Any) -> Any:
        posts.append(kwargs)
        return await post(self, path, **kwargs)

    monkeypatch.setattr(anthropic.AsyncAnthropic, "post", spy)
    with MessagesServer(handler=lambda request: message_reply([text_block("ok")])) as server:
        asyncio.run(_client(server).call(body, trial=0))
        [request] = server.requests
    monkeypatch.undo()
    return request, posts


def test_a_plain_body_is_sent_as_the_bytes_the_sdk_would_send_without_its_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # post(body=) copies the whole body in Python (a walk over every nested value, for SDK
    # objects, dates and files) before encoding it; a body of plain JSON is encoded as the SDK
    # encodes it and posted as content=, so the server gets the very same bytes
    body = {**BODY, "messages": [{"role": "user", "content": 'héllo \u2028 "q"'}], "t": 0.5}
    fast, posts = _posted(monkeypatch, body)
    assert [set(p) for p in posts] == [{"content", "cast_to"}]
    monkeypatch.setattr("agentprop._modelapi.providers._wire_content", lambda c, b: None)
    walked, posts = _posted(monkeypatch, body)
    assert [set(p) for p in posts] == [{"body", "cast_to"}]
    assert fast.body == walked.body
    assert fast.json == {k: v for k, v in body.items() if v is not None}
    skip = {"host", "idempotency-key"}  # a server of its own; a key of its own
    assert {k: v for k, v in fast.headers.items() if k not in skip} == {
        k: v for k, v in walked.headers.items() if k not in skip
    }


def test_a_body_the_sdk_must_prepare_is_still_posted_as_a_body(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an SDK object is dumped by the SDK's own walk, as before
    block = anthropic.types.TextBlock(type="text", text="hi")
    body = {**BODY, "messages": [{"role": "user", "content": [block]}]}
    request, posts = _posted(monkeypatch, body)
    assert [set(p) for p in posts] == [{"body", "cast_to"}]
    assert request.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]
