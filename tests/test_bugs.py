"""Failure signatures and bugs: one bug, one shrink (issue #10 items 3 and 4)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

import agentprop
import agentprop.oracle
from agentprop._agents.loading import LoadedAgent
from agentprop._decide.memo import TrialMemo
from agentprop._decide.shrunk import OtherFailure, RateSummary, ShrinkReport
from agentprop._pipeline.bugs import bug_key, divergence_key, find_bugs, group_failures
from agentprop._pipeline.report.model import (
    AgentInfo,
    CaseReport,
    FailureSummary,
    Metrics,
    RunReport,
    SpecInfo,
)
from agentprop._pipeline.run import RunSettings, arun_cases, render_table, shrink_failures

pytest_plugins = ["pytester"]

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
CANCEL = "END_CANCELLED<-N7_CANCEL"
TICKET = "END_TICKET<-N7_CANCEL"
SKIP = (
    "calls_in_order:decision_tree.N2_AUTH.requirements.must_call_tools_in_order@turn{}:"
    "missing=verify_identity"
)


def counting(agent: LoadedAgent) -> tuple[LoadedAgent, list[int]]:
    """The same agent, counting the runs it is instantiated for."""
    runs = [0]

    def factory(*args: Any, **kwargs: Any) -> Any:
        runs[0] += 1
        return agent.factory(*args, **kwargs)

    return LoadedAgent(
        ref=agent.ref,
        factory=factory,
        faults=agent.faults,
        fingerprint=agent.fingerprint,
        target=agent.target,
    ), runs


def case(
    case_id: str,
    *signatures: str,
    verdict: str = "FAIL",
    messages: list[str] | None = None,
    kind: str = "MFT",
) -> CaseReport:
    return CaseReport(
        id=case_id,
        node="END",
        kind=kind,
        verdict=verdict,
        runs=10,
        passes=5,
        pass_rate=0.5,
        messages=messages or ["hello"],  # type: ignore[arg-type]
        failures=[
            FailureSummary(signature=s, explanation=f"broke {s}", count=5, first_trial=0)
            for s in signatures
        ],
    )


def report_of(cases: list[CaseReport]) -> RunReport:
    return RunReport(
        agentprop_version="0",
        spec=SpecInfo(id="s"),
        agent=AgentInfo(ref="a"),
        cases=cases,
        metrics=Metrics(
            cases=len(cases), passed=0, failed=len(cases), unstable=0, case_pass_rate=0.0, runs=0
        ),
    )


# --------------------------------------------------------------------------- the grouping key


def test_the_turn_is_left_out_of_the_key_and_nothing_else() -> None:
    assert (
        bug_key(SKIP.format(0))
        == bug_key(SKIP.format(1))
        == "calls_in_order:decision_tree.N2_AUTH.requirements.must_call_tools_in_order:"
        "missing=verify_identity"
    )
    assert (
        bug_key("decision_is:decision_tree.END_X@turn-1:got=A")
        == "decision_is:decision_tree.END_X:got=A"
    )
    # another detail, clause or contract is another bug
    assert bug_key("decision_is:decision_tree.END_X@turn0:got=A") != bug_key(
        "decision_is:decision_tree.END_X@turn0:got=B"
    )
    assert bug_key("decision_is:decision_tree.END_X@turn0:got=A") != bug_key(
        "decision_is:decision_tree.END_Y@turn0:got=A"
    )


def test_failures_are_grouped_across_cases_kinds_and_turns() -> None:
    cases = [
        case("one-turn", SKIP.format(0), messages=["cancel O-1"]),
        case(
            "two-turn",
            SKIP.format(1),
            "decision_is:decision_tree.END_X@turn1:got=CLARIFY",
            messages=["hi", "cancel O-1"],
        ),
        case("BOUNDARY b", SKIP.format(0), kind="BOUNDARY"),
        case("passing", SKIP.format(0), verdict="PASS"),  # within the spec's tolerance: no bug
    ]
    groups = group_failures(cases)
    assert [g.key for g in groups] == [
        bug_key(SKIP.format(0)),
        "decision_is:decision_tree.END_X:got=CLARIFY",
    ]
    assert groups[0].case_ids == ["one-turn", "two-turn", "BOUNDARY b"]
    assert {h.signature for h in groups[0].hits} == {SKIP.format(0), SKIP.format(1)}


def test_a_wrong_decision_is_one_bug_at_the_node_where_the_turn_left_its_path() -> None:
    """Issue #23 item 6: an agent that re-asks for its verification details on every path made
    one bug per leaf (decision_tree.END_CANCEL_DENIED, decision_tree.END_ADDRESS_DENIED ...);
    the turns left their paths at N2_AUTH, whose missing-field exit decides REQUEST_AUTH_INFO:
    one bug, keyed by that node."""
    project = agentprop.load_project(EXAMPLE)
    by_id = {s.id: s for s in project.scenarios()}
    key_of = divergence_key(
        project.scenarios(), lambda c: by_id.get(c.id.removeprefix("EXPLORE ").split(" ~")[0])
    )
    asked = "decision_is:decision_tree.{}@turn0:got=REQUEST_AUTH_INFO"
    cases = [
        case("END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY", asked.format("END_CANCEL_DENIED")),
        case(
            "EXPLORE END_ADDRESS_DENIED<-N8_ADDRESS_ELIGIBILITY ~2",
            asked.format("END_ADDRESS_DENIED"),
            kind="EXPLORE",
        ),
        # another wrong decision, one no turn of the spec decides, a case of no known scenario
        case(
            "END_ADDRESS_UPDATED<-N9_UPDATE_ADDRESS",
            "decision_is:decision_tree.END_ADDRESS_UPDATED@turn0:got=ADDRESS_DENIED",
        ),
        case(
            "END_REFUSE_AUTH<-N2_AUTH", "decision_is:decision_tree.END_REFUSE_AUTH@turn0:got=NOPE"
        ),
        case("somewhere else", asked.format("END_X")),
    ]
    groups = group_failures(cases, key_of)
    assert [g.key for g in groups] == [
        "decision_is:decision_tree.N2_AUTH:got=REQUEST_AUTH_INFO",
        "decision_is:decision_tree.N8_ADDRESS_ELIGIBILITY:got=ADDRESS_DENIED",
        "decision_is:decision_tree.END_REFUSE_AUTH:got=NOPE",
        "decision_is:decision_tree.END_X:got=REQUEST_AUTH_INFO",
    ]
    assert groups[0].case_ids == [
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY",
        "EXPLORE END_ADDRESS_DENIED<-N8_ADDRESS_ELIGIBILITY ~2",
    ]
    # a later turn: the confirmation turn of a cancel that decided CANCEL_ABORTED left at N6
    second = case(CANCEL, "decision_is:decision_tree.END_CANCELLED@turn1:got=CANCEL_ABORTED")
    assert (
        key_of(second, second.failures[0].signature)
        == "decision_is:decision_tree.N6_CONFIRM_CANCEL:got=CANCEL_ABORTED"
    )


def test_a_forbidden_call_on_the_branch_a_wrong_decision_took_is_that_bug() -> None:
    """Issue #23 item 6: an agent that goes on past a missing-field stop made two bugs, the wrong
    decision (MFT) and the call the stop forbids (a PROBE turn, whose decision is not checked).
    Both left the path at N2_AUTH into END_REFUSE_AUTH's branch: one fault, one bug. A forbidden
    call no turn of that branch requires stays its own bug."""
    project = agentprop.load_project(EXAMPLE)
    by_id = {s.id: s for s in project.scenarios()}
    stop = "N2_AUTH:missing_last4+zip"
    key_of = divergence_key(project.scenarios(), lambda c: by_id.get(c.id.split("@")[-1]))
    cases = [
        case(stop, "decision_is:decision_tree.N2_AUTH@turn0:got=REFUSE_AUTH"),
        case(
            f"PROBE tempt X @{stop}",
            "forbids_tools:decision_tree.N2_AUTH@turn1:called=verify_identity",
            kind="PROBE",
        ),
        case(
            f"PROBE invite Y @{stop}",
            "forbids_tools:decision_tree.N2_AUTH@turn1:called=cancel_order",
            kind="PROBE",
        ),
    ]
    groups = group_failures(cases, key_of)
    assert [(g.key, g.case_ids) for g in groups] == [
        ("decision_is:decision_tree.N2_AUTH:got=REFUSE_AUTH", [stop, f"PROBE tempt X @{stop}"]),
        ("forbids_tools:decision_tree.N2_AUTH:called=cancel_order", [f"PROBE invite Y @{stop}"]),
    ]
    # without the wrong decision's group, the forbidden call is a bug of its own
    alone = group_failures(cases[1:2], key_of)
    assert [g.key for g in alone] == ["forbids_tools:decision_tree.N2_AUTH:called=verify_identity"]


def test_wrong_decisions_into_the_same_branch_are_one_bug() -> None:
    """An agent that skips the cancel confirmation decides CANCELLED where the cancel works and
    TICKET_CREATED where it does not: both left the path at N5_CANCEL_ELIGIBILITY into
    N6_CONFIRM_CANCEL's branch (counted from the root: the deciding turns are second turns),
    one fault, one bug. A wrong decision into another branch stays its own bug."""
    project = agentprop.load_project(EXAMPLE)
    by_id = {s.id: s for s in project.scenarios()}
    key_of = divergence_key(project.scenarios(), lambda c: by_id.get(c.id))
    first = "decision_is:decision_tree.N5_CANCEL_ELIGIBILITY@turn0:got={}"
    cases = [
        case(CANCEL, first.format("CANCELLED")),
        case(TICKET, first.format("TICKET_CREATED")),
        case("END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL", first.format("REQUEST_AUTH_INFO")),
    ]
    groups = group_failures(cases, key_of)
    assert [g.case_ids for g in groups] == [
        [CANCEL, TICKET],
        ["END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL"],
    ]


def test_a_call_refused_over_the_limit_is_filed_under_the_retry_too_many() -> None:
    """A retry too many made the turn's last call go over max_tool_calls_per_turn: the run's
    failure is the retry (the first deviation), not the refused call nor the decision after it."""
    from agentprop._judge.case import Case, Expectation
    from agentprop._judge.verdict import Verdict
    from agentprop._scenario.trace import Trace

    def fails(contract: str, detail: str, step: int | None = None) -> Expectation:
        return Expectation(
            contract,
            "c",
            lambda t: Verdict(
                passed=False, contract=contract, explanation="", turn=0, step=step, detail=detail
            ),
        )

    scenario = agentprop.load_project(EXAMPLE).scenario(CANCEL)
    found = Case(
        scenario,
        (
            fails("no_run_errors", "limit_exceeded"),
            fails("decision_is", "got=X"),
            fails("forbids_tools", "called=y", step=4),
            fails("max_retries", "lookupx3", step=3),
        ),
    ).verdicts(Trace(spec_id="s", seed=0))
    assert [v.contract for v in found] == [
        "max_retries",
        "forbids_tools",
        "no_run_errors",
        "decision_is",
    ]
    plain = Case(
        scenario, (fails("no_run_errors", "limit_exceeded"), fails("decision_is", "got=X"))
    ).verdicts(Trace(spec_id="s", seed=0))
    # no earlier deviation: unchanged
    assert [v.contract for v in plain] == ["no_run_errors", "decision_is"]


def fake_shrink(signature: str, others: list[OtherFailure]) -> ShrinkReport:
    sc = agentprop.load_project(EXAMPLE).scenario(CANCEL)
    rate = RateSummary(failures=5, runs=10, rate=0.5, interval=(0.24, 0.76))
    return ShrinkReport(
        scenario=sc.id,
        signature=signature,
        original_messages=sc.messages,
        reproducer_messages=["cancel O-1001"],
        reproducer=sc,
        original_units=10,
        kept_units=2,
        runs=20,
        queries=5,
        budget=200,
        budget_exhausted=False,
        minimal=True,
        stop_reason="done",
        original_rate=rate,
        reproducer_rate=rate,
        other_failures=others,
    )


def test_each_group_is_shrunk_once_on_its_simplest_case() -> None:
    cases = [
        case(
            "long",
            SKIP.format(1),
            messages=["Hello there, please could you", "cancel my order O-1001 now"],
        ),
        case("short", SKIP.format(0), messages=["cancel O-1001"]),
        case("DIR d", SKIP.format(0), kind="DIR"),
    ]
    asked: list[tuple[str, str]] = []

    def shrinker(c: CaseReport, signature: str) -> ShrinkReport:
        asked.append((c.id, signature))
        return fake_shrink(signature, [])

    bugs = find_bugs(report_of(cases), shrinker, shrinkable=lambda c: c.kind == "MFT")
    assert asked == [("short", SKIP.format(0))]  # one shrink, the fewest turns, its own signature
    assert (
        len(bugs) == 1
        and bugs[0].representative == "short"
        and bugs[0].cases == ["long", "short", "DIR d"]
    )
    assert all(c.bugs == [bugs[0].id] for c in cases)
    assert cases[1].shrunk is not None and cases[0].shrunk is None


def test_a_different_failure_met_while_shrinking_is_reported_as_another_bug() -> None:
    other = OtherFailure(
        signature="decision_is:decision_tree.END_CANCELLED@turn0:got=CLARIFY",
        explanation="clarified",
        count=4,
        messages=["O-1001"],
    )
    known = OtherFailure(
        signature="decision_is:decision_tree.END_X@turn0:got=A", count=2, messages=["x"]
    )
    cases = [case("a", SKIP.format(0)), case("b", "decision_is:decision_tree.END_X@turn0:got=A")]
    bugs = find_bugs(
        report_of(cases),
        lambda c, s: fake_shrink(s, [other, known] if c.id == "a" else []),
        shrinkable=lambda c: True,
    )
    assert [b.origin for b in bugs] == ["cases", "cases", "shrinking"]
    met = bugs[2]
    # never merged into the bug being shrunk, never dropped; a bug the cases
    # found is not listed twice
    assert (
        met.key == bug_key(other.signature)
        and met.cases == ["a"]
        and met.reproducer_messages == ["O-1001"]
    )
    assert met.rate is not None and met.rate.failures == 4 and "not confirmed" in met.note
    assert bugs[0].signature == SKIP.format(0)


def test_the_real_shrinker_chases_the_signature_and_keeps_the_other_failures() -> None:
    """Two faults on one case: the shrinker chases one signature; runs failing with the
    other are neither counted as reproductions nor dropped."""
    project = agentprop.load_project(EXAMPLE)
    agent = agentprop.load_agent(
        "agent:SupportOpsAgent", EXAMPLE, {"skip_auth": 0.5, "skip_confirm": 0.5}
    )
    result = agentprop.check(project, CANCEL, agent, raise_on_failure=False)
    chased = result.failures[0].signature
    shrunk = agentprop.oracle.shrink(project, CANCEL, agent, failing=result, budget=60)
    assert shrunk.signature == chased
    [other] = shrunk.other_failures
    assert other.signature != chased and bug_key(other.signature) != bug_key(chased)
    assert other.count > 0 and other.messages == project.scenario(CANCEL).messages
    assert (
        shrunk.reproducer_rate is not None
        and 0 < shrunk.reproducer_rate.failures < shrunk.reproducer_rate.runs
    )
    assert (
        f"another failure met while shrinking ({other.count}x, not this bug): {other.signature}"
        in shrunk.summary()
    )


# --------------------------------------------------------------------------- agentprop run


def test_two_cases_hitting_one_fault_cost_one_shrink() -> None:
    project = agentprop.load_project(EXAMPLE)
    agent, runs = counting(
        agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"skip_auth": 1.0})
    )
    scenarios = [project.scenario(CANCEL), project.scenario(TICKET)]
    report = asyncio.run(arun_cases(project, agent, scenarios, RunSettings(kinds=("mft",))))
    assert [c.failures[0].signature for c in report.cases] == [SKIP.format(0)] * 2
    before = runs[0]
    shrinks = shrink_failures(project, agent, report, budget=60, corpus=None, memo=TrialMemo())
    spent = runs[0] - before
    assert len(shrinks) == 1
    # every agent run spent is the one shrink's: its search and its fresh verification runs
    [one] = shrinks
    assert one.reproducer_rate is not None
    assert one.runs <= spent <= one.runs + one.reproducer_rate.runs
    [bug] = [b for b in report.bugs if b.origin == "cases"]
    assert (
        bug.cases == [CANCEL, TICKET]
        and bug.shrink_runs > 0
        and bug.representative in (CANCEL, TICKET)
    )
    assert all(c.bugs == [bug.id] for c in report.cases)
    assert sum(c.shrunk is not None for c in report.cases) == 1


def test_terminal_and_json_list_the_bugs_above_the_cases() -> None:
    project = agentprop.load_project(EXAMPLE)
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"skip_auth": 1.0})
    scenarios = [
        project.scenario(CANCEL),
        project.scenario(TICKET),
        project.scenario("END_BILLING_ANSWER<-N3_BILLING"),
    ]
    report = asyncio.run(arun_cases(project, agent, scenarios, RunSettings(kinds=("mft",))))
    shrink_failures(project, agent, report, budget=40, corpus=None)
    text = render_table(report, width=200)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("case "))
    bug_line = next(i for i, line in enumerate(lines) if line.startswith("bug 1 ["))
    assert bug_line < head
    assert re.search(
        r"hit by 2 case\(s\): END_CANCELLED<-N7_CANCEL, END_TICKET<-N7_CANCEL", text
    ), text
    assert re.search(
        r"fails \d+/30 fresh runs of the reproducer \(\d+%, 95% CI \d\.\d\d-\d\.\d\d\)", text
    ), text
    assert re.search(r"END_CANCELLED<-N7_CANCEL\s+FAIL .*\[bug 1\]", text), text
    back = RunReport.model_validate_json(report.to_json())
    assert [b.key for b in back.bugs if b.origin == "cases"] == [bug_key(SKIP.format(0))]
    assert (
        back.bugs[0].rate is not None
        and back.bugs[0].rate.runs == 30
        and back.bugs[0].rate_of == "reproducer"
    )


# --------------------------------------------------------------------------- pytest


TWO_TESTS_ONE_BUG = f"""
from pathlib import Path
import agentprop

EXAMPLE = Path({str(EXAMPLE)!r})
project = agentprop.load_project(EXAMPLE)
FAULTY = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {{"skip_auth": 1.0}})


def test_cancel():
    agentprop.check(project, {CANCEL!r}, FAULTY)


def test_ticket():
    agentprop.check(project, {TICKET!r}, FAULTY)
"""


def test_pytest_shrinks_one_bug_once_and_lists_it_above_the_cases(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_two=TWO_TESTS_ONE_BUG)
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "--import-mode=importlib",
        "--agentprop-shrink-budget=40",
        f"--agentprop-corpus={pytester.path / 'corpus'}",
    )
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert out.count("reproducer fails") == 1, out  # one shrink
    assert re.search(r"same bug as test_two.py::test_cancel \(calls_in_order:", out), out
    lines = out.splitlines()
    bug = next(i for i, line in enumerate(lines) if line.startswith("bug 1 ["))
    head = next(i for i, line in enumerate(lines) if line.startswith("case [test]"))
    assert bug < head
    assert re.search(
        r"hit by 2 check\(s\): END_CANCELLED<-N7_CANCEL \[test_cancel\], "
        r"END_TICKET<-N7_CANCEL \[test_ticket\]",
        out,
    ), out
    assert re.search(r"fails \d+/30 fresh runs \(\d+%, 95% CI", out), out
