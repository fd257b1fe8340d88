"""``agentprop run --dry-run``: cases and runs computed from the profile, nothing run or written."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop.testing import OpenAIServer

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue() + err.getvalue()


def mft_runs(out: str) -> tuple[int, int, int]:
    found = re.search(
        r"MFT: (\d+) case\(s\); agent runs at least ([\d,]+) .* at most ([\d,]+)", out
    )
    assert found, out
    cases, least, most = (int(g.replace(",", "")) for g in found.groups())
    return cases, least, most


def files_under(path: Path) -> set[Path]:
    return set(path.rglob("*"))


def test_profiles_scale_the_fewest_runs_and_nothing_is_written(tmp_path: Path) -> None:
    before = files_under(SUPPORTOPS) | files_under(tmp_path)
    counted = {}
    for profile in ("smoke", "ci", "release"):
        code, out = cli("run", str(SUPPORTOPS), "--dry-run", "--profile", profile)
        assert code == 0, out
        assert (
            "nothing is run" in out and "neither cases nor runs are counted before running" in out
        )
        counted[profile] = mft_runs(out)
    cases = counted["ci"][0]
    assert cases > 0
    assert counted["smoke"][1] == cases  # one clean run a case
    assert counted["ci"][1] == 2 * cases
    # SupportOps' cases all carry the PII policy: release certifies each with 59 clean runs
    assert counted["release"][1] == counted["release"][2] == 59 * cases
    assert files_under(SUPPORTOPS) | files_under(tmp_path) == before


def test_explicit_runs_and_kinds() -> None:
    code, out = cli("run", str(SUPPORTOPS), "--dry-run", "--kinds", "mft", "--runs", "3")
    assert code == 0, out
    cases, least, most = mft_runs(out)
    assert least == most == 3 * cases
    assert "EXPLORE" not in out and "explicit --runs 3" in out


def test_model_agent_states_its_price_and_sends_nothing(tmp_path: Path) -> None:
    with OpenAIServer(handler=lambda request: pytest.fail("a dry run sent a request")) as server:
        code, out = cli(
            "run",
            str(SUPPORTOPS),
            "--dry-run",
            "--agent",
            "openai",
            "--model",
            "gpt-4.1-mini",
            "--base-url",
            server.base_url,
            "--cache",
            str(tmp_path / "api.sqlite"),
            "--kinds",
            "mft",
        )
    assert code == 0, out
    assert "per million tokens; no recorded usage: dollars not estimated" in out
    assert "$" not in out.split("dollars:")[0]
    assert not (tmp_path / "api.sqlite").exists()


def test_recorded_usage_gives_a_dollar_range_with_its_assumptions(tmp_path: Path) -> None:
    import sqlite3

    from test_cli_openai import playing

    from agentprop._modelapi.budget import price_for

    cache = tmp_path / "api.sqlite"
    model = (
        "--agent",
        "openai",
        "--model",
        "gpt-4.1-mini",
        "--cache",
        str(cache),
        "--kinds",
        "mft",
    )
    with OpenAIServer(handler=playing()) as server:
        url = ("--base-url", server.base_url)
        code, out = cli(
            "run",
            str(SUPPORTOPS),
            *model,
            *url,
            "--runs",
            "1",
            "--shrink-budget",
            "0",
            "--corpus",
            "none",
            "--case",
            "END_REFUSE_AUTH<-N2_AUTH",
        )
        assert code in (0, 3), out
        requests = len(server.requests)
        code, out = cli("run", str(SUPPORTOPS), "--dry-run", *model, *url, "--max-usd", "2")
        assert len(server.requests) == requests  # the dry run sent nothing
    assert code == 0, out
    # Chat Completions' prompt/completion tokens are in the columns
    with sqlite3.connect(cache) as db:
        (max_in,) = db.execute("SELECT MAX(input_tokens) FROM responses").fetchone()
    assert max_in > 0
    found = re.search(r"holds (\d+) call\(s\) of it, .* ([\d,]+) in at most", out)
    assert found, out
    assert int(found.group(1)) == requests and int(found.group(2).replace(",", "")) == max_in
    low, high = (
        float(x) for x in re.findall(r"dollars for the MFT cases: \$([\d.]+) to \$([\d.]+)", out)[0]
    )
    assert 0 < low < high
    turns = int(
        re.search(r"every case runs to its cap \(([\d,]+) turns\)", out).group(1).replace(",", "")
    )  # type: ignore[union-attr]
    # SupportOps allows 4 tool calls a turn: 5 model calls at most, each at the largest
    # input and max_tokens out
    assert "5 model calls a turn (max_tool_calls_per_turn 4" in out
    price = price_for("gpt-4.1-mini")
    assert price is not None
    assert high == pytest.approx(turns * 5 * price.cost(max_in, 1024), abs=1e-4)
    assert "at the agent's max_steps (10 calls a turn) up to $" in out
    assert "not counted: shrinking; --max-usd caps the whole command at $2" in out


def test_calls_a_turn_are_bounded_by_the_tool_limit_within_max_steps() -> None:
    from agentprop._cli.dryrun import calls_per_turn

    assert calls_per_turn(4, 10)[0] == 5
    assert calls_per_turn(None, 10)[0] == 10 and "hard cap" in calls_per_turn(None, 10)[1]
    assert calls_per_turn(12, 10)[0] == 10


def test_tdad_dry_run_names_the_mutants_and_runs_nothing(tmp_path: Path) -> None:
    before = files_under(SUPPORTOPS) | files_under(tmp_path)
    code, out = cli("tdad", str(SUPPORTOPS), "--dry-run")
    assert code == 0, out
    cases, least, _ = mft_runs(out)
    assert least == 2 * cases  # tdad runs the default profile, ci
    assert re.search(
        r"each of the \d+ mutation intents reruns .*: those runs are not counted before running",
        out,
    )
    assert "suite:" not in out  # no case was run
    assert files_under(SUPPORTOPS) | files_under(tmp_path) == before
