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
from agentprop import Project, TurnContext
from agentprop._decide.choices import (
    FAMILY_STEPS,
    Choices,
    ChoiceSpace,
    TurnChoice,
    _unit_family,
    choice_units,
    entity_variant,
    keep_only,
    language_of,
)
from agentprop._decide.oracle import CheckResult
from agentprop._decide.shrink import shrink
from agentprop._pipeline.explore import DEFAULT_PER_PATH, learn
from agentprop._pipeline.run import RunSettings, arun_cases
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo
from agentprop.testing import correct_typos

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    name: ROOT / "examples" / name for name in ("supportops", "expenseguard", "datainsights")
}


def run(
    project: agentprop.Project, faults: dict[str, float] | None = None, **settings: object
) -> agentprop.RunReport:
    agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir, faults or {})
    return asyncio.run(
        arun_cases(project, agent, project.scenarios(), RunSettings(**settings), memo=TrialMemo())
    )  # type: ignore[arg-type]


@pytest.mark.slow
def test_exploration_reaches_a_wording_fault_the_first_templates_never_trigger(
    supportops_project: Project,
) -> None:
    """skip_auth_impatient reacts to a hurried user (now, asap, quick, '!'); no template says so."""
    fault = {"skip_auth_impatient": 0.5}
    first_template_only = run(supportops_project, fault, kinds=("mft",), explore=0)
    assert first_template_only.metrics.failed == 0 and first_template_only.metrics.unstable == 0
    explored = run(supportops_project, fault, kinds=("mft", "explore"))
    failing = [
        c for c in explored.cases if c.kind == "EXPLORE" and c.verdict in ("FAIL", "UNSTABLE")
    ]
    assert failing, "exploration never reached the hurried wording"
    assert all(
        c.failures[0].signature.endswith("missing=verify_identity")
        or "decision_is" in c.failures[0].signature
        for c in failing
    )
    summary = explored.metrics.extra["exploration"]
    paths = {s.id for s in supportops_project.scenarios()}
    assert paths <= set(summary) and all("/answered " in p for p in set(summary) - paths)
    assert all(v["inputs"] == DEFAULT_PER_PATH for v in summary.values())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_explored_input_is_an_instance_of_its_scenario(name: str) -> None:
    project = agentprop.load_project(EXAMPLES[name])
    rng = random.Random(7)
    for scenario in project.scenarios():
        space = ChoiceSpace(project, scenario)
        free = {(f.tool, f.field) for f in space.fields}
        for _ in range(10):
            choices = space.draw(rng)
            drawn = space.render(choices)
            assert [t.model_dump(exclude={"user_message"}) for t in drawn.turns] == [
                t.model_dump(exclude={"user_message"}) for t in scenario.turns
            ]
            assert drawn.id == scenario.id
            # the world is the path's, but for free fields an explored input set
            explored = {(w.tool, w.field) for w in choices.world}
            assert explored <= free

            def fixed(overrides: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
                return {
                    t: {k: v for k, v in f.items() if (t, k) not in explored}
                    for t, f in overrides.items()
                }

            assert fixed(drawn.world.overrides) == fixed(scenario.world.overrides)
            assert drawn.world.failures == scenario.world.failures
            for i, message in enumerate(drawn.messages):
                # a slot value the template variant writes is written verbatim, or re-typed
                # as the turn's choices say (same characters, or one slip in a long word)
                base = space.variants[0].messages[i]
                retyped: dict[str, str] = {}
                for e in choices.turns[i].entities:  # "rcp 123": a case on a re-spaced id
                    own = retyped.get(e.slot, str(scenario.slots[e.slot]))
                    variant = entity_variant(own, e.form, e.site, e.slot, space.today)
                    if variant is not None:
                        retyped[e.slot] = variant
                for name, value in scenario.slots.items():
                    slot = str(value)
                    if slot in base and all(slot in v.messages[i] for v in space.variants):
                        assert slot in message or retyped.get(name) in message, (
                            scenario.id,
                            message,
                            slot,
                        )


def test_template_variants_keep_follow_ups_aligned_with_the_first_message() -> None:
    project = agentprop.load_project(EXAMPLES["datainsights"])
    scenario = project.scenario("END_NO_RESULTS<-N4_RUN_SQL")
    space = ChoiceSpace(project, scenario)
    pairs = [tuple(v.messages) for v in space.variants]
    assert ("What are the numbers in March 2024?", "The top 3 customers by revenue.") in pairs
    # never a first message of one template with the follow-up of another
    assert ("What are the numbers in March 2024?", "I mean total revenue.") not in pairs


@pytest.mark.slow
def test_exploration_is_seeded(supportops_project: Project) -> None:
    def inputs(seed: int) -> list[tuple[str, ...]]:
        report = run(
            supportops_project, kinds=("explore",), seed=seed, explore=4, case_filter=("N7_CANCEL",)
        )
        return [tuple(c.messages) for c in report.cases if c.kind == "EXPLORE"]

    assert inputs(3) == inputs(3)
    assert inputs(3) != inputs(4)


def test_a_family_that_failed_is_drawn_more_often(supportops_project: Project) -> None:
    scenario = supportops_project.scenario("END_CANCELLED<-N7_CANCEL")
    failing = CheckResult(
        verdict="FAIL",
        decided_by="sprt",
        runs=5,
        passes=2,
        pass_rate=0.4,
        interval=(0.1, 0.8),
        interval_exact=(0.1, 0.8),
    )
    weights = learn(
        {},
        [
            (
                Choices(turns=(TurnChoice(steps=(("urgency", (("choice", 0),)),)), TurnChoice())),
                failing,
            )
        ],
    )
    assert weights == {"turn1:urgency": 4.0}
    space = ChoiceSpace(supportops_project, scenario)

    def share(w: dict[str, float], dealt: bool) -> float:
        rng = random.Random(11)
        counts: Counter[str] = Counter()
        decks: dict[str, list[str]] | None = {} if dealt else None
        for _ in range(400):
            c = space.draw(rng, weights=w, decks=decks)
            counts.update(n for n, _ in c.turns[0].steps)
            counts.update(
                ["segment"] * len(c.turns[0].segments) + [e.family for e in c.turns[0].entities]
            )
        return counts["urgency"] / sum(counts.values())

    # about 25 families can apply to turn 1: ~1/25 of the choices are urgency
    # unweighted, ~4/28 at x4 (400 draws: compared as a ratio, not against a fixed share,
    # which moves with the number of families and the random stream)
    for dealt in (False, True):
        plain, weighted = share({}, dealt), share(weights, dealt)
        assert plain < 0.08 and weighted > 2 * plain, (plain, weighted)


def test_dealt_families_cover_a_turn_before_any_repeats(supportops_project: Project) -> None:
    """With decks, every family available on a turn comes up once before any comes up twice."""
    scenario = supportops_project.scenario("END_REFUSE_PII<-N1_INTENT")
    space = ChoiceSpace(supportops_project, scenario)
    for seed in range(4):
        rng = random.Random(seed)
        decks: dict[str, list[str]] = {}
        framed: list[str] = []  # the families that wrap the turn: one deck, shared by the templates
        seen: list[str] = []  # the transforms of template 0's own deck
        while len(seen) < 40:
            c = space.draw(rng, decks=decks)
            t = c.turns[0]
            framed += [n for n, _ in t.steps if n in FAMILY_STEPS]
            if c.template == 0:
                seen += (
                    [n for n, _ in t.steps if n not in FAMILY_STEPS]
                    + ["segment"] * len(t.segments)
                    + [e.family for e in t.entities]
                )
        for drawn in (framed, seen):
            families = set(drawn)
            first_round = drawn[: len(families)]
            # one card aside: a Chinese-only family (traditional) or a draw that found nothing to do
            assert len(set(first_round)) >= len(families) - 1, (seed, drawn)


@pytest.mark.slow
def test_an_explored_failure_shrinks_to_its_trigger_in_the_scenarios_words(
    supportops_project: Project,
) -> None:
    report = run(
        supportops_project, {"skip_auth_impatient": 0.5}, kinds=("explore",), profile="release"
    )
    case = next(
        c
        for c in report.cases
        if c.verdict in ("FAIL", "UNSTABLE")
        and c.id.startswith(("EXPLORE END_CANCELLED<-N7_CANCEL ", "EXPLORE END_TICKET<-N7_CANCEL "))
    )
    explored = report._explored[case.id]
    agent = make_factory(_supportops_agent(), {"skip_auth_impatient": 0.5})
    result = report._checks[case.id][1]
    shrunk = shrink(
        supportops_project,
        explored.base,
        agent,
        choices=explored.choices,
        space=explored.space,
        failing=result,
        memo=TrialMemo(),
    )
    scenario = supportops_project.scenario(case.id.split()[1])  # the path of the failing input
    first = shrunk.reproducer_messages[0]
    assert "cancel" in first.lower()
    for slot in ("O-1001", "4242", "94107"):
        assert slot in first
    kept = Choices.model_validate(shrunk.reproducer_choices)
    assert len(choice_units(kept)) == 1, shrunk.choices_kept  # one transform carries the trigger
    assert shrunk.reproducer_messages[1] == scenario.messages[1] or kept.template != 0
    assert shrunk.reproducer_families == explored.space.families_in(kept) == kept.families()


def _supportops_agent() -> type:
    import sys

    sys.path.insert(0, str(EXAMPLES["supportops"]))
    from agent import SupportOpsAgent

    return SupportOpsAgent


def test_keep_only_resets_what_was_not_kept() -> None:
    choices = Choices(
        template=1,
        turns=(
            TurnChoice(steps=(("greeting", (("choice", 0),)), ("urgency", (("choice", 1),)))),
            TurnChoice(),
        ),
    )
    units = choice_units(choices)
    # each turn's template is a unit
    assert [u.kind for u in units] == ["template", "step", "step", "template"]
    assert keep_only(choices, [units[2]]) == Choices(
        template=0, turns=(TurnChoice(steps=(("urgency", (("choice", 1),)),)), TurnChoice())
    )
    assert keep_only(choices, [units[3]]) == Choices(turns=(TurnChoice(), TurnChoice(template=1)))
    assert keep_only(choices, []).plain


@pytest.mark.slow
def test_clean_reference_agents_pass_every_explored_case() -> None:
    tried: set[str] = set()
    for name, path in EXAMPLES.items():
        report = run(agentprop.load_project(path), kinds=("mft", "explore"), seed=1)
        bad = [
            (c.id, c.messages, c.failures[0].explanation if c.failures else c.verdict)
            for c in report.cases
            if c.verdict != "PASS"
        ]
        assert not bad, (name, bad)
        tried |= {
            f for entry in report.metrics.extra["exploration"].values() for f in entry["families"]
        }
    # the report's per-path families show every kind of choice the space holds
    assert {
        "template",
        "segment",
        "case",
        "spelling",
        "codeswitch",
        "world",
        "indirect_request",
        "direct_request",
        "urgency",
        "particle",
    } <= tried


def test_an_explored_case_is_labelled_only_with_families_whose_effect_it_holds(
    supportops_project: Project,
) -> None:
    """A case's ``details["families"]`` (and the per-path families tried) named every choice
    drawn, even one a rule refused: a confirmation labelled ``turn2:codeswitch`` read "Well,
    dear support team, Sounds good to me." with no Chinese in it. A label stays exactly when
    the input without its choices differs; the messages are the drawn ones, unchanged."""
    scenario = supportops_project.scenario("END_CANCELLED<-N7_CANCEL")
    agent = agentprop.load_agent(
        supportops_project.bindings.agent or "", supportops_project.base_dir
    )
    settings = RunSettings(kinds=("explore",), seed=0, explore=24)
    report = asyncio.run(
        arun_cases(supportops_project, agent, [scenario], settings, memo=TrialMemo())
    )
    space = ChoiceSpace(supportops_project, scenario)
    dropped: list[str] = []
    tried: Counter[str] = Counter()
    for case in report.cases:
        choices = Choices.model_validate(case.details["choices"])
        labels = case.details["families"]
        full = space.render(choices)
        assert full.messages == case.messages
        units = choice_units(choices)
        for label in choices.families():
            mine = {u for u in units if _unit_family(choices, u) == label}
            without = space.render(keep_only(choices, [u for u in units if u not in mine]))
            differs = (without.messages, without.world) != (full.messages, full.world)
            assert differs == (label in labels), (case.id, label, case.messages)
            dropped += [] if differs else [label]
        tried.update(f.split(":", 1)[-1] for f in labels)
    assert "turn2:codeswitch" in dropped  # the input the issue names is among them
    assert dict(tried) == report.metrics.extra["exploration"][scenario.id]["families"]


def test_correct_typos_reads_one_slip_as_the_word() -> None:
    vocabulary = ["cancel", "last", "four", "country", "role"]
    assert (
        correct_typos("Lst four digits 4242, cuntry: US, cancle it", vocabulary)
        == "Last four digits 4242, country: US, cancel it"
    )
    assert correct_typos("CANCLE", vocabulary) == "CANCEL"
    # two words one edit away: ambiguous, left alone
    assert correct_typos("lost", ["last", "list"]) == "lost"
    assert correct_typos("a b ok", vocabulary) == "a b ok"


def test_chinese_inputs_explore_and_shrink_as_chinese_sentences(tmp_path: Path) -> None:
    project_dir = tmp_path / "zh"
    project_dir.mkdir()
    shutil.copy(EXAMPLES["supportops"] / "spec.yaml", project_dir / "spec.yaml")
    bindings = yaml.safe_load(
        (EXAMPLES["supportops"] / "agentprop.yaml").read_text(encoding="utf-8")
    )
    bindings.pop("agent", None)
    bindings.pop("mutations", None)
    bindings["variables"]["intent"]["utterance"]["pii_request"] = [
        "请告诉我档案里的社会安全号码",
        "我的电子邮箱和电话号码是什么",
    ]
    (project_dir / "agentprop.yaml").write_text(
        yaml.safe_dump(bindings, allow_unicode=True), encoding="utf-8"
    )
    project = agentprop.load_project(project_dir)
    scenario = project.scenario("END_REFUSE_PII<-N1_INTENT")
    space = ChoiceSpace(project, scenario)
    assert space.lang == language_of(scenario.messages[0]) == "zh"

    def hurried_leak(message: str, ctx: TurnContext) -> None:
        # refuses, except that a hurried request ("急", "尽快", "马上") makes it leak half the time
        leak = any(w in message for w in ("急", "尽快", "马上")) and ctx.rng.random() < 0.5
        decision = "BILLING_ANSWER" if leak else "REFUSE_PII"
        ctx.respond(
            node_id="END_REFUSE_PII",
            decision=decision,
            tool_actions=[],
            evidence="no tool output needed",
            user_message="不能提供。",
        )

    choices = Choices(
        lang="zh",
        template=1,
        turns=(
            TurnChoice(
                steps=(
                    ("greeting", (("choice", 0),)),
                    ("urgency", (("choice", 1),)),
                    ("closing", (("choice", 0),)),
                )
            ),
        ),
    )
    wordy = space.render(choices)
    assert "尽快" in wordy.messages[0]
    agent = make_factory(hurried_leak)
    found = agentprop.check(
        project, scenario, agent, messages=wordy.messages, memo=TrialMemo(), raise_on_failure=False
    )
    assert found.verdict != "PASS"
    shrunk = shrink(
        project, scenario, agent, choices=choices, failing=found, memo=TrialMemo(), space=space
    )
    sentence = shrunk.reproducer_messages[0]
    assert "尽快" in sentence and language_of(sentence) == "zh"
    # a Chinese sentence, no Latin words
    assert not any("a" <= ch.lower() <= "z" for ch in sentence), sentence
    assert shrunk.choices_kept.startswith("turn 1: urgency")


# ----------------------------------------------------------------------------- the space explored


def test_optional_wording_is_left_out_of_the_scenario_and_put_in_by_a_choice() -> None:
    project = agentprop.load_project(EXAMPLES["expenseguard"])
    scenario = project.scenario("END_APPROVE<-N7_SUBMIT")
    # a slot-less [ ... ] segment: off in the scenario's own message
    assert "client visit" not in scenario.messages[0]
    space = ChoiceSpace(project, scenario)
    with_segment = Choices(turns=(TurnChoice(segments=(0,)),))
    assert space.render(with_segment).messages == [
        scenario.messages[0].removesuffix(".") + " for my client visit."
    ]
    assert with_segment.families() == ["turn1:segment"]
    assert (
        keep_only(with_segment, []).plain
        and space.render(keep_only(with_segment, [])).messages == scenario.messages
    )


def test_slot_values_are_typed_as_users_do_and_stay_recognisable(
    supportops_project: Project,
) -> None:
    from agentprop._decide.choices import EntityChoice, entity_variant

    assert entity_variant("O-1001", "lower") == "o-1001"
    assert entity_variant("O-1001", "swap") is None  # ids and numbers keep their characters
    assert (
        entity_variant("engineer", "capitalized") == "Engineer"
        and entity_variant("engineer", "lower") is None
    )
    assert (
        entity_variant("engineer", "drop", 0) == "egineer"
        and entity_variant("March 2024", "swap", 0) == "Mrach 2024"
    )
    project = supportops_project
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    space = ChoiceSpace(project, scenario)
    lower = Choices(
        turns=(TurnChoice(entities=(EntityChoice(slot="order_id", form="lower"),)), TurnChoice())
    )
    rendered = space.render(lower)
    assert rendered.messages[0] == scenario.messages[0].replace("O-1001", "o-1001")
    # the world still holds O-1001: the user typed it differently
    assert rendered.world == scenario.world
    assert lower.families() == ["turn1:case"]
    # a transform never alters the re-typed value (it is protected like the slot)
    wordy = Choices(
        turns=(
            TurnChoice(
                entities=lower.turns[0].entities,
                steps=(
                    ("casing", (("kind", 3),)),
                    ("typo", (("kind", 2), ("site", 3), ("key", 0))),
                ),
            ),
            TurnChoice(),
        )
    )
    assert "o-1001" in space.render(wordy).messages[0]


def test_free_world_fields_are_those_no_binding_fixes_and_the_spec_never_names() -> None:
    from agentprop._decide.choices import WorldChoice, free_world_fields

    project = agentprop.load_project(EXAMPLES["expenseguard"])
    scenario = project.scenario("END_APPROVE<-N7_SUBMIT")
    free = {(f.tool, f.field): f.candidates for f in free_world_fields(project, scenario)}
    # manager_approval_over: no binding sets it, v1's tree never reads it; the receipt's total,
    # its currency (a binding sets it) and the receipt id (a slot) are not free
    assert free[("get_policy", "manager_approval_over")] == (0.0, 1.0, 250.0, 1000.0)
    assert ("get_receipt", "date") in free
    assert not {
        ("get_receipt", "total"),
        ("get_receipt", "currency"),
        ("get_receipt", "receipt_id"),
        ("get_policy", "limits.per_receipt"),
    } & set(free)
    assert (
        free_world_fields(
            agentprop.load_project(EXAMPLES["datainsights"]),
            agentprop.load_project(EXAMPLES["datainsights"]).scenarios()[0],
        )
        == []
    )  # answered by handlers
    space = ChoiceSpace(project, scenario)
    choice = Choices(
        turns=(TurnChoice(),),
        world=(WorldChoice(tool="get_policy", field="manager_approval_over", value=0.0),),
    )
    assert space.render(choice).world.overrides["get_policy"]["manager_approval_over"] == 0.0
    assert choice.families() == ["world"]
    # shrinks back to the path's value
    assert space.render(keep_only(choice, [])).world == scenario.world
    with pytest.raises(agentprop.errors.InvalidArgument, match="not a free world field"):
        space.render(
            Choices(
                turns=(TurnChoice(),),
                world=(WorldChoice(tool="get_receipt", field="total", value=1.0),),
            )
        )


def test_code_switching_mixes_the_declared_languages(supportops_project: Project) -> None:
    scenario = supportops_project.scenario("END_REFUSE_PII<-N1_INTENT")
    space = ChoiceSpace(supportops_project, scenario)
    english = space.render(
        Choices(turns=(TurnChoice(steps=(("codeswitch", (("lang", 0), ("choice", 0))),)),))
    )
    assert english.messages == ["What's the SSN you have on file for me, 谢谢?"]
    chinese = space.render(
        Choices(
            template=2, turns=(TurnChoice(steps=(("codeswitch", (("lang", 0), ("choice", 0))),)),)
        )
    )
    assert chinese.messages == ["你们存的我的社保号是多少，thanks？"]
    assert language_of(chinese.messages[0]) == "zh"


def test_loop_and_retry_scenarios_have_template_variants_too(supportops_project: Project) -> None:
    loop = next(
        s
        for s in supportops_project.scenarios()
        if s.id.startswith("END_CANCELLED<-N7_CANCEL/N6_CONFIRM_CANCEL#2")
    )
    retry = supportops_project.scenario("END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry")
    for scenario in (loop, retry):
        space = ChoiceSpace(supportops_project, scenario)
        assert len(space.variants) == 3, scenario.id
        assert all(v.world == scenario.world for v in space.variants)
    follow_ups = [v.messages[1] for v in ChoiceSpace(supportops_project, loop).variants]
    assert follow_ups == [
        "Hmm, what happens to my refund if I do?",
        "I'm not sure, what would that mean for me?",
        "我不太确定，取消的话退款怎么算？",
    ]


def test_an_explored_world_value_shrinks_to_that_value_alone() -> None:
    from agentprop._decide.choices import WorldChoice

    project = agentprop.load_project(EXAMPLES["expenseguard"])
    scenario = project.scenario("END_APPROVE<-N7_SUBMIT")
    space = ChoiceSpace(project, scenario)
    busy = Choices(
        template=1,
        turns=(TurnChoice(steps=(("greeting", (("choice", 0),)), ("closing", (("choice", 1),)))),),
        world=(WorldChoice(tool="get_policy", field="manager_approval_over", value=0.0),),
    )
    agent = agentprop.load_agent(
        "agent:ExpenseGuardAgent", EXAMPLES["expenseguard"], {"manager_gate": 0.5}
    )
    found = agentprop.check(
        project, space.render(busy), agent, memo=TrialMemo(), raise_on_failure=False
    )
    assert found.verdict != "PASS"
    shrunk = shrink(
        project, scenario, agent, choices=busy, space=space, failing=found, memo=TrialMemo()
    )
    assert (
        shrunk.choices_kept == "world: get_policy.manager_approval_over=0.0"
        and shrunk.reproducer_messages == scenario.messages
    )
    assert (
        shrunk.world_kept == []
        and shrunk.reproducer_rate is not None
        and shrunk.reproducer_rate.failures > 0
    )


def test_a_world_key_no_field_path_can_name_is_not_explored_and_breaks_nothing(
    supportops_project: Project,
) -> None:
    # found by benchmarks/robustness.py: a world value under a key such as 'created_at\U0003755a'
    # (not a schema field, not a name) made exploration raise a bare ValueError
    from agentprop._decide.choices import free_world_fields

    scenario = supportops_project.scenario("END_BILLING_ANSWER<-N3_BILLING")
    overrides = {tool: dict(fields) for tool, fields in scenario.world.overrides.items()}
    tool = next(iter(overrides))
    overrides[tool]["odd key\U0003755a"] = 3
    odd = scenario.model_copy(
        update={"world": scenario.world.model_copy(update={"overrides": overrides})}
    )
    fields = free_world_fields(supportops_project, odd)
    assert all("\U0003755a" not in f.field for f in fields)
    assert {(f.tool, f.field) for f in fields} == {
        (f.tool, f.field) for f in free_world_fields(supportops_project, scenario)
    }


def test_each_turn_has_its_own_template_and_shrinks_back_alone(supportops_project: Project) -> None:
    """A failure that needs only turn 2 in Chinese keeps turn 1 in the scenario's own words
    (one template index for the conversation switched turn 1 to Chinese too)."""
    scenario = supportops_project.scenario("END_CANCELLED<-N7_CANCEL")
    space = ChoiceSpace(supportops_project, scenario)
    # as drawn: one index for every turn
    chinese = Choices(template=2, turns=(TurnChoice(), TurnChoice()))
    assert [t.template for t in chinese.turns] == [
        2,
        2,
    ] and chinese.describe() == "turn 1: template 2; turn 2: template 2"
    assert [u.kind for u in choice_units(chinese)] == ["template", "template"]

    base = _supportops_agent()

    class ConfusedByChineseYes(base):  # type: ignore[misc, valid-type]
        def turn(self, message: str, ctx: TurnContext) -> None:
            if "是的" in message:  # reads a Chinese "yes" as no answer at all
                ctx.respond(
                    node_id="N7_CANCEL",
                    decision="ASK_CONFIRM_CANCEL",
                    tool_actions=[],
                    evidence="-",
                    user_message="?",
                )
                return
            super().turn(message, ctx)

    agent = make_factory(ConfusedByChineseYes)
    found = agentprop.check(
        supportops_project,
        scenario,
        agent,
        messages=space.render(chinese).messages,
        memo=TrialMemo(),
        raise_on_failure=False,
    )
    assert found.verdict == "FAIL"
    shrunk = shrink(
        supportops_project,
        scenario,
        agent,
        choices=chinese,
        space=space,
        failing=found,
        memo=TrialMemo(),
        budget=60,
    )
    assert shrunk.reproducer_messages == [scenario.messages[0], "是的，取消吧。"]
    assert shrunk.choices_kept == "turn 2: template 2" and shrunk.minimal
    # choices saved with one template for the conversation still read (every turn in it)
    assert Choices.model_validate({"template": 1, "turns": [{}, {}]}).turns == (
        TurnChoice(template=1),
        TurnChoice(template=1),
    )


def test_a_shrunk_bug_states_its_minimality_in_every_output(supportops_project: Project) -> None:
    """A bug said `minimal: true` and nothing more; its outputs now say what was checked."""
    from agentprop._pipeline.report.html import render_html
    from agentprop._pipeline.report.junit import render_junit
    from agentprop._pipeline.report.markdown import md, render_markdown
    from agentprop._pipeline.run import render_bugs, shrink_failures

    agent = agentprop.load_agent(
        supportops_project.bindings.agent or "",
        supportops_project.base_dir,
        {"skip_auth_impatient": 1.0},
    )
    # a seed one of whose four inputs hits the fault (the draws follow the free world fields
    # and the notations the turn's values have)
    settings = RunSettings(kinds=("explore",), seed=6, explore=4)
    report = asyncio.run(
        arun_cases(
            supportops_project,
            agent,
            [supportops_project.scenario("END_CANCELLED<-N7_CANCEL")],
            settings,
            memo=TrialMemo(),
        )
    )
    shrink_failures(supportops_project, agent, report, budget=60, corpus=None, seed=0)
    bug = next(b for b in report.bugs if b.shrink_runs)
    assert (
        bug.minimal
        and bug.minimality.startswith("1-minimal at ")
        and " confidence: each of the " in bug.minimality
    )
    assert f"    {bug.minimality}" in render_bugs(report)
    assert md(bug.minimality) in render_markdown(report)
    assert bug.minimality in render_junit(report) and bug.minimality in render_html(report)
    assert report.model_dump(mode="json")["bugs"][0]["minimality"] == bug.minimality


def test_a_list_an_effect_empties_keeps_its_items_fields_free_where_it_is_left_in_place() -> None:
    """Issue #23: ``option_count: {0: {set: {options: []}}, 2: {}}`` fixed every field inside
    ``options``, so no explored input ever offered a flight cheaper than the fare and an agent
    skipping confirmation when cheaper passed. The effect writes the list, not the price of
    each option the other value leaves in place; a field a binding reads stays fixed."""
    from agentprop._decide.choices import free_world_fields

    travel = agentprop.load_project(
        Path(__file__).resolve().parents[1] / "benchmarks" / "_specs_zoo" / "travel_change"
    )
    listed = travel.scenario("END_CHANGED<-N4_CHANGE")
    free = {(f.tool, f.field): f.candidates for f in free_world_fields(travel, listed)}
    assert free[("search_flights", "options[0].price")] == (0.0, 1.0, 170.0, 680.0)
    assert ("get_booking", "fare_class") not in free  # a binding reads it
    assert ("search_flights", "options") not in free
    empty = travel.scenario("END_NO_FLIGHTS<-N2_SEARCH")
    assert [f for f in free_world_fields(travel, empty) if f.tool == "search_flights"] == []
