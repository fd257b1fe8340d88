"""``LlamaServer``: the OpenAI-compatible server over ``llama_cpp.Llama``, its non-model parts.

No llama_cpp here: a fake ``Llama`` records what it was asked (messages, the grammar's JSON
schema, sampling) and answers as a scripted model would, so tool calls, ``tool_choice``, tool
results in the conversation, null assistant content, the missing-dependency error and an
``agentprop run`` with ``OpenAIAgent`` that replays with zero model calls are all checked.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentprop._cli import main
from agentprop.errors import MissingDependency
from agentprop.testing import LlamaServer
from agentprop.testing.llama_server import build_prompt, call_schema, parse_reply

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
GET_ORDER = {
    "type": "function",
    "function": {
        "name": "get_order",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
RESPOND = {
    "type": "function",
    "function": {
        "name": "respond",
        "parameters": {"type": "object", "properties": {"decision": {"type": "string"}}},
    },
}


class FakeLlama:
    """Answers like a model under the server's grammar:
    ``answer(messages, schema)`` gives the text."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        schema = (kwargs.get("response_format") or {}).get("schema")
        text = self.answer(kwargs["messages"], schema)
        return {
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7},
        }


def test_tool_choice_sets_the_schema_the_grammar_is_made_from() -> None:
    required = call_schema([GET_ORDER, RESPOND], "required")
    assert [s["properties"]["name"] for s in required["anyOf"]] == [
        {"const": "get_order"},
        {"const": "respond"},
    ]
    assert required["anyOf"][0]["properties"]["arguments"] == GET_ORDER["function"]["parameters"]
    auto = call_schema([GET_ORDER, RESPOND], "auto")
    assert auto["anyOf"][-1] == {
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
    }
    assert call_schema([GET_ORDER, RESPOND], "none") is None and call_schema([], "required") is None
    named = call_schema([GET_ORDER, RESPOND], {"type": "function", "function": {"name": "respond"}})
    assert named["properties"]["name"] == {"const": "respond"}


def test_the_prompt_keeps_tool_calls_and_results_and_accepts_null_content() -> None:
    request = {
        "tools": [GET_ORDER, RESPOND],
        "tool_choice": "required",
        "messages": [
            {"role": "system", "content": "You are the order agent."},
            {"role": "user", "content": "Where is O-1?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order_id": "O-1"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
        ],
    }
    prompt = build_prompt(request)
    assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
    assert (
        prompt[0]["content"].startswith("You are the order agent.")
        and "- get_order:" in prompt[0]["content"]
    )
    # required: a tool call is the only answer
    assert '{"content": TEXT}' not in prompt[0]["content"]
    assert json.loads(prompt[2]["content"]) == {
        "name": "get_order",
        "arguments": {"order_id": "O-1"},
    }
    assert prompt[3]["content"] == 'Result of get_order: {"status": "shipped"}'


def test_answers_become_tool_calls_or_text() -> None:
    schema = call_schema([GET_ORDER], "auto")
    assert parse_reply('{"name": "get_order", "arguments": {"order_id": "O-1"}}', schema) == (
        [{"type": "tool_use", "name": "get_order", "input": {"order_id": "O-1"}}],
        "tool_use",
    )
    assert parse_reply('{"content": "Hello"}', schema) == (
        [{"type": "text", "text": "Hello"}],
        "end_turn",
    )
    # cut off
    assert parse_reply('{"name": "get_ord', schema) == (
        [{"type": "text", "text": '{"name": "get_ord'}],
        "end_turn",
    )


def test_the_openai_sdk_gets_tool_calls_and_sends_tool_results_back() -> None:
    openai = pytest.importorskip("openai")
    fake = FakeLlama(
        lambda messages, schema: '{"name": "get_order", "arguments": {"order_id": "O-1"}}'
    )
    with LlamaServer(llama=fake) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        first = client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "Where is O-1?"}],
            tools=[GET_ORDER],
            tool_choice="required",
        )
        call = first.choices[0].message.tool_calls[0]
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "get_order",
            {"order_id": "O-1"},
        )
        assert first.choices[0].finish_reason == "tool_calls" and first.usage.prompt_tokens == 11
        second = client.chat.completions.create(
            model="smollm2",
            messages=[
                {"role": "user", "content": "Where is O-1?"},
                {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                {"role": "tool", "tool_call_id": call.id, "content": '{"status": "shipped"}'},
            ],
            tools=[GET_ORDER],
            tool_choice="required",
        )
        assert second.choices[0].message.tool_calls
        assert server.model_calls == 2
    assert fake.calls[1]["messages"][-1]["content"] == 'Result of get_order: {"status": "shipped"}'
    assert fake.calls[0]["response_format"]["schema"]["properties"]["name"] == {
        "const": "get_order"
    }


def test_a_responses_api_request_is_refused_with_the_fix() -> None:
    openai = pytest.importorskip("openai")
    with LlamaServer(llama=FakeLlama(lambda m, s: "hi")) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="--api chat"):
            client.responses.create(model="smollm2", input="hello")
        assert server.model_calls == 0


def test_without_llama_cpp_starting_says_how_to_build_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails
    with pytest.raises(MissingDependency, match="llama-cpp-python") as caught:
        LlamaServer(tmp_path / "model.gguf").start()
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install llama-cpp-python' in str(caught.value)


def test_importing_the_server_does_not_import_llama_cpp() -> None:
    code = "import sys, agentprop.testing.llama_server; print('llama_cpp' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


def quickstart_model(messages: list[dict[str, str]], schema: Any) -> str:
    """A model that plays the quickstart correctly from the prompt the server builds."""
    last = messages[-1]["content"]
    if last.startswith("Result of get_order"):
        status = json.loads(last.split(": ", 1)[1]).get("status")
        args = {
            "node_id": "END_ANSWERED",
            "decision": "ANSWERED",
            "tool_actions": ["get_order"],
            "evidence": f"get_order: {status}",
            "user_message": f"It is {status}.",
        }
        return json.dumps({"name": "respond", "arguments": args})
    order = next((w.strip("?.") for w in last.split() if w.startswith("O-")), None)
    if order is not None:
        return json.dumps({"name": "get_order", "arguments": {"order_id": order}})
    args = {
        "node_id": "END_CLARIFY",
        "decision": "CLARIFY",
        "tool_actions": [],
        "evidence": "no order named",
        "user_message": "Which order?",
    }
    return json.dumps({"name": "respond", "arguments": args})


def test_agentprop_runs_openai_agent_through_it_and_replays_with_zero_model_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache.sqlite"
    common = [
        "run",
        str(QUICKSTART),
        "--agent",
        "openai",
        "--model",
        "smollm2",
        "--kinds",
        "mft",
        "--explore",
        "0",
        "--runs",
        "1",
    ]
    common += ["--corpus", "none", "--cache", str(cache), "--shrink-budget", "0"]
    with LlamaServer(llama=FakeLlama(quickstart_model)) as server:
        out = io.StringIO()
        code = main([*common, "--base-url", server.base_url], out=out, err=out)
        assert code == 0, out.getvalue()
        assert "2 cases: 2 passed" in out.getvalue()
        first = server.model_calls
        assert first == 3  # get_order then respond; respond
        out = io.StringIO()
        code = main(
            [*common, "--base-url", server.base_url, "--cache-mode", "replay-only"],
            out=out,
            err=out,
        )
        assert code == 0, out.getvalue()
        assert server.model_calls == first  # the second run replayed every call from the cache
