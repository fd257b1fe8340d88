"""A user who left out a required detail gives it when asked: exploration continues a stop past
the agent's question (agentprop._scenario.piecemeal), and the complete path's expectations
hold after the answer."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

import agentprop
from agentprop import TurnContext
from agentprop._decide.choices import REQUEST_FORMS, Choices, ChoiceSpace, TurnChoice
from agentprop._decide.shrink import shrink
from agentprop._pipeline.explore import DEFAULT_PER_PATH
from agentprop._scenario.piecemeal import answer_text, is_piecemeal, piecemeal_scenarios
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo
from agentprop.scenarios import Scenario

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "supportops"))
from agent import SupportOpsAgent  # noqa: E402


def _piecemeal(name: str) -> dict[str, Scenario]:
    project = agentprop.load_project(ROOT / "examples" / name)
    return {s.id: s for s in piecemeal_scenarios(project.bindings, project.scenarios())}


def test_a_stop_that_asks_for_a_detail_is_continued_past_the_question() -> None:
    built = _piecemeal("supportops")
    # each stop (the auth digits, the order id, the new address), once per decision the
    # answer leads to, on the simplest complete path
    assert set(built) == {
        "END_REFUSE_AUTH<-N2_AUTH/answered last4+zip",
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/answered last4+zip",
        "END_TICKET<-N7_CANCEL/answered last4+zip",
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/answered order_id",
        "END_TICKET<-N7_CANCEL/answered order_id",
        "END_ADDRESS_UPDATED<-N9_UPDATE_ADDRESS/answered new_address",
        "END_ADDRESS_DENIED<-N8_ADDRESS_ELIGIBILITY/answered new_address",
    }
    denied = built["END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/answered order_id"]
    asked, answer = denied.turns
    assert asked.user_message == "Please cancel my order - card last4 4242, zip 94107"
    assert asked.expect_decision == "CLARIFY" and asked.nodes[-1] == "N5_CANCEL_ELIGIBILITY"
    assert asked.required_tools == ["verify_identity", "get_account", "get_plan_rules"]
    # the detail alone, then what the complete path decides; what turn 1 called is not again
    assert answer.user_message == "O-1001"
    assert answer.expect_decision == "CANCEL_DENIED" and answer.required_tools == []
    assert answer.nodes[0] == "N5_CANCEL_ELIGIBILITY"
    complete = agentprop.load_project(ROOT / "examples" / "supportops").scenario(
        "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY"
    )
    assert denied.world == complete.world and denied.leaf == complete.leaf
    auth = built["END_TICKET<-N7_CANCEL/answered last4+zip"]
    assert [t.user_message for t in auth.turns] == [
        "Please cancel my order O-1001",
        "Card last4 4242, zip 94107",
        "Yes, cancel it.",
    ]
    assert auth.turns[1].required_tools == ["verify_identity", "get_account", "get_plan_rules"]
    assert all(is_piecemeal(s) for s in built.values())


def test_a_branch_to_a_request_for_information_is_continued_too() -> None:
    # ExpenseGuard withholds country and receipt id through a variable the tree branches on
    built = _piecemeal("expenseguard")
    assert {s.split("/")[0] for s in built} == {
        "END_REJECT<-N6_DECIDE",
        "END_APPROVE<-N7_SUBMIT",
        "END_REJECT<-N4A_REJECT_DISALLOWED",
    }
    approve = built["END_APPROVE<-N7_SUBMIT/answered country+receipt_id"]
    assert approve.messages[:2] == [
        "Please process my expense report, role: engineer.",
        "Receipt ID RCP-123, country: US",
    ]
    assert approve.turns[0].expect_decision == "REQUEST_INFO"
    assert approve.turns[1].required_tools[:2] == ["get_policy", "get_receipt"]
    # no stop, no continuation
    assert _piecemeal("datainsights") == {} and _piecemeal("quickstart") == {}


def test_an_answer_is_what_the_complete_request_says_beyond_the_stopped_one() -> None:
    zh = answer_text(
        "请帮我取消订单 O-1001，卡号后四位 4242，邮编 94107", "请帮我取消订单 O-1001", ["4242"]
    )
    assert zh == "卡号后四位 4242，邮编 94107"
    en = "I need to make a claim on policy HP-1, postcode M1. A pipe burst."
    assert answer_text(en, "I need to make a claim. A pipe burst.", ["HP-1"]) == (
        "On policy HP-1, postcode M1"
    )
    amount = "A pipe burst on 20 May 2026 and the damage comes to about £2,400."
    said = answer_text(amount, "A pipe burst on 20 May 2026.", ["£2,400"])
    assert said == "The damage comes to about £2,400"
    assert answer_text("Cancel order O-1", "Cancel order O-1", ["O-1"]) is None


def test_the_answer_is_explored_the_ways_people_answer() -> None:
    project = agentprop.load_project(ROOT / "examples" / "supportops")
    [scenario] = [
        s
        for s in piecemeal_scenarios(project.bindings, project.scenarios())
        if s.id == "END_TICKET<-N7_CANCEL/answered last4+zip"
    ]
    space = ChoiceSpace(project, scenario)
    answer = space.turn_spaces[0][1]
    assert answer.role == "answer"
    assert {"bare_answer", "correction"} <= set(answer.families)
    rng, decks = random.Random(0), {}  # type: ignore[var-annotated]
    met = {f for _ in range(DEFAULT_PER_PATH) for f in space.draw(rng, decks=decks).families()}
    assert {"turn2:bare_answer", "turn2:correction"} <= met, sorted(met)
    bare = Choices(turns=(TurnChoice(), TurnChoice(steps=(("bare_answer", ()),)), TurnChoice()))
    assert sorted(space.render(bare).messages[1].split(", ")) == ["4242", "94107"]


@pytest.mark.parametrize("name", ["supportops", "expenseguard"])
def test_the_reference_agent_reads_an_answer_however_it_is_written(name: str) -> None:
    project = agentprop.load_project(ROOT / "examples" / name)
    agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir, {})
    for scenario in piecemeal_scenarios(project.bindings, project.scenarios()):
        space = ChoiceSpace(project, scenario)
        for steps in ((), (("bare_answer", ()),), (("correction", (("choice", 0),)),)):
            turns = [TurnChoice() for _ in scenario.turns]
            turns[1] = TurnChoice(steps=steps)
            written = space.render(Choices(turns=tuple(turns)))
            found = agentprop.check(
                project,
                scenario,
                agent,
                messages=written.messages,
                memo=TrialMemo(),
                raise_on_failure=False,
            )
            assert found.verdict == "PASS", (scenario.id, written.messages, found.verdict)


def test_a_piecemeal_failure_shrinks_to_the_answer_as_the_template_writes_it() -> None:
    class ForgetsWhatItAskedFor(SupportOpsAgent):
        """Reads a detail only in the message that asks for the change (a real bug: the answer
        to its own question is read as a new, unclear request)."""

        def turn(self, message: str, ctx: TurnContext) -> None:
            if self.pending in ("auth", "order_id", "new_address"):
                self.pending = None
            super().turn(message, ctx)

    project = agentprop.load_project(ROOT / "examples" / "supportops")
    [scenario] = [
        s
        for s in piecemeal_scenarios(project.bindings, project.scenarios())
        if s.id == "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/answered order_id"
    ]
    space = ChoiceSpace(project, scenario)
    choices = Choices(
        turns=(
            TurnChoice(),
            TurnChoice(
                steps=(
                    ("distractor", (("choice", 0),)),
                    ("emotion", (("choice", 0),)),
                    ("bare_answer", ()),
                )
            ),
        )
    )
    written = space.render(choices)
    agent = make_factory(ForgetsWhatItAskedFor)
    found = agentprop.check(
        project,
        scenario,
        agent,
        messages=written.messages,
        memo=TrialMemo(),
        raise_on_failure=False,
    )
    assert found.verdict != "PASS"
    shrunk = shrink(
        project, scenario, agent, choices=choices, failing=found, memo=TrialMemo(), space=space
    )
    # every way of writing the answer dropped: the answer as the complete request wrote it
    assert shrunk.reproducer_messages == [
        "Please cancel my order - card last4 4242, zip 94107",
        "O-1001",
    ]


def test_a_piecemeal_path_is_also_written_in_chinese_and_answered_in_the_other_language() -> None:
    project = agentprop.load_project(ROOT / "examples" / "supportops")
    [scenario] = [
        s
        for s in piecemeal_scenarios(project.bindings, project.scenarios())
        if s.id == "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY/answered order_id"
    ]
    written = [v.messages for v in ChoiceSpace(project, scenario).variants]
    assert ["请帮我取消订单，卡号后四位 4242，邮编 94107", "O-1001"] in written
    assert ["请帮我取消订单，卡号后四位 4242，邮编 94107", "Order O-1001"] in written


def test_an_answer_is_never_written_as_a_request() -> None:
    # "请发生在 2026-11-20", "可以发生在 2026-11-20吗？", "O-1001 asap": an answer framed as a
    # request (please, urgency, could you ... ?, if possible, a softening particle) no longer
    # plainly says what was asked, so those forms stay on requests
    project = agentprop.load_project(ROOT / "examples" / "supportops")
    for scenario in piecemeal_scenarios(project.bindings, project.scenarios()):
        space = ChoiceSpace(project, scenario)
        rng, decks = random.Random(0), {}  # type: ignore[var-annotated]
        drawn = [space.draw(rng, decks=decks) for _ in range(4 * DEFAULT_PER_PATH)]
        assert all(variant[1].role == "answer" for variant in space.turn_spaces)
        answer_steps = {st[0] for c in drawn for st in c.turns[1].steps}
        assert answer_steps, scenario.id  # the answer is still varied
        assert not answer_steps & set(REQUEST_FORMS), (scenario.id, answer_steps)
        # while the first request still meets them
        request_steps = {st[0] for c in drawn for st in c.turns[0].steps}
        assert request_steps & set(REQUEST_FORMS), scenario.id
