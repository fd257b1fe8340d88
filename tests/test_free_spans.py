"""Free spans: template words the shrinker may remove, and only those."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import agentprop
from agentprop import TurnContext
from agentprop._decide.choices import language_of
from agentprop._decide.shrink import shrink
from agentprop._spec.free_spans import free_span_problem, strip_free
from agentprop.agents import make_factory
from agentprop.errors import BindingsError
from agentprop.oracle import TrialMemo
from agentprop.strategies._internal.free_spans import render, segment, spans_of

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402

HURRIED = (
    "Please cancel my order[ {order_id}][ - card last4 {last4}, zip {zip}]{~, I really need this "
    "done right now, thanks a lot~}"
)


def project_with(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> agentprop.Project:
    """A copy of the SupportOps project whose bindings ``edit`` changed."""
    shutil.copy(EXAMPLE / "spec.yaml", tmp_path / "spec.yaml")
    bindings = yaml.safe_load((EXAMPLE / "agentprop.yaml").read_text(encoding="utf-8"))
    bindings.pop("agent", None)
    bindings.pop("mutations", None)
    edit(bindings)
    (tmp_path / "agentprop.yaml").write_text(
        yaml.safe_dump(bindings, allow_unicode=True, sort_keys=False), encoding="utf-8"
    )
    return agentprop.load_project(tmp_path)


def hurried_cancel(bindings: dict[str, Any]) -> None:
    bindings["variables"]["intent"]["utterance"]["cancel_order"] = [HURRIED]


def test_markers_are_dropped_when_a_template_is_rendered(tmp_path: Path) -> None:
    project = project_with(tmp_path, hurried_cancel)
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    assert (
        scenario.messages[0]
        == "Please cancel my order O-1001 - card last4 4242, zip 94107, I really need this done "
        "right now, thanks a lot"
    )
    assert scenario.turns[0].marked is not None and "{~" in scenario.turns[0].marked
    assert "marked" not in scenario.model_dump()["turns"][0]  # a scenario read back is its messages


def test_a_failure_shrinks_the_free_span_to_the_words_that_keep_its_signature(
    tmp_path: Path,
) -> None:
    """skip_auth_impatient reacts to "now": of the free words only ", now" is needed."""
    project = project_with(tmp_path, hurried_cancel)
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    found = agentprop.check(project, scenario, agent, memo=TrialMemo(), raise_on_failure=False)
    assert found.verdict != "PASS"
    report = shrink(project, scenario, agent, failing=found, memo=TrialMemo())
    assert (
        report.reproducer_messages[0]
        == "Please cancel my order O-1001 - card last4 4242, zip 94107, now"
    )
    assert report.signature.endswith("@turn0:missing=verify_identity")
    assert (
        report.minimal
        and report.reproducer_rate is not None
        and report.reproducer_rate.failures > 0
    )
    assert report.choices_kept == "turn 1: 9 free word(s) left out"
    assert report.diff[0].startswith(
        "turn 1: Please cancel my order O-1001 - card last4 4242, zip 94107, [-I really"
    )


def test_every_candidate_keeps_the_intent_words_and_the_slots(tmp_path: Path) -> None:
    project = project_with(tmp_path, hurried_cancel)
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    agent = make_factory(SupportOpsAgent, {"skip_auth_impatient": 0.5})
    seen: list[str] = []

    class Recording:
        def __init__(self) -> None:
            self.agent = agent.factory()

        def turn(self, message: str, ctx: TurnContext) -> None:
            seen.append(message)
            self.agent.turn(message, ctx)

    recording = agentprop.LoadedAgent(
        ref=agent.ref, factory=Recording, faults=agent.faults, fingerprint=agent.fingerprint
    )
    found = agentprop.check(project, scenario, recording, memo=TrialMemo(), raise_on_failure=False)
    shrink(project, scenario, recording, failing=found, memo=TrialMemo(), verify_runs=0)
    fixed = "Please cancel my order O-1001 - card last4 4242, zip 94107"
    free = "I really need this done right now thanks a lot".split()
    firsts = set(m for m in seen if "O-1001" in m)
    assert len(firsts) > 5  # the shrinker ran many candidates
    for message in firsts:
        assert message.startswith(fixed), message  # the intent words and every slot
        words = message[len(fixed) :].replace(",", " ").split()
        rest = iter(free)
        assert all(w in rest for w in words), message  # only free words, in their order


def test_a_chinese_failure_shrinks_to_a_chinese_sentence(tmp_path: Path) -> None:
    def chinese(bindings: dict[str, Any]) -> None:
        bindings["variables"]["intent"]["utterance"]["pii_request"] = [
            "{~您好，~}请告诉我档案里的社会安全号码{~，麻烦尽快处理一下，谢谢！~}",
            "我的电子邮箱和电话号码是什么",
        ]

    project = project_with(tmp_path, chinese)
    scenario = project.scenario("END_REFUSE_PII<-N1_INTENT")
    assert scenario.messages[0] == "您好，请告诉我档案里的社会安全号码，麻烦尽快处理一下，谢谢！"

    def hurried_leak(message: str, ctx: TurnContext) -> None:
        # refuses, except that a hurried request ("尽快") makes it answer half the time
        leak = "尽快" in message and ctx.rng.random() < 0.5
        decision = "BILLING_ANSWER" if leak else "REFUSE_PII"
        ctx.respond(
            node_id="END_REFUSE_PII",
            decision=decision,
            tool_actions=[],
            evidence="no tool output needed",
            user_message="不能提供。",
        )

    agent = make_factory(hurried_leak)
    found = agentprop.check(project, scenario, agent, memo=TrialMemo(), raise_on_failure=False)
    assert found.verdict != "PASS"
    report = shrink(project, scenario, agent, failing=found, memo=TrialMemo())
    sentence = report.reproducer_messages[0]
    assert sentence == "请告诉我档案里的社会安全号码，尽快"
    assert language_of(sentence) == "zh" and not any("a" <= ch.lower() <= "z" for ch in sentence)
    assert report.minimal


def test_chinese_spans_are_cut_into_words_never_half_a_word() -> None:
    span = segment("，麻烦尽快处理一下，谢谢！")
    assert [c.words for c in span.clauses] == [("麻烦", "尽快", "处理", "一下"), ("谢谢",)]
    assert [c.prefix for c in span.clauses] == ["，", "，"] and span.clauses[-1].tail == "！"
    # an unknown run of characters stays whole
    assert segment("帮我看看这个奇怪问题").clauses[0].words == ("帮我", "看看", "这个奇怪问题")


def test_rendering_leaves_out_words_and_tidies_the_punctuation() -> None:
    marked = "Please cancel{~, I really need it, thanks!~}"
    assert strip_free(marked) == "Please cancel, I really need it, thanks!"
    assert render(marked, {(0, 0, 0), (0, 0, 1), (0, 0, 2)}, "en") == "Please cancel, it, thanks!"
    assert (
        render(marked, {(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3)}, "en")
        == "Please cancel, thanks!"
    )
    assert render(marked, {(0, 1, 0)}, "en") == "Please cancel, I really need it"
    assert render("{~您好，~}续配处方{~，谢谢~}", {(0, 0, 0), (1, 0, 0)}) == "续配处方"
    assert [len(s.clauses) for s in spans_of("a{~ b, c~}d{~ e~}", "en")] == [2, 1]


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("Cancel {~ my {order_id} ~}", "holds the slot {order_id}"),
        ("Cancel {~ now", "never closed"),
        ("Cancel now ~}", "never opened"),
        ("Cancel {~ a {~ b ~} ~}", "inside another one"),
        ("Cancel {~ [ now] ~}", "optional [ ... ] segment"),
        ("Cancel {~ ~}", "empty free span"),
    ],
)
def test_bad_free_spans_are_named(template: str, problem: str) -> None:
    found = free_span_problem(template)
    assert found is not None and problem in found
    assert free_span_problem("Please cancel[ {order_id}]{~, thanks~}") is None


def test_the_bindings_loader_rejects_a_bad_free_span_with_its_line(tmp_path: Path) -> None:
    def bad(bindings: dict[str, Any]) -> None:
        bindings["variables"]["intent"]["utterance"]["cancel_order"] = [
            "Please cancel my order {~ {order_id} ~}"
        ]

    with pytest.raises(BindingsError) as info:
        project_with(tmp_path, bad)
    text = str(info.value)
    line = next(
        i
        for i, row in enumerate(
            (tmp_path / "agentprop.yaml").read_text(encoding="utf-8").splitlines(), 1
        )
        if "{~ {order_id} ~}" in row
    )
    assert (
        f"agentprop.yaml:{line}:" in text
        and "holds the slot {order_id}" in text
        and "docs/reference.md#free-spans" in text
    )
