"""The ExpenseGuard example: bindings, scenarios built from them, and the reference agent.

The bindings (``examples/expenseguard/agentprop.yaml``) must realise every path of the spec's
decision tree; the reference agent (``examples/expenseguard/agent.py``) must pass every leaf
scenario with its fault knobs off, and each knob at P=1 must make exactly the scenarios it
targets fail, caught by the contract meant for that bug.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentprop._agents.loading import load_agent
from agentprop._agents.project import Project, load_project
from agentprop._agents.runtime import run_conversation
from agentprop._judge.grounded import numbers_grounded
from agentprop._judge.properties import mft_verdicts
from agentprop._judge.verdict import Verdict
from agentprop._scenario.build import (
    Scenario,
    Unsatisfiable,
    build_scenario,
    leaf_scenarios,
    load_object,
    make_world,
    render_template,
)
from agentprop._scenario.solver import solve
from agentprop._scenario.trace import Trace
from agentprop._scenario.world import World
from agentprop._spec.implied import condition_variables
from agentprop._spec.paths import enumerate_paths
from agentprop.errors import InputError, ToolError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "expenseguard"

# Scenario keys: the tree-path id, plus "/fx" on paths that take N5_CALCULATE's
# currency_mismatch branch (the FX and no-FX paths to END_APPROVE / END_REJECT<-N6 share ids).
N1 = "END_REQUEST_INFO<-N1_INTAKE"
N3 = "END_REQUEST_INFO<-N3_RECEIPT"
N4A = "END_REJECT<-N4A_REJECT_DISALLOWED"
APPROVE_FX = "END_APPROVE<-N7_SUBMIT/fx"
APPROVE = "END_APPROVE<-N7_SUBMIT"
REJECT_FX = "END_REJECT<-N6_DECIDE/fx"
REJECT = "END_REJECT<-N6_DECIDE"
ALL_KEYS = {N1, N3, N4A, APPROVE_FX, APPROVE, REJECT_FX, REJECT}
PAST_INTAKE = ALL_KEYS - {N1}


def key(s: Scenario) -> str:
    return s.id + ("/fx" if s.assignment.get("currency_mismatch") is True else "")


@pytest.fixture(scope="module")
def project() -> Project:
    return load_project(EXAMPLE)


@pytest.fixture(scope="module")
def agent_cls() -> Any:
    return load_object("agent:ExpenseGuardAgent", EXAMPLE, what="agent")


@pytest.fixture(scope="module")
def agent_module(agent_cls: Any) -> ModuleType:
    return sys.modules[agent_cls.__module__]


@pytest.fixture(scope="module")
def leaves(project: Project) -> list[Scenario]:
    scenarios, problems = leaf_scenarios(project.spec, project.bindings)
    assert problems == []
    return scenarios


@pytest.fixture(scope="module")
def all_paths(project: Project) -> dict[str, Scenario]:
    out = {}
    for path in enumerate_paths(project.spec):
        s = build_scenario(project.spec, project.bindings, path)
        out[key(s)] = s
    return out


def run(
    project: Project,
    scenario: Scenario,
    agent_cls: Any,
    faults: Mapping[str, float] | None = None,
    trial: int = 0,
) -> Trace:
    def factory() -> Any:
        return agent_cls(faults=dict(faults or {}))

    return asyncio.run(project.arun(scenario, factory, trial=trial))


def failing(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.passed]


def world_of(project: Project, scenario: Scenario) -> World:
    return make_world(project.spec, project.bindings, scenario, seed=1)


# ----------------------------------------------------------------------------- bindings


def test_bindings_load_without_warnings_and_bind_every_variable(project: Project) -> None:
    assert project.bindings.warnings == []
    used = set(condition_variables(project.spec))
    assert set(project.bindings.variables) == used
    # every variable is realised by the test (none is left to the agent as `internal`): an
    # internal variable would demote the next node's required tools to merely allowed
    assert all(v.kind != "internal" for v in project.bindings.variables.values())
    enum = project.spec.response_contract.decision_enum
    b = project.bindings
    assert b.outcome("END_REJECT", "N4A_REJECT_DISALLOWED", enum) == "REJECT_DISALLOWED"
    assert b.outcome("END_REJECT", "N6_DECIDE", enum) == "REJECT_POLICY"
    assert b.outcome("END_APPROVE", "N7_SUBMIT", enum) == "APPROVE_SUBMIT"
    assert b.outcome("END_REQUEST_INFO", "N3_RECEIPT", enum) == "REQUEST_INFO"


def test_every_leaf_scenario_is_realisable(project: Project) -> None:
    scenarios, problems = leaf_scenarios(project.spec, project.bindings)
    # No problems: the tree is consistent under these bindings. The tightest path is approve
    # with FX (get_policy, get_receipt, fx_convert, submit_expense), which needs exactly
    # max_tool_calls_per_turn = 4 calls, so it is realisable -- with no room for a retry (see
    # test_retry_cannot_fit_on_the_fx_approve_path).
    assert problems == []
    expected = {
        N1: "REQUEST_INFO",
        N3: "REQUEST_INFO",
        N4A: "REJECT_DISALLOWED",
        APPROVE_FX: "APPROVE_SUBMIT",  # the first path per leaf key is the FX one (tree order)
        REJECT_FX: "REJECT_POLICY",
        # then one more path so that N5_CALCULATE's `currency_mismatch == false` branch is covered
        "END_APPROVE<-N7_SUBMIT/N5_CALCULATE#1": "APPROVE_SUBMIT",
        # then, per tool whose retry_policy retries timeouts, the first scenario its retry fits
        # in: fx_convert's only fits on the FX reject path, submit_expense's on the no-FX approve
        # path, get_policy's on the unknown-receipt path (the FX approve path has no room left)
        f"{N3}/get_policy:timeout+retry": "REQUEST_INFO",
        f"{N4A}/get_receipt:timeout+retry": "REJECT_DISALLOWED",
        f"{REJECT}/fx_convert:timeout+retry/fx": "REJECT_POLICY",
        "END_APPROVE<-N7_SUBMIT/N5_CALCULATE#1/submit_expense:timeout+retry": "APPROVE_SUBMIT",
        f"{N4A}/open_compliance_case:timeout+retry": "REJECT_DISALLOWED",
    }
    assert {key(s): s.expect_decision for s in scenarios} == expected
    approve = next(s for s in scenarios if key(s) == APPROVE_FX)
    assert approve.turns[0].required_tools == [
        "get_policy",
        "get_receipt",
        "fx_convert",
        "submit_expense",
    ]
    assert len(approve.turns[0].required_tools) == project.spec.max_tool_calls_per_turn


def test_every_tree_path_builds_and_the_no_fx_paths_are_distinct(
    all_paths: dict[str, Scenario],
) -> None:
    assert set(all_paths) == ALL_KEYS
    assert "fx_convert" in all_paths[APPROVE_FX].turns[0].required_tools
    assert "fx_convert" in all_paths[APPROVE].forbidden_tools
    assert "fx_convert" in all_paths[REJECT].forbidden_tools
    assert {"submit_expense", "open_compliance_case"} <= set(all_paths[REJECT_FX].forbidden_tools)
    assert set(all_paths[N1].forbidden_tools) == {
        "get_policy",
        "get_receipt",
        "fx_convert",
        "submit_expense",
        "open_compliance_case",
    }


def test_worlds_realise_each_variable(project: Project, all_paths: dict[str, Scenario]) -> None:
    """The bindings mean what they say: check each scenario's world against its assignment."""
    for k, s in all_paths.items():
        w = world_of(project, s)
        env = s.assignment
        policy = w.default_output("get_policy")
        if env.get("receipt_found") is False:
            with pytest.raises(ToolError) as info:
                w.call("get_receipt", {"receipt_id": "RCP-123"})
            assert info.value.kind == "not_found"
            continue
        if env.get("missing_required_fields"):
            continue
        receipt = w.default_output("get_receipt")
        assert receipt["receipt_id"] == s.slots["receipt_id"]
        assert receipt["total"] == pytest.approx(sum(i["amount"] for i in receipt["items"]))
        categories = {i["category"] for i in receipt["items"]}
        assert bool(categories & set(policy["disallowed"])) is env["contains_disallowed"], k
        if env["contains_disallowed"]:
            continue
        assert (receipt["currency"] != policy["currency"]) is env["currency_mismatch"], k
        amount = (
            w.default_output("fx_convert")["amount"]
            if env["currency_mismatch"]
            else receipt["total"]
        )
        assert (amount <= policy["limits"]["per_receipt"]) is env["approve"], k


def test_the_fx_approve_leaf_sits_exactly_on_the_limit(
    project: Project, all_paths: dict[str, Scenario]
) -> None:
    w = world_of(project, all_paths[APPROVE_FX])
    assert (
        w.default_output("fx_convert")["amount"]
        == w.default_output("get_policy")["limits"]["per_receipt"]
    )


def test_withheld_slots_are_really_absent(
    project: Project, all_paths: dict[str, Scenario], agent_module: ModuleType
) -> None:
    s = all_paths[N1]
    assert set(s.withheld) == {"country", "receipt_id"}
    msg = s.turns[0].user_message
    assert s.slots["receipt_id"] not in msg
    assert agent_module.parse_request(msg) == {"role": s.slots["role"]}


@pytest.mark.parametrize("template_index", [0, 1, 2])
def test_agent_parses_every_template_with_any_slots_withheld(
    project: Project, agent_module: ModuleType, template_index: int
) -> None:
    slots = project.bindings.slots
    template = project.bindings.utterances[template_index]
    names = ["role", "country", "receipt_id"]
    for r in range(len(names) + 1):
        for withheld in itertools.combinations(names, r):
            msg = render_template(template, slots, set(withheld))
            assert msg is not None
            expected = {n: str(slots[n]) for n in names if n not in withheld}
            assert agent_module.parse_request(msg) == expected, msg


@pytest.mark.parametrize(
    "message, expected",
    [
        (
            "Submit expense for receipt RCP-123, I'm an engineer in the US",
            {"receipt_id": "RCP-123", "role": "engineer", "country": "US"},
        ),
        (
            "Process my expense report, receipt ID RCP-456, role: manager, country: UK",
            {"receipt_id": "RCP-456", "role": "manager", "country": "UK"},
        ),
        ("Submit my expense", {}),
        ("Process receipt RCP-789", {"receipt_id": "RCP-789"}),
        ("I'm a manager, please process my expense", {"role": "manager"}),
    ],
)
def test_agent_parses_the_spec_examples(
    agent_module: ModuleType, message: str, expected: dict[str, str]
) -> None:
    # N1_INTAKE test_guidance: complete_examples and incomplete_examples
    assert agent_module.parse_request(message) == expected


# ----------------------------------------------------------------------------- clean agent


def test_clean_agent_passes_every_leaf_scenario(
    project: Project, leaves: list[Scenario], agent_cls: Any
) -> None:
    for s in leaves:
        for trial in range(4):
            tr = run(project, s, agent_cls, trial=trial)
            bad = failing(mft_verdicts(project.spec, s, tr))
            assert bad == [], f"{s.id} trial {trial}: {bad[0].explanation}"
            assert numbers_grounded(tr).passed, s.id


def test_clean_agent_passes_every_tree_path(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any
) -> None:
    for k, s in all_paths.items():
        tr = run(project, s, agent_cls)
        assert failing(mft_verdicts(project.spec, s, tr)) == [], k
        assert numbers_grounded(tr).passed, k


def test_optional_fields_are_grounded_in_tool_outputs(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any
) -> None:
    tr = run(project, all_paths[APPROVE_FX], agent_cls)
    results = {c.name: c.result for c in tr.tool_calls}
    r = tr.final_response
    assert r is not None
    assert r["reimbursable_amount"] == results["fx_convert"]["amount"]
    assert r["policy_currency"] == results["get_policy"]["currency"]
    assert r["receipt_currency"] == results["get_receipt"]["currency"] != r["policy_currency"]
    assert r["report_id"] == results["submit_expense"]["report_id"]
    submitted = next(c for c in tr.tool_calls if c.name == "submit_expense").args["report"]
    assert submitted["amount"] == results["fx_convert"]["amount"]
    fx_args = next(c for c in tr.tool_calls if c.name == "fx_convert").args
    assert fx_args["amount"] == results["get_receipt"]["total"]
    assert fx_args["date"] == results["get_receipt"]["date"]

    tr = run(project, all_paths[N4A], agent_cls)
    case = next(c for c in tr.tool_calls if c.name == "open_compliance_case")
    assert tr.final_response is not None and tr.final_response["case_id"] == case.result["case_id"]
    assert "alcohol" in case.args["evidence"]["policy_terms"]


def test_multi_turn_the_agent_remembers_fields(project: Project, agent_cls: Any) -> None:
    world = make_world(project.spec, project.bindings, None, seed=3)
    tr = run_conversation(
        project.spec,
        lambda: agent_cls(),
        [
            "I'm a manager, please process my expense",
            "Sure: I'm based in the UK and the receipt is RCP-123.",
        ],
        world,
        context=project.bindings.context,
    )
    assert tr.decisions == ["REQUEST_INFO", "APPROVE_SUBMIT"]
    assert tr.turns[0].tool_calls == []
    assert tr.turns[0].response is not None and tr.turns[0].response["missing_fields"] == [
        "country",
        "receipt_id",
    ]
    policy_call = tr.turns[1].tool_calls[0]
    assert policy_call.name == "get_policy" and policy_call.args == {
        "role": "manager",
        "country": "UK",
    }


# ----------------------------------------------------------------------------- retries and failures


def with_failure(s: Scenario, tool: str, mode: str, calls: list[int] | None) -> Scenario:
    failures = [*s.world.failures, {"tool": tool, "mode": mode, "calls": calls}]
    return s.model_copy(update={"world": s.world.model_copy(update={"failures": failures})})


def test_one_timeout_is_retried(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any
) -> None:
    for k, tool in [(N4A, "get_receipt"), (APPROVE, "get_policy"), (REJECT_FX, "fx_convert")]:
        s = with_failure(all_paths[k], tool, "timeout", [1])
        tr = run(project, s, agent_cls)
        assert [c.name for c in tr.tool_calls].count(tool) == 2, k
        assert failing(mft_verdicts(project.spec, s, tr)) == [], k


def test_retry_cannot_fit_on_the_fx_approve_path(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any
) -> None:
    """Spec tension: retry_policy allows one retry per tool, but the FX approve path already
    needs all 4 calls max_tool_calls_per_turn allows. The agent stays within the limit (no
    protocol error) and so cannot submit; the MFT fails on the missing call, then the decision."""
    s = with_failure(all_paths[APPROVE_FX], "get_policy", "timeout", [1])
    tr = run(project, s, agent_cls)
    assert len(tr.turns[0].tool_calls) == project.spec.max_tool_calls_per_turn
    assert tr.all_errors() == []
    assert (
        tr.final_response is not None
        and tr.final_response["decision_reason"] == "tool_budget_exhausted"
    )
    assert [v.contract for v in failing(mft_verdicts(project.spec, s, tr))] == [
        "calls_in_order",
        "decision_is",
    ]


@pytest.mark.parametrize(
    "k, variable, tool, calls, decision",
    [
        (APPROVE, "policy_loaded", "get_policy", 1, "REQUEST_INFO"),  # not_found is not retried
        (APPROVE_FX, "fx_done", "fx_convert", 2, "REQUEST_INFO"),
        # the rejection stands
        (N4A, "case_opened", "open_compliance_case", 2, "REJECT_DISALLOWED"),
        (APPROVE, "submitted", "submit_expense", 2, "REQUEST_INFO"),
    ],
)
def test_bookkeeping_variables_bind_real_failures(
    project: Project,
    all_paths: dict[str, Scenario],
    agent_cls: Any,
    k: str,
    variable: str,
    tool: str,
    calls: int,
    decision: str,
) -> None:
    base = all_paths[k]
    path = next(
        p
        for p in enumerate_paths(project.spec)
        if p.id == base.id and solve(project.spec, project.bindings, p) == base.assignment
    )
    try:
        s = build_scenario(
            project.spec, project.bindings, path, assignment={**base.assignment, variable: False}
        )
    except Unsatisfiable as exc:
        # the FX approve path already uses all 4 calls: the retry fx_convert's retry_policy
        # requires after the timeout does not fit, so no scenario expects it; the agent's
        # behaviour under the failure is still checked in the path's world
        assert (
            k == APPROVE_FX
            and "max_tool_calls_per_turn is 4" in str(exc)
            and "fx_convert, fx_convert" in str(exc)
        )
        s = with_failure(base, tool, "timeout", None)
    else:
        assert [f["tool"] for f in s.world.failures] == [tool]
    tr = run(project, s, agent_cls)
    assert tr.all_errors() == []
    assert [c.name for c in tr.tool_calls].count(tool) == calls
    assert tr.final_decision == decision
    assert (
        "submit_expense" not in [c.name for c in tr.tool_calls if c.ok] or tool == "submit_expense"
    )
    assert numbers_grounded(tr).passed


# ----------------------------------------------------------------------------- fault knobs

# knob -> (scenarios it targets, contract that must catch it, text its explanation must hold)
FAULT_TARGETS: dict[str, tuple[set[str], str, str]] = {
    "approve_no_policy": (PAST_INTAKE, "calls_in_order", "get_policy was never called"),
    "skip_receipt_lookup": (PAST_INTAKE, "calls_in_order", "get_receipt was never called"),
    "ignore_disallowed": ({N4A}, "forbids_tools", "called submit_expense"),
    "skip_compliance_case": ({N4A}, "calls_in_order", "open_compliance_case was never called"),
    "submit_no_receipt": ({N1, N3}, "forbids_tools", "called submit_expense"),
    "skip_fx": ({APPROVE_FX, REJECT_FX}, "calls_in_order", "fx_convert was never called"),
    "threshold_off_by_one": (
        {APPROVE_FX},
        "decision_is",
        "decided REJECT_POLICY; the spec expects APPROVE_SUBMIT",
    ),
}


def test_every_knob_is_covered(agent_module: ModuleType) -> None:
    # the zoo's faults are triggered by wording or tool values (benchmarks/find.py tests them)
    assert set(FAULT_TARGETS) | {"hallucinate_amount"} | set(agent_module.ZOO_FAULTS) == set(
        agent_module.FAULTS
    )


@pytest.mark.parametrize("fault", sorted(FAULT_TARGETS))
def test_fault_fails_exactly_its_targets(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any, fault: str
) -> None:
    targets, contract, detail = FAULT_TARGETS[fault]
    for k, s in all_paths.items():
        for trial in range(2):
            tr = run(project, s, agent_cls, {fault: 1.0}, trial)
            bad = failing(mft_verdicts(project.spec, s, tr))
            if k in targets:
                assert bad, f"{fault} went unnoticed on {k}"
                assert any(v.contract == contract and detail in v.explanation for v in bad), (
                    f"{fault} on {k}: expected a failing {contract} ({detail}); got "
                    f"{[v.explanation for v in bad]}"
                )
            else:
                assert bad == [], (
                    f"{fault} broke {k}, which it does not target: {bad[0].explanation}"
                )


def test_ignore_disallowed_is_also_caught_by_the_decision(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any
) -> None:
    tr = run(project, all_paths[N4A], agent_cls, {"ignore_disallowed": 1.0})
    contracts = {v.contract for v in failing(mft_verdicts(project.spec, all_paths[N4A], tr))}
    # node_id: it reports N7_SUBMIT, where the scenario is at END_REJECT (or N4A_REJECT_DISALLOWED)
    assert contracts == {"decision_is", "calls_in_order", "forbids_tools", "node_id_matches"}


def test_skip_compliance_case_keeps_the_decision(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any
) -> None:
    # the decision alone would not catch it: only the required open_compliance_case does
    tr = run(project, all_paths[N4A], agent_cls, {"skip_compliance_case": 1.0})
    assert tr.final_decision == "REJECT_DISALLOWED"


def test_hallucinated_amount_is_caught_by_the_mft_grounding(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any
) -> None:
    for k, s in all_paths.items():
        tr = run(project, s, agent_cls, {"hallucinate_amount": 1.0})
        bad = failing(
            mft_verdicts(
                project.spec, s, tr, grounding=project.bindings.response_grounding(project.spec)
            )
        )
        grounded = numbers_grounded(tr)
        if k in {APPROVE_FX, APPROVE}:  # the only paths that state a reimbursable amount
            assert not grounded.passed, k
            stated = tr.final_response["reimbursable_amount"] if tr.final_response else None
            assert stated is not None and f"{stated:g}" in grounded.explanation
            # the MFT grounds the user_message first, then the reimbursable_amount field (which
            # the bindings' response: section declares a number)
            assert [(v.contract, v.detail) for v in bad] == [
                ("response_grounded", "user_message:numbers"),
                ("response_grounded", "reimbursable_amount:numbers"),
            ], k
            assert f"{stated:g}" in bad[0].explanation
        else:
            assert bad == [], k
            assert grounded.passed, k


@pytest.mark.parametrize(
    "fault, k",
    [("skip_fx", APPROVE_FX), ("threshold_off_by_one", APPROVE_FX), ("submit_no_receipt", N3)],
)
def test_faults_are_stochastic_with_probability_p(
    project: Project, all_paths: dict[str, Scenario], agent_cls: Any, fault: str, k: str
) -> None:
    s = all_paths[k]
    n = 60
    outcomes = [
        not failing(mft_verdicts(project.spec, s, run(project, s, agent_cls, {fault: 0.5}, t)))
        for t in range(n)
    ]
    # Binomial(60, 0.5) has sd ~3.9 failures: 18..42 is +-3 sd (false alarm < 0.3 %); the draws
    # are seeded by (case, trial), so the count is the same on every run of this test.
    assert 18 <= n - sum(outcomes) <= 42
    again = [
        not failing(mft_verdicts(project.spec, s, run(project, s, agent_cls, {fault: 0.5}, t)))
        for t in range(10)
    ]
    assert again == outcomes[:10]


def test_agent_loads_from_the_bindings_reference_with_faults(project: Project) -> None:
    assert project.bindings.agent is not None
    loaded = load_agent(project.bindings.agent, project.base_dir, {"skip_fx": 1.0})
    scenario = next(
        s for s in leaf_scenarios(project.spec, project.bindings)[0] if key(s) == APPROVE_FX
    )
    tr = asyncio.run(project.arun(scenario, loaded.factory))
    assert "fx_convert" not in tr.tool_names()
    with pytest.raises(InputError, match="unknown fault knob"):
        load_agent(project.bindings.agent, project.base_dir, {"skip_fxx": 1.0})


def test_agent_rejects_unknown_knobs_directly(agent_cls: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="unknown fault knob"):
        agent_cls(faults={"nope": 1.0})
