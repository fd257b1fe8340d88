"""The conversation shrinker on the reference agent's real faults, and the failure corpus."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import agentprop
import agentprop.modelapi
import agentprop.oracle
import agentprop.scenarios
from agentprop import Project
from agentprop._decide.choices import Choices, ChoiceSpace, TurnChoice
from agentprop._decide.corpus import Corpus, entry_from_shrink, pytest_regression
from agentprop._decide.shrink import choices_of_messages, shrink, word_diff
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo
from agentprop.phrases import apply_transforms
from agentprop.scenarios import Scenario

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
pytest_plugins = ["pytester"]
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402


@pytest.fixture(scope="module")
def cancel(supportops_project: Project) -> Scenario:
    return supportops_project.scenario("END_CANCELLED<-N7_CANCEL")


# an explored input: the second template variant, a greeting, "right now" and a closing on turn
# 1, a formal opening on turn 2 (only "right now" is what the impatient-auth fault reacts to)
WORDY = Choices(
    template=1,
    turns=(
        TurnChoice(
            steps=(
                ("greeting", (("choice", 3),)),
                ("urgency", (("choice", 1),)),
                ("closing", (("choice", 0),)),
            )
        ),
        TurnChoice(steps=(("formal", (("choice", 0),)),)),
    ),
)


def failing_check(
    supportops_project: Project,
    agent: agentprop.LoadedAgent,
    scenario: agentprop.scenarios.Scenario,
    messages: list[str] | None = None,
) -> agentprop.oracle.CheckResult:
    result = agentprop.check(
        supportops_project,
        scenario,
        agent,
        messages=messages,
        memo=TrialMemo(),
        raise_on_failure=False,
    )
    assert result.verdict != "PASS"
    return result


def test_impatient_auth_skip_shrinks_to_the_one_choice_that_triggers_it(
    supportops_project: Project, cancel: Scenario
) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    wordy = ChoiceSpace(supportops_project, cancel).render(WORDY)
    assert "right now" in wordy.messages[0] and "Dear support team" in wordy.messages[1]
    found = failing_check(supportops_project, agent, cancel, wordy.messages)
    report = shrink(
        supportops_project, cancel, agent, choices=WORDY, failing=found, memo=TrialMemo()
    )
    assert report.signature.endswith("@turn0:missing=verify_identity")
    # the template went back to the scenario's own, every step but "right now" was dropped
    assert report.reproducer_choices == {
        "lang": "en",
        "turns": [
            {
                "template": 0,
                "steps": [["urgency", [["choice", 1]]]],
                "segments": [],
                "entities": [],
            },
            {"template": 0, "steps": [], "segments": [], "entities": []},
        ],
        "world": [],
        "probe": 0,
        "dropped": [],
    }
    assert report.reproducer_messages == [cancel.messages[0] + " right now", cancel.messages[1]]
    assert report.choices_kept == "turn 1: urgency(choice=1)"
    assert report.diff[0] == f"turn 1: {cancel.messages[0]} {{+right now+}}"
    assert report.minimal and not report.budget_exhausted
    assert report.reproducer_rate is not None and report.reproducer_rate.failures > 0
    lo, hi = report.reproducer_rate.interval
    assert lo <= 0.5 <= hi


def test_every_candidate_is_an_instance_of_the_scenario(
    supportops_project: Project, cancel: Scenario
) -> None:
    """The words that carry the intent and the slots are in every message the shrinker ran."""
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    seen: list[str] = []
    inner = agent.factory

    class Recording:
        def __init__(self) -> None:
            self.agent = inner()

        def turn(self, message: str, ctx: agentprop.TurnContext) -> None:
            seen.append(message)
            self.agent.turn(message, ctx)

    recording = agentprop.LoadedAgent(
        ref=agent.ref, factory=Recording, faults=agent.faults, fingerprint=agent.fingerprint
    )
    wordy = ChoiceSpace(supportops_project, cancel).render(WORDY)
    found = failing_check(supportops_project, recording, cancel, wordy.messages)
    shrink(
        supportops_project,
        cancel,
        recording,
        choices=WORDY,
        failing=found,
        memo=TrialMemo(),
        verify_runs=0,
    )
    first_turns = [m for m in seen if "O-1001" in m]
    assert first_turns and all(
        "cancel" in m.lower() and "4242" in m and "94107" in m for m in first_turns
    )
    confirmations = [m for m in seen if "O-1001" not in m]
    assert confirmations and all("yes" in m.lower() for m in confirmations)


def test_a_failure_that_needs_no_choice_shrinks_to_the_scenarios_own_wording(
    supportops_project: Project,
) -> None:
    agent = make_factory(SupportOpsAgent, {"leak_pii": 0.4})
    scenario = supportops_project.scenario("END_REFUSE_PII<-N1_INTENT")
    choices = Choices(
        turns=(
            TurnChoice(
                steps=(
                    ("greeting", (("choice", 0),)),
                    ("indirect_request", (("choice", 1),)),
                    ("closing", (("choice", 1),)),
                )
            ),
        )
    )
    found = failing_check(
        supportops_project,
        agent,
        scenario,
        ChoiceSpace(supportops_project, scenario).render(choices).messages,
    )
    report = shrink(
        supportops_project, scenario, agent, choices=choices, failing=found, memo=TrialMemo()
    )
    # "What's the SSN you have on file for me?", never "SSN"
    assert report.reproducer_messages == scenario.messages
    assert report.choices_kept == "none: the scenario's own wording fails"


def test_paraphrases_drawn_in_a_test_shrink_as_choices(cancel: Scenario) -> None:
    first = apply_transforms(
        cancel.messages[0], [("greeting", {"choice": 0}), ("urgency", {"choice": 1})]
    )
    choices = choices_of_messages(cancel, [first, cancel.messages[1]])
    assert choices is not None and [name for name, _ in choices.turns[0].steps] == [
        "greeting",
        "urgency",
    ]
    assert choices_of_messages(cancel, ["cancel it, whatever", cancel.messages[1]]) is None


def test_messages_given_as_plain_text_are_kept_as_they_are(
    supportops_project: Project, cancel: Scenario
) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    wordy = [
        "Hello there! Could you please cancel my order O-1001 right now - card "
        "last4 4242, zip 94107.",
        "Yes, cancel it.",
    ]
    found = failing_check(supportops_project, agent, cancel, wordy)
    report = shrink(
        supportops_project,
        cancel,
        agent,
        messages=wordy,
        failing=found,
        memo=TrialMemo(),
        verify_runs=5,
    )
    assert report.reproducer_messages == wordy
    assert report.choices_kept == "the messages were given as fixed text"


def test_a_drawn_text_the_scenario_does_not_generate_is_kept_as_written(
    supportops_project: Project, cancel: Scenario
) -> None:
    # aps.paraphrases knows only the text, so it may slip a word the scenario's facts rest on
    # ("cancel"); the scenario's space never writes that, so shrinking the draw's steps in it
    # would chase another input (the reproducer lost the slip and failed 0/30)
    agent = make_factory(SupportOpsAgent, {"typo_unrecognised": 1.0})
    first = apply_transforms(cancel.messages[0], [("typo", {"kind": 0, "site": 0, "key": 0})])
    assert "cnacel" in first
    messages = [first, cancel.messages[1]]
    found = failing_check(supportops_project, agent, cancel, messages)
    report = shrink(
        supportops_project,
        cancel,
        agent,
        messages=messages,
        failing=found,
        memo=TrialMemo(),
        verify_runs=5,
    )
    assert report.reproducer_messages == [first.text, cancel.messages[1]]
    assert report.reproducer_rate is not None and report.reproducer_rate.failures == 5
    assert report.choices_kept.startswith("the messages are kept as written: a drawn step")
    assert not report.minimal  # its words were never offered for removal


def test_shrinking_removes_nothing_the_path_itself_needs(supportops_project: Project) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth": 0.6})
    scenario = supportops_project.scenario("END_REFUSE_AUTH<-N2_AUTH")
    found = failing_check(supportops_project, agent, scenario)
    report = shrink(supportops_project, scenario, agent, failing=found, memo=TrialMemo())
    # verified: false realises the path (REFUSE_AUTH is expected because of it): never reset
    assert report.reproducer.world.overrides["verify_identity"]["verified"] is False
    assert "verify_identity.verified=False" not in report.world_reset
    # the skipped call, before the decision it changed
    assert report.signature.endswith("missing=verify_identity")


def test_budget_is_respected_to_the_run_and_the_result_is_still_a_confirmed_reproducer(
    supportops_project: Project, cancel: Scenario
) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    found = failing_check(
        supportops_project,
        agent,
        cancel,
        ChoiceSpace(supportops_project, cancel).render(WORDY).messages,
    )
    calls = {"n": 0}
    inner = agent.factory

    def counting() -> object:
        calls["n"] += 1
        return inner()

    counted = agentprop.LoadedAgent(
        ref=agent.ref, factory=counting, faults=agent.faults, fingerprint=agent.fingerprint
    )
    report = shrink(
        supportops_project,
        cancel,
        counted,
        choices=WORDY,
        failing=found,
        memo=TrialMemo(),
        budget=8,
        verify_runs=0,
    )
    assert report.runs <= 8 and calls["n"] == report.runs
    assert report.budget_exhausted and not report.minimal
    # anytime: what it returns was confirmed to fail, so it still holds the trigger
    assert "right now" in report.reproducer_messages[0]


def test_session_budget_stops_the_shrinker(supportops_project: Project, cancel: Scenario) -> None:
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    found = failing_check(
        supportops_project,
        agent,
        cancel,
        ChoiceSpace(supportops_project, cancel).render(WORDY).messages,
    )
    session = agentprop.modelapi.Budget(max_runs=5)
    report = shrink(
        supportops_project,
        cancel,
        agent,
        choices=WORDY,
        failing=found,
        memo=TrialMemo(),
        session_budget=session,
        verify_runs=0,
    )
    assert report.budget_exhausted and "session budget" in report.stop_reason
    assert session.snapshot().runs == 5


def test_word_diff() -> None:
    assert word_diff("a b c d", "a c") == "a [-b-] c [-d-]"
    assert word_diff("a b", "a b c") == "a b {+c+}"


def test_corpus_saves_replays_and_prints_a_regression_test(
    supportops_project: Project, tmp_path: Path, pytester: pytest.Pytester
) -> None:
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"leak_pii": 0.4})
    scenario = supportops_project.scenario("END_REFUSE_PII<-N1_INTENT")
    found = failing_check(supportops_project, agent, scenario)
    report = shrink(supportops_project, scenario, agent, failing=found, memo=TrialMemo())
    corpus = Corpus(tmp_path / "corpus")
    entry = entry_from_shrink(
        report, spec_id=supportops_project.spec.spec_id, spec_path=str(EXAMPLE), agent=agent
    )
    path = corpus.save(entry)
    assert path.exists() and corpus.get(entry.id[:6]).scenario == report.reproducer
    assert [
        e.id for e in corpus.entries(spec_id="supportops_v1", agent_ref="agent:SupportOpsAgent")
    ] == [entry.id]
    assert corpus.entries(agent_ref="someone:Else") == []

    pytester.makepyfile(test_regression=pytest_regression(entry))
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--import-mode=importlib")
    # the agent still has its leak knob on: the regression test fails, naming the leak
    assert result.ret == 1, result.stdout.str()
    assert "AgentPropertyViolation" in result.stdout.str()


def test_corrupt_corpus_entry_names_the_file_and_the_fix(tmp_path: Path) -> None:
    bad = tmp_path / "supportops_v1" / "deadbeef0000.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    corpus = Corpus(tmp_path)
    assert corpus.entries() == []  # skipped, not fatal: one bad entry must not block every run
    (err,) = corpus.damaged
    assert isinstance(err, agentprop.InputError) and "not valid JSON" in str(err)
    assert f"delete {bad}" in str(err) and str(bad) in str(err)


def test_shrink_validates_arguments(supportops_project: Project, cancel: Scenario) -> None:
    with pytest.raises(agentprop.InvalidArgument, match="has 2"):
        shrink(supportops_project, cancel, SupportOpsAgent, messages=["only one"])
    with pytest.raises(agentprop.InvalidArgument, match="not both"):
        shrink(supportops_project, cancel, SupportOpsAgent, messages=cancel.messages, choices=WORDY)
    with pytest.raises(agentprop.InvalidArgument, match="budget"):
        shrink(supportops_project, cancel, SupportOpsAgent, budget=0)
