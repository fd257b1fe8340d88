"""The conversation shrinker on the reference agent's real faults, and the failure corpus."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agentprop
from agentprop import TrialMemo, make_factory
from agentprop._conversation_shrink import _join_tokens, _split_clauses, shrink, word_diff
from agentprop._corpus import Corpus, entry_from_shrink, pytest_regression

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402

PROJECT = agentprop.load_project(EXAMPLE)
CANCEL = PROJECT.scenario("END_CANCELLED<-N7_CANCEL")
WORDY = [
    "Hello there! I was wondering, could you please cancel my order O-1001 right now, it's urgent - card last4 4242, zip 94107. Thanks so much",
    "Yes, cancel it.",
]


def failing_check(agent: agentprop.LoadedAgent, scenario: agentprop.Scenario, messages: list[str] | None = None) -> agentprop.CheckResult:
    result = agentprop.check(PROJECT, scenario, agent, messages=messages, memo=TrialMemo(), raise_on_failure=False)
    assert result.verdict != "PASS"
    return result


def test_impatient_auth_skip_shrinks_to_the_minimal_triggering_phrase() -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    found = failing_check(agent, CANCEL, WORDY)
    report = shrink(PROJECT, CANCEL, agent, messages=WORDY, failing=found, memo=TrialMemo())
    assert report.signature.endswith("@turn0:missing=verify_identity")
    first = report.reproducer_messages[0]
    # what the fault needs: the cancel intent, an impatience marker, and the protected slots
    assert "cancel" in first.lower() and "now" in first.lower()
    for slot in ("O-1001", "4242", "94107"):
        assert slot in first
    for noise in ("Hello", "wondering", "urgent", "Thanks", "please"):
        assert noise not in first
    assert len(report.reproducer_messages) == 1, "the confirmation turn is not needed for a turn-1 failure"
    assert report.minimal and not report.budget_exhausted
    assert report.reproducer_rate is not None and report.reproducer_rate.failures > 0
    # the reproducer fails at about the fault's rate (0.5), inside its Wilson interval
    lo, hi = report.reproducer_rate.interval
    assert lo <= 0.5 <= hi
    assert any("[-Hello" in d for d in report.diff)


def test_shrinking_removes_nothing_the_path_itself_needs() -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth": 0.6})
    scenario = PROJECT.scenario("END_REFUSE_AUTH<-N2_AUTH")
    found = failing_check(agent, scenario)
    report = shrink(PROJECT, scenario, agent, failing=found, memo=TrialMemo())
    # verified: false realises the path (REFUSE_AUTH is expected because of it): never reset
    assert report.reproducer.world.overrides["verify_identity"]["verified"] is False
    assert "verify_identity.verified=False" not in report.world_reset
    assert report.signature.endswith("got=ASK_CONFIRM_CANCEL")


def test_pii_leak_shrinks_to_the_word_that_triggers_it() -> None:
    agent = make_factory(SupportOpsAgent, {"leak_pii": 0.4})
    scenario = PROJECT.scenario("END_REFUSE_PII<-N1_INTENT")
    wordy = ["Hi! Quick question about my account: what's the SSN you have on file for me? I need it for a form, thanks."]
    found = failing_check(agent, scenario, wordy)
    report = shrink(PROJECT, scenario, agent, messages=wordy, failing=found, memo=TrialMemo())
    assert report.reproducer_messages == ["SSN"]


def test_budget_is_respected_to_the_run_and_the_result_is_still_a_confirmed_reproducer() -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    found = failing_check(agent, CANCEL, WORDY)
    calls = {"n": 0}
    inner = agent.factory

    def counting() -> object:
        calls["n"] += 1
        return inner()

    counted = agentprop.LoadedAgent(ref=agent.ref, factory=counting, faults=agent.faults, fingerprint=agent.fingerprint)
    report = shrink(PROJECT, CANCEL, counted, messages=WORDY, failing=found, memo=TrialMemo(), budget=15, verify_runs=0)
    assert report.runs <= 15 and calls["n"] == report.runs
    assert report.budget_exhausted and not report.minimal
    # anytime: what it returns was confirmed to fail, so it still contains the trigger
    assert "now" in report.reproducer_messages[0] or report.reproducer_messages == WORDY[: len(report.reproducer_messages)]


def test_session_budget_stops_the_shrinker() -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    found = failing_check(agent, CANCEL, WORDY)
    session = agentprop.Budget(max_runs=10)
    report = shrink(PROJECT, CANCEL, agent, messages=WORDY, failing=found, memo=TrialMemo(), session_budget=session, verify_runs=0)
    assert report.budget_exhausted and "session budget" in report.stop_reason
    assert session.snapshot().runs == 10


def test_clause_and_token_splitting_round_trip() -> None:
    text = "Hello there! Cancel order O-1001 right now, it's urgent - card last4 4242, zip 94107."
    assert "".join(c for _, c in _split_clauses(text)) == text
    assert _join_tokens(["Cancel ", "O-1001", "now,", "zip ", "94107"]) == "Cancel O-1001 now, zip 94107"
    assert _join_tokens(["请", "取", "消", "订单 ", "O-1001"]) == "请取消订单O-1001"
    assert word_diff("a b c d", "a c") == "a [-b-] c [-d-]"


def test_corpus_saves_replays_and_prints_a_regression_test(tmp_path: Path) -> None:
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"leak_pii": 0.4})
    scenario = PROJECT.scenario("END_REFUSE_PII<-N1_INTENT")
    found = failing_check(agent, scenario)
    report = shrink(PROJECT, scenario, agent, failing=found, memo=TrialMemo())
    corpus = Corpus(tmp_path / "corpus")
    entry = entry_from_shrink(report, spec_id=PROJECT.spec.spec_id, spec_path=str(EXAMPLE), agent=agent)
    path = corpus.save(entry)
    assert path.exists() and corpus.get(entry.id[:6]).scenario == report.reproducer
    assert [e.id for e in corpus.entries(spec_id="supportops_v1", agent_ref="agent:SupportOpsAgent")] == [entry.id]
    assert corpus.entries(agent_ref="someone:Else") == []

    test_file = tmp_path / "test_regression.py"
    test_file.write_text(pytest_regression(entry))
    proc = subprocess.run([sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    # the agent still has its leak knob on: the regression test fails, naming the leak
    assert proc.returncode == 1, proc.stdout
    assert "AgentPropertyViolation" in proc.stdout


def test_corrupt_corpus_entry_names_the_file_and_the_fix(tmp_path: Path) -> None:
    bad = tmp_path / "supportops_v1" / "deadbeef0000.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with pytest.raises(agentprop.InputError, match="corrupt corpus entry") as info:
        Corpus(tmp_path).entries()
    assert "delete the file" in str(info.value) and str(bad) in str(info.value)


def test_shrink_validates_arguments() -> None:
    with pytest.raises(agentprop.InvalidArgument, match="has 2"):
        shrink(PROJECT, CANCEL, SupportOpsAgent, messages=["only one"])
    with pytest.raises(agentprop.InvalidArgument, match="budget"):
        shrink(PROJECT, CANCEL, SupportOpsAgent, budget=0)
