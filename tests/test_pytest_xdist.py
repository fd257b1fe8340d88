"""The plugin under pytest-xdist (issue #12 item 7): each worker's agentprop session is merged
into the controller's, which prints one summary for the whole run; the budget is one for
every worker."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("xdist")
pytest_plugins = ["pytester"]

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()

TESTS = f"""
import pytest
import agentprop

EXAMPLE = {str(EXAMPLE)!r}
project = agentprop.load_project(EXAMPLE)
CLEAN = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)
SKIPPER = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {{"skip_auth": 1.0}})


@pytest.mark.parametrize("i", range(4))
def test_clean(i):
    agentprop.check(project, "END_BILLING_ANSWER<-N3_BILLING", CLEAN, settings=agentprop.settings(mode="fixed", runs=3, seed=i))


@pytest.mark.parametrize("i", range(2))
def test_broken(i):
    agentprop.check(project, "END_CANCELLED<-N7_CANCEL", SKIPPER, settings=agentprop.settings(mode="fixed", runs=2, seed=i))
"""  # noqa: E501


def _totals(text: str) -> re.Match[str]:
    m = re.search(r"(\d+) checks, (\d+) passed; (\d+) new agent runs, (\d+) memo hits", text)
    assert m is not None, text
    return m


def test_the_controller_prints_one_summary_of_every_workers_checks(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_spread=TESTS)
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "--agentprop-shrink-budget",
        "0",
        "--agentprop-memo",
        "none",
    )
    result.assert_outcomes(passed=4, failed=2)
    text = result.stdout.str()
    totals = _totals(text)
    # 6 (test, case) pairs decided on two workers, all in the controller's one summary
    assert (int(totals[1]), int(totals[2])) == (6, 4)
    assert int(totals[3]) == 4 * 3 + 2 * 2
    assert text.count("== agentprop ==") == 1
    # the two failing checks are one bug (same signature), listed once
    assert re.search(r"1 bug\(s\)", text) and "hit by 2 check(s)" in text


HUNGRY = f"""
import pytest
import agentprop

EXAMPLE = {str(EXAMPLE)!r}
project = agentprop.load_project(EXAMPLE)
CLEAN = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)


@pytest.mark.parametrize("i", range(4))
def test_hungry(i):
    try:
        agentprop.check(project, "END_BILLING_ANSWER<-N3_BILLING", CLEAN, settings=agentprop.settings(mode="fixed", runs=6, seed=i))
    except agentprop.AgentPropertyViolation:
        pass  # a check the budget cut short is not a pass; what counts here is the runs made
"""  # noqa: E501


def test_one_budget_holds_for_every_worker(pytester: pytest.Pytester) -> None:
    # four checks want 24 runs in all; the limit is 10 for the whole run. Each worker with a
    # budget of its own would make 10 (20 on two workers).
    pytester.makepyfile(test_hungry=HUNGRY)
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "--agentprop-shrink-budget",
        "0",
        "--agentprop-memo",
        "none",
        "--agentprop-max-runs",
        "10",
    )
    text = result.stdout.str()
    assert int(_totals(text)[3]) == 10, text
