"""Distinct causes behind one signature are distinct bugs (issue #24: masked faults).

Seeded simulated agents whose true causes are known: two causes behind one clause are two bugs,
each with its own reproducer; one cause met through many families stays one bug.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop._agents.project import Project
from agentprop._decide.choices import Choices
from agentprop._decide.corpus import Corpus
from agentprop._decide.shrunk import RateSummary, ShrinkReport
from agentprop._pipeline.bugs import Cause, Hit, distinct_causes, kept_families
from agentprop._pipeline.report.model import CaseReport, RunReport
from agentprop._pipeline.run import RunSettings, arun_cases, render_bugs, shrink_failures
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
SCENARIO = "END_CANCELLED<-N7_CANCEL"
SKIP_AUTH = (
    "calls_in_order:decision_tree.N2_AUTH.requirements.must_call_tools_in_order:"
    "missing=verify_identity"
)
CJK = re.compile(r"[\u4e00-\u9fff]")
IMPATIENT = re.compile(r"\b(now|asap|immediately|right away|hurry|quick(ly)?)\b|!", re.I)
"""The reference agent's impatience trigger (``examples/supportops/agent.py``)."""


def _agent_class(*, chinese_refetches: bool) -> type:
    """The reference agent with a second cause of the skipped verification: any Chinese
    character in the message. ``chinese_refetches``: that cause lives in other code (it fetches
    the account again before the plan rules), so the agent does something else when it fails."""
    sys.path.insert(0, str(EXAMPLE))
    from agent import SupportOpsAgent

    class ChineseSkipsAuth(SupportOpsAgent):  # type: ignore[misc, valid-type]
        chinese = False

        def turn(self, message: str, ctx: Any) -> None:
            self.chinese = CJK.search(message) is not None
            super().turn(message, ctx)

        def _call(self, ctx: Any, tool: str, **args: Any) -> Any:
            if chinese_refetches and self.chinese and tool == "get_plan_rules":
                super()._call(ctx, "get_account", account_id=ctx.context["account_id"])
            return super()._call(ctx, tool, **args)

        def _fault(self, name: str, ctx: Any) -> bool:
            if name == "skip_auth" and self.chinese:
                return True
            return bool(super()._fault(name, ctx))

    return ChineseSkipsAuth


def _run(
    project: Project, agent: Any, corpus: Corpus | None = None, seed: int = 0
) -> tuple[RunReport, list[ShrinkReport]]:
    settings = RunSettings(kinds=("explore",), seed=seed, explore=24)
    report = asyncio.run(
        arun_cases(
            project,
            agent,
            [project.scenario(SCENARIO)],
            settings,
            memo=TrialMemo(),
            corpus=corpus,
        )
    )
    shrinks = shrink_failures(project, agent, report, budget=60, corpus=corpus, seed=0)
    return report, shrinks


def _found(report: RunReport) -> list[Any]:
    return [b for b in report.bugs if b.origin == "cases"]


@pytest.fixture(scope="module")
def project() -> Project:
    return agentprop.load_project(EXAMPLE)


def test_two_causes_behind_one_clause_are_two_bugs_each_with_its_reproducer(
    project: Project, tmp_path: Path
) -> None:
    """Hurried words (the knob: "asap", "now", "!") and Chinese text (other code) both skip the
    verification: one signature. On the old code only the simplest failing input (a hurried
    one) was shrunk, so the Chinese cause was never named."""
    agent = make_factory(_agent_class(chinese_refetches=True), {"skip_auth_impatient": 1.0})
    corpus = Corpus(tmp_path / "corpus")
    report, _ = _run(project, agent, corpus)
    bugs = _found(report)
    assert len(bugs) == 2 and {b.signature for b in bugs} == {bugs[0].signature}
    [chinese] = [b for b in bugs if b.cause == ["codeswitch"]]
    [hurried] = [b for b in bugs if b is not chinese]
    # the hurried cause is named by the family whose words carried the trigger
    assert hurried.cause and hurried.key == f"{SKIP_AUTH} [cause: {hurried.cause[0]}]"
    assert not CJK.search(" ".join(hurried.reproducer_messages))
    assert IMPATIENT.search(hurried.reproducer_messages[0])
    assert CJK.search(chinese.reproducer_messages[0])
    assert not IMPATIENT.search(chinese.reproducer_messages[0])
    assert hurried.minimal and chinese.minimal and hurried.confirmed and chinese.confirmed
    # every failing case is under one of them, the Chinese ones under the Chinese cause
    cases = {c.id: c for c in report.cases}
    assert set(hurried.cases).isdisjoint(chinese.cases)
    # (a Chinese message that is hurried too meets both causes; the agent's refetch names it)
    assert all(CJK.search(" ".join(cases[c].messages)) for c in chinese.cases)
    assert not any(CJK.search(" ".join(cases[c].messages)) for c in hurried.cases)
    assert "one of 2 causes" in chinese.note and hurried.cause[0] in chinese.note
    number = bugs.index(chinese) + 1
    assert f"bug {number} [{chinese.id}]  {SKIP_AUTH} [cause: codeswitch]" in render_bugs(report)
    # the corpus keeps one entry per cause; the next run replays both and keeps them apart
    entries = corpus.entries()
    assert sorted(tuple(e.cause) for e in entries) == sorted(
        [("codeswitch",), tuple(hurried.cause)]
    )
    again, shrinks = _run(project, agent, corpus)
    assert [b.id for b in _found(again)] == [b.id for b in bugs]
    assert all(b.known for b in _found(again)) and not shrinks


def test_one_cause_met_through_many_families_is_one_bug(project: Project) -> None:
    """Chinese text arrives through a Chinese template, a code-switched phrase or a traditional
    character; the agent does the same thing each time: one bug, shrunk once."""
    agent = make_factory(_agent_class(chinese_refetches=False))
    report, shrinks = _run(project, agent)
    failing = [c for c in report.cases if c.verdict in ("FAIL", "UNSTABLE")]
    families = {f for c in failing for f in c.details["families"]}
    assert {"template", "turn1:codeswitch"} <= families  # the cause came through several
    [bug] = _found(report)
    assert bug.key == SKIP_AUTH and bug.cause == [] and len(shrinks) == 1
    assert len(bug.cases) == len(failing)


def test_one_family_behind_inputs_of_many_families_is_one_bug(project: Project) -> None:
    """Every failing input holds the hurried words, among many other families: one bug, and no
    second shrink (every input is explained by the first reproducer)."""
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"skip_auth_impatient": 1.0})
    report, shrinks = _run(project, agent)
    failing = [c for c in report.cases if c.verdict in ("FAIL", "UNSTABLE")]
    assert len({frozenset(c.details["families"]) for c in failing}) == len(failing) > 1
    [bug] = _found(report)
    assert bug.key == SKIP_AUTH and len(shrinks) == 1


# ----------------------------------------------------------------------------- the rule alone


def _shrunk(
    families: list[str] | None, behaviour: list[str], *, fails: bool = True
) -> ShrinkReport:
    scenario = agentprop.load_project(EXAMPLE).scenario(SCENARIO)
    choices = (
        None
        if families is None
        else Choices.model_validate(
            {"turns": [{"steps": [[f, [["choice", 0]]] for f in families]}, {}]}
        )
    )
    rate = RateSummary(
        failures=5 if fails else 0, runs=5, rate=1.0 if fails else 0.0, interval=(0, 1)
    )
    return ShrinkReport(
        scenario=scenario.id,
        signature=SKIP_AUTH,
        original_messages=scenario.messages,
        reproducer_messages=scenario.messages,
        reproducer=scenario,
        original_units=3,
        kept_units=1,
        runs=10,
        queries=2,
        budget=60,
        budget_exhausted=False,
        minimal=True,
        stop_reason="done",
        original_rate=rate,
        reproducer_rate=rate,
        reproducer_choices=choices.model_dump(mode="json") if choices is not None else None,
        behaviour=behaviour,
    )


def _hit(case_id: str, families: list[str]) -> Hit:
    case = CaseReport(
        id=case_id,
        node="END_CANCELLED",
        path=[],
        kind="EXPLORE",
        messages=["x"],
        verdict="FAIL",
        runs=1,
        passes=0,
        pass_rate=0.0,
        interval=(0.0, 1.0),
        details={"families": families, "base": SCENARIO},
    )
    return Hit(case, SKIP_AUTH, 1, "")


@pytest.mark.parametrize(
    ("second", "behaviour", "fails", "split"),
    [
        (["codeswitch"], ["b"], True, True),  # disjoint families, other behaviour: two causes
        (["codeswitch"], ["a"], True, False),  # the agent did the same thing: one cause
        (["urgency"], ["b"], True, False),  # a family the first needs: not another cause
        (["codeswitch"], ["b"], False, False),  # not reconfirmed: no split on it
        (None, ["b"], True, False),  # the scenario's own input fails: one cause may be all
    ],
)
def test_a_group_splits_only_on_reconfirmed_disjoint_differently_behaving_reproducers(
    second: list[str] | None, behaviour: list[str], fails: bool, split: bool
) -> None:
    first = _hit("a", ["turn1:urgency", "turn1:typo"])
    other = _hit("b", ["turn1:codeswitch", "turn1:typo"])
    asked: list[str] = []

    def shrink(hit: Hit) -> ShrinkReport:
        asked.append(hit.case.id)
        return _shrunk(second, behaviour, fails=fails)

    causes, spent = distinct_causes(
        [first, other], Cause(first, _shrunk(["urgency"], ["a"]), frozenset({"urgency"})), shrink
    )
    assert asked == ["b"] and len(spent) == 1
    assert len(causes) == (2 if split else 1)


def test_an_input_explained_by_the_first_reproducer_is_not_shrunk_again() -> None:
    first = _hit("a", ["turn1:urgency"])
    later = [_hit("b", ["turn2:urgency", "turn1:typo"]), _hit("c", ["template", "turn1:urgency"])]
    causes, spent = distinct_causes(
        [first, *later],
        Cause(first, _shrunk(["urgency"], ["a"]), frozenset({"urgency"})),
        lambda h: pytest.fail(f"shrank {h.case.id}"),
    )
    assert len(causes) == 1 and spent == []


def test_a_merge_keeps_the_causes_a_shard_split_a_signature_into() -> None:
    """Merging shards groups the cases again by signature; the causes a shard split it into
    stay separate bugs (the shards' ids and shrinks), each merged case under its own."""
    from types import SimpleNamespace

    from agentprop._pipeline.merge_report import _split_as_shards
    from agentprop._pipeline.report.model import BugReport, FailureSummary

    def failing(case_id: str) -> CaseReport:
        case = _hit(case_id, []).case
        case.failures = [
            FailureSummary(signature=SKIP_AUTH + "@turn0", explanation="", count=1, first_trial=0)
        ]
        case.bugs = ["merged"]
        return case

    cases = [failing(c) for c in ("a", "b", "c")]
    merged = BugReport(
        id="merged",
        key=SKIP_AUTH,
        signature=SKIP_AUTH + "@turn0",
        signatures=[SKIP_AUTH + "@turn0"],
        cases=["a", "b", "c"],
    )
    parts = [
        BugReport(
            id=f"id-{cause}",
            key=f"{SKIP_AUTH} [cause: {cause}]",
            signature=SKIP_AUTH + "@turn0",
            cases=cases_of,
            cause=[cause],
            representative=cases_of[0],
            shrink_runs=40,
        )
        for cause, cases_of in (("urgency", ["a"]), ("codeswitch", ["b"]))
    ]
    shard = SimpleNamespace(report=SimpleNamespace(bugs=parts, cases=cases))
    out = _split_as_shards([merged], cases, [shard])  # type: ignore[list-item]
    assert [(b.id, b.cases) for b in out] == [("id-urgency", ["a", "c"]), ("id-codeswitch", ["b"])]
    assert [c.bugs for c in cases] == [["id-urgency"], ["id-codeswitch"], ["id-urgency"]]
    assert all(b.signatures == [SKIP_AUTH + "@turn0"] for b in out)
    # a signature no shard split is left as it was
    assert _split_as_shards([merged], cases, []) == [merged]


def test_what_follows_the_failing_turn_does_not_tell_causes_apart() -> None:
    """One hurried request on the cancel path and on the path where the cancellation then fails
    (a ticket on turn 2) failed alike on turn 1: the same behaviour, one cause."""
    from agentprop._decide.shrink import behaviour_of
    from agentprop._scenario.trace import ToolCall, Trace, Turn

    def trace(second: list[str]) -> Trace:
        calls = [ToolCall(name=n) for n in ("get_account", "get_plan_rules")]
        return Trace(
            turns=[
                Turn(index=0, user_message="a", tool_calls=calls, response={"decision": "ASK"}),
                Turn(
                    index=1,
                    user_message="b",
                    tool_calls=[ToolCall(name=n, turn_index=1) for n in second],
                    response={"decision": "DONE"},
                ),
            ]
        )

    cancelled, ticket = trace(["cancel_order"]), trace(["cancel_order", "create_ticket"])
    assert behaviour_of(cancelled, 0) == behaviour_of(ticket, 0)
    assert behaviour_of(cancelled) != behaviour_of(ticket)
    assert behaviour_of(cancelled, -1) == behaviour_of(cancelled)


def test_an_input_of_another_scenario_names_no_other_cause() -> None:
    """On another scenario the agent does other things whatever the cause (the pack zoo's
    hurried wording split into three bugs over one path without and with a tool timing out
    and retried): not shrunk, not split."""
    first = _hit("a", ["turn1:urgency"])
    other = _hit("b", ["turn1:greeting"])
    other.case.details["base"] = "N5_CANCEL_ELIGIBILITY:missing_order_id/get_account:timeout+retry"
    causes, spent = distinct_causes(
        [first, other],
        Cause(first, _shrunk(["urgency"], ["a"]), frozenset({"urgency"})),
        lambda h: pytest.fail(f"shrank {h.case.id}"),
        lambda h: ["a"] if h is first else ["b"],
    )
    assert len(causes) == 1 and spent == []


def test_one_cause_on_two_paths_is_one_bug(project: Project) -> None:
    """The hurried-wording fault on the cancel and the address paths: one bug."""
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"skip_auth_impatient": 1.0})
    scenarios = [
        s
        for s in project.scenarios()
        if s.id in (SCENARIO, "END_ADDRESS_UPDATED<-N9_UPDATE_ADDRESS")
    ]
    assert len(scenarios) == 2
    settings = RunSettings(kinds=("explore",), seed=0, explore=24)
    report = asyncio.run(arun_cases(project, agent, scenarios, settings, memo=TrialMemo()))
    shrink_failures(project, agent, report, budget=60, corpus=None, seed=0)
    failing = [c for c in report.cases if c.verdict in ("FAIL", "UNSTABLE")]
    assert {c.node for c in failing} == {"END_CANCELLED", "END_ADDRESS_UPDATED"}
    [bug] = _found(report)
    assert bug.key == SKIP_AUTH and bug.cause == []


# ----------------------------------------------------------------------------- where a case goes

SIG = SKIP_AUTH.replace("must_call_tools_in_order:", "must_call_tools_in_order@turn0:")


def _failing(
    case_id: str, families: list[str], behaviour: str | None, **details: Any
) -> CaseReport:
    """An explored input failing with ``SIG``; ``behaviour``: the tool its failing run called
    (``None``: no run kept)."""
    from agentprop._pipeline.report.model import FailureSummary, RunTrace
    from agentprop._scenario.trace import ToolCall, Trace, Turn

    case = _hit(case_id, families).case
    case.messages = [case_id]
    case.failures = [FailureSummary(signature=SIG, explanation="", count=1, first_trial=0)]
    case.details.update(details)
    if behaviour is not None:
        turn = Turn(index=0, user_message=case_id, tool_calls=[ToolCall(name=behaviour)])
        case.traces = [
            RunTrace(trial=0, passed=False, signature=SIG, turn=0, trace=Trace(turns=[turn]))
        ]
    return case


def _report_of(cases: list[CaseReport]) -> RunReport:
    from agentprop._pipeline.report.model import AgentInfo, Metrics, SpecInfo

    return RunReport(
        agentprop_version="0",
        spec=SpecInfo(id="s"),
        agent=AgentInfo(ref="a"),
        cases=cases,
        metrics=Metrics(
            cases=len(cases), passed=0, failed=len(cases), unstable=0, case_pass_rate=0.0, runs=0
        ),
    )


def test_a_case_nothing_ties_to_a_cause_is_filed_by_default_and_the_note_says_so() -> None:
    """Two causes (hurried, Chinese); a third input holds neither's families, kept no failing
    run and its failure was not reconfirmed on shrinking: it went under the first cause as if
    that were its cause, silently."""
    from agentprop._pipeline.bugs import find_bugs

    cases = [
        _failing("a", ["turn1:urgency"], None),
        _failing("bb", ["turn1:codeswitch"], None),
        _failing("ccc", ["turn1:typo"], None),
    ]
    kept = {"a": (["urgency"], ["a"], True), "bb": (["codeswitch"], ["b"], True)}

    def shrink(case: CaseReport, signature: str) -> ShrinkReport:
        families, behaviour, fails = kept.get(case.id, (["typo"], ["c"], False))
        return _shrunk(families, behaviour, fails=fails)

    bugs = find_bugs(_report_of(cases), shrink, shrinkable=lambda c: True)
    assert [(b.cause, b.cases) for b in bugs] == [
        (["urgency"], ["a", "ccc"]),
        (["codeswitch"], ["bb"]),
    ]
    assert "1 failing case(s) here (ccc) match no cause" in (bugs[0].note or "")
    assert "match no cause" not in (bugs[1].note or "")


def test_a_replayed_split_puts_a_case_under_the_cause_whose_run_it_repeats() -> None:
    """The corpus keeps a split; on its replay, other failing cases went by families alone, so
    a Chinese input whose families name neither cause (a Chinese template, a closing '谢谢')
    went under the first cause, though its run did what the Chinese cause's replay did; the
    run that found the split puts it by that run (:func:`_owner`)."""
    from agentprop._pipeline.bugs import find_bugs

    def known(case_id: str, cause: str, behaviour: str) -> CaseReport:
        case = _failing(case_id, [], behaviour, signature=SIG, cause=[cause])
        case.kind = "REGRESSION"
        return case

    cases = [
        known("ra", "urgency", "skip"),
        known("rb", "codeswitch", "refetch"),
        _failing("x", ["template", "turn1:closing"], "refetch"),
        _failing("y", ["turn1:typo"], None),
    ]
    bugs = find_bugs(_report_of(cases), None, shrinkable=lambda c: True)
    assert [(b.cause, b.cases) for b in bugs] == [
        (["urgency"], ["ra", "y"]),
        (["codeswitch"], ["rb", "x"]),
    ]
    assert "(y) match no cause" in (bugs[0].note or "") and "match no cause" not in (
        bugs[1].note or ""
    )


def test_a_representative_holding_two_triggers_does_not_hide_the_other_cause() -> None:
    """The simplest failing input is hurried and Chinese, and its run took the Chinese code
    path; its reproducer keeps the hurried words alone (they fail without the Chinese). Read
    by that input's run, every Chinese input looked explained: the Chinese cause was never
    shrunk, and Chinese inputs went under the hurried cause, whose trigger they do not hold.
    What a cause does is its reproducer's run."""
    from agentprop._decide.shrink import behaviour_of
    from agentprop._pipeline.bugs import find_bugs

    def did(tool: str) -> list[str]:
        case = _failing("_", [], tool)
        return behaviour_of(case.traces[0].trace, 0)

    cases = [
        _failing("a", ["turn1:urgency", "turn1:codeswitch"], "refetch"),
        _failing("bb", ["turn1:codeswitch"], "refetch"),
        _failing("ccc", ["turn1:urgency"], "skip"),
        _failing("dddd", ["template"], "refetch"),
    ]
    kept = {"a": (["urgency"], did("skip")), "bb": (["codeswitch"], did("refetch"))}
    asked: list[str] = []

    def shrink(case: CaseReport, signature: str) -> ShrinkReport:
        asked.append(case.id)
        return _shrunk(*kept[case.id])

    bugs = find_bugs(_report_of(cases), shrink, shrinkable=lambda c: True)
    assert asked == ["a", "bb"]
    assert [(b.cause, b.cases) for b in bugs] == [
        (["urgency"], ["a", "ccc"]),
        (["codeswitch"], ["bb", "dddd"]),
    ]


def test_a_cause_is_named_by_the_families_whose_effect_is_in_its_reproducer() -> None:
    """A reproducer may keep a choice that left no trace (a hedge a rule refused there): the
    cause was named "hedge + urgency", and no case's label (only families with an effect)
    could hold it."""
    shrunk = _shrunk(["urgency", "hedge"], ["a"])
    assert kept_families(shrunk) == {"urgency", "hedge"}  # a report saved before: as drawn
    shrunk.reproducer_families = ["turn1:urgency"]
    assert kept_families(shrunk) == {"urgency"}


def test_a_merge_places_a_case_no_shard_split_by_the_evidence_a_split_uses() -> None:
    """A case of a shard that did not split the signature went under the first cause of the
    shard that did, silently: a code-switched input under the hurried cause. It goes where its
    families (or its run) put it, and one nothing ties to a cause is named in the note."""
    from types import SimpleNamespace

    from agentprop._pipeline.merge_report import _split_as_shards
    from agentprop._pipeline.report.model import BugReport

    cases = [
        _failing("a", ["turn1:urgency"], None),
        _failing("b", ["turn1:codeswitch"], None),
        _failing("c", ["turn1:typo"], None),
        _failing("d", ["turn2:codeswitch", "turn1:typo"], None),
    ]
    for c in cases:
        c.bugs = ["merged"]
    merged = BugReport(
        id="merged", key=SKIP_AUTH, signature=SIG, signatures=[SIG], cases=["a", "b", "c", "d"]
    )
    parts = [
        BugReport(
            id=f"id-{cause}",
            key=f"{SKIP_AUTH} [cause: {cause}]",
            signature=SIG,
            cases=[rep],
            cause=[cause],
            representative=rep,
            note="one of 2 causes",
        )
        for cause, rep in (("urgency", "a"), ("codeswitch", "b"))
    ]
    shard = SimpleNamespace(report=SimpleNamespace(bugs=parts, cases=[]))
    out = _split_as_shards([merged], cases, [shard])  # type: ignore[list-item]
    assert [(b.id, b.cases) for b in out] == [
        ("id-urgency", ["a", "c"]),
        ("id-codeswitch", ["b", "d"]),
    ]
    assert "1 failing case(s) here (c) match no cause" in (out[0].note or "")
    assert "match no cause" not in (out[1].note or "")
