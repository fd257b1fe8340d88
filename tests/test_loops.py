"""Loops unrolled once, retry scenarios, every unrealisable path reported, and no case without a
decision check (items 9, 10 and 11 of the promises issue)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._scenario.solver import base_name, instance_name, solve
from agentprop._spec.paths import enumerate_loop_paths, enumerate_paths, loop_branches

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
DATAINSIGHTS = ROOT / "examples" / "datainsights"
EXPENSEGUARD = ROOT / "examples" / "expenseguard"
LOOKUPS = ROOT / "tests" / "data" / "promises" / "unrealisable_paths"


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agentprop run keeps its corpus under ./.agentprop: each test gets its own."""
    monkeypatch.chdir(tmp_path)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def by_id(project_dir: Path) -> dict[str, object]:
    return {s.id: s for s in load_project(project_dir).scenarios()}


# ----------------------------------------------------------------------------- item 9: loops


def test_loop_paths_take_one_loop_branch_once_and_never_reenter_after() -> None:
    spec = load_project(SUPPORTOPS).spec
    loops = enumerate_loop_paths(spec)
    assert loops, "the clarify and confirm loops are unrolled"
    for p in loops:
        assert sum(s.loop for s in p.steps) == 1
        i = p.loop_step
        assert i is not None and p.steps[i].next in [s.node for s in p.steps[: i + 1]]
        # after the loop branch, no node is entered a third time
        nodes = p.nodes
        assert all(nodes.count(n) <= 2 for n in nodes)
    taken = {
        f"{p.steps[p.loop_step].node}#{p.steps[p.loop_step].branch}"
        for p in loops
        if p.loop_step is not None
    }
    assert (
        taken
        == {f"{n}#{k}" for n, k in loop_branches(spec)}
        == {"N4_CLARIFY#0", "N6_CONFIRM_CANCEL#2"}
    )
    # loop-free paths are unchanged: none of them takes a loop branch
    assert all(not s.loop for p in enumerate_paths(spec) for s in p.steps)


def test_clarify_loop_gives_intent_a_second_instance_realised_as_a_follow_up_message() -> None:
    scenarios = by_id(SUPPORTOPS)
    s = scenarios["END_REFUSE_PII<-N1_INTENT/N4_CLARIFY#0>N1_INTENT#0"]
    assert (
        s.assignment["intent"] == "unknown"
        and s.assignment[instance_name("intent")] == "pii_request"
    )
    assert [t.expect_decision for t in s.turns] == ["CLARIFY", "REFUSE_PII"]
    assert s.turns[1].user_message == "What's the SSN you have on file for me?"
    assert "N4_CLARIFY#0" in s.branches
    # after the clarifying question the agent routes again, to every intent
    exits = {sid.rsplit(">", 1)[1] for sid in scenarios if "/N4_CLARIFY#0>" in sid}
    assert exits == {"N1_INTENT#0", "N1_INTENT#1", "N1_INTENT#2", "N1_INTENT#3"}


def test_confirm_loop_asks_again_after_an_unclear_answer() -> None:
    s = by_id(SUPPORTOPS)["END_CANCELLED<-N7_CANCEL/N6_CONFIRM_CANCEL#2>N6_CONFIRM_CANCEL#0"]
    assert (
        s.assignment["user_confirmation"] == "unclear"
        and s.assignment[instance_name("user_confirmation")] == "yes"
    )
    assert [t.expect_decision for t in s.turns] == [
        "ASK_CONFIRM_CANCEL",
        "ASK_CONFIRM_CANCEL",
        "CANCELLED",
    ]
    assert s.turns[2].required_tools == ["cancel_order"]
    assert s.turns[1].required_tools == []


def test_rewrite_loop_fails_the_first_call_and_succeeds_on_the_second() -> None:
    s = by_id(DATAINSIGHTS)["END_ANSWER<-N5_ANSWER/N4A_REWRITE_SQL#0>N4_RUN_SQL#3"]
    assert s.world.failures == [{"tool": "run_sql", "mode": "invalid_query", "calls": [1]}]
    assert s.turns[-1].required_tools == ["run_sql", "run_sql"]
    assert s.expect_decision == "ANSWER"
    again = by_id(DATAINSIGHTS)["END_SQL_ERROR<-N4_RUN_SQL/N4A_REWRITE_SQL#0>N4_RUN_SQL#1"]
    assert {tuple(f["calls"]) for f in again.world.failures} == {(1,), (2,)}


def test_a_world_field_cannot_change_between_the_visits_of_a_loop() -> None:
    """`verified` is a world field: both visits of a loop would read the same output, so a path
    that needs it false first and true later is unrealisable, not built with a wrong world."""
    from agentprop._scenario.solver import instances_realisable

    b = load_project(SUPPORTOPS).bindings
    assert instances_realisable(b, {"verified": True, instance_name("verified"): True})
    assert not instances_realisable(b, {"verified": False, instance_name("verified"): True})
    assert instances_realisable(b, {"intent": "unknown", instance_name("intent"): "cancel_order"})
    assert base_name(instance_name("plan_rules.can_cancel")) == "plan_rules.can_cancel"


def test_loop_solver_picks_where_the_second_instance_starts() -> None:
    spec = load_project(SUPPORTOPS)
    paths = [p for p in enumerate_loop_paths(spec.spec) if p.loop_step is not None]
    clarify = next(p for p in paths if p.steps[p.loop_step].node == "N4_CLARIFY")
    confirm = next(p for p in paths if p.steps[p.loop_step].node == "N6_CONFIRM_CANCEL")
    # N4_CLARIFY's `intent != unknown` is about the answer; N6's `otherwise` about the first answer
    assert solve(spec.spec, spec.bindings, clarify)["@loop"] == "at"
    assert solve(spec.spec, spec.bindings, confirm)["@loop"] == "after"


def test_retry_scenarios_fail_the_first_call_and_require_the_retry() -> None:
    scenarios = by_id(SUPPORTOPS)
    s = scenarios["END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry"]
    assert s.world.failures == [{"tool": "cancel_order", "mode": "timeout", "calls": [1]}]
    assert s.turns[-1].required_tools == ["cancel_order", "cancel_order"]
    assert s.expect_decision == "CANCELLED"
    assert "tools.cancel_order.retry_policy" in s.clauses
    retried = {sid.rsplit("/", 1)[1] for sid in scenarios if sid.endswith("+retry")}
    assert retried == {
        "verify_identity:timeout+retry",
        "get_account:timeout+retry",
        "get_plan_rules:timeout+retry",
        "cancel_order:timeout+retry",
    }


def test_retries_count_against_max_tool_calls_per_turn() -> None:
    """update_address is the fourth call of its turn: its retry would be the fifth of four."""
    project = load_project(SUPPORTOPS)
    assert not any("update_address:" in s.id for s in project.scenarios())
    [p] = [p for p in project.path_problems if p.code == "P002"]
    assert p.path_id == "update_address:timeout+retry"
    assert "5 tool calls" in p.reason and "max_tool_calls_per_turn is 4" in p.reason
    # a tool only permitted, never required, has no first call to fail: said, not skipped
    [q] = [p for p in load_project(DATAINSIGHTS).path_problems if p.code == "P002"]
    assert q.path_id == "describe_schema:timeout+retry" and "no scenario requires" in q.reason


def test_never_retry_agent_fails_and_clean_agent_passes_the_retry_cases() -> None:
    code, out, _ = cli(
        "run",
        str(SUPPORTOPS),
        "--case",
        "+retry",
        "--kinds",
        "mft",
        "--fault",
        "never_retry=1",
        "--shrink-budget",
        "0",
    )
    assert code == 1
    assert "END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry" in out
    # the missing retry, before the decision it changed
    assert "cancel_order was called 1 time(s), 2 expected" in out
    code, out, _ = cli("run", str(SUPPORTOPS), "--case", "+retry", "--kinds", "mft")
    assert code == 0, out
    assert "4 cases: 4 passed" in out


def test_zoo_entry_never_retry_is_found() -> None:
    from benchmarks._promises_zoo.item9_never_retry import ENTRIES

    [entry] = ENTRIES
    args = [
        "run",
        str(ROOT / entry.project),
        "--shrink-budget",
        "0",
        "--kinds",
        ",".join(entry.kinds),
    ]
    for name, p in entry.faults.items():
        args += ["--fault", f"{name}={p}"]
    for c in entry.cases:
        args += ["--case", c]
    code, out, _ = cli(*args)
    assert code == 1
    failing = [line for line in out.splitlines() if " FAIL " in line or " UNSTABLE " in line]
    assert any(entry.expect in line for line in failing), out


def test_coverage_reports_loop_branches_as_covered() -> None:
    code, out, _ = cli("run", str(SUPPORTOPS), "--kinds", "mft")
    assert code == 3  # every case passes; two branches of the published spec cannot be tested
    assert "loops unrolled once: N4_CLARIFY#0, N6_CONFIRM_CANCEL#2" in out
    assert "not unrolled" not in out
    code, out, _ = cli("run", str(DATAINSIGHTS), "--kinds", "mft")
    # the one item not tested: an optional response field its respond schema lacks
    assert code == 3
    assert (
        "not tested (1): field respond.intent (optional in response_contract but not in the "
        "respond tool's input_schema" in out
    )
    assert "branches: 13/13 taken; loops unrolled once: N4_RUN_SQL#0, N4A_REWRITE_SQL#0" in out


def test_a_loop_the_bindings_cannot_realise_is_reported_with_the_reason(tmp_path: Path) -> None:
    """Without an answer that is neither yes nor no, the confirm loop cannot be built: the
    branch is unrealisable and the run says why."""
    copy = tmp_path / "supportops"
    shutil.copytree(SUPPORTOPS, copy)
    bindings = copy / "agentprop.yaml"
    text = bindings.read_text()
    bindings.write_text(
        "\n".join(line for line in text.splitlines() if not line.strip().startswith("unclear:"))
        + "\n"
    )
    code, out, _ = cli("run", str(copy), "--kinds", "mft", "--corpus", "none")
    assert "loops not realised: N6_CONFIRM_CANCEL#2" in out
    assert "unrealisable: N3_BILLING#0, N6_CONFIRM_CANCEL#2, N9_UPDATE_ADDRESS#1" in out
    assert "N6_CONFIRM_CANCEL -> N6_CONFIRM_CANCEL" in out
    assert "on a loop's second visit" in out
    # every case passes; the unrealisable branches are named and make the run incomplete
    assert "not tested (16): branch N3_BILLING#0" in out
    assert code == 3


# ----------------------------------------------------------------------------- item 10


def test_an_over_the_limit_path_sharing_its_key_is_reported_in_lint_with_line_and_fix() -> None:
    code, out, _ = cli("lint", str(LOOKUPS))
    assert code == 0
    spec = LOOKUPS / "spec.yaml"
    line = next(
        i for i, l in enumerate(spec.read_text().splitlines(), 1) if "node_id: N3_FINISH" in l
    )
    assert (
        f"{spec}:{line}:3: warning P001: unrealisable path END_DONE<-N3_FINISH (N1_ROUTE -> "
        "N2_DEEP -> N3_FINISH -> END_DONE)" in out
    )
    assert (
        "requires 4 tool calls in turn 1 (lookup, cross_check, audit, summarize) but "
        "max_tool_calls_per_turn is 3" in out
    )
    assert "fix: raise defaults.limits.max_tool_calls_per_turn" in out
    assert "0 error(s), 5 warning(s)" in out  # + L018: no branch routes the tools' timeouts


def test_an_over_the_limit_path_sharing_its_key_is_reported_in_run() -> None:
    code, out, _ = cli("run", str(LOOKUPS), "--kinds", "mft")
    # the key is realised by the quick path, but the thorough branches are not tested: incomplete
    assert code == 3
    # + the 4 tools' unrouted timeouts
    assert "not tested (6): branch N1_ROUTE#1 (over the call limit" in out
    assert "END_DONE<-N3_FINISH  PASS" in out
    assert (
        "note: unrealisable path: END_DONE<-N3_FINISH [N1_ROUTE -> N2_DEEP -> "
        "N3_FINISH -> END_DONE]" in out
    )


def test_run_report_lists_every_unrealisable_path(tmp_path: Path) -> None:
    import json

    report = tmp_path / "r.json"
    cli("run", str(LOOKUPS), "--kinds", "mft", "--json", str(report))
    problems = json.loads(report.read_text())["problems"]
    assert any(
        p.startswith("unrealisable path: END_DONE<-N3_FINISH [N1_ROUTE -> N2_DEEP")
        for p in problems
    )


def test_contradictory_paths_are_counted_not_dropped() -> None:
    project = load_project(SUPPORTOPS)
    [p] = [p for p in project.path_problems if p.code == "P003"]
    assert "more tree path(s) are impossible" in p.reason
    listed = [q for q in project.path_problems if q.code == "P001"]
    ids = [q.path_id for q in listed]
    assert "END_TICKET<-N9_UPDATE_ADDRESS" in ids and "END_REFUSE_PII<-N3_BILLING" in ids
    assert all(q.nodes and q.nodes[0] == "N1_INTENT" for q in listed)


# ----------------------------------------------------------------------------- item 11


def _expenseguard_copy(tmp_path: Path, outcomes: str) -> Path:
    copy = tmp_path / "expenseguard"
    shutil.copytree(EXPENSEGUARD, copy)
    bindings = copy / "agentprop.yaml"
    text = bindings.read_text()
    start = text.index("outcomes:")
    end = text.index("capabilities:")
    bindings.write_text(text[:start] + outcomes + "\n" + text[end:])
    return copy


def test_an_unmapped_leaf_is_an_error_in_run(tmp_path: Path) -> None:
    copy = _expenseguard_copy(
        tmp_path,
        "outcomes:\n  END_REJECT:\n    N4A_REJECT_DISALLOWED: REJECT_DISALLOWED\n  "
        "END_APPROVE: APPROVE_SUBMIT\n",
    )
    code, out, err = cli("run", str(copy), "--kinds", "mft")
    assert code == 2
    bindings = copy / "agentprop.yaml"
    line = next(
        i
        for i, l in enumerate(bindings.read_text().splitlines(), 1)
        if l.startswith("  END_REJECT:")
    )
    assert f"{bindings}:{line}:3:" in err
    assert "would check no decision: END_REJECT<-N6_DECIDE" in err
    assert (
        "fix: add `END_REJECT<-N6_DECIDE: DECISION` (DECISION one of "
        "REJECT_DISALLOWED, REJECT_POLICY)" in err
    )


def test_outcomes_keyed_by_leaf_and_via(tmp_path: Path) -> None:
    copy = _expenseguard_copy(
        tmp_path,
        "outcomes:\n  END_REJECT<-N4A_REJECT_DISALLOWED: REJECT_DISALLOWED\n  "
        "END_REJECT<-N6_DECIDE: REJECT_POLICY\n  END_APPROVE: APPROVE_SUBMIT\n",
    )
    project = load_project(copy)
    decisions = {s.id: s.expect_decision for s in project.scenarios()}
    assert decisions["END_REJECT<-N6_DECIDE"] == "REJECT_POLICY"
    assert decisions["END_REJECT<-N4A_REJECT_DISALLOWED"] == "REJECT_DISALLOWED"
    assert project.bindings.warnings == []
    code, out, _ = cli("run", str(copy), "--kinds", "mft")
    assert code == 0, out


def test_outcomes_leaf_via_key_is_validated(tmp_path: Path) -> None:
    from agentprop.errors import BindingsError

    copy = _expenseguard_copy(tmp_path, "outcomes:\n  END_REJECT<-N7_SUBMIT: REJECT_POLICY\n")
    with pytest.raises(BindingsError, match="'N7_SUBMIT' has no branch to END_REJECT") as exc:
        load_project(copy)
    assert "N4A_REJECT_DISALLOWED, N6_DECIDE" in str(exc.value)
    copy2 = _expenseguard_copy(tmp_path / "b", "outcomes:\n  END_REJECT<-N6_DECIDE: NOPE\n")
    with pytest.raises(BindingsError, match="unknown decision 'NOPE'"):
        load_project(copy2)


def test_a_loop_branch_whose_paths_were_not_selected_is_not_run_not_unrealised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a newcomer's finding: with --case, the branches line said "loops not realised ... (see the
    # notes)" for loops that were only not selected, and no note said anything about them
    from agentprop._cli import main

    root = Path(__file__).resolve().parents[1] / "examples" / "supportops"
    code = main(
        [
            "run",
            str(root),
            "--kinds",
            "mft",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
            "--corpus",
            "none",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    branches = next(line for line in out.splitlines() if line.startswith("branches:"))
    assert "loops not realised" not in branches and "N4_CLARIFY#0" in branches.split("not run:")[1]


def test_a_leaf_can_allow_several_decisions_the_first_expected(tmp_path: Path) -> None:
    """Issue #23 item 4: outcomes keyed by (leaf, via) take a list of the decisions the spec
    allows there. The first is what the case expects; any of them passes; a decision outside
    the list fails and the explanation names the others allowed."""
    both = (
        "outcomes:\n  END_REJECT<-N4A_REJECT_DISALLOWED: REJECT_DISALLOWED\n  "
        "END_REJECT<-N6_DECIDE: [REJECT_DISALLOWED, REJECT_POLICY]\n"
    )
    project = load_project(
        _expenseguard_copy(tmp_path / "both", both + "  END_APPROVE: APPROVE_SUBMIT\n")
    )
    [turn] = project.scenario("END_REJECT<-N6_DECIDE").turns
    assert (turn.expect_decision, turn.also_allowed) == ("REJECT_DISALLOWED", ["REJECT_POLICY"])
    assert (
        "also_allowed" in turn.model_dump()
        and "also_allowed" not in project.scenarios()[0].turns[0].model_dump()
    )
    code, out, _ = cli(
        "run",
        str(project.base_dir),
        "--kinds",
        "mft",
        "--case",
        "END_REJECT<-N6_DECIDE",
        "--corpus",
        "none",
    )
    assert code == 0, out  # the agent decides REJECT_POLICY, which the list allows
    only = (
        "outcomes:\n  END_REJECT<-N4A_REJECT_DISALLOWED: REJECT_DISALLOWED\n  "
        "END_REJECT<-N6_DECIDE: [REJECT_DISALLOWED, OPEN_CASE]\n"
    )
    code, out, _ = cli(
        "run",
        str(_expenseguard_copy(tmp_path / "one", only + "  END_APPROVE: APPROVE_SUBMIT\n")),
        "--kinds",
        "mft",
        "--case",
        "END_REJECT<-N6_DECIDE",
    )
    assert code == 1
    assert "(allowed there too: OPEN_CASE)" in out
    from agentprop.errors import BindingsError

    with pytest.raises(BindingsError, match="an empty list of decisions allows nothing"):
        load_project(
            _expenseguard_copy(
                tmp_path / "empty",
                "outcomes:\n  END_REJECT<-N6_DECIDE: []\n  END_APPROVE: APPROVE_SUBMIT\n",
            )
        )
