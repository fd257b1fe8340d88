"""Exploration stays inside the space of valid inputs: a paraphrase never alters a fact the
scenario's expectations depend on (issue #23).

The zoo of issue #23 (benchmarks/_specs_zoo, frozen, written blind) has correct agents that
read names, titles and answers the way rule-based agents do; before this, EXPLORE cases of
those correct agents failed (a lower-cased or mistyped patient name, a typo in "refill", a
"please" where a withheld title would be, "ok so" put in front of an unclear answer).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import agentprop
from agentprop import Project
from agentprop._decide.choices import (
    Choices,
    ChoiceSpace,
    EntityChoice,
    TurnChoice,
    TurnFacts,
    entity_forms,
    fact_tokens,
    turn_facts,
)
from agentprop._pipeline.run import RunSettings, arun_cases
from agentprop._scenario.build import TemplateSource
from agentprop._scenario.piecemeal import ANSWERED
from agentprop._spec.bindings import Bindings
from agentprop.oracle import TrialMemo

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "benchmarks" / "_specs_zoo"
_TRAVEL_NO = re.compile(
    r"\b(no|nope|don'?t|keep (my|the) (original|old|current)|cancel that|never ?mind)\b", re.I
)
"""The refusal words the frozen travel agent reads (``_specs_zoo/travel_change/agent.py``)."""


@pytest.fixture(scope="module")
def pharmacy_project() -> Project:
    return agentprop.load_project(ZOO / "pharmacy_refill")


@pytest.fixture(scope="module")
def library_project() -> Project:
    return agentprop.load_project(ZOO / "library_loans")


@pytest.fixture(scope="module")
def travel_project() -> Project:
    return agentprop.load_project(ZOO / "travel_change")


def one_turn(
    space: ChoiceSpace,
    *steps: tuple[str, tuple[tuple[str, int], ...]],
    entities: tuple[EntityChoice, ...] = (),
    template: int = 0,
) -> str:
    turns = [TurnChoice() for _ in space.scenario.turns]
    turns[0] = TurnChoice(steps=steps, entities=entities)
    return space.render(Choices(lang="en", template=template, turns=tuple(turns))).messages[0]


def refill_space(pharmacy_project: Project) -> ChoiceSpace:
    scenario = next(
        s
        for s in pharmacy_project.scenarios()
        if "Maria Lopez" in s.messages[0] and "RX-48213" in s.messages[0]
    )
    return ChoiceSpace(pharmacy_project, scenario)


def test_a_persons_name_is_an_identity_fact_never_retyped(pharmacy_project: Project) -> None:
    assert entity_forms("patient_name", "Maria Lopez") == ()
    # a title may change case (the zoo's title_exact_match fault)
    assert entity_forms("title", "Dune") == ("lower", "upper")
    assert entity_forms("booking_ref", "QX7K2P") == ("lower",)  # an id too (booking_ref_case)
    assert "drop" in entity_forms("role", "engineer")  # a common word takes a slip ("enginer")
    # a proper name takes none
    assert not set(entity_forms("city", "Springfield")) & {"swap", "drop", "double"}
    space = refill_space(pharmacy_project)
    assert all(slot != "patient_name" for slot, _, _ in space.turn_spaces[0][0].entities)
    for form, site in (("lower", 0), ("upper", 0), ("swap", 3), ("drop", 1)):
        assert "Maria Lopez" in one_turn(
            space, entities=(EntityChoice(slot="patient_name", form=form, site=site),)
        )


def test_a_turn_that_states_a_name_is_never_recased_as_a_whole(
    pharmacy_project: Project, library_project: Project
) -> None:
    space = refill_space(pharmacy_project)
    plain = one_turn(space)
    for kind in range(4):
        assert one_turn(space, ("casing", (("kind", kind),))) == plain
    # a turn without a name may be re-cased
    library = ChoiceSpace(
        library_project,
        next(
            s for s in library_project.scenarios() if s.messages[0].startswith("Can I renew Dune")
        ),
    )
    assert any(
        one_turn(library, ("casing", (("kind", k),))) != library.scenario.messages[0]
        for k in range(4)
    )


def test_no_slip_or_rewrite_lands_on_the_words_that_say_which_intent(
    pharmacy_project: Project,
) -> None:
    space = refill_space(pharmacy_project)
    facts = space.turn_spaces[0][0].facts
    assert {"refill", "prescription", "born"} <= facts.words and "dosage" not in facts.words
    plain = fact_tokens(one_turn(space))
    for site in range(0, 60, 3):
        for kind in range(4):
            text = one_turn(space, ("typo", (("kind", kind), ("site", site), ("key", 1))))
            after = fact_tokens(text)
            assert all(after[w] >= plain[w] for w in facts.words), text
    # a slip still lands on the words that say nothing of the intent (a closing's)
    closed = one_turn(space, ("closing", (("choice", 1),)))
    assert any(
        one_turn(
            space, ("closing", (("choice", 1),)), ("typo", (("kind", 0), ("site", s), ("key", 1)))
        )
        != closed
        for s in range(20)
    )


def test_no_word_is_put_where_a_withheld_slot_would_be(library_project: Project) -> None:
    scenario = library_project.scenario("N4_RENEW:missing_title")
    space = ChoiceSpace(library_project, scenario)
    assert "renew" in space.turn_spaces[0][0].facts.cues
    for name, n in (("politeness", 4), ("urgency", 7), ("hedge", 5), ("casual", 4), ("closing", 6)):
        for choice in range(n):
            text = one_turn(space, (name, (("choice", choice),)))
            assert (
                "renew?" in text.replace(" ?", "?")
                or "renew." in text
                or "renew," in text
                or text.rstrip(".!?").endswith("renew")
            ), text


def test_a_word_never_follows_a_value_that_ends_in_a_word(library_project: Project) -> None:
    # "Can I renew Dune? Card 21000456." with an urgency frame: "Dune asap?" reads as another title
    space = ChoiceSpace(
        library_project,
        next(
            s for s in library_project.scenarios() if s.messages[0].startswith("Can I renew Dune?")
        ),
    )
    for choice in range(7):
        text = one_turn(space, ("urgency", (("choice", choice),)))
        assert "Dune?" in text, text


def test_a_follow_up_answer_gets_no_frame_that_opens_another_answer(
    travel_project: Project,
) -> None:
    scenario = next(
        s
        for s in travel_project.scenarios()
        if len(s.turns) > 1 and s.messages[1].startswith("Hmm, is there anything")
    )
    space = ChoiceSpace(travel_project, scenario)
    facts = space.turn_spaces[0][1].facts
    assert {"ok", "yes", "no"} <= facts.others
    turns = [TurnChoice() for _ in scenario.turns]
    for name, choice in (("casual", 2), ("filler", 2)):  # "ok so ...", "Okay, so ..."
        turns[1] = TurnChoice(steps=((name, (("choice", choice),)),))
        second = space.render(Choices(lang="en", turns=tuple(turns))).messages[1]
        assert "ok" not in second.lower().split(",")[0].split(), second


def test_chinese_facts_are_characters_a_frame_may_not_take_away() -> None:
    bindings = Bindings.model_validate(
        {
            "version": 1,
            "spec": "spec.yaml",
            "variables": {
                "intent": {
                    "utterance": {
                        "refill": ["请帮我续配处方 {rx}"],
                        "question": ["请问药店几点开门？"],
                    }
                }
            },
        }
    )
    facts = turn_facts(bindings, TemplateSource(template="请帮我续配处方 {rx}"), {"rx": "RX-1"})
    assert {"续", "配", "处", "方"} <= facts.words and "请" not in facts.words
    keeps = facts.keeps("请帮我续配处方 RX-1", ["RX-1"], [])
    # 请 may be rewritten: it says nothing about which intent
    assert keeps("麻烦尽快帮我续配处方 RX-1", ["urgency"])
    assert not keeps("请帮我续处方 RX-1", ["synonym"])  # 配 gone: not a refill any more
    assert TurnFacts().keeps("x", [], [])("y", ["typo"])  # a turn without facts keeps every step


@pytest.mark.parametrize("name", ["pharmacy_refill", "library_loans", "travel_change"])
def test_the_zoos_correct_agents_pass_every_explored_case_but_dates_they_cannot_read(
    name: str,
) -> None:
    # The frozen pharmacy and travel agents read a date only as YYYY-MM-DD: a user's "June 14,
    # 1979" or "20 Dec 2026" (the `notation` family, docs/input-families.md) is a real finding
    # about them, not an invalid input. Every other explored case passes, and every failure
    # carries a re-written date, so no other family fails a correct agent.
    project = agentprop.load_project(ZOO / name)
    agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir, {})
    report = asyncio.run(
        arun_cases(
            project,
            agent,
            project.scenarios(),
            RunSettings(kinds=("explore",), seed=1, explore=4),
            memo=TrialMemo(),
        )
    )
    noted = {
        c.id
        for c in report.cases
        if any(f.endswith(":notation") for f in (c.details or {}).get("families", ()))
    }
    # The frozen travel agent reads a refusal only by its own words ("no", "don't", "never
    # mind"...): "Let's leave it, please. That's too expensive." (refusal_wording) is a real
    # finding about it too, never a failure where the refusal holds one of its words.
    unread = {
        c.id: c.messages[int(turn[len("turn") :]) - 1]
        for c in report.cases
        for turn, _, family in (f.partition(":") for f in c.details.get("families", ()))
        if family == "refusal_wording"
        and name == "travel_change"
        and not _TRAVEL_NO.search(c.messages[int(turn[len("turn") :]) - 1])
    }
    # A path continued past its question (the user answers piecemeal: "dune", "MY CARD NUMBER
    # IS 21000456", a greeting before "Go for it") fails these frozen agents on answers users
    # write: findings about them, left to the blind adjudicators, not pinned here. Its answer as
    # the template writes it passes (tests/test_piecemeal.py runs the bundled agents on it).
    answered = {c.id for c in report.cases if ANSWERED in c.id}
    failing = [
        (c.id, c.messages)
        for c in report.cases
        if c.verdict in ("FAIL", "UNSTABLE")
        and c.id not in noted
        and c.id not in unread
        and c.id not in answered
    ]
    assert report.cases and not failing
    dated = [
        c
        for c in report.cases
        if c.id in noted and re.search(r"\b(19|20)\d\d\b", " ".join(c.messages))
    ]
    if name == "library_loans":  # its agent reads every value as re-written: nothing fails
        assert all(
            c.verdict == "PASS" for c in report.cases if c.id in noted and c.id not in answered
        )
    else:
        assert dated and any(c.verdict == "FAIL" for c in dated)  # the finding is still found


def test_inv_variants_state_the_facts_of_the_message_they_paraphrase(
    pharmacy_project: Project, library_project: Project
) -> None:
    """INV compares the agent on a paraphrase of the first message: "I need a rfeill" or "Can I
    renew asap?" (no title) are not paraphrases of it, and the correct agents failed them."""
    for project in (pharmacy_project, library_project):
        agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir, {})
        report = asyncio.run(
            arun_cases(
                project,
                agent,
                project.scenarios(),
                RunSettings(kinds=("inv",), seed=1),
                memo=TrialMemo(),
            )
        )
        inv = [c for c in report.cases if c.kind == "INV"]
        assert inv and not [
            (c.id, c.details.get("variants")) for c in inv if c.verdict in ("FAIL", "UNSTABLE")
        ]
