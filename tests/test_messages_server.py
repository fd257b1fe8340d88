"""MessagesServer against the real anthropic SDK, over loopback only."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import anthropic
import pytest

from agentprop.errors import InvalidArgument
from agentprop.testing import (
    MessagesServer,
    drop_connection,
    error_reply,
    http_date_in,
    malformed_reply,
    message_reply,
    overloaded_reply,
    rate_limit_reply,
    respond_reply,
    slow_reply,
    text_reply,
    tool_use_block,
    tool_use_reply,
)

KEY = "dummy-test-key"
TOOLS = [
    {
        "name": "get_order",
        "description": "Look up an order",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    }
]


def client(server: MessagesServer, **kwargs: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=0, **kwargs)


def ask(c: anthropic.Anthropic, text: str = "Where is my order A1?", **kwargs: Any) -> Any:
    return c.messages.create(
        model="claude-test-1",
        max_tokens=256,
        messages=[{"role": "user", "content": text}],
        **kwargs,
    )


def test_tool_use_then_end_turn_through_the_sdk() -> None:
    with MessagesServer(
        [tool_use_reply("get_order", {"id": "A1"}), text_reply("It shipped.")]
    ) as server:
        c = client(server)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Where is my order A1?"}]
        first = c.messages.create(
            model="claude-test-1", max_tokens=256, messages=messages, tools=TOOLS
        )
        assert first.stop_reason == "tool_use"
        assert first.type == "message" and first.role == "assistant"
        assert first.model == "claude-test-1"  # echoed from the request
        (call,) = [b for b in first.content if b.type == "tool_use"]
        assert call.name == "get_order" and call.input == {"id": "A1"}
        assert call.id.startswith("toolu_")
        assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0

        messages.append({"role": "assistant", "content": first.content})
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "shipped"}],
            }
        )
        second = c.messages.create(
            model="claude-test-1", max_tokens=256, messages=messages, tools=TOOLS
        )
        assert second.stop_reason == "end_turn"
        assert [b.text for b in second.content if b.type == "text"] == ["It shipped."]
        assert second.id != first.id

        recorded = server.requests
        assert len(recorded) == 2
        assert all(r.method == "POST" and r.path == "/v1/messages" for r in recorded)
        assert recorded[0].json["tools"][0]["name"] == "get_order"
        tool_result = recorded[1].messages[2]["content"][0]
        assert tool_result == {"type": "tool_result", "tool_use_id": call.id, "content": "shipped"}
        # the SDK's credential header reached the server (this SDK sends a bearer token;
        # older ones send x-api-key)
        auth = recorded[0].headers.get("x-api-key") or recorded[0].headers.get("authorization", "")
        assert auth.endswith(KEY)
        assert server.pending == 0


def test_handler_answers_from_the_conversation() -> None:
    def handler(request: dict[str, Any]) -> Any:
        last = request["messages"][-1]["content"]
        if isinstance(last, list) and last and last[0].get("type") == "tool_result":
            return respond_reply(decision="refund", message=f"tool said {last[0]['content']}")
        return tool_use_reply("get_order", {"id": "Z9"}, text="Let me check.")

    with MessagesServer(handler=handler) as server:
        c = client(server)
        first = ask(c)
        assert [b.type for b in first.content] == ["text", "tool_use"]
        call = first.content[1]
        second = c.messages.create(
            model="claude-test-1",
            max_tokens=256,
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": first.content},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "ok"}],
                },
            ],
        )
        assert second.stop_reason == "tool_use"
        assert second.content[0].name == "respond"
        assert second.content[0].input == {"decision": "refund", "message": "tool said ok"}


def test_plain_dicts_and_strings_are_replies_and_usage_is_deterministic() -> None:
    truncated = {"content": [{"type": "text", "text": "x"}], "stop_reason": "max_tokens"}
    with MessagesServer(["hello", "hello", truncated]) as server:
        c = client(server)
        a, b = ask(c), ask(c)
        assert a.content[0].text == "hello"
        assert (a.usage.input_tokens, a.usage.output_tokens) == (
            b.usage.input_tokens,
            b.usage.output_tokens,
        )
        longer = ask(c, text="Where is my order A1? " * 40)
        assert longer.stop_reason == "max_tokens"
        assert longer.usage.input_tokens > a.usage.input_tokens


def test_explicit_usage_model_and_multiple_tool_calls() -> None:
    reply = message_reply(
        [tool_use_block("a", {"x": 1}, id="toolu_fixed"), tool_use_block("b", {})],
        stop_reason="tool_use",
        model="claude-other",
        input_tokens=11,
        output_tokens=7,
    )
    with MessagesServer([reply]) as server:
        m = ask(client(server))
        assert m.model == "claude-other"
        assert (m.usage.input_tokens, m.usage.output_tokens) == (11, 7)
        assert [(b.name, b.id) for b in m.content][0] == ("a", "toolu_fixed")
        assert m.content[1].id != "toolu_fixed"


def test_status_faults_surface_as_sdk_errors() -> None:
    script = [
        rate_limit_reply(2),
        error_reply(500),
        overloaded_reply(),
        rate_limit_reply(http_date_in(30)),
    ]
    with MessagesServer(script) as server:
        c = client(server)
        with pytest.raises(anthropic.RateLimitError) as rate:
            ask(c)
        assert rate.value.response.headers["retry-after"] == "2"
        with pytest.raises(anthropic.InternalServerError) as err:
            ask(c)
        assert err.value.status_code == 500
        with pytest.raises(anthropic.APIStatusError) as over:
            ask(c)
        assert over.value.status_code == 529
        assert over.value.type == "overloaded_error"
        with pytest.raises(anthropic.RateLimitError) as dated:
            ask(c)
        assert dated.value.response.headers["retry-after"].endswith("GMT")
        # max_retries=0: the SDK made exactly one HTTP attempt per call
        assert len(server.requests) == 4


def test_malformed_reply_is_a_json_error() -> None:
    with MessagesServer([malformed_reply()]) as server:
        with pytest.raises(json.JSONDecodeError):
            ask(client(server))


def test_dropped_connection_is_a_connection_error() -> None:
    with MessagesServer([drop_connection(), text_reply("back")]) as server:
        c = client(server)
        with pytest.raises(anthropic.APIConnectionError):
            ask(c)
        assert ask(c).content[0].text == "back"  # the server keeps serving


def test_slow_reply_times_out_and_stop_does_not_wait_for_it() -> None:
    with MessagesServer([slow_reply(text_reply("late"), 30.0)]) as server:
        c = client(server, timeout=0.3)
        with pytest.raises(anthropic.APITimeoutError):
            ask(c)
        started = time.monotonic()
    assert time.monotonic() - started < 10  # generous: stop() wakes the sleeping reply


def test_script_exhausted_fails_loudly() -> None:
    with MessagesServer(["only one"]) as server:
        c = client(server)
        ask(c)
        with pytest.raises(anthropic.BadRequestError) as err:
            ask(c)
        assert "no scripted reply left for request #1" in str(err.value)


def test_handler_exceptions_become_non_retryable_500s() -> None:
    def broken(request: dict[str, Any]) -> Any:
        raise KeyError("boom")

    with MessagesServer(handler=broken) as server:
        with pytest.raises(anthropic.InternalServerError) as err:
            ask(client(server))
        assert err.value.response.headers["x-should-retry"] == "false"
        assert [type(e) for e in server.errors] == [KeyError]


def test_expected_api_key_is_enforced() -> None:
    with MessagesServer(handler=lambda r: "ok", expected_api_key=KEY) as server:
        assert ask(client(server)).content[0].text == "ok"
        wrong = anthropic.Anthropic(base_url=server.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError):
            ask(wrong)


def test_streaming_and_bad_requests_are_rejected_clearly() -> None:
    with MessagesServer(handler=lambda r: "ok") as server:
        c = client(server)
        with pytest.raises(anthropic.BadRequestError) as err:
            c.messages.create(
                model="claude-test-1",
                max_tokens=10,
                messages=[{"role": "user", "content": "x"}],
                stream=True,
            )
        assert "does not stream" in str(err.value)
        with pytest.raises(anthropic.NotFoundError):
            c.models.list()


def test_concurrent_requests_are_served_in_parallel() -> None:
    with MessagesServer(handler=lambda r: "ok", latency=0.3) as server:
        c = client(server)
        results: list[str] = []
        lock = threading.Lock()

        def worker() -> None:
            text = ask(c).content[0].text
            with lock:
                results.append(text)

        threads = [threading.Thread(target=worker) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == ["ok"] * 16
        assert len(server.requests) == 16
        # 16 clients each waiting 0.3 s: a serial server would never overlap two replies
        assert server.peak_concurrency >= 8


def test_replies_go_out_without_nagle_delay() -> None:
    """The headers and the body are separate writes: with Nagle's algorithm on, the body would
    wait for the client's delayed ACK (~40 ms). Every connection must have TCP_NODELAY set."""
    nodelay: list[int] = []
    with MessagesServer(latency=0.0) as server:

        def handler(request: dict[str, Any]) -> str:
            with server._httpd.sockets_lock:  # type: ignore[union-attr]
                sockets = list(server._httpd.open_sockets)  # type: ignore[union-attr]
            nodelay.extend(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)
            return "ok"

        server.set_handler(handler)
        c = client(server)
        assert [ask(c).content[0].text for _ in range(3)] == ["ok"] * 3
    assert nodelay and all(nodelay)


def test_async_client_works() -> None:
    async def main(base_url: str) -> list[str]:
        async with anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=0) as c:
            replies = await asyncio.gather(
                *[
                    c.messages.create(
                        model="claude-test-1",
                        max_tokens=5,
                        messages=[{"role": "user", "content": str(i)}],
                    )
                    for i in range(8)
                ]
            )
        return [r.content[0].text for r in replies]

    with MessagesServer(
        handler=lambda r: "echo " + r["messages"][0]["content"], latency=0.05
    ) as server:
        assert sorted(asyncio.run(main(server.base_url))) == sorted(f"echo {i}" for i in range(8))


def test_enqueue_reset_and_lifecycle() -> None:
    server = MessagesServer()
    with pytest.raises(InvalidArgument):
        _ = server.base_url  # not running yet
    with server:
        server.enqueue(text_reply("a"), lambda r: "b")
        c = client(server)
        assert [ask(c).content[0].text for _ in range(2)] == ["a", "b"]
        assert server.last_request.index == 1
        server.reset()
        assert server.requests == []


def test_builders_validate_arguments() -> None:
    with pytest.raises(InvalidArgument):
        text_reply("x", stop_reason="finished")
    with pytest.raises(InvalidArgument):
        error_reply(200)
    with pytest.raises(InvalidArgument):
        slow_reply("x", -1)
    with pytest.raises(InvalidArgument):
        MessagesServer([42])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        MessagesServer(latency=-1)
