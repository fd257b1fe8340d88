"""``decide`` is ``adecide`` run from sync code, with the caller's ``run_trial`` served in the
caller's thread outside any event loop (``agentprop._util.aio.run_serving``)."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest

from agentprop import Trace
from agentprop._decide.oracle import TrialRecord, adecide, decide
from agentprop._util.aio import run_serving
from agentprop.oracle import OracleSettings

SETTINGS = OracleSettings(mode="sprt", tau=0.9)


def judge(trace: Trace) -> TrialRecord:
    passed = trace.agent == "pass"
    return TrialRecord(passed=passed, signature=None if passed else "boom")


def test_a_run_trial_that_runs_its_own_event_loop_is_decided_in_the_callers_thread() -> None:
    """A sync ``run_trial`` that calls ``asyncio.run`` (an async agent driven from sync code)
    worked when ``decide`` had its own loop; it must still work now that ``decide`` wraps
    ``adecide``, and it runs in the caller's thread, as when it was called directly."""
    threads: set[threading.Thread] = set()

    async def agent(i: int) -> Trace:
        await asyncio.sleep(0)
        return Trace(trial=i, agent="pass")

    def run_trial(i: int) -> Trace:
        threads.add(threading.current_thread())
        return asyncio.run(agent(i))

    result = decide(run_trial, SETTINGS, judge=judge)
    assert result.verdict == "PASS" and result.runs > 1
    assert threads == {threading.current_thread()}


def test_decide_and_adecide_decide_seeded_simulations_alike() -> None:
    """The sync wrapper changes nothing of the decision: on seeded runs with known pass rates,
    verdict, runs and passes equal ``adecide``'s (one trial at a time) on the same runs."""
    for simulation, rate in enumerate([1.0, 0.5, 0.95, 0.7] * 3):
        rng = random.Random(simulation)
        runs = [Trace(trial=i, agent="pass" if rng.random() < rate else "fail") for i in range(300)]

        async def run(i: int) -> Trace:
            return runs[i]

        sync = decide(lambda i: runs[i], SETTINGS, judge=judge, first_trial=3)
        async_ = asyncio.run(adecide(run, SETTINGS, judge=judge, first_trial=3))
        assert (sync.verdict, sync.runs, sync.passes) == (
            async_.verdict,
            async_.runs,
            async_.passes,
        )


def test_an_error_of_run_trial_is_raised_by_decide() -> None:
    def run_trial(i: int) -> Trace:
        if i == 2:
            raise ValueError("the agent crashed")
        return Trace(trial=i, agent="pass")

    with pytest.raises(ValueError, match="the agent crashed"):
        decide(run_trial, SETTINGS, judge=judge)


def test_an_interrupt_in_the_served_callable_stops_the_core_and_is_raised() -> None:
    """Ctrl-C lands in the caller's thread, inside ``fn``: the coroutine is cancelled (its
    cleanup runs), no helper thread is left behind, and the interrupt is what is raised."""
    cleaned: list[str] = []

    async def core(call: object) -> int:
        assert callable(call)
        try:
            for i in range(10):
                await call(i)
            return 10
        finally:
            cleaned.append("core")

    def fn(i: int) -> int:
        if i == 3:
            raise KeyboardInterrupt
        return i

    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        run_serving(core, fn)
    assert cleaned == ["core"] and threading.active_count() == before
    assert run_serving(core, lambda i: i) == 10
