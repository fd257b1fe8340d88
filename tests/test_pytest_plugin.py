"""The pytest plugin (``agentprop.pytest_plugin``) seen from the outside.

Every test writes a small test file into a ``pytester`` sandbox and runs pytest on it, in this
process (``run``): the plugin's session is made current at configure and the outer one is
current again at unconfigure, so an inner session leaves this one alone (the last test shows
it). Generated files load ``examples/supportops`` by absolute path and report
what they saw through ``results.jsonl`` in the sandbox; the outer test compares that, the
exit code and the terminal output with what the options, marker and fixtures promise.
Expected numbers are derived (Wald's SPRT boundary, the Wilson interval, the memo's keying,
the agent's fault semantics), never copied from a previous run's output.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from hypothesis import core as hypothesis_core

from agentprop import load_project
from agentprop.oracle import CorpusEntry
from agentprop.phrases import apply_transforms
from agentprop.pytest_plugin import PROFILES

pytest_plugins = ["pytester"]

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
CANCEL_ID = "END_CANCELLED<-N7_CANCEL"

PREAMBLE = f"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import core as hypothesis_core
from hypothesis import given, strategies as st

import agentprop
import agentprop.scenarios
import agentprop.oracle
import agentprop.modelapi
import agentprop.contracts
from agentprop import strategies as aps

EXAMPLE = Path({str(EXAMPLE)!r})
project = agentprop.load_project(EXAMPLE)
CANCEL = project.scenario({CANCEL_ID!r})
BASE = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE).factory  # the class itself


def agent(**faults):
    return agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, faults)


def record(name, **data):
    with open("results.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({{"name": name, **data}}) + "\\n")
"""

TOTALS = re.compile(
    r"^(\d+) checks, (\d+) passed; (\d+) new agent runs, (\d+) memo hits, \$(\d+\.\d+)(.*)$"
)
ROW = re.compile(
    r"^(?P<label>.+?)\s{2,}(?P<verdict>PASS|FAIL|UNSTABLE|INCONCLUSIVE)\s+(?P<rate>\d+)%\s+(?P<lo>\d\.\d\d)-(?P<hi>\d\.\d\d)\s+(?P<runs>\d+)\s+(?P<cost>\d+\.\d{4})$"
)
IMPATIENT = re.compile(r"\b(now|asap|immediately|right away|hurry|quick(ly)?)\b|!", re.I)
"""What the reference agent takes for impatience (its ``skip_auth_impatient`` knob)."""


# --------------------------------------------------------------------------- helpers


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest on the sandbox, in this process (the inner session is current only while it
    runs). The sandbox's files are imported in ``importlib`` mode and named apart from this
    suite's modules (a sandbox ``test_budget.py`` would be taken for this suite's, already
    imported), and Hypothesis's global seed, which its plugin sets for good from
    ``--hypothesis-seed``, is put back."""
    (pytester.path / "results.jsonl").unlink(missing_ok=True)
    seed = hypothesis_core.global_force_seed
    try:
        return pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", "--import-mode=importlib", *args
        )
    finally:
        hypothesis_core.global_force_seed = seed


def results(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    path = pytester.path / "results.jsonl"
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            out[data.pop("name")] = data
    return out


def summary(result: pytest.RunResult) -> tuple[list[re.Match[str]], list[str], re.Match[str]]:
    """The agentprop terminal section: (rows, other lines, totals line)."""
    lines = result.outlines
    start = next(i for i, l in enumerate(lines) if re.fullmatch(r"=+ agentprop =+", l))
    section = [l for l in lines[start + 1 :] if l.strip()]
    # the bugs (failing checks grouped by signature) come first, then the table of cases
    head = next((i for i, l in enumerate(section) if l.startswith("case [test]")), None)
    assert head is not None, section
    assert all(re.match(r"\d+ bug\(s\)|bug \d+ \[|    |corpus: ", l) for l in section[:head]), (
        section[:head]
    )
    section = section[head:]
    rows: list[re.Match[str]] = []
    other: list[str] = []
    for line in section[1:]:
        totals = TOTALS.match(line)
        if totals:
            return rows, other, totals
        row = ROW.match(line)
        if row:
            rows.append(row)
        else:
            other.append(line)
    raise AssertionError("no totals line in the agentprop section:\n" + "\n".join(section))


def abbreviates(label: str, full: str) -> bool:
    """Whether a summary label shows ``full``, possibly cut short with an ellipsis."""
    label = label.strip()
    return label == full or (label.endswith("…") and full.startswith(label[:-1]))


def wald_runs_all_pass(tau: float, alpha: float = 0.05, beta: float = 0.05) -> int:
    """Runs Wald's SPRT needs to accept an agent that never fails, with the zone
    p0 = (1 + tau) / 2 (accept) vs p1 = 2 tau - 1 (reject)."""
    p0, p1 = (1 + tau) / 2, 2 * tau - 1
    return math.ceil(math.log(beta / (1 - alpha)) / math.log(p1 / p0))


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# --------------------------------------------------------------------------- options


COUNT_EXAMPLES = (
    PREAMBLE
    + """
@agentprop.agent_settings()
@given(st.integers())
def test_count(x):
    with open("examples.txt", "a") as f:
        f.write("x\\n")
"""
)


@pytest.mark.parametrize("profile", [None, "smoke", "release"])
def test_profile_option_sets_max_examples_of_agent_settings(
    pytester: pytest.Pytester, profile: str | None
) -> None:
    pytester.makepyfile(test_count=COUNT_EXAMPLES)
    result = run(
        pytester, "--hypothesis-seed=0", *([f"--agentprop-profile={profile}"] if profile else [])
    )
    result.assert_outcomes(passed=1)
    examples = (pytester.path / "examples.txt").read_text().count("x")
    assert examples == PROFILES[profile or "ci"]["max_examples"]
    assert len({p["max_examples"] for p in PROFILES.values()}) == 3  # the profiles really differ


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--agentprop-profile", "nightly"],
            r"--agentprop-profile nightly: no such profile; registered: ci, release, smoke",
        ),
        (
            ["--agentprop-shrink-budget", "-1"],
            r"--agentprop-shrink-budget must be 0 \(off\) or a number of runs",
        ),
        (["--agentprop-shard", "4/3"], r"--agentprop-shard 4/3: shard 4 is not one of 1..3"),
        (["--agentprop-shard", "2"], r"--agentprop-shard '2' is not of the form i/N"),
    ],
)
def test_bad_option_values_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert re.search(message, result.stderr.str()), result.stderr.str()
    assert "passed" not in result.stdout.str()


def test_the_shards_of_a_suite_run_each_test_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_many="""
import pytest

@pytest.mark.parametrize("k", range(30))
def test_k(k):
    with open("ran.txt", "a") as f:
        f.write(f"{k}\\n")
"""
    )
    counts = []
    for i in (1, 2, 3):
        outcomes = run(pytester, "--agentprop-shard", f"{i}/3").parseoutcomes()
        counts.append(outcomes["passed"])
        assert outcomes["passed"] + outcomes.get("deselected", 0) == 30
    ran = (pytester.path / "ran.txt").read_text().split()
    assert sorted(map(int, ran)) == list(range(30)) and all(counts)


# --------------------------------------------------------------------------- the marker


MARKERS = (
    PREAMBLE
    + """
SPAWNED = []


class Counting(BASE):
    def __init__(self, faults=None):
        SPAWNED.append(1)  # one instance per conversation, i.e. per agent run
        super().__init__(faults)


def decide(name):
    SPAWNED.clear()
    # a fresh memo per check, so every trial is a real agent run
    r = agentprop.check(project, CANCEL, Counting, memo=agentprop.oracle.TrialMemo(), raise_on_failure=False)
    record(name, agent_runs=len(SPAWNED), runs=r.runs, mode=r.settings["mode"], tau=r.settings["tau"], verdict=r.verdict)


def test_default():
    decide("default")


@pytest.mark.agentprop(mode="sprt")
def test_sprt():
    decide("sprt")


@pytest.mark.agentprop(tau=0.95)
def test_tau():
    decide("tau")


@pytest.mark.agentprop(n=12)
def test_n():
    decide("n")


@pytest.mark.agentprop(risk="high")
def test_risk():
    decide("risk")


@pytest.mark.agentprop(mode="zero-failure", n=20)
def test_mode():
    decide("mode")


@pytest.mark.agentprop(mode="sprt", max_runs=7)
def test_max_runs():
    decide("max_runs")
"""  # noqa: E501
)


def test_marker_sets_the_oracle_of_the_checks_in_one_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_markers=MARKERS)
    result = run(pytester)
    result.assert_outcomes(passed=7)
    r = results(pytester)
    spec_tau = load_project(EXAMPLE).spec.defaults.reliability.min_pass_rate
    for name, data in r.items():
        assert data["agent_runs"] == data["runs"], (name, data)
    # CANCEL exercises P2_AUTH_GATE, a safety clause: zero-failure, 59 clean runs by default
    assert (r["default"]["mode"], r["default"]["runs"], r["default"]["verdict"]) == (
        "zero-failure",
        59,
        "PASS",
    )
    assert r["sprt"]["mode"] == "sprt" and r["sprt"]["tau"] == spec_tau
    assert r["sprt"]["runs"] == wald_runs_all_pass(spec_tau) and r["sprt"]["verdict"] == "PASS"
    # tau=0.95: a stricter SPRT needs more clean runs to accept
    assert r["tau"]["mode"] == "sprt" and r["tau"]["tau"] == 0.95
    assert r["tau"]["runs"] == wald_runs_all_pass(0.95) > r["sprt"]["runs"]
    assert r["tau"]["verdict"] == "PASS"
    # n=12: fixed N, exactly 12 runs
    assert (r["n"]["mode"], r["n"]["runs"]) == ("fixed", 12)
    # risk="high": zero-failure certification, 50 clean runs
    assert (r["risk"]["mode"], r["risk"]["runs"], r["risk"]["verdict"]) == (
        "zero-failure",
        50,
        "PASS",
    )
    assert (r["mode"]["mode"], r["mode"]["runs"], r["mode"]["verdict"]) == (
        "zero-failure",
        20,
        "PASS",
    )
    # max_runs=7 truncates the SPRT before a clean agent can be accepted: never a pass
    assert r["max_runs"]["runs"] == 7 and r["max_runs"]["verdict"] != "PASS"


TYPO_MARKER = (
    PREAMBLE
    + """
@pytest.mark.agentprop(tau=0.95, taus=0.9)
def test_typo():
    agentprop.check(project, CANCEL, agent())
    record("ran")
"""
)


def test_unknown_marker_argument_is_rejected_with_the_valid_names(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_typo=TYPO_MARKER)
    result = run(pytester)
    assert result.ret != pytest.ExitCode.OK
    out = result.stdout.str() + result.stderr.str()
    assert re.search(
        r"unknown agentprop marker argument\(s\) \['taus'\]; use keyword arguments "
        r"max_runs, mode, n, risk, tau",
        out,
    ), out
    assert "ran" not in results(pytester)


def test_unknown_marker_argument_is_a_usage_error_exit_code(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_typo=TYPO_MARKER)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# --------------------------------------------------------------------------- terminal summary


SUMMARY = (
    PREAMBLE
    + """
CLEAN = agent()
BROKEN = agent(skip_auth=1.0)  # never verifies identity: every run fails the MFT
CALLS = []


@agentprop.agent_settings()
@given(st.integers(0, 3))
def test_a_given(x):
    CALLS.append(x)
    record("given", calls=len(CALLS))
    agentprop.check(project, CANCEL, CLEAN, settings=agentprop.settings(mode="fixed", runs=2))


@pytest.mark.parametrize("i", range(22))
def test_clean(i):
    agentprop.check(project, CANCEL, CLEAN, settings=agentprop.settings(mode="fixed", runs=2))


@pytest.mark.parametrize("i", range(3))
def test_broken(i):
    agentprop.check(project, CANCEL, BROKEN, settings=agentprop.settings(mode="fixed", runs=2))
"""
)


def _summary_run(pytester: pytest.Pytester) -> tuple[pytest.RunResult, int]:
    pytester.makepyfile(test_summary=SUMMARY)
    result = run(
        pytester,
        "--hypothesis-seed=0",
        "--agentprop-profile=smoke",
        "--agentprop-shrink-budget=0",
        "--agentprop-memo=none",
        "--agentprop-corpus=none",
    )
    result.assert_outcomes(passed=23, failed=3)
    given_calls = results(pytester)["given"]["calls"]
    assert given_calls >= 2  # Hypothesis called the test several times
    return result, given_calls


def test_terminal_summary_lists_checks_failing_first_and_at_most_twenty(
    pytester: pytest.Pytester,
) -> None:
    result, _ = _summary_run(pytester)
    rows, other, totals = summary(result)
    # 22 + 3 + 1 (test, case) pairs: the @given test is one line however often it ran
    assert len(rows) == 20
    assert len(other) == 1 and other[0].startswith("... and 6 more"), other
    labels = [row["label"].strip() for row in rows]
    assert labels.count(f"{CANCEL_ID} [test_a_given]") == 1
    assert len(set(labels)) == 20
    # failing first (by name, test_a_given would come before test_broken)
    assert labels[:3] == [f"{CANCEL_ID} [test_broken[{i}]]" for i in range(3)]
    assert [row["verdict"] for row in rows] == ["FAIL"] * 3 + ["PASS"] * 17
    for row in rows:
        passes = 2 if row["verdict"] == "PASS" else 0
        assert int(row["rate"]) == 50 * passes and int(row["runs"]) == 2
        lo, hi = wilson(passes, 2)
        assert (row["lo"], row["hi"]) == (f"{lo:.2f}", f"{hi:.2f}")
        assert float(row["cost"]) == 0.0  # the simulated agent uses no model
    assert (int(totals[1]), int(totals[2])) == (26, 23)
    # one input per agent: only the first check of each agent runs it (2 runs), the rest
    # are memo hits
    assert int(totals[3]) == 2 + 2
    assert float(totals[5]) == 0.0 and totals[6] == ""


def test_terminal_summary_memo_hits_count_reused_trials_only(pytester: pytest.Pytester) -> None:
    result, given_calls = _summary_run(pytester)
    _, _, totals = summary(result)
    all_runs = 2 * (22 + 3 + given_calls)
    assert int(totals[4]) == all_runs - int(totals[3])


EXPECTED = (
    PREAMBLE
    + """
BROKEN = agent(skip_auth=1.0)


def test_expects_the_failure():
    with pytest.raises(agentprop.AgentPropertyViolation):
        agentprop.check(project, CANCEL, BROKEN, settings=agentprop.settings(mode="fixed", runs=2))


def test_fails():
    agentprop.check(project, CANCEL, BROKEN, settings=agentprop.settings(mode="fixed", runs=3))
"""
)


def test_terminal_summary_says_which_failing_checks_their_tests_expected(
    pytester: pytest.Pytester,
) -> None:
    """A check that fails inside a test that passes (pytest.raises) is counted apart: the
    totals line of a suite that tests agentprop itself must not read like failures."""
    pytester.makepyfile(test_expected=EXPECTED)
    result = run(
        pytester, "--agentprop-shrink-budget=0", "--agentprop-memo=none", "--agentprop-corpus=none"
    )
    result.assert_outcomes(passed=1, failed=1)
    _, _, totals = summary(result)
    assert (int(totals[1]), int(totals[2])) == (2, 0)
    assert (
        totals[6]
        == "; 1 of the other checks failed inside tests that passed (the test expected the failure)"
    )


# --------------------------------------------------------------------------- fixtures


BUDGET = (
    PREAMBLE
    + """
def test_budget(agentprop_budget):
    assert isinstance(agentprop_budget, agentprop.modelapi.Budget)
    try:
        agentprop.check(project, CANCEL, agent())  # a clean agent needs more than 5 runs to pass
    finally:
        record("budget", max_runs=agentprop_budget.max_runs, used=agentprop_budget.snapshot().runs)
"""
)


def test_session_budget_makes_an_undecided_check_inconclusive(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_session_budget=BUDGET)
    result = run(pytester, "--agentprop-max-runs=5")
    result.assert_outcomes(failed=1)
    assert results(pytester)["budget"] == {"max_runs": 5, "used": 5}
    out = result.stdout.str()
    assert "INCONCLUSIVE" in out and "budget ran out" in out
    rows, _, totals = summary(result)
    assert [(r["verdict"], int(r["runs"])) for r in rows] == [("INCONCLUSIVE", 5)]
    assert totals[6].startswith("; budget:")


FIXTURES = (
    PREAMBLE
    + """
def test_project_agent_memo(agentprop_project, agentprop_agent, agentprop_memo):
    assert isinstance(agentprop_project, agentprop.Project)
    assert isinstance(agentprop_agent, agentprop.LoadedAgent)
    assert isinstance(agentprop_memo, agentprop.oracle.TrialMemo)
    before = len(agentprop_memo)
    r = agentprop.check(agentprop_project, CANCEL.id, agentprop_agent)
    record("fixtures", spec_id=agentprop_project.spec.spec_id, base=str(agentprop_project.base_dir),
           ref=agentprop_agent.ref, runs=r.runs, verdict=r.verdict, stored=len(agentprop_memo) - before)


def test_world(agentprop_world):
    args = {"account_id": "A1", "last4": "4242", "zip": "94107"}
    refused = agentprop_world("END_REFUSE_AUTH<-N2_AUTH")
    happy = agentprop_world(CANCEL.id)
    assert isinstance(refused, agentprop.scenarios.World)
    record("world", refused=refused.call("verify_identity", args), happy=happy.call("verify_identity", args))
"""  # noqa: E501
)


@pytest.mark.parametrize("how", ["command line", "ini file"])
def test_project_agent_memo_and_world_fixtures(pytester: pytest.Pytester, how: str) -> None:
    pytester.makepyfile(test_fixtures=FIXTURES)
    if how == "command line":
        result = run(
            pytester, f"--agentprop-spec={EXAMPLE}", "--agentprop-agent=agent:SupportOpsAgent"
        )
    else:  # a relative spec path in the ini file is resolved against the rootdir
        spec = os.path.relpath(EXAMPLE, pytester.path)
        pytester.makeini(
            f"[pytest]\nagentprop_spec = {spec}\nagentprop_agent = agent:SupportOpsAgent\n"
        )
        result = run(pytester)
    result.assert_outcomes(passed=2)
    r = results(pytester)
    project = load_project(EXAMPLE)
    fx = r["fixtures"]
    assert fx["spec_id"] == project.spec.spec_id and Path(fx["base"]).resolve() == EXAMPLE
    assert fx["ref"] == "agent:SupportOpsAgent"
    assert fx["verdict"] == "PASS" and fx["stored"] == fx["runs"] > 0  # the check used this memo
    # the world of a scenario where verification fails answers verified: false
    assert r["world"]["refused"]["verified"] is False and r["world"]["happy"]["verified"] is True
    # configuring agentprop in the ini file puts the memo on disk under the rootdir
    assert (pytester.path / ".agentprop" / "trials.sqlite").exists() == (how == "ini file")


def test_project_and_agent_fixtures_name_both_ways_to_configure_them(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_missing="def test_project(agentprop_project):\n    pass\n\n\ndef "
        "test_agent(agentprop_agent):\n    pass\n"
    )
    result = run(pytester)
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    assert re.search(
        r"agentprop_project needs a spec: pass --agentprop-spec PATH or set "
        r"`agentprop_spec` in the ini file",
        out,
    ), out
    assert re.search(
        r"agentprop_agent needs an agent: pass --agentprop-agent MODULE:ATTR or set "
        r"`agentprop_agent` in the ini file",
        out,
    ), out


# --------------------------------------------------------------------------- seeds and memo


SEEDS = (
    PREAMBLE
    + """
import dataclasses

SEQ = []
STARTED = []
_NOISY = agent(skip_auth=0.5)


def _counted():
    STARTED.append(1)  # the factory is called once per agent run
    return _NOISY.factory()


NOISY = dataclasses.replace(_NOISY, factory=_counted)  # same fingerprint, counted runs


def mft(trace):
    verdicts = agentprop.contracts.mft_verdicts(project.spec, CANCEL, trace)
    SEQ.append(all(v.passed for v in verdicts))  # called on every trial: fresh runs and stored ones
    return verdicts


def test_noisy():
    r = agentprop.check(project, CANCEL, NOISY, prop=mft, raise_on_failure=False, settings=agentprop.settings(mode="fixed", runs=40))
    record("noisy", seq="".join("1" if ok else "0" for ok in SEQ), agent_runs=len(STARTED), passes=r.passes, runs=r.runs, memo_hits=r.memo_hits)
"""  # noqa: E501
)


def test_seed_fresh_and_memo_on_disk(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_seeds=SEEDS)
    memo = f"--agentprop-memo={pytester.path / 'memo' / 'trials.sqlite'}"

    def session(*args: str) -> tuple[dict[str, Any], re.Match[str]]:
        result = run(pytester, *args)
        result.assert_outcomes(passed=1)
        return results(pytester)["noisy"], summary(result)[2]

    first, totals = session(memo, "--agentprop-seed=7")
    assert len(first["seq"]) == 40 and 0 < first["passes"] < 40  # the agent really is noisy
    assert first["seq"].count("1") == first["passes"] and first["agent_runs"] == 40
    assert int(totals[3]) == 40
    assert (pytester.path / "memo" / "trials.sqlite").exists()

    # same memo, same seed: every run is reused, the agent never runs; the property judges
    # each stored run again and sees the same outcomes in the same order
    again, totals = session(memo, "--agentprop-seed=7")
    assert again["agent_runs"] == 0 and again["memo_hits"] == 40
    assert again["seq"] == first["seq"] and again["passes"] == first["passes"]
    assert (int(totals[3]), int(totals[4])) == (0, 40)

    # --agentprop-fresh: new samples even though the memo holds the old ones
    fresh, totals = session(memo, "--agentprop-seed=7", "--agentprop-fresh")
    assert (
        len(fresh["seq"]) == 40
        and fresh["seq"] != first["seq"]
        and int(totals[3]) == 40 == fresh["agent_runs"]
    )

    # without the on-disk memo: the same seed replays the same samples, another seed draws others
    same, _ = session("--agentprop-seed=7")
    assert same["seq"] == first["seq"]
    other, _ = session("--agentprop-seed=8")
    assert len(other["seq"]) == 40 and other["seq"] != first["seq"]


# --------------------------------------------------------------------------- shrinking and corpus


WORDY_STEPS = [("greeting", {"choice": 1}), ("urgency", {"choice": 1}), ("closing", {"choice": 0})]
"""A paraphrase of the cancel request as aps.paraphrases draws it: a greeting, a hurried
"right now" (what the fault reacts to) and a closing; the shrinker simplifies these choices."""

SHRINK = (
    PREAMBLE
    + f"""
from agentprop.phrases import apply_transforms

FAULTY = agent(skip_auth_impatient=0.5)


def test_impatient():
    # mode="sprt": CANCEL is a safety case (zero-failure by default); this pins the shrinker under the SPRT
    wordy = apply_transforms(CANCEL.messages[0], {WORDY_STEPS!r})
    agentprop.check(project, CANCEL, FAULTY, messages=[wordy, CANCEL.messages[1]], settings=agentprop.settings(mode="sprt"))
"""  # noqa: E501
)

REPLAY = (
    PREAMBLE
    + """
FAULTY = agent(skip_auth_impatient=0.5)


def test_1_plain():
    # the scenario's own message is not impatient; the corpus entry is replayed first
    agentprop.check(project, CANCEL, FAULTY)


def test_2_plain_again():
    # every check of the case replays the entry (memoised): it fails again, as the first did
    agentprop.check(project, CANCEL, FAULTY)
"""
)


def test_failing_property_is_shrunk_saved_and_replayed_first(pytester: pytest.Pytester) -> None:
    corpus = pytester.path / "corpus"
    pytester.makepyfile(test_shrink=SHRINK)
    result = run(pytester, "--agentprop-shrink-budget=60", f"--agentprop-corpus={corpus}")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "AgentPropertyViolation" in out
    assert re.search(r"-+ agentprop: minimal reproducer -+", out), out
    saved = re.search(r"saved as corpus entry ([0-9a-f]+)", out)
    assert saved, out
    entry_id = saved[1]
    spec_id = load_project(EXAMPLE).spec.spec_id
    files = list(corpus.glob("*/*.json"))
    assert files == [corpus / spec_id / f"{entry_id}.json"]
    entry = CorpusEntry.model_validate_json(files[0].read_text())
    plain = load_project(EXAMPLE).scenario(CANCEL_ID).messages[0]
    wordy = str(apply_transforms(plain, WORDY_STEPS))
    assert entry.original_messages[0] == wordy
    shrunk = entry.scenario.messages[0]
    # the greeting and the closing are gone, the hurried "right now" stays: the scenario's
    # own request plus the one choice that triggers the fault
    assert shrunk == plain + " right now", shrunk
    assert IMPATIENT.search(shrunk), shrunk
    # the report shows what the kept choice added to the scenario's own message
    assert re.search(r"turn 1: .*\{\+right now\+\}", out), out

    # second session, same corpus: the entry is decided first and fails the check
    pytester.makepyfile(test_shrink=REPLAY)
    result = run(pytester, "--agentprop-shrink-budget=0", f"--agentprop-corpus={corpus}")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert f"FAIL corpus {entry_id} ({CANCEL_ID}) — pass rate" in out
    rows, _, _ = summary(result)
    assert [r["verdict"] for r in rows] == ["FAIL", "FAIL"]
    assert abbreviates(rows[0]["label"], f"corpus {entry_id} ({CANCEL_ID}) [test_1_plain]")
    assert abbreviates(rows[1]["label"], f"corpus {entry_id} ({CANCEL_ID}) [test_2_plain_again]")
    # what the replay means for the corpus is said once per session
    assert len([line for line in out.splitlines() if line.startswith("corpus: ")]) == 1, out
    # --agentprop-shrink-budget 0: the failure is reported unshrunk and nothing new is saved
    assert "minimal reproducer" not in out
    assert list(corpus.glob("*/*.json")) == files


# --------------------------------------------------------------------------- no Flaky


SEEDED_NOISE = (
    PREAMBLE
    + """
NOISY = agent(skip_auth=0.5)  # skips identity verification in half of the runs (ctx.rng)


@agentprop.agent_settings()
@given(first=aps.paraphrases(CANCEL.messages[0]))
def test_paraphrases(first):
    agentprop.check(project, CANCEL, NOISY, messages=[first, CANCEL.messages[1]], settings=agentprop.settings(mode="sprt"))
"""  # noqa: E501
)

UNREPEATABLE = (
    PREAMBLE
    + """
RUNS = {}  # (first message, trial) -> how often it was run


class Unrepeatable(BASE):
    # noisy on the first run of an (input, trial) -- it skips identity verification with
    # probability 0.5 -- and clean on every re-run of it: each re-decision of an input sees
    # other outcomes, the worst case for Hypothesis's replay; only the memo keeps a verdict
    def turn(self, message, ctx):
        if ctx.turn_index == 0:
            key = (message, ctx.trial)
            RUNS[key] = RUNS.get(key, 0) + 1
            self.first_run = RUNS[key] == 1
        super().turn(message, ctx)

    def _fault(self, name, ctx):
        return name == "skip_auth" and self.first_run and ctx.rng.random() < 0.5


@agentprop.agent_settings()
@given(first=aps.paraphrases(CANCEL.messages[0]))
def test_paraphrases(first):
    agentprop.check(project, CANCEL, Unrepeatable, messages=[first, CANCEL.messages[1]], settings=agentprop.settings(mode="sprt"){memo})
"""  # noqa: E501
)


@pytest.mark.slow
def test_noisy_agent_fails_with_a_violation_never_flaky(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_seeded=SEEDED_NOISE,
        test_unrepeatable=UNREPEATABLE.replace("{memo}", ""),
        # control: a fresh memo per call, i.e. without the session memo of the plugin
        test_control=UNREPEATABLE.replace("{memo}", ", memo=agentprop.oracle.TrialMemo()"),
    )
    result = run(
        pytester,
        "--hypothesis-seed=0",
        "--agentprop-profile=smoke",
        "--agentprop-shrink-budget=0",
        "--agentprop-corpus=none",
        "--junitxml=report.xml",
    )
    result.assert_outcomes(failed=3)
    failures = {
        tc.get("classname"): tc.find("failure")
        for tc in ElementTree.parse(pytester.path / "report.xml").getroot().iter("testcase")
    }
    for name in ("test_seeded", "test_unrepeatable"):
        text = failures[name].text or ""  # type: ignore[union-attr]
        # Hypothesis names the minimal input "Falsifying example" (6.1xx) or "Failing test case"
        assert "AgentPropertyViolation" in text and (
            "Falsifying example" in text or "Failing test case" in text
        ), text
        assert "Flaky" not in text, text
    # the control shows what the memo prevents: the replayed input passes, Hypothesis says Flaky
    assert "hypothesis.errors.FlakyFailure" in (failures["test_control"].text or "")  # type: ignore[union-attr]


def test_a_session_run_in_this_process_leaves_this_sessions_state_alone(
    pytester: pytest.Pytester,
) -> None:
    from agentprop._decide.session import current_session

    outer = current_session()
    before = (outer.memo, outer.budget, outer.corpus, outer.profile, len(outer.recorded_results()))
    pytester.makepyfile(test_session_budget=BUDGET)
    run(
        pytester,
        "--agentprop-max-runs=5",
        "--agentprop-profile=smoke",
        f"--agentprop-corpus={pytester.path / 'corpus'}",
    )
    # the inner session had its own
    assert results(pytester)["budget"] == {"max_runs": 5, "used": 5}
    assert current_session() is outer
    assert (
        outer.memo,
        outer.budget,
        outer.corpus,
        outer.profile,
        len(outer.recorded_results()),
    ) == before
