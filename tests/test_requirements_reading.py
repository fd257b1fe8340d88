"""How agentprop reads node requirements (issue #11 items 2, 3 and 12).

* Ordering anchors: a node whose ``must_call_tools_in_order`` starts with the tool the previous
  node ended on repeats it as an anchor (one call), not as a second call.
* Bindings never weaken a requirement silently: a tool the node requires after the one whose
  output decided the branch stays required, unless the branch leaves the happy path (a failure
  or a value other than the bindings' world), and lint says so at the binding's line.
* Requirements with a trace meaning (clarifying turns, retries) are checked; every other key is
  reported as not checked, by lint and by run.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

import agentprop
import agentprop.errors
import agentprop.spec
from agentprop import Trace
from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._judge.properties import first_failure
from agentprop._scenario.build import leaf_scenarios
from agentprop._scenario.exits import binding_downgrades
from agentprop._scenario.trace import ToolCall, Turn
from agentprop._spec.requirements import anchor_overlap, requirement_limits, unchecked_requirements
from agentprop.agents import make_factory
from agentprop.contracts import mft_verdicts
from agentprop.scenarios import Scenario

ROOT = Path(__file__).resolve().parents[1]
PROMISES = ROOT / "tests" / "data" / "promises"
PHARMACY = PROMISES / "pharmacy"
INCIDENT = PROMISES / "incident"


def _agent_class(project_dir: Path, name: str) -> Any:
    return agentprop._scenario.build.load_object(f"agent:{name}", project_dir, what="agent")


def _run(
    project: agentprop.Project,
    cls: Any,
    scenario: Scenario,
    faults: dict[str, float] | None = None,
    trial: int = 0,
) -> Trace:
    factory = make_factory(cls, faults or {}).factory
    return asyncio.run(project.arun(scenario, factory, trial=trial))


def _first_failures(
    project: agentprop.Project, cls: Any, faults: dict[str, float] | None = None, trial: int = 0
) -> dict[str, agentprop.Verdict]:
    out = {}
    for s in project.scenarios():
        v = first_failure(mft_verdicts(project.spec, s, _run(project, cls, s, faults, trial)))
        if v is not None:
            out[s.id] = v
    return out


def _lint(path: Path) -> str:
    out = io.StringIO()
    main(["lint", str(path)], out=out)
    return out.getvalue()


def _line_of(path: Path, text: str, start: int = 1) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if i >= start and text in line)


# ----------------------------------------------------------------------------- item 2: anchors


def test_anchor_overlap_is_the_longest_suffix_prefix() -> None:
    assert anchor_overlap(["verify_patient"], ["verify_patient", "get_prescription"]) == 1
    assert anchor_overlap(["a", "b"], ["a", "b", "c"]) == 2
    assert anchor_overlap(["a", "b"], ["b", "a"]) == 1
    assert anchor_overlap(["a", "b"], ["c", "a"]) == 0
    assert anchor_overlap([], ["a"]) == 0
    # a tool the bindings mark as called again is not an anchor
    assert anchor_overlap(["a", "b"], ["b", "c"], repeat=["b"]) == 0


def test_pharmacy_anchors_are_one_call_each_and_every_path_is_realisable() -> None:
    project = load_project(PHARMACY)
    scenarios = {s.id: s for s in project.scenarios()}
    assert project.problems == []
    assert scenarios["END_REFILL_SUBMITTED<-N4_SUBMIT"].turns[0].required_tools == [
        "verify_patient",
        "get_prescription",
        "check_interactions",
        "submit_refill",
    ]
    assert scenarios["END_PHARMACIST_REVIEW<-N3_INTERACTIONS"].turns[0].required_tools == [
        "verify_patient",
        "get_prescription",
        "check_interactions",
    ]
    assert scenarios["END_NO_REFILLS_LEFT<-N2_PRESCRIPTION"].turns[0].required_tools == [
        "verify_patient",
        "get_prescription",
    ]


def test_the_merged_sequence_is_what_max_tool_calls_per_turn_counts() -> None:
    project = load_project(PHARMACY)
    project.spec.defaults.limits.max_tool_calls_per_turn = 3
    scenarios, problems = leaf_scenarios(project.spec, project.bindings)
    assert {s.id for s in scenarios} >= {"END_PHARMACIST_REVIEW<-N3_INTERACTIONS"}
    deep = [p for p in problems if "END_REFILL_SUBMITTED<-N4_SUBMIT" in p]
    assert (
        deep
        and "requires 4 tool calls in turn 1 (verify_patient, get_prescription, "
        "check_interactions, submit_refill)"
        in deep[0]
    )


def test_a_binding_can_make_a_repeated_tool_a_second_call(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(
        (PHARMACY / "spec.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    text = (PHARMACY / "agentprop.yaml").read_text(encoding="utf-8")
    text += "\nnodes:\n  N2_PRESCRIPTION:\n    repeat_calls: [verify_patient]\n"
    (tmp_path / "agentprop.yaml").write_text(text, encoding="utf-8")
    project = load_project(tmp_path)
    s = project.scenario("END_NO_REFILLS_LEFT<-N2_PRESCRIPTION")
    assert s.turns[0].required_tools == ["verify_patient", "verify_patient", "get_prescription"]


def test_repeat_calls_must_name_a_tool_the_node_repeats(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text(
        (PHARMACY / "spec.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    text = (PHARMACY / "agentprop.yaml").read_text(encoding="utf-8")
    text += "\nnodes:\n  N2_PRESCRIPTION:\n    repeat_calls: [submit_refill]\n"
    (tmp_path / "agentprop.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(
        agentprop.errors.BindingsError, match="N2_PRESCRIPTION.*submit_refill"
    ) as exc:
        load_project(tmp_path)
    assert "agentprop.yaml:" in str(exc.value)


@pytest.mark.parametrize("trial", range(3))
def test_pharmacy_clean_agent_passes_every_case(trial: int) -> None:
    project = load_project(PHARMACY)
    assert _first_failures(project, _agent_class(PHARMACY, "PharmacyAgent"), trial=trial) == {}


def test_pharmacy_skipped_interaction_check_is_found_on_the_deep_paths() -> None:
    project = load_project(PHARMACY)
    fails = _first_failures(
        project, _agent_class(PHARMACY, "PharmacyAgent"), {"skip_interactions": 1.0}
    )
    # the paths through N3_INTERACTIONS, and the retry case built on one of them (loops unrolled)
    assert {f.split("/")[0] for f in fails} == {
        "END_REFILL_SUBMITTED<-N4_SUBMIT",
        "END_REFILL_FAILED<-N4_SUBMIT",
        "END_PHARMACIST_REVIEW<-N3_INTERACTIONS",
    }
    assert (
        "check_interactions was never called"
        in fails["END_REFILL_SUBMITTED<-N4_SUBMIT"].explanation
    )


def test_lint_says_how_it_read_each_anchor_at_the_spec_line() -> None:
    out = _lint(PHARMACY)
    spec = PHARMACY / "spec.yaml"
    n3 = _line_of(spec, "node_id: N3_INTERACTIONS")
    line = _line_of(spec, "- get_prescription", n3)
    expected = (
        f"{spec}:{line}:7: info L014: N3_INTERACTIONS.must_call_tools_in_order starts with "
        "get_prescription, already required by N2_PRESCRIPTION: read as an ordering anchor (one "
        "call), not a second call"
    )
    assert expected in out
    assert (
        "N2_PRESCRIPTION.must_call_tools_in_order starts with verify_patient, already "
        "required by N1_VERIFY" in out
    )
    assert (
        "N4_SUBMIT.must_call_tools_in_order starts with check_interactions, already "
        "required by N3_INTERACTIONS" in out
    )
    assert "repeat_calls" in out  # the fix says how to mean a second call
    assert "unrealisable" not in out


# ----------------------------------------------------------------------------- item 3: bindings


def test_incident_sev1_still_requires_page_oncall() -> None:
    project = load_project(INCIDENT)
    s = project.scenario("END_PAGED_ONCALL<-N2_MAJOR")
    assert s.turns[0].required_tools == ["get_alert", "create_incident", "page_oncall"]


def test_a_failed_incident_makes_paging_allowed_and_says_so() -> None:
    project = load_project(INCIDENT)
    s = project.scenario("END_ESCALATE_MANUAL<-N2_MAJOR")
    assert s.turns[0].required_tools == ["get_alert", "create_incident"]
    assert "page_oncall" in s.turns[0].allowed_tools
    downgrades = binding_downgrades(project.spec, project.bindings)
    assert [(d.node, d.branch, d.variable, d.tools) for d in downgrades] == [
        ("N2_MAJOR", 0, "incident_created", ["page_oncall"])
    ]


def test_silent_page_skip_fails_the_sev1_case_on_page_oncall() -> None:
    project = load_project(INCIDENT)
    cls = _agent_class(INCIDENT, "IncidentAgent")
    assert _first_failures(project, cls) == {}
    fails = _first_failures(project, cls, {"silent_page_skip": 1.0})
    assert {f.split("/")[0] for f in fails} == {"END_PAGED_ONCALL<-N2_MAJOR"}
    assert "page_oncall was never called" in fails["END_PAGED_ONCALL<-N2_MAJOR"].explanation


def test_lint_reports_a_changed_requirement_at_the_bindings_line() -> None:
    out = _lint(INCIDENT)
    bindings = INCIDENT / "agentprop.yaml"
    line = _line_of(bindings, "incident_created:", _line_of(bindings, "variables:"))
    head = f"{bindings}:{line}:"
    found = [ln for ln in out.splitlines() if ln.startswith(head)]
    assert found, out
    assert "info B002:" in found[0]
    assert (
        "page_oncall" in found[0] and "N2_MAJOR" in found[0] and "END_ESCALATE_MANUAL" in found[0]
    )
    assert "allowed, not required" in found[0]
    # the line docs/reference.md shows
    assert found[0] == (
        f"{bindings}:{line}:3: info B002: variable incident_created is create_incident's output: "
        "N2_MAJOR leaves to END_ESCALATE_MANUAL on `incident_created == false` with "
        "incident_created = false, off the happy path (the bindings' world gives true); so "
        "page_oncall, which N2_MAJOR requires after create_incident, is read as allowed, not "
        "required, on that path"
    )
    assert "must_call_tools_in_order: [page_oncall]" in out  # the fix


def test_supportops_refused_auth_reading_is_reported_at_the_verified_binding() -> None:
    example = ROOT / "examples" / "supportops"
    project = load_project(example)
    downgrades = binding_downgrades(project.spec, project.bindings)
    assert [(d.node, d.variable, d.tools) for d in downgrades] == [
        ("N2_AUTH", "verified", ["get_account", "get_plan_rules"])
    ]
    out = _lint(example)
    bindings = example / "agentprop.yaml"
    line = _line_of(bindings, "  verified:")
    assert any(ln.startswith(f"{bindings}:{line}:") and "B002" in ln for ln in out.splitlines()), (
        out
    )


def test_a_required_tool_on_the_happy_value_is_never_downgraded(tmp_path: Path) -> None:
    """The old rule: any leaf branch reading create_incident's output cut page_oncall. A
    world default of ``created: false`` makes false the happy value: then the true branch is
    the one read as leaving it, and the false branch keeps both tools."""
    (tmp_path / "spec.yaml").write_text(
        (INCIDENT / "spec.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    text = (
        (INCIDENT / "agentprop.yaml")
        .read_text(encoding="utf-8")
        .replace("{created: true, incident_id: INC-42}", "{created: false, incident_id: INC-42}")
    )
    (tmp_path / "agentprop.yaml").write_text(text, encoding="utf-8")
    project = load_project(tmp_path)
    assert project.scenario("END_ESCALATE_MANUAL<-N2_MAJOR").turns[0].required_tools == [
        "get_alert",
        "create_incident",
        "page_oncall",
    ]
    assert project.scenario("END_PAGED_ONCALL<-N2_MAJOR").turns[0].required_tools == [
        "get_alert",
        "create_incident",
    ]


# ------------------------------------------------------------------------ item 12: requirement keys


def _trace(*turns: tuple[list[str], str]) -> Trace:
    out = []
    for i, (calls, decision) in enumerate(turns):
        out.append(
            Turn(
                index=i,
                user_message="hi",
                tool_calls=[
                    ToolCall(name=c, args={}, result={}, turn_index=i, step=k)
                    for k, c in enumerate(calls)
                ],
                response={
                    "node_id": "X",
                    "decision": decision,
                    "tool_actions": calls,
                    "evidence": "e",
                    "user_message": "ok",
                },
            )
        )
    return Trace(turns=out)


def test_requirement_limits_of_the_examples() -> None:
    supportops = load_project(ROOT / "examples" / "supportops")
    datainsights = load_project(ROOT / "examples" / "datainsights")
    s_limits = [
        (lim.node, lim.key, lim.kind, lim.limit, lim.counted)
        for lim in requirement_limits(supportops.spec)
    ]
    assert s_limits == [("N4_CLARIFY", "max_clarify_turns", "clarify", 1, ["CLARIFY"])]
    d_limits = [
        (lim.node, lim.key, lim.kind, lim.limit, lim.counted)
        for lim in requirement_limits(datainsights.spec)
    ]
    assert d_limits == [
        ("N2_CLARIFY", "max_clarifying_questions", "clarify", 1, ["ASK_CLARIFY"]),
        ("N4A_REWRITE_SQL", "max_sql_retries", "retry", 1, ["run_sql"]),
    ]


def test_two_clarifying_turns_break_max_clarify_turns() -> None:
    project = load_project(ROOT / "examples" / "supportops")
    s = project.scenario("END_TICKET<-N4_CLARIFY")
    good = _trace(([], "CLARIFY"), (["create_ticket"], "TICKET_CREATED"))
    bad = _trace(([], "CLARIFY"), ([], "CLARIFY"), (["create_ticket"], "TICKET_CREATED"))
    assert all(
        v.passed for v in mft_verdicts(project.spec, s, good) if v.contract == "max_clarify_turns"
    )
    v = next(v for v in mft_verdicts(project.spec, s, bad) if v.contract == "max_clarify_turns")
    assert not v.passed
    assert v.clause == "decision_tree.N4_CLARIFY.requirements.max_clarify_turns"
    assert "2 clarifying turns (CLARIFY), at most 1" in v.explanation


def test_a_second_sql_retry_breaks_max_sql_retries() -> None:
    project = load_project(ROOT / "examples" / "datainsights")
    s = next(s for s in project.scenarios() if "N4_RUN_SQL" in s.path)
    twice = _trace((["run_sql", "run_sql"], "SQL_ERROR"))
    thrice = _trace((["run_sql", "run_sql", "run_sql"], "SQL_ERROR"))
    assert next(
        v for v in mft_verdicts(project.spec, s, twice) if v.contract == "max_retries"
    ).passed
    v = next(v for v in mft_verdicts(project.spec, s, thrice) if v.contract == "max_retries")
    assert not v.passed
    assert v.clause == "decision_tree.N4A_REWRITE_SQL.requirements.max_sql_retries"
    assert "run_sql was called 3 times: 2 retries, at most 1" in v.explanation


def test_every_unchecked_requirement_key_of_the_shared_specs_is_named() -> None:
    shared = ROOT / "tests" / "data" / "specsuite-core"  # vendored, see THIRD_PARTY.md there
    seen: set[str] = set()
    for path in sorted(shared.glob("*/v*/spec.yaml")):
        spec = agentprop.spec.load_spec(path)
        seen |= {u.key for u in unchecked_requirements(spec)}
    assert (
        seen
        == {
            "must_be_grounded",
            "abuse_detection",
            "confirmation_classification",
            "decision_routing",
            "when_to_use",
        }
        - _checked_now()
    )


def _checked_now() -> set[str]:
    from agentprop._spec.requirements import CHECKED_REQUIREMENTS

    return set(CHECKED_REQUIREMENTS)


def test_lint_and_run_name_the_requirements_agentprop_does_not_check() -> None:
    example = ROOT / "examples" / "datainsights"
    out = _lint(example)
    spec = example / "spec.yaml"
    line = _line_of(spec, "must_be_grounded")
    if "must_be_grounded" not in _checked_now():
        assert (
            f"{spec}:{line}:5: warning L015: N5_ANSWER.requirements.must_be_grounded is not "
            "checked by agentprop" in out
        )
    run_out = io.StringIO()
    main(
        [
            "run",
            str(example),
            "--kinds",
            "mft",
            "--case",
            "END_ANSWER",
            "--corpus",
            "none",
            "--shrink-budget",
            "0",
        ],
        out=run_out,
    )
    text = run_out.getvalue()
    if "must_be_grounded" not in _checked_now():
        assert "note: not checked: N5_ANSWER.requirements.must_be_grounded" in text


# ----------------------------------------------------------------------------- item 12: case ids


@pytest.mark.parametrize("example", ["supportops", "expenseguard", "datainsights"])
def test_every_case_id_of_every_example_is_unique(example: str, tmp_path: Path) -> None:
    """MFT, EXPLORE, BOUNDARY and DIR ids of a default run (one run per case); INV ids are
    ``INV <MFT id>``, unique when the MFT ids are."""
    import json

    report = tmp_path / "report.json"
    main(
        [
            "run",
            str(ROOT / "examples" / example),
            "--kinds",
            "mft,explore,boundary,dir",
            "--runs",
            "1",
            "--mode",
            "fixed",
            "--corpus",
            "none",
            "--shrink-budget",
            "0",
            "--json",
            str(report),
        ],
        out=io.StringIO(),
    )
    ids = [c["id"] for c in json.loads(report.read_text(encoding="utf-8"))["cases"]]
    assert len(ids) > 10
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_datainsights_boundary_ids_name_the_branch() -> None:
    from agentprop._pipeline.kinds import boundary_case_ids
    from agentprop.strategies._internal.boundary import boundary_values

    project = load_project(ROOT / "examples" / "datainsights")
    cases = [c for c in boundary_values(project.spec, project.bindings) if c.scenario is not None]
    ids = boundary_case_ids(cases)
    assert len(set(ids)) == len(ids)
    assert (
        "BOUNDARY retry_count=1 @N4_RUN_SQL#0" in ids
        and "BOUNDARY retry_count=1 @N4_RUN_SQL#1" in ids
    )
