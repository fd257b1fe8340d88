"""The budget checked before every model call: a dollar or token limit is overrun by at most one
in-flight call's reserved worst case, at concurrency 8 and with a model looping on a tool, and
a run cut short by the budget is INCONCLUSIVE, never a failure of the agent.

Before the per-call check, ``--max-usd 0.05`` at concurrency 8 spent several times the limit
(every run that started finished), and a model looping on a tool inside one run spent as much
as its step limit allowed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_anthropic_agent import SupportOpsAgent
from test_openai_agent import OpenAIAgentAsModel

from agentprop._agents.anthropic import AnthropicAgent
from agentprop._agents.model_agent import ModelAgent
from agentprop._agents.openai import OpenAIAgent
from agentprop._agents.project import Project, load_project
from agentprop._decide.check import acheck
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import OracleSettings
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.retry import RetryPolicy
from agentprop.errors import InvalidArgument
from agentprop.testing import (
    MessagesServer,
    OpenAIServer,
    message_reply,
    text_block,
    tool_use_block,
)

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
USAGE = {"input_tokens": 4000, "output_tokens": 300}  # what every reply says it used


@pytest.fixture(scope="module")
def project() -> Project:
    return load_project(SUPPORTOPS)


def with_usage(reply: Any) -> Any:
    assert reply.message is not None
    reply.message["usage"] = dict(USAGE)
    return reply


def check_guarantee(budget: Budget) -> None:
    snap = budget.snapshot()
    assert snap.in_flight_calls == 0 and snap.reserved_usd == 0.0
    assert snap.largest_reservation_usd > 0
    # the guarantee the docs state: spent <= limit + the largest single reservation
    assert snap.usd <= snap.max_usd + snap.largest_reservation_usd  # type: ignore[operator]


def test_max_usd_at_concurrency_8_is_overrun_by_at_most_one_reservation(project: Project) -> None:
    player = OpenAIAgentAsModel(SupportOpsAgent, project.spec, project.bindings.context)
    budget = Budget(max_usd=0.05)
    with OpenAIServer(handler=lambda request: with_usage(player(request)), latency=0.05) as server:
        # no budget of its own: the check's budget reaches the agent through the run context
        agent = OpenAIAgent(
            "gpt-4o",
            base_url=server.base_url,
            cache=False,
            retry_policy=RetryPolicy(max_attempts=1),
        )
        scenario = project.scenario("END_BILLING_ANSWER<-N3_BILLING")
        result = asyncio.run(
            acheck(
                project,
                scenario,
                agent.loaded(),
                settings=OracleSettings(mode="fixed", runs=40, tau=0.9),
                memo=TrialMemo(),
                budget=budget,
                concurrency=8,
            )
        )
        peak = server.peak_concurrency
    check_guarantee(budget)
    snap = budget.snapshot()
    per_call = (USAGE["input_tokens"] * 2.5 + USAGE["output_tokens"] * 10.0) / 1e6
    assert snap.usd >= snap.max_usd  # the limit was reached ...  # type: ignore[operator]
    assert snap.calls * per_call == pytest.approx(snap.usd)  # ... by calls that were really made
    assert snap.refused_calls >= 1 and peak <= 8
    # runs cut short by the budget are not judged: not one failure, and the case is not decided
    assert result.verdict == "INCONCLUSIVE" and result.budget_exhausted and not result.failures
    assert result.passes == result.runs  # every run judged was a whole run, and passed


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_model_looping_on_a_tool_is_stopped_by_the_budget_inside_the_run(
    project: Project, tmp_path: Path, provider: str
) -> None:
    loop = message_reply(
        [tool_use_block("get_account", {"account_id": "A1"})], stop_reason="tool_use"
    )
    loop.message["usage"] = dict(USAGE)  # type: ignore[index]
    budget = Budget(max_usd=0.05)
    server_type = OpenAIServer if provider == "openai" else MessagesServer
    agent_type: type[ModelAgent] = OpenAIAgent if provider == "openai" else AnthropicAgent
    model = "gpt-4o" if provider == "openai" else "claude-sonnet-4-6"
    with server_type(handler=lambda request: loop) as server:
        agent = agent_type(
            model, base_url=server.base_url, cache=False, max_steps=200, budget=budget
        )
        scenario = project.scenario("END_BILLING_ANSWER<-N3_BILLING")
        result = asyncio.run(
            acheck(
                project,
                scenario,
                agent.loaded(),
                settings=OracleSettings(mode="fixed", runs=3, tau=0.9),
                memo=TrialMemo(),
            )
        )
        sent = len(server.requests)
    check_guarantee(budget)
    assert sent == budget.snapshot().calls < 20  # not 200 steps' worth
    assert result.verdict == "INCONCLUSIVE" and result.runs == 0 and not result.failures
    assert agent.stats()["refused_calls"] == 1


def test_a_call_refused_mid_run_is_recorded_as_such(project: Project) -> None:
    loop = message_reply(
        [tool_use_block("get_account", {"account_id": "A1"})], stop_reason="tool_use"
    )
    budget = Budget(max_tokens=20_000)
    with OpenAIServer(handler=lambda request: loop) as server:
        agent = OpenAIAgent(
            "gpt-4o", base_url=server.base_url, cache=False, max_steps=50, budget=budget
        )

        async def go() -> Any:
            try:
                return await project.arun(
                    project.scenario("END_BILLING_ANSWER<-N3_BILLING"), agent.factory
                )
            finally:
                await agent.aclose()

        trace = asyncio.run(go())
    # (the looping calls also broke the per-turn tool-call limit, recorded before)
    error = trace.all_errors()[-1]
    assert (
        error.kind == "budget_exhausted"
        and [e.kind for e in trace.all_errors()].count("budget_exhausted") == 1
    )
    assert "max_tokens=20000 reached" in error.message and "was not sent" in error.message
    snap = budget.snapshot()
    assert snap.tokens <= snap.max_tokens + snap.largest_reservation_tokens  # type: ignore[operator]


def test_a_paid_answer_is_charged_even_when_storing_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API answered (the call is paid): a cache write that fails afterwards (disk full, a
    damaged file) surfaces as an error, but the spend stays on the budget. It used to be
    released with the reservation, so a run of failing writes spent money the budget never saw."""
    from agentprop._modelapi.cache import ApiCache
    from agentprop._modelapi.client import ModelClient
    from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
    from agentprop.errors import CacheError

    def failing_store(
        self: ApiCache, canonical: Any, trial: int, response: Any, **options: Any
    ) -> Any:
        raise CacheError("disk full (simulated)")

    monkeypatch.setattr(ApiCache, "_store", failing_store)
    budget = Budget(max_usd=1.0)
    with pytest.raises(InvalidArgument, match=r"list of content blocks"):
        message_reply("hello")  # type: ignore[arg-type]
    reply = with_usage(message_reply([text_block("hello")]))
    with MessagesServer(handler=lambda request: reply) as server:
        client = ModelClient(
            ANTHROPIC_MESSAGES,
            "claude-haiku-4-5",
            base_url=server.base_url,
            api_key="k-test",
            cache=tmp_path / "c.sqlite",
            cache_mode="read-write",
            budget=budget,
        )
        body = {
            "model": "claude-haiku-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
        }
        with pytest.raises(CacheError, match="disk full"):
            asyncio.run(client.call(body, trial=0))
        assert len(server.requests) == 1
    snap = budget.snapshot()
    assert snap.calls == 1 and snap.in_flight_calls == 0 and snap.reserved_usd == 0.0
    assert snap.usd == pytest.approx(
        (USAGE["input_tokens"] * 1.0 + USAGE["output_tokens"] * 5.0) / 1e6
    )
    assert client.stats()["failed_calls"] == 1


# --------------------------------------------------------------- abandoned calls (issue #27 item 3)

# what the server bills each request it received
BILLED = {"input_tokens": 2000, "output_tokens": 500}


def _cli(*argv: str) -> tuple[int, str, str]:
    import io

    from agentprop._cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_calls_abandoned_on_a_client_timeout_are_charged_and_the_run_stops_at_the_limit(
    tmp_path: Path,
) -> None:
    """A server answering after the client's timeout bills every request it received; agentprop
    used to release each one uncharged, report $0.00 and never stop. Each is now charged its
    reservation (its worst case, never less than the bill), so the limit stops the run with
    what the provider billed within one reservation of it."""
    from agentprop._modelapi.budget import price_for
    from agentprop.testing import slow_reply, tool_use_reply

    reply = tool_use_reply("get_account", {"account_id": "A1"}, **BILLED)
    report = tmp_path / "r.json"
    with MessagesServer(handler=lambda request: slow_reply(reply, 0.6)) as server:
        code, out, err = _cli(
            "run", str(SUPPORTOPS), "--agent", "anthropic", "--model", "claude-sonnet-4-6",
            "--base-url", server.base_url, "--cache", "none", "--max-usd", "0.05",
            "--timeout", "0.1", "--kinds", "mft", "--shrink-budget", "0", "--corpus", "none",
            "--json", str(report),
        )  # fmt: skip
        billed_calls = len(server.requests)
    price = price_for("claude-sonnet-4-6")
    assert price is not None
    billed = billed_calls * price.cost(BILLED["input_tokens"], BILLED["output_tokens"])
    budget = json.loads(report.read_text())["metrics"]["extra"]["budget"]
    assert billed_calls >= 1 and budget["abandoned_calls"] == billed_calls == budget["calls"], (
        out + err
    )
    assert budget["usd"] == pytest.approx(budget["abandoned_usd"]) and budget["usd"] >= billed
    assert billed <= 0.05 + budget["largest_reservation_usd"]
    assert budget["exhausted"] and "max_usd=$0.0500 reached" in budget["exhausted_reason"]
    assert f"{billed_calls} abandoned in flight (charged their worst case)" in out


def test_a_call_cancelled_in_flight_is_charged_and_an_error_answer_is_not() -> None:
    from agentprop._modelapi.client import ModelClient
    from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
    from agentprop.testing import error_reply, slow_reply

    budget = Budget(max_usd=1.0)
    replies = [
        slow_reply(with_usage(message_reply([text_block("late")])), 5.0),
        error_reply(400, message="bad request"),
    ]
    with MessagesServer() as server:
        server.enqueue(*replies)
        client = ModelClient(
            ANTHROPIC_MESSAGES,
            "claude-haiku-4-5",
            base_url=server.base_url,
            api_key="k-test",
            cache=None,
            budget=budget,
        )
        body = {
            "model": "claude-haiku-4-5",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hi"}],
        }

        async def cancel_in_flight() -> None:
            task = asyncio.create_task(client.call(body, trial=0))
            while not server.requests:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancel_in_flight())
        snap = budget.snapshot()
        assert snap.abandoned_calls == 1 and snap.calls == 1 and snap.in_flight_calls == 0
        assert snap.usd == pytest.approx(snap.largest_reservation_usd) and snap.usd > 0
        with pytest.raises(Exception, match="bad request"):
            asyncio.run(client.call(body, trial=1))  # refused with an error: not billed
        assert budget.snapshot().calls == 1 and budget.snapshot().usd == snap.usd
