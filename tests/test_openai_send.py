"""A Chat Completions call posts its body as it is, through the SDK's request path.

``client.chat.completions.create`` first walks the whole body against the SDK's parameter types
(its ``transform``: about a third of the SDK's client CPU a call, more for long conversations),
which changes nothing in a body of plain JSON. The call now goes through the SDK client's
``post``: the same URL, headers, key and error classes; ``None`` fields are left out as before;
fields the SDK does not know travel as they are."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import OPENAI_CHAT
from agentprop.testing import OpenAIServer, error_reply, message_reply, text_block

openai = pytest.importorskip("openai")

BODY: dict[str, Any] = {
    "model": "gpt-4.1-mini",
    "max_completion_tokens": 64,
    "temperature": None,
    "messages": [{"role": "user", "content": "hi", "name": None}],
    "a_server_field": {"kept": [1, 2]},
}


def _client(server: OpenAIServer) -> ModelClient:
    return ModelClient(
        OPENAI_CHAT,
        "gpt-4.1-mini",
        base_url=server.base_url,
        api_key="k-test",
        cache=False,
        max_concurrent_requests=4,
    )


def test_the_body_is_posted_as_it_is_without_the_sdk_transform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from openai.resources.chat.completions import completions

    def no_transform(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the SDK's transform walked the body")

    monkeypatch.setattr(completions, "async_maybe_transform", no_transform)
    with OpenAIServer(
        handler=lambda request: message_reply([text_block("hello")]), expected_api_key="k-test"
    ) as server:
        client = _client(server)
        reply = asyncio.run(client.call(BODY, trial=0))
        [request] = server.requests
    assert request.path == "/v1/chat/completions" and request.method == "POST"
    assert request.json == {k: v for k, v in BODY.items() if v is not None}
    assert request.headers["authorization"] == "Bearer k-test"
    assert reply.response["choices"][0]["message"]["content"] == "hello"


def test_an_error_answer_raises_the_sdk_error_as_before() -> None:
    with OpenAIServer(script=[error_reply(400, message="bad request")]) as server:
        client = _client(server)
        with pytest.raises(openai.BadRequestError, match="bad request"):
            asyncio.run(client.call(BODY, trial=0))
