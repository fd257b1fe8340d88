"""The spec-free tier: ``agentprop.check(agent, messages, case_or_property)`` on
plain Python agents."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from pydantic import BaseModel

import agentprop
from agentprop import Case, Result, Tools, Trace
from agentprop._decide.session import Session
from agentprop._scenario.trace import ToolCall, Turn
from agentprop.errors import AgentPropertyViolation, InvalidArgument


class OrderStatus(BaseModel):
    status: str


def query_order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "shipped"}


def drop_table(name: str) -> None:
    raise PermissionError(f"no dropping {name}")


def trace_of(
    *calls: tuple[str, dict[str, Any]], response: dict[str, Any] | None = None, text: str = ""
) -> Trace:
    turn = Turn(
        index=0,
        user_message="hi",
        tool_calls=[ToolCall(name=n, args=a, step=i) for i, (n, a) in enumerate(calls)],
        response=response,
        text=text,
    )
    return Trace(turns=[turn])


@pytest.fixture(autouse=True)
def fresh_session() -> Any:
    with Session().activate() as session:
        yield session


# ---------------------------------------------------------------------------------------- Case


def failed(case: Case, trace: Trace) -> list[str]:
    return [v.contract for v in case.verdicts(trace) if not v.passed]


def test_a_case_checks_expected_and_forbidden_tools() -> None:
    case = Case(expected_tools=["query_order"], forbidden_tools=["drop_table"])
    assert failed(case, trace_of(("query_order", {}))) == []
    assert failed(case, trace_of()) == ["requires_tools"]
    assert failed(case, trace_of(("query_order", {}), ("drop_table", {}))) == ["forbids_tools"]


def test_scope_admits_a_tool_by_name_or_by_its_scope_argument() -> None:
    case = Case(scope={"read"})
    assert failed(case, trace_of(("query_order", {"scope": "read"}))) == []
    assert failed(case, trace_of(("query_order", {"scope": "write"}))) == ["within_scope"]
    assert failed(Case(scope={"query_order"}), trace_of(("query_order", {}))) == []
    assert failed(Case(scope={"query_order"}), trace_of(("drop_table", {}))) == ["within_scope"]


def test_schema_as_pydantic_model_or_json_schema() -> None:
    good, bad = trace_of(response={"status": "paid"}), trace_of(response={"state": "paid"})
    for schema in (
        OrderStatus,
        {"type": "object", "required": ["status"], "properties": {"status": {"type": "string"}}},
    ):
        case = Case(schema=schema)
        assert failed(case, good) == []
        assert failed(case, bad) == ["result_schema"]
        assert failed(case, trace_of()) == ["result_schema"]  # no result at all
    # JSON text is parsed
    assert failed(Case(schema=OrderStatus), trace_of(text='{"status": "paid"}')) == []


def test_the_judge_sees_the_validated_output() -> None:
    seen: list[Any] = []

    def judge(case: Case, result: Result) -> bool:
        seen.append(result.output)
        return bool(result.output.status == "paid")

    case = Case(schema=OrderStatus, judge=judge)
    assert failed(case, trace_of(response={"status": "paid"})) == []
    assert failed(case, trace_of(response={"status": "lost"})) == ["judge"]
    assert seen == [OrderStatus(status="paid"), OrderStatus(status="lost")]


def test_a_baseline_flags_added_and_dropped_tools() -> None:
    case = Case(baseline=trace_of(("query_order", {})))
    assert failed(case, trace_of(("query_order", {}))) == []
    verdicts = case.verdicts(trace_of(("query_order", {}), ("refund", {})))
    assert not verdicts[0].passed and "added refund" in verdicts[0].explanation


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"expected_tools": "query_order"}, "give a list of tool names"),
        ({"expected_tools": ["a"], "forbidden_tools": ["a"]}, "both expected and forbidden"),
        ({"schema": {"type": "no-such-type"}}, "not a valid JSON Schema"),
        ({"schema": 3}, "pydantic model class or a JSON Schema"),
    ],
)
def test_a_bad_case_names_the_fix(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        Case(**kwargs)


# ------------------------------------------------------------------------------------- agents


def test_tools_are_recorded_into_the_trace_with_results_and_errors() -> None:
    def agent(messages: list[str], tools: Tools) -> dict[str, str]:
        status = tools.query_order(order_id="O-1")["status"]
        try:
            tools.drop_table(name="orders")
        except PermissionError:
            pass
        return {"status": status}

    seen: list[Trace] = []
    agentprop.check(
        agent,
        "where is O-1?",
        lambda t: seen.append(t) is None,
        tools=[query_order, drop_table],
        settings=agentprop.settings(runs=1, mode="fixed", tau=1.0),
    )
    trace = seen[0]
    assert [(c.name, c.args, c.ok) for c in trace.tool_calls] == [
        ("query_order", {"order_id": "O-1"}, True),
        ("drop_table", {"name": "orders"}, False),
    ]
    assert trace.tool_calls[0].result == {"order_id": "O-1", "status": "shipped"}
    assert (
        trace.final_response == {"status": "shipped"}
        and trace.turns[0].user_message == "where is O-1?"
    )


def test_tools_call_and_acall_record_the_same_calls() -> None:
    """``tools.call`` and ``await tools.acall`` record one way: results, errors (re-raised) and
    an unknown tool (refused, not recorded) alike, for sync and async tool functions."""

    async def aquery_order(order_id: str) -> dict[str, str]:
        return query_order(order_id)

    steps = [("query_order", {"order_id": "O-1"}), ("drop_table", {"name": "t"}), ("nope", {})]
    recorded: list[list[dict[str, Any]]] = []
    for is_async in (False, True):
        tools = Tools({"query_order": query_order, "drop_table": drop_table})
        atools = Tools({"query_order": aquery_order, "drop_table": drop_table})
        raised: list[str] = []
        for name, args in steps:
            try:
                if is_async:
                    asyncio.run(atools.acall(name, **args))
                else:
                    tools.call(name, **args)
            except (PermissionError, InvalidArgument) as exc:
                raised.append(type(exc).__name__)
        assert raised == ["PermissionError", "InvalidArgument"]
        recorded.append([c.model_dump() for c in (atools if is_async else tools).calls])
    assert recorded[0] == recorded[1] and len(recorded[0]) == 2
    assert recorded[0][1]["error"] == "PermissionError: no dropping t"


def test_an_agent_returning_a_trace_and_an_async_agent() -> None:
    def as_trace(messages: list[str]) -> Trace:
        return trace_of(("query_order", {}), response={"status": "paid"})

    async def as_coroutine(messages: list[str], tools: Tools) -> OrderStatus:
        await tools.acall("query_order", order_id="O-2")
        return OrderStatus(status="paid")

    case = Case(expected_tools=["query_order"], schema=OrderStatus)
    assert agentprop.check(as_trace, ["hi"], case).verdict == "PASS"
    assert (
        agentprop.check(as_coroutine, ["hi"], case, tools={"query_order": query_order}).verdict
        == "PASS"
    )


def test_a_sync_agent_that_runs_its_own_event_loop_is_not_failed_for_it() -> None:
    """A sync agent wrapping an async one with ``asyncio.run`` (as a framework's ``run_sync``
    does) is run off agentprop's event loop, as the runtime runs a sync agent: it passes; it
    was once failed with "asyncio.run() cannot be called from a running event loop", an
    ``agent_exception`` that was agentprop's, not the agent's."""

    async def answer(messages: list[str]) -> dict[str, str]:
        await asyncio.sleep(0)
        return {"status": "paid"}

    def sync_agent(messages: list[str]) -> dict[str, str]:
        return asyncio.run(answer(messages))

    result = agentprop.check(sync_agent, ["hi"], Case(schema=OrderStatus), raise_on_failure=False)
    assert (result.verdict, result.failures) == ("PASS", [])

    async def from_async_code() -> str:
        checked = await agentprop.acheck(sync_agent, ["hi"], Case(schema=OrderStatus))
        return checked.verdict

    assert asyncio.run(from_async_code()) == "PASS"


def test_a_sync_property_that_runs_its_own_event_loop_is_judged(supportops_project: Any) -> None:
    """A sync property (or judge) that calls ``asyncio.run`` (an async SDK client, a model
    judge of the user's) was called on agentprop's running loop, where it raised "asyncio.run()
    cannot be called from a running event loop" out of ``check``: it is called with the loop
    set aside, in the same thread, and judges. So is a sync spec-tier agent class as it is
    built, in its turns when they run inline, and as it closes (its constructor failed the
    run as an agent exception)."""
    examples = str(Path(__file__).resolve().parents[1] / "examples" / "supportops")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    from agent import SupportOpsAgent

    async def looked_up(value: bool) -> bool:
        await asyncio.sleep(0)
        return value

    threads: set[threading.Thread] = set()

    def prop(trace: Trace) -> bool:
        threads.add(threading.current_thread())
        return asyncio.run(looked_up(not trace.errored))

    def judge(case: Case, result: Result) -> bool:
        return asyncio.run(looked_up(result.output is not None))

    def sync_agent(messages: list[str]) -> dict[str, str]:
        return asyncio.run(looked_up(True)) and {"status": "paid"}

    class SyncLoops(SupportOpsAgent):  # type: ignore[misc]
        """Starts a loop of its own as it is built, in each turn and as it closes."""

        def __init__(self) -> None:
            self.client = asyncio.run(looked_up(True))
            super().__init__()

        def turn(self, message: str, ctx: Any) -> None:
            asyncio.run(looked_up(True))
            super().turn(message, ctx)

        def close_conversation(self) -> None:
            asyncio.run(looked_up(True))

    scenario = supportops_project.scenarios()[0]
    inline = dataclasses.replace(supportops_project, turn_timeout_s=None)

    def checks() -> list[str]:
        return [
            agentprop.check(sync_agent, ["hi"], prop).verdict,
            agentprop.check(sync_agent, ["hi"], Case(judge=judge, schema=OrderStatus)).verdict,
            agentprop.check(supportops_project, scenario, SyncLoops, prop=prop).verdict,
            # turns inline (no turn timeout), on the loop's thread
            agentprop.check(inline, scenario, SyncLoops, prop=prop).verdict,
        ]

    async def from_async_code() -> list[str]:
        return [
            (await agentprop.acheck(sync_agent, ["hi"], prop)).verdict,
            (await agentprop.acheck(supportops_project, scenario, SyncLoops, prop=prop)).verdict,
        ]

    assert checks() == ["PASS"] * 4
    # in the caller's thread, as when called directly (its thread-local state at hand)
    assert threads == {threading.current_thread()}
    assert asyncio.run(from_async_code()) == ["PASS"] * 2


def test_an_agent_exception_is_a_failing_run_not_a_crash() -> None:
    def broken(messages: list[str]) -> str:
        raise KeyError("boom")

    result = agentprop.check(broken, ["hi"], lambda t: True, raise_on_failure=False)
    assert (
        result.verdict == "FAIL" and "agent_exception: KeyError" in result.failures[0].explanation
    )
    assert "raise KeyError" in (result.failures[0].traceback or "")


def test_check_decides_statistically_and_memoises(fresh_session: Session) -> None:
    # an agent that skips its lookup on 40% of runs, seeded per trial: FAIL at tau 0.9
    def flaky(messages: list[str], tools: Tools, rng: random.Random) -> dict[str, str]:
        if rng.random() < 0.4:
            return {"status": "unknown"}
        return {"status": tools.query_order(order_id="O-1")["status"]}

    case = Case(expected_tools=["query_order"])
    first = agentprop.check(
        flaky, ["status of O-1?"], case, tools=[query_order], raise_on_failure=False
    )
    assert first.verdict == "FAIL" and first.memo_hits == 0 and first.runs < 40
    again = agentprop.check(
        flaky, ["status of O-1?"], case, tools=[query_order], raise_on_failure=False
    )
    assert again.model_dump(exclude={"memo_hits"}) == first.model_dump(exclude={"memo_hits"})
    assert again.memo_hits == again.runs
    # a correct agent passes, and the raised violation carries the result
    with pytest.raises(AgentPropertyViolation) as info:
        agentprop.check(flaky, ["status of O-1?"], case, tools=[query_order])
    assert info.value.result.verdict == "FAIL"
    assert any(r.result is first for r in fresh_session.results)


def test_judge_keyword_and_judge_as_property() -> None:
    def agent(messages: list[str]) -> dict[str, str]:
        return {"status": "paid" if "O-1" in messages[0] else "lost"}

    def judge(case: Case, result: Result) -> bool:
        return bool(result.output["status"] == "paid")

    assert agentprop.check(agent, ["O-1"], judge=judge).passed
    assert not agentprop.check(agent, ["O-2"], judge, raise_on_failure=False).passed
    assert agentprop.check(agent, ["O-1"], Case(name="paid"), judge=judge).name == "paid"


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((lambda m: None, ["hi"]), {}, "needs something to check"),
        (
            (lambda m: None, [1]),
            {"judge": lambda c, r: True},
            "messages must be a string or a list of strings",
        ),
        ((3, ["hi"], lambda t: True), {}, "the agent must be callable"),
        (
            (lambda m: None, ["hi"], lambda t: True),
            {"judge": lambda c, r: True},
            "judge= goes with a Case",
        ),
    ],
)
def test_bad_arguments_name_the_fix(
    args: tuple[Any, ...], kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        agentprop.check(*args, **kwargs)


# --------------------------------------------------------------------------------- Hypothesis


def picky(messages: list[str], tools: Tools, rng: random.Random) -> dict[str, str]:
    """Fails half the time on a message that does not start with a question word."""
    text = messages[-1]
    if not text.lower().startswith(("what", "where")) and rng.random() < 0.5:
        return {"status": "unknown"}
    return {"status": tools.query_order(order_id="O-1")["status"]}


def test_given_finds_and_shrinks_a_phrasing_bug_without_flaky() -> None:
    from agentprop import strategies as aps

    @seed(1)
    @settings(max_examples=30, database=None, deadline=None)
    @given(msg=aps.paraphrases("What is the status of order O-1234?"))
    def test_status(msg: str) -> None:
        agentprop.check(picky, [msg], Case(expected_tools=["query_order"]), tools=[query_order])

    # not FlakyFailure: every replay is memoised
    with pytest.raises(AgentPropertyViolation) as info:
        test_status()
    shrunk = info.value.result.sample_traces
    assert shrunk and "requires_tools" in info.value.result.failures[0].signature
    failing = Trace.from_json(shrunk[0]).turns[0].user_message
    assert not failing.lower().startswith(("what", "where"))


def test_inside_given_the_failure_rate_is_targeted_and_the_rule_is_an_event() -> None:
    observed: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def agent(messages: list[str], rng: random.Random) -> dict[str, str]:
        return {"status": "paid" if rng.random() < 0.95 else "lost"}

    @settings(max_examples=2, database=None, deadline=None)
    @given(st.sampled_from(["a", "b"]))
    def test_it(msg: str) -> None:
        agentprop.check(
            agent,
            [msg],
            judge=lambda c, r: r.output["status"] == "paid",
            settings=agentprop.settings(mode="fixed", runs=20, tau=0.5),
        )
        data = current_build_context().data
        observed.append((dict(data.target_observations), dict(data.events)))

    test_it()
    targets, events = observed[0]
    assert (
        set(targets) == {"agentprop failure rate: agent"}
        and 0.0 <= next(iter(targets.values())) <= 0.2
    )
    assert "fixed -> PASS by fixed" in events["agentprop rule"]


# ------------------------------------------------------------------------------ docs, example

ROOT = Path(__file__).resolve().parents[1]


def test_the_first_docs_page_shows_the_file_it_runs() -> None:
    page = (ROOT / "docs" / "testing-the-agent-you-have.md").read_text(encoding="utf-8")
    shown = [
        line
        for block in re.findall(r"^```python\n(.*?)^```", page, re.M | re.S)
        for line in block.splitlines()
        if line.strip()
    ]
    source = set(
        (ROOT / "docs" / "examples" / "first-agent" / "test_orders.py")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    assert len(shown) > 30 and [line for line in shown if line not in source] == []


def test_the_plain_example_passes() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "examples/plain_agent"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "2 checks, 2 passed" in proc.stdout
    # the plain agent's approved snapshot, through the fixture
    assert "1 snapshots: 1 match" in proc.stdout


# ------------------------------------------------------- shrinking, corpus (the plugin's machinery)


def starts_oddly(messages: list[str], tools: Tools, rng: random.Random) -> dict[str, str]:
    """Fails half the time on a message that does not start with "What"; records what it saw."""
    text = messages[-1]
    SEEN.append(text)
    if not text.startswith("What") and (BUGGY and rng.random() < 0.5):
        return {"status": "unknown"}
    return {"status": tools.query_order(order_id="O-1234")["status"]}


SEEN: list[str] = []
BUGGY = True


def failing_check(msg: str) -> AgentPropertyViolation:
    with pytest.raises(AgentPropertyViolation) as info:
        agentprop.check(
            starts_oddly,
            [msg],
            Case(name="status", expected_tools=["query_order"]),
            tools=[query_order],
            settings=agentprop.settings(seed=3),
        )
    return info.value


def test_a_spec_free_failure_is_shrunk_over_its_drawn_steps_keeping_the_slots(
    fresh_session: Session,
) -> None:
    from agentprop._decide.plain import PlainContext
    from agentprop._decide.plain_shrink import shrink_plain
    from agentprop.phrases import apply_transforms

    # three drawn steps; only the greeting (the text no longer starts with "What") makes it fail
    steps = [("politeness", {"choice": 0}), ("greeting", {"choice": 0}), ("closing", {"choice": 0})]
    msg = apply_transforms("What is the status of order O-1234?", steps)
    assert len(msg.transforms) == 3 and "O-1234" in msg
    exc = failing_check(msg)
    assert isinstance(exc.context, PlainContext)
    SEEN.clear()
    report = shrink_plain(exc.context, exc.result, budget=200, memo=fresh_session.memo)
    assert report.original_units == 3 and report.kept_units == 1 and report.minimal
    assert report.choices_kept == "turn 1: greeting(choice=0)"
    assert report.reproducer_messages == ["Hi, what is the status of order O-1234?"]
    assert (
        report.confirmed
        and report.reproducer_rate is not None
        and report.reproducer_rate.runs >= 30
    )
    # every candidate kept the protected slot
    assert SEEN and all("O-1234" in text for text in SEEN)


def corpus_cli(*argv: str) -> tuple[int, str]:
    import io

    from agentprop._cli import main

    out = io.StringIO()
    return main(["corpus", *argv], out=out, err=out), out.getvalue()


def test_a_shrunk_spec_free_failure_is_saved_and_replayed_first_by_the_next_check(
    tmp_path: Path,
) -> None:
    global BUGGY
    from agentprop._decide.corpus import Corpus
    from agentprop._pipeline.pytest_shrink import shrink_violation
    from agentprop.phrases import apply_transforms

    corpus = Corpus(tmp_path / "corpus")
    drawn = apply_transforms(
        "What is the status of order O-1234?",
        [("greeting", {"choice": 0}), ("closing", {"choice": 0})],
    )
    with Session(corpus=corpus).activate() as first:
        text = shrink_violation(failing_check(drawn), session=first, budget=200, test="t")
    assert (
        text is not None
        and "saved as corpus entry" in text
        and "turn 1: 'Hi, what is the status of order O-1234?'" in text
    )
    (entry,) = corpus.entries(spec_id="plain")
    assert (
        entry.scenario.messages == ["Hi, what is the status of order O-1234?"] and entry.confirmed
    )
    # the corpus commands know it has no spec: no regression test is written
    # from one, prune keeps it
    code, out = corpus_cli("show", entry.id, "--pytest", "--dir", str(corpus.root))
    assert code == 2 and "spec-free check's" in out and "replays it first" in out
    code, out = corpus_cli("prune", "--dir", str(corpus.root), "--yes")
    assert (
        code == 0
        and f"kept {entry.id}: a spec-free check's entry" in out
        and corpus.entries(spec_id="plain") == [entry]
    )

    # the next session: Hypothesis draws the unchanged original, which never fails by itself; the
    # entry is replayed first, every time (memoised: the same verdict each call, never Flaky)
    with Session(corpus=corpus).activate():
        again = [failing_check("What is the status of order O-1234?") for _ in range(2)]
    assert [e.result.name for e in again] == [f"corpus {entry.id} (status)"] * 2
    assert again[0].result.verdict == again[1].result.verdict != "PASS"
    assert any("regression: corpus entry" in note for note in getattr(again[0], "__notes__", []))

    BUGGY = False  # the bug fixed: the replay passes, and enough clean runs retire the entry
    try:
        with Session(corpus=corpus).activate():
            agentprop.check(
                starts_oddly,
                ["What is the status of order O-1234?"],
                Case(name="status", expected_tools=["query_order"]),
                tools=[query_order],
                settings=agentprop.settings(seed=3),
            )
    finally:
        BUGGY = True
    assert corpus.entries(spec_id="plain") == [] and [
        e.id for e in corpus.entries(retired=True)
    ] == [entry.id]


# ------------------------------------------------------------------------------------ snapshots


def cancel_order(order_id: str) -> dict[str, str]:
    return {"order_id": order_id, "status": "cancelled"}


def careful(messages: list[str], tools: Tools, rng: random.Random) -> dict[str, str]:
    """Looks the order up; with CANCELS set it also cancels it most of the time."""
    status = tools.query_order(order_id="O-1234")["status"]
    if CANCELS and rng.random() < 0.8:
        status = tools.cancel_order(order_id="O-1234")["status"]
    return {"status": status}


CANCELS = False


def test_a_plain_agents_snapshot_is_reviewed_and_approved_with_a_reason(tmp_path: Path) -> None:
    global CANCELS
    import io

    from agentprop._cli import main

    store = tmp_path / "__snapshots__"

    def snapshot(**kwargs: Any) -> Any:
        return agentprop.check_snapshot(
            careful,
            ["What is the status of order O-1234?"],
            tools=[query_order, cancel_order],
            directory=store,
            runs=12,
            **kwargs,
        )

    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        return main(list(argv), out=out, err=out), out.getvalue()

    with pytest.raises(AgentPropertyViolation, match="NEW"):  # nothing is recorded silently
        snapshot()
    assert (store / "careful.pending.json").is_file() and not (store / "careful.json").exists()
    code, out = cli("snapshot", "approve", str(store), "careful")
    assert code != 0 and "reason" in out  # approval needs a reason
    code, out = cli(
        "snapshot",
        "approve",
        str(store),
        "careful",
        "--reason",
        "looks the order up and answers, never cancels",
    )
    assert code == 0 and "approved careful" in out, out
    assert snapshot().verdict == "MATCH"

    CANCELS = True  # the agent now cancels most of the time: a changed behaviour
    try:
        with pytest.raises(AgentPropertyViolation) as info:
            snapshot()
    finally:
        CANCELS = False
    result = info.value.result
    assert result.verdict == "CHANGED" and any(
        "cancel_order" in line for c in result.changes for line in c.diff
    )
    code, out = cli("snapshot", "review", str(store))
    assert code == 0 and "careful" in out and "cancel_order" in out
    # a plain agent's answer stands where a decision would
    assert '-> {"status": "cancelled"}' in out
