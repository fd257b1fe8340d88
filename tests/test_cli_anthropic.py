"""``agentprop run SPEC --agent anthropic`` end to end against MessagesServer on loopback, with
the real SDK, no API key and no internet."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_anthropic_agent import AgentAsModel, SupportOpsAgent  # the agent-playing handler

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._pipeline.report.model import RunReport
from agentprop.testing import MessagesServer, respond_reply, tool_use_reply

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "claude-sonnet-4-6"


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agentprop run keeps its corpus and API cache under ./.agentprop: each test gets its own."""
    monkeypatch.chdir(tmp_path)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    project = load_project(SUPPORTOPS)
    with MessagesServer(
        handler=AgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    ) as s:
        yield s


def model_args(server: MessagesServer, cache: Path, *extra: str) -> list[str]:
    return [
        "run",
        str(SUPPORTOPS),
        "--agent",
        "anthropic",
        "--model",
        MODEL,
        "--base-url",
        server.base_url,
        "--cache",
        str(cache),
        "--kinds",
        "mft",
        *extra,
    ]


def test_run_end_to_end_then_replay_from_the_cache(server: MessagesServer, tmp_path: Path) -> None:
    cache = tmp_path / "api.sqlite"
    first_json = tmp_path / "first.json"
    code, out, err = cli(
        *model_args(
            server, cache, "--cache-mode", "read-write", "--runs", "2", "--json", str(first_json)
        )
    )
    # every case passes; the spec's dead branch and over-limit path: incomplete
    assert code == 3, out + err
    # 14 loop-free paths, 6 loop paths, 4 retry cases and 1 MC/DC case
    assert "25 cases: 25 passed, 0 failed" in out
    assert "seed_prompt.txt" in out and "seed_tool_descriptions.yaml" in out
    live_requests = len(server.requests)
    assert live_requests > 24 * 2 * 2  # every run made at least two model calls
    first = RunReport.model_validate_json(first_json.read_text())
    assert first.agent.ref == f"anthropic:{MODEL}" and len(first.agent.fingerprint) == 16
    assert first.metrics.cost_usd > 0
    assert first.metrics.extra["model"]["live_calls"] == live_requests
    assert first.metrics.extra["budget"]["usd"] == pytest.approx(first.metrics.cost_usd)

    # the same run again, replay-only: no HTTP request at all, the same verdicts, nothing spent
    second_json = tmp_path / "second.json"
    code, out, err = cli(
        *model_args(
            server, cache, "--cache-mode", "replay-only", "--runs", "2", "--json", str(second_json)
        )
    )
    assert code == 3, out + err
    assert len(server.requests) == live_requests
    second = RunReport.model_validate_json(second_json.read_text())
    assert [(c.id, c.verdict, c.runs) for c in second.cases] == [
        (c.id, c.verdict, c.runs) for c in first.cases
    ]
    assert second.metrics.cost_usd == 0.0
    # identical requests for the same trial (two cases opening with the same message) were
    # answered once even live; the replay answers every model call from the cache
    assert (
        second.metrics.extra["model"]["cache_hits"] == first.metrics.extra["model"]["model_calls"]
    )
    first_budget = first.metrics.extra["budget"]
    assert second.metrics.extra["budget"]["usd_saved"] == pytest.approx(
        first_budget["usd"] + first_budget["usd_saved"]
    )
    assert second.metrics.extra["budget"]["usd"] == 0.0
    assert f"{first.metrics.extra['model']['model_calls']} from the cache, 0 to the API" in out

    # another seed is another set of trials: replay-only cannot draw them, and that is not the
    # agent's failure: the case is INCONCLUSIVE, nothing is shrunk or saved, the run exits 2
    code, out, _ = cli(
        *model_args(
            server,
            cache,
            "--cache-mode",
            "replay-only",
            "--runs",
            "1",
            "--seed",
            "5",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
        )
    )
    assert code == 2 and "INCONCLUSIVE" in out and "FAIL" not in out
    assert "not the agent's (cache_miss)" in out
    assert len(server.requests) == live_requests


def test_replay_only_miss_explains_what_changed(server: MessagesServer, tmp_path: Path) -> None:
    cache = tmp_path / "api.sqlite"
    code, _, _ = cli(
        *model_args(
            server,
            cache,
            "--cache-mode",
            "read-write",
            "--runs",
            "1",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
        )
    )
    assert code == 0
    report = tmp_path / "r.json"
    code, out, _ = cli(
        *model_args(
            server,
            cache,
            "--cache-mode",
            "replay-only",
            "--runs",
            "1",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
            "--temperature",
            "0.3",
            "--json",
            str(report),
        )
    )
    assert code == 2
    case = RunReport.model_validate_json(report.read_text()).cases[0]
    assert case.verdict == "INCONCLUSIVE" and case.failures == []
    assert (
        case.infrastructure_error is not None and case.infrastructure_error["kind"] == "cache_miss"
    )
    explanation = case.infrastructure_error["message"]
    assert "CacheMiss: No recorded response" in explanation and "replay-only" in explanation
    assert '+  "temperature": 0.3,' in explanation  # the diff names what changed
    assert "CacheMiss" in out


def test_budget_exhaustion_marks_cases_inconclusive(server: MessagesServer, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    code, out, _ = cli(
        *model_args(
            server,
            tmp_path / "api.sqlite",
            "--cache-mode",
            "off",
            "--runs",
            "2",
            "--concurrency",
            "1",
            "--max-runs",
            "5",
            "--json",
            str(report),
        )
    )
    assert code == 1
    data = RunReport.model_validate_json(report.read_text())
    assert data.metrics.runs == 5
    assert data.metrics.inconclusive >= 24 - 3
    assert all(c.verdict in ("PASS", "INCONCLUSIVE") for c in data.cases)
    assert "budget exhausted: max_runs=5 reached" in out


def test_dollar_budget_stops_new_runs(server: MessagesServer, tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    code, out, _ = cli(
        *model_args(
            server,
            tmp_path / "api.sqlite",
            "--cache-mode",
            "off",
            "--runs",
            "2",
            "--concurrency",
            "1",
            "--max-usd",
            "0.01",
            "--json",
            str(report),
        )
    )
    assert code == 1
    data = RunReport.model_validate_json(report.read_text())
    spent = data.metrics.extra["budget"]["usd"]
    assert spent >= 0.01
    # the run that crossed the limit finished; no run started after it
    assert spent - max(c.cost_usd for c in data.cases) < 0.01
    assert data.metrics.inconclusive >= 1 and "max_usd" in out


def test_missing_key_without_a_local_endpoint_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "anthropic",
        "--model",
        MODEL,
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--cache-mode",
        "read-write",
        "--runs",
        "1",
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
        "--kinds",
        "mft",
    )
    assert code == 2
    assert "no Anthropic API key" in err and "ANTHROPIC_API_KEY" in err and "api_key=" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--agent", "anthropic"], "--agent anthropic needs --model"),
        (["--model", MODEL], "--model only apply to a model agent"),
        (
            ["--agent", "anthropic", "--model", MODEL, "--api", "responses"],
            "--api only apply to --agent openai",
        ),
        (
            ["--agent", "anthropic", "--model", MODEL, "--prompt", "nowhere.txt"],
            "prompt file not found: nowhere.txt",
        ),
        (
            ["--agent", "anthropic", "--model", MODEL, "--fault", "skip_auth=1"],
            "--fault applies to Python agents",
        ),
        (["--agent", "anthropic", "--model", MODEL, "--max-steps", "0"], "max_steps=0"),
        (["--agent", "anthropic", "--model", MODEL, "--cache-mode", "sometimes"], ""),
    ],
)
def test_model_option_errors_exit_2(argv: list[str], message: str) -> None:
    code, _, err = cli("run", str(SUPPORTOPS), *argv)
    assert code == 2
    assert message in err


def test_unknown_tool_in_descriptions_is_reported(tmp_path: Path) -> None:
    descriptions = tmp_path / "tools.yaml"
    descriptions.write_text("get_acount: Fetch account data.\n")
    code, _, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "anthropic",
        "--model",
        MODEL,
        "--tool-descriptions",
        str(descriptions),
    )
    assert code == 2 and "get_acount" in err and str(descriptions) in err


def test_an_explicit_prompt_is_what_the_model_gets(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You are terse.\n")
    script = [
        tool_use_reply("get_account", {"account_id": "A1"}),
        respond_reply(
            node_id="END_BILLING_ANSWER",
            decision="BILLING_ANSWER",
            tool_actions=["get_account"],
            evidence="get_account",
            user_message="m",
        ),
    ]
    with MessagesServer(script) as s:
        code, out, _ = cli(
            *model_args(
                s,
                tmp_path / "c.sqlite",
                "--cache-mode",
                "off",
                "--runs",
                "1",
                "--case",
                "END_BILLING_ANSWER<-N3_BILLING",
                "--prompt",
                str(prompt),
                "--temperature",
                "0",
                "--max-tokens",
                "300",
            )
        )
        first = s.requests[0].json
    assert code == 0, out
    assert (
        first["system"] == "You are terse."
        and first["temperature"] == 0
        and first["max_tokens"] == 300
    )
