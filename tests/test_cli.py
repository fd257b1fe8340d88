"""The command line: exit codes, output and the JSON report."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._pipeline.report.model import SCHEMA_ID, RunReport

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agentprop run keeps its corpus and API cache under ./.agentprop: each test gets its own."""
    monkeypatch.chdir(tmp_path)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_run_clean_agent_passes_every_case_and_names_what_it_did_not_test() -> None:
    code, out, _ = cli("run", str(SUPPORTOPS), "--kinds", "mft")
    # SupportOps' published spec has a dead branch, a path over the call limit, not_found
    # failures no branch routes and optional response fields its respond schema lacks: incomplete
    assert code == 3
    assert "not tested (15): branch N3_BILLING#0 (contradictory conditions" in out
    assert (
        "failure tools.verify_identity.failure_modes.not_found (declared, but no branch routes it"
        in out
    )
    assert (
        "field respond.ticket_id (optional in response_contract but not in the respond "
        "tool's input_schema (L021)" in out
    )
    assert "INCOMPLETE: every case passed" in out
    # 14 loop-free paths, 6 loop paths, 4 retry cases and 1 MC/DC case (N2_AUTH#2, atom 1)
    assert "25 cases: 25 passed, 0 failed" in out
    assert "END_CANCELLED<-N7_CANCEL" in out
    assert "unrealisable path" in out


def test_run_with_fault_exits_1_and_writes_a_valid_report(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code, out, _ = cli("run", str(SUPPORTOPS), "--fault", "skip_auth=1", "--json", str(report_path))
    assert code == 1
    data = json.loads(report_path.read_text())
    assert data["schema"] == SCHEMA_ID
    report = RunReport.model_validate(data)
    by_id = {c.id: c for c in report.cases}
    bad = by_id["END_CANCELLED<-N7_CANCEL"]
    assert bad.verdict == "FAIL" and bad.pass_rate == 0.0
    assert bad.failures[0].signature.startswith("calls_in_order:decision_tree.N2_AUTH")
    # a safety case (P2_AUTH_GATE) behind the default profile's screen: its first failure goes
    # to zero-failure certification, which stops there; the policy is not certified
    assert (bad.decided_by, bad.runs) == ("zero-failure", 1)
    assert (
        bad.rule
        == "ci: 2 clean runs, else zero-failure, 59 clean runs (safety: policies.P2_AUTH_GATE)"
    )
    # the policy is violated where it fails alone: a side question asked beside a request on
    # the refuse-auth path (a PROBE case), where the agent acts without verifying; elsewhere it
    # fails with other clauses, which cannot say which one the run broke
    auth = next(c for c in report.claims if c.policy == "P2_AUTH_GATE")
    assert auth.status == "violated" and auth.violating_cases
    for case_id in auth.violating_cases:
        clauses = {f.clause for f in by_id[case_id].failures}
        assert clauses == {"policies.P2_AUTH_GATE"}, (case_id, clauses)
    assert by_id["END_BILLING_ANSWER<-N3_BILLING"].verdict == "PASS"
    assert report.agent.faults == {"skip_auth": 1.0}
    assert report.metrics.failed >= 1 and report.metrics.runs == sum(c.runs for c in report.cases)
    assert set(data) >= {"spec", "agent", "cases", "metrics"}
    assert all({"id", "node", "verdict", "runs", "pass_rate"} <= set(c) for c in data["cases"])


def test_fixed_mode_runs_exactly_n(tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    code, _, _ = cli(
        "run",
        str(SUPPORTOPS),
        "--runs",
        "3",
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
        "--kinds",
        "mft",
        "--json",
        str(report_path),
    )
    report = RunReport.model_validate_json(report_path.read_text())
    assert (
        code == 0 and [c.runs for c in report.cases] == [3] and report.settings["mode"] == "fixed"
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "nowhere"], "file not found: nowhere"),
        (["run", str(SUPPORTOPS), "--fault", "nonsense=1"], "unknown fault knob(s) nonsense"),
        (["run", str(SUPPORTOPS), "--fault", "skip_auth=abc"], "is not a number"),
        (["run", str(SUPPORTOPS), "--agent", "no_such_module:X"], "cannot import module"),
        (["run", str(SUPPORTOPS), "--case", "NOPE"], "no case id contains NOPE"),
        (
            ["run", str(SUPPORTOPS), "--turn-timeout", "0"],
            "--turn-timeout 0 is not a positive, finite number of seconds",
        ),
        (["run", str(SUPPORTOPS), "--turn-timeout", "-1"], "--turn-timeout -1 is not a positive"),
        (["run", str(SUPPORTOPS), "--turn-timeout", "nan"], "--turn-timeout nan is not a positive"),
        (["run", str(SUPPORTOPS), "--turn-timeout", "inf"], "--turn-timeout inf is not a positive"),
    ],
)
def test_usage_and_input_errors_exit_2_with_a_fix(argv: list[str], message: str) -> None:
    code, _, err = cli(*argv)
    assert code == 2
    assert message in err


SLOW_AGENT = """
import time


class Slow:
    def turn(self, message, ctx):
        time.sleep(5)
        ctx.respond(decision="ESCALATE_TO_HUMAN", reason="slow")
"""


def test_turn_timeout_is_the_one_given_and_a_slow_turn_is_a_timeout_error(tmp_path: Path) -> None:
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    report_path = tmp_path / "r.json"
    argv = [
        "run",
        str(SUPPORTOPS),
        "--agent",
        f"{tmp_path / 'slow_agent.py'}:Slow",
        "--runs",
        "1",
        "--kinds",
        "mft",
        "--shrink-budget",
        "0",
    ]
    code, out, err = cli(
        *argv,
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
        "--turn-timeout",
        "1",
        "--json",
        str(report_path),
    )
    assert code == 1, out + err
    case = RunReport.model_validate_json(report_path.read_text()).cases[0]
    assert "the agent did not finish the turn within 1.0 s" in case.model_dump_json()


def test_lint_real_spec_lists_warnings_and_exits_0() -> None:
    code, out, _ = cli("lint", str(ROOT / "examples" / "expenseguard" / "spec.yaml"))
    assert code == 0
    assert "warning L001" in out and "END_REJECT" in out
    assert "0 error(s)" in out


def test_lint_reports_unrealisable_paths_with_bindings() -> None:
    code, out, _ = cli("lint", str(SUPPORTOPS))
    assert code == 0
    assert "P001" in out and "END_REFUSE_PII<-N3_BILLING" in out


def test_lint_spec_with_error_exits_1(tmp_path: Path) -> None:
    text = (
        (SUPPORTOPS / "spec.yaml").read_text().replace("next: END_CANCELLED", "next: N77_NOWHERE")
    )
    bad = tmp_path / "spec.yaml"
    bad.write_text(text)
    code, out, _ = cli("lint", str(bad))
    assert code == 1
    assert "error L001" in out and "N77_NOWHERE" in out


def test_console_script_is_installed_and_runs(tmp_path: Path) -> None:
    exe = shutil.which("agentprop")
    if exe is None:
        pytest.skip("the agentprop console script is not on PATH (package not installed)")
    before = _state_beside(SUPPORTOPS)
    # a subprocess does not see the suite's corpus fixture: without --corpus none it would replay
    # (and retire) the corpus entries a user's own runs of the example left beside its bindings
    proc = subprocess.run(
        [exe, "run", str(SUPPORTOPS), "--case", "BILLING", "--kinds", "mft", "--corpus", "none"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert _state_beside(SUPPORTOPS) == before  # the user's corpus, memo and cache untouched
    # the billing path, and the clarify loop that re-routes to it
    assert "2 cases: 2 passed" in proc.stdout


def _state_beside(project: Path) -> dict[str, int]:
    """What agentprop keeps beside a project (corpus, memo, cache): each file and its mtime."""
    root = project / ".agentprop"
    return (
        {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}
        if root.is_dir()
        else {}
    )


def test_no_subcommand_prints_help_and_exits_2() -> None:
    code, out, _ = cli()
    assert code == 2 and "run" in out and "lint" in out


def test_module_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentprop._cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "agentprop" in proc.stdout


def test_report_has_capability_matrix_and_branch_coverage(tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    cli("run", str(SUPPORTOPS), "--json", str(report_path))
    report = RunReport.model_validate_json(report_path.read_text())
    coverage = report.metrics.extra["coverage"]
    assert coverage["branches"]["loop"] == ["N4_CLARIFY#0", "N6_CONFIRM_CANCEL#2"]
    # unrolled once
    assert set(coverage["branches"]["loop"]) <= set(coverage["branches"]["covered"])
    assert set(coverage["branches"]["unrealisable"]) == {"N3_BILLING#0", "N9_UPDATE_ADDRESS#1"}
    # min_branch_coverage counts every branch, the untestable ones too
    assert coverage["branches"]["enforced"] == 22 / 24 and not coverage["branches"]["met"]
    assert coverage["branches"]["realisable"] == 1.0
    caps = coverage["capabilities"]
    # billing, and billing after clarify
    assert caps["single-step tools"] == {"cases": 2, "passed": 2}
    mft = [c for c in report.cases if c.kind == "MFT"]
    assert (
        sum(1 for c in mft if "error recovery" in c.capabilities) == caps["error recovery"]["cases"]
    )


def test_min_branch_coverage_is_enforced(tmp_path: Path) -> None:
    import agentprop
    from agentprop._pipeline.report.model import CaseReport
    from agentprop._pipeline.run import coverage_matrix

    project = agentprop.load_project(SUPPORTOPS)
    scenarios = project.scenarios()
    one = [
        CaseReport(
            id=s.id,
            node=s.leaf,
            verdict="PASS",
            runs=1,
            passes=1,
            pass_rate=1.0,
            branches=s.branches,
        )
        for s in scenarios[:3]
    ]
    cov = coverage_matrix(project, one)
    assert not cov["branches"]["met"] and cov["branches"]["not_run"]
    everything = [
        CaseReport(
            id=s.id,
            node=s.leaf,
            verdict="PASS",
            runs=1,
            passes=1,
            pass_rate=1.0,
            branches=s.branches,
        )
        for s in scenarios
    ]
    full = coverage_matrix(project, everything)["branches"]
    # every realisable branch taken, but two branches no case can reach: not met
    assert full["realisable"] == 1.0 and full["enforced"] == 22 / 24 and not full["met"]


def test_all_case_kinds_run_by_default_and_catch_the_boundary_bug(tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    code, out, _ = cli(
        "run", str(SUPPORTOPS), "--fault", "window_off_by_one=1", "--json", str(report_path)
    )
    assert code == 1
    report = RunReport.model_validate_json(report_path.read_text())
    kinds = {c.kind for c in report.cases}
    assert kinds == {"MFT", "EXPLORE", "PROBE", "BOUNDARY", "DIR", "INV"}
    failing = {c.id for c in report.cases if c.verdict != "PASS"}
    # the >= / > slip only shows where the order's age equals the window: every failing case
    # is a boundary or directional case around N5_CANCEL_ELIGIBILITY, never a plain MFT path
    assert failing and all(
        c.startswith(("BOUNDARY", "DIR")) and "N5_CANCEL_ELIGIBILITY" in c for c in failing
    )
    at_edge = next(
        c for c in report.cases if c.id.startswith("BOUNDARY order.days_since_created=30")
    )
    assert at_edge.verdict == "FAIL" and at_edge.details["edge"] == 30
    inv = [c for c in report.cases if c.kind == "INV"]
    assert inv and all(len(c.details["variants"]) == 2 for c in inv)
    assert "BOUNDARY cases: 9/11 passed" in out


def test_unknown_kind_is_a_usage_error() -> None:
    code, _, err = cli("run", str(SUPPORTOPS), "--kinds", "mft,fuzz")
    assert code == 2 and "unknown case kind(s) fuzz" in err


def test_spec_without_bindings_is_an_input_error_naming_the_variables(tmp_path: Path) -> None:
    (tmp_path / "spec.yaml").write_text((SUPPORTOPS / "spec.yaml").read_text())
    code, _, err = cli("run", str(tmp_path), "--agent", f"{SUPPORTOPS / 'agent'}:SupportOpsAgent")
    assert code == 2 and "no case can be built" in err and "agentprop.yaml" in err
    code, out, _ = cli("lint", str(tmp_path))
    assert code == 0 and "bind these condition variables: intent, verified" in out


def test_the_cache_mode_choices_are_the_cache_modes() -> None:
    """The parser lists the modes without importing the cache (the command line loads lazily)."""
    from agentprop._cli.options import CACHE_MODES
    from agentprop._modelapi.cache import CacheMode

    assert CACHE_MODES == tuple(m.value for m in CacheMode)


def test_building_the_parser_loads_no_pipeline() -> None:
    """`agentprop lint` and `agentprop --help` pay only for what they use: the command line's
    parser imports none of the pipeline, the oracle or the model code."""
    code = (
        "import sys; import agentprop._cli as c; c.parser(); "
        "heavy = sorted(m for m in sys.modules if m.startswith(('agentprop._pipeline.run', "
        "'agentprop._decide', 'agentprop._agents.loading', 'hypothesis', "
        "'anthropic'))); print(heavy)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip() == "[]", proc.stdout
