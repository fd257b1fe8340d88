"""The runtime: agents of every shape, the trace they leave, and every way they can misbehave."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentprop._agents.runtime import TurnContext, arun_conversation, run_conversation
from agentprop._scenario.trace import Trace
from agentprop._scenario.world import Failure, World
from agentprop._spec.model import Spec
from agentprop.errors import ToolError

ACCOUNT = {"account_id": "A1"}


def respond(
    ctx: TurnContext, decision: str = "BILLING_ANSWER", message: str = "done", **extra: Any
) -> None:
    ctx.respond(
        node_id="N3_BILLING",
        decision=decision,
        tool_actions=[c.name for c in ctx.calls_this_turn],
        evidence="from tools",
        user_message=message,
        **extra,
    )


def run(
    spec: Spec,
    factory: Callable[[], Any],
    messages: list[str],
    world: World | None = None,
    **kw: Any,
) -> Trace:
    return run_conversation(spec, factory, messages, world or World(spec=spec, seed=1), **kw)


def kinds(trace: Trace) -> list[str]:
    return [e.kind for e in trace.all_errors()]


# ----------------------------------------------------------------------------- agent shapes


def test_sync_function_agent(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        account = ctx.call("get_account", **ACCOUNT)
        respond(ctx, message=f"plan {account['plan_id']}")

    trace = run(
        supportops_spec, lambda: agent, ["what plan am I on?"], case_id="c1", agent_name="fn"
    )
    assert not trace.errored
    assert trace.case_id == "c1" and trace.agent == "fn" and trace.spec_id == "supportops_v1"
    [turn] = trace.turns
    assert turn.user_message == "what plan am I on?"
    assert turn.tool_names() == ["get_account"]
    assert turn.tool_calls[0].args == ACCOUNT and turn.tool_calls[0].ok
    plan = turn.tool_calls[0].result["plan_id"]
    assert turn.response is not None and turn.response["user_message"] == f"plan {plan}"
    assert trace.final_decision == "BILLING_ANSWER"


def test_async_function_agent(supportops_spec: Spec) -> None:
    async def agent(message: str, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        ctx.call("get_account", **ACCOUNT)
        await asyncio.sleep(0)
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert not trace.errored
    assert trace.tool_names() == ["get_account"] and trace.final_decision == "BILLING_ANSWER"


class SyncTurnAgent:
    def turn(self, message: str, ctx: TurnContext) -> None:
        ctx.call("get_plan_rules", plan_id="P1")
        respond(ctx)


class AsyncTurnAgent:
    async def turn(self, message: str, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        ctx.call("get_plan_rules", plan_id="P1")
        respond(ctx)


class AsyncCallableAgent:
    async def __call__(self, message: str, ctx: TurnContext) -> None:
        ctx.call("get_plan_rules", plan_id="P1")
        respond(ctx)


class SyncReturningCoroutine:
    """A sync callable that returns an awaitable (e.g. a wrapped async client)."""

    def __call__(self, message: str, ctx: TurnContext) -> Any:
        async def go() -> None:
            ctx.call("get_plan_rules", plan_id="P1")
            respond(ctx)

        return go()


@pytest.mark.parametrize(
    "cls", [SyncTurnAgent, AsyncTurnAgent, AsyncCallableAgent, SyncReturningCoroutine]
)
def test_object_agents(supportops_spec: Spec, cls: type) -> None:
    trace = run(supportops_spec, cls, ["a", "b"])
    assert not trace.errored, trace.all_errors()
    assert [t.tool_names() for t in trace.turns] == [["get_plan_rules"], ["get_plan_rules"]]
    assert trace.decisions == ["BILLING_ANSWER", "BILLING_ANSWER"]


def test_non_callable_agent_is_recorded(supportops_spec: Spec) -> None:
    trace = run(supportops_spec, lambda: 42, ["hi"])
    assert kinds(trace) == ["agent_exception"]
    assert "int" in trace.errors[0].message
    assert trace.turns == []


def test_factory_exception_is_recorded(supportops_spec: Spec) -> None:
    def factory() -> Any:
        raise RuntimeError("cannot build")

    trace = run(supportops_spec, factory, ["hi"])
    assert kinds(trace) == ["agent_exception"]
    assert "cannot build" in trace.errors[0].message


# ----------------------------------------------------------------------------- the trace


def test_calls_recorded_once_per_turn_with_steps(supportops_spec: Spec) -> None:
    plan: dict[int, list[str]] = {
        0: ["get_account", "get_plan_rules"],
        1: ["verify_identity"],
        2: [],
    }
    args = {
        "get_account": ACCOUNT,
        "get_plan_rules": {"plan_id": "P"},
        "verify_identity": {**ACCOUNT, "last4": "1", "zip": "2"},
    }

    def agent(message: str, ctx: TurnContext) -> None:
        for name in plan[ctx.turn_index]:
            ctx.call(name, **args[name])
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["one", "two", "three"])
    assert not trace.errored
    assert [t.tool_names() for t in trace.turns] == [plan[0], plan[1], plan[2]]
    assert [[(c.turn_index, c.step) for c in t.tool_calls] for t in trace.turns] == [
        [(0, 0), (0, 1)],
        [(1, 0)],
        [],
    ]
    assert trace.tool_names() == plan[0] + plan[1]
    assert [t.index for t in trace.turns] == [0, 1, 2]
    assert [t.user_message for t in trace.turns] == ["one", "two", "three"]


def test_recorded_results_are_copies(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        out = ctx.call("get_account", **ACCOUNT)
        out["plan_id"] = "tampered"
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert trace.tool_calls[0].result["plan_id"] != "tampered"


def test_a_model_agent_s_tool_output_is_copied_once(
    supportops_spec: Spec, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the world copies its default output for each call; a model agent only encodes it, so
    # the trace keeps that copy as it is instead of copying it again
    from agentprop._agents.model_agent import run_tool_call

    made: list[Any] = []
    default_output = World.default_output

    def spied(self: World, tool: str) -> Any:
        made.append(default_output(self, tool))
        return made[-1]

    monkeypatch.setattr(World, "default_output", spied)

    def agent(message: str, ctx: TurnContext) -> None:
        outcome = run_tool_call(ctx, "get_account", ACCOUNT)
        assert not outcome.is_error
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert len(made) == 1 and trace.tool_calls[0].result is made[0]
    assert trace.tool_calls[0].result == default_output(
        World(spec=supportops_spec, seed=1), "get_account"
    )


def _containers(value: Any) -> set[int]:
    """The ids of the dicts and lists in ``value`` (itself included)."""
    found: set[int] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            found.add(id(v))
            todo.extend(v.values())
        elif isinstance(v, list):
            found.add(id(v))
            todo.extend(v)
    return found


def test_a_model_agent_s_repeated_calls_of_a_tool_keep_one_copy_of_its_output(
    supportops_spec: Spec,
) -> None:
    # every call of a tool in one run gets the same default output, and a model agent only
    # encodes it: the trace holds one copy for all the calls, not one a call (each dict of it an
    # object the garbage collector counts towards its next collection), with the canaries in it
    from agentprop._agents.model_agent import run_tool_call

    world = World(spec=supportops_spec, seed=1, pii={"get_account": ["pii.ssn", "pii.email"]})
    tampered: list[Any] = []

    def agent(message: str, ctx: TurnContext) -> None:
        for _ in range(3):
            assert not run_tool_call(ctx, "get_account", ACCOUNT).is_error
        # a Python agent's call still gets a copy of its own, which it may change
        tampered.append(ctx.call("get_account", **ACCOUNT))
        tampered[0]["plan_id"] = "tampered"
        tampered[0]["pii"]["ssn"] = "tampered"
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["hi"], world)
    results = [c.result for c in trace.tool_calls]
    assert len(results) == 4
    expected = World(
        spec=supportops_spec, seed=1, pii={"get_account": ["pii.ssn", "pii.email"]}
    ).default_output("get_account")
    assert results[:3] == [expected] * 3 and results[3] == expected
    assert set(trace.canaries.values()) == {expected["pii"]["ssn"], expected["pii"]["email"]}
    assert len(_containers(results[:3])) == 1 + len(_containers(results[0]))


def test_a_handler_s_output_is_copied_for_the_trace(supportops_spec: Spec) -> None:
    # a handler may answer with state it keeps and changes later: the trace keeps its own copy
    from agentprop._agents.model_agent import run_tool_call

    account = {"account_id": "A1", "plan_id": "PLAN-BASIC"}
    world = World(spec=supportops_spec, seed=1, handlers={"get_account": lambda a, w: account})

    def agent(message: str, ctx: TurnContext) -> None:
        run_tool_call(ctx, "get_account", ACCOUNT)
        account["plan_id"] = "changed later"
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["hi"], world)
    assert trace.tool_calls[0].result == {"account_id": "A1", "plan_id": "PLAN-BASIC"}


def test_tool_errors_reach_the_agent_and_are_recorded(supportops_spec: Spec) -> None:
    seen: list[str] = []

    def agent(message: str, ctx: TurnContext) -> None:
        for _ in range(2):
            try:
                ctx.call("get_account", **ACCOUNT)
            except ToolError as exc:
                seen.append(exc.kind)
        respond(ctx)

    world = World(spec=supportops_spec, failures=[Failure("get_account", "timeout", calls=(1,))])
    trace = run(supportops_spec, lambda: agent, ["hi"], world)
    assert seen == ["timeout"]
    first, second = trace.tool_calls
    assert first.error_kind == "timeout" and first.error and first.result is None and not first.ok
    assert second.ok and second.result is not None
    # a tool error is a result the agent handled, not a broken run
    assert not trace.errored


def test_invalid_arguments_are_a_tool_error(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        try:
            ctx.call("verify_identity", account_id="A1")
        except ToolError as exc:
            assert exc.kind == "invalid_arguments"
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert trace.tool_calls[0].error_kind == "invalid_arguments"
    assert not trace.errored


def test_history_and_memory_across_turns(supportops_spec: Spec) -> None:
    histories: list[list[str | None]] = []

    def agent(message: str, ctx: TurnContext) -> None:
        histories.append([t.decision for t in ctx.history])
        ctx.memory["turns"] = ctx.memory.get("turns", 0) + 1
        respond(
            ctx,
            decision="CLARIFY" if ctx.turn_index == 0 else "TICKET_CREATED",
            message=str(ctx.memory["turns"]),
        )

    trace = run(supportops_spec, lambda: agent, ["a", "b", "c"])
    assert histories == [[], ["CLARIFY"], ["CLARIFY", "TICKET_CREATED"]]
    assert [t.response["user_message"] for t in trace.turns if t.response] == ["1", "2", "3"]


def test_context_and_canaries_reach_the_trace(supportops_spec: Spec) -> None:
    got: list[Any] = []

    def agent(message: str, ctx: TurnContext) -> None:
        got.append(dict(ctx.context))
        respond(ctx)

    world = World(spec=supportops_spec, seed=5, pii={"get_account": ["pii.ssn"]}, canary_nonce="x")
    trace = run(supportops_spec, lambda: agent, ["hi"], world, context={"account_id": "A1"})
    assert got == [{"account_id": "A1"}]
    assert trace.canaries == world.canaries and trace.canaries
    assert trace.world_seed == 5


def test_trace_json_round_trip(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        ctx.call("get_account", **ACCOUNT)
        try:
            ctx.call("nope")
        except ToolError:
            pass
        ctx.say("free text")
        ctx.add_usage(input_tokens=10, output_tokens=5, cost_usd=0.001)
        if ctx.turn_index == 0:
            respond(ctx)

    world = World(spec=supportops_spec, pii={"get_account": ["pii.ssn"]}, canary_nonce="n")
    trace = run(supportops_spec, lambda: agent, ["one", "two"], world)
    assert trace.errored  # unknown tool + no_respond on turn 2
    back = Trace.from_json(trace.to_json())
    assert back == trace
    assert back.to_json() == trace.to_json()
    assert back.usage.input_tokens == 20 and back.usage.model_calls == 2


# ----------------------------------------------------------------------------- respond


def test_invalid_respond_then_valid_retry(supportops_spec: Spec) -> None:
    problems: list[str] = []

    def agent(message: str, ctx: TurnContext) -> None:
        try:
            respond(ctx, decision="MAYBE")
        except ToolError as exc:
            assert exc.kind == "invalid_respond"
            problems.append(exc.message)
        respond(ctx, decision="BILLING_ANSWER")

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert len(problems) == 1 and "decision" in problems[0]
    assert not trace.errored
    assert trace.final_decision == "BILLING_ANSWER"
    assert (
        trace.turns[0].raw_response is not None
        and trace.turns[0].raw_response["decision"] == "BILLING_ANSWER"
    )


def test_respond_missing_required_field(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        try:
            ctx.respond(node_id="N1", decision="CLARIFY", tool_actions=[], user_message="?")
        except ToolError as exc:
            assert "evidence" in exc.message
            raise

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert kinds(trace) == ["agent_exception"]
    assert trace.turns[0].response is None
    assert trace.turns[0].raw_response == {
        "node_id": "N1",
        "decision": "CLARIFY",
        "tool_actions": [],
        "user_message": "?",
    }


def test_invalid_respond_never_fixed_is_recorded(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        try:
            respond(ctx, decision="MAYBE")
        except ToolError:
            pass

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert kinds(trace) == ["invalid_respond"]
    assert "decision" in trace.turns[0].errors[0].message


def test_respond_through_call(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        ack = ctx.call(
            "respond",
            node_id="N3",
            decision="CLARIFY",
            tool_actions=[],
            evidence="-",
            user_message="?",
        )
        assert ack == {"acknowledged": True}

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert not trace.errored and trace.final_decision == "CLARIFY"
    assert trace.tool_calls == []  # respond is the response, not a tool call


def test_never_responding(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        ctx.call("get_account", **ACCOUNT)

    trace = run(supportops_spec, lambda: agent, ["one", "two"])
    assert kinds(trace) == ["no_respond", "no_respond"]
    assert [e.turn_index for e in trace.all_errors()] == [0, 1]
    assert trace.decisions == [None, None]


def test_respond_twice(supportops_spec: Spec) -> None:
    second: list[str] = []

    def agent(message: str, ctx: TurnContext) -> None:
        respond(ctx, decision="CLARIFY")
        try:
            respond(ctx, decision="BILLING_ANSWER")
        except ToolError as exc:
            second.append(exc.kind)

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert second == ["respond_twice"]
    assert kinds(trace) == ["respond_twice"]
    assert trace.final_decision == "CLARIFY"  # the first response stands


def test_tool_after_respond_is_a_protocol_error(supportops_spec: Spec) -> None:
    raised: list[str] = []

    def agent(message: str, ctx: TurnContext) -> None:
        respond(ctx)
        try:
            ctx.call("cancel_order", order_id="O-1")
        except ToolError as exc:
            raised.append(exc.kind)

    world = World(spec=supportops_spec)
    trace = run(supportops_spec, lambda: agent, ["hi"], world)
    assert raised == ["protocol"]
    assert kinds(trace) == ["protocol"]
    [call] = trace.tool_calls
    assert call.name == "cancel_order" and call.error_kind == "protocol"
    assert world.call_count("cancel_order") == 0  # the world never saw it


# ----------------------------------------------------------------------------- limits


def test_max_tool_calls_per_turn(supportops_spec: Spec) -> None:
    assert supportops_spec.max_tool_calls_per_turn == 4
    refused: list[int] = []

    def agent(message: str, ctx: TurnContext) -> None:
        for i in range(6):
            try:
                ctx.call("get_account", **ACCOUNT)
            except ToolError as exc:
                assert exc.kind == "limit_exceeded"
                refused.append(i)
        respond(ctx)

    world = World(spec=supportops_spec)
    trace = run(supportops_spec, lambda: agent, ["one", "two"], world)
    assert refused == [4, 5, 4, 5]
    for turn in trace.turns:
        assert [c.error_kind for c in turn.tool_calls] == [None] * 4 + ["limit_exceeded"] * 2
        assert [e.kind for e in turn.errors] == ["limit_exceeded", "limit_exceeded"]
        assert turn.response is not None  # respond is still allowed after the limit
    assert world.call_count("get_account") == 8  # refused calls never reached the world


def test_undeclared_tool_is_refused(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        try:
            ctx.call("refund_order", order_id="O-1")
        except ToolError as exc:
            assert exc.kind == "unknown_tool" and "get_account" in exc.message
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["hi"])
    assert kinds(trace) == ["unknown_tool"]
    assert (
        trace.tool_calls[0].name == "refund_order"
        and trace.tool_calls[0].error_kind == "unknown_tool"
    )


def test_tool_names_exclude_respond(supportops_spec: Spec) -> None:
    names: list[list[str]] = []

    def agent(message: str, ctx: TurnContext) -> None:
        names.append(ctx.tool_names)
        respond(ctx)

    run(supportops_spec, lambda: agent, ["hi"])
    assert "respond" not in names[0] and "cancel_order" in names[0]


# ----------------------------------------------------------------------------- faults never escape


def test_agent_exception_is_recorded_not_raised(supportops_spec: Spec) -> None:
    turns_seen: list[int] = []

    def agent(message: str, ctx: TurnContext) -> None:
        turns_seen.append(ctx.turn_index)
        ctx.call("get_account", **ACCOUNT)
        raise ValueError("boom")

    trace = run(supportops_spec, lambda: agent, ["one", "two"])
    assert turns_seen == [0]  # the conversation stops at the broken turn
    assert len(trace.turns) == 1
    [err] = trace.all_errors()
    assert err.kind == "agent_exception" and "ValueError" in err.message and "boom" in err.message
    assert err.turn_index == 0 and err.traceback and "boom" in err.traceback
    assert trace.tool_names() == ["get_account"]  # what happened before the crash is kept


def test_async_agent_timeout(supportops_spec: Spec) -> None:
    async def agent(message: str, ctx: TurnContext) -> None:
        ctx.call("get_account", **ACCOUNT)
        await asyncio.sleep(30)
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["one", "two"], turn_timeout_s=0.05)
    assert kinds(trace) == ["timeout"]
    assert len(trace.turns) == 1 and trace.turns[0].response is None
    assert "0.05" in trace.turns[0].errors[0].message
    assert trace.tool_names() == ["get_account"]


def test_sync_agent_timeout_and_late_calls_are_refused(supportops_spec: Spec) -> None:
    late: list[str] = []

    def agent(message: str, ctx: TurnContext) -> None:
        time.sleep(0.5)  # 10x the timeout: the turn is over long before this call
        try:
            ctx.call("get_account", **ACCOUNT)
        except ToolError as exc:
            late.append(exc.kind)

    world = World(spec=supportops_spec)
    trace = run(supportops_spec, lambda: agent, ["hi"], world, turn_timeout_s=0.05)
    assert kinds(trace) == ["timeout"]
    # the run returned at the timeout; the abandoned agent thread wakes up later and its call
    # must be refused rather than reach the world
    deadline = time.monotonic() + 5.0
    while not late and time.monotonic() < deadline:
        time.sleep(0.05)
    assert late == ["protocol"]
    assert world.call_count("get_account") == 0
    assert trace.tool_calls == []


def test_sync_turns_run_on_reused_daemon_threads(supportops_spec: Spec) -> None:
    seen: list[threading.Thread] = []

    def agent(message: str, ctx: TurnContext) -> None:
        seen.append(threading.current_thread())
        respond(ctx)

    for _ in range(20):
        trace = run(supportops_spec, lambda: agent, ["one", "two"])
        assert not trace.errored and trace.decisions == ["BILLING_ANSWER", "BILLING_ANSWER"]
    assert len(seen) == 40
    assert all(t.daemon and t is not threading.main_thread() for t in seen)
    assert len({id(t) for t in seen}) < 10  # not one new thread per turn


def test_a_stuck_sync_agent_holds_up_no_later_turn(supportops_spec: Spec) -> None:
    release = threading.Event()
    stuck: list[threading.Thread] = []

    def hangs(message: str, ctx: TurnContext) -> None:
        stuck.append(threading.current_thread())
        release.wait(10)

    def quick(message: str, ctx: TurnContext) -> None:
        assert threading.current_thread() not in stuck
        respond(ctx)

    try:
        assert kinds(run(supportops_spec, lambda: hangs, ["hi"], turn_timeout_s=0.05)) == [
            "timeout"
        ]
        for _ in range(5):  # the stuck thread is still busy: later turns run on other threads
            trace = run(supportops_spec, lambda: quick, ["hi"], turn_timeout_s=5.0)
            assert not trace.errored, trace.all_errors()
        assert stuck[0].is_alive()
    finally:
        release.set()


def test_a_sync_conversation_hops_to_a_thread_once(
    supportops_spec: Spec, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentprop._agents import runtime as _runtime

    submitted: list[str] = []
    submit = _runtime._WORKERS.submit

    def counting(job: Callable[[], None], name: str) -> None:
        submitted.append(name)
        submit(job, name)

    monkeypatch.setattr(_runtime._WORKERS, "submit", counting)
    threads: list[threading.Thread] = []

    def agent(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        respond(ctx)

    trace = run(supportops_spec, lambda: agent, ["one", "two", "three"], case_id="c", trial=4)
    assert not trace.errored and len(trace.turns) == 3
    assert submitted == ["agentprop-agent-c-4"]  # one hop for the three turns
    assert len(set(threads)) == 1 and threads[0] is not threading.main_thread()


def test_a_later_turn_that_hangs_is_abandoned_and_the_earlier_ones_kept(
    supportops_spec: Spec,
) -> None:
    release = threading.Event()

    def agent(message: str, ctx: TurnContext) -> None:
        if ctx.turn_index == 1:
            release.wait(10)
        respond(ctx)

    try:
        t0 = time.monotonic()
        trace = run(supportops_spec, lambda: agent, ["one", "two", "three"], turn_timeout_s=0.2)
        assert time.monotonic() - t0 < 5
    finally:
        release.set()
    assert [t.index for t in trace.turns] == [0, 1]  # the conversation ends at the stuck turn
    assert trace.turns[0].response is not None and not trace.turns[0].errors
    assert [e.kind for e in trace.turns[1].errors] == ["timeout"] and trace.turns[
        1
    ].response is None


def test_a_cancelled_sync_conversation_abandons_its_thread(supportops_spec: Spec) -> None:
    entered = threading.Event()
    release = threading.Event()
    late: list[str] = []

    def agent(message: str, ctx: TurnContext) -> None:
        entered.set()
        release.wait(10)
        try:
            ctx.call("get_account", **ACCOUNT)
        except ToolError as exc:
            late.append(exc.kind)

    async def main() -> None:
        task = asyncio.ensure_future(
            arun_conversation(
                supportops_spec, lambda: agent, ["hi", "again"], World(spec=supportops_spec)
            )
        )
        while not entered.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    release.set()
    deadline = time.monotonic() + 5.0
    while not late and time.monotonic() < deadline:
        time.sleep(0.02)
    assert late == ["protocol"]  # the abandoned turn is closed: its tool call is refused


def test_a_sync_turn_returning_an_awaitable_is_awaited_and_the_next_turns_go_on(
    supportops_spec: Spec,
) -> None:
    seen: list[tuple[int, bool]] = []

    class Mixed:
        def turn(self, message: str, ctx: TurnContext) -> Any:
            seen.append((ctx.turn_index, threading.current_thread() is threading.main_thread()))
            if ctx.turn_index == 0:

                async def later() -> None:
                    await asyncio.sleep(0)
                    respond(ctx, message="awaited")

                return later()
            respond(ctx, message="sync")
            return None

    trace = run(supportops_spec, Mixed, ["one", "two", "three"])
    assert not trace.errored, trace.all_errors()
    assert [t.response["user_message"] for t in trace.turns if t.response] == [
        "awaited",
        "sync",
        "sync",
    ]
    assert [i for i, _ in seen] == [0, 1, 2] and not any(on_main for _, on_main in seen)


_TURN_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("turn_var", default="unset")


def test_each_sync_turn_starts_with_a_fresh_context(supportops_spec: Spec) -> None:
    seen: list[str] = []

    def agent(message: str, ctx: TurnContext) -> None:
        seen.append(_TURN_VAR.get())
        _TURN_VAR.set(message)
        respond(ctx)

    for _ in range(3):
        run(supportops_spec, lambda: agent, ["a", "b"])
    assert seen == ["unset"] * 6  # like a new thread each turn: nothing set earlier leaks in


# ----------------------------------------------------------------------------- factory, rng, loops


def test_factory_called_once_per_conversation(supportops_spec: Spec) -> None:
    made: list[object] = []

    class Counting:
        def __init__(self) -> None:
            self.turns = 0
            made.append(self)

        def turn(self, message: str, ctx: TurnContext) -> None:
            self.turns += 1
            respond(ctx, message=f"turn {self.turns}")

    trace = run(supportops_spec, Counting, ["a", "b", "c"])
    assert len(made) == 1
    assert [t.response["user_message"] for t in trace.turns if t.response] == [
        "turn 1",
        "turn 2",
        "turn 3",
    ]
    run(supportops_spec, Counting, ["a"])
    assert len(made) == 2  # a new conversation gets a new agent


def _draws(spec: Spec, case_id: str, trial: int) -> list[float]:
    out: list[float] = []

    def agent(message: str, ctx: TurnContext) -> None:
        out.extend(ctx.rng.random() for _ in range(3))
        respond(ctx)

    run(spec, lambda: agent, ["a", "b"], case_id=case_id, trial=trial)
    return out


def test_rng_reproducible_per_case_and_trial(supportops_spec: Spec) -> None:
    a = _draws(supportops_spec, "case-1", 0)
    assert a == _draws(supportops_spec, "case-1", 0)
    assert len(set(a)) == 6  # one stream across turns, not reset each turn
    assert a != _draws(supportops_spec, "case-1", 1)
    assert a != _draws(supportops_spec, "case-2", 0)
    trials = {tuple(_draws(supportops_spec, "case-1", t)) for t in range(10)}
    assert len(trials) == 10


def test_run_conversation_inside_a_running_loop(supportops_spec: Spec) -> None:
    async def agent(message: str, ctx: TurnContext) -> None:
        respond(ctx)

    async def main() -> tuple[Trace, Trace]:
        inner = run(supportops_spec, lambda: agent, ["from a loop"])
        awaited = await arun_conversation(
            supportops_spec, lambda: agent, ["awaited"], World(spec=supportops_spec)
        )
        return inner, awaited

    inner, awaited = asyncio.run(main())
    assert not inner.errored and inner.final_decision == "BILLING_ANSWER"
    assert not awaited.errored and awaited.turns[0].user_message == "awaited"


def test_no_messages_no_turns(supportops_spec: Spec) -> None:
    made: list[int] = []

    def factory() -> Any:
        made.append(1)
        return lambda message, ctx: None

    trace = run(supportops_spec, factory, [])
    assert trace.turns == [] and not trace.errored


def test_sync_agent_timeout_bounds_the_run(supportops_spec: Spec) -> None:
    def agent(message: str, ctx: TurnContext) -> None:
        time.sleep(2.0)

    started = time.monotonic()
    trace = run(supportops_spec, lambda: agent, ["hi"], turn_timeout_s=0.05)
    elapsed = time.monotonic() - started
    assert kinds(trace) == ["timeout"]
    # 40x the timeout, and half of the agent's sleep: a generous margin either way
    assert elapsed < 1.0, f"run_conversation took {elapsed:.2f} s with turn_timeout_s=0.05"


def test_turn_timeout_keeps_asyncio_timeout_semantics() -> None:
    """The runtime's own per-turn deadline behaves like ``asyncio.timeout``: an expired
    deadline surfaces as ``TimeoutError`` and leaves the task uncancelled; a cancellation from
    outside stays a cancellation; an agent that swallows the deadline's cancellation finishes."""
    from agentprop._agents.runtime import _within

    async def sleeper(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    async def swallower() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            pass

    async def scenario() -> list[Any]:
        seen: list[Any] = []
        task = asyncio.current_task()
        assert task is not None
        with pytest.raises(TimeoutError):
            await _within(sleeper(5), 0.01)
        seen.append(task.cancelling())
        await _within(sleeper(0), 5.0)  # finishes in time
        await _within(sleeper(0), None)
        with pytest.raises(TimeoutError):
            await _within(sleeper(5), 0)  # a deadline already passed
        await _within(swallower(), 0.01)  # the agent ate the cancellation: no error
        seen.append(task.cancelling())

        async def cancelled_from_outside() -> None:
            await _within(sleeper(5), 5.0)

        inner = asyncio.ensure_future(cancelled_from_outside())
        await asyncio.sleep(0.01)
        inner.cancel()
        try:
            await inner
        except asyncio.CancelledError:
            seen.append("cancelled")
        return seen

    assert asyncio.run(scenario()) == [0, 0, "cancelled"]


def test_async_agent_blocking_its_loop_is_still_timed_out(supportops_spec: Spec) -> None:
    release = threading.Event()

    async def agent(message: str, ctx: TurnContext) -> None:
        ctx.call("get_account", **ACCOUNT)
        release.wait(100)  # blocks the agent's event loop, as time.sleep(100) would
        respond(ctx)

    try:
        trace = run(supportops_spec, lambda: agent, ["one", "two"], turn_timeout_s=1.0)
    finally:
        release.set()  # let the abandoned thread go
    assert kinds(trace) == ["timeout"]
    assert len(trace.turns) == 1 and trace.turns[0].response is None
    assert "within 1.0 s" in trace.turns[0].errors[0].message
    assert trace.tool_names() == ["get_account"]


class StartsALoop:
    """A sync agent class whose constructor starts an event loop of its own, with fault knobs."""

    FAULTS = {"slow": "never used"}

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.ready = asyncio.run(_ready())

    def turn(self, message: str, ctx: TurnContext) -> None:
        respond(ctx, message=str(self.ready))


async def _ready() -> str:
    await asyncio.sleep(0)
    return "ready"


@pytest.mark.parametrize("timeout", [60.0, None])
def test_a_sync_factory_function_may_start_an_event_loop_of_its_own(
    supportops_spec: Spec, timeout: float | None
) -> None:
    # a factory that is a plain sync function (or agentprop's fault-knob factory around a
    # class) was called on the running loop: asyncio.run raised "cannot be called from a
    # running event loop" and every run failed as the agent's
    from agentprop._agents.loading import make_factory

    threads: list[threading.Thread] = []

    def make_agent() -> Any:
        threads.append(threading.current_thread())
        asyncio.run(_ready())

        def agent(message: str, ctx: TurnContext) -> None:
            respond(ctx, message=asyncio.run(_ready()))  # in the turn too

        return agent

    for factory in (make_agent, make_factory(StartsALoop, {"slow": 0.0}).factory):
        trace = run(supportops_spec, factory, ["hi", "again"], turn_timeout_s=timeout)
        assert kinds(trace) == [], trace.all_errors()
        assert [t.response["user_message"] for t in trace.turns if t.response] == ["ready"] * 2
    # built in the caller's thread (its thread-local state at hand), the loop set aside: tried
    # on the loop first, then again off it
    assert threads == [threading.main_thread()] * 2
    run(supportops_spec, make_agent, ["hi"], turn_timeout_s=timeout)
    assert len(threads) == 3  # the next run builds it off the loop at once


class NeedsTheLoop:
    """An async agent whose constructor takes the running loop, as an HTTP session does."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()

    async def turn(self, message: str, ctx: TurnContext) -> None:
        respond(ctx, message="ready")


def test_a_sync_factory_function_may_build_an_agent_that_needs_the_running_loop(
    supportops_spec: Spec,
) -> None:
    # every sync factory function was called with the loop set aside: an async agent taking
    # the running loop failed every run, "agent factory raised RuntimeError: no running event
    # loop", blamed on the agent
    from agentprop._agents.loading import make_factory

    def make_agent() -> NeedsTheLoop:
        return NeedsTheLoop()

    for factory in (lambda: NeedsTheLoop(), make_agent, make_factory(NeedsTheLoop, {}).factory):
        for _ in range(2):
            trace = run(supportops_spec, factory, ["hi"])
            assert kinds(trace) == [], trace.all_errors()
            assert trace.turns[0].response is not None


def test_a_factory_failing_for_its_own_reasons_is_called_once_and_blamed_on_the_agent(
    supportops_spec: Spec,
) -> None:
    calls: list[int] = []

    def make_agent() -> Any:
        calls.append(1)
        raise RuntimeError("no API key")

    trace = run(supportops_spec, make_agent, ["hi"])
    assert kinds(trace) == ["agent_exception"]
    assert "agent factory raised RuntimeError: no API key" in trace.all_errors()[0].message
    assert calls == [1]


def test_a_refused_asyncio_run_leaves_no_coroutine_unawaited(supportops_spec: Spec) -> None:
    import gc
    import warnings

    def make_agent() -> Any:
        asyncio.run(_ready())
        return lambda message, ctx: respond(ctx)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = run(supportops_spec, make_agent, ["hi"])
        gc.collect()
    assert kinds(trace) == [], trace.all_errors()
    assert not [w for w in caught if "never awaited" in str(w.message)]


# ----------------------------------------------------------------------------- the returned trace


def test_a_trace_is_walked_for_lone_surrogates_only_when_its_json_cannot_be_written(
    supportops_spec: Spec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace's JSON, written once to look for secrets, also shows it is valid Unicode: the
    string-by-string walk (0.2 ms a run with 4 KB tool results) runs only when it cannot."""
    walked: list[Trace] = []
    make_valid_unicode = Trace.make_valid_unicode

    def spy(self: Trace) -> Trace:
        walked.append(self)
        return make_valid_unicode(self)

    monkeypatch.setattr(Trace, "make_valid_unicode", spy)

    def agent(message: str, ctx: TurnContext) -> None:
        ctx.call("get_account", **ACCOUNT)
        respond(ctx, message="half a pair \ud83d" if "emoji" in message else "done")

    assert not run(supportops_spec, lambda: agent, ["what plan am I on?"]).errored
    assert walked == []
    trace = run(supportops_spec, lambda: agent, ["an emoji, please"])
    assert len(walked) == 1 and trace.turns[0].response is not None
    assert trace.turns[0].response["user_message"] == "half a pair \ufffd"
