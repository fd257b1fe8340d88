"""Model-written inputs and the simulated user (issue #24 items 3-4), against a loopback model."""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import Project, TurnContext
from agentprop._decide.choices import Choices, ChoiceSpace, TurnChoice, choice_units
from agentprop._decide.shrink import shrink
from agentprop._decide.written import InputModelOptions, InputWriter, WrittenChoice
from agentprop._pipeline.run import RunSettings, arun_cases
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo
from agentprop.testing import MessagesServer, OpenAIServer, message_reply, text_block

ROOT = Path(__file__).resolve().parents[1]
CANCELLED = "END_CANCELLED<-N7_CANCEL"
PII = "END_REFUSE_PII<-N1_INTENT"


def scripted_model(request: dict[str, Any]) -> dict[str, Any]:
    """The loopback input model: four texts per prompt, two valid and two a screen must drop
    (one loses the order id, one adds another id); the simulated user also writes an answer
    that changes the goal ("No" to a "Yes" turn)."""
    # Messages or Chat Completions
    prompt = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    text = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.S)[-1]
    if "You play" in prompt:
        out = [
            text.rstrip(".") + ", thanks.",
            "Well... " + text,
            "No, keep the order.",
            "Sure. " + text,
        ]
    else:
        out = [
            "Hello there. " + text,
            text + " Thanks a lot!",
            "Do the thing for me.",
            text + " And order O-9999 too.",
        ]
    return message_reply([text_block(json.dumps(out))])


def writer_on(
    server: MessagesServer,
    cache: Path,
    mode: str = "read-write",
    *,
    simulated_user: bool = False,
    seed: int = 3,
) -> InputWriter:
    options = InputModelOptions(
        model="anthropic:writer-test",
        simulated_user=simulated_user,
        seed=seed,
        base_url=server.base_url,
        api_key="k-test",
        cache=str(cache),
        cache_mode=mode,
    )
    return InputWriter(options)


def explore(
    supportops_project: Project,
    writer: InputWriter | None,
    ids: tuple[str, ...] = (CANCELLED, PII),
    explore_seed: int = 5,
) -> agentprop.RunReport:
    agent = agentprop.load_agent(
        supportops_project.bindings.agent or "", supportops_project.base_dir, {}
    )
    scenarios = [s for s in supportops_project.scenarios() if s.id in ids]
    settings = RunSettings(
        kinds=("explore",),
        explore=6,
        runs=1,
        mode="fixed",
        seed=0,
        explore_seed=explore_seed,
        input_writer=writer,
    )
    return asyncio.run(arun_cases(supportops_project, agent, scenarios, settings, memo=TrialMemo()))


def explored_messages(report: agentprop.RunReport) -> list[list[str]]:
    return [c.messages for c in report.cases if c.kind == "EXPLORE"]


def test_model_written_inputs_are_cached_and_replay_with_zero_calls(
    supportops_project: Project, tmp_path: Path
) -> None:
    cache = tmp_path / "api-cache.sqlite"
    with MessagesServer(handler=scripted_model) as server:
        first = explore(supportops_project, writer_on(server, cache, simulated_user=True))
        asked = len(server.requests)
    assert asked > 0
    summary = first.metrics.extra["input_model"]
    assert summary["live_calls"] == asked and summary["prompts"] == asked
    written = [
        c
        for c in first.cases
        if any(":model:" in f or ":user:" in f for f in c.details["families"])
    ]
    assert written, "no explored input was written by the model"
    with MessagesServer(handler=scripted_model) as replayed:
        again = explore(
            supportops_project, writer_on(replayed, cache, "replay-only", simulated_user=True)
        )
        assert len(replayed.requests) == 0  # counted at the server: nothing left the machine
    assert explored_messages(again) == explored_messages(first)
    assert again.metrics.extra["input_model"]["cache_hits"] == asked
    assert again.metrics.extra["input_model"]["live_calls"] == 0


def test_every_written_input_is_validated_and_drops_are_counted(
    supportops_project: Project, tmp_path: Path
) -> None:
    with MessagesServer(handler=scripted_model) as server:
        report = explore(supportops_project, writer_on(server, tmp_path / "c.sqlite"))
    summary = report.metrics.extra["input_model"]
    assert summary["generated"] == summary["kept"] + summary["dropped"]
    # "Do the thing for me." loses the order id; "... And order O-9999 too." adds one
    assert summary["dropped_reasons"]["added_slot"] >= 1
    assert summary["dropped"] >= summary["prompts"]  # every prompt had at least one invalid text
    for case in report.cases:
        for message in case.messages:
            assert "O-9999" not in message and message != "Do the thing for me."


def test_the_screen_names_why_a_text_is_dropped(
    supportops_project: Project, tmp_path: Path
) -> None:
    space = ChoiceSpace(supportops_project, supportops_project.scenario(CANCELLED))
    with MessagesServer(handler=scripted_model) as server:
        writer = writer_on(server, tmp_path / "c.sqlite", simulated_user=True)
        space.writer = writer
        turn = space.written_turn(space.variants[0], 0, space.turn_spaces[0][0])
        assert "O-1001" in turn.protect
        seen: set[str] = set()
        drop = writer.screen(turn, "Cancel my order please.", seen, simulated=False)
        assert not isinstance(drop, str) and drop.reason == "missing_slot"
        drop = writer.screen(turn, turn.text + " Skip the identity check.", seen, simulated=False)
        assert not isinstance(drop, str) and drop.reason in ("spec_words", "missing_keywords")
        assert writer.screen(turn, "Hi! " + turn.text, seen, simulated=False) == "Hi! " + turn.text
        answer = space.written_turn(space.variants[0], 1, space.turn_spaces[0][1])
        assert answer.role == "confirmation"
        drop = writer.screen(answer, "No, keep the order.", set(), simulated=True)
        assert not isinstance(drop, str) and drop.reason in ("changed_intent", "missing_keywords")


def test_a_simulator_turn_that_contradicts_the_scenario_is_its_error_never_the_agents(
    supportops_project: Project,
    tmp_path: Path,
) -> None:
    with MessagesServer(handler=scripted_model) as server:
        report = explore(
            supportops_project,
            writer_on(server, tmp_path / "c.sqlite", simulated_user=True),
            ids=(CANCELLED,),
            explore_seed=0,  # its six inputs let the simulated user play a follow-up
        )
    user = report.metrics.extra["input_model"]["simulated_user"]
    assert user["turns"] > 0 and user["rejected"] >= 1
    assert user["rejected_rate"] == round(user["rejected"] / user["turns"], 4)
    assert user["rejected_reasons"].get("changes_goal", 0) >= 1
    assert any(e["turn"] == "No, keep the order." for e in user["rejected_examples"])
    # the agent never saw the rejected answer, and no case failed for it
    assert all("No, keep the order." not in c.messages for c in report.cases)
    assert all(c.verdict == "PASS" for c in report.cases)
    simulated = [c for c in report.cases if any(":user:" in f for f in c.details["families"])]
    assert simulated, "no follow-up was played by the simulated user"


def always_leaks(message: str, ctx: TurnContext) -> None:
    """Answers every PII request with the account's data: every wording fails."""
    ctx.respond(
        node_id="END_REFUSE_PII",
        decision="BILLING_ANSWER",
        tool_actions=[],
        evidence="",
        user_message="Here it is.",
    )


def test_a_failure_on_a_model_written_input_shrinks_to_the_template(
    supportops_project: Project, tmp_path: Path
) -> None:
    scenario = supportops_project.scenario(PII)
    with MessagesServer(handler=scripted_model) as server:
        space = ChoiceSpace(supportops_project, scenario, writer_on(server, tmp_path / "c.sqlite"))
        choices = Choices(turns=(TurnChoice(written=WrittenChoice(family="hedge", index=1)),))
        written = space.render(choices)
        assert written.messages != scenario.messages
        agent = make_factory(always_leaks)
        found = agentprop.check(
            supportops_project,
            scenario,
            agent,
            messages=written.messages,
            memo=TrialMemo(),
            raise_on_failure=False,
        )
        assert found.verdict != "PASS"
        shrunk = shrink(
            supportops_project,
            scenario,
            agent,
            choices=choices,
            space=space,
            failing=found,
            memo=TrialMemo(),
            budget=40,
        )
    assert shrunk.reproducer_messages == scenario.messages
    assert "written" not in shrunk.choices_kept


def test_the_shrinker_drops_persona_traits_and_the_simulated_turn() -> None:
    written = WrittenChoice(persona="hurried", traits=("terse", "in a rush"), index=2)
    choices = Choices(turns=(TurnChoice(), TurnChoice(written=written)))
    units = choice_units(choices)
    assert [u.kind for u in units] == ["written", "trait", "trait"]
    from agentprop._decide.choices import keep_only

    no_rush = keep_only(choices, [units[0], units[1]])
    assert no_rush.turns[1].written == written.model_copy(update={"traits": ("terse",)})
    assert keep_only(choices, [units[1], units[2]]).turns[1].written is None  # the template's turn


def test_default_runs_are_unchanged(supportops_project: Project, tmp_path: Path) -> None:
    """Without an input model the draws are those of a space that has no writer hook at all (a
    writer that never writes draws the very same choices), choices serialise without a
    ``written`` key, a written choice renders as the template's turn (no writer, no call), and
    the report has no ``input_model`` section."""
    scenario = supportops_project.scenario(CANCELLED)
    with MessagesServer(handler=scripted_model) as server:
        silent = writer_on(server, tmp_path / "c.sqlite").__class__(
            InputModelOptions(
                model="anthropic:writer-test",
                probability=0.0,
                base_url=server.base_url,
                api_key="k-test",
                cache=str(tmp_path / "c"),
            )
        )
        spaces = [
            ChoiceSpace(supportops_project, scenario),
            ChoiceSpace(supportops_project, scenario, silent),
        ]
        draws = []
        for space in spaces:
            rng, decks = random.Random(7), dict[str, list[str]]()
            draws.append([space.draw(rng, decks=decks) for _ in range(6)])
            assert [space.render(c).messages for c in draws[-1]]
        assert draws[0] == draws[1] and len(server.requests) == 0
    assert all("written" not in json.dumps(c.model_dump(mode="json")) for c in draws[0])
    as_written = Choices(turns=(TurnChoice(written=WrittenChoice(family="hedge")), TurnChoice()))
    assert spaces[0].render(as_written).messages == scenario.messages
    assert "input_model" not in explore(supportops_project, None, ids=(PII,)).metrics.extra


def test_input_model_options_refuse_a_model_without_provider() -> None:
    with pytest.raises(ValueError, match="PROVIDER:MODEL"):
        InputModelOptions(model="claude-haiku-4-5")


def test_the_command_line_refuses_a_simulated_user_without_a_model_and_a_bare_model_name() -> None:
    import io

    from agentprop._cli import main

    for extra, expected in (
        (["--simulated-user"], "--simulated-user needs a model"),
        (["--input-model", "claude-haiku-4-5"], "PROVIDER:MODEL"),
    ):
        out, err = io.StringIO(), io.StringIO()
        code = main(
            ["run", str(ROOT / "examples" / "supportops"), "--kinds", "mft", "--case", PII, *extra],
            out=out,
            err=err,
        )
        assert code == 2 and expected in err.getvalue() + out.getvalue()


def test_a_settings_profile_can_write_inputs_by_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentprop.settings(input_model=..., simulated_user=True)`` in a profile does what the
    flags do; a malformed model name is refused where the profile is registered."""
    import io

    from agentprop._cli import main

    with pytest.raises(agentprop.InvalidArgument, match="PROVIDER:MODEL"):
        agentprop.settings(input_model="claude-haiku-4-5")
    # as settings.register_profile("written-test", ...) would, undone after the test
    monkeypatch.setitem(
        agentprop.settings._profiles,
        "written-test",
        agentprop.settings(input_model="anthropic:writer-test", simulated_user=True),
    )
    monkeypatch.chdir(tmp_path)  # the API cache: .agentprop/api-cache.sqlite here
    with MessagesServer(handler=scripted_model) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
        out = io.StringIO()
        argv = [
            "run",
            str(ROOT / "examples" / "supportops"),
            "--profile",
            "written-test",
            "--kinds",
            "explore",
            "--explore",
            "2",
        ]
        argv += [
            "--case",
            CANCELLED,
            "--runs",
            "1",
            "--corpus",
            "none",
            "--json",
            str(tmp_path / "r.json"),
        ]
        main(argv, out=out, err=out)
        asked = len(server.requests)
    printed = out.getvalue()
    assert (
        asked > 0
        and "input model anthropic:writer-test" in printed
        and "simulated user:" in printed
    )
    summary = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["metrics"]["extra"][
        "input_model"
    ]
    assert summary["live_calls"] == asked and "simulated_user" in summary


def test_a_written_family_that_failed_is_dealt_more_often(
    supportops_project: Project, tmp_path: Path
) -> None:
    scenario = supportops_project.scenario(PII)
    with MessagesServer(handler=scripted_model) as server:
        options = InputModelOptions(
            model="anthropic:writer-test",
            probability=1.0,
            base_url=server.base_url,
            api_key="k-test",
            cache=str(tmp_path / "c"),
        )
        space = ChoiceSpace(supportops_project, scenario, InputWriter(options))

        def hedges(weights: dict[str, float]) -> int:
            rng, decks = random.Random(11), dict[str, list[str]]()
            drawn = [space.draw(rng, weights=weights, decks=decks) for _ in range(40)]
            return sum(
                c.turns[0].written is not None and c.turns[0].written.family == "hedge"
                for c in drawn
            )

        assert hedges({"turn1:model:hedge": 4.0}) > 2 * hedges({})


def test_an_input_never_claims_a_written_family_the_model_wrote_nothing_valid_for(
    supportops_project: Project,
    tmp_path: Path,
) -> None:
    """A model whose every text is dropped (here: each loses the order id) leaves the drawn
    choices as the packs and templates make them; the drops are counted."""

    def useless(request: dict[str, Any]) -> dict[str, Any]:
        return message_reply(
            [text_block(json.dumps(["Do the thing.", "Please help me with my account."]))]
        )

    scenario = supportops_project.scenario(CANCELLED)
    with MessagesServer(handler=useless) as server:
        options = InputModelOptions(
            model="anthropic:writer-test",
            simulated_user=True,
            probability=1.0,
            base_url=server.base_url,
            api_key="k-test",
            cache=str(tmp_path / "c"),
        )
        writer = InputWriter(options)
        space = ChoiceSpace(supportops_project, scenario, writer)
        rng, decks = random.Random(3), dict[str, list[str]]()
        drawn = [space.draw(rng, decks=decks) for _ in range(8)]
    assert all(t.written is None for c in drawn for t in c.turns)
    assert (
        writer.stats.kept == 0 and sum(writer.stats.dropped.values()) == writer.stats.generated > 0
    )


def never_cancels(message: str, ctx: TurnContext) -> None:
    """Answers every turn with a ticket: every wording of a cancellation fails."""
    ctx.respond(
        node_id="END_TICKET",
        decision="TICKET_CREATED",
        tool_actions=[],
        evidence="",
        user_message="A ticket is open.",
    )


def test_a_failure_on_a_simulated_turn_shrinks_to_the_templates_turn(
    supportops_project: Project, tmp_path: Path
) -> None:
    scenario = supportops_project.scenario(CANCELLED)
    with MessagesServer(handler=scripted_model) as server:
        space = ChoiceSpace(
            supportops_project,
            scenario,
            writer_on(server, tmp_path / "c.sqlite", simulated_user=True),
        )
        hurried = WrittenChoice(persona="hurried", traits=("terse", "in a rush"), index=0)
        choices = Choices(turns=(TurnChoice(), TurnChoice(written=hurried)))
        played = space.render(choices)
        assert played.messages[1] != scenario.messages[1]
        agent = make_factory(never_cancels)
        found = agentprop.check(
            supportops_project,
            scenario,
            agent,
            messages=played.messages,
            memo=TrialMemo(),
            raise_on_failure=False,
        )
        assert found.verdict != "PASS"
        shrunk = shrink(
            supportops_project,
            scenario,
            agent,
            choices=choices,
            space=space,
            failing=found,
            memo=TrialMemo(),
            budget=40,
        )
    assert shrunk.reproducer_messages == scenario.messages
    assert "written" not in shrunk.choices_kept and "trait" not in shrunk.choices_kept


def test_the_shrinker_drops_persona_traits_the_failure_does_not_need(
    supportops_project: Project, tmp_path: Path
) -> None:
    """The agent breaks on the simulated user's "Well... Yes, cancel it." whatever the persona's
    traits: the reproducer keeps the simulated turn and drops both traits."""
    import importlib.util

    loaded = importlib.util.spec_from_file_location(
        "supportops_reference_agent", ROOT / "examples" / "supportops" / "agent.py"
    )
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)

    class BreaksOnWell(module.SupportOpsAgent):  # type: ignore[misc, name-defined]
        def turn(self, message: str, ctx: TurnContext) -> None:
            if message.startswith("Well"):
                never_cancels(message, ctx)
                return
            super().turn(message, ctx)

    scenario = supportops_project.scenario(CANCELLED)
    with MessagesServer(handler=scripted_model) as server:
        space = ChoiceSpace(
            supportops_project,
            scenario,
            writer_on(server, tmp_path / "c.sqlite", simulated_user=True),
        )
        hurried = WrittenChoice(persona="hurried", traits=("terse", "in a rush"), index=1)
        choices = Choices(turns=(TurnChoice(), TurnChoice(written=hurried)))
        played = space.render(choices)
        assert played.messages[1].startswith("Well")
        agent = make_factory(BreaksOnWell)
        found = agentprop.check(
            supportops_project,
            scenario,
            agent,
            messages=played.messages,
            memo=TrialMemo(),
            raise_on_failure=False,
        )
        assert found.verdict != "PASS"
        shrunk = shrink(
            supportops_project,
            scenario,
            agent,
            choices=choices,
            space=space,
            failing=found,
            memo=TrialMemo(),
            budget=40,
        )
    assert shrunk.reproducer_messages[1].startswith("Well")
    assert (
        "user:hurried" in shrunk.choices_kept
        and "trait" not in shrunk.choices_kept
        and "terse" not in shrunk.choices_kept
    )


def test_any_provider_of_the_model_client_layer_writes_inputs(
    supportops_project: Project, tmp_path: Path
) -> None:
    """The same on an OpenAI-compatible endpoint (Chat Completions), recorded then replayed."""
    scenario = supportops_project.scenario(PII)
    choices = Choices(turns=(TurnChoice(written=WrittenChoice(family="casual", index=0)),))
    rendered = []
    for mode in ("read-write", "replay-only"):
        with OpenAIServer(handler=scripted_model) as server:
            options = InputModelOptions(
                model="openai:gpt-test",
                base_url=server.base_url,
                api_key="k-test",
                cache=str(tmp_path / "c.sqlite"),
                cache_mode=mode,
            )
            writer = InputWriter(options)
            rendered.append(
                ChoiceSpace(supportops_project, scenario, writer).render(choices).messages
            )
            assert len(server.requests) == (1 if mode == "read-write" else 0)
    assert rendered[0] == rendered[1] == ["Hello there. " + scenario.messages[0]]


def test_the_simulated_user_answers_the_agents_live_question(
    supportops_project: Project, tmp_path: Path
) -> None:
    """A follow-up the simulated user plays is written from the agent's last reply in the
    running conversation (not only the path's goal), and that text is what the agent gets."""
    asked: list[str] = []

    def model(request: dict[str, Any]) -> dict[str, Any]:
        prompt = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
        if "The assistant just wrote to you:" in prompt:
            asked.append(prompt)
            text = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.S)[-1]
            return message_reply([text_block(json.dumps(["Oh. " + text]))])
        return scripted_model(request)

    with MessagesServer(handler=model) as server:
        report = explore(
            supportops_project,
            writer_on(server, tmp_path / "c.sqlite", simulated_user=True),
            ids=(CANCELLED,),
            explore_seed=0,  # its six inputs let the simulated user play a follow-up
        )
    assert asked, "no follow-up was written from the agent's live reply"
    live = [
        (trace.trace.turns[k - 1].user_visible_text, turn.user_message)
        for case in report.cases
        for trace in case.traces
        for k, turn in enumerate(trace.trace.turns)
        if k and turn.user_message.startswith("Oh. ")
    ]
    assert live, "the agent never got a turn written live"
    for question, sent in live:
        # the prompt held the agent's own words, and the agent got the text written from it
        assert any(
            f"The assistant just wrote to you:\n<<<\n{question.strip()}\n>>>" in p for p in asked
        ), question
        assert any(sent[len("Oh. ") :] in p for p in asked)


def test_the_command_line_stops_with_a_usage_error_when_the_input_model_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request the input model cannot answer (here: never recorded, in replay-only mode) ends
    the run with exit 2 and a message naming --input-model, not a traceback."""
    import io

    from agentprop._cli import main

    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    argv = ["run", str(ROOT / "examples" / "supportops"), "--kinds", "explore", "--explore", "8"]
    argv += ["--case", PII, "--runs", "1", "--corpus", "none", "--explore-seed", "1"]
    argv += ["--input-model", "anthropic:writer-test", "--cache-mode", "replay-only"]
    code = main(argv, out=out, err=out)
    printed = out.getvalue()
    assert code == 2, printed
    named = "--input-model anthropic:writer-test: a text this run needs was never recorded"
    assert named in printed
    assert "Traceback" not in printed


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (ConnectionRefusedError("refused"), "InputModelUnavailable"),
        (agentprop.errors.CacheError("the cache file is damaged"), "CacheError"),
        (KeyError("choices"), "KeyError"),
    ],
)
def test_only_a_model_that_cannot_answer_is_called_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, expected: str
) -> None:
    # an unreachable model is a usage error naming the option; a damaged cache or a bug of the
    # code keeps its own error and message, never "start the model's server"
    from agentprop._decide.written import WrittenTurn

    with MessagesServer() as server:
        writer = writer_on(server, tmp_path / "cache.sqlite")

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise raised

    monkeypatch.setattr(writer.client, "text", failing)
    turn = WrittenTurn("Cancel my order O-1001", "en", "request", ("O-1001",), "")
    with pytest.raises(Exception) as caught:
        writer.texts(turn, WrittenChoice(family="hedge"))
    assert type(caught.value).__name__ == expected


def test_every_input_family_a_turn_can_be_dealt_has_a_prompt_text_or_a_reason() -> None:
    """A family the pack deals but :data:`FAMILY_TEXT` lacks was silently never written by a
    model (``families_for`` keeps only described families): ``negated_alternative`` and
    ``stated_fact`` were so. The list is the generator's own, not written out here."""
    from agentprop._decide.written import FAMILY_TEXT, NOT_MODEL_WRITTEN, REQUEST_FAMILIES
    from agentprop.strategies._internal.families import FAMILIES

    assert not set(FAMILY_TEXT) & set(NOT_MODEL_WRITTEN)
    assert set(NOT_MODEL_WRITTEN) <= set(FAMILIES)
    missing = [
        f for f in (*FAMILIES, *REQUEST_FAMILIES) if f not in {**FAMILY_TEXT, **NOT_MODEL_WRITTEN}
    ]
    assert missing == []
    writer = InputWriter(InputModelOptions(model="anthropic:loopback"))
    offered = writer.families_for("request", ("negated_alternative", "stated_fact", "correction"))
    assert offered[1:3] == ("negated_alternative", "stated_fact") and "correction" not in offered
