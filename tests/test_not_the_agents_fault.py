"""Infrastructure is not a bug of the agent (issue #15).

A run that could not be made for a reason that is not the agent's (a cache miss in
replay-only mode, a damaged cache, no API key, a refused key, an unreachable API, the budget
spent inside a run) is recorded as that, never judged, memoised, shrunk or saved to the corpus;
the case is INCONCLUSIVE with the error, and ``agentprop run`` exits 2. An exception the agent
raises is the agent's: its traceback stays in the trace and is shown (``-v``, the JSON report).
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentprop
import agentprop.errors
from agentprop._agents.anthropic import AnthropicAgent
from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._decide.memo import TrialMemo
from agentprop._modelapi.budget import Budget, BudgetExhausted
from agentprop._modelapi.cache import ApiCache, CacheError
from agentprop._modelapi.retry import RetryPolicy
from agentprop.testing import MessagesServer, error_reply

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "claude-sonnet-4-6"
BILLING = "END_BILLING_ANSWER<-N3_BILLING"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def corpus_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.json")) if root.exists() else []


# --------------------------------------------------------------------------- a refused key


@pytest.fixture
def refusing_server() -> Iterator[MessagesServer]:
    """An API that answers every request with 401 (a key it does not accept)."""
    with MessagesServer(
        handler=lambda request: error_reply(401, message="invalid x-api-key")
    ) as server:
        yield server


def test_a_refused_key_is_not_an_agent_failure_and_nothing_is_shrunk_or_saved(
    refusing_server: MessagesServer, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    argv = [
        "run",
        str(SUPPORTOPS),
        "--agent",
        "anthropic",
        "--model",
        MODEL,
        "--base-url",
        refusing_server.base_url,
        "--cache",
        "none",
        "--kinds",
        "mft",
        "--runs",
        "2",
        "--corpus",
        str(corpus),
        "--json",
        str(tmp_path / "r.json"),
        "--case",
        BILLING,
        "--case",
        "END_CANCELLED<-N7_CANCEL",
        "--concurrency",
        "1",
    ]
    for _ in range(2):  # a second run must not find (or add) anything either
        code, out, err = cli(*argv)
        assert code == 2, out + err
        report = json.loads((tmp_path / "r.json").read_text())
        assert {c["verdict"] for c in report["cases"]} == {"INCONCLUSIVE"}
        assert all(
            c["infrastructure_error"]["kind"] == "auth" and not c["failures"]
            for c in report["cases"]
        )
        assert report["bugs"] == [] and corpus_files(corpus) == []
        assert "not the agent's (auth)" in out and "FAIL" not in out
    # one run per case and command: the first refusal stops the case (--concurrency 1: no trial
    # of the case is in flight ahead of it)
    assert len(refusing_server.requests) == 4


# --------------------------------------------------------------------------- no key


def test_no_api_key_is_an_error_before_the_first_run(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    code, out, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "anthropic",
        "--model",
        MODEL,
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--cache-mode",
        "read-write",
        "--kinds",
        "mft",
        "--corpus",
        str(corpus),
    )
    assert code == 2 and "no Anthropic API key" in err
    assert "cases:" not in out and "PASS" not in out and "INCONCLUSIVE" not in out  # no case ran
    assert corpus_files(corpus) == []


def test_replay_only_with_nothing_recorded_for_the_model_is_an_error_before_the_first_run(
    tmp_path: Path,
) -> None:
    code, out, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "anthropic",
        "--model",
        MODEL,
        "--cache",
        str(tmp_path / "c.sqlite"),
        "--cache-mode",
        "replay-only",
        "--kinds",
        "mft",
    )
    assert code == 2 and "replay-only" in err and MODEL in err and "fix: record" in err
    assert "cases:" not in out


# --------------------------------------------------------------------------- a damaged cache


def _damaged_cache(path: Path) -> None:
    cache = ApiCache(path, mode="read-write")
    for trial in range(40):
        cache.put(
            {"model": MODEL, "messages": [{"role": "user", "content": "x" * 500}]},
            trial=trial,
            response={
                "id": "m",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": MODEL,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )
    cache.close()
    data = bytearray(path.read_bytes())
    data[4096:12288] = b"\x5a" * 8192
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["garbage", "pages", "another schema version"])
def test_a_damaged_cache_is_one_error_naming_the_file_not_failed_cases(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "api.sqlite"
    if damage == "garbage":
        path.write_bytes(b"SQLite format 3\x00" + b"\x17" * 5000)
    elif damage == "pages":
        _damaged_cache(path)
    else:
        cache = ApiCache(path, mode="read-write")
        cache.put({"model": MODEL, "messages": []}, trial=0, response={"content": [], "usage": {}})
        cache.close()
        con = sqlite3.connect(path)
        con.execute("UPDATE schema_version SET version = 99")
        con.commit()
        con.close()
    code, out, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        "anthropic",
        "--model",
        MODEL,
        "--base-url",
        "http://127.0.0.1:9",
        "--cache",
        str(path),
        "--cache-mode",
        "read-write",
        "--kinds",
        "mft",
    )
    assert code == 2, out + err
    assert str(path) in err and "delete the file" in err.lower() and "DatabaseError" not in err
    assert "FAIL" not in out and "cases:" not in out


@pytest.mark.parametrize("damage", ["garbage", "pages", "dropped table", "bad row"])
def test_verify_returns_the_problems_of_a_damaged_cache_instead_of_raising(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "api.sqlite"
    if damage == "garbage":
        path.write_bytes(b"\x00not a database\x00" * 400)
    elif damage == "pages":
        _damaged_cache(path)
    else:
        _damaged_cache(tmp_path / "spare.sqlite")
        cache = ApiCache(path, mode="read-write")
        cache.put({"model": MODEL, "messages": []}, trial=0, response={"content": [], "usage": {}})
        cache.close()
        con = sqlite3.connect(path)
        if damage == "dropped table":
            con.execute("DROP TABLE responses")
        else:
            con.execute("UPDATE responses SET response_json = '{broken'")
        con.commit()
        con.close()
    # (read-write mode would create a dropped table afresh: that file is empty, not damaged)
    for mode in (
        ("read-write", "replay-only") if damage != "dropped table" else ("replay-only", "read")
    ):
        problems = ApiCache(path, mode=mode).verify()
        assert problems and all(isinstance(p, str) for p in problems), (mode, problems)


def test_a_damaged_cache_met_inside_a_run_is_recorded_as_not_the_agents(tmp_path: Path) -> None:
    project = load_project(SUPPORTOPS)
    path = tmp_path / "api.sqlite"
    path.write_bytes(b"\x00not a database\x00" * 400)
    agent = AnthropicAgent.from_files(
        MODEL,
        SUPPORTOPS / "seed_prompt.txt",
        SUPPORTOPS / "seed_tool_descriptions.yaml",
        base_url="http://127.0.0.1:9",
        cache=path,
        cache_mode="read-write",
    )
    result = agentprop.check(
        project,
        BILLING,
        agent,
        raise_on_failure=False,
        memo=TrialMemo(),
        settings=agentprop.settings(runs=3, mode="fixed"),
    )
    assert (
        result.verdict == "INCONCLUSIVE"
        and result.decided_by == "infrastructure"
        and result.runs == 0
    )
    assert (
        result.infrastructure_error is not None
        and result.infrastructure_error.kind == "cache_error"
    )
    assert str(path) in result.infrastructure_error.message and result.failures == []
    with pytest.raises(CacheError, match="fix: delete the file"):
        agent.preflight()


# -------------------------------------------------------------------------- the oracle and the memo


class BudgetSpentInside:
    """An agent whose model call is refused by the budget in the middle of its first turn."""

    def __call__(self, message: str, ctx: Any) -> None:
        ctx.call("get_account", account_id="A1")
        raise BudgetExhausted("max_usd=0.05 reached", Budget().snapshot())


def test_a_budget_spent_inside_a_run_is_not_a_failure_and_is_not_memoised(tmp_path: Path) -> None:
    project = load_project(SUPPORTOPS)
    memo = TrialMemo(tmp_path / "memo.sqlite")
    result = agentprop.check(
        project,
        BILLING,
        BudgetSpentInside,
        raise_on_failure=False,
        memo=memo,
        settings=agentprop.settings(runs=5, mode="fixed"),
    )
    assert result.verdict == "INCONCLUSIVE" and result.failures == [] and result.passes == 0
    # a model call the budget refused ends its run as not made: the decision stops as when the
    # budget refuses a run before it starts (decided by the budget, never a pass)
    assert result.decided_by == "budget" and result.budget_exhausted and result.runs == 0
    assert len(memo) == 0  # the run that was not made is not kept: the trial runs again next time
    assert "the budget ran out before a decision: this is not a pass" in result.summary()


class FailsThenNoKey:
    """Fails its first run (the agent's fault), then every later run meets a missing key."""

    runs = 0

    def __call__(self, message: str, ctx: Any) -> None:
        FailsThenNoKey.runs += 1
        if FailsThenNoKey.runs > 1:
            from agentprop._agents.anthropic import MissingApiKey

            raise MissingApiKey("no Anthropic API key")
        ctx.respond(node_id="X", decision="CLARIFY", tool_actions=[], evidence="", user_message="?")


def test_runs_judged_before_an_infrastructure_error_are_kept_and_the_rest_is_not_judged() -> None:
    project = load_project(SUPPORTOPS)
    FailsThenNoKey.runs = 0
    result = agentprop.check(
        project,
        BILLING,
        FailsThenNoKey,
        raise_on_failure=False,
        memo=TrialMemo(),
        settings=agentprop.settings(runs=10, mode="fixed"),
    )
    assert result.runs == 1 and result.passes == 0 and len(result.failures) == 1
    assert (
        result.verdict == "INCONCLUSIVE" and result.infrastructure_error.kind == "missing_api_key"
    )  # type: ignore[union-attr]


# ------------------------------------------------------------------------ the agent's own exception


AGENT_WITH_A_BUG = """
class Agent:
    def __call__(self, message, ctx):
        cache = {}
        return self.lookup(cache)

    def lookup(self, cache):
        return cache["orders_cache"]
"""


def test_an_agent_exception_keeps_its_traceback_in_the_report_and_shows_it_with_v(
    tmp_path: Path,
) -> None:
    (tmp_path / "buggy.py").write_text(AGENT_WITH_A_BUG)
    report = tmp_path / "r.json"
    argv = [
        "run",
        str(SUPPORTOPS),
        "--agent",
        "buggy:Agent",
        "--case",
        BILLING,
        "--kinds",
        "mft",
        "--runs",
        "2",
        "--shrink-budget",
        "0",
        "--corpus",
        "none",
        "--json",
        str(report),
    ]
    code, out, _ = cli(*argv)
    assert code == 1 and "KeyError: 'orders_cache'" in out
    assert "Traceback" not in out  # only with -v
    failure = json.loads(report.read_text())["cases"][0]["failures"][0]
    assert "Traceback (most recent call last)" in failure["traceback"]
    assert (
        "buggy.py" in failure["traceback"]
        and 'return cache["orders_cache"]' in failure["traceback"]
    )
    code, out, _ = cli(*argv, "-v")
    assert (
        code == 1
        and "Traceback (most recent call last)" in out
        and 'return cache["orders_cache"]' in out
    )


def test_an_unreachable_api_is_recorded_as_not_the_agents(tmp_path: Path) -> None:
    project = load_project(SUPPORTOPS)
    with MessagesServer(handler=lambda request: error_reply(503, message="down")) as server:
        agent = AnthropicAgent.from_files(
            MODEL,
            SUPPORTOPS / "seed_prompt.txt",
            SUPPORTOPS / "seed_tool_descriptions.yaml",
            base_url=server.base_url,
            cache=False,
            retry_policy=RetryPolicy(max_attempts=2, base_delay=0.01),
        )
        result = agentprop.check(
            project,
            BILLING,
            agent,
            raise_on_failure=False,
            memo=TrialMemo(),
            settings=agentprop.settings(runs=3, mode="fixed"),
        )
    assert (
        result.verdict == "INCONCLUSIVE" and result.infrastructure_error.kind == "api_unavailable"
    )  # type: ignore[union-attr]
    assert result.failures == [] and "503" in result.infrastructure_error.message  # type: ignore[union-attr]


def test_check_raises_the_infrastructure_error_not_a_property_violation() -> None:
    """In pytest the test errors with the cause; it is no assertion failure, so the plugin
    neither shrinks it nor saves it to the corpus."""
    project = load_project(SUPPORTOPS)
    FailsThenNoKey.runs = 1  # every run meets the missing key
    with pytest.raises(agentprop.errors.InfrastructureError) as info:
        agentprop.check(
            project,
            BILLING,
            FailsThenNoKey,
            memo=TrialMemo(),
            settings=agentprop.settings(runs=3, mode="fixed"),
        )
    assert not isinstance(info.value, AssertionError) and info.value.kind == "missing_api_key"
    assert "not the agent's (missing_api_key)" in str(info.value) and "no Anthropic API key" in str(
        info.value
    )
