"""The LangGraph, OpenAI Agents SDK and PydanticAI adapters, each with its framework's defaults,
and two frameworks' own MCP clients (the Agents SDK's, langchain-mcp-adapters' under LangGraph)
driven through agentprop.mcp.McpServedAgent.

End to end, each framework's SupportOps example (examples/supportops_langgraph,
examples/supportops_openai_agents, examples/supportops_pydanticai) runs through its own model
client against a loopback OpenAI-compatible server whose replies are the SupportOps reference
agent's decisions (agentprop.testing.played): the correct agent passes the retry cases (an
injected timeout must reach the model as a tool result carrying its kind), and the faulty one
(never_retry) fails them with the signatures the reference agent run in-process fails with.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentprop import ToolError, load_agent, load_project
from agentprop._cli import main
from agentprop.adapters import bind

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
# a retry in the first turn and one in the second (after the confirmation), three runs each
RETRY_CASES = [
    "--kinds",
    "mft",
    "--case",
    "verify_identity:timeout+retry",
    "--case",
    "cancel_order:timeout+retry",
    "--runs",
    "3",
]
FRAMEWORKS = {
    "langgraph-prebuilt": ("langgraph", "examples.supportops_langgraph.agent:SupportOpsReact"),
    "langgraph-custom-graph": ("langgraph", "examples.supportops_langgraph.agent:SupportOpsGraph"),
    "openai-agents": ("agents", "examples.supportops_openai_agents.agent:SupportOpsAgentsSDK"),
    # the SDK's own MCP client against a real MCP server (streamable HTTP) started per trial
    "openai-agents-over-mcp": (
        "agents.mcp",
        "examples.supportops_openai_agents.agent:SupportOpsAgentsSDKOverMcp",
    ),
    # PydanticAI's own OpenAI model class and client over HTTP, its output tool for the answer
    "pydantic-ai": (
        "pydantic_ai",
        "examples.supportops_pydanticai.agent:SupportOpsPydanticAIOverOpenAI",
    ),
    # the same client starting agentprop's server as a stdio process (MCPServerStdio)
    "openai-agents-over-mcp-stdio": (
        "agents.mcp",
        "examples.supportops_openai_agents.agent:SupportOpsAgentsSDKOverMcpStdio",
    ),
    # LangGraph's prebuilt agent with its tools from langchain-mcp-adapters' MultiServerMCPClient
    # (its default: a new MCP session per tool call) against a real MCP server started per trial
    "langgraph-over-mcp": (
        "langchain_mcp_adapters",
        "examples.supportops_langgraph.over_mcp:SupportOpsReactOverMcp",
    ),
}


def _need(module: str) -> None:
    reason = f"{module} is not installed (pip install 'agentprop[test]' installs every framework)"
    if module == "langchain_mcp_adapters":
        reason = (
            "langchain-mcp-adapters is not installed (it needs mcp<2: pip install "
            "'agentprop[langchain-mcp]')"
        )
    pytest.importorskip(module, reason=reason)


class StubTurn:
    """What the tools see of a turn: ``call`` answers from a table or raises its tool error."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, name: str, /, **args: Any) -> Any:
        self.calls.append((name, args))
        answer = self.answers[name]
        if isinstance(answer, ToolError):
            raise answer
        return answer


def _run(tmp_path: Path, agent: str | None, *extra: str) -> tuple[int, dict[str, str]]:
    report = tmp_path / "report.json"
    args = [
        "run",
        str(SUPPORTOPS),
        *RETRY_CASES,
        "--explore",
        "0",
        "--shrink-budget",
        "0",
        "--corpus",
        "none",
        "--json",
        str(report),
    ]
    code = main(args + (["--agent", agent] if agent else []) + list(extra))
    cases = json.loads(report.read_text())["cases"]
    return code, {
        c["id"]: (c["failures"][0]["signature"] if c["failures"] else c["verdict"]) for c in cases
    }


@pytest.fixture(scope="module")
def reference_failures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    code, verdicts = _run(tmp_path_factory.mktemp("reference"), None, "--fault", "never_retry=1")
    assert code == 1 and len(verdicts) == 2 and all("retry_policy" in s for s in verdicts.values())
    return verdicts


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_agent_passes_and_its_fault_fails_like_the_reference(
    framework: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reference_failures: dict[str, str],
) -> None:
    module, agent = FRAMEWORKS[framework]
    _need(module)
    monkeypatch.chdir(ROOT)
    code, verdicts = _run(tmp_path, agent)
    assert (
        code == 0
        and set(verdicts) == set(reference_failures)
        and set(verdicts.values()) == {"PASS"}
    )
    code, verdicts = _run(tmp_path, agent, "--fault", "never_retry=1")
    assert code == 1 and verdicts == reference_failures


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_agent_is_recorded_like_the_python_agent(framework: str) -> None:
    module, agent = FRAMEWORKS[framework]
    _need(module)
    project = load_project(SUPPORTOPS)
    faults = {"skip_auth": 0.5, "never_retry": 0.5, "leak_pii": 0.5}
    python = load_agent("agent:SupportOpsAgent", project.base_dir, faults)
    played = load_agent(agent, ROOT, faults)
    cases = [
        "END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry",
        "END_TICKET<-N7_CANCEL",
        "END_REFUSE_PII<-N1_INTENT",
    ]

    async def compare() -> tuple[int, int]:
        differing = model_calls = 0
        for case in cases:
            scenario = project.scenario(case)
            for trial in range(2):
                a = await project.arun(scenario, python.factory, trial=trial)
                b = await project.arun(scenario, played.factory, trial=trial)
                differing += [(t.tool_calls, t.response, t.text, t.errors) for t in a.turns] != [
                    (t.tool_calls, t.response, t.text, t.errors) for t in b.turns
                ]
                model_calls += b.usage.model_calls
        return differing, model_calls

    differing, model_calls = asyncio.run(compare())
    assert differing == 0
    assert model_calls > 0  # the turns really went through the framework's model client


def test_langgraph_tool_node_hands_a_tool_error_to_the_model_with_its_kind() -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from agentprop.adapters.langgraph import langchain_tools

    project = load_project(SUPPORTOPS)
    graph = StateGraph(MessagesState)
    # LangGraph's default handle_tool_errors
    graph.add_node("tools", ToolNode(langchain_tools(project.spec)))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    node = graph.compile()
    turn = StubTurn(
        {
            "get_account": ToolError("timeout", "upstream timed out"),
            "get_plan_rules": {"plan_id": "P", "can_cancel": True},
        }
    )
    calls = [
        {"name": "get_account", "args": {"account_id": "A1"}, "id": "c1", "type": "tool_call"},
        {"name": "get_plan_rules", "args": {"plan_id": "P"}, "id": "c2", "type": "tool_call"},
    ]

    async def invoke() -> Any:
        with bind(turn):
            return await node.ainvoke({"messages": [AIMessage("", tool_calls=calls)]})

    _, failed, answered = asyncio.run(invoke())["messages"]
    assert failed.status == "error" and failed.content == "timeout: upstream timed out"
    assert answered.status == "success" and json.loads(answered.content) == {
        "plan_id": "P",
        "can_cancel": True,
    }


def test_openai_agents_tools_are_strict_where_they_can_be_and_keep_the_error_kind() -> None:
    pytest.importorskip("agents")
    from agents.strict_schema import ensure_strict_json_schema

    from agentprop.adapters.openai_agents import function_tools, strict_schema

    project = load_project(SUPPORTOPS)
    tools = {t.name: t for t in function_tools(project.spec)}
    # update_address has a nested object with an optional field: strict, the field nullable
    update = tools["update_address"]
    assert update.strict_json_schema
    # the SDK's own check accepts it
    ensure_strict_json_schema(json.loads(json.dumps(update.params_json_schema)))
    address = update.params_json_schema["properties"]["new_address"]
    assert address["additionalProperties"] is False and "region" in address["required"]
    assert address["properties"]["region"]["type"] == ["string", "null"]
    # create_ticket's evidence is an object open to any key: sent as written, not strict
    assert not tools["create_ticket"].strict_json_schema
    assert strict_schema({"type": "object", "properties": {"m": {"type": "object"}}}) is None

    turn = StubTurn(
        {
            "update_address": {"status": "updated"},
            "get_account": ToolError("rate_limited", "slow down"),
        }
    )
    new_address = {
        "line1": "1 Main St",
        "city": "X",
        "region": None,
        "postal_code": "1",
        "country": "US",
    }

    async def invoke() -> tuple[Any, Any]:
        with bind(turn):
            ok = await update.on_invoke_tool(
                None, json.dumps({"account_id": "A1", "new_address": new_address})
            )  # type: ignore[arg-type]
            failed = await tools["get_account"].on_invoke_tool(
                None, json.dumps({"account_id": "A1"})
            )  # type: ignore[arg-type]
        return ok, failed

    ok, failed = asyncio.run(invoke())
    assert json.loads(ok) == {"status": "updated"}  # JSON, not str() of a dict
    assert turn.calls[0] == (
        "update_address",
        {
            "account_id": "A1",
            "new_address": {k: v for k, v in new_address.items() if v is not None},
        },
    )
    assert failed == "rate_limited: slow down"


def test_the_played_model_reads_each_frameworks_tool_error_and_answer_tool() -> None:
    from agentprop.errors import InvalidArgument
    from agentprop.spec import load_spec
    from agentprop.testing.played import _respond_tool, read_tool_result

    # a tool error as LangGraph / the Agents SDK hand it over, and as PydanticAI 2 wraps it
    for text in (
        "timeout: the tool did not answer in time",
        '{"error": "timeout: the tool did not answer in time"}',
    ):
        value, error = read_tool_result(text)
        assert (
            value is None
            and error is not None
            and (error.kind, error.message) == ("timeout", "the tool did not answer in time")
        )
    # an output, not an error
    assert read_tool_result('{"error": "x", "code": 3}') == ({"error": "x", "code": 3}, None)
    spec = load_spec(SUPPORTOPS / "spec.yaml")
    tools = [{"type": "function", "function": {"name": t.name}} for t in spec.action_tools]
    assert (
        _respond_tool(
            {"tools": [*tools, {"type": "function", "function": {"name": "respond"}}]}, spec
        )
        == "respond"
    )
    assert (
        _respond_tool(
            {"tools": [*tools, {"type": "function", "function": {"name": "final_result"}}]}, spec
        )
        == "final_result"
    )
    # Responses API
    assert (
        _respond_tool({"tools": [*tools, {"type": "function", "name": "final_result"}]}, spec)
        == "final_result"
    )
    with pytest.raises(InvalidArgument, match="cannot tell which offered tool"):
        _respond_tool(
            {
                "tools": [
                    *tools,
                    {"type": "function", "function": {"name": "a"}},
                    {"type": "function", "function": {"name": "b"}},
                ]
            },
            spec,
        )
