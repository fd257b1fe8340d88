"""OpenAIAgent with the real openai SDK against OpenAIServer on loopback (no key, no internet).

The "model" in most tests is :class:`OpenAIAgentAsModel`: an OpenAIServer handler that plays a
Python agent, as ``AgentAsModel`` does for the Messages API. For every request (Chat
Completions or Responses) it rebuilds the conversation, replays the agent over it (feeding it
the tool results the request carries) and answers with the agent's next action as a tool call.
So the reference SupportOps agent, played through the OpenAI API, must pass its own spec, and a
faulty one must fail it as the Python agent does.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from test_anthropic_agent import SupportOpsAgent, _Emit, _ReplayContext

from agentprop._agents.model_agent import NUDGE
from agentprop._agents.openai import OpenAIAgent
from agentprop._agents.project import Project, load_project
from agentprop._decide.check import acheck
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import OracleSettings
from agentprop._modelapi.budget import Budget, ModelPrice
from agentprop._modelapi.cache import ApiCache
from agentprop._modelapi.client import OFFLINE_API_KEY
from agentprop._modelapi.retry import RetryPolicy
from agentprop._scenario.trace import Trace
from agentprop.errors import (
    InvalidArgument,
    MissingApiKey,
    MissingDependency,
    UnpricedModel,
)
from agentprop.testing import (
    OpenAIServer,
    error_reply,
    message_reply,
    rate_limit_reply,
    raw_arguments_reply,
    respond_reply,
    text_reply,
    tool_use_block,
    tool_use_reply,
)

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "gpt-4.1-mini"
FAST_RETRIES = RetryPolicy(max_attempts=4, base_delay=0.0, max_delay=0.0)


class OpenAIAgentAsModel:
    """An OpenAIServer handler that answers as the Python agent ``factory()`` would act."""

    def __init__(self, factory: Callable[[], Any], spec: Any, context: Mapping[str, Any]) -> None:
        self.factory = factory
        self.spec = spec
        self.context = dict(context)
        self.requests: list[dict[str, Any]] = []

    def _turns(self, request: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, bool]]]]:
        turns: list[tuple[str, list[tuple[str, str, bool]]]] = []
        names: dict[str, str] = {}

        def result(call_id: str, text: str) -> None:
            is_error = text.startswith("error: ")
            turns[-1][1].append(
                (names[call_id], text[len("error: ") :] if is_error else text, is_error)
            )

        if OpenAIServer.api_of(request) == "chat":
            assert request["tools"][-1]["function"]["name"] == "respond"
            for message in request["messages"]:
                if message["role"] == "user" and message["content"] != NUDGE:
                    turns.append((message["content"], []))
                elif message["role"] == "assistant":
                    for call in message.get("tool_calls") or []:
                        names[call["id"]] = call["function"]["name"]
                elif message["role"] == "tool":
                    result(message["tool_call_id"], message["content"])
        else:
            assert (
                request["tools"][-1]["name"] == "respond"
                and request["tools"][-1]["strict"] is False
            )
            for item in request["input"]:
                if item.get("role") == "user" and item["content"] != NUDGE:
                    turns.append((item["content"], []))
                elif item.get("type") == "function_call":
                    names[item["call_id"]] = item["name"]
                elif item.get("type") == "function_call_output":
                    result(item["call_id"], item["output"])
        return turns

    def __call__(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        turns = self._turns(request)
        agent = self.factory()
        for index, (text, events) in enumerate(turns):
            ctx = _ReplayContext(self.spec, self.context, events)
            try:
                agent.turn(text, ctx)
            except _Emit as emit:
                assert index == len(turns) - 1, "the agent acted differently when replayed"
                return tool_use_reply(emit.block["name"], emit.block["input"])
        raise AssertionError("the replayed agent had nothing left to do")


@pytest.fixture(scope="module")
def project() -> Project:
    return load_project(SUPPORTOPS)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)


def seed_agent(server: OpenAIServer, tmp_path: Path, **options: Any) -> OpenAIAgent:
    options.setdefault("cache", tmp_path / "api.sqlite")
    options.setdefault("cache_mode", "read-write")
    options.setdefault("retry_policy", FAST_RETRIES)
    options.setdefault("budget", Budget())
    return OpenAIAgent.from_files(
        MODEL,
        SUPPORTOPS / "seed_prompt.txt",
        SUPPORTOPS / "seed_tool_descriptions.yaml",
        base_url=server.base_url,
        **options,
    )


def run_once(
    project: Project,
    agent: OpenAIAgent,
    scenario_id: str,
    trial: int = 0,
    turn_timeout_s: float | None = 60.0,
) -> Trace:
    async def go() -> Trace:
        try:
            return await project.arun(
                project.scenario(scenario_id),
                agent.factory,
                trial=trial,
                agent_name=agent.ref,
                turn_timeout_s=turn_timeout_s,
            )
        finally:
            await agent.aclose()

    return asyncio.run(go())


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


API_STREAM = [("chat", False), ("chat", True), ("responses", False), ("responses", True)]


# --------------------------------------------------------------------------------------------
# End to end, both APIs, streamed and not
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "stream"), API_STREAM, ids=[f"{a}-{'stream' if s else 'plain'}" for a, s in API_STREAM]
)
def test_the_reference_agent_played_through_the_api_passes_a_multi_turn_case(
    project: Project, tmp_path: Path, api: str, stream: bool
) -> None:
    model = OpenAIAgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    with OpenAIServer(handler=model) as server:
        agent = seed_agent(server, tmp_path, api=api, stream=stream)
        trace = run_once(project, agent, "END_CANCELLED<-N7_CANCEL", trial=7)
        requests = server.requests
    assert not trace.errored, trace.all_errors()
    assert trace.decisions == ["ASK_CONFIRM_CANCEL", "CANCELLED"]
    assert trace.turns[0].tool_names() == ["verify_identity", "get_account", "get_plan_rules"]
    assert trace.turns[1].tool_names() == ["cancel_order"]
    assert trace.usage.model_calls == 6 and trace.usage.cost_usd > 0
    assert all(
        r.path.endswith("/chat/completions" if api == "chat" else "/responses") for r in requests
    )
    assert all(bool(r.json.get("stream")) is stream for r in requests)
    first = requests[0].json
    assert first["tool_choice"] == "required" and first["model"] == MODEL
    if api == "chat":
        assert (
            first["messages"][0]
            == {
                "role": "system",
                "content": (SUPPORTOPS / "seed_prompt.txt").read_text(encoding="utf-8").strip(),
            }
            or first["messages"][0]["role"] == "system"
        )
        tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
        assert first["max_completion_tokens"] == 1024
        # the second turn answers the first turn's respond call before the user speaks
        second = next(
            r.json for r in requests if sum(m["role"] == "user" for m in r.json["messages"]) == 2
        )
        tail = second["messages"][-2:]
        assert tail[0]["role"] == "tool" and json.loads(tail[0]["content"]) == {
            "acknowledged": True
        }
        assert tail[1] == {
            "role": "user",
            "content": project.scenario("END_CANCELLED<-N7_CANCEL").messages[1],
        }
    else:
        assert (
            first["instructions"] and first["store"] is False and first["max_output_tokens"] == 1024
        )
        tools = {t["name"]: t for t in first["tools"]}
    assert tools["get_account"]["description"] == "Fetch account data."
    assert tools["get_account"]["parameters"] == project.spec.tool("get_account").input_schema
    respond = tools["respond"]["parameters"]
    assert respond["properties"]["decision"]["enum"] == project.spec.response_contract.decision_enum
    assert set(respond["required"]) == set(project.spec.response_contract.required_json_fields)


def test_an_injected_fault_fails_with_the_python_agents_signature(
    project: Project, tmp_path: Path
) -> None:
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    settings = OracleSettings(mode="fixed", runs=2, tau=0.9)
    faulty = lambda: SupportOpsAgent(faults={"skip_auth": 1.0})
    python = asyncio.run(acheck(project, scenario, faulty, settings=settings, memo=TrialMemo()))
    with OpenAIServer(
        handler=OpenAIAgentAsModel(faulty, project.spec, project.bindings.context)
    ) as server:
        agent = seed_agent(server, tmp_path, api="responses")
        through_api = asyncio.run(
            acheck(
                project,
                scenario,
                agent.loaded(),
                settings=settings,
                memo=TrialMemo(),
                concurrency=2,
            )
        )
    assert python.verdict == through_api.verdict == "FAIL"
    assert through_api.failures[0].signature == python.failures[0].signature
    assert through_api.failures[0].signature.startswith("calls_in_order:decision_tree.N2_AUTH")


def test_a_second_run_replays_from_the_cache_with_no_request(
    project: Project, tmp_path: Path
) -> None:
    model = OpenAIAgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    with OpenAIServer(handler=model) as server:
        live_budget = Budget()
        live = run_once(
            project,
            seed_agent(server, tmp_path, budget=live_budget, stream=True),
            "END_CANCELLED<-N7_CANCEL",
            trial=3,
        )
        sent = len(server.requests)
        replay_budget = Budget()
        # streamed when recorded, replayed without streaming: the cache keys the
        # request, not the transport
        replayer = seed_agent(server, tmp_path, cache_mode="replay-only", budget=replay_budget)
        replay = run_once(project, replayer, "END_CANCELLED<-N7_CANCEL", trial=3)
        assert len(server.requests) == sent == 6  # zero requests on replay
    same = {"duration_s": True, "turns": {"__all__": {"duration_s": True, "usage": {"cost_usd"}}}}
    assert replay.model_dump(exclude=same) == live.model_dump(exclude=same)
    assert replayer.stats()["cache_hits"] == 6 and replayer.stats()["live_calls"] == 0
    assert replay.usage.cost_usd == 0.0 and replay_budget.snapshot().usd_saved == pytest.approx(
        live_budget.snapshot().usd
    )


# --------------------------------------------------------------------------------------------
# What the model gets wrong, and what the API does
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_malformed_arguments_are_returned_to_the_model_which_corrects_them(
    project: Project, tmp_path: Path, api: str
) -> None:
    script = [
        # cut-off JSON
        raw_arguments_reply("get_account", '{"account_id": "A1"', text="Let me look."),
        raw_arguments_reply("get_account", '["A1"]'),  # JSON, but not an object
        *billing_script(),
    ]
    with OpenAIServer(script) as server:
        trace = run_once(
            project, seed_agent(server, tmp_path, api=api), "END_BILLING_ANSWER<-N3_BILLING"
        )
        requests = [r.json for r in server.requests]
    assert not trace.errored, trace.all_errors()
    assert trace.final_decision == "BILLING_ANSWER" and trace.turns[0].text == "Let me look."
    assert trace.turns[0].tool_names() == ["get_account"]  # only the valid call reached the world

    def result_of(request: dict[str, Any]) -> str:
        if api == "chat":
            return str(request["messages"][-1]["content"])
        return str(request["input"][-1]["output"])

    assert result_of(requests[1]).startswith(
        "error: invalid_arguments: the arguments of get_account are not valid JSON"
    )
    assert (
        result_of(requests[2])
        == "error: invalid_arguments: the input of get_account must be a JSON object"
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_parallel_tool_calls_run_in_order_and_each_is_answered(
    project: Project, tmp_path: Path, api: str
) -> None:
    both = message_reply(
        [
            tool_use_block("get_account", {"account_id": "A1"}),
            tool_use_block("get_plan_rules", {"plan_id": "PLAN-BASIC"}),
        ],
        stop_reason="tool_use",
    )
    with OpenAIServer([both, billing_script()[1]]) as server:
        trace = run_once(
            project,
            seed_agent(server, tmp_path, api=api, stream=True),
            "END_BILLING_ANSWER<-N3_BILLING",
        )
        second = server.requests[1].json
    assert trace.final_decision == "BILLING_ANSWER" and not trace.errored
    assert trace.turns[0].tool_names() == ["get_account", "get_plan_rules"]
    if api == "chat":
        assistant, *results = second["messages"][-3:]
        assert [c["function"]["name"] for c in assistant["tool_calls"]] == [
            "get_account",
            "get_plan_rules",
        ]
        assert [r["tool_call_id"] for r in results] == [c["id"] for c in assistant["tool_calls"]]
        assert json.loads(results[1]["content"])["plan_id"] == "PLAN-BASIC"
    else:
        calls = [i for i in second["input"] if i.get("type") == "function_call"]
        outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert [c["name"] for c in calls] == ["get_account", "get_plan_rules"]
        assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls]


def test_a_respond_field_named_self_does_not_kill_the_turn(
    project: Project, tmp_path: Path
) -> None:
    fields = {
        "node_id": "END_BILLING_ANSWER",
        "decision": "BILLING_ANSWER",
        "tool_actions": ["get_account"],
        "evidence": "e",
        "user_message": "m",
    }
    with OpenAIServer(
        [tool_use_reply("respond", {**fields, "self": "oops", "name": "x"})]
    ) as server:
        trace = run_once(project, seed_agent(server, tmp_path), "END_BILLING_ANSWER<-N3_BILLING")
    assert not trace.errored, trace.all_errors()  # was: TypeError, an agent_exception
    assert (
        trace.final_decision == "BILLING_ANSWER" and trace.turns[0].raw_response["self"] == "oops"
    )  # type: ignore[index]


def test_arguments_a_context_cannot_take_are_an_error_the_model_can_correct() -> None:
    """An agent context whose methods take ``self`` by keyword (not agentprop's) cannot be
    passed a field named ``self``: the model gets an error to correct, not a dead turn; a
    TypeError raised inside the tool is a bug and is raised."""
    from agentprop._agents.model_agent import run_tool_call

    class Context:
        def respond(self, **fields: Any) -> dict[str, Any]:
            return {"acknowledged": True}

        def call(self, name: str, **args: Any) -> Any:
            raise TypeError("a bug inside the tool")

    outcome = run_tool_call(Context(), "respond", {"self": 1, "decision": "X"})  # type: ignore[arg-type]
    assert outcome.is_error and not outcome.responded
    assert (
        outcome.text.startswith("invalid_arguments: respond cannot take these arguments")
        and "self" in outcome.text
    )
    assert run_tool_call(Context(), "respond", '{"decision": "X"}').responded  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a bug inside the tool"):
        run_tool_call(Context(), "get_account", {"account_id": "A1"})  # type: ignore[arg-type]


def test_arguments_python_cannot_read_are_an_error_the_model_can_correct() -> None:
    """An integer past Python's digit limit fails json.loads with a plain ValueError (no
    ``msg``/``pos``, unlike a JSONDecodeError): the model gets an error to correct, not a crash."""
    from agentprop._agents.model_agent import run_tool_call

    class Context:
        def call(self, name: str, **args: Any) -> Any:
            raise AssertionError("arguments that cannot be read are never passed on")

    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # the smallest limit Python allows (the default is 4300)
    try:
        outcome = run_tool_call(Context(), "get_account", '{"account_id": ' + "9" * 641 + "}")  # type: ignore[arg-type]
    finally:
        sys.set_int_max_str_digits(limit)
    assert outcome.is_error and not outcome.responded
    assert outcome.text.startswith(
        "invalid_arguments: the arguments of get_account are not valid JSON (Exceeds the limit"
    )
    bad = run_tool_call(Context(), "get_account", '{"account_id": ')  # type: ignore[arg-type]
    assert bad.is_error and "not valid JSON (Expecting value at character 15)" in bad.text


def test_429_with_retry_after_and_5xx_are_retried(project: Project, tmp_path: Path) -> None:
    script = [rate_limit_reply(retry_after=0.3), error_reply(503), *billing_script()]
    with OpenAIServer(script) as server:
        agent = seed_agent(
            server,
            tmp_path,
            retry_policy=RetryPolicy(max_attempts=4, base_delay=0.0, max_delay=0.0),
        )
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        received = [r.received_at for r in server.requests]
    assert trace.final_decision == "BILLING_ANSWER" and not trace.errored
    # the server's retry-after, honoured
    assert len(received) == 4 and received[1] - received[0] >= 0.28
    stats = agent.stats()["retries"]
    assert (
        stats["by_reason"] == {"rate_limited": 1, "server_error": 1}
        and stats["slept_seconds"] >= 0.3
    )
    assert trace.usage.model_calls == 2


def test_a_retry_after_past_the_turn_timeout_is_not_waited_and_the_trace_and_stats_agree(
    project: Project, tmp_path: Path
) -> None:
    with OpenAIServer([rate_limit_reply(retry_after=30), *billing_script()]) as server:
        agent = seed_agent(
            server, tmp_path, retry_policy=RetryPolicy(max_attempts=4, max_retry_after=120)
        )
        trace = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING", turn_timeout_s=2.0)
        assert len(server.requests) == 1
    (error,) = trace.all_errors()
    assert error.kind == "timeout"
    assert "retry after 30.0s" in error.message and "the turn timeout won" in error.message
    stats = agent.stats()["retries"]
    assert stats["slept_seconds"] == 0.0 and stats["cut_by_deadline"] == 1 and stats["retries"] == 0
    assert trace.duration_s < 2.0  # it did not sit out the turn either


# --------------------------------------------------------------------------------------------
# Usage, prices, keys, options
# --------------------------------------------------------------------------------------------


def test_usage_and_cost_follow_the_price_table_with_cached_tokens(
    project: Project, tmp_path: Path
) -> None:
    script = [
        message_reply(
            [tool_use_block("get_account", {"account_id": "A1"})],
            stop_reason="tool_use",
            input_tokens=1000,
            output_tokens=50,
        ),
        message_reply(
            [
                tool_use_block(
                    "respond",
                    {
                        "node_id": "END_BILLING_ANSWER",
                        "decision": "BILLING_ANSWER",
                        "tool_actions": ["get_account"],
                        "evidence": "e",
                        "user_message": "m",
                    },
                )
            ],
            stop_reason="tool_use",
        ),
    ]
    script[1].message["usage"] = {
        "input_tokens": 200,
        "cache_read_input_tokens": 800,
        "output_tokens": 60,
    }  # type: ignore[index]
    budget = Budget()
    with OpenAIServer(script) as server:
        trace = run_once(
            project,
            seed_agent(server, tmp_path, budget=budget, api="responses"),
            "END_BILLING_ANSWER<-N3_BILLING",
        )
    price = budget.price(MODEL)
    assert price == ModelPrice(0.40, 1.60, cache_write_per_mtok=0.40, cache_read_per_mtok=0.10)
    expected = (1000 * 0.40 + 50 * 1.60) / 1e6 + (200 * 0.40 + 800 * 0.10 + 60 * 1.60) / 1e6
    assert trace.usage.cost_usd == pytest.approx(
        expected
    ) and budget.snapshot().usd == pytest.approx(expected)
    assert trace.usage.input_tokens == 2000 and trace.usage.output_tokens == 110


def test_an_unknown_model_has_an_unknown_cost_and_a_dollar_limit_refuses_it(
    project: Project, tmp_path: Path
) -> None:
    with OpenAIServer(billing_script() * 2) as server:
        free = Budget()
        trace = run_once(
            project,
            seed_agent(server, tmp_path, budget=free).replace(model="local-llama-3"),
            "END_BILLING_ANSWER<-N3_BILLING",
        )
        assert trace.final_decision == "BILLING_ANSWER"
        assert trace.usage.unpriced_calls == 2 and trace.usage.cost_usd == 0.0
        assert (
            free.snapshot().unpriced_models == ["local-llama-3"] and not free.snapshot().usd_known
        )
        capped = seed_agent(server, tmp_path, budget=Budget(max_usd=1.0)).replace(
            model="local-llama-3", cache=False
        )
        trace = run_once(project, capped, "END_BILLING_ANSWER<-N3_BILLING")
        assert len(server.requests) == 2  # the capped call was never sent
    (error,) = trace.all_errors()
    assert "UnpricedModel" in error.message and "'local-llama-3' has no price" in error.message
    assert UnpricedModel.__name__ in error.message


def test_temperature_top_p_stop_and_extra_body_are_sent(project: Project, tmp_path: Path) -> None:
    with OpenAIServer(billing_script()) as server:
        agent = seed_agent(
            server,
            tmp_path,
            temperature=1.5,
            top_p=0.9,
            stop=["###"],
            max_tokens=300,
            parallel_tool_calls=False,
            tool_choice="auto",
            extra_body={"reasoning_effort": "low"},
        )
        run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING")
        body = server.requests[0].json
    assert (body["temperature"], body["top_p"], body["stop"], body["max_completion_tokens"]) == (
        1.5,
        0.9,
        ["###"],
        300,
    )
    assert (
        body["parallel_tool_calls"] is False
        and body["tool_choice"] == "auto"
        and body["reasoning_effort"] == "low"
    )
    with pytest.raises(InvalidArgument, match="between 0 and 2"):
        OpenAIAgent(MODEL, temperature=2.5, cache=False)
    with pytest.raises(InvalidArgument, match="extra_body may not set max_completion_tokens"):
        OpenAIAgent(MODEL, extra_body={"max_completion_tokens": 5}, cache=False)
    with pytest.raises(InvalidArgument, match="stop= is a Chat Completions parameter"):
        OpenAIAgent(MODEL, api="responses", stop=["x"], cache=False)


def test_a_text_only_reply_is_nudged_under_tool_choice_auto(
    project: Project, tmp_path: Path
) -> None:
    with OpenAIServer([text_reply("Thinking..."), *billing_script()]) as server:
        trace = run_once(
            project,
            seed_agent(server, tmp_path, tool_choice="auto"),
            "END_BILLING_ANSWER<-N3_BILLING",
        )
        nudge = server.requests[1].json["messages"][-1]
    assert trace.final_decision == "BILLING_ANSWER" and trace.turns[0].text == "Thinking..."
    assert nudge == {"role": "user", "content": NUDGE}


def test_the_offline_key_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingApiKey) as info:
        OpenAIAgent(MODEL, cache=False).api_key()
    assert "no OpenAI API key" in str(info.value) and "OPENAI_API_KEY" in str(info.value)
    assert (
        OpenAIAgent(MODEL, base_url="http://127.0.0.1:9/v1", cache=False).api_key()
        == OFFLINE_API_KEY
    )
    with pytest.raises(MissingApiKey):
        OpenAIAgent(MODEL, base_url="https://api.openai.com/v1", cache=False).api_key()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert OpenAIAgent(MODEL, cache=False).api_key() == "sk-from-env"


def test_the_key_reaches_the_server_and_never_the_cache(project: Project, tmp_path: Path) -> None:
    secret = "sk-proj-TOPSECRETabcdefghijklmnop1234"
    with OpenAIServer(billing_script(), expected_api_key=secret) as server:
        trace = run_once(
            project, seed_agent(server, tmp_path, api_key=secret), "END_BILLING_ANSWER<-N3_BILLING"
        )
        assert all(r.headers.get("authorization") == f"Bearer {secret}" for r in server.requests)
    assert trace.final_decision == "BILLING_ANSWER"
    for f in tmp_path.glob("api.sqlite*"):
        assert b"TOPSECRET" not in f.read_bytes()
    cache = ApiCache(tmp_path / "api.sqlite", mode="read")
    assert len(cache) == 2


def test_fingerprints_differ_by_api_and_options_and_replace_keeps_the_rest() -> None:
    base = OpenAIAgent(MODEL, system_prompt="Be careful.", cache=False)
    assert (
        base.fingerprint
        == OpenAIAgent(
            MODEL, system_prompt="Be careful.", cache=False, stream=True, base_url="http://x/v1"
        ).fingerprint
    )
    variants = [
        base.replace(api="responses"),
        base.replace(temperature=0.0),
        base.replace(tool_choice="auto"),
        base.replace(model="gpt-4o"),
    ]
    assert len({v.fingerprint for v in variants} | {base.fingerprint}) == 5
    assert variants[0].system_prompt == "Be careful." and variants[0].api == "responses"
    assert base.ref == f"openai:{MODEL}"


def test_a_missing_sdk_names_the_extra_to_install(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    from agentprop._cli import main
    from agentprop._modelapi.providers import OPENAI_CHAT

    monkeypatch.setitem(sys.modules, "openai", None)  # as if not installed
    with pytest.raises(MissingDependency, match=r"pip install 'agentprop\[openai\]'"):
        OPENAI_CHAT.sdk()
    agent = OpenAIAgent(MODEL, base_url="http://127.0.0.1:9/v1", cache=False)
    (error,) = run_once(project, agent, "END_BILLING_ANSWER<-N3_BILLING").all_errors()
    assert "MissingDependency" in error.message and "agentprop[openai]" in error.message
    err = io.StringIO()
    code = main(
        [
            "run",
            str(SUPPORTOPS),
            "--agent",
            "openai",
            "--model",
            MODEL,
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        out=io.StringIO(),
        err=err,
    )
    assert code == 2 and "pip install 'agentprop[openai]'" in err.getvalue()
