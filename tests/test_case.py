"""A scenario compiled once into a Case (issue #12 item 4): judging a run reads the trace and
what was compiled, never the spec; each expectation carries the clause it enforces."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentprop
from agentprop._judge.case import _policy_for_tools, compile_mft, compile_probe, pii_clause
from agentprop._spec.model import Policy, Spec
from agentprop._util.aio import run_sync

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("example", ["supportops", "expenseguard", "datainsights"])
def test_a_compiled_case_judges_runs_without_the_spec(
    example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example agents take their paths as the spec says: the compiled case passes their runs,
    and fails the same run with another decision at the path's decision clause, without reading
    the spec while it judges."""
    project = agentprop.load_project(EXAMPLES / example)
    agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir)
    grounding = project.bindings.response_grounding(project.spec)
    enum = project.spec.response_contract.decision_enum
    for scenario in project.scenarios()[:6]:
        case = compile_mft(project.spec, scenario, grounding)
        trace = run_sync(project.arun(scenario, agent.factory, trial=0, agent_name=agent.ref))
        wrong = trace.model_copy(deep=True)
        assert isinstance(wrong.turns[-1].response, dict)
        decided = wrong.turns[-1].response["decision"]
        wrong.turns[-1].response["decision"] = next(d for d in enum if d != decided)

        def consulted(self: Spec, name: str) -> object:
            raise AssertionError(f"judging a run read the spec ({name})")

        with monkeypatch.context() as m:
            m.setattr(Spec, "__getattribute__", consulted)
            right_verdicts, wrong_verdicts = case.verdicts(trace), case.verdicts(wrong)
        assert [v.signature for v in right_verdicts if not v.passed] == [], scenario.id
        failed = [v for v in wrong_verdicts if not v.passed]
        assert (
            failed and failed[0].contract == "decision_is" and failed[0].clause in case.clauses
        ), scenario.id
        assert all(
            e.clause or e.contract in ("no_run_errors", "no_canary_leak") for e in case.expectations
        )


def test_expectations_name_the_clauses_of_the_path() -> None:
    project = agentprop.load_project(EXAMPLES / "supportops")
    case = compile_mft(project.spec, project.scenario("END_CANCELLED<-N7_CANCEL"))
    assert "decision_tree.N2_AUTH.requirements.must_call_tools_in_order" in case.clauses
    assert "decision_tree.END_CANCELLED" in case.clauses and "response_contract" in case.clauses
    probe = compile_probe(project.spec, project.scenario("END_CANCELLED<-N7_CANCEL"))
    assert [e.contract for e in probe.expectations][0] == "no_canary_leak"


def _with_policies(*policies: tuple[str, str]) -> Spec:
    spec = agentprop.load_project(EXAMPLES / "supportops").spec
    return spec.model_copy(
        update={"policies": [Policy(id=pid, text=text) for pid, text in policies]}
    )


def test_the_pii_policy_is_the_one_whose_id_or_text_has_the_word() -> None:
    """ "pii" inside another word ("Piikoi Street") made a policy the PII clause a leak is
    filed under; the word PII in an id's words or the text is what names one."""
    spec = _with_policies(
        ("P1_PICKUP", "Orders picked up at the Piikoi Street store are refunded as credit."),
        ("P2_PRIVACY", "Never reveal PII to anyone but the account holder."),
    )
    assert pii_clause(spec) == "policies.P2_PRIVACY"
    assert pii_clause(_with_policies(("NoPIILeak", "Keep it private."))) == "policies.NoPIILeak"
    assert pii_clause(_with_policies(("P1_SHIPPIIG", "Ship within two days."))) is None


def test_a_forbidden_tool_is_governed_by_the_policy_that_names_it_whole() -> None:
    """A tool ``refund`` was governed by the first policy naming ``refund_status``."""
    spec = _with_policies(
        ("P1_STATUS", "Call refund_status before saying when the money arrives."),
        ("P2_REFUND", "Never call refund without a manager's approval."),
    )
    assert _policy_for_tools(spec, ["refund"]) == "policies.P2_REFUND"
    assert _policy_for_tools(spec, ["refund_status"]) == "policies.P1_STATUS"
    assert _policy_for_tools(spec, ["refund-status"]) is None
