"""The report carries what the viewer shows (traces, failing step, world, tree), bounded; and
its renderers: JUnit (validated against the common JUnit XML shape), Markdown, the HTML's
escaping, and ``agentprop report``."""

from __future__ import annotations

import io
import json
import random
import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentprop import Verdict
from agentprop._agents.loading import load_agent
from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._decide.check import decide_scenario
from agentprop._decide.oracle import (
    FAILING_PER_RESULT,
    FAILING_PER_SIGNATURE,
    PASSING_PER_RESULT,
    OracleSettings,
    SampledRun,
    TrialRecord,
    decide,
)
from agentprop._decide.verdicts import record_for
from agentprop._pipeline.kinds import case_from_check, run_traces
from agentprop._pipeline.report import (
    render_html,
    render_junit,
    render_markdown,
    require_jinja2,
)
from agentprop._pipeline.report.html import diff_parts, script_json
from agentprop._pipeline.report.markdown import md
from agentprop._pipeline.report.model import SCHEMA_ID, RunReport
from agentprop._pipeline.run import Progress
from agentprop._scenario.trace import Trace, Turn
from agentprop._util.aio import run_sync
from benchmarks._support.synthetic_report import synthetic_report

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
JUNIT_XSD = Path(__file__).parent / "data" / "junit.xsd"
PAYLOAD = (
    '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><!-- & \u2028'
)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --- which runs a report keeps ------------------------------------------------------------


def test_kept_runs_are_the_first_failures_of_each_signature_and_a_passing_sample() -> None:
    """A seeded simulation with two failure signatures at known rates (30% and 20%): the
    decision keeps the first failing run of each signature, more of each up to the per-result
    cap, one passing run, in trial order; the rest are counted as left out."""

    def run_trial(i: int) -> Trace:
        return Trace(case_id="sim", trial=i, turns=[Turn(index=0, user_message=f"trial {i}")])

    def judge(trace: Trace) -> TrialRecord:
        u = random.Random(trace.trial).random()
        if u < 0.3:
            return TrialRecord(
                passed=False, signature="A", explanation="a", clause="clause.a", turn=0
            )
        if u < 0.5:
            return TrialRecord(
                passed=False, signature="B", explanation="b", clause="clause.b", turn=0, step=1
            )
        return TrialRecord(passed=True)

    result = decide(run_trial, OracleSettings(mode="fixed", runs=60, tau=0.9), judge=judge)
    outcomes = [judge(run_trial(i)) for i in range(60)]
    failing_a = [i for i, r in enumerate(outcomes) if r.signature == "A"]
    failing_b = [i for i, r in enumerate(outcomes) if r.signature == "B"]
    passing = [i for i, r in enumerate(outcomes) if r.passed]
    # the simulation has more than the caps
    assert len(failing_a) > FAILING_PER_SIGNATURE and len(failing_b) > FAILING_PER_SIGNATURE
    kept = result.sampled_runs
    trials = [r.trial for r in kept]
    assert trials == sorted(trials)
    kept_failing = [r for r in kept if not r.passed]
    assert len(kept_failing) == FAILING_PER_RESULT
    assert {r.trial for r in kept_failing if r.signature == "A"} == set(
        failing_a[:FAILING_PER_SIGNATURE]
    )
    assert {r.trial for r in kept_failing if r.signature == "B"} == set(
        failing_b[: FAILING_PER_RESULT - FAILING_PER_SIGNATURE]
    )
    assert [r.trial for r in kept if r.passed] == passing[:PASSING_PER_RESULT]
    b = next(r for r in kept if r.signature == "B")
    assert (b.clause, b.turn, b.step) == ("clause.b", 0, 1)
    assert Trace.model_validate_json(b.trace_json).trial == b.trial
    assert "sampled_runs" not in result.model_dump()  # the result's own JSON stays small


def test_a_failing_tool_call_is_located_by_turn_and_step_in_the_case_report() -> None:
    """A property that blames the second tool call of the first turn: the case report's kept
    run names turn 0, step 1, and its trace has that call."""
    project = load_project(SUPPORTOPS)
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")

    def second_call_is_wrong(trace: Trace) -> list[Verdict]:
        return [
            Verdict(
                passed=False,
                contract="args_satisfy",
                explanation="the second call is wrong",
                clause="tools.get_account",
                turn=0,
                step=1,
            )
        ]

    agent = load_agent("agent:SupportOpsAgent", SUPPORTOPS)
    result = run_sync(
        decide_scenario(
            project,
            scenario,
            agent,
            prop=second_call_is_wrong,
            settings=OracleSettings(mode="fixed", runs=5, tau=0.9),
        )
    )
    case = case_from_check(scenario.id, "MFT", scenario, result, {})
    assert case.verdict == "FAIL" and case.traces and case.traces_omitted == 5 - len(case.traces)
    run = case.traces[0]
    assert (run.passed, run.turn, run.step, run.clause) == (False, 0, 1, "tools.get_account")
    assert run.trace.turns[0].tool_calls[1].name == "get_account"
    assert case.world == scenario.world.model_dump(mode="json")


def test_a_failure_on_the_last_turn_counted_from_the_end_is_made_absolute() -> None:
    trace = Trace(turns=[Turn(index=0, user_message="a"), Turn(index=1, user_message="b")])
    runs = run_traces(
        [SampledRun(trial=3, passed=False, turn=-1, trace_json=trace.model_dump_json())],
        side="base",
    )
    assert (runs[0].turn, runs[0].side) == (1, "base")


def test_record_for_keeps_the_turn_and_step_of_the_first_failing_verdict() -> None:
    rec = record_for(
        [
            Verdict(passed=True, contract="a", explanation=""),
            Verdict(passed=False, contract="b", explanation="x", clause="c", turn=2, step=3),
        ]
    )
    assert (rec.turn, rec.step, rec.clause) == (2, 3, "c")


def test_the_run_report_carries_traces_tree_and_sampling(
    faulty_supportops_report: RunReport,
) -> None:
    report = faulty_supportops_report
    failing = [c for c in report.cases if c.verdict == "FAIL"]
    assert failing
    for case in failing:
        sigs = {f.signature for f in case.failures}
        failed_runs = [t for t in case.traces if not t.passed]
        assert failed_runs, case.id
        assert {t.signature for t in failed_runs} <= sigs
        assert all(
            t.clause and t.turn is not None and 0 <= t.turn < len(t.trace.turns)
            for t in failed_runs
        )
        assert len(case.traces) + case.traces_omitted == case.runs
    dirs = [c for c in report.cases if c.kind == "DIR"]
    assert dirs and all({t.side for t in c.traces} <= {"base", "perturbed"} for c in dirs)
    assert report.trace_sampling is not None
    assert report.trace_sampling.kept == sum(len(c.traces) for c in report.cases)
    assert report.trace_sampling.omitted == sum(c.traces_omitted for c in report.cases)
    assert report.trace_sampling.kept + report.trace_sampling.omitted == report.metrics.runs
    tree = report.tree
    assert tree is not None and tree.root == "N1_INTENT"
    branches = {b.id: b for n in tree.nodes for b in n.branches}
    assert branches["N3_BILLING#0"].status == "unrealisable"
    assert branches["N4_CLARIFY#0"].loop and branches["N6_CONFIRM_CANCEL#2"].loop
    assert (
        branches["N1_INTENT#0"].status == "taken"
        and branches["N1_INTENT#0"].next == "END_REFUSE_PII"
    )
    assert {n.id for n in tree.nodes if n.terminal} >= {"END_REFUSE_PII", "END_TICKET"}
    again = RunReport.model_validate_json(report.to_json())
    assert again.cases[0].traces == report.cases[0].traces and again.tree == report.tree


def test_branches_of_cases_left_out_by_case_filters_are_untaken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, _ = cli(
        "run",
        str(SUPPORTOPS),
        "--kinds",
        "mft",
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
        "--json",
        "r.json",
        "--corpus",
        "none",
    )
    assert code == 0
    tree = RunReport.model_validate_json((tmp_path / "r.json").read_text()).tree
    assert tree is not None
    status = {b.id: b.status for n in tree.nodes for b in n.branches}
    assert status["N3_BILLING#1"] == "taken" and status["N1_INTENT#3"] == "taken"
    assert status["N2_AUTH#0"] == "untaken" and status["N3_BILLING#0"] == "unrealisable"


# --- JUnit ---------------------------------------------------------------------------------


def test_junit_has_a_testcase_per_case_and_fits_the_common_junit_shape(
    faulty_supportops_report: RunReport,
) -> None:
    xmlschema = pytest.importorskip(
        "xmlschema", reason="xmlschema (the test extra) validates the JUnit shape"
    )
    report = faulty_supportops_report
    text = render_junit(report)
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(text)
    root = ET.fromstring(text.encode())
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    cases = [
        tc
        for name, s in suites.items()
        if not name.endswith(("unchecked paths", "mutants"))
        for tc in s.findall("testcase")
    ]
    assert [tc.get("name") for tc in cases] == [c.id for c in report.cases if c.kind == "MFT"] + [
        c.id for c in report.cases if c.kind == "DIR"
    ]
    by_name = {tc.get("name"): tc for tc in cases}
    not_passing = [c for c in report.cases if c.verdict in ("FAIL", "UNSTABLE", "INCONCLUSIVE")]
    assert int(root.get("failures")) == len(not_passing)
    shrunk = next(c for c in report.cases if c.shrunk)
    failure = by_name[shrunk.id].find("failure")
    assert failure is not None and failure.get("type") == shrunk.verdict
    message = failure.get("message")
    clause = shrunk.failures[0].clause
    assert clause and f"clause {clause}" in message
    assert f"pass rate {shrunk.pass_rate:.0%} ({shrunk.passes}/{shrunk.runs}" in message
    bug = next(b for b in report.bugs if b.id in shrunk.bugs)
    assert (
        bug.rate is not None
        and f"rate: {bug.rate_text}" in failure.text
        and f"fails {bug.rate.failures}/{bug.rate.runs}" in bug.rate_text
    )
    assert all(line in failure.text for line in bug.diff) and "minimal reproducer" in failure.text
    passing = next(c for c in report.cases if c.verdict == "PASS")
    assert by_name[passing.id].find("failure") is None
    unchecked = suites["supportops_v1 unchecked paths"].findall("testcase")
    assert len(unchecked) == len(report.problems) and all(
        tc.find("skipped") is not None for tc in unchecked
    )


def test_junit_escapes_markup_and_drops_what_xml_cannot_hold(
    faulty_supportops_report: RunReport,
) -> None:
    report = faulty_supportops_report.model_copy(deep=True)
    case = next(c for c in report.cases if c.verdict == "FAIL")
    case.id = "evil <case> & \x00\x1b"
    case.failures[0].explanation = PAYLOAD
    case.verdict = "INCONCLUSIVE"
    na = next(c for c in report.cases if c.verdict == "PASS")
    na.verdict, na.reason = "NOT APPLICABLE", "its base case does not pass"
    root = ET.fromstring(render_junit(report).encode())  # parses: nothing XML cannot hold
    tcs = {tc.get("name"): tc for tc in root.iter("testcase")}
    evil = tcs["evil <case> & \\x00\\x1b"].find("failure")
    assert (
        evil is not None
        and evil.get("type") == "INCONCLUSIVE"
        and "this is not a pass" in evil.get("message")
    )
    assert PAYLOAD in evil.text
    skipped = tcs[na.id].find("skipped")
    assert skipped is not None and "its base case does not pass" in skipped.get("message")


def test_junit_lists_mutants_a_survivor_fails() -> None:
    report = synthetic_report(cases=30, runs=300, seed=1)
    root = ET.fromstring(render_junit(report).encode())
    suite = next(s for s in root.findall("testsuite") if s.get("name", "").endswith("mutants"))
    statuses = {m["id"]: m["status"] for m in report.metrics.extra["tdad"]["mutation"]["mutants"]}
    for tc in suite.findall("testcase"):
        status = statuses[tc.get("name")]
        assert (tc.find("failure") is not None) == (status == "survived")
        assert (tc.find("skipped") is not None) == (
            status in ("vacuous", "non-activating", "inconclusive")
        )


# --- Markdown ------------------------------------------------------------------------------


def test_markdown_puts_bugs_first_then_verdicts_and_coverage(
    faulty_supportops_report: RunReport,
) -> None:
    report = faulty_supportops_report
    text = render_markdown(report)
    bugs, verdicts, coverage = (
        text.index("### Bugs"),
        text.index("### Verdicts"),
        text.index("### Coverage"),
    )
    assert bugs < verdicts < coverage
    found = [b for b in report.bugs if b.origin == "cases"]
    assert f"### Bugs ({len(found)})" in text
    for i, bug in enumerate(found, 1):
        assert f"**{i}. {md(bug.key)}** \\[{bug.id}\\]" in text
        assert bug.rate is None or (
            f"fails {bug.rate.failures}/{bug.rate.runs} " in bug.rate_text
            and md(bug.rate_text) in text
        )
    assert (
        f"| FAIL | {report.metrics.failed} |" in text
        and f"| PASS | {report.metrics.passed} |" in text
    )
    assert "unrealisable: N3\\_BILLING#0" in text
    assert text.startswith("## ❌ agentprop: SupportOps Agent")


def test_markdown_escapes_agent_text_and_fits_a_pr_comment() -> None:
    report = synthetic_report(cases=2000, runs=50_000, seed=3)
    report.bugs[0].diff = [
        "turn 1: [-x-] "
        + PAYLOAD
        + " [link](https://evil.example) ![i](https://evil.example/i.png)"
    ]
    text = render_markdown(report, max_chars=20_000)
    assert len(text) <= 20_000
    assert "<script>" not in text and "<img" not in text and "](https" not in text
    assert "&lt;script>" in text and "\\[link\\]\\(https://evil.example\\)" in text
    match = re.search(r"… and (\d+) more, left out to fit", text)
    not_passing = sum(c.verdict in ("FAIL", "UNSTABLE", "INCONCLUSIVE") for c in report.cases)
    assert match is not None
    shown = len(re.findall(r"^\| (?!case \||---)", text.split("<summary>")[1], re.MULTILINE))
    assert shown + int(match.group(1)) == not_passing


# --- HTML (static checks; the browser tests are in test_report_browser.py) -------------------


def test_embedded_json_cannot_close_its_script_element() -> None:
    data = {"text": PAYLOAD, "nested": [PAYLOAD, {"k</script>": "&amp;"}]}
    text = script_json(data)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == data


def test_html_is_one_file_with_no_reference_outside_it(faulty_supportops_report: RunReport) -> None:
    pytest.importorskip("jinja2", reason="the HTML report needs the report extra (jinja2)")
    html = render_html(faulty_supportops_report)
    without_ns = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)", without_ns)
    assert "http://" not in without_ns and "https://" not in without_ns
    assert html.count("<script") == 3 and html.count("</script>") == 3  # data, traces, the viewer
    csp = re.search(r"script-src '(sha256-[^']+)'", html)
    script = re.search(r"<script>(.*)</script>", html, re.DOTALL)
    assert csp and script
    import base64
    import hashlib

    assert (
        csp.group(1)
        == "sha256-" + base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    )


def test_server_rendered_parts_escape_report_text(faulty_supportops_report: RunReport) -> None:
    pytest.importorskip("jinja2", reason="the HTML report needs the report extra (jinja2)")
    report = faulty_supportops_report.model_copy(deep=True)
    report.bugs[0].diff = [f"turn 1: [-{PAYLOAD}-] kept"]
    report.bugs[0].key = PAYLOAD
    assert report.tree is not None
    report.tree.nodes[0].description = PAYLOAD
    report.spec.title = PAYLOAD
    html = render_html(report)
    head, _, _ = html.partition('<script type="application/json"')
    assert "<script>window.__pwned" not in head and "<img src=x" not in head
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned=1&lt;/script&gt;" in head
    assert diff_parts("turn 1: a [-b c-] {+d+} e") == [
        ("text", "turn 1: a "),
        ("del", "b c"),
        ("text", " "),
        ("ins", "d"),
        ("text", " e"),
    ]


def test_html_needs_jinja2_and_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(Exception, match=r"pip install 'agentprop\[report\]'"):
        require_jinja2()
    code, _, err = cli("run", str(SUPPORTOPS), "--html", "x.html")
    assert code == 2 and "agentprop[report]" in err


# --- agentprop report ----------------------------------------------------------------------


def test_agentprop_report_renders_a_json_report(
    faulty_supportops_report: RunReport, tmp_path: Path
) -> None:
    src = tmp_path / "run.json"
    src.write_text(faulty_supportops_report.to_json())
    code, out, _ = cli(
        "report",
        str(src),
        "--html",
        str(tmp_path / "r.html"),
        "--junit",
        str(tmp_path / "r.xml"),
        "--markdown",
        str(tmp_path / "r.md"),
    )
    assert code == 0
    for name in ("r.html", "r.xml", "r.md"):
        assert (tmp_path / name).stat().st_size > 1000 and f"written to {tmp_path / name}" in out
    assert (tmp_path / "r.md").read_text() == render_markdown(faulty_supportops_report)
    code, out, _ = cli("report", str(src), "--markdown", "-")
    assert code == 0 and out == render_markdown(faulty_supportops_report)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such report file"),
        ("{not json", "not JSON"),
        ('{"schema": "something/9"}', "not an agentprop report: its schema is 'something/9'"),
        (
            json.dumps({"schema": SCHEMA_ID, "agentprop_version": "x"}),
            f"not a valid {SCHEMA_ID} report",
        ),
    ],
)
def test_agentprop_report_refuses_bad_input_with_exit_2(
    tmp_path: Path, content: str | None, needle: str
) -> None:
    src = tmp_path / "run.json"
    if content is not None:
        src.write_text(content)
    code, _, err = cli("report", str(src), "--junit", str(tmp_path / "r.xml"))
    assert code == 2 and needle in err and "fix:" in err
    assert not (tmp_path / "r.xml").exists()


def test_agentprop_report_needs_an_output(tmp_path: Path) -> None:
    code, _, err = cli("report", str(tmp_path / "run.json"))
    assert code == 2 and "--html PATH, --junit PATH and/or --markdown PATH" in err


# --- progress without a terminal --------------------------------------------------------------


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_prints_a_line_every_interval_without_a_terminal() -> None:
    stream = _Stream(tty=False)
    progress = Progress(3, stream, interval_s=0.02).start()
    progress.update(runs=5, case_done=True)
    deadline = time.monotonic() + 10
    while stream.getvalue().count("\n") < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    progress.note("shrinking END_X<-N1 …")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3 and "\r" not in stream.getvalue()
    assert lines[0].startswith("agentprop: cases 1/3  runs judged 5")
    assert "agentprop: shrinking END_X<-N1 …" in lines
    after = stream.getvalue()
    time.sleep(0.1)
    assert stream.getvalue() == after  # closed: the heartbeat stopped


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    stream = _Stream(tty=True)
    progress = Progress(2, stream, interval_s=0.01).start()
    progress.update(runs=3, case_done=True)
    time.sleep(0.05)
    progress.close()
    text = stream.getvalue()
    assert (
        "\n" not in text
        and "\r\x1b[K  cases 1/2  runs judged 3" in text
        and text.endswith("\r\x1b[K")
    )


def test_progress_shows_no_eta_while_stages_are_still_to_plan() -> None:
    """A newcomer's finding: the total grows as each stage plans its cases, so an ETA computed
    early promised the end of the run at the end of the MFT cases."""
    stream = _Stream(tty=True)
    progress = Progress(4, stream, interval_s=0)
    # nothing done yet
    assert (
        progress.status().startswith("cases 0/4  runs judged 0") and "ETA" not in progress.status()
    )
    progress.to_plan = ["explore", "probe"]
    progress.update(runs=10, case_done=True)
    assert (
        "ETA" not in progress.status()
        and "cases 1/4+ (more to come from explore, probe)" in progress.status()
    )
    progress.planned(6, "explore", final=False)
    assert progress.total == 10 and "more to come from explore, probe)" in progress.status()
    progress.planned(0, "explore")
    progress.planned(5, "probe")
    assert progress.total == 15 and progress.to_plan == []
    assert "cases 1/15  runs judged 10" in progress.status() and "ETA" in progress.status()


def test_progress_counts_the_runs_of_a_case_still_running_from_the_budget() -> None:
    """Seen in throughput.py's log: one 200-run case printed ``runs 0`` for 20 s, because runs
    were counted only when a case finished. With the run's budget, the line shows every run
    started so far (and what they cost), counted from when the progress began."""
    from agentprop._modelapi.budget import Budget

    budget = Budget()
    for _ in range(3):  # runs from before this progress: not its own
        budget.start_run()
    progress = Progress(1, _Stream(tty=False), interval_s=0, budget=budget)
    assert progress.status().startswith("cases 0/1  runs started 0")
    for _ in range(7):
        budget.start_run()
    assert progress.status().startswith("cases 0/1  runs started 7")  # the case is still running
    progress.update(runs=7, case_done=True)
    assert progress.status().startswith("cases 1/1  runs started 7")  # not counted twice


def _bug_lines(original: int, kept: int) -> list[str]:
    from agentprop._pipeline.run import _shrunk_text

    return [_shrunk_text("EXPLORE X ~1", original, kept, 12)]


def test_the_shrink_line_says_when_there_was_nothing_to_remove() -> None:
    assert _bug_lines(9, 2) == ["shrunk EXPLORE X ~1: 9 -> 2 units in 12 runs"]
    assert _bug_lines(0, 0) == [
        "shrunk EXPLORE X ~1: nothing to remove (it is the path's default scenario, "
        "no choices) in 12 runs"
    ]
    assert _bug_lines(3, 3) == [
        "shrunk EXPLORE X ~1: none of its 3 units could be removed in 12 runs"
    ]


def test_a_report_from_before_traces_and_tree_says_what_it_lacks(
    faulty_supportops_report: RunReport,
) -> None:
    pytest.importorskip("jinja2", reason="the HTML report needs the report extra (jinja2)")
    old = json.loads(faulty_supportops_report.to_json())
    for key in ("tree", "trace_sampling"):
        old.pop(key)
    for case in old["cases"]:
        for key in ("traces", "traces_omitted", "world"):
            case.pop(key)
    html = render_html(RunReport.model_validate(old))
    assert "none: this report was written by an agentprop that did not keep traces" in html
    assert "did not report the tree" in html and "<svg" not in html
