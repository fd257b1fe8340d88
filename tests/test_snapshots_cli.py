"""Behaviour snapshots from the outside: ``agentprop snapshot ...`` and the pytest fixture."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentprop import load_project
from agentprop._cli import main
from agentprop._decide.snapshot import SnapshotStore

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
CASES = ("--case", "END_TICKET<-N7", "--case", "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY")


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the SupportOps example, so snapshots land in the test's tmp dir."""
    target = tmp_path / "supportops"
    shutil.copytree(
        EXAMPLE, target, ignore=shutil.ignore_patterns("__snapshots__", "__pycache__", ".agentprop")
    )
    monkeypatch.chdir(tmp_path)
    return target


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_record_review_approve_check_cycle(spec: Path) -> None:
    code, out, _ = cli("snapshot", "check", str(spec), *CASES)
    assert code == 1
    assert out.count(": NEW (no baseline") >= 2
    store = SnapshotStore(spec / "__snapshots__")
    names = sorted(c.name for c in store.pending())
    assert any(n.startswith("END_TICKET<-N7") for n in names) and store.baselines() == []

    code, out, _ = cli("snapshot", "review", str(spec))
    assert code == 0 and f"{len(names)} pending" in out and "pending END_TICKET<-N7_CANCEL" in out

    code, _, err = cli("snapshot", "approve", str(spec), "--all")
    assert code == 2 and "needs a reason" in err
    code, out, _ = cli(
        "snapshot", "approve", str(spec), "--all", "--reason", "the reference agent's behaviour"
    )
    assert code == 0 and out.count("approved ") == len(names)
    assert sorted(s.name for s in store.baselines()) == names and store.pending() == []

    code, out, _ = cli("snapshot", "check", str(spec), *CASES)
    assert code == 0
    assert f"{len(names)} snapshots: {len(names)} match" in out

    code, out, _ = cli("snapshot", "list", str(spec))
    assert code == 0 and out.count("the reference agent's behaviour") == len(names)
    code, out, _ = cli("snapshot", "show", str(spec), "END_TICKET<-N7")
    assert code == 0 and "approvals:" in out and "-> TICKET_CREATED" in out


def test_a_fault_is_caught_then_rejected_or_approved(spec: Path) -> None:
    cli(
        "snapshot",
        "check",
        str(spec),
        "--case",
        "END_TICKET<-N7",
        "--update",
        "--reason",
        "first baseline of the ticket path",
    )
    code, out, _ = cli(
        "snapshot",
        "check",
        str(spec),
        "--case",
        "END_TICKET<-N7",
        "--fault",
        "wrong_order=1",
        "--json",
        "r.json",
    )
    assert code == 1
    assert "CHANGED" in out and "tool order verify_identity, get_account" in out
    report = json.loads(Path("r.json").read_text(encoding="utf-8"))
    assert report["schema"] == "agentprop.snapshot-check/1"
    (result,) = report["results"]
    assert result["verdict"] == "CHANGED" and result["p_value"] < 0.05

    code, out, _ = cli("snapshot", "reject", str(spec), "END_TICKET<-N7")
    assert code == 0 and "rejected END_TICKET<-N7_CANCEL" in out
    assert SnapshotStore(spec / "__snapshots__").pending() == []

    cli("snapshot", "check", str(spec), "--case", "END_TICKET<-N7", "--fault", "wrong_order=1")
    code, _, _ = cli(
        "snapshot",
        "approve",
        str(spec),
        "TICKET<-N7",
        "--reason",
        "reading the account first is harmless",
    )
    assert code == 0
    code, out, _ = cli(
        "snapshot", "check", str(spec), "--case", "END_TICKET<-N7", "--fault", "wrong_order=1"
    )
    assert code == 0 and "MATCH" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reason", "why not, it is fine"], "--reason only applies with --update"),
        (["--update"], "needs a reason"),
        (["--runs", "0"], "--runs 0 must be at least 1"),
        (["--alpha", "2"], "--alpha 2.0 must be between 0 and 1"),
        (["--case", "NO_SUCH_CASE"], "no case id contains NO_SUCH_CASE"),
        (["--max-usd", "-1"], "--max-usd -1.0 must be >= 0"),
    ],
)
def test_bad_check_arguments_are_usage_errors(spec: Path, args: list[str], message: str) -> None:
    code, _, err = cli("snapshot", "check", str(spec), *args)
    assert code == 2 and message in err


def test_update_is_refused_under_ci(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    code, _, err = cli(
        "snapshot",
        "check",
        str(spec),
        "--case",
        "END_TICKET<-N7",
        "--update",
        "--reason",
        "first baseline of the path",
    )
    assert code == 2 and "CI is set" in err
    assert not (spec / "__snapshots__").exists()


def test_unknown_names_and_missing_actions_explain_themselves(spec: Path) -> None:
    code, _, err = cli(
        "snapshot", "approve", str(spec), "NOPE", "--reason", "a perfectly good reason"
    )
    assert (
        code == 2
        and "there are no pending snapshots in" in err
        and "agentprop snapshot check SPEC" in err
    )
    cli("snapshot", "check", str(spec), "--case", "END_TICKET<-N7")  # one pending candidate now
    code, _, err = cli(
        "snapshot", "approve", str(spec), "NOPE", "--reason", "a perfectly good reason"
    )
    assert (
        code == 2 and "no pending snapshot named 'NOPE'" in err and "END_TICKET<-N7_CANCEL" in err
    )
    code, _, err = cli("snapshot", "review", str(spec.parent / "no_such_dir"))
    assert code == 2 and "no such spec or snapshot directory" in err
    code, _, err = cli("snapshot", "reject", str(spec))
    assert code == 2 and "needs snapshot names or --all" in err
    code, _, err = cli("snapshot")
    assert code == 2 and "needs an action" in err


def test_the_max_runs_budget_makes_cases_inconclusive(spec: Path) -> None:
    code, out, _ = cli("snapshot", "check", str(spec), *CASES, "--max-runs", "15")
    assert code == 1
    assert "INCONCLUSIVE" in out
    # 15 runs: the first case gets its 10, the second only 5 -> nothing is written for it
    assert len(SnapshotStore(spec / "__snapshots__").pending()) == 1


# --- the pytest fixture --------------------------------------------------------------------


TEST_FILE = f"""
import agentprop
from pathlib import Path

EXAMPLE = Path({str(EXAMPLE)!r})
project = agentprop.load_project(EXAMPLE)


def test_ticket_path(agentprop_snapshot):
    faults = {{"wrong_order": 1.0}} if Path("faulty").exists() else {{}}
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, faults)
    agentprop_snapshot.check(project, "END_TICKET<-N7_CANCEL", agent, runs=8)
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--import-mode=importlib", *args)


def test_fixture_fails_new_then_approves_with_a_reason_then_matches(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_snap=TEST_FILE)
    store = SnapshotStore(pytester.path / "__snapshots__" / "test_snap")

    first = run(pytester)
    assert first.ret == 1
    first.stdout.fnmatch_lines(
        ["*NEW snapshot test_ticket_path*", "*agentprop snapshots*", "1 snapshots: 1 new"]
    )
    assert [c.name for c in store.pending()] == ["test_ticket_path"]

    usage = run(pytester, "--agentprop-snapshot-update")
    assert usage.ret == 4  # pytest's usage-error exit code
    usage.stderr.fnmatch_lines(["*needs a reason*"])

    approved = run(
        pytester,
        "--agentprop-snapshot-update",
        "--agentprop-snapshot-reason",
        "first baseline of the ticket path",
    )
    assert approved.ret == 0
    approved.stdout.fnmatch_lines(["1 snapshots: 1 updated"])
    (snap,) = store.baselines()
    assert snap.runs == 8 and snap.approvals[-1].reason == "first baseline of the ticket path"

    again = run(pytester)
    assert again.ret == 0
    again.stdout.fnmatch_lines(["1 snapshots: 1 match"])

    (pytester.path / "faulty").write_text("", encoding="utf-8")
    changed = run(pytester)
    assert changed.ret == 1
    changed.stdout.fnmatch_lines(
        ["*CHANGED*", "*tool order verify_identity, get_account*", "1 snapshots: 1 changed"]
    )
    assert store.load("test_ticket_path") == snap


# --- the shipped example baselines -----------------------------------------------------------


def test_the_example_baselines_match_the_reference_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # examples/supportops/__snapshots__ is what docs/snapshots.md shows; if normalisation or
    # the agent drifts, this fails (and leaves a pending candidate to review).
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in (EXAMPLE / "__snapshots__").iterdir())
    code, out, _ = cli("snapshot", "check", str(EXAMPLE))
    assert code == 0, out
    baselines = SnapshotStore(EXAMPLE / "__snapshots__").baselines()
    assert f"{len(baselines)} snapshots: {len(baselines)} match" in out
    assert len(baselines) == len(load_project(EXAMPLE).scenarios())
    assert sorted(p.name for p in (EXAMPLE / "__snapshots__").iterdir()) == before


def run_example_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, faults: str = ""
) -> pytest.RunResult:
    """``pytest examples/supportops/test_snapshots.py`` (in this process), CI unset and the
    agent's faults in ``AGENTPROP_FAULTS`` (read when the file is imported)."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("AGENTPROP_FAULTS", faults)
    # importlib mode: the example's test_snapshots.py is not this suite's tests/test_snapshots.py
    return pytester.runpytest_inprocess(
        str(EXAMPLE / "test_snapshots.py"),
        "-q",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "--rootdir",
        str(pytester.path),
    )


def test_the_example_snapshot_tests_pass_and_catch_the_wrong_order_fault(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean = run_example_file(pytester, monkeypatch)
    assert clean.ret == 0, clean.stdout.str() + clean.stderr.str()
    assert "2 snapshots: 2 match" in clean.stdout.str()
    faulty = run_example_file(pytester, monkeypatch, "wrong_order=1")
    try:
        assert faulty.ret == 1
        assert "tool order verify_identity, get_account" in faulty.stdout.str()
        assert "2 snapshots: 2 changed" in faulty.stdout.str()
    finally:  # the failing run leaves candidates beside the committed baselines: clean them up
        for pending in (EXAMPLE / "__snapshots__" / "test_snapshots").glob("*.pending.json"):
            pending.unlink()


# --- a model agent ----------------------------------------------------------------------------


def test_a_model_agent_snapshot_replays_from_the_cache_for_free(spec: Path, tmp_path: Path) -> None:
    # docs/snapshots.md: checks reuse the baseline's trial indices, so an unchanged model agent
    # behind the API cache replays exactly, matches with p = 1 and makes no request
    from test_anthropic_agent import AgentAsModel, SupportOpsAgent

    from agentprop.testing import MessagesServer

    project = load_project(spec)
    cache = tmp_path / "api.sqlite"
    with MessagesServer(
        handler=AgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    ) as server:
        model = [
            "--agent",
            "anthropic",
            "--model",
            "claude-sonnet-4-6",
            "--base-url",
            server.base_url,
            "--cache",
            str(cache),
        ]
        code, out, err = cli(
            "snapshot",
            "check",
            str(spec),
            "--case",
            "END_TICKET<-N7",
            "--runs",
            "4",
            *model,
            "--cache-mode",
            "read-write",
            "--update",
            "--reason",
            "baseline of the model agent",
        )
        assert code == 0 and "UPDATED" in out, out + err
        live = len(server.requests)
        assert live > 0
        code, out, err = cli(
            "snapshot",
            "check",
            str(spec),
            "--case",
            "END_TICKET<-N7",
            "--runs",
            "4",
            *model,
            "--cache-mode",
            "replay-only",
        )
        assert code == 0, out + err
        assert "MATCH" in out and "p=1.000" in out
        assert len(server.requests) == live
    (snap,) = SnapshotStore(spec / "__snapshots__").baselines()
    assert snap.agent == "anthropic:claude-sonnet-4-6" and snap.runs == 4


def test_the_fixture_passes_settings_on_to_check_snapshot(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentprop
    import agentprop._decide.snapshot_check
    from agentprop.pytest_plugin import SnapshotFixture

    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def check_snapshot(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(agentprop._decide.snapshot_check, "check_snapshot", check_snapshot)
    chosen = agentprop.settings(seed=7)
    with pytest.raises(Stop):
        SnapshotFixture(request).check(lambda messages: "ok", ["hi"], settings=chosen)
    assert seen["settings"] is chosen
