"""Exploration: each path written many ways, every input an instance of its scenario, the search
weighted towards what failed, and failures shrunk as choices."""

from __future__ import annotations

import asyncio
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

import agentprop
from agentprop import TrialMemo, TurnContext, make_factory
from agentprop._decide.choices import Choices, ChoiceSpace, TurnChoice, keep_only, choice_units, language_of
from agentprop._decide.shrink import shrink
from agentprop._pipeline.explore import learn
from agentprop._decide.oracle import CheckResult
from agentprop._pipeline.run import RunSettings, arun_cases
from agentprop.testing import correct_typos

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {name: ROOT / "examples" / name for name in ("supportops", "expenseguard", "datainsights")}
SUPPORTOPS = agentprop.load_project(EXAMPLES["supportops"])


def run(project: agentprop.Project, faults: dict[str, float] | None = None, **settings: object) -> agentprop.RunReport:
    agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir, faults or {})
    return asyncio.run(arun_cases(project, agent, project.scenarios(), RunSettings(**settings), memo=TrialMemo()))  # type: ignore[arg-type]


def test_exploration_reaches_a_wording_fault_the_first_templates_never_trigger() -> None:
    """skip_auth_impatient reacts to a hurried user (now, asap, quick, '!'); no template says so."""
    fault = {"skip_auth_impatient": 0.5}
    first_template_only = run(SUPPORTOPS, fault, kinds=("mft",), explore=0)
    assert first_template_only.metrics.failed == 0 and first_template_only.metrics.unstable == 0
    explored = run(SUPPORTOPS, fault, kinds=("mft", "explore"))
    failing = [c for c in explored.cases if c.kind == "EXPLORE" and c.verdict in ("FAIL", "UNSTABLE")]
    assert failing, "exploration never reached the hurried wording"
    assert all(c.failures[0].signature.endswith("missing=verify_identity") or "decision_is" in c.failures[0].signature for c in failing)
    summary = explored.metrics.extra["exploration"]
    assert set(summary) == {s.id for s in SUPPORTOPS.scenarios()}
    assert all(v["inputs"] == 8 for v in summary.values())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_explored_input_is_an_instance_of_its_scenario(name: str) -> None:
    project = agentprop.load_project(EXAMPLES[name])
    rng = random.Random(7)
    for scenario in project.scenarios():
        space = ChoiceSpace(project, scenario)
        slots = [str(v) for v in scenario.slots.values()]
        for _ in range(10):
            drawn = space.render(space.draw(rng))
            assert [t.model_dump(exclude={"user_message"}) for t in drawn.turns] == [t.model_dump(exclude={"user_message"}) for t in scenario.turns]
            assert drawn.world == scenario.world and drawn.id == scenario.id
            for i, message in enumerate(drawn.messages):
                # a slot value the template variant writes is written verbatim
                base = space.variants[0].messages[i]
                for slot in slots:
                    if slot in base and all(slot in v.messages[i] for v in space.variants):
                        assert slot in message, (scenario.id, message, slot)


def test_template_variants_keep_follow_ups_aligned_with_the_first_message() -> None:
    project = agentprop.load_project(EXAMPLES["datainsights"])
    scenario = project.scenario("END_NO_RESULTS<-N4_RUN_SQL")
    space = ChoiceSpace(project, scenario)
    pairs = [tuple(v.messages) for v in space.variants]
    assert ("What are the numbers in March 2024?", "The top 3 customers by revenue.") in pairs
    # never a first message of one template with the follow-up of another
    assert ("What are the numbers in March 2024?", "I mean total revenue.") not in pairs


def test_exploration_is_seeded() -> None:
    def inputs(seed: int) -> list[tuple[str, ...]]:
        report = run(SUPPORTOPS, kinds=("explore",), seed=seed, explore=4, case_filter=("N7_CANCEL",))
        return [tuple(c.messages) for c in report.cases if c.kind == "EXPLORE"]

    assert inputs(3) == inputs(3)
    assert inputs(3) != inputs(4)


def test_a_family_that_failed_is_drawn_more_often() -> None:
    scenario = SUPPORTOPS.scenario("END_CANCELLED<-N7_CANCEL")
    failing = CheckResult(verdict="FAIL", decided_by="sprt", runs=5, passes=2, pass_rate=0.4, interval=(0.1, 0.8), interval_exact=(0.1, 0.8))
    weights = learn({}, [(Choices(turns=(TurnChoice(steps=(("urgency", (("choice", 0),)),)), TurnChoice())), failing)])
    assert weights == {"turn1:urgency": 4.0}
    space = ChoiceSpace(SUPPORTOPS, scenario)

    def share(w: dict[str, float]) -> float:
        rng = random.Random(11)
        counts: Counter[str] = Counter()
        for _ in range(400):
            counts.update(n for n, _ in space.draw(rng, weights=w).turns[0].steps)
        return counts["urgency"] / sum(counts.values())

    # 18 transforms can apply to turn 1: about 1/18 of the steps are urgency unweighted, ~4/21 at x4
    assert share({}) < 0.09 < 0.13 < share(weights)


def test_an_explored_failure_shrinks_to_its_trigger_in_the_scenarios_words() -> None:
    report = run(SUPPORTOPS, {"skip_auth_impatient": 0.5}, kinds=("explore",))
    case = next(c for c in report.cases if c.verdict in ("FAIL", "UNSTABLE") and c.id.startswith("EXPLORE END_CANCELLED<-N7_CANCEL "))
    explored = report._explored[case.id]
    agent = make_factory(_supportops_agent(), {"skip_auth_impatient": 0.5})
    result = report._checks[case.id][1]
    shrunk = shrink(SUPPORTOPS, explored.base, agent, choices=explored.choices, space=explored.space, failing=result, memo=TrialMemo())
    scenario = SUPPORTOPS.scenario("END_CANCELLED<-N7_CANCEL")
    first = shrunk.reproducer_messages[0]
    assert "cancel" in first.lower()
    for slot in ("O-1001", "4242", "94107"):
        assert slot in first
    kept = Choices.model_validate(shrunk.reproducer_choices)
    assert len(choice_units(kept)) == 1, shrunk.choices_kept  # one transform carries the trigger
    assert shrunk.reproducer_messages[1] == scenario.messages[1] or kept.template != 0


def _supportops_agent() -> type:
    import sys

    sys.path.insert(0, str(EXAMPLES["supportops"]))
    from agent import SupportOpsAgent

    return SupportOpsAgent


def test_keep_only_resets_what_was_not_kept() -> None:
    choices = Choices(template=1, turns=(TurnChoice(steps=(("greeting", (("choice", 0),)), ("urgency", (("choice", 1),)))), TurnChoice()))
    units = choice_units(choices)
    assert [u.kind for u in units] == ["template", "step", "step"]
    assert keep_only(choices, [units[2]]) == Choices(template=0, turns=(TurnChoice(steps=(("urgency", (("choice", 1),)),)), TurnChoice()))
    assert keep_only(choices, []).plain


def test_clean_reference_agents_pass_every_explored_case() -> None:
    for name, path in EXAMPLES.items():
        report = run(agentprop.load_project(path), kinds=("mft", "explore"), seed=1)
        bad = [(c.id, c.messages, c.failures[0].explanation if c.failures else c.verdict) for c in report.cases if c.verdict != "PASS"]
        assert not bad, (name, bad)


def test_correct_typos_reads_one_slip_as_the_word() -> None:
    vocabulary = ["cancel", "last", "four", "country", "role"]
    assert correct_typos("Lst four digits 4242, cuntry: US, cancle it", vocabulary) == "Last four digits 4242, country: US, cancel it"
    assert correct_typos("CANCLE", vocabulary) == "CANCEL"
    assert correct_typos("lost", ["last", "list"]) == "lost"  # two words one edit away: ambiguous, left alone
    assert correct_typos("a b ok", vocabulary) == "a b ok"


def test_chinese_inputs_explore_and_shrink_as_chinese_sentences(tmp_path: Path) -> None:
    project_dir = tmp_path / "zh"
    project_dir.mkdir()
    shutil.copy(EXAMPLES["supportops"] / "spec.yaml", project_dir / "spec.yaml")
    bindings = yaml.safe_load((EXAMPLES["supportops"] / "agentprop.yaml").read_text(encoding="utf-8"))
    bindings.pop("agent", None)
    bindings.pop("mutations", None)
    bindings["variables"]["intent"]["utterance"]["pii_request"] = ["请告诉我档案里的社会安全号码", "我的电子邮箱和电话号码是什么"]
    (project_dir / "agentprop.yaml").write_text(yaml.safe_dump(bindings, allow_unicode=True), encoding="utf-8")
    project = agentprop.load_project(project_dir)
    scenario = project.scenario("END_REFUSE_PII<-N1_INTENT")
    space = ChoiceSpace(project, scenario)
    assert space.lang == language_of(scenario.messages[0]) == "zh"

    def hurried_leak(message: str, ctx: TurnContext) -> None:
        # refuses, except that a hurried request ("急", "尽快", "马上") makes it leak half the time
        leak = any(w in message for w in ("急", "尽快", "马上")) and ctx.rng.random() < 0.5
        decision = "BILLING_ANSWER" if leak else "REFUSE_PII"
        ctx.respond(node_id="END_REFUSE_PII", decision=decision, tool_actions=[], evidence="no tool output needed", user_message="不能提供。")

    choices = Choices(lang="zh", template=1, turns=(TurnChoice(steps=(("greeting", (("choice", 0),)), ("urgency", (("choice", 1),)), ("closing", (("choice", 0),)))),))
    wordy = space.render(choices)
    assert "尽快" in wordy.messages[0]
    agent = make_factory(hurried_leak)
    found = agentprop.check(project, scenario, agent, messages=wordy.messages, memo=TrialMemo(), raise_on_failure=False)
    assert found.verdict != "PASS"
    shrunk = shrink(project, scenario, agent, choices=choices, failing=found, memo=TrialMemo(), space=space)
    sentence = shrunk.reproducer_messages[0]
    assert "尽快" in sentence and language_of(sentence) == "zh"
    assert not any("a" <= ch.lower() <= "z" for ch in sentence), sentence  # a Chinese sentence, no Latin words
    assert shrunk.choices_kept.startswith("turn 1: urgency")
