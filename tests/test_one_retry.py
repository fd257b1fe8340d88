"""Issue #23 item 1: one reading of a retry, and no case contradicts another.

A retry node of the tree and the tool's ``retry_policy`` that describe the same retry are one
retry: a lookup that times out once is called twice, not three times, and no separate policy
retry case expects something else of the same conversation and world. Two cases whose world and
conversation are the same so far but that expect different things are a spec error (P005),
citing both clauses, and neither is run as a case an agent could fail.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._judge.requirements import requirement_checks
from agentprop._scenario.build import Scenario, ScenarioTurn, WorldSpec, _conflict

ROOT = Path(__file__).resolve().parents[1]
PHARMACY = ROOT / "tests" / "data" / "promises" / "pharmacy"
LOOKUPS = ROOT / "tests" / "data" / "promises" / "unrealisable_paths"


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out, err=out)
    return code, out.getvalue()


def _pharmacy_with_a_retry_node(tmp_path: Path) -> Path:
    """N2_PRESCRIPTION retries a timed-out get_prescription through N2A_RETRY (which loops
    back), and get_prescription's retry_policy retries timeouts once: the same retry, twice."""
    work = tmp_path / "pharmacy"
    shutil.copytree(PHARMACY, work, ignore=shutil.ignore_patterns(".agentprop", "__pycache__"))
    spec = (work / "spec.yaml").read_text(encoding="utf-8")
    spec = spec.replace(
        "  branches:\n  - when: prescription.refills_left == 0\n",
        "  branches:\n  - when: rx_timeout == true\n    next: N2A_RETRY\n  - when: "
        "prescription.refills_left == 0\n",
    )
    spec = spec.replace(
        "- node_id: N3_INTERACTIONS\n",
        "- node_id: N2A_RETRY\n  description: The lookup timed out; read it once more.\n  "
        "requirements:\n    max_retries: 1\n  branches:\n  - when: otherwise\n    next: "
        "N2_PRESCRIPTION\n- node_id: N3_INTERACTIONS\n",
    )
    (work / "spec.yaml").write_text(spec, encoding="utf-8")
    bindings = (work / "agentprop.yaml").read_text(encoding="utf-8")
    bindings += (
        "  rx_timeout:\n    world:\n      tool: get_prescription\n      values:\n        false: "
        "{}\n        true: {failure: timeout, calls: [1]}\n"
    )
    (work / "agentprop.yaml").write_text(bindings, encoding="utf-8")
    return work


def test_a_retry_node_and_a_retry_policy_are_one_retry(tmp_path: Path) -> None:
    project = load_project(_pharmacy_with_a_retry_node(tmp_path))
    scenarios = project.scenarios()
    counts = {
        s.id: sum(t.required_tools.count("get_prescription") for t in s.turns) for s in scenarios
    }
    timed_out = {
        s.id: counts[s.id]
        for s in scenarios
        if any(f["tool"] == "get_prescription" for f in s.world.failures)
    }
    # the lookup times out once: called twice on every such case, never three times
    assert timed_out and set(timed_out.values()) == {2}, timed_out
    # the policy's own retry case would be the same conversation and world: not built
    assert not any(s.id.endswith("get_prescription:timeout+retry") for s in scenarios)
    review = next(
        s
        for s in scenarios
        if s.id.startswith("END_PHARMACIST_REVIEW<-N3_INTERACTIONS/N2A_RETRY#0")
    )
    # verify once (not again on the revisit: it did not fail), two lookups, interactions: 4
    # calls, within the limit of 4; read as two retries it was 6, and unrealisable
    assert review.turns[0].required_tools == [
        "verify_patient",
        "get_prescription",
        "get_prescription",
        "check_interactions",
    ]
    assert [
        p for p in project.path_problems if p.code in ("P001", "P005") and "N2A_RETRY" in p.render()
    ] == []


def test_the_retry_nodes_limit_counts_that_one_retry(tmp_path: Path) -> None:
    project = load_project(_pharmacy_with_a_retry_node(tmp_path))
    failures = [{"tool": "get_prescription", "mode": "timeout", "calls": [1]}]
    checks = requirement_checks(
        project.spec, ["N1_VERIFY", "N2_PRESCRIPTION", "N2A_RETRY", "N2_PRESCRIPTION"], failures
    )
    from agentprop._scenario.trace import ToolCall, Trace, Turn

    three = Trace(
        turns=[
            Turn(
                index=0,
                user_message="hi",
                tool_calls=[ToolCall(name="get_prescription", result={}) for _ in range(3)],
            )
        ]
    )
    verdicts = [check(three) for contract, _, check in checks if contract == "max_retries"]
    lookups = next(v for v in verdicts if "get_prescription" in v.explanation)
    assert not lookups.passed
    # 1 call + 1 retry: the retry_policy's retry is that retry, not one more
    assert lookups.explanation == "get_prescription was called 3 times: 2 retries, at most 1"


def test_lint_says_how_it_read_a_retry_described_twice(tmp_path: Path) -> None:
    work = _pharmacy_with_a_retry_node(tmp_path)
    code, out = cli("lint", str(work))
    line = next(
        i
        for i, text in enumerate((work / "spec.yaml").read_text(encoding="utf-8").splitlines(), 1)
        if "rx_timeout == true" in text
    )
    assert f"spec.yaml:{line}:" in out
    assert (
        "info L017: the retry of get_prescription after timeout is described twice: by "
        "N2_PRESCRIPTION's branch `rx_timeout == true` (to N2A_RETRY) and by get_prescription's "
        "retry_policy (retries 1 on timeout); read as one retry"
    ) in out
    assert "P001" not in out


# ----------------------------------------------------------------------------- contradictions


def _lookups_with_an_assumed_branch(tmp_path: Path) -> Path:
    """A branch on a variable nothing can realise (bound ``internal``): its case would share
    the quick case's conversation and world but expect another decision."""
    work = tmp_path / "lookups"
    shutil.copytree(LOOKUPS, work, ignore=shutil.ignore_patterns(".agentprop", "__pycache__"))
    spec = (work / "spec.yaml").read_text(encoding="utf-8")
    spec = spec.replace("enum: [DONE]", "enum: [DONE, VIP_DESK]").replace(
        "decision_enum: [DONE]", "decision_enum: [DONE, VIP_DESK]"
    )
    spec = spec.replace(
        "  - when: depth == quick\n",
        "  - when: vip == true and depth == quick\n    next: END_VIP_DESK\n  - "
        "when: depth == quick\n",
    )
    (work / "spec.yaml").write_text(spec, encoding="utf-8")
    (work / "agentprop.yaml").write_text(
        (work / "agentprop.yaml").read_text(encoding="utf-8") + "  vip: {internal: true}\n",
        encoding="utf-8",
    )
    return work


def test_two_cases_of_one_conversation_expecting_different_things_are_a_spec_error(
    tmp_path: Path,
) -> None:
    work = _lookups_with_an_assumed_branch(tmp_path)
    project = load_project(work)
    assert "END_VIP_DESK<-N1_ROUTE" not in {s.id for s in project.scenarios()}
    clash = next(p for p in project.path_problems if p.code == "P005")
    assert clash.path_id == "END_VIP_DESK<-N1_ROUTE vs END_DONE<-N3_FINISH"
    assert "turn 1: decision VIP_DESK vs DONE" in clash.reason
    assert (
        "decision_tree.N1_ROUTE.branches[0] `vip == true and depth == quick` against "
        "decision_tree.N1_ROUTE.branches[1] `depth == quick`" in clash.reason
    )
    code, out = cli("run", str(work), "--kinds", "mft", "--corpus", "none")
    assert "1 cases: 1 passed, 0 failed" in out  # never an agent failure
    assert code == 3
    assert (
        "branch N1_ROUTE#0 (contradictory cases: END_VIP_DESK<-N1_ROUTE vs END_DONE<-N3_FINISH"
        in out
    )
    code, out = cli("lint", str(work))
    assert (
        code == 1
        and "error P005: contradictory cases END_VIP_DESK<-N1_ROUTE vs END_DONE<-N3_FINISH" in out
    )


def _scenario(
    sid: str, messages: list[str], decisions: list[str], tools: list[list[str]]
) -> Scenario:
    turns = [
        ScenarioTurn(user_message=m, expect_decision=d, required_tools=t)
        for m, d, t in zip(messages, decisions, tools)
    ]
    return Scenario(id=sid, spec_id="s", leaf="END", path=[], turns=turns, world=WorldSpec())


def test_a_conflict_is_read_on_the_turns_the_conversations_share() -> None:
    one = _scenario("a", ["hi"], ["ASK"], [["lookup"]])
    longer = _scenario("b", ["hi", "yes"], ["ASK", "DONE"], [["lookup"], ["change"]])
    assert _conflict(one, longer) is None  # the same first turn, then more
    other_first = _scenario("c", ["hi", "yes"], ["DONE", "DONE"], [["lookup"], []])
    assert _conflict(one, other_first) == "turn 1: decision ASK vs DONE"
    more_calls = _scenario("d", ["hi"], ["ASK"], [["lookup", "lookup"]])
    assert _conflict(one, more_calls) == "turn 1: calls lookup vs lookup, lookup"
    assert _conflict(one, _scenario("e", ["hello"], ["DONE"], [[]])) is None  # another conversation
