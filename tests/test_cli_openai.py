"""``agentprop run SPEC --agent openai`` end to end against OpenAIServer on loopback, with the
real openai SDK, no API key and no internet: the SupportOps example through OpenAIAgent, the
server playing the reference agent -- also with an injected fault, which the run must find as
the Python agent's run does -- and a second run replaying from the cache with no request."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from test_anthropic_agent import SupportOpsAgent
from test_openai_agent import OpenAIAgentAsModel

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._pipeline.report.model import RunReport
from agentprop.testing import OpenAIServer, respond_reply, tool_use_reply

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "gpt-4.1-mini"
FAULT = {"skip_auth": 1.0}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def playing(faults: dict[str, float] | None = None) -> OpenAIAgentAsModel:
    project = load_project(SUPPORTOPS)
    return OpenAIAgentAsModel(
        lambda: SupportOpsAgent(faults=dict(faults or {})), project.spec, project.bindings.context
    )


COMMON = ("--kinds", "mft", "--runs", "2", "--shrink-budget", "0", "--corpus", "none")


def openai_run(
    server: OpenAIServer, cache: Path, report: Path, *extra: str
) -> tuple[int, str, RunReport]:
    code, out, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "openai",
        "--model",
        MODEL,
        "--base-url",
        server.base_url,
        "--cache",
        str(cache),
        *COMMON,
        "--json",
        str(report),
        *extra,
    )
    assert code in (0, 1, 3), out + err  # 3: every case passed, the spec has untestable parts
    return code, out, RunReport.model_validate_json(report.read_text())


def failures(report: RunReport) -> dict[str, list[str]]:
    return {
        c.id: sorted({f.signature for f in c.failures}) for c in report.cases if c.verdict != "PASS"
    }


def test_supportops_end_to_end_through_openai_agent_then_replay_with_no_request(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "api.sqlite"
    with OpenAIServer(handler=playing()) as server:
        code, out, first = openai_run(
            server, cache, tmp_path / "first.json", "--cache-mode", "read-write"
        )
        # every case passes; the spec's dead branch and over-limit path: incomplete
        assert code == 3, out
        assert "25 cases: 25 passed, 0 failed" in out and "through openai.chat" in out
        live = len(server.requests)
        assert live > 24 * 2 * 2 and first.agent.ref == f"openai:{MODEL}"
        assert first.metrics.extra["model"]["live_calls"] == live and first.metrics.cost_usd > 0
        code, out, second = openai_run(
            server, cache, tmp_path / "second.json", "--cache-mode", "replay-only"
        )
        assert code == 3, out
        assert len(server.requests) == live  # zero network calls
    assert [(c.id, c.verdict, c.runs) for c in second.cases] == [
        (c.id, c.verdict, c.runs) for c in first.cases
    ]
    # every model call of the first run (some already replays of identical requests) is a replay now
    assert (
        second.metrics.cost_usd == 0.0
        and second.metrics.extra["model"]["cache_hits"]
        == first.metrics.extra["model"]["model_calls"]
    )
    spent_first = first.metrics.extra["budget"]["usd"] + first.metrics.extra["budget"]["usd_saved"]
    assert second.metrics.extra["budget"]["usd_saved"] == pytest.approx(spent_first)


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_an_injected_fault_is_found_as_the_python_agent_finds_it_and_replays(
    tmp_path: Path, api: str
) -> None:
    code, out, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "agent:SupportOpsAgent",
        "--fault",
        "skip_auth=1",
        *COMMON,
        "--json",
        str(tmp_path / "python.json"),
    )
    assert code == 1, out + err
    python = RunReport.model_validate_json((tmp_path / "python.json").read_text())
    cache = tmp_path / "api.sqlite"
    with OpenAIServer(handler=playing(FAULT)) as server:
        code, out, model = openai_run(
            server,
            cache,
            tmp_path / "openai.json",
            "--api",
            api,
            "--stream",
            "--cache-mode",
            "read-write",
        )
        assert code == 1
        live = len(server.requests)
        code, _, replayed = openai_run(
            server, cache, tmp_path / "replay.json", "--api", api, "--cache-mode", "replay-only"
        )
        assert code == 1 and len(server.requests) == live  # replayed exactly, not one request
    assert failures(python) and failures(model) == failures(python)
    assert any(
        s.startswith("calls_in_order:decision_tree.N2_AUTH")
        for sigs in failures(model).values()
        for s in sigs
    )
    assert failures(replayed) == failures(model)
    assert [(c.id, c.verdict) for c in replayed.cases] == [(c.id, c.verdict) for c in model.cases]


def test_a_dollar_limit_on_a_model_without_a_price_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    args = (
        "run",
        str(SUPPORTOPS),
        "--agent",
        "openai",
        "--model",
        "my-local-model",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--kinds",
        "mft",
        "--runs",
        "1",
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
        "--max-usd",
        "0.5",
        "--shrink-budget",
        "0",
        "--corpus",
        "none",
    )
    code, out, err = cli(*args)
    assert code == 2 and "'my-local-model' has no price" in err and "--prices FILE" in err
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"my-local-model": {"input": 0.1, "output": 0.2}}}))
    script = [
        tool_use_reply("get_account", {"account_id": "A1"}),
        respond_reply(
            node_id="END_BILLING_ANSWER",
            decision="BILLING_ANSWER",
            tool_actions=["get_account"],
            evidence="get_account",
            user_message="Plan PLAN-BASIC.",
        ),
    ]
    with OpenAIServer(script) as server:
        code, out, err = cli(
            *args[:7],
            server.base_url,
            *args[8:],
            "--prices",
            str(prices),
            "--cache",
            "none",
            "--json",
            str(tmp_path / "r.json"),
        )
    assert code == 0, out + err
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text())
    assert (
        report.metrics.extra["budget"]["usd"] > 0
        and report.metrics.extra["budget"]["unpriced_calls"] == 0
    )


def test_an_unpriced_model_without_a_dollar_limit_reports_an_unknown_cost(tmp_path: Path) -> None:
    script = [
        tool_use_reply("get_account", {"account_id": "A1"}),
        respond_reply(
            node_id="END_BILLING_ANSWER",
            decision="BILLING_ANSWER",
            tool_actions=["get_account"],
            evidence="get_account",
            user_message="Plan PLAN-BASIC.",
        ),
    ]
    with OpenAIServer(script) as server:
        code, out, err = cli(
            "run",
            str(SUPPORTOPS),
            "--agent",
            "openai",
            "--model",
            "my-local-model",
            "--base-url",
            server.base_url,
            "--kinds",
            "mft",
            "--runs",
            "1",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
            "--cache",
            "none",
        )
    assert code == 0, out + err
    assert (
        "an unknown amount on 2 call(s) of my-local-model (no price: give one with --prices FILE)"
        in out
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--agent", "openai"], "--agent openai needs --model"),
        (["--agent", "openai", "--model", MODEL, "--temperature", "3"], "between 0 and 2"),
        (["--agent", "agent:SupportOpsAgent", "--stream"], "--stream only apply to a model agent"),
    ],
)
def test_openai_option_errors_exit_2(argv: list[str], message: str) -> None:
    code, _, err = cli("run", str(SUPPORTOPS), *argv)
    assert code == 2 and message in err, err


def test_no_key_for_openais_own_endpoint_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "openai",
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
    assert code == 2 and "no OpenAI API key" in err and "OPENAI_API_KEY" in err
