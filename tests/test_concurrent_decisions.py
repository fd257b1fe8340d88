"""Trials in flight within one decision, and runs shared between decisions (issue #16).

A model-backed case keeps several of its trials in flight, yet is decided on its outcomes in
trial order: verdicts and the trials they rest on are those of one trial at a time, whatever
order the runs finish in. What the decision did not need is cancelled and counted. Two
decisions that need the same run (same input, agent and trial index) at the same time make it
once. The simulated agent's outcome of trial ``i`` is fixed by ``(seed, i)`` and its latency
is random, so runs finish out of order.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import CheckResult, OracleSettings, TrialRecord, adecide
from agentprop._decide.permits import RunPermits
from agentprop._modelapi.budget import Budget
from agentprop._scenario.trace import Trace, Turn, Usage


@dataclass
class SimulatedAgent:
    """Trial ``i`` passes with probability ``p`` (drawn from ``(seed, i)``),
    after a random delay."""

    p: float
    seed: int = 0
    max_delay: float = 0.004
    started: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0

    async def run(self, trial: int) -> Trace:
        rng = random.Random(f"{self.seed}:{trial}")
        passed = rng.random() < self.p
        self.started.append(trial)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(rng.random() * self.max_delay)
        except asyncio.CancelledError:
            self.cancelled.append(trial)
            raise
        finally:
            self.in_flight -= 1
        self.finished.append(trial)
        turn = Turn(
            index=0,
            user_message="hi",
            response={"decision": "OK" if passed else "WRONG"},
            usage=Usage(cost_usd=0.01, model_calls=1),
        )
        return Trace(case_id="c", trial=trial, turns=[turn])


def judged_by(order: list[int]) -> object:
    def judge(trace: Trace) -> TrialRecord:
        order.append(trace.trial)
        ok = trace.turns[0].response is not None and trace.turns[0].response["decision"] == "OK"
        return (
            TrialRecord(passed=True)
            if ok
            else TrialRecord(passed=False, signature="wrong", explanation="wrong decision")
        )

    return judge


def decide(
    agent: SimulatedAgent,
    settings: OracleSettings,
    concurrency: int,
    *,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
) -> tuple[CheckResult, list[int]]:
    order: list[int] = []
    result = asyncio.run(
        adecide(
            agent.run,
            settings,
            judge=judged_by(order),
            memo=memo if memo is not None else TrialMemo(),
            input_digest="in",
            fingerprint="a",
            budget=budget,
            concurrency=concurrency,
            first_trial=1000,
        )  # type: ignore[arg-type]
    )
    return result, order


SETTINGS = [
    OracleSettings(mode="sprt", tau=0.9),
    OracleSettings(mode="sprt", tau=0.9, max_runs=30),
    OracleSettings(mode="zero-failure", tau=1.0, runs=59),
    OracleSettings(mode="fixed", runs=40, tau=0.9),
]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.mode}-{s.max_runs}-{s.runs}")
def test_decisions_in_flight_are_the_serial_ones_on_the_same_trials(
    settings: OracleSettings,
) -> None:
    for p in (1.0, 0.95, 0.85, 0.6):
        for seed in range(3):
            serial, serial_trials = decide(SimulatedAgent(p, seed, max_delay=0.002), settings, 1)
            agent = SimulatedAgent(p, seed, max_delay=0.002)
            parallel, parallel_trials = decide(agent, settings, 8)
            assert parallel_trials == serial_trials == list(range(1000, 1000 + serial.runs))
            same = ("verdict", "decided_by", "runs", "passes", "failures", "interval", "pass_hat_k")
            assert {k: getattr(parallel, k) for k in same} == {k: getattr(serial, k) for k in same}
            assert serial.runs_beyond_decision == 0
            # every run started is either judged or counted beyond the decision
            assert len(agent.started) == parallel.runs + parallel.runs_beyond_decision


def test_a_fixed_case_keeps_the_concurrency_in_flight() -> None:
    agent = SimulatedAgent(1.0, max_delay=0.002)
    result, _ = decide(agent, OracleSettings(mode="fixed", runs=64, tau=0.9), 16)
    assert result.verdict == "PASS" and result.runs == 64
    assert agent.peak == 16
    assert agent.finished != sorted(agent.finished)  # runs finished out of trial order
    assert result.runs_beyond_decision == 0 and len(agent.started) == 64  # fixed N: nothing beyond


def test_runs_past_the_decision_are_cancelled_and_counted() -> None:
    # zero-failure certification: trials 0-2 pass, trial 3 fails and decides; trial 4 finishes
    # ahead of the decision, trials 5-11 are still running when it is made
    started: list[int] = []
    cancelled: list[int] = []
    forever = asyncio.Event()

    async def run(trial: int) -> Trace:
        started.append(trial)
        if trial >= 5:
            try:
                await forever.wait()
            except asyncio.CancelledError:
                cancelled.append(trial)
                raise
        await asyncio.sleep(0)
        turn = Turn(
            index=0,
            user_message="hi",
            response={"decision": "WRONG" if trial == 3 else "OK"},
            usage=Usage(cost_usd=0.01, model_calls=1),
        )
        return Trace(trial=trial, turns=[turn])

    memo = TrialMemo()
    result = asyncio.run(
        adecide(
            run,
            OracleSettings(mode="zero-failure", tau=1.0, runs=59),
            judge=judged_by([]),
            memo=memo,
            input_digest="in",
            fingerprint="a",
            concurrency=12,
        )
    )  # type: ignore[arg-type]
    assert result.verdict == "FAIL" and result.runs == 4 and result.failures[0].first_trial == 3
    assert sorted(started) == list(range(12)) and sorted(cancelled) == list(range(5, 12))
    assert result.runs_beyond_decision == 1 + 7  # trial 4 finished, 5-11 cancelled
    assert len(memo) == 5  # the finished run beyond the decision is kept for later
    assert result.cost_usd == pytest.approx(0.05)  # and paid for


def test_the_budget_stops_a_decision_in_flight_where_it_stops_a_serial_one() -> None:
    for limit in (5, 17):
        serial, _ = decide(
            SimulatedAgent(1.0),
            OracleSettings(mode="zero-failure", tau=1.0, runs=59),
            1,
            budget=Budget(max_runs=limit),
        )
        agent = SimulatedAgent(1.0)
        parallel, _ = decide(
            agent,
            OracleSettings(mode="zero-failure", tau=1.0, runs=59),
            8,
            budget=Budget(max_runs=limit),
        )
        assert serial.verdict == parallel.verdict == "INCONCLUSIVE"
        assert serial.budget_exhausted and parallel.budget_exhausted
        assert serial.runs == parallel.runs == limit and len(agent.started) == limit


@pytest.mark.parametrize("concurrency", [1, 6])
def test_two_decisions_needing_the_same_runs_make_them_once(concurrency: int) -> None:
    agent = SimulatedAgent(1.0, max_delay=0.003)
    memo = TrialMemo()
    settings = OracleSettings(mode="zero-failure", tau=1.0, runs=20)

    async def both() -> list[CheckResult]:
        return list(
            await asyncio.gather(
                *(
                    adecide(
                        agent.run,
                        settings,
                        judge=judged_by([]),
                        memo=memo,
                        input_digest="in",
                        fingerprint="a",
                        concurrency=concurrency,
                    )
                    for _ in range(2)
                )  # type: ignore[arg-type]
            )
        )

    a, b = asyncio.run(both())
    assert a.verdict == b.verdict == "PASS" and a.runs == b.runs == 20
    assert sorted(agent.started) == list(range(20))  # each run made once
    assert a.memo_hits + b.memo_hits == 20  # one decision made each run, the other shared it
    assert a.cost_usd + b.cost_usd == pytest.approx(0.2)  # and it is paid for once


def test_a_shared_run_given_up_by_its_maker_is_made_by_the_one_waiting() -> None:
    memo = TrialMemo()
    key = memo.key("in", "a", 0)
    made: list[str] = []

    async def run(trial: int) -> Trace:
        await asyncio.sleep(0.01)
        made.append("run")
        return Trace(trial=trial)

    async def scenario() -> Trace | None:
        claim = memo.begin(key)
        assert not isinstance(claim, (Trace, asyncio.Future))
        waiter = memo.begin(key)
        assert isinstance(waiter, asyncio.Future)  # the first request is making it
        shared = asyncio.ensure_future(memo.shared(key, waiter))
        await asyncio.sleep(0)
        claim.release()  # the maker gives up (say, its decision was made)
        assert await shared is None
        again = memo.begin(key)  # the waiting request now makes it
        assert not isinstance(again, (Trace, asyncio.Future))
        stored = again.store(await run(0))
        assert memo.in_flight() == 0
        return stored

    assert asyncio.run(scenario()) is not None and made == ["run"] and len(memo) == 1


def test_run_permits_cap_every_decision_together_and_serve_the_needed_trial_first() -> None:
    agents = [SimulatedAgent(1.0, seed=s, max_delay=0.003) for s in range(3)]
    permits = RunPermits(4)
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, sum(a.in_flight for a in agents))
            await asyncio.sleep(0)

    async def all_three() -> list[CheckResult]:
        watcher = asyncio.ensure_future(watch())
        try:
            return list(
                await asyncio.gather(
                    *(
                        adecide(
                            a.run,
                            OracleSettings(mode="fixed", runs=24, tau=0.9),
                            judge=judged_by([]),
                            memo=TrialMemo(),
                            input_digest=f"in{i}",
                            fingerprint="a",
                            concurrency=4,
                            permits=permits,
                        )  # type: ignore[arg-type]
                        for i, a in enumerate(agents)
                    )
                )
            )
        finally:
            watcher.cancel()

    results = asyncio.run(all_three())
    assert all(r.verdict == "PASS" and r.runs == 24 for r in results)
    assert peak == 4 and permits.free == 4


def test_run_permits_hand_a_freed_permit_to_the_first_waiter() -> None:
    async def scenario() -> list[str]:
        permits = RunPermits(1)
        got: list[str] = []
        assert permits.try_acquire()

        async def wait(name: str) -> None:
            await permits.acquire()
            got.append(name)

        first = asyncio.ensure_future(wait("first"))
        await asyncio.sleep(0)
        assert not permits.try_acquire()  # a waiter is queued: no jumping the queue
        second = asyncio.ensure_future(wait("second"))
        await asyncio.sleep(0)
        permits.release()
        await first
        permits.release()
        await second
        permits.release()
        assert permits.free == 1
        return got

    assert asyncio.run(scenario()) == ["first", "second"]


def test_runs_cancelled_before_they_start_give_back_their_permits_and_claims() -> None:
    """Trial 0 is in the memo and fails: the zero-failure test is decided by it in the same
    step that dispatched trials 1-4, so their tasks are cancelled before they ever run. Their
    permits and memo claims come back; kept, every later run of the process waited for ever."""
    memo = TrialMemo()
    failing = Trace(
        case_id="c", trial=0, turns=[Turn(index=0, user_message="hi", response={"decision": "X"})]
    )
    memo.put(memo.key("in", "a", 0), failing)
    permits = RunPermits(4)
    agent = SimulatedAgent(1.0)
    result = asyncio.run(
        adecide(
            agent.run,
            OracleSettings(mode="zero-failure", tau=1.0, runs=59),
            judge=judged_by([]),
            memo=memo,
            input_digest="in",
            fingerprint="a",
            concurrency=4,
            permits=permits,
        )  # type: ignore[arg-type]
    )
    assert result.verdict == "FAIL" and agent.started == []
    assert permits.free == 4 and memo.in_flight() == 0
