"""One budget for several processes (issue #12 item 7, issue #15's budget): a SharedLedger
books every run, reservation and charge in one transaction across processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from agentprop._modelapi.budget import Budget
from agentprop._modelapi.ledger import SharedLedger
from agentprop.errors import BudgetExhausted


def _take_runs(path: str, limit: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    budget = Budget(max_runs=limit, ledger=SharedLedger(path))
    taken = 0
    while budget.try_start_run():
        taken += 1
    out.put(taken)


def test_processes_racing_for_runs_take_exactly_the_limit(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    SharedLedger(path)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    workers = [ctx.Process(target=_take_runs, args=(path, 40, out)) for _ in range(3)]
    for w in workers:
        w.start()
    taken = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=120)
    assert sum(taken) == 40
    assert SharedLedger(path).totals().runs == 40


def test_a_reservation_in_one_process_refuses_a_call_in_another(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    model = "claude-sonnet-4-5"
    price = Budget().price(model)
    assert price is not None
    worst = price.worst_case(1000, 1000)
    spent = price.cost(2000, 1000)
    limit = worst * 1.1
    assert spent >= limit
    first = Budget(max_usd=limit, ledger=SharedLedger(path))
    second = Budget(max_usd=limit, ledger=SharedLedger(path))
    held = first.reserve(model, input_tokens=1000, max_output_tokens=1000)
    assert SharedLedger(path).totals().reserved_usd == pytest.approx(worst)
    # still below the limit: admitted
    small = second.reserve(model, input_tokens=10, max_output_tokens=10)
    second.release(small)
    first.settle(held, 2000, 1000)  # really spent more than the limit: it is reached for both
    with pytest.raises(BudgetExhausted, match="max_usd"):
        second.reserve(model, input_tokens=10, max_output_tokens=10)
    totals = SharedLedger(path).totals()
    assert (
        totals.usd == pytest.approx(spent) and totals.tokens == 3000 and totals.reserved_usd == 0.0
    )
    # each budget's own snapshot stays its process's figures
    assert first.snapshot().usd == pytest.approx(spent) and second.snapshot().usd == 0.0


def test_without_a_ledger_two_budgets_are_two_limits(tmp_path: Path) -> None:
    a, b = Budget(max_runs=3), Budget(max_runs=3)
    assert sum(a.try_start_run() for _ in range(5)) + sum(b.try_start_run() for _ in range(5)) == 6
    shared = SharedLedger(tmp_path / "ledger.sqlite")
    a, b = Budget(max_runs=3, ledger=shared), Budget(max_runs=3, ledger=shared)
    assert sum(a.try_start_run() for _ in range(5)) + sum(b.try_start_run() for _ in range(5)) == 3
