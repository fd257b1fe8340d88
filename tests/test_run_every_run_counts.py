"""``agentprop run`` spends every agent run once (issue #16).

A model-backed (async) agent's cases keep trials in flight and still reach the verdicts, on the
same trials, of one trial at a time; no run key (input, agent, trial index) is executed twice,
though BOUNDARY and DIR cases that meet on one world run concurrently; INV reuses the MFT
case's runs of the original wording.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop._agents import project as _project
from agentprop._agents.loading import load_agent, make_factory, runs_concurrently
from agentprop._agents.runtime import TurnContext
from agentprop._decide.memo import TrialMemo
from agentprop._decide.run_key import run_digest
from agentprop._pipeline.run import RunSettings, arun_cases, render_table

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
DATAINSIGHTS = ROOT / "examples" / "datainsights"
sys.path.insert(0, str(SUPPORTOPS))
from agent import SupportOpsAgent  # noqa: E402 (the example's directory is put on sys.path first)


class AsyncSupportOps:
    """The reference agent behind an ``async`` turn that yields to the loop, as a model agent
    waiting on an API does; ``FAULTS`` and faults pass through."""

    FAULTS = SupportOpsAgent.FAULTS

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        self.inner = SupportOpsAgent(faults)

    async def turn(self, message: str, ctx: TurnContext) -> None:
        await asyncio.sleep(0)
        self.inner.turn(message, ctx)
        await asyncio.sleep(0)


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every agent run started, by run key."""
    counts: Counter[str] = Counter()
    original = _project.Project.arun

    async def counted(
        self: Any,
        scenario: Any,
        factory: Any,
        *,
        trial: int = 0,
        agent_name: str = "",
        messages: Any = None,
        **kw: Any,
    ) -> Any:
        msgs = list(messages) if messages is not None else scenario.messages
        counts[f"{run_digest(self, scenario, msgs, 0)}|{agent_name}|{trial}"] += 1
        return await original(
            self, scenario, factory, trial=trial, agent_name=agent_name, messages=messages, **kw
        )

    monkeypatch.setattr(_project.Project, "arun", counted)
    yield counts


def run_cases(
    project: agentprop.Project, agent: Any, scenarios: list[str] | None = None, **settings: Any
) -> Any:
    chosen = (
        [project.scenario(s) for s in scenarios] if scenarios is not None else project.scenarios()
    )
    return asyncio.run(
        arun_cases(project, agent, chosen, RunSettings(**settings), memo=TrialMemo())
    )


def test_an_async_agent_runs_concurrently_a_sync_one_does_not() -> None:
    assert runs_concurrently(make_factory(AsyncSupportOps, ref="async"))
    assert not runs_concurrently(load_agent("agent:SupportOpsAgent", SUPPORTOPS))

    async def fn(message: str, ctx: TurnContext) -> None:
        ctx.respond()

    assert runs_concurrently(make_factory(fn, ref="fn"))
    assert runs_concurrently(make_factory(lambda: AsyncSupportOps(), ref="factory"))


def test_cases_in_flight_reach_the_serial_verdicts_on_the_same_trials() -> None:
    project = agentprop.load_project(SUPPORTOPS)
    agent = make_factory(AsyncSupportOps, {"skip_auth": 0.3}, ref="async")
    chosen = [
        "END_CANCELLED<-N7_CANCEL",
        "END_TICKET<-N7_CANCEL",
        "END_BILLING_ANSWER<-N3_BILLING",
        "END_REFUSE_PII<-N1_INTENT",
    ]
    serial = run_cases(project, agent, chosen, kinds=("mft",), concurrency=1, profile="release")
    parallel = run_cases(project, agent, chosen, kinds=("mft",), concurrency=8, profile="release")
    # the fault is found, the rest pass
    assert {c.verdict for c in serial.cases} == {"PASS", "FAIL"}

    def decided(report: Any) -> list[tuple[Any, ...]]:
        return [
            (
                c.id,
                c.verdict,
                c.runs,
                c.passes,
                [(f.signature, f.count, f.first_trial) for f in c.failures],
            )
            for c in report.cases
        ]

    assert decided(parallel) == decided(serial)
    assert all(c.runs_beyond_decision == 0 for c in serial.cases)
    beyond = parallel.metrics.runs_beyond_decision
    # a failure decided with runs in flight
    assert beyond == sum(c.runs_beyond_decision for c in parallel.cases) > 0
    assert f"({beyond} of them ahead of a decision that did not need them)" in render_table(
        parallel
    )


def test_no_run_key_runs_twice_when_concurrent_cases_meet_on_one_world(
    executed: Counter[str],
) -> None:
    # DIR pairs and BOUNDARY cases of datainsights meet on the same worlds, concurrently
    project = agentprop.load_project(DATAINSIGHTS)
    agent = load_agent(project.bindings.agent or "", project.base_dir)
    report = run_cases(project, agent, kinds=("boundary", "dir"))
    assert report.metrics.passed == report.metrics.cases
    twice = {k: n for k, n in executed.items() if n > 1}
    assert not twice, f"{len(twice)} run keys executed more than once"
    assert sum(executed.values()) < report.metrics.runs  # runs shared between cases


def test_inv_reuses_the_mft_runs_of_the_original_wording(executed: Counter[str]) -> None:
    project = agentprop.load_project(SUPPORTOPS)
    agent = load_agent("agent:SupportOpsAgent", SUPPORTOPS)
    scenario = [project.scenario("END_BILLING_ANSWER<-N3_BILLING")]
    release = {"profile": "release"}  # 59 MFT runs, 20 runs a side
    mft = asyncio.run(
        arun_cases(
            project,
            agent,
            scenario,
            RunSettings(kinds=("mft",), **release),
            memo=(memo := TrialMemo()),
        )
    )
    made_by_mft = sum(executed.values())
    inv = asyncio.run(
        arun_cases(
            project, agent, scenario, RunSettings(kinds=("mft", "inv"), **release), memo=memo
        )
    )
    [case] = [c for c in inv.cases if c.kind == "INV"]
    assert case.verdict == "PASS" and case.details["base"]["reused"]
    # the 20 runs of the original side are the MFT's first 20 trials (it ran 59): only the two
    # paraphrases' 2 x 20 runs are new
    assert mft.cases[0].runs >= case.details["runs_per_side"]
    assert sum(executed.values()) - made_by_mft == 2 * case.details["runs_per_side"]
    assert max(executed.values()) == 1
