"""AnthropicAgent with the real anthropic SDK against MessagesServer on loopback (no key, no
internet).

The "model" in most tests is :class:`AgentAsModel`: a MessagesServer handler that plays a Python
agent. For every request it rebuilds the conversation from the request's messages, replays the
agent over it (feeding it the tool results the request carries) and answers with the agent's next
action as a ``tool_use`` block. So the reference SupportOps agent, played through the Messages
API, must pass its own spec, and a faulty one must fail it.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import agentprop
from agentprop._agents.anthropic import (
    OFFLINE_API_KEY,
    AnthropicAgent,
    MissingApiKey,
    default_system_prompt,
    open_api_cache,
)
from agentprop._agents.project import Project, load_project
from agentprop._agents.prompt import load_prompt, load_tool_descriptions
from agentprop._decide.check import acheck
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import OracleSettings
from agentprop._modelapi.budget import Budget, ModelPrice
from agentprop._modelapi.cache import ApiCache, CacheMode
from agentprop._modelapi.retry import RetryPolicy
from agentprop._scenario.trace import Trace
from agentprop.errors import InputError, InvalidArgument, ToolError
from agentprop.testing import (
    MessagesServer,
    error_reply,
    malformed_reply,
    rate_limit_reply,
    respond_reply,
    slow_reply,
    text_reply,
    tool_use_block,
    tool_use_reply,
)

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
sys.path.insert(0, str(SUPPORTOPS))
from agent import SupportOpsAgent  # noqa: E402

MODEL = "claude-sonnet-4-6"
FAST_RETRIES = RetryPolicy(max_attempts=4, base_delay=0.0, max_delay=0.0)


# --------------------------------------------------------------------------------------------
# A Python agent played through the Messages API
# --------------------------------------------------------------------------------------------


class _Emit(Exception):
    """The replayed agent wants to do something the conversation has no answer for yet."""

    def __init__(self, block: dict[str, Any]) -> None:
        self.block = block


class _ReplayContext:
    """Enough of TurnContext for a Python agent, answering from recorded tool results."""

    def __init__(
        self, spec: Any, context: Mapping[str, Any], events: list[tuple[str, str, bool]]
    ) -> None:
        self.spec = spec
        self.context = context
        self.rng = random.Random(0)
        self.memory: dict[str, Any] = {}
        self._events = deque(events)
        self._calls: list[SimpleNamespace] = []

    @property
    def calls_this_turn(self) -> list[SimpleNamespace]:
        return list(self._calls)

    def _next(self, name: str, args: dict[str, Any]) -> str:
        if not self._events:
            raise _Emit(tool_use_block(name, args))
        recorded_name, content, is_error = self._events.popleft()
        assert recorded_name == name, (
            f"replay diverged: recorded {recorded_name}, agent now calls {name}"
        )
        if is_error:
            kind, _, message = content.partition(": ")
            raise ToolError(kind, message)
        return content

    def call(self, name: str, /, **args: Any) -> Any:
        self._calls.append(SimpleNamespace(name=name, args=args))
        return json.loads(self._next(name, args))

    def respond(self, **fields: Any) -> dict[str, Any]:
        return json.loads(self._next("respond", fields))

    def say(self, text: str) -> None:
        pass


class AgentAsModel:
    """A MessagesServer handler that answers as the Python agent ``factory()`` would act."""

    def __init__(self, factory: Callable[[], Any], spec: Any, context: Mapping[str, Any]) -> None:
        self.factory = factory
        self.spec = spec
        self.context = dict(context)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        assert [t["name"] for t in request["tools"]][-1] == "respond"
        turns: list[tuple[str, list[tuple[str, str, bool]]]] = []
        names: dict[str, str] = {}
        for message in request["messages"]:
            for block in message["content"]:
                if block["type"] == "tool_use":
                    names[block["id"]] = block["name"]
                elif block["type"] == "tool_result":
                    turns[-1][1].append(
                        (names[block["tool_use_id"]], block["content"], bool(block.get("is_error")))
                    )
                elif block["type"] == "text" and message["role"] == "user":
                    turns.append((block["text"], []))
        agent = self.factory()
        for index, (text, events) in enumerate(turns):
            ctx = _ReplayContext(self.spec, self.context, events)
            try:
                agent.turn(text, ctx)
            except _Emit as emit:
                assert index == len(turns) - 1, "the agent acted differently when replayed"
                return _reply_with(emit.block)
        raise AssertionError("the replayed agent had nothing left to do")


def _reply_with(block: dict[str, Any]) -> Any:
    return tool_use_reply(block["name"], block["input"])


@pytest.fixture(scope="module")
def project() -> Project:
    return load_project(SUPPORTOPS)


def seed_agent(server: MessagesServer, tmp_path: Path, **options: Any) -> AnthropicAgent:
    options.setdefault("cache", tmp_path / "api.sqlite")
    options.setdefault("cache_mode", "read-write")
    options.setdefault("retry_policy", FAST_RETRIES)
    options.setdefault("budget", Budget())
    return AnthropicAgent.from_files(
        MODEL,
        SUPPORTOPS / "seed_prompt.txt",
        SUPPORTOPS / "seed_tool_descriptions.yaml",
        base_url=server.base_url,
        **options,
    )


def run_once(project: Project, agent: AnthropicAgent, scenario_id: str, trial: int = 0) -> Trace:
    async def go() -> Trace:
        try:
            return await project.arun(
                project.scenario(scenario_id), agent.factory, trial=trial, agent_name=agent.ref
            )
        finally:
            await agent.aclose()

    return asyncio.run(go())


# --------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------


def test_scripted_model_passes_mft_on_a_multi_turn_scenario(
    project: Project, tmp_path: Path
) -> None:
    model = AgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    with MessagesServer(handler=model) as server:
        agent = seed_agent(server, tmp_path)
        scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
        result = asyncio.run(
            acheck(
                project,
                scenario,
                agent.loaded(),
                settings=OracleSettings(mode="fixed", runs=3, tau=0.9),
                memo=TrialMemo(),
                concurrency=3,
            )
        )
        assert result.verdict == "PASS", result.summary()
        assert result.runs == 3
        trace = run_once(project, agent, "END_CANCELLED<-N7_CANCEL", trial=7)
    assert not trace.errored, trace.all_errors()
    assert trace.decisions == ["ASK_CONFIRM_CANCEL", "CANCELLED"]
    assert trace.turns[0].tool_names() == ["verify_identity", "get_account", "get_plan_rules"]
    assert trace.turns[1].tool_names() == ["cancel_order"]
    assert trace.usage.model_calls == 4 + 2  # 3 tools + respond, then 1 tool + respond
    # what the model was shown: the seed prompt, the overridden descriptions, the contract
    first = model.requests[0]
    assert first["system"] == load_prompt(SUPPORTOPS / "seed_prompt.txt")
    tools = {t["name"]: t for t in first["tools"]}
    assert tools["get_account"]["description"] == "Fetch account data."
    assert tools["get_account"]["input_schema"] == project.spec.tool("get_account").input_schema
    assert (
        tools["respond"]["input_schema"]["properties"]["decision"]["enum"]
        == project.spec.response_contract.decision_enum
    )
    assert set(tools["respond"]["input_schema"]["required"]) == set(
        project.spec.response_contract.required_json_fields
    )
    assert first["model"] == MODEL and "temperature" not in first
    # the second turn carries the whole history and answers the first turn's respond call
    second_turn = [
        r
        for r in model.requests
        if len(
            [
                m
                for m in r["messages"]
                if m["role"] == "user" and any(b["type"] == "text" for b in m["content"])
            ]
        )
        == 2
    ][0]
    opening = second_turn["messages"][-1]["content"]
    assert opening[0]["type"] == "tool_result" and json.loads(opening[0]["content"]) == {
        "acknowledged": True
    }
    assert opening[-1] == {
        "type": "text",
        "text": project.scenario("END_CANCELLED<-N7_CANCEL").messages[1],
    }


def test_a_misbehaving_model_fails_mft(project: Project, tmp_path: Path) -> None:
    model = AgentAsModel(
        lambda: SupportOpsAgent(faults={"skip_auth": 1.0}), project.spec, project.bindings.context
    )
    with MessagesServer(handler=model) as server:
        agent = seed_agent(server, tmp_path)
        scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
        result = asyncio.run(
            acheck(
                project,
                scenario,
                agent.loaded(),
                settings=OracleSettings(mode="fixed", runs=2, tau=0.9),
                memo=TrialMemo(),
            )
        )
    assert result.verdict == "FAIL"
    assert result.failures[0].signature.startswith("calls_in_order:decision_tree.N2_AUTH")


def test_tool_errors_become_error_results_and_invalid_respond_is_corrected(
    project: Project, tmp_path: Path
) -> None:
    script = [
        tool_use_reply("get_account", {"account_id": "A1"}, text="Let me look."),
        tool_use_reply("get_plan_rules", {}),
        respond_reply(decision="NOT_A_DECISION"),
        respond_reply(
            node_id="END_BILLING_ANSWER",
            decision="BILLING_ANSWER",
            tool_actions=["get_account"],
            evidence="get_account",
            user_message="You are on PLAN-BASIC.",
        ),
    ]
    with MessagesServer(script) as server:
        agent = seed_agent(server, tmp_path)
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        requests = server.requests
    assert not trace.errored, trace.all_errors()
    turn = trace.turns[0]
    assert turn.decision == "BILLING_ANSWER"
    assert turn.text == "Let me look."
    assert turn.tool_names() == ["get_account", "get_plan_rules"]
    assert turn.calls("get_plan_rules")[0].error_kind == "invalid_arguments"
    ok_result = requests[1].json["messages"][-1]["content"][0]
    assert (
        "is_error" not in ok_result and json.loads(ok_result["content"])["plan_id"] == "PLAN-BASIC"
    )
    bad_args = requests[2].json["messages"][-1]["content"][0]
    assert bad_args["is_error"] is True and bad_args["content"].startswith("invalid_arguments: ")
    invalid = requests[3].json["messages"][-1]["content"][0]
    assert invalid["is_error"] is True and invalid["content"].startswith("invalid_respond: ")
    assert "decision" in invalid["content"]
    # every tool_result answers the tool_use just before it
    for i in (1, 2, 3):
        use = requests[i].json["messages"][-2]["content"][-1]
        assert requests[i].json["messages"][-1]["content"][0]["tool_use_id"] == use["id"]


def test_unknown_tool_is_recorded_and_answered_with_an_error(
    project: Project, tmp_path: Path
) -> None:
    script = [
        tool_use_reply("no_such_tool", {}),
        respond_reply(
            node_id="N4_CLARIFY",
            decision="CLARIFY",
            tool_actions=[],
            evidence="-",
            user_message="?",
        ),
    ]
    with MessagesServer(script) as server:
        trace = run_once(project, seed_agent(server, tmp_path), "END_BILLING_ANSWER<-N3_BILLING")
        result = server.requests[1].json["messages"][-1]["content"][0]
    assert [e.kind for e in trace.all_errors()] == ["unknown_tool"]
    assert result["is_error"] is True and result["content"].startswith("unknown_tool: ")
    assert trace.final_decision == "CLARIFY"


def test_text_only_reply_is_nudged_and_step_limit_ends_the_turn(
    project: Project, tmp_path: Path
) -> None:
    with MessagesServer(handler=lambda request: text_reply("I am thinking about it.")) as server:
        agent = seed_agent(server, tmp_path, max_steps=3)
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        requests = server.requests
    assert len(requests) == 3
    assert [e.kind for e in trace.all_errors()] == ["no_respond"]
    assert trace.usage.model_calls == 3
    nudge = requests[1].json["messages"][-1]["content"][-1]
    assert nudge["type"] == "text" and "respond" in nudge["text"]


def test_the_trace_records_every_tool_call_with_its_arguments(
    project: Project, tmp_path: Path
) -> None:
    model = AgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    with MessagesServer(handler=model) as server:
        agent = seed_agent(server, tmp_path)
        trace = run_once(project, agent, "END_ADDRESS_UPDATED<-N9_UPDATE_ADDRESS")
    assert trace.final_decision == "ADDRESS_UPDATED"
    update = trace.turns[-1].calls("update_address")[0]
    assert update.args["new_address"]["city"] and update.ok


# --------------------------------------------------------------------------------------------
# Faults, retries and errored runs
# --------------------------------------------------------------------------------------------


def billing_script() -> list[Any]:
    return [
        tool_use_reply("get_account", {"account_id": "A1"}),
        respond_reply(
            node_id="END_BILLING_ANSWER",
            decision="BILLING_ANSWER",
            tool_actions=["get_account"],
            evidence="get_account",
            user_message="Plan PLAN-BASIC.",
        ),
    ]


def test_429_with_retry_after_is_retried_honouring_the_header(
    project: Project, tmp_path: Path
) -> None:
    script = [rate_limit_reply(retry_after=0.3), *billing_script()]
    with MessagesServer(script) as server:
        agent = seed_agent(
            server, tmp_path, retry_policy=RetryPolicy(max_attempts=3, base_delay=5.0)
        )
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        received = [r.received_at for r in server.requests]
    assert trace.final_decision == "BILLING_ANSWER" and not trace.errored
    assert len(received) == 3
    # waited the server's retry-after, not the 5 s backoff cap
    assert received[1] - received[0] >= 0.28
    stats = agent.stats()
    assert stats["retries"]["retries"] == 1 and stats["retries"]["by_reason"] == {"rate_limited": 1}
    assert stats["live_calls"] == 2 and stats["model_calls"] == 2
    assert trace.usage.model_calls == 2  # the retried attempt is one model call


def test_500_is_retried(project: Project, tmp_path: Path) -> None:
    with MessagesServer([error_reply(500), error_reply(529), *billing_script()]) as server:
        agent = seed_agent(server, tmp_path)
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        assert len(server.requests) == 4
    assert trace.final_decision == "BILLING_ANSWER"
    assert agent.stats()["retries"]["by_reason"] == {"server_error": 1, "overloaded": 1}


def test_malformed_reply_is_an_errored_run_not_a_crash(project: Project, tmp_path: Path) -> None:
    with MessagesServer([malformed_reply()]) as server:
        agent = seed_agent(server, tmp_path)
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        assert len(server.requests) == 1  # not retried
    (error,) = trace.all_errors()
    assert error.kind == "agent_exception"
    assert "ModelCallError" in error.message and "model call 1 of turn 0" in error.message
    assert "JSONDecodeError" in error.message and "not valid JSON" in error.message
    assert agent.stats()["failed_calls"] == 1


def test_retries_exhausted_is_an_errored_run(project: Project, tmp_path: Path) -> None:
    with MessagesServer(handler=lambda r: error_reply(503)) as server:
        agent = seed_agent(
            server, tmp_path, retry_policy=RetryPolicy(max_attempts=2, base_delay=0.0)
        )
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        assert len(server.requests) == 2
    (error,) = trace.all_errors()
    assert "gave up after 2 attempt(s)" in error.message


# --------------------------------------------------------------------------------------------
# Cost accounting
# --------------------------------------------------------------------------------------------


def test_cost_is_the_price_table_times_usage(project: Project, tmp_path: Path) -> None:
    script = [
        tool_use_reply("get_account", {"account_id": "A1"}, input_tokens=1200, output_tokens=80),
        respond_reply(
            node_id="END_BILLING_ANSWER",
            decision="BILLING_ANSWER",
            tool_actions=["get_account"],
            evidence="e",
            user_message="m",
        ),
    ]
    usage_second = {
        "input_tokens": 1500,
        "output_tokens": 120,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
    }

    def with_usage(request: dict[str, Any]) -> Any:
        reply = script[1]
        assert reply.message is not None
        return {**reply.message, "usage": usage_second}

    budget = Budget(prices={"claude-sonnet-4": ModelPrice(3.0, 15.0)})
    with MessagesServer([script[0], with_usage]) as server:
        agent = seed_agent(server, tmp_path, budget=budget)
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
    expected = (1200 * 3.0 + 80 * 15.0) / 1e6 + (
        1500 * 3.0 + 120 * 15.0 + 1000 * 0.3 + 200 * 3.75
    ) / 1e6
    assert trace.usage.cost_usd == pytest.approx(expected, rel=1e-12)
    assert trace.usage.input_tokens == 1200 + 1500 + 1000 + 200
    assert trace.usage.output_tokens == 80 + 120
    snap = budget.snapshot()
    assert snap.usd == pytest.approx(expected, rel=1e-12) and snap.calls == 2
    assert snap.usd_by_model == {MODEL: pytest.approx(expected, rel=1e-12)}


def test_session_budget_is_charged_when_none_is_passed(project: Project, tmp_path: Path) -> None:
    from agentprop._decide.session import Session

    session = Budget()
    with Session(budget=session).activate(), MessagesServer(billing_script()) as server:
        agent = AnthropicAgent(
            MODEL, base_url=server.base_url, cache=False, retry_policy=FAST_RETRIES
        )
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
    assert session.snapshot().calls == 2
    assert (
        session.snapshot().usd == pytest.approx(trace.usage.cost_usd) and trace.usage.cost_usd > 0
    )


# --------------------------------------------------------------------------------------------
# The API cache
# --------------------------------------------------------------------------------------------


def test_a_replay_makes_no_http_request_and_gives_the_same_trace(
    project: Project, tmp_path: Path
) -> None:
    model = AgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    cache_path = tmp_path / "api.sqlite"
    with MessagesServer(handler=model) as server:
        live_budget = Budget()
        live = run_once(
            project,
            seed_agent(server, tmp_path, cache=cache_path, budget=live_budget),
            "END_CANCELLED<-N7_CANCEL",
            trial=3,
        )
        sent = len(server.requests)
        replay_budget = Budget()
        replayer = seed_agent(
            server, tmp_path, cache=cache_path, cache_mode="replay-only", budget=replay_budget
        )
        replay = run_once(project, replayer, "END_CANCELLED<-N7_CANCEL", trial=3)
        assert len(server.requests) == sent  # zero HTTP requests
    assert sent == 6
    assert replay.decisions == live.decisions and replay.tool_names() == live.tool_names()
    assert [t.response for t in replay.turns] == [t.response for t in live.turns]
    # the whole trace, but for timings and what the calls cost
    same = {"duration_s": True, "turns": {"__all__": {"duration_s": True, "usage": {"cost_usd"}}}}
    assert replay.model_dump(exclude=same) == live.model_dump(exclude=same)
    assert replayer.stats()["cache_hits"] == 6 and replayer.stats()["live_calls"] == 0
    assert replay.usage.cost_usd == 0.0 and replay.usage.input_tokens == live.usage.input_tokens
    assert replay_budget.snapshot().usd_saved == pytest.approx(live_budget.snapshot().usd)


def test_changed_options_and_tools_reach_the_requests(project: Project, tmp_path: Path) -> None:
    """A conversation's requests are keyed through a remembered shape: changing an option of
    the agent changes the next requests (and their keys), and changing the list
    ``tools_for`` returned changes nothing (it is a copy)."""
    with MessagesServer(handler=lambda r: billing_script()[len(r["messages"]) // 2]) as server:
        agent = seed_agent(server, tmp_path)
        run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        agent.tools_for(project.spec)[0]["description"] = "changed by the caller"
        agent.extra_body["metadata"] = {"user_id": "u1"}  # sent, but not part of the key
        run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        assert len(server.requests) == 2  # same keys: replayed
        agent.max_tokens = 77
        agent.extra_body["thinking"] = {"type": "disabled"}
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        bodies = [json.loads(r.body) for r in server.requests]
    assert trace.final_decision == "BILLING_ANSWER" and not trace.errored
    assert len(bodies) == 4
    assert [b["max_tokens"] for b in bodies] == [1024, 1024, 77, 77]
    assert [b.get("thinking") for b in bodies] == [
        None,
        None,
        {"type": "disabled"},
        {"type": "disabled"},
    ]
    assert all(b["tools"] == bodies[0]["tools"] for b in bodies)
    assert "changed by the caller" not in json.dumps(bodies)
    cache = ApiCache(tmp_path / "api.sqlite", mode="read")
    assert len({e.key for e in cache.entries()}) == 4


def test_distinct_trials_make_distinct_requests(project: Project, tmp_path: Path) -> None:
    with MessagesServer(handler=lambda r: billing_script()[len(r["messages"]) // 2]) as server:
        agent = seed_agent(server, tmp_path)
        for trial in (0, 1, 2):
            run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING", trial=trial)
        assert len(server.requests) == 6  # every trial is its own sample
        run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING", trial=1)
        assert len(server.requests) == 6  # a repeated trial replays
    cache = ApiCache(tmp_path / "api.sqlite", mode="read")
    assert sorted(e.trial for e in cache.entries()) == [0, 0, 1, 1, 2, 2]


def test_replay_only_miss_is_a_run_error_that_is_not_the_agents_with_the_diff(
    project: Project, tmp_path: Path
) -> None:
    cache_path = tmp_path / "api.sqlite"
    with MessagesServer(billing_script()) as server:
        run_once(
            project,
            seed_agent(server, tmp_path, cache=cache_path),
            "END_BILLING_ANSWER<-N3_BILLING",
        )
        changed = seed_agent(
            server, tmp_path, cache=cache_path, cache_mode="replay-only", temperature=0.5
        )
        trace = run_once(project, changed, "END_BILLING_ANSWER<-N3_BILLING")
        assert len(server.requests) == 2
    (error,) = trace.all_errors()
    assert error.kind == "cache_miss" and error.message.startswith(
        "CacheMiss: No recorded response"
    )
    assert trace.infrastructure_error is error
    assert '+  "temperature": 0.5' in error.message
    assert "replay-only" in error.message


def test_no_api_key_reaches_the_cache_file(project: Project, tmp_path: Path) -> None:
    secret = "sk-ant-api03-TOPSECRET-abcdefghijklmnop"
    with MessagesServer(billing_script(), expected_api_key=secret) as server:
        agent = seed_agent(server, tmp_path, api_key=secret)
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        assert all(r.headers.get("authorization") == f"Bearer {secret}" for r in server.requests)
    assert trace.final_decision == "BILLING_ANSWER"
    files = [p for p in tmp_path.iterdir() if p.name.startswith("api.sqlite")]
    assert files
    for f in files:
        data = f.read_bytes()
        assert secret.encode() not in data and b"TOPSECRET" not in data


# --------------------------------------------------------------------------------------------
# Keys, fingerprints, files
# --------------------------------------------------------------------------------------------


def test_missing_key_error_names_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    agent = AnthropicAgent(MODEL, cache=False)
    with pytest.raises(MissingApiKey) as info:
        agent.api_key()
    assert "ANTHROPIC_API_KEY" in str(info.value) and "api_key=" in str(info.value)
    assert agent.missing_key_error is info.value
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    assert AnthropicAgent(MODEL).api_key() == "from-env"
    assert AnthropicAgent(MODEL, api_key="explicit").api_key() == "explicit"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert AnthropicAgent(MODEL, base_url="http://127.0.0.1:9").api_key() == OFFLINE_API_KEY
    with pytest.raises(MissingApiKey):
        AnthropicAgent(MODEL, base_url="https://api.anthropic.com").api_key()


def test_missing_key_is_only_needed_for_live_calls(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    agent = AnthropicAgent(
        MODEL, cache=tmp_path / "c.sqlite", cache_mode="read-write", retry_policy=FAST_RETRIES
    )
    trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
    (error,) = trace.all_errors()
    assert "MissingApiKey" in error.message and "ANTHROPIC_API_KEY" in error.message


def test_fingerprint_follows_prompt_model_descriptions_and_sampling() -> None:
    base = AnthropicAgent(MODEL, system_prompt="Be careful.", cache=False)
    same = AnthropicAgent(
        MODEL, system_prompt="Be careful.", cache=False, base_url="http://127.0.0.1:1", api_key="k"
    )
    assert base.fingerprint == same.fingerprint == base.loaded().fingerprint
    variants = [
        base.replace(system_prompt="Be careless."),
        base.replace(model="claude-haiku-4-5"),
        base.replace(tool_descriptions={"get_account": "Fetch."}),
        base.replace(temperature=0.0),
        base.replace(max_tokens=10),
        base.replace(max_steps=2),
    ]
    prints = {v.fingerprint for v in variants}
    assert len(prints) == len(variants) and base.fingerprint not in prints
    # passing the agent object itself where an agent is expected fingerprints it too
    from agentprop._agents.loading import as_loaded_agent

    assert as_loaded_agent(base).fingerprint != as_loaded_agent(variants[0]).fingerprint


def test_factory_gives_a_fresh_conversation_each_time() -> None:
    agent = AnthropicAgent(MODEL, cache=False)
    a, b = agent.factory(), agent()
    assert a is not b and a.messages is not b.messages and a.config is b.config is agent
    assert agent.loaded().factory() is not agent.loaded().factory()


def test_default_prompt_is_written_from_the_spec(project: Project) -> None:
    text = default_system_prompt(project.spec, {"account_id": "A1"})
    assert 'account_id: "A1"' in text
    assert text.index("P1_NO_PII") < text.index("P4_TOOL_GROUNDED")
    assert "respond" in text and "TICKET_CREATED" in text


def test_tool_description_files_are_validated(project: Project, tmp_path: Path) -> None:
    assert (
        load_tool_descriptions(SUPPORTOPS / "seed_tool_descriptions.yaml")["respond"]
        == "Submit response to user."
    )
    bad = tmp_path / "tools.yaml"
    bad.write_text("get_account: 3\n")
    with pytest.raises(InputError) as info:
        load_tool_descriptions(bad)
    assert f"{bad}:1:" in str(info.value)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("get_acount: Fetch.\n")
    agent = AnthropicAgent.from_files(MODEL, None, unknown, cache=False)
    with pytest.raises(InputError, match="get_acount"):
        agent.check_spec(project.spec)
    with pytest.raises(InputError, match="prompt file not found"):
        load_prompt(tmp_path / "missing.txt")
    with pytest.raises(InvalidArgument):
        AnthropicAgent("", cache=False)
    with pytest.raises(InvalidArgument):
        AnthropicAgent(MODEL, max_steps=0)


def test_default_cache_mode_is_the_sessions(tmp_path: Path) -> None:
    from agentprop._decide.session import Session

    with Session(cache_mode=CacheMode.REPLAY_ONLY).activate():
        assert (
            AnthropicAgent(MODEL, cache=tmp_path / "x.sqlite").cache.mode is CacheMode.REPLAY_ONLY
        )
        assert (
            AnthropicAgent(MODEL, cache=tmp_path / "x.sqlite", cache_mode="read").cache.mode
            is CacheMode.READ
        )
    assert AnthropicAgent(MODEL, cache=False).cache.mode is CacheMode.OFF
    # agents on one file share one ApiCache (one connection per thread, not per agent)
    shared = open_api_cache(tmp_path / "y.sqlite", mode="read-write")
    assert (
        AnthropicAgent(MODEL, cache=tmp_path / "y.sqlite", cache_mode="read-write").cache is shared
    )
    assert open_api_cache(tmp_path / "y.sqlite", mode="read") is not shared


def test_messages_server_fixture(
    messages_server: MessagesServer, project: Project, tmp_path: Path
) -> None:
    messages_server.enqueue(*billing_script())
    agent = seed_agent(messages_server, tmp_path)
    trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
    assert trace.final_decision == "BILLING_ANSWER" and len(messages_server.requests) == 2


def test_a_timed_out_attempt_is_retried(project: Project, tmp_path: Path) -> None:
    first, second = billing_script()
    with MessagesServer([slow_reply(first, 2.0), first, second]) as server:
        agent = seed_agent(server, tmp_path, timeout=0.3)
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        assert len(server.requests) == 3
    assert trace.final_decision == "BILLING_ANSWER" and not trace.errored
    assert agent.stats()["retries"]["by_reason"] == {"timeout": 1}


def test_check_takes_the_agent_object_itself(project: Project, tmp_path: Path) -> None:
    from agentprop._decide.check import check

    model = AgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    with MessagesServer(handler=model) as server:
        agent = seed_agent(server, tmp_path)
        result = check(
            project,
            "END_REFUSE_PII<-N1_INTENT",
            agent,
            memo=TrialMemo(),
            settings=agentprop.settings(runs=2, mode="fixed"),
        )
    assert result.verdict == "PASS" and result.runs == 2
    assert len(model.requests) == 2  # one respond call per run


def test_pytest_option_sets_the_default_cache_mode(tmp_path: Path) -> None:
    import subprocess

    test_file = tmp_path / "test_mode.py"
    test_file.write_text(
        "from agentprop._agents.anthropic import default_cache_mode\n"
        "def test_mode(messages_server):\n"
        "    assert default_cache_mode().value == 'replay-only'\n"
        "    assert messages_server.base_url.startswith('http://127.0.0.1:')\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(test_file),
            "-q",
            "-p",
            "no:randomly",
            "--agentprop-cache-mode",
            "replay-only",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
