"""Issue #29's end-to-end check: one project run as 4 shards in separate processes against one
real Redis (the budget ledger) and a loopback model, merged, against the unsharded run.

The shards are ``agentprop run --shard i/N`` processes: the merge reads the records and report
that the CLI writes. tests/test_pytest_shards_redis.py makes the same check with the shards of a
pytest session (``--agentprop-shard i/N --agentprop-records DIR --agentprop-store URL``,
pytest-xdist inside one).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentprop._cli import main
from agentprop._decide.records import RECORDS_FILE, read_records
from agentprop._modelapi.budget import price_for
from agentprop._modelapi.ledger import open_ledger
from agentprop.testing import MessagesServer, message_reply, tool_use_block

pytestmark = pytest.mark.slow  # 11 processes at once

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "claude-sonnet-4-6"
BILLED = {"input_tokens": 900, "output_tokens": 120}
"""What the loopback model bills each request."""


def _argv(server: MessagesServer, store: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "agentprop._cli", "run", str(SUPPORTOPS),
        "--agent", "anthropic", "--model", MODEL, "--base-url", server.base_url,
        "--cache", "none", "--corpus", "none", "--seed", "3", "--shrink-budget", "0",
        "--kinds", "mft", "--case", "N2", "--store", store, *extra,
    ]  # fmt: skip


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ANTHROPIC_API_KEY": "k-test",
    }


def _normalised(report: dict[str, Any]) -> dict[str, Any]:
    """The report without wall times, spend counters and the budget (see tests/test_merge.py)."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "duration_s"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    out: dict[str, Any] = strip(report)
    for name in ("runs_started", "runs_reused", "runs_refused", "runs_beyond_decision"):
        out["metrics"].pop(name)
    # runs a model agent started ahead of a decision: as many as were in flight
    for case in out["cases"]:
        case.pop("runs_beyond_decision")
    for name in ("merge", "budget", "model", "runs_shrinking_before_deepening"):
        out["metrics"]["extra"].pop(name, None)
    return out


SLOW_AGENT = """
import importlib.util
import os
import time

_spec = importlib.util.spec_from_file_location("supportops_for_e2e", {path!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)


class SlowAgent(_module.SupportOpsAgent):
    \"\"\"The SupportOps agent, each turn AGENTPROP_E2E_TURN_S seconds long (0 unless set).\"\"\"

    def turn(self, message, ctx):
        time.sleep(float(os.environ.get("AGENTPROP_E2E_TURN_S", "0")))
        return super().turn(message, ctx)
"""


def _priced_shards(
    server: MessagesServer, store: str, base: Path
) -> list[tuple[Path, subprocess.Popen[str]]]:
    """4 shards of a model agent's run against ``server``, under one dollar limit on ``store``."""
    argv = _argv(server, store, "--max-usd", str(LIMIT_USD), "--concurrency", "4")
    out = []
    for i in range(1, 5):
        d = base / f"priced{i}"
        out.append(
            (
                d,
                subprocess.Popen(
                    [*argv, "--shard", f"{i}/4", "--records", str(d)],
                    env=_env(),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
            )
        )
    return out


LIMIT_USD = 0.05


def test_four_shards_on_one_redis_merge_into_the_unsharded_run_within_one_limit_and_a_kill_loses_nothing(  # noqa: E501
    redis_url: str, tmp_path: Path
) -> None:
    """All at once (11 processes): the unsharded run and its 4 shards (the scripted agent,
    shrinking on), shard 2 again killed mid-run, and 4 shards of a model agent's run under a
    dollar limit, every shard booking into one Redis."""
    price = price_for(MODEL)
    assert price is not None
    answer = {"decision": "REQUEST_AUTH_INFO", "message": "Please verify your identity first."}
    reply = message_reply([tool_use_block("respond", answer)], stop_reason="tool_use", **BILLED)
    server = MessagesServer(handler=lambda request: reply).__enter__()
    priced_store = f"{redis_url}?run=limit-{time.monotonic_ns()}"
    try:
        priced = _priced_shards(server, priced_store, tmp_path)
        _scripted_shards(redis_url, tmp_path)
        for _, p in priced:
            output, _ = p.communicate(timeout=300)
            assert p.returncode in (0, 1, 3), output
        billed = len(server.requests) * price.cost(BILLED["input_tokens"], BILLED["output_tokens"])
    finally:
        server.__exit__(None, None, None)
    # the dollar limit held across the 4 processes, within one reservation, and the
    # ledger has every cent
    budgets = [
        json.loads((d / "report.json").read_text())["metrics"]["extra"]["budget"] for d, _ in priced
    ]
    largest = max(b["largest_reservation_usd"] for b in budgets)
    totals = open_ledger(priced_store).totals()
    assert any(b["exhausted"] for b in budgets) and billed > LIMIT_USD / 2  # the limit was reached
    assert billed <= LIMIT_USD + largest and totals.usd <= LIMIT_USD + largest
    assert totals.usd == pytest.approx(billed) and totals.reserved_usd == pytest.approx(0.0)


def _scripted_shards(redis_url: str, tmp_path: Path) -> None:
    agent = tmp_path / "slow_agent.py"
    agent.write_text(SLOW_AGENT.format(path=str(SUPPORTOPS / "agent.py")))
    tag = time.monotonic_ns()
    run = [
        sys.executable,
        "-m",
        "agentprop._cli",
        "run",
        str(SUPPORTOPS),
        "--agent",
        f"{agent}:SlowAgent",
        "--fault",
        "skip_auth=0.3",
    ]
    run += [
        "--case",
        "N7",
        "--kinds",
        "mft,dir",
        "--corpus",
        "none",
        "--seed",
        "3",
        "--shrink-budget",
        "4",
        "--max-runs",
        "100000",
    ]
    dirs = [tmp_path / f"s{i}" for i in range(1, 5)]
    store = f"{redis_url}?run=shards-{tag}"
    commands = [
        [*run, "--store", f"{redis_url}?run=whole-{tag}", "--json", str(tmp_path / "all.json")]
    ]
    commands += [
        [*run, "--store", store, "--shard", f"{i}/4", "--records", str(d)]
        for i, d in enumerate(dirs, 1)
    ]
    procs = [
        subprocess.Popen(c, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for c in commands
    ]
    # shard 2 once more, slowed down and killed (SIGKILL) after its third trial
    cut = tmp_path / "s2-killed"
    killed_store = f"{redis_url}?run=killed-{tag}"
    killed = subprocess.Popen(
        [*run, "--store", killed_store, "--shard", "2/4", "--records", str(cut)],
        env={**_env(), "AGENTPROP_E2E_TURN_S": "0.2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    records, deadline = cut / RECORDS_FILE, time.monotonic() + 240
    while not (records.is_file() and records.read_text().count('"type":"trial"') >= 3):
        assert killed.poll() is None and time.monotonic() < deadline, (
            "the shard ended before it could be killed"
        )
        time.sleep(0.02)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=60)
    seen = records.read_text().count('"type":"trial"')
    for p in procs:
        output, _ = p.communicate(timeout=300)
        assert p.returncode in (0, 1, 3), output

    out = io.StringIO()
    assert (
        main(
            ["merge", *map(str, dirs), "--json", str(tmp_path / "m.json")],
            out=out,
            err=io.StringIO(),
        )
        == 1
    ), out.getvalue()
    merged, unsharded = (
        json.loads((tmp_path / "m.json").read_text()),
        json.loads((tmp_path / "all.json").read_text()),
    )
    # verdicts, intervals, bugs and their shrinks, claims, coverage
    assert _normalised(merged) == _normalised(unsharded)
    assert merged["bugs"] and all(b["shrink_runs"] > 0 for b in merged["bugs"])
    assert any(c["kind"] == "DIR" and c["verdict"] == "FAIL" for c in merged["cases"])
    # the work was shared
    assert sum(s["cases"] > 0 for s in merged["metrics"]["extra"]["merge"]["shards"]) >= 3
    # the 4 shards booked every run they started into the one ledger
    started = sum(
        json.loads((d / "report.json").read_text())["metrics"]["extra"]["budget"]["runs"]
        for d in dirs
    )
    assert open_ledger(store).totals().runs == started > 0

    # the killed shard: every trial line written before the kill reads back, and
    # its runs stay booked
    kept = [r for r in read_records(cut) if r.type == "trial"]
    assert len(kept) >= seen >= 3 and not (cut / "report.json").exists()
    assert open_ledger(killed_store).totals().runs >= sum(r.status == "started" for r in kept)  # type: ignore[union-attr]
    err = io.StringIO()
    assert (
        main(
            ["merge", str(dirs[0]), str(cut), str(dirs[2]), str(dirs[3])],
            out=io.StringIO(),
            err=err,
        )
        == 2
    )
    assert (
        f"shard 2/4 ({cut}) is incomplete" in err.getvalue()
        and "run shard 2/4 again" in err.getvalue()
    )
    out = io.StringIO()
    assert (
        main(
            ["merge", "--records-only", str(dirs[0]), str(cut), str(dirs[2]), str(dirs[3])],
            out=out,
            err=io.StringIO(),
        )
        == 1
    )
    assert "merged the records of 4 of 4 shard(s)" in out.getvalue()
