"""The model client spreads its requests over several SDK clients (connection pools).

One httpcore pool probes each idle connection it holds on every request it starts and ends, so
a single pool for 128 requests in flight cost each call time in proportion to the concurrency
(the library was 1.31x the SDK alone at concurrency 128, 1.01x at 32). A client whose
``max_concurrent_requests`` is ``n`` makes ``ceil(n / 16)`` SDK clients per event loop, takes
them in turn, and closes every one of them."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

from agentprop._modelapi.client import ModelClient, _pools
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES, OPENAI_CHAT
from agentprop.testing import MessagesServer, message_reply, text_block

BODY = {
    "model": "claude-haiku-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}


@pytest.mark.parametrize(
    ("limit", "pools"), [(1, 1), (16, 1), (17, 2), (32, 2), (64, 4), (128, 8), (None, 4)]
)
def test_the_number_of_pools_follows_the_requests_in_flight(limit: int | None, pools: int) -> None:
    assert _pools(limit) == pools


def test_calls_take_the_sdk_clients_in_turn_and_each_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = type(ANTHROPIC_MESSAGES)
    made: list[Any] = []
    used: list[Any] = []
    make, send = provider.make_client, provider.send

    def spy_make(self: Any, **kwargs: Any) -> Any:
        made.append(make(self, **kwargs))
        return made[-1]

    async def spy_send(self: Any, client: Any, body: Any, **kwargs: Any) -> Any:
        used.append(client)
        return await send(self, client, body, **kwargs)

    monkeypatch.setattr(provider, "make_client", spy_make)
    monkeypatch.setattr(provider, "send", spy_send)
    with MessagesServer(handler=lambda request: message_reply([text_block("ok")])) as server:
        client = ModelClient(
            ANTHROPIC_MESSAGES,
            "claude-haiku-4-5",
            base_url=server.base_url,
            api_key="k-test",
            cache=False,
            max_concurrent_requests=40,
        )

        async def six_calls() -> None:
            await asyncio.gather(*(client.call(BODY, trial=t) for t in range(6)))
            assert not any(c.is_closed() for c in made)
            await client.aclose()

        asyncio.run(six_calls())
        assert len(server.requests) == 6
    assert len(made) == 3 and len({id(c) for c in made}) == 3
    # in turn: each client carries two of the six calls
    assert sorted(used.count(c) for c in made) == [2, 2, 2]
    assert all(c.is_closed() for c in made)


def test_a_given_sdk_client_is_the_only_one_used(monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic

    provider = type(ANTHROPIC_MESSAGES)
    used: list[Any] = []
    send = provider.send

    async def spy_send(self: Any, client: Any, body: Any, **kwargs: Any) -> Any:
        used.append(client)
        return await send(self, client, body, **kwargs)

    monkeypatch.setattr(provider, "send", spy_send)
    with MessagesServer(handler=lambda request: message_reply([text_block("ok")])) as server:

        async def calls() -> None:
            sdk = anthropic.AsyncAnthropic(base_url=server.base_url, api_key="k", max_retries=0)
            client = ModelClient(
                ANTHROPIC_MESSAGES,
                "claude-haiku-4-5",
                cache=False,
                max_concurrent_requests=128,
                sdk_client=sdk,
            )
            await asyncio.gather(*(client.call(BODY, trial=t) for t in range(4)))
            await client.aclose()
            assert used == [sdk] * 4 and not sdk.is_closed()  # the caller's to close
            await sdk.close()

        asyncio.run(calls())


@pytest.mark.parametrize("provider", [ANTHROPIC_MESSAGES, OPENAI_CHAT])
def test_the_pools_share_one_tls_context_and_keep_the_timeout(
    provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # loading the certificates is the dearest part of making an SDK client: once, not per pool
    provider.sdk()  # imported before counting
    made: list[Any] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    one = provider.make_clients(1, api_key="k", base_url="http://127.0.0.1:9", timeout=7.0)
    per_client = len(made)
    assert per_client >= 1
    made.clear()
    clients = provider.make_clients(5, api_key="k", base_url="http://127.0.0.1:9", timeout=7.0)
    assert len(clients) == 5 and len(made) == per_client  # as many as one client's
    assert [c.timeout for c in clients] == [7.0] * 5 and one[0].timeout == 7.0
    assert all(c.base_url == clients[0].base_url for c in clients)


def test_a_run_of_32_conversations_loads_the_certificates_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 32 conversations in flight on the CLI's default limit: the pools it spreads them over
    # load the certificates (tens of milliseconds of CPU) once, as the SDK's one client does
    import anthropic

    made: list[Any] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    anthropic.AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9")
    one_client = len(made)
    made.clear()
    sdk_clients: list[Any] = []
    make = type(ANTHROPIC_MESSAGES).make_client

    def spy_make(self: Any, **kwargs: Any) -> Any:
        sdk_clients.append(make(self, **kwargs))
        return sdk_clients[-1]

    monkeypatch.setattr(type(ANTHROPIC_MESSAGES), "make_client", spy_make)
    with MessagesServer(handler=lambda request: message_reply([text_block("ok")])) as server:
        client = ModelClient(
            ANTHROPIC_MESSAGES,
            "claude-haiku-4-5",
            base_url=server.base_url,
            api_key="k",
            cache=False,
        )

        async def conversations() -> None:
            async def conversation(t: int) -> None:
                for _ in range(2):
                    await client.call(BODY, trial=t)

            await asyncio.gather(*(conversation(t) for t in range(32)))
            await client.aclose()

        asyncio.run(conversations())
        assert len(server.requests) == 64
    assert len(sdk_clients) == _pools(None) > 1
    assert len(made) == one_client >= 1
