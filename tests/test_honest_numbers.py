"""Honest numbers (issue #23 item 8): a figure that was not measured is never printed as 0,
a rare failure gets enough confirmation runs (or the interval it can exclude), a bug that was
seen but not reconfirmed is still reported and saved, and every output prints the same
figures for the same bug."""

from __future__ import annotations

import html
import io
import json
import random
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._decide.corpus import Corpus
from agentprop._pipeline.report.markdown import md
from agentprop._pipeline.report.model import BugReport, FailureRate
from agentprop._shrink import Calibration, Outcome, Unit, runs_to_see, shrink, verify

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
SIG = "calls_in_order:clause@turn0:missing=x"


def kept(forest: tuple[Unit[int], ...]) -> frozenset[int]:
    out: set[int] = set()
    stack = list(forest)
    while stack:
        u = stack.pop()
        if u.children:
            stack.extend(u.children)
        else:
            out.add(u.value)
    return frozenset(out)


class Refusing:
    """Fails with SIG at rate ``p`` when unit 0 is kept; refuses every run after ``allowed``."""

    def __init__(self, p: float, allowed: int, seed: int = 0) -> None:
        self.p, self.allowed, self.seed, self.made = p, allowed, seed, 0

    def __call__(self, candidate: frozenset[int], trial: int) -> Outcome:
        if self.made >= self.allowed:
            return Outcome.refused()
        self.made += 1
        fails = (
            0 in candidate
            and random.Random(f"{self.seed}|{sorted(candidate)}|{trial}").random() < self.p
        )
        return Outcome.failure(SIG) if fails else Outcome.passed()


def test_a_refused_run_is_no_evidence_the_search_stops_unproven() -> None:
    # the old engine took a refused run for a clean one: "every remaining unit
    # was shown to be needed"
    oracle = Refusing(p=1.0, allowed=0)
    result = shrink(
        tuple(Unit(i) for i in range(4)),
        oracle,
        build=kept,
        budget=200,
        calibration=Calibration(runs=5, failures=5, signature=SIG),
    )
    assert result.runs == 0
    assert not result.minimal and result.budget_exhausted
    assert kept(result.units) == {0, 1, 2, 3}


def test_verify_counts_only_the_runs_made() -> None:
    oracle = Refusing(p=1.0, allowed=10**6)
    result = shrink(tuple(Unit(i) for i in range(3)), oracle, build=kept, budget=100)
    oracle.allowed = oracle.made + 12
    check = verify(result, oracle, runs=30)
    assert (check.reproducer.failures, check.reproducer.runs, check.refused) == (12, 12, 18)
    oracle.allowed = oracle.made
    none = verify(result, oracle, runs=30)
    assert (none.reproducer.runs, none.refused) == (0, 30)


def test_a_rare_failure_gets_the_runs_that_would_show_it() -> None:
    # true rate 3%: 30 clean runs would call it gone 40% of the time; 99 runs see it with 95%
    assert runs_to_see(0.03) == 99
    seen_fixed = seen_adaptive = 0
    for seed in range(200):
        oracle = Refusing(p=0.03, allowed=10**6, seed=seed)
        result = shrink(
            (Unit(0, protected=True),),
            oracle,
            build=kept,
            budget=200,
            calibration=Calibration(runs=100, failures=3, signature=SIG),
        )
        fixed = verify(result, oracle, runs=30)
        adaptive = verify(result, oracle, runs=30, see_rate=0.03, max_runs=300)
        seen_fixed += fixed.reproducer.failures > 0
        seen_adaptive += adaptive.reproducer.failures > 0
        assert adaptive.reproducer.runs == (
            30
            if adaptive.reproducer.failures and fixed.reproducer.failures
            else adaptive.reproducer.runs
        )
        assert adaptive.reproducer.runs <= 99
    assert seen_fixed / 200 < 0.75
    assert seen_adaptive / 200 >= 0.9


def bug(**kw: object) -> BugReport:
    return BugReport(id="b", key="k", signature=SIG, rate_of="reproducer", **kw)  # type: ignore[arg-type]


def test_a_figure_not_measured_is_never_a_zero() -> None:
    text = bug(
        rate=None,
        refused_runs=30,
        budget_spent="max_runs=60 reached",
        confirmed=False,
        case_rate=FailureRate(failures=4, runs=5, rate=0.8, interval=(0.38, 0.96)),
    ).rate_text
    assert " 0/" not in text and "(0%" not in text
    assert text == (
        "fresh runs of the reproducer: not measured (budget spent: max_runs=60 reached; 30 run(s) "
        "refused); the case failed 4/5 runs (80%, 95% CI 0.38-0.96)"
    )


def test_a_clean_confirmation_says_what_it_can_exclude() -> None:
    text = bug(
        rate=FailureRate(failures=0, runs=30, rate=0.0, interval=(0.0, 0.114)), confirmed=False
    ).rate_text
    assert "not reconfirmed, a rate above 0.11 is excluded (95%)" in text
    partial = bug(
        rate=FailureRate(failures=3, runs=12, rate=0.25, interval=(0.09, 0.53)),
        confirmed=True,
        refused_runs=18,
        budget_spent="max_runs=60 reached",
    )
    assert partial.rate_text == (
        "fails 3/12 fresh runs of the reproducer (25%, 95% CI 0.09-0.53); 18 more run(s) not "
        "measured (budget spent: max_runs=60 reached)"
    )


@pytest.fixture(scope="module")
def spent_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The issue's reproduction: the budget is spent before the bugs are confirmed."""
    out = tmp_path_factory.mktemp("spent")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(
        [
            "run",
            str(EXAMPLE),
            "--fault",
            "skip_auth=0.3",
            "--kinds",
            "mft",
            "--max-runs",
            "24",  # one run a case: the budget is spent before any shrinking or confirmation run
            "--shrink-budget",
            "10",
            "--corpus",
            str(out / "corpus"),
            "--json",
            str(out / "run.json"),
            "--html",
            str(out / "report.html"),
            "--junit",
            str(out / "junit.xml"),
            "--markdown",
            str(out / "summary.md"),
        ],
        out=stdout,
        err=stderr,
    )
    assert code != 0
    return out, stdout.getvalue()


def test_refused_runs_are_not_printed_as_clean_runs_in_any_output(
    spent_run: tuple[Path, str],
) -> None:
    out, terminal = spent_run
    report = json.loads((out / "run.json").read_text())
    bugs = [b for b in report["bugs"] if b["origin"] == "cases"]
    assert bugs
    page, junit, summary = (
        (out / n).read_text() for n in ("report.html", "junit.xml", "summary.md")
    )
    for b in bugs:
        text = b["rate_text"]
        assert "not measured (budget spent: max_runs=24 reached" in text, text
        assert b["confirmed"] is False and b["rate"] is None
        assert text in terminal
        assert html.escape(text) in page
        assert html.escape(text, quote=False) in junit or html.escape(text) in junit
        assert md(text) in summary
    for shown in (terminal, page, junit, summary):
        assert "fails 0/30" not in shown


def test_a_bug_not_reconfirmed_is_still_saved_marked_unconfirmed(
    spent_run: tuple[Path, str],
) -> None:
    out, terminal = spent_run
    entries = Corpus(out / "corpus").entries()
    assert entries and all(not e.confirmed and e.reproducer_rate is None for e in entries)
    assert "(unconfirmed: its reproducer did not fail again in fresh runs)" in terminal


def test_the_progress_line_says_the_budget_is_spent_instead_of_shrinking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the budget spent before shrinking, no shrinking run can start: the progress line
    says so and names the limit (it printed a bare "shrinking CASE …")."""
    argv = ["run", str(EXAMPLE), "--fault", "skip_auth=0.3", "--kinds", "mft", "--case", "N7"]
    argv += ["--max-runs", "3", "--shrink-budget", "10", "--corpus", "none"]
    assert main(argv, out=io.StringIO(), err=io.StringIO()) != 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "shrinking" in line]
    assert lines, "a bug was met and its shrink noted"
    for line in lines:
        assert "from runs already made only: the budget is spent (max_runs=3 reached" in line
        assert line.endswith("no new run starts"), line
