"""Model-written inputs in pytest (issue #24 item 3): ``--agentprop-input-model`` and
``--agentprop-simulated-user``, against the loopback model of ``agentprop.testing``.

Each test writes a small test file into a ``pytester`` sandbox and runs pytest on it in this
process; the sandbox's tests draw from ``aps.paraphrases`` / ``aps.conversations`` and write
what they drew to ``drawn.jsonl``. Requests are counted at the loopback server.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import core as hypothesis_core
from hypothesis import given, settings

from agentprop import load_project
from agentprop import strategies as aps
from agentprop.phrases import Paraphrase
from agentprop.strategies._internal.model_written import Realisation, realising
from agentprop.testing import MessagesServer, message_reply, text_block

pytest_plugins = ["pytester"]

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
CANCEL_ID = "END_CANCELLED<-N7_CANCEL"
TEMPLATE = "Please cancel my order O-1001"

SANDBOX = f"""
import json
from pathlib import Path

from hypothesis import given, settings

import agentprop
from agentprop import strategies as aps

project = agentprop.load_project(Path({str(EXAMPLE)!r}))


def record(test, text, steps):
    with open("drawn.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({{"test": test, "text": text, "steps": steps}}) + "\\n")


@settings(agentprop.agent_settings(), derandomize=True, database=None, max_examples=25)
@given(aps.paraphrases({TEMPLATE!r}, max_transforms=1))
def test_draws(request):
    record("draws", str(request), [str(s) for s in request.transforms])


@settings(agentprop.agent_settings(), derandomize=True, database=None, max_examples=15)
@given(aps.conversations(project.spec, project.bindings, {CANCEL_ID!r}, max_transforms=1))
def test_conversations(scenario):
    # the follow-up: the user's answer to the agent's question
    record("answer", scenario.messages[1], scenario.provenance.paraphrase_steps[1])
"""

FAILING = f"""
from hypothesis import given, settings

import agentprop
from agentprop import strategies as aps


@settings(agentprop.agent_settings(), derandomize=True, database=None, max_examples=40)
@given(aps.paraphrases({TEMPLATE!r}, max_transforms=1))
def test_every_wording_fails(request):
    assert request.startswith("Hello there"), request
"""


def loopback_model(request: dict[str, Any]) -> dict[str, Any]:
    """Four texts per prompt: two the screen keeps, one that loses the order id and one that
    adds another; the simulated user also answers "No, keep the order." (changes the goal)."""
    prompt = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    text = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.S)[-1]
    if "You play" in prompt:
        out = ["Well... " + text, "Sure. " + text, "No, keep the order.", text + " And O-9999."]
    else:
        out = ["Hello there. " + text, text + " Thanks a lot!", "Do the thing for me."]
        out.append(text + " And order O-9999 too.")
    return message_reply([text_block(json.dumps(out))])


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest on the sandbox in this process (Hypothesis's global seed put back after)."""
    (pytester.path / "drawn.jsonl").unlink(missing_ok=True)
    seed = hypothesis_core.global_force_seed
    try:
        return pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", "--import-mode=importlib", *args
        )
    finally:
        hypothesis_core.global_force_seed = seed


def drawn(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    path = pytester.path / "drawn.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_session_with_an_input_model_draws_its_texts_and_replays_them_offline(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_sandbox=SANDBOX, test_failing=FAILING)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
    option = ["--agentprop-input-model", "anthropic:writer-test", "--agentprop-simulated-user"]
    with MessagesServer(handler=loopback_model) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        first = run(pytester, *option, "--agentprop-json", "first.json")
        asked = len(server.requests)
    first.assert_outcomes(passed=2, failed=1)
    # every model-written text is a choice whose simplest value is the template: a property that
    # fails on every wording reports the template itself, unchanged
    assert f"Paraphrase: {TEMPLATE!r} (original, unchanged)" in first.stdout.str()
    recorded = drawn(pytester)
    written = [d for d in recorded if d["steps"] and d["steps"][0].startswith("model:")]
    assert asked > 0 and written, "no model-written input was drawn"
    # a request is written in its families; the simulated user answers in a persona
    families = {d["steps"][0].split("(")[0] for d in written}
    assert "model:template" in families and "model:hedge" in families
    assert any(f.startswith("model:user:") for f in families)
    summary = json.loads((pytester.path / "first.json").read_text(encoding="utf-8"))
    summary = summary["input_model"]
    assert summary["prompts"] == summary["live_calls"] == asked
    # every drawn text passed the screen: ids intact, none added, the template's intent kept;
    # the others were dropped and counted by reason
    for d in written:
        assert "O-1001" in d["text"] or d["test"] == "answer", d
        assert "O-9999" not in d["text"], d
        assert d["text"] not in ("Do the thing for me.", "No, keep the order."), d
    assert summary["generated"] == summary["kept"] + summary["dropped"] > 0
    reasons = summary["dropped_reasons"]
    # "Do the thing for me." loses the order id; "... O-9999 ..." adds one
    assert reasons["missing_slot"] >= 1 and reasons["added_slot"] >= 1
    # a simulated user's turn that contradicts the scenario is its error, never sent
    user = summary["simulated_user"]
    assert user["turns"] > 0 and user["rejected"] >= 1
    assert user["rejected_reasons"].get("changes_goal", 0) >= 1
    assert any(e["turn"] == "No, keep the order." for e in user["rejected_examples"])
    assert "simulated user:" in first.stdout.str()
    assert re.search(r"input model anthropic:writer-test: \d+ prompt\(s\)", first.stdout.str())

    # the second session replays: the same draws, zero requests at the server
    with MessagesServer(handler=loopback_model) as replayed:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", replayed.base_url)
        again = run(pytester, *option, "--agentprop-cache-mode", "replay-only")
        assert len(replayed.requests) == 0
    again.assert_outcomes(passed=2, failed=1)
    assert drawn(pytester) == recorded
    assert f"0 live call(s), {asked} from the API cache" in again.stdout.str()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--agentprop-input-model", "anthropic:writer-test"],
            "--agentprop-input-model anthropic:writer-test: cannot reach the model at",
        ),
        (["--agentprop-input-model", "claude-haiku-4-5"], "is not PROVIDER:MODEL"),
        (["--agentprop-simulated-user"], "--agentprop-simulated-user needs a model"),
    ],
)
def test_the_option_without_a_usable_model_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{free_port()}")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_behind_a_proxy_the_model_is_not_probed_directly(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the SDKs send through HTTP(S)_PROXY: an endpoint only the proxy reaches is no usage error
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    result = run(pytester, "--agentprop-input-model", "anthropic:writer-test")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()


def test_a_text_never_recorded_is_an_error_naming_the_option_in_replay_only_mode(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_failing=FAILING)
    with MessagesServer(handler=loopback_model) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = run(
            pytester,
            "--agentprop-input-model",
            "anthropic:writer-test",
            "--agentprop-cache-mode",
            "replay-only",
        )
        assert len(server.requests) == 0
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "InputModelUnavailable: --agentprop-input-model anthropic:writer-test: a text" in out
    assert "never recorded in the API cache" in out


class Empty:
    """A realiser whose model wrote nothing that passed the screen."""

    def realisations(
        self, text: str, *, lang: str, protect: Any, role: str = "request", goal: str = ""
    ) -> tuple[Realisation, ...]:
        return ()


def test_without_texts_to_draw_nothing_drawn_changes() -> None:
    """Without an input model (no realiser) and with one that kept no text, the strategies draw
    the very same values: the option adds a choice only where there is a text to choose."""
    project = load_project(EXAMPLE)

    def draws() -> list[str]:
        out: list[str] = []

        @settings(derandomize=True, database=None, max_examples=25)
        @given(
            aps.paraphrases(TEMPLATE),
            aps.conversations(project.spec, project.bindings, CANCEL_ID),
        )
        def collect(p: Paraphrase, scenario: Any) -> None:
            out.append(p.describe() + " | " + " / ".join(scenario.messages))

        collect()
        return out

    plain = draws()
    with realising(Empty()):
        assert draws() == plain
    assert all("model:" not in d for d in plain)


class Fixed:
    """A realiser whose model wrote one text per family."""

    def realisations(
        self, text: str, *, lang: str, protect: Any, role: str = "request", goal: str = ""
    ) -> tuple[Realisation, ...]:
        return (Realisation("template", "Hi. " + text), Realisation("hedge", text + " if you can"))


def test_agentprops_shrinkers_replace_a_model_written_text_by_its_template() -> None:
    """A model-written text is one choice to agentprop's shrinkers too: left out, the turn is the
    template's (a spec-free check's shrinker re-renders it so), and a check with a spec keeps it
    as written rather than reading its step as a transform."""
    from hypothesis import find

    from agentprop._decide.plain_shrink import _build, _units
    from agentprop._decide.shrink import choices_of_messages
    from agentprop.strategies._internal.paraphrase import rerender

    project = load_project(EXAMPLE)
    cancel = project.scenario(CANCEL_ID)
    with realising(Fixed()):
        p = find(
            aps.paraphrases(cancel.messages[0]),
            lambda p: bool(p.transforms) and p.transforms[0].name == "model:hedge",
            settings=settings(database=None, derandomize=True),
        )
    assert p.text == cancel.messages[0] + " if you can"
    assert rerender(p, p.transforms) == p and rerender(p, []) == cancel.messages[0]
    units = _units([p])
    assert len(units) == 1
    assert _build([p], ()) == (cancel.messages[0],) and _build([p], tuple(units)) == (p.text,)
    assert choices_of_messages(cancel, [p, cancel.messages[1]]) is None


TWO_TEMPLATES = """
import pytest
from hypothesis import given, settings

import agentprop
from agentprop import strategies as aps


@pytest.mark.parametrize("text", ["Please cancel my order O-1001", "Change my address, order O-7"])
def test_draws(text):
    @settings(agentprop.agent_settings(), derandomize=True, database=None, max_examples=5)
    @given(aps.paraphrases(text))
    def draw(p):
        pass

    draw()
"""


def test_under_xdist_the_controller_adds_up_the_workers_counts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_two=TWO_TEMPLATES)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
    with MessagesServer(handler=loopback_model) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = pytester.runpytest_subprocess(
            "-n", "2", "-p", "no:cacheprovider", "--agentprop-input-model", "anthropic:w"
        )
        asked = len(server.requests)
    result.assert_outcomes(passed=2)
    assert asked == 10  # two templates, five families each, on whichever workers ran them
    assert "input model anthropic:w: 10 prompt(s) (10 live call(s)" in result.stdout.str()


def test_a_shard_drawing_model_written_inputs_is_not_merged_with_one_that_does_not(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The input model is one of the settings a pytest shard's digest covers: shards that draw
    different inputs are not one session (`agentprop merge` refuses them); unset, the digest is
    what it was."""
    from agentprop._decide.records import SHARD_FILE

    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-a-real-key")
    digests = []
    with MessagesServer(handler=loopback_model) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        for extra in ([], ["--agentprop-input-model", "anthropic:w"]):
            where = pytester.path / f"records{len(digests)}"
            shard = ["--agentprop-shard", "1/1", "--agentprop-records", str(where)]
            run(pytester, *shard, "--agentprop-seed", "1", *extra).assert_outcomes(passed=1)
            info = json.loads((where / SHARD_FILE).read_text(encoding="utf-8"))
            digests.append(info["settings_digest"])
    assert digests[0] != digests[1]


def test_a_draw_limited_to_no_or_named_transforms_never_takes_a_model_written_text() -> None:
    # the model's texts are free rewordings: a caller who allowed none (max_transforms=0) or
    # named the transforms allowed keeps that limit with an input model in force
    from hypothesis import find
    from hypothesis.errors import NoSuchExample

    project = load_project(EXAMPLE)
    text = project.scenario(CANCEL_ID).messages[0]
    with realising(Fixed()):
        for limited in (
            aps.paraphrases(text, max_transforms=0),
            aps.paraphrases(text, transforms=["typo"]),
        ):
            with pytest.raises(NoSuchExample):
                find(
                    limited,
                    lambda p: any(s.name.startswith("model:") for s in p.transforms),
                    settings=settings(database=None, derandomize=True, max_examples=200),
                )
        # and an open draw still may
        assert find(
            aps.paraphrases(text),
            lambda p: any(s.name.startswith("model:") for s in p.transforms),
            settings=settings(database=None, derandomize=True),
        ).text.endswith(("if you can", text))
