"""The budget ledger behind an interface (issue #29 item 3): the SQLite file and a real Redis
server give several processes one atomic budget, with the same semantics on both backends."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from agentprop._modelapi.budget import Budget
from agentprop._modelapi.ledger import Ledger, RedisLedger, SharedLedger, open_ledger
from agentprop.errors import BudgetExhausted, InvalidArgument

pytest_plugins = ["pytester"]

MODEL = "claude-sonnet-4-5"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _open(spec: tuple[str, str, str]) -> Ledger:
    backend, where, run = spec
    return SharedLedger(where) if backend == "file" else RedisLedger(where, run)


@pytest.fixture(params=["file", "redis"])
def ledger_spec(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """How a process opens one fresh ledger: (backend, path or URL, run name)."""
    if request.param == "file":
        path = str(tmp_path / "ledger.sqlite")
        SharedLedger(path)
        return ("file", path, "")
    url = request.getfixturevalue("redis_url")
    return ("redis", url, f"test-{os.getpid()}-{request.node.name}-{time.monotonic_ns()}")


def _spend(
    spec: tuple[str, str, str], limit: float, seed: int, start: Any, out: multiprocessing.Queue
) -> None:  # type: ignore[type-arg]
    import random

    rng = random.Random(seed)
    budget = Budget(max_usd=limit, ledger=_open(spec))
    start.wait(timeout=120)  # all four race from the same moment
    calls = 0
    while True:
        try:
            held = budget.reserve(MODEL, input_tokens=1000, max_output_tokens=1000)
        except BudgetExhausted:
            break
        budget.settle(held, 1000, rng.randrange(0, 1001))
        calls += 1
    out.put(calls)


def test_processes_reserving_against_one_ledger_never_exceed_the_limit_by_more_than_one_reservation(
    ledger_spec: tuple[str, str, str],
) -> None:
    price = Budget().price(MODEL)
    assert price is not None
    worst = price.worst_case(1000, 1000)
    limit = 60 * worst
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(4)
    workers = [
        ctx.Process(target=_spend, args=(ledger_spec, limit, seed, start, out)) for seed in range(4)
    ]
    for w in workers:
        w.start()
    calls = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=120)
    totals = _open(ledger_spec).totals()
    assert totals.reserved_usd == pytest.approx(0.0) and totals.reserved_tokens == 0
    assert limit - worst <= totals.usd <= limit + worst
    # every settled call is in the totals: none lost to a concurrent write
    assert totals.tokens > 0 and sum(calls) * 1000 <= totals.tokens <= sum(calls) * 2000
    assert sum(calls) > 60  # real calls cost less than their worst case: more than 60 fit


def _settle_then_hang(spec: tuple[str, str, str], settled: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    budget = Budget(max_usd=1000.0, ledger=_open(spec))
    for _ in range(settled):
        budget.settle(budget.reserve(MODEL, input_tokens=1000, max_output_tokens=1000), 1000, 500)
    budget.reserve(MODEL, input_tokens=1000, max_output_tokens=1000)  # in flight when killed
    out.put("held")
    time.sleep(300)


def test_a_killed_process_loses_nothing_already_settled(ledger_spec: tuple[str, str, str]) -> None:
    price = Budget().price(MODEL)
    assert price is not None
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_settle_then_hang, args=(ledger_spec, 3, out))
    proc.start()
    assert out.get(timeout=120) == "held"
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=60)
    totals = _open(ledger_spec).totals()
    assert totals.usd == pytest.approx(3 * price.cost(1000, 500))
    assert totals.tokens == 3 * 1500
    # the abandoned call's reservation stays held (the provider may have billed it) on both backends
    assert (
        totals.reserved_usd == pytest.approx(price.worst_case(1000, 1000))
        and totals.reserved_tokens == 2000
    )


def test_runs_are_one_limit_across_budgets_on_either_backend(
    ledger_spec: tuple[str, str, str],
) -> None:
    a, b = (
        Budget(max_runs=3, ledger=_open(ledger_spec)),
        Budget(max_runs=3, ledger=_open(ledger_spec)),
    )
    assert sum(a.try_start_run() for _ in range(5)) + sum(b.try_start_run() for _ in range(5)) == 3
    assert _open(ledger_spec).totals().runs == 3


def test_open_ledger_names_the_run_from_the_url_the_argument_or_the_environment(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTPROP_RUN_ID", raising=False)
    ledger = open_ledger(redis_url + "?run=nightly-7")
    assert isinstance(ledger, RedisLedger) and ledger.run == "nightly-7" and ledger.url == redis_url
    assert (
        isinstance(named := open_ledger(redis_url, run="given"), RedisLedger)
        and named.run == "given"
    )
    monkeypatch.setenv("AGENTPROP_RUN_ID", "from-env")
    assert isinstance(env := open_ledger(redis_url), RedisLedger) and env.run == "from-env"
    monkeypatch.delenv("AGENTPROP_RUN_ID")
    one, two = open_ledger(redis_url), open_ledger(redis_url)
    # fresh: not shared
    assert isinstance(one, RedisLedger) and isinstance(two, RedisLedger) and one.run != two.run


def test_a_store_url_agentprop_does_not_know_is_refused_naming_the_expected_form() -> None:
    with pytest.raises(InvalidArgument, match=r"redis://host:port/db"):
        open_ledger("postgres://localhost/budget")


def test_an_unreachable_redis_is_refused_naming_the_url() -> None:
    pytest.importorskip("redis")
    port = _free_port()  # nothing listens there
    with pytest.raises(InvalidArgument, match=rf"127\.0\.0\.1:{port}.*cannot be reached"):
        RedisLedger(f"redis://127.0.0.1:{port}/0", "run")


def test_without_redis_py_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(InvalidArgument, match=r"agentprop\[redis\]"):
        RedisLedger("redis://127.0.0.1:1/0", "run")


EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()

HUNGRY = f"""
import pytest

pytest_plugins = ["pytester"]
import agentprop

EXAMPLE = {str(EXAMPLE)!r}
project = agentprop.load_project(EXAMPLE)
CLEAN = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)


@pytest.mark.parametrize("i", range(4))
def test_hungry(i):
    try:
        agentprop.check(project, "END_BILLING_ANSWER<-N3_BILLING", CLEAN, settings=agentprop.settings(mode="fixed", runs=6, seed=i))
    except agentprop.AgentPropertyViolation:
        pass  # a check the budget cut short is not a pass; what counts here is the runs made
"""  # noqa: E501


def test_pytest_workers_and_a_second_session_share_one_redis_budget(
    redis_url: str, pytester: pytest.Pytester
) -> None:
    pytest.importorskip("xdist")
    # two pytest runs (two CI shards), one with two xdist workers, book under one run name: the
    # limit of 10 runs holds for all three processes together (each alone would make 10)
    pytester.makepyfile(test_hungry=HUNGRY)
    store = f"{redis_url}?run=shards-{time.monotonic_ns()}"
    common = (
        "-p",
        "no:cacheprovider",
        "--agentprop-shrink-budget",
        "0",
        "--agentprop-memo",
        "none",
        "--agentprop-max-runs",
        "10",
    )
    first = pytester.runpytest_subprocess("-n", "2", *common, "--agentprop-store", store)
    second = pytester.runpytest_subprocess(*common, "--agentprop-store", store)
    assert "new agent runs" in first.stdout.str() and "new agent runs" in second.stdout.str()
    ledger = open_ledger(store)
    assert ledger.totals().runs == 10
    assert "max_runs=10 reached" in second.stdout.str()


def test_cli_run_books_in_the_store_and_refuses_a_bad_one(redis_url: str, tmp_path: Path) -> None:
    import io

    from agentprop._cli import main

    store = f"{redis_url}?run=cli-{time.monotonic_ns()}"
    ledger = open_ledger(store)
    ledger.add(runs=7)  # another shard took 7 of the 9 runs already
    argv = [
        "run",
        str(EXAMPLE),
        "--runs",
        "3",
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
        "--kinds",
        "mft",
        "--max-runs",
        "9",
    ]
    out, err = io.StringIO(), io.StringIO()
    main([*argv, "--store", store, "--json", str(tmp_path / "r.json")], out=out, err=err)
    assert ledger.totals().runs == 9
    assert "max_runs=9 reached (9 runs started by all processes)" in out.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main([*argv, "--store", "redis://127.0.0.1:1/0"], out=out, err=err) == 2
    assert (
        "--store: redis://127.0.0.1:1/0: the Redis budget ledger cannot be reached"
        in err.getvalue()
    )


def test_the_store_comes_from_the_environment_when_no_option_names_it(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from agentprop._cli.common import cli_ledger

    monkeypatch.setenv("AGENTPROP_STORE", f"{redis_url}?run=env")
    ledger = cli_ledger(argparse.Namespace(store=None))
    assert isinstance(ledger, RedisLedger) and ledger.run == "env"
    monkeypatch.delenv("AGENTPROP_STORE")
    assert cli_ledger(argparse.Namespace(store=None)) is None
