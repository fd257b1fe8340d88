"""``--tool-choice`` reaches the model agents' requests (Chat, Responses, Messages), on loopback."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from test_anthropic_agent import AgentAsModel, SupportOpsAgent
from test_openai_agent import OpenAIAgentAsModel

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop.testing import MessagesServer, OpenAIServer

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
CASE = "END_REFUSE_PII<-N1_INTENT"
ONE_CASE = (
    "--kinds",
    "mft",
    "--case",
    CASE,
    "--runs",
    "1",
    "--shrink-budget",
    "0",
    "--corpus",
    "none",
    "--cache",
    "none",
)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "AGENTPROP_CACHE_MODE",
        "CI",
    ):
        monkeypatch.delenv(name, raising=False)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def sent_choices(server: MessagesServer) -> list[object]:
    return [
        r.json.get("tool_choice", "(not sent)") for r in server.requests if isinstance(r.json, dict)
    ]


@pytest.mark.parametrize(
    ("api", "given", "sent"),
    [("chat", None, "required"), ("chat", "auto", "auto"), ("responses", "auto", "auto")],
)
def test_openai_requests_carry_the_tool_choice_given(
    api: str, given: str | None, sent: str
) -> None:
    project = load_project(SUPPORTOPS)
    playing = OpenAIAgentAsModel(
        lambda: SupportOpsAgent(faults={}), project.spec, project.bindings.context
    )
    extra = ("--tool-choice", given) if given else ()
    with OpenAIServer(handler=playing) as server:
        code, out, err = cli(
            "run",
            str(SUPPORTOPS),
            "--agent",
            "openai",
            "--model",
            "gpt-4.1-mini",
            "--api",
            api,
            "--base-url",
            server.base_url,
            *ONE_CASE,
            *extra,
        )
        choices = sent_choices(server)
    assert code in (0, 3), out + err
    assert choices and set(choices) == {sent}
    assert "1 cases: 1 passed" in out or "1 case: 1 passed" in out


@pytest.mark.parametrize(
    ("given", "sent"),
    [(None, "(not sent)"), ("required", {"type": "any"}), ("auto", {"type": "auto"})],
)
def test_anthropic_requests_carry_the_messages_apis_tool_choice(
    given: str | None, sent: object
) -> None:
    project = load_project(SUPPORTOPS)
    extra = ("--tool-choice", given) if given else ()
    with MessagesServer(
        handler=AgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    ) as server:
        code, out, err = cli(
            "run",
            str(SUPPORTOPS),
            "--agent",
            "anthropic",
            "--model",
            "claude-sonnet-4-6",
            "--base-url",
            server.base_url,
            *ONE_CASE,
            *extra,
        )
        choices = sent_choices(server)
    assert code in (0, 3), out + err
    assert choices and all(c == sent for c in choices)


def test_a_bad_tool_choice_is_a_usage_error_naming_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, _ = cli(
        "run", str(SUPPORTOPS), "--agent", "openai", "--model", "m", "--tool-choice", "always"
    )
    err = capsys.readouterr().err  # argparse writes its usage errors to sys.stderr
    assert code == 2 and "invalid choice: 'always'" in err and "'required'" in err


def test_tool_choice_is_a_model_option_only() -> None:
    code, _, err = cli("run", str(SUPPORTOPS), "--tool-choice", "auto", "--kinds", "mft")
    assert code == 2 and "--tool-choice" in err and "only apply to a model agent" in err


def test_the_parsers_tool_choices_are_the_agents() -> None:
    from agentprop._agents.model_agent import TOOL_CHOICES
    from agentprop._cli.options import TOOL_CHOICES as PARSER_CHOICES

    assert PARSER_CHOICES == TOOL_CHOICES
