"""McpServedAgent over stdio: the MCP client starts the server process itself.

The "framework" is the official SDK's own stdio client (``mcp.Client(StdioServerParameters)``)
playing the SupportOps reference agent (the OpenAI Agents SDK's ``MCPServerStdio`` is in
tests/test_frameworks.py). Each
stdio process relays its session to the trial's server in agentprop's process, so a client
that starts a process per tool call still makes one trial, and is told how to keep one session.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentprop import Trace, load_agent, load_project  # noqa: E402
from agentprop._agents.mcp_compat import Client, StdioServerParameters  # noqa: E402
from agentprop.mcp import McpConversation, McpServedAgent  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
CANCEL = "END_CANCELLED<-N7_CANCEL"


@pytest.fixture(scope="module")
def project() -> Any:
    return load_project(SUPPORTOPS)


class _StdioAgent(McpServedAgent):
    """The reference agent over a stdio server it starts each turn (one session per turn)."""

    reference: Any = None
    spec: Any = None

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.agent = self.reference(faults)
        self.memory: dict[str, Any] = {}

    def conversation(self, client: Any) -> McpConversation:
        conv = McpConversation(client, rng=self.ctx.rng)
        conv.turn_index, conv.memory = self.ctx.turn_index, self.memory
        return conv

    async def mcp_turn(self, message: str, url: str) -> None:
        async with Client(StdioServerParameters(**self.stdio.params())) as client:
            await self.conversation(client).play(self.agent.turn, message, spec=self.spec)


class _PerCall:
    """A client that starts a new stdio server (a new session) for every request, as
    langchain-mcp-adapters' default tools do."""

    def __init__(self, params: StdioServerParameters) -> None:
        self.params = params

    async def call_tool(self, name: str, args: dict[str, Any]) -> Any:
        async with Client(self.params) as client:
            return await client.call_tool(name, args)

    async def read_resource(self, uri: str) -> Any:
        async with Client(self.params) as client:
            return await client.read_resource(uri)


class _SplitAgent(_StdioAgent):
    async def mcp_turn(self, message: str, url: str) -> None:
        client: Any = _PerCall(StdioServerParameters(**self.stdio.params()))
        await self.conversation(client).play(self.agent.turn, message, spec=self.spec)


def _agent(cls: type[_StdioAgent], project: Any) -> type[_StdioAgent]:
    reference = load_agent("agent:SupportOpsAgent", project.base_dir).target
    return type(cls.__name__, (cls,), {"reference": reference, "spec": project.spec})


def _comparable(trace: Trace) -> list[Any]:
    return [(t.tool_calls, t.response, t.text, t.errors) for t in trace.turns]


def test_a_stdio_client_is_recorded_like_the_python_agent(project: Any) -> None:
    """The SDK's stdio client starts agentprop's server process each turn; the trial equals the
    in-process run of the same agent, fault draws included."""
    faults = {"skip_auth": 0.5, "never_retry": 0.5}
    python = load_agent("agent:SupportOpsAgent", project.base_dir, faults)
    over_stdio = _agent(_StdioAgent, project)

    async def compare() -> list[bool]:
        same = []
        for case, trial in [(CANCEL, 0), ("cancel_order:timeout+retry", 1)]:
            scenario = project.scenario(case)
            a = await project.arun(scenario, python.factory, trial=trial)
            b = await project.arun(scenario, lambda: over_stdio(faults), trial=trial)
            assert b.tool_calls
            same.append(_comparable(a) == _comparable(b))
        return same

    assert asyncio.run(compare()) == [True, True]


class _KeptAgent(_StdioAgent):
    """The reference agent over one stdio server process for the whole conversation."""

    started = 0

    def start(self) -> Any:
        type(self).started += 1
        return Client(StdioServerParameters(**self.stdio.params()))

    async def mcp_turn(self, message: str, url: str) -> None:
        client = await self.keep_open("mcp", self.start)
        await self.conversation(client).play(self.agent.turn, message, spec=self.spec)


def test_a_stdio_client_kept_open_is_one_process_per_trial(project: Any) -> None:
    """keep_open holds the client (so its server process and session) for the conversation: a
    two-turn case starts one process per trial, closed when the trial ends."""
    python = load_agent("agent:SupportOpsAgent", project.base_dir)
    kept = _agent(_KeptAgent, project)
    scenario = project.scenario(CANCEL)

    async def both(trial: int) -> tuple[Trace, Trace]:
        return await project.arun(scenario, python.factory, trial=trial), await project.arun(
            scenario, kept, trial=trial
        )

    for trial in range(2):
        a, b = asyncio.run(both(trial))
        assert len(b.turns) == 2 and _comparable(a) == _comparable(b) and not b.all_errors()
    assert kept.started == 2


def test_a_process_per_tool_call_is_one_trial_and_is_told(project: Any) -> None:
    """A client that starts a server process per call splits each turn over many sessions: the
    conversation is still one trial, recorded as the in-process run, and the split is explained."""
    python = load_agent("agent:SupportOpsAgent", project.base_dir)
    split = _agent(_SplitAgent, project)
    split._warned_split = False  # said once per class: this test must see it said
    scenario = project.scenario(CANCEL)

    async def both() -> tuple[Trace, Trace]:
        return await project.arun(scenario, python.factory, trial=0), await project.arun(
            scenario, split, trial=0
        )

    with pytest.warns(UserWarning) as warned:
        a, b = asyncio.run(both())
    assert (
        _comparable(a) == _comparable(b)
        and b.decisions == ["ASK_CONFIRM_CANCEL", "CANCELLED"]
        and not b.all_errors()
    )
    (warning,) = [w for w in warned if "MCP sessions" in str(w.message)]
    text = str(warning.message)
    assert "opens a session per call" in text and "one trial" in text and "client.session(" in text


def test_the_stdio_relay_refuses_to_run_without_a_trial(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentprop._agents import mcp_stdio

    monkeypatch.delenv(mcp_stdio.URL_ENV, raising=False)
    assert mcp_stdio.main() == 2
    assert "McpServedAgent.stdio" in capsys.readouterr().err
