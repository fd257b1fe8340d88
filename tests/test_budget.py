"""The session budget: limits, prices, cached replays, thread and asyncio safety."""

from __future__ import annotations

import asyncio
import threading

import anthropic
import pytest

from agentprop._modelapi.budget import (
    DEFAULT_PRICES,
    Budget,
    BudgetExhausted,
    BudgetSnapshot,
    ModelPrice,
    cost_usd,
    price_for,
)
from agentprop.errors import AgentPropError, InvalidArgument
from agentprop.testing import MessagesServer, text_reply

PRICES = {"test-model": ModelPrice(2.0, 8.0), "test-model-big": (20.0, 80.0)}


def test_longest_prefix_wins() -> None:
    table = {"fam": ModelPrice(1.0, 1.0), "fam-2": ModelPrice(2.0, 2.0), "fam-2-5": ModelPrice(3.0, 3.0)}
    assert price_for("fam-1-20250101", table) == ModelPrice(1.0, 1.0)
    assert price_for("fam-2-20250101", table) == ModelPrice(2.0, 2.0)
    assert price_for("fam-2-5-20250101", table) == ModelPrice(3.0, 3.0)
    assert price_for("other", table) is None


def test_default_table_distinguishes_opus_generations() -> None:
    # Opus 4 / 4.1 and Opus 4.5+ have different list prices; dated ids resolve by prefix
    old = price_for("claude-opus-4-20250514")
    new = price_for("claude-opus-4-5-20251101")
    assert old is not None and new is not None
    assert old.input_per_mtok > new.input_per_mtok
    assert price_for("claude-opus-4-1") == old
    assert all(p.output_per_mtok >= p.input_per_mtok for p in DEFAULT_PRICES.values())


def test_cost_arithmetic() -> None:
    # 0.5 MTok in at $2 + 0.25 MTok out at $8 = $1 + $2
    assert cost_usd("test-model-x", 500_000, 250_000, prices=PRICES) == pytest.approx(3.0)
    # prompt-cache tokens default to 1.25x (write) and 0.1x (read) the input price
    assert cost_usd(
        "test-model", 0, 0, cache_creation_input_tokens=1_000_000, cache_read_input_tokens=1_000_000, prices=PRICES
    ) == pytest.approx(2.0 * 1.25 + 2.0 * 0.1)
    assert cost_usd("nope", 1, 1, prices=PRICES) is None


def test_long_context_tier() -> None:
    tiered = ModelPrice(1.0, 2.0, long_context_threshold=1000, long_input_per_mtok=10.0, long_output_per_mtok=20.0)
    assert tiered.cost(1000, 1_000_000) == pytest.approx(1000 * 1.0 / 1e6 + 2.0)
    assert tiered.cost(1001, 1_000_000) == pytest.approx(1001 * 10.0 / 1e6 + 20.0)
    with pytest.raises(InvalidArgument):
        ModelPrice(1.0, 2.0, long_context_threshold=10)


def test_max_runs_stops_new_work() -> None:
    budget = Budget(max_runs=3)
    assert [budget.try_start_run() for _ in range(5)] == [True, True, True, False, False]
    assert budget.exhausted
    with pytest.raises(BudgetExhausted) as err:
        budget.start_run()
    assert isinstance(err.value, AgentPropError)
    assert "max_runs=3" in str(err.value)
    snap = err.value.snapshot
    assert (snap.runs, snap.refused_runs, snap.exhausted) == (3, 3, True)


def test_max_usd_counts_charges_and_lets_in_flight_runs_finish() -> None:
    budget = Budget(max_usd=1.0, prices=PRICES)
    assert budget.try_start_run() and budget.try_start_run()  # two runs in flight
    assert budget.charge("test-model", 250_000, 0) == pytest.approx(0.5)
    assert not budget.exhausted
    budget.charge("test-model", 0, 62_500)  # +$0.50: limit reached
    assert budget.exhausted and "max_usd" in (budget.exhausted_reason or "")
    assert not budget.try_start_run()
    budget.charge("test-model", 0, 125_000)  # the other in-flight run still gets charged
    snap = budget.snapshot()
    assert snap.usd == pytest.approx(2.0)
    assert snap.usd_by_model == {"test-model": pytest.approx(2.0)}
    assert snap.calls == 3 and snap.runs == 2


def test_max_tokens() -> None:
    budget = Budget(max_tokens=100, prices=PRICES)
    budget.start_run()
    budget.charge("test-model", 60, 39)
    assert budget.try_start_run()
    budget.charge("test-model", 1, 0)
    assert not budget.try_start_run()
    with pytest.raises(BudgetExhausted, match="max_tokens=100"):
        budget.check()


def test_cached_replays_are_free_but_reported() -> None:
    budget = Budget(max_usd=0.01, prices=PRICES)
    for _ in range(100):
        assert budget.charge("test-model", 1_000_000, 0, cached=True) == 0.0
    assert not budget.exhausted
    snap = budget.snapshot()
    assert (snap.usd, snap.cached_calls, snap.cached_input_tokens) == (0.0, 100, 100_000_000)
    assert snap.usd_saved == pytest.approx(200.0)


def test_unpriced_model_is_charged_at_the_highest_price_and_listed() -> None:
    budget = Budget(prices=PRICES)
    most_expensive = max(budget.prices.values(), key=lambda p: p.output_per_mtok)
    usd = budget.charge("mystery-model", 1_000_000, 1_000_000)
    assert usd == pytest.approx(most_expensive.input_per_mtok + most_expensive.output_per_mtok)
    assert budget.snapshot().unpriced_models == ["mystery-model"]


def test_charge_usage_from_a_real_sdk_response() -> None:
    with MessagesServer([text_reply("hi", input_tokens=1000, output_tokens=500)]) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="dummy", max_retries=0)
        message = client.messages.create(
            model="test-model-1", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    budget = Budget(prices=PRICES)
    usd = budget.charge_usage(message.model, message.usage)
    assert usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    budget.charge_usage("test-model", {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 7})
    snap = budget.snapshot()
    assert (snap.input_tokens, snap.output_tokens) == (1017, 505)


def test_thread_safety_exact_counts() -> None:
    budget = Budget(max_runs=5000, prices=PRICES)
    started = [0] * 8

    def worker(i: int) -> None:
        for _ in range(1000):
            if budget.try_start_run():
                started[i] += 1
                budget.charge("test-model", 3, 2)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = budget.snapshot()
    assert sum(started) == 5000 == snap.runs
    assert snap.refused_runs == 3000
    assert (snap.input_tokens, snap.output_tokens, snap.calls) == (15000, 10000, 5000)
    assert snap.usd == pytest.approx(5000 * (3 * 2.0 + 2 * 8.0) / 1e6)


def test_asyncio_tasks_share_one_budget() -> None:
    async def main(budget: Budget) -> int:
        async def task() -> int:
            done = 0
            while budget.try_start_run():
                await asyncio.sleep(0)
                budget.charge("test-model", 1, 1)
                done += 1
            return done

        return sum(await asyncio.gather(*[task() for _ in range(32)]))

    budget = Budget(max_runs=500, prices=PRICES)
    assert asyncio.run(main(budget)) == 500
    assert budget.snapshot().calls == 500


def test_snapshot_is_a_frozen_pydantic_model() -> None:
    budget = Budget(max_runs=2, max_usd=5.0, max_tokens=10, prices=PRICES)
    budget.start_run()
    snap = budget.snapshot()
    assert isinstance(snap, BudgetSnapshot)
    again = BudgetSnapshot.model_validate_json(snap.model_dump_json())
    assert again == snap
    with pytest.raises(Exception):
        snap.runs = 7  # type: ignore[misc]
    assert "runs=1/2" in repr(budget)


def test_argument_validation() -> None:
    with pytest.raises(InvalidArgument):
        Budget(max_runs=-1)
    with pytest.raises(InvalidArgument):
        Budget(max_runs=2.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        Budget(max_usd=float("nan"))
    with pytest.raises(InvalidArgument):
        Budget(prices={"x": "cheap"})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgument):
        Budget().charge("m", -1, 0)
    with pytest.raises(InvalidArgument):
        ModelPrice(-1.0, 1.0)


def test_price_lookup_follows_edits_of_the_table_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """The longest-prefix lookup is remembered per table, yet every edit of a table (new or
    removed prefixes, replaced prices) shows in the next lookup, as the docs promise."""
    from agentprop._modelapi.budget import DEFAULT_PRICES, ModelPrice, price_for

    table: dict[str, ModelPrice] = {"claude-x": ModelPrice(1.0, 2.0)}
    assert price_for("claude-x-1", table) == ModelPrice(1.0, 2.0)
    assert price_for("claude-y", table) is None
    table["claude-x-1"] = ModelPrice(3.0, 4.0)  # a longer prefix now wins
    assert price_for("claude-x-1", table) == ModelPrice(3.0, 4.0)
    table["claude-x"] = ModelPrice(5.0, 6.0)  # same keys, new price
    assert price_for("claude-x-2", table) == ModelPrice(5.0, 6.0)
    del table["claude-x-1"]
    assert price_for("claude-x-1", table) == ModelPrice(5.0, 6.0)
    table["claude-y"] = ModelPrice(7.0, 8.0)
    assert price_for("claude-y", table) == ModelPrice(7.0, 8.0)
    before = price_for("claude-haiku-4-5-20251001")
    monkeypatch.setitem(DEFAULT_PRICES, "claude-haiku-4-5-2025", ModelPrice(9.0, 9.0))
    assert price_for("claude-haiku-4-5-20251001") == ModelPrice(9.0, 9.0)
    assert Budget().cost("claude-haiku-4-5-20251001", 1_000_000, 0) == (9.0, True)
    monkeypatch.delitem(DEFAULT_PRICES, "claude-haiku-4-5-2025")
    assert price_for("claude-haiku-4-5-20251001") == before
