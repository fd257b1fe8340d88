"""Issue #29's "Done when" test under the pytest plugin: one pytest project as 4 shards in
separate processes at once (pytest-xdist ``-n 2`` inside one), every shard's stores on one real
``redis-server`` (``--agentprop-store``), merged by ``agentprop merge``, against the unsharded
session; a dollar limit on that Redis shared by 4 shards of a priced model agent's checks; and a
shard killed with SIGKILL mid-session, whose records keep every trial line it wrote.

Everything runs at once (10 pytest sessions). The scripted agent is the supportops example's,
behind a subclass that can slow its turns (for the kill); the shards share the Redis memo, so a
run one shard made is reused by another (the same input, agent and trial: the same run), and
the merged record must still equal the unsharded session's check for check and bug for bug.
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
from agentprop._decide.records import (
    REPORT_FILE,
    CheckLine,
    TrialLine,
    read_records,
    records_files,
)
from agentprop._modelapi.budget import price_for
from agentprop._modelapi.ledger import open_ledger
from agentprop.testing import MessagesServer, message_reply, tool_use_block

pytestmark = pytest.mark.slow  # 10 pytest sessions at once, one with two workers

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "claude-sonnet-4-6"
BILLED = {"input_tokens": 6000, "output_tokens": 1200}
"""What the loopback model bills each request."""
LIMIT_USD = 0.5

SLOW_AGENT = """
import importlib.util
import os
import time

_spec = importlib.util.spec_from_file_location("supportops_for_shards", {path!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)


class SlowAgent(_module.SupportOpsAgent):
    \"\"\"The SupportOps agent, each turn E2E_TURN_S seconds long (0 unless set).\"\"\"

    def turn(self, message, ctx):
        time.sleep(float(os.environ.get("E2E_TURN_S", "0")))
        return super().turn(message, ctx)
"""

PROJECT = """
from pathlib import Path

import pytest

import agentprop

EXAMPLE = Path({example!r})
project = agentprop.load_project(EXAMPLE)
IDS = [s.id for s in project.scenarios()][:6]


def agent(**faults):
    return agentprop.load_agent({agent!r}, EXAMPLE, faults)


CLEAN = agent()
FAULTY = agent(skip_confirm=0.3, leak_pii=0.2)
FIXED = agentprop.settings(mode="fixed", runs=6)


@pytest.mark.parametrize("sid", IDS)
def test_clean(sid):
    agentprop.check(project, sid, CLEAN, settings=FIXED)


@pytest.mark.parametrize("sid", IDS)
def test_faulty(sid):
    agentprop.check(project, sid, FAULTY, settings=FIXED)


def test_expected_failure():
    with pytest.raises(agentprop.AgentPropertyViolation):
        agentprop.check(project, IDS[5], agent(skip_confirm=1.0), settings=FIXED)
"""

PRICED = """
import json
import os
from pathlib import Path

import pytest

import agentprop
from agentprop.agents import AnthropicAgent

EXAMPLE = Path({example!r})
project = agentprop.load_project(EXAMPLE)
AGENT = AnthropicAgent({model!r}, base_url=os.environ["E2E_BASE_URL"], cache=False, max_tokens=2000)


@pytest.fixture(scope="session", autouse=True)
def _spent():
    # what this process's budget saw, for the test: its largest reservation
    yield
    from agentprop._decide.session import current_session

    seen = current_session().budget.snapshot()
    Path(os.environ["E2E_SPENT"], f"{{os.getpid()}}.json").write_text(
        json.dumps({{"largest": seen.largest_reservation_usd, "why": seen.exhausted_reason}})
    )


@pytest.mark.parametrize("i", range(12))
def test_priced(i):
    try:
        agentprop.check(project, "N2_AUTH:missing_last4+zip", AGENT,
                        settings=agentprop.settings(mode="fixed", runs=4, seed=i))
    except agentprop.AgentPropertyViolation:
        pass  # a check the budget cut short: what counts here is what was billed
"""


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ANTHROPIC_API_KEY": "k-test",
        **extra,
    }


def _pytest(where: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--agentprop-corpus"]
    argv += ["none", *args]
    return subprocess.Popen(
        argv, cwd=where, env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def _ended(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = process.communicate(timeout=300)
    return process.returncode, out


def _merge(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["merge", *argv], out=out, err=out)
    return code, out.getvalue()


def _decided(record: dict[str, Any]) -> dict[str, Any]:
    """What a session decided: all but what its memo saved (see tests/test_pytest_shards.py)."""
    kept = {k: v for k, v in record.items() if k not in ("merge", "memo_hits", "results")}
    kept["results"] = [
        {
            "test": r["test"],
            **{k: v for k, v in r["result"].items() if k not in ("memo_hits", "sample_traces")},
        }
        for r in record["results"]
    ]
    return kept


def _trial_lines(directory: Path) -> int:
    return sum(f.read_text().count('"type":"trial"') for f in records_files(directory))


def test_four_pytest_shards_on_one_redis_merge_into_the_unsharded_session_within_one_limit(
    redis_url: str, tmp_path: Path
) -> None:
    tag = time.monotonic_ns()
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT.format(path=str(SUPPORTOPS / "agent.py")))
    agent_ref = f"{tmp_path / 'slow_agent.py'}:SlowAgent"
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_agents.py").write_text(PROJECT.format(example=str(SUPPORTOPS),
                                                           agent=agent_ref))  # fmt: skip
    priced_dir = tmp_path / "priced"
    (priced_dir / "spent").mkdir(parents=True)
    (priced_dir / "test_priced.py").write_text(PRICED.format(example=str(SUPPORTOPS), model=MODEL))

    price = price_for(MODEL)
    assert price is not None
    answer = {"decision": "REQUEST_AUTH_INFO", "message": "Please verify your identity first."}
    reply = message_reply([tool_use_block("respond", answer)], stop_reason="tool_use", **BILLED)
    server = MessagesServer(handler=lambda request: reply).__enter__()
    # the shards' stores: memo and budget ledger on the one Redis (the memo shared by all four)
    store = f"{redis_url}?prefix=shards-{tag}&run=shards-{tag}"
    priced_store = f"{redis_url}?prefix=priced-{tag}&run=priced-{tag}"
    try:
        # 4 shards of the priced checks under one dollar limit on Redis, one under -n 2
        priced = [
            _pytest(priced_dir, "-n", "2" if i == 3 else "0", "--agentprop-memo", "none",
                    "--agentprop-shrink-budget", "0", "--agentprop-store", priced_store,
                    "--agentprop-max-usd", str(LIMIT_USD), "--agentprop-shard", f"{i}/4",
                    E2E_BASE_URL=server.base_url, E2E_SPENT=str(priced_dir / "spent"))
            for i in (1, 2, 3, 4)
        ]  # fmt: skip
        # the unsharded session (its own memo, no store) and its 4 shards on the store
        whole = _pytest(project, "-n", "0", "--agentprop-memo", "none", "--agentprop-json",
                        "whole.json")  # fmt: skip
        shards = [
            _pytest(project, "-n", "2" if i == 2 else "0", "--agentprop-store", store,
                    "--agentprop-max-runs", "100000", "--agentprop-shard", f"{i}/4",
                    "--agentprop-records", f"s{i}")
            for i in (1, 2, 3, 4)
        ]  # fmt: skip
        # shard 4 once more, slowed down, its runs its own (no memo), killed mid-session
        cut = project / "s4-killed"
        killed_store = f"{redis_url}?prefix=killed-{tag}&run=killed-{tag}"
        killed = _pytest(project, "-n", "0", "--agentprop-memo", "none", "--agentprop-store",
                         killed_store,
                         "--agentprop-max-runs", "100000", "--agentprop-shard", "4/4",
                         "--agentprop-records", str(cut),
                         E2E_TURN_S="0.1")  # fmt: skip
        deadline = time.monotonic() + 240
        while not (
            _trial_lines(cut) >= 12 and any(isinstance(r, CheckLine) for r in read_records(cut))
        ):
            assert killed.poll() is None and time.monotonic() < deadline, (
                "the shard ended before it could be killed"
            )
            time.sleep(0.05)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=60)
        seen = _trial_lines(cut)

        code, out = _ended(whole)
        assert code == 1, out  # some checks fail
        for i, shard in enumerate(shards, 1):
            code, out = _ended(shard)
            assert code in (0, 1), f"shard {i}: {out}"
        for i, shard in enumerate(priced, 1):
            code, out = _ended(shard)
            assert code == 0, f"priced shard {i}: {out}"
        billed = len(server.requests) * price.cost(BILLED["input_tokens"], BILLED["output_tokens"])
    finally:
        server.__exit__(None, None, None)

    # -- merged == unsharded, check for check and bug for bug
    assert sorted(p.name for p in (project / "s2").glob("trials*.jsonl")) == [
        "trials-gw0.jsonl",
        "trials-gw1.jsonl",
    ]
    code, out = _merge(*(str(project / f"s{i}") for i in (1, 2, 3, 4)), "--json",
                       str(project / "merged.json"))  # fmt: skip
    assert code == 1, out
    expected = json.loads((project / "whole.json").read_text())
    merged = json.loads((project / "merged.json").read_text())
    assert len(expected["checks"]) == 13
    assert {c["verdict"] for c in expected["checks"]} >= {"PASS", "FAIL"} and expected["bugs"]
    assert merged["checks"] == expected["checks"]
    assert merged["bugs"] == expected["bugs"]
    assert _decided(merged) == _decided(expected)
    assert merged["merge"]["checks_decided_again"] == 13
    assert sum(s["checks"] > 0 for s in merged["merge"]["shards"]) >= 3  # the work was shared
    # ... the shards' runs were booked on the Redis ledger and memoised in the Redis memo
    assert open_ledger(store).totals().runs > 0
    import redis

    client = redis.Redis.from_url(redis_url)
    assert any(client.scan_iter(f"shards-{tag}:memo*", count=1000))

    # -- the dollar limit held across the 4 priced shards (5 processes), within one reservation
    spent = [json.loads(p.read_text()) for p in (priced_dir / "spent").glob("*.json")]
    assert len(spent) == 5  # 3 shards and the 2 workers of the fourth
    largest = max(s["largest"] for s in spent)
    totals = open_ledger(priced_store).totals()
    assert any(s["why"] for s in spent) and billed > LIMIT_USD / 2  # the limit was reached
    assert 0 < largest < LIMIT_USD / 4
    assert billed <= LIMIT_USD + largest and totals.usd <= LIMIT_USD + largest
    assert totals.usd == pytest.approx(billed) and totals.reserved_usd == pytest.approx(0.0)

    # -- the killed shard: every trial line written before the kill reads back, and each check
    # it had recorded is the finished shard 4's, decided again from its trials
    assert not (cut / REPORT_FILE).exists()
    kept = [r for r in read_records(cut) if isinstance(r, TrialLine)]
    assert len(kept) >= seen >= 12
    # ... and every run it started stays booked in the Redis ledger
    assert open_ledger(killed_store).totals().runs >= sum(r.status == "started" for r in kept)
    code, out = _merge(*(str(project / f"s{i}") for i in (1, 2, 3)), str(cut))
    assert code == 2 and "shard 4/4" in out and "is incomplete" in out, out
    code, out = _merge("--records-only", str(cut), "--json", str(tmp_path / "cut.json"))
    assert code in (1, 3), out
    assert f"note: shard 4/4 ({cut}) did not finish" in out
    table = json.loads((tmp_path / "cut.json").read_text())["cases"]
    whole_shard = {(c["test"], c["case"]): c for c in merged["checks"]}
    assert table, "the killed shard recorded a check"
    for c in table:
        mine = whole_shard[(c["test"], c["name"])]
        assert (c["verdict"], c["runs"], c["interval"]) == (
            mine["verdict"],
            mine["runs"],
            mine["interval"],
        )
