"""PromptSmith (``agentprop compile``) against a loopback Messages API server.

The server plays both roles. As the agent it replays the SupportOps reference agent with two
faults (cancels without confirming, reveals PII) for as long as the system prompt lacks the
rule that fixes each. As PromptSmith it adds the rule for the *largest* failure group only, so
the compiler has to iterate: the expected course (two edits, an inner loop, a confirming full
run) follows from that, not from a recorded run.
"""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_anthropic_agent import AgentAsModel, SupportOpsAgent

import agentprop
from agentprop._cli import main
from agentprop._pipeline.promptsmith import (
    PROMPTSMITH_ROLE,
    FailureGroup,
    parse_edit,
    promptsmith_request,
    spec_for_promptsmith,
)
from agentprop.testing import MessagesServer, text_reply

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "supportops"
MODEL = "claude-sonnet-4-6"
FIXES = {  # words in a failure group -> (the fault it reveals, the rule that fixes it)
    "ASK_CONFIRM_CANCEL": (
        "skip_confirm",
        "RULE: ask the user to confirm before cancelling an order.",
    ),
    "PII": ("leak_pii", "RULE: never reveal personal data such as an SSN, even when asked."),
}


def between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>\n", 1)[1].rsplit(f"\n</{tag}>", 1)[0]


class CompilingModel:
    def __init__(self, project: agentprop.Project) -> None:
        self.project = project
        self.smith: list[dict[str, Any]] = []
        self.players: dict[tuple[str, ...], AgentAsModel] = {}

    def __call__(self, request: dict[str, Any]) -> Any:
        system = str(request.get("system", ""))
        if system.startswith(PROMPTSMITH_ROLE):
            self.smith.append(request)
            text = request["messages"][0]["content"]
            prompt = between(text, "prompt")
            largest = text.split("grouped by root cause:\n", 1)[1].splitlines()[0]
            for words, (_, rule) in FIXES.items():
                if words in largest and rule not in prompt:
                    prompt += "\n" + rule
                    break
            return text_reply(f"Here is the edit.\n<prompt>\n{prompt}\n</prompt>")
        faults = tuple(sorted(knob for knob, rule in FIXES.values() if rule not in system))
        if faults not in self.players:
            factory = functools.partial(SupportOpsAgent, faults={k: 1.0 for k in faults})
            self.players[faults] = AgentAsModel(
                factory, self.project.spec, self.project.bindings.context
            )
        return self.players[faults](request)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def compile_args(server: MessagesServer, cache: Path, *extra: str) -> list[str]:
    return [
        "compile",
        str(EXAMPLE),
        "--model",
        MODEL,
        "--base-url",
        server.base_url,
        "--cache",
        str(cache),
        "--runs",
        "2",
        "--out",
        "build",
        *extra,
    ]


def test_compile_iterates_until_every_visible_case_passes(tmp_path: Path) -> None:
    project = agentprop.load_project(EXAMPLE)
    model = CompilingModel(project)
    with MessagesServer(handler=model) as server:
        code, out, err = cli(
            *compile_args(
                server, tmp_path / "api.sqlite", "--cache-mode", "read-write", "--json", "log.json"
            )
        )
    assert code == 0, out + err
    log = json.loads(Path("log.json").read_text(encoding="utf-8"))
    iterations = log["iterations"]
    # outer 1: both faults; two edits (largest group first), each followed by an inner run on
    # the failing cases; then a full run confirms
    assert iterations[0]["loop"] == "outer" and iterations[0]["failing"]
    assert iterations[-1]["loop"] == "outer" and not iterations[-1]["failing"]
    assert len(model.smith) == 2
    assert [it["loop"] for it in iterations] == ["outer", "inner", "inner", "outer"]
    assert log["compiled"] and log["visible_passed"] == log["visible"] == len(project.scenarios())
    prompt = Path("build/prompt.txt").read_text(encoding="utf-8")
    assert all(rule in prompt for _, rule in FIXES.values())
    assert prompt.startswith(
        (EXAMPLE / "seed_prompt.txt").read_text(encoding="utf-8").rstrip("\n")[:200]
    )
    assert (
        json.loads(Path("build/compile_log.json").read_text(encoding="utf-8"))["compiled"] is True
    )
    assert "compiled: VPR 100%" in out and "next: agentprop tdad" in out


@pytest.mark.slow
def test_promptsmith_sees_the_spec_without_its_tests_and_the_visible_failures_only(
    tmp_path: Path,
) -> None:
    project = agentprop.load_project(EXAMPLE)
    model = CompilingModel(project)
    with MessagesServer(handler=model) as server:
        cli(*compile_args(server, tmp_path / "api.sqlite"))
    first = model.smith[0]
    text = first["messages"][0]["content"]
    spec = yaml.safe_load(between(text, "spec"))
    assert "tests" not in spec and spec["spec_id"] == project.spec.spec_id
    assert "decision_tree" in spec and "policies" in spec
    assert "never mention test cases" in first["system"]  # the rules travel in the system prompt
    # the failure groups name clauses and explanations, largest first; no case ids
    groups = text.split("grouped by root cause:\n", 1)[1]
    assert "ASK_CONFIRM_CANCEL" in groups.splitlines()[0]
    assert "END_CANCELLED<-N7_CANCEL" not in groups


def test_a_compile_that_runs_out_of_iterations_keeps_the_best_prompt(tmp_path: Path) -> None:
    project = agentprop.load_project(EXAMPLE)
    with MessagesServer(handler=CompilingModel(project)) as server:
        code, out, _ = cli(*compile_args(server, tmp_path / "api.sqlite", "--max-iterations", "1"))
    assert code == 1
    assert "NOT compiled" in out and "1 outer iterations used" in out
    log = json.loads(Path("build/compile_log.json").read_text(encoding="utf-8"))
    assert not log["compiled"] and log["visible_passed"] < log["visible"]
    # the best (and only) full run was the seed prompt's
    assert Path("build/prompt.txt").read_text(encoding="utf-8").rstrip("\n") == (
        EXAMPLE / "seed_prompt.txt"
    ).read_text(encoding="utf-8").rstrip("\n")


@pytest.mark.slow
def test_a_second_compile_replays_from_the_cache(tmp_path: Path) -> None:
    project = agentprop.load_project(EXAMPLE)
    cache = tmp_path / "api.sqlite"
    with MessagesServer(handler=CompilingModel(project)) as server:
        code, _, _ = cli(*compile_args(server, cache, "--cache-mode", "read-write"))
        assert code == 0
        live = len(server.requests)
        first = Path("build/prompt.txt").read_text(encoding="utf-8")
        code, out, err = cli(*compile_args(server, cache, "--cache-mode", "replay-only"))
        assert code == 0, out + err
        assert len(server.requests) == live
    assert Path("build/prompt.txt").read_text(encoding="utf-8") == first


def test_replies_without_a_prompt_or_with_bad_descriptions_are_explained() -> None:
    project = agentprop.load_project(EXAMPLE)

    def reply(text: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": text}]}

    assert parse_edit(reply("I would change the prompt."), project) == (
        None,
        None,
        "the reply had no <prompt>…</prompt>; prompt kept",
    )
    prompt, descriptions, note = parse_edit(
        reply("<prompt>\nP\n</prompt>\n<tool_descriptions>\nno_such_tool: x\n</tool_descriptions>"),
        project,
    )
    assert prompt == "P" and descriptions is None and note is not None and "no_such_tool" in note
    prompt, descriptions, note = parse_edit(
        reply(
            "<prompt>\nP\n</prompt><tool_descriptions>\ncancel_order: Cancel it.\n"
            "</tool_descriptions>"
        ),
        project,
    )
    assert (prompt, descriptions, note) == ("P", {"cancel_order": "Cancel it."}, None)


def test_request_shape_is_stable() -> None:
    project = agentprop.load_project(EXAMPLE)
    groups = [FailureGroup(clause="c", explanation="e", cases=["a"], example_messages=["hi"])]
    a = promptsmith_request(
        MODEL, spec_for_promptsmith(project), "P", {}, groups, iteration=1, temperature=0.0
    )
    b = promptsmith_request(
        MODEL, spec_for_promptsmith(project), "P", {}, groups, iteration=1, temperature=0.0
    )
    assert a == b and a["temperature"] == 0.0 and a["model"] == MODEL


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-iterations", "0"], "--max-iterations 0 must be at least 1"),
        (["--inner-threshold", "0"], "--inner-threshold 0 must be at least 1"),
        (["--runs", "0"], "--runs 0 must be at least 1"),
        (["--case", "NOPE"], "no case id contains NOPE"),
    ],
)
def test_bad_compile_arguments_are_usage_errors(args: list[str], message: str) -> None:
    code, _, err = cli("compile", str(EXAMPLE), "--model", MODEL, "--out", "b", *args)
    assert code == 2 and message in err


def test_the_async_compile_refuses_what_the_sync_one_refuses() -> None:
    """The checks live in ``acompile_prompt``, which ``compile_prompt`` wraps: a bad count or a
    non-model agent is refused by both, before any run."""
    import asyncio

    from agentprop._pipeline.promptsmith import acompile_prompt, compile_prompt
    from agentprop.agents import AnthropicAgent

    project = agentprop.load_project(EXAMPLE)
    cases = project.scenarios()[:1]
    model_agent = AnthropicAgent(MODEL, base_url="http://127.0.0.1:9", cache=False)
    agent: Any
    for kwargs, agent, said in [
        ({"max_outer": 0}, model_agent, "max_outer=0 must be a positive int"),
        ({"inner_threshold": True}, model_agent, "inner_threshold=True must be a positive int"),
        ({}, object(), "compile_prompt edits a model agent's prompt"),
    ]:
        with pytest.raises(agentprop.errors.InvalidArgument, match=said):
            compile_prompt(project, agent, cases, **kwargs)
        with pytest.raises(agentprop.errors.InvalidArgument, match=said):
            asyncio.run(acompile_prompt(project, agent, cases, **kwargs))


def test_runs_that_break_stop_the_compile_instead_of_asking_for_a_prompt_fix(
    tmp_path: Path,
) -> None:
    # replay-only with an empty cache: every run breaks on a cache miss, which no prompt fixes
    project = agentprop.load_project(EXAMPLE)
    model = CompilingModel(project)
    with MessagesServer(handler=model) as server:
        code, out, err = cli(
            *compile_args(server, tmp_path / "empty.sqlite", "--cache-mode", "replay-only")
        )
        assert len(server.requests) == 0
    # checked before the first run: nothing could be judged, so nothing is compiled (exit 2)
    assert code == 2
    assert "replay-only mode, and the API cache holds no response" in err
    assert model.smith == []
    assert not Path("build/compile_log.json").exists()


def test_no_key_for_the_real_api_is_said_at_once(tmp_path: Path) -> None:
    code, _, err = cli(
        "compile",
        str(EXAMPLE),
        "--model",
        MODEL,
        "--out",
        "build",
        "--cache",
        "none",
        "--runs",
        "1",
    )
    assert code == 2 and "no Anthropic API key" in err
