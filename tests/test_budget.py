"""The session budget: limits, prices, cached replays, thread and asyncio safety."""

from __future__ import annotations

import asyncio
import threading

import anthropic
import pytest
from pydantic import ValidationError

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
    table = {
        "fam": ModelPrice(1.0, 1.0),
        "fam-2": ModelPrice(2.0, 2.0),
        "fam-2-5": ModelPrice(3.0, 3.0),
    }
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
        "test-model",
        0,
        0,
        cache_creation_input_tokens=1_000_000,
        cache_read_input_tokens=1_000_000,
        prices=PRICES,
    ) == pytest.approx(2.0 * 1.25 + 2.0 * 0.1)
    assert cost_usd("nope", 1, 1, prices=PRICES) is None


def test_long_context_tier() -> None:
    tiered = ModelPrice(
        1.0, 2.0, long_context_threshold=1000, long_input_per_mtok=10.0, long_output_per_mtok=20.0
    )
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


def test_an_unpriced_model_has_an_unknown_cost_not_zero() -> None:
    budget = Budget(prices=PRICES)
    assert budget.charge("mystery-model", 1_000_000, 1_000_000) is None
    budget.charge("test-model", 1_000_000, 0)
    snap = budget.snapshot()
    assert snap.unpriced_models == ["mystery-model"] and snap.unpriced_calls == 1
    assert snap.usd == pytest.approx(2.0) and not snap.usd_known  # the priced part, and it says so
    assert snap.input_tokens == 2_000_000 and snap.calls == 2  # the tokens still count
    assert budget.charge("mystery-model", 5, 5, cached=True) == 0.0  # a replay costs nothing
    assert budget.snapshot().unpriced_calls == 1


def test_a_dollar_limit_with_an_unpriced_model_is_an_error_that_says_so() -> None:
    from agentprop.errors import UnpricedModel

    budget = Budget(max_usd=1.0, prices=PRICES)
    with pytest.raises(UnpricedModel) as info:
        budget.reserve("mystery-model", input_tokens=10, max_output_tokens=10)
    message = str(info.value)
    assert "'mystery-model' has no price" in message and "max_usd" in message
    assert "--prices" in message and "Budget(prices=" in message
    assert budget.snapshot().in_flight_calls == 0
    # without a dollar limit the call may go (tokens and runs can still be capped)
    unlimited = Budget(max_tokens=100, prices=PRICES)
    reservation = unlimited.reserve("mystery-model", input_tokens=10, max_output_tokens=10)
    assert reservation.usd is None and unlimited.snapshot().reserved_tokens == 20


def test_family_prefixes_end_at_a_separator() -> None:
    table = {"gpt-5": ModelPrice(1.0, 2.0), "o3": ModelPrice(3.0, 4.0)}
    assert price_for("gpt-5", table) == ModelPrice(1.0, 2.0)
    assert price_for("gpt-5-2025-08-07", table) == ModelPrice(1.0, 2.0)
    assert price_for("gpt-5.5", table) is None  # another model, not a dated gpt-5
    assert price_for("o3-pro", table) == ModelPrice(3.0, 4.0)
    assert price_for("o30", table) is None
    assert price_for("gpt-4o-mini-2024-07-18") == DEFAULT_PRICES["gpt-4o-mini"]
    assert price_for("gpt-4.1-2025-04-14") == DEFAULT_PRICES["gpt-4.1"]


def test_the_bundled_table_is_a_data_file_and_other_files_load(tmp_path) -> None:
    from agentprop._modelapi.budget import PRICES_PATH, load_prices
    from agentprop.errors import InputError

    assert load_prices(PRICES_PATH) == DEFAULT_PRICES
    assert DEFAULT_PRICES["gpt-4o"] == ModelPrice(
        2.5, 10.0, cache_write_per_mtok=2.5, cache_read_per_mtok=1.25
    )
    mine = tmp_path / "prices.json"
    mine.write_text('{"models": {"local-llama": {"input": 0.1, "output": 0.2, "note": "our GPU"}}}')
    assert load_prices(mine) == {"local-llama": ModelPrice(0.1, 0.2)}
    mine.write_text('{"local-llama": {"input": 0.1}}')
    with pytest.raises(InputError, match="needs both input and output"):
        load_prices(mine)
    mine.write_text('{"local-llama": {"input": -1, "output": 1}}')
    with pytest.raises(InputError, match="invalid"):
        load_prices(mine)


# --- reservations: the per-call check ------------------------------------------------------------


def test_a_call_reserves_its_worst_case_and_settles_what_it_used() -> None:
    budget = Budget(max_usd=1.0, prices=PRICES)
    r = budget.reserve("test-model", input_tokens=100_000, max_output_tokens=50_000)
    # worst case: input at the dearest input rate (a prompt-cache write, 1.25x) + max output
    assert r.usd == pytest.approx((100_000 * 2.0 * 1.25 + 50_000 * 8.0) / 1e6)
    snap = budget.snapshot()
    assert (
        snap.in_flight_calls == 1 and snap.reserved_usd == pytest.approx(r.usd) and snap.usd == 0.0
    )
    assert budget.settle(r, 1000, 10) == pytest.approx((1000 * 2.0 + 10 * 8.0) / 1e6)
    snap = budget.snapshot()
    assert snap.in_flight_calls == 0 and snap.reserved_usd == 0.0 and snap.calls == 1
    assert snap.largest_reservation_usd == pytest.approx(r.usd)
    with pytest.raises(InvalidArgument):
        budget.settle(r, 1, 1)  # once only
    failed = budget.reserve("test-model", input_tokens=10, max_output_tokens=10)
    budget.release(failed)
    assert budget.snapshot().calls == 1 and budget.snapshot().in_flight_calls == 0


def test_calls_in_flight_hold_the_budget_and_the_overrun_is_at_most_one_reservation() -> None:
    budget = Budget(max_usd=0.05, prices=PRICES)
    held = []
    while True:  # reserve until refused: each call may cost up to $0.0205
        try:
            held.append(budget.reserve("test-model", input_tokens=2000, max_output_tokens=2000))
        except BudgetExhausted as exc:
            assert "reserved by calls in flight" in str(exc) and "was not sent" not in str(exc)
            break
    assert len(held) == 3  # 0, 0.0205, 0.041 < 0.05; then 0.0615 >= 0.05
    assert not budget.try_start_run()  # the reservations hold new runs back too
    for r in held:  # every call used its worst case
        budget.settle(r, 2000, 2000)
    snap = budget.snapshot()
    assert snap.usd > snap.max_usd  # overrun ...
    # ... by at most one call's worst case
    assert snap.usd - snap.max_usd <= snap.largest_reservation_usd
    assert snap.refused_calls == 1 and snap.exhausted


def test_reservations_count_tokens_too() -> None:
    budget = Budget(max_tokens=1000, prices=PRICES)
    first = budget.reserve("test-model", input_tokens=400, max_output_tokens=500)
    # 900 held < 1000
    second = budget.reserve("test-model", input_tokens=400, max_output_tokens=500)
    with pytest.raises(BudgetExhausted, match="max_tokens=1000") as info:
        budget.reserve("test-model", input_tokens=400, max_output_tokens=500, call="2 of turn 0")
    assert "the model call 2 of turn 0 was not sent" in str(info.value)
    budget.settle(first, 100, 50)
    budget.release(second)
    # 150 used
    assert budget.reserve("test-model", input_tokens=400, max_output_tokens=500).tokens == 900


def test_charge_usage_from_a_real_sdk_response() -> None:
    with MessagesServer([text_reply("hi", input_tokens=1000, output_tokens=500)]) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="dummy", max_retries=0)
        message = client.messages.create(
            model="test-model-1", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    budget = Budget(prices=PRICES)
    usd = budget.charge_usage(message.model, message.usage)
    assert usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    budget.charge_usage(
        "test-model", {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 7}
    )
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
    with pytest.raises(ValidationError):
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
    monkeypatch.setitem(DEFAULT_PRICES, "claude-haiku-4-5-20251001", ModelPrice(9.0, 9.0))
    assert price_for("claude-haiku-4-5-20251001") == ModelPrice(9.0, 9.0)
    assert Budget().cost("claude-haiku-4-5-20251001", 1_000_000, 0) == 9.0
    monkeypatch.delitem(DEFAULT_PRICES, "claude-haiku-4-5-20251001")
    assert price_for("claude-haiku-4-5-20251001") == before


def test_the_run_limit_refuses_runs_not_the_calls_of_runs_already_started() -> None:
    budget = Budget(max_runs=1, prices=PRICES)
    assert budget.try_start_run() and not budget.try_start_run()
    # the started run goes on
    r = budget.reserve("test-model", input_tokens=10, max_output_tokens=10)
    budget.settle(r, 5, 5)
    assert budget.snapshot().calls == 1
