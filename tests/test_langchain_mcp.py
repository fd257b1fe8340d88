"""langchain-mcp-adapters against a served case (``agentprop serve``, agentprop.mcp.CaseServer).

Its ``MultiServerMCPClient.get_tools()`` opens a new MCP session for every tool call. A served
case counts each session as one trial, so such calls would split one conversation into many
trials: they are refused, saying how to keep one session, and no trial is recorded. A session
kept open with ``client.session(NAME)`` is one conversation, one trial. (Under
agentprop.mcp.McpServedAgent the default works as it is: every session of a trial's server acts
on that trial; tests/test_frameworks.py runs it end to end.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "langchain_mcp_adapters",
    reason="langchain-mcp-adapters is not installed (it needs mcp<2: pip install "
    "'agentprop[langchain-mcp]')",
)

from langchain_mcp_adapters.client import MultiServerMCPClient  # noqa: E402
from langchain_mcp_adapters.prompts import load_mcp_prompt  # noqa: E402
from langchain_mcp_adapters.tools import load_mcp_tools  # noqa: E402

from agentprop import load_project  # noqa: E402
from agentprop.mcp import CaseServer, HttpCaseServer  # noqa: E402
from agentprop.oracle import OracleSettings  # noqa: E402

SUPPORTOPS = Path(__file__).resolve().parents[1] / "examples" / "supportops"
CANCEL = "END_CANCELLED<-N7_CANCEL"
IDENTITY = {"account_id": "A1", "last4": "4242", "zip": "94107"}


def _client(url: str) -> Any:
    return MultiServerMCPClient({"supportops": {"transport": "streamable_http", "url": url}})


def test_a_session_per_tool_call_is_refused_and_no_trial() -> None:
    project = load_project(SUPPORTOPS)
    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=1)
    )
    notes: list[str] = []
    case.on_note = notes.append

    async def default_tools(url: str) -> list[str]:
        tools = {t.name: t for t in await _client(url).get_tools()}  # the adapter's default
        return [
            str(await tools["verify_identity"].ainvoke(IDENTITY)),
            str(await tools["get_account"].ainvoke({"account_id": "A1"})),
        ]

    with HttpCaseServer(case) as running:
        answers = asyncio.run(default_tools(running.url))
    assert all(
        "without reading the user's message" in a and "client.session(" in a for a in answers
    )
    assert case.traces == [] and case.split >= 2
    assert len(notes) == 1 and "session per tool call" in notes[0]


def test_a_session_kept_open_is_one_conversation_one_trial() -> None:
    project = load_project(SUPPORTOPS)
    scenario = project.scenario(CANCEL)
    case = CaseServer(project, scenario, settings=OracleSettings(mode="fixed", runs=1))

    async def one_session(url: str) -> list[str]:
        said: list[str] = []
        async with _client(url).session("supportops") as session:
            tools = {t.name: t for t in await load_mcp_tools(session)}
            for _turn in range(2):
                (message,) = await load_mcp_prompt(session, "user_message")
                said.append(str(message.content))
                await tools["verify_identity"].ainvoke(IDENTITY)
                await tools["respond"].ainvoke(
                    {
                        "node_id": "N6_CONFIRM_CANCEL",
                        "decision": "ASK_CONFIRM_CANCEL",
                        "tool_actions": [],
                        "evidence": "none",
                        "user_message": "Confirm?",
                    }
                )
            assert await load_mcp_prompt(session, "user_message") == []  # the conversation is over
        return said

    with HttpCaseServer(case) as running:
        said = asyncio.run(one_session(running.url))
    assert said == scenario.messages
    (trace,) = case.traces
    assert case.split == 0 and trace.trial == 0
    assert [[c.name for c in t.tool_calls] for t in trace.turns] == [
        ["verify_identity"],
        ["verify_identity"],
    ]
