"""Behaviour snapshots: normalisation, diffs, the approval discipline, the store and the
statistics of "changed", with the SupportOps reference agent and its fault knobs.

Expected behaviours are derived from what the agent's knobs do (``wrong_order`` swaps the
first two tool calls, ``skip_auth`` drops ``verify_identity``), never copied from output.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import agentprop
import agentprop.snapshots
from agentprop import AgentPropertyViolation, InputError, InvalidArgument
from agentprop._decide.snapshot import (
    TEXT,
    Snapshot,
    SnapshotStore,
    behaviour_diff,
    behaviour_of,
    render_baseline,
    render_pending,
)
from agentprop._decide.snapshot_check import check_snapshot
from agentprop._scenario.trace import RunError, ToolCall, Trace, Turn
from agentprop._stats import categorical_two_sample_test
from agentprop.modelapi import Budget

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
TICKET = "END_TICKET<-N7_CANCEL"


@pytest.fixture(scope="module")
def project() -> agentprop.Project:
    return agentprop.load_project(EXAMPLE)


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Approvals are refused under CI; these tests approve on purpose unless they say so."""
    monkeypatch.delenv("CI", raising=False)


def agent(**faults: float) -> agentprop.LoadedAgent:
    return agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, faults)


def approve_first(
    project: agentprop.Project, directory: Path, **kw: object
) -> agentprop.snapshots.SnapshotResult:
    return check_snapshot(
        project,
        TICKET,
        agent(),
        directory=directory,
        update=True,
        reason="first baseline of the ticket path",
        **kw,
    )  # type: ignore[arg-type]


# --- behaviours ---------------------------------------------------------------------------


def trace_with(
    *turns: Turn, canaries: dict[str, str] | None = None, errors: list[RunError] | None = None
) -> Trace:
    return Trace(turns=list(turns), canaries=canaries or {}, errors=errors or [])


def test_free_text_and_canaries_are_normalised_and_ids_kept() -> None:
    turn = Turn(
        index=0,
        user_message="hi",
        tool_calls=[
            ToolCall(
                name="create_ticket",
                args={
                    "category": "cancel_failed",
                    "summary": "cancel failed for O-1",
                    "ref": "SSN_CANARY_1",
                    "count": 2,
                },
            )
        ],
        response={
            "decision": "TICKET_CREATED",
            "node_id": "END_TICKET",
            "user_message": "I've opened a ticket.",
            "evidence": "x" * (agentprop._decide.snapshot.TEXT_LIMIT + 1),
        },
    )
    b = behaviour_of(trace_with(turn, canaries={"get_account.pii.ssn": "SSN_CANARY_1"}))
    (t,) = b.turns
    assert t.decision == "TICKET_CREATED"
    assert "decision" not in t.response
    assert t.response == {"evidence": TEXT, "node_id": "END_TICKET", "user_message": TEXT}
    assert t.tools[0].args == {
        "category": "cancel_failed",
        "count": 2,
        "ref": "<canary:get_account.pii.ssn>",
        "summary": TEXT,
    }


def test_runs_that_differ_only_in_free_text_and_canaries_share_a_key() -> None:
    def run(text: str, canary: str) -> Trace:
        return trace_with(
            Turn(
                index=0,
                user_message="u",
                tool_calls=[ToolCall(name="lookup", args={"id": "A1", "note": canary})],
                response={"decision": "D", "user_message": text},
            ),
            canaries={"f": canary},
        )

    assert (
        behaviour_of(run("Sure, done.", "C_1")).key
        == behaviour_of(run("All done, thanks!", "C_2")).key
    )
    changed = trace_with(
        Turn(
            index=0,
            user_message="u",
            tool_calls=[ToolCall(name="lookup", args={"id": "A2"})],
            response={"decision": "D"},
        )
    )
    assert behaviour_of(changed).key != behaviour_of(run("x y", "C_1")).key


def test_ignore_patterns_drop_fields_arguments_and_tools() -> None:
    t = trace_with(
        Turn(
            index=0,
            user_message="u",
            tool_calls=[
                ToolCall(name="create_ticket", args={"ticket": "T-5001", "category": "c"}),
                ToolCall(name="log_event", args={"id": "E1"}),
            ],
            response={"decision": "D", "ticket_id": "T-5001", "node_id": "N"},
        )
    )
    b = behaviour_of(t, ignore=["response.ticket_id", "tools.create_ticket.ticket", "tools.log_*"])
    (turn,) = b.turns
    assert turn.response == {"node_id": "N"}
    assert [(c.name, c.args) for c in turn.tools] == [("create_ticket", {"category": "c"})]


def test_errors_are_part_of_the_behaviour() -> None:
    ok = trace_with(Turn(index=0, user_message="u", response={"decision": "D"}))
    broken = trace_with(
        Turn(index=0, user_message="u", response={"decision": "D"}),
        errors=[RunError(kind="timeout", message="slow")],
    )
    assert behaviour_of(broken).turns[-1].errors == ["timeout"]
    assert behaviour_of(ok).key != behaviour_of(broken).key


def test_diff_names_tools_steps_order_arguments_decisions_and_fields() -> None:
    def b(
        tools: list[tuple[str, dict[str, object]]], decision: str, **response: object
    ) -> agentprop.snapshots.Behaviour:
        return behaviour_of(
            trace_with(
                Turn(
                    index=0,
                    user_message="u",
                    tool_calls=[ToolCall(name=n, args=a) for n, a in tools],
                    response={"decision": decision, **response},
                )
            )
        )

    base = b([("verify", {"zip": "94107"}), ("account", {}), ("rules", {})], "ASK", node_id="N6")
    assert behaviour_diff(base, base) == []
    skipped = behaviour_diff(base, b([("account", {}), ("rules", {})], "ASK", node_id="N6"))
    assert skipped == ["turn 1: tools removed: verify", "turn 1: steps 3 -> 2"]
    swapped = behaviour_diff(
        base, b([("account", {}), ("verify", {"zip": "94107"}), ("rules", {})], "ASK", node_id="N6")
    )
    assert swapped == ["turn 1: tool order verify, account, rules -> account, verify, rules"]
    moved = behaviour_diff(
        base,
        b(
            [("verify", {"zip": "10001"}), ("account", {}), ("rules", {}), ("cancel", {})],
            "CANCELLED",
            node_id="N7",
        ),
    )
    assert moved == [
        "turn 1: tools added: cancel",
        "turn 1: steps 3 -> 4",
        "turn 1: verify.zip: 94107 -> 10001",
        "turn 1: decision ASK -> CANCELLED",
        "turn 1: response.node_id: N6 -> N7",
    ]


# --- the approval discipline ----------------------------------------------------------------


def test_missing_baseline_fails_and_leaves_a_pending_candidate(
    project: agentprop.Project, tmp_path: Path
) -> None:
    with pytest.raises(AgentPropertyViolation, match="NEW") as info:
        check_snapshot(project, TICKET, agent(), directory=tmp_path)
    result = info.value.result
    assert result.verdict == "NEW"
    assert not Path(result.path).exists()
    pending = SnapshotStore(tmp_path).load_pending(TICKET)
    assert pending is not None and pending.runs == 10
    assert "agentprop snapshot approve" in str(info.value)


@pytest.mark.parametrize("reason", [None, "", "   ", "ok"])
def test_update_without_a_real_reason_is_refused(
    project: agentprop.Project, tmp_path: Path, reason: str | None
) -> None:
    with pytest.raises(InputError, match="needs a reason"):
        check_snapshot(project, TICKET, agent(), directory=tmp_path, update=True, reason=reason)
    assert not any(tmp_path.iterdir())


def test_approvals_are_refused_under_ci(
    project: agentprop.Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(InputError, match="CI is set"):
        approve_first(project, tmp_path)
    result = approve_first(project, tmp_path, allow_ci=True)
    assert result.verdict == "UPDATED"


def test_first_approval_records_who_why_and_what(
    project: agentprop.Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTPROP_APPROVER", "ana")
    result = approve_first(project, tmp_path)
    assert result.verdict == "UPDATED" and result.passed
    snap = SnapshotStore(tmp_path).load(TICKET)
    assert snap is not None
    (approval,) = snap.approvals
    assert (approval.by, approval.reason, approval.replaced) == (
        "ana",
        "first baseline of the ticket path",
        None,
    )
    assert approval.counts == snap.counts and sum(snap.counts.values()) == 10
    # the clean agent is deterministic on this path: one behaviour, with its example trace
    (record,) = snap.behaviours
    assert record.example.case_id == TICKET
    assert [t.decision for t in record.behaviour.turns] == ["ASK_CONFIRM_CANCEL", "TICKET_CREATED"]


def test_a_matching_run_never_rewrites_the_baseline(
    project: agentprop.Project, tmp_path: Path
) -> None:
    approve_first(project, tmp_path)
    path = SnapshotStore(tmp_path).path(TICKET)
    before = path.read_bytes()
    for seed in range(3):
        result = check_snapshot(
            project, TICKET, agent(), directory=tmp_path, settings=agentprop.settings(seed=seed)
        )
        assert result.verdict == "MATCH" and result.p_value == 1.0
    again = check_snapshot(
        project,
        TICKET,
        agent(),
        directory=tmp_path,
        update=True,
        reason="nothing should change here",
    )
    assert again.verdict == "MATCH"
    assert path.read_bytes() == before
    assert not SnapshotStore(tmp_path).pending()


def test_a_changed_behaviour_fails_with_the_diff_and_approval_replaces_the_baseline(
    project: agentprop.Project, tmp_path: Path
) -> None:
    approve_first(project, tmp_path)
    store = SnapshotStore(tmp_path)
    old = store.load(TICKET)
    assert old is not None
    with pytest.raises(AgentPropertyViolation) as info:
        check_snapshot(project, TICKET, agent(wrong_order=1.0), directory=tmp_path)
    result = info.value.result
    assert result.verdict == "CHANGED" and result.p_value < 0.05
    (new, gone) = sorted(result.changes, key=lambda c: c.baseline_count)
    assert (new.baseline_count, new.current_count, new.nearest) == (0, 10, old.behaviours[0].key)
    assert (
        "turn 1: tool order verify_identity, get_account, get_plan_rules -> get_account, "
        "verify_identity, get_plan_rules" in new.diff
    )
    assert (gone.baseline_count, gone.current_count) == (10, 0)
    assert store.load(TICKET) == old  # the baseline is untouched until someone approves
    update = check_snapshot(
        project,
        TICKET,
        agent(wrong_order=1.0),
        directory=tmp_path,
        update=True,
        reason="get_account first is fine: it is read-only",
    )
    assert (
        update.verdict == "UPDATED" and f"p={update.p_value:.4f} < alpha=0.05" in update.summary()
    )
    store.save(old)  # back to the old baseline, then approve the pending candidate instead
    check_snapshot(
        project, TICKET, agent(wrong_order=1.0), directory=tmp_path, raise_on_failure=False
    )
    approved = store.approve(TICKET, "get_account first is fine: it is read-only", by="ana")
    assert [a.reason for a in approved.approvals] == [
        "first baseline of the ticket path",
        "get_account first is fine: it is read-only",
    ]
    assert approved.approvals[-1].replaced == old.counts
    assert store.load_pending(TICKET) is None
    assert (
        check_snapshot(project, TICKET, agent(wrong_order=1.0), directory=tmp_path).verdict
        == "MATCH"
    )


def test_pending_and_baseline_render_for_review(project: agentprop.Project, tmp_path: Path) -> None:
    approve_first(project, tmp_path)
    check_snapshot(
        project, TICKET, agent(skip_confirm=1.0), directory=tmp_path, raise_on_failure=False
    )
    store = SnapshotStore(tmp_path)
    (candidate,) = store.pending()
    text = render_pending(candidate, store.load(TICKET))
    assert text.startswith(f"pending {TICKET}")
    assert "turn 1: tools added: cancel_order" in text
    shown = render_baseline(store.load(TICKET))  # type: ignore[arg-type]
    assert "first baseline of the ticket path (first baseline)" in shown
    store.discard_pending(TICKET)
    assert store.pending() == []


def test_new_ignore_patterns_need_a_re_recording(
    project: agentprop.Project, tmp_path: Path
) -> None:
    approve_first(project, tmp_path)
    with pytest.raises(
        InputError,
        match="(?s)recorded with ignore patterns \\[\\], not "
        "\\['response.node_id'\\].*--update --reason",
    ):
        check_snapshot(project, TICKET, agent(), directory=tmp_path, ignore=["response.node_id"])
    redone = check_snapshot(
        project,
        TICKET,
        agent(),
        directory=tmp_path,
        ignore=["response.node_id"],
        update=True,
        reason="node ids are renamed in the next spec version",
    )
    assert redone.verdict == "UPDATED" and any("re-recorded" in n for n in redone.notes)
    snap = SnapshotStore(tmp_path).load(TICKET)
    assert snap is not None and snap.ignore == ["response.node_id"] and len(snap.approvals) == 2
    assert all("node_id" not in t.response for r in snap.behaviours for t in r.behaviour.turns)
    assert (
        check_snapshot(
            project, TICKET, agent(), directory=tmp_path, ignore=["response.node_id"]
        ).verdict
        == "MATCH"
    )
    with pytest.raises(InvalidArgument, match="ignore pattern 'node_id' matches nothing"):
        check_snapshot(project, TICKET, agent(), directory=tmp_path, ignore=["node_id"])


def test_a_snapshot_of_another_case_under_the_same_name_is_an_input_error(
    project: agentprop.Project, tmp_path: Path
) -> None:
    approve_first(project, tmp_path)
    with pytest.raises(InputError, match="different case .*messages"):
        check_snapshot(project, TICKET, agent(), directory=tmp_path, messages=["hello", "yes"])
    other = check_snapshot(
        project,
        TICKET,
        agent(),
        directory=tmp_path,
        messages=["hello", "yes"],
        name="greeting",
        raise_on_failure=False,
    )
    assert other.verdict == "NEW"


def test_budget_exhaustion_is_inconclusive_and_writes_nothing(
    project: agentprop.Project, tmp_path: Path
) -> None:
    budget = Budget(max_runs=4)
    result = check_snapshot(
        project, TICKET, agent(), directory=tmp_path, budget=budget, raise_on_failure=False
    )
    assert (result.verdict, result.runs) == ("INCONCLUSIVE", 4)
    assert not result.passed
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("kw", "message"), [({"runs": 0}, "runs=0"), ({"alpha": 1.5}, "alpha=1.5")]
)
def test_bad_arguments_are_invalid(
    project: agentprop.Project, tmp_path: Path, kw: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        check_snapshot(project, TICKET, agent(), directory=tmp_path, **kw)  # type: ignore[arg-type]


# --- the store -----------------------------------------------------------------------------


def test_names_map_to_distinct_safe_files(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    a, b = store.path("END<-N1/N2#1"), store.path("END<-N1_N2_1")
    assert a != b and a.parent == b.parent == tmp_path
    assert store.path("plain_name").name == "plain_name.json"


def test_corrupt_or_foreign_files_are_input_errors_with_the_location(
    project: agentprop.Project, tmp_path: Path
) -> None:
    approve_first(project, tmp_path)
    store = SnapshotStore(tmp_path)
    path = store.path(TICKET)
    path.write_text('{"schema": "agentprop.snapshot/1",\n  "name": }', encoding="utf-8")
    with pytest.raises(InputError, match=rf"{path.name}:2:\d+: not valid JSON") as info:
        store.load(TICKET)
    assert "restore the file" in str(info.value)
    path.write_text(json.dumps({"schema": "something/else"}), encoding="utf-8")
    with pytest.raises(InputError, match="not an agentprop snapshot"):
        store.load(TICKET)
    path.write_text(
        json.dumps({"schema": "agentprop.snapshot/1", "name": TICKET}), encoding="utf-8"
    )
    with pytest.raises(InputError, match="invalid snapshot"):
        store.load(TICKET)


def test_writes_leave_no_temporary_files(project: agentprop.Project, tmp_path: Path) -> None:
    approve_first(project, tmp_path)
    check_snapshot(
        project, TICKET, agent(wrong_order=1.0), directory=tmp_path, raise_on_failure=False
    )
    assert sorted(p.name.endswith(".tmp") for p in tmp_path.iterdir()) == [False, False]


def test_snapshot_files_round_trip(project: agentprop.Project, tmp_path: Path) -> None:
    approve_first(project, tmp_path)
    path = SnapshotStore(tmp_path).path(TICKET)
    snap = Snapshot.model_validate_json(path.read_text(encoding="utf-8"))
    assert snap.to_json() == path.read_text(encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8"))["schema"] == "agentprop.snapshot/1"


# --- statistics ----------------------------------------------------------------------------


def test_unchanged_noisy_behaviour_raises_false_alarms_at_most_at_alpha(
    project: agentprop.Project, tmp_path: Path
) -> None:
    # skip_auth=0.5: two behaviours, half and half. Baseline and check draw fresh samples
    # (different seeds) from the same agent, so every CHANGED is a false alarm. The exact
    # test is conservative: the rate must not exceed alpha = 0.05 beyond 3 binomial standard
    # errors over 200 repetitions (a true rate of 0.05 exceeds that bound with p < 0.002).
    noisy = agent(skip_auth=0.5)
    reps, alarms = 200, 0
    for rep in range(reps):
        directory = tmp_path / str(rep)
        check_snapshot(
            project,
            TICKET,
            noisy,
            directory=directory,
            update=True,
            reason="baseline of the noisy agent",
            settings=agentprop.settings(seed=2 * rep),
        )
        result = check_snapshot(
            project,
            TICKET,
            noisy,
            directory=directory,
            settings=agentprop.settings(seed=2 * rep + 1),
            raise_on_failure=False,
        )
        alarms += result.verdict == "CHANGED"
    assert alarms / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)


def test_detection_rate_matches_the_exact_tests_power(
    project: agentprop.Project, tmp_path: Path
) -> None:
    # Baseline: the clean agent (one behaviour, 10/10). Check: skip_auth=0.5, so the number
    # X of runs with the new behaviour is Binomial(10, 0.5), and the snapshot is CHANGED
    # exactly when the two-sample test of [10, 0] against [10 - X, X] rejects. Theory:
    # power = sum over x of P(X = x) * [p(x) < alpha].
    alpha = 0.05
    pvalues = {
        x: categorical_two_sample_test(
            {"old": 10}, {"old": 10 - x, "new": x} if x < 10 else {"new": 10}, seed=0
        )
        for x in range(11)
    }
    power = sum(math.comb(10, x) * 0.5**10 for x in range(11) if pvalues[x] < alpha)
    approve_first(project, tmp_path)
    reps, detected = 300, 0
    for seed in range(reps):
        result = check_snapshot(
            project,
            TICKET,
            agent(skip_auth=0.5),
            directory=tmp_path,
            settings=agentprop.settings(seed=seed),
            raise_on_failure=False,
        )
        detected += result.verdict == "CHANGED"
    assert abs(detected / reps - power) <= 3 * math.sqrt(power * (1 - power) / reps)


def test_small_differences_are_reported_even_when_not_significant(
    project: agentprop.Project, tmp_path: Path
) -> None:
    approve_first(project, tmp_path)
    # find a seed where skip_auth=0.2 skipped in only one or two runs of ten: not significant
    for seed in range(50):
        result = check_snapshot(
            project,
            TICKET,
            agent(skip_auth=0.2),
            directory=tmp_path,
            settings=agentprop.settings(seed=seed),
            raise_on_failure=False,
        )
        if result.verdict == "MATCH" and result.changes:
            break
    else:  # pragma: no cover - P(no such seed in 50) is below 1e-20
        pytest.fail("no seed produced a non-significant difference")
    assert any("not beyond sampling noise" in n for n in result.notes)
    assert "new behaviour" in result.summary()


def test_public_api_exports() -> None:
    import agentprop.snapshots

    for name in (
        "check_snapshot",
        "SnapshotResult",
        "SnapshotStore",
        "Snapshot",
        "Behaviour",
        "behaviour_of",
    ):
        assert hasattr(agentprop.snapshots, name), name
    assert agentprop.check_snapshot is agentprop.snapshots.check_snapshot
    assert agentprop.check_snapshot.__module__ == "agentprop._decide.snapshot_check"
