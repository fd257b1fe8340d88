"""benchmarks/throughput.py in a tiny configuration: both providers measured side by side, every
request accounted for, and the JSON keys issues #13 and #16 name (the timings themselves are
the benchmark's business, not this test's)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("anthropic")
pytest.importorskip("openai")


@pytest.fixture(scope="module")
def throughput() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "throughput_benchmark", ROOT / "benchmarks" / "throughput.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["throughput_benchmark"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def no_heap_collection(throughput: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark collects the heap before each timed phase, so that timings are fair; in a
    test process with a large heap that is most of the time, and nothing here is timed."""
    monkeypatch.setattr(throughput, "_clean_heap", lambda: None)


def test_both_providers_side_by_side_with_the_issue_keys(
    throughput: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, rounds, repeats, case_runs = 3, 3, 2, 2
    out = tmp_path / "throughput.json"
    argv = [
        "--runs",
        str(runs),
        "--rounds",
        str(rounds),
        "--repeats",
        str(repeats),
        "--case-runs",
        str(case_runs),
        "--overhead-runs",
        "5",
        "--own-cost-runs",
        "5",
        "--latency",
        "0.001",
        "--concurrency",
        "2",
        "--high-concurrency",
        "4",
        "--high-runs",
        str(2 * runs),
        "--cli-rounds",
        "0",
        "--tools3-runs",
        "2",
        "--tools3-high-runs",
        "4",
        "--json",
        str(out),
    ]
    assert throughput.main(argv) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())

    # issue #16's keys at the top level: Anthropic's figures, measured in the same run
    for key in (
        "live_over_sdk",
        "replay_over_live",
        "overhead_us_per_run",
        "case_concurrency_speedup",
        "own_cpu_ms_per_call",
        "own_cpu_ms_per_call_no_cache",
    ):
        assert isinstance(data[key], float), key
    assert data["rounds"] == rounds and data["repeats"] == repeats
    assert data["case_provider"] == "anthropic"
    assert len(data["case_serial_s"]) == len(data["case_concurrent_s"]) == repeats

    # issue #13: both providers, each with its ratios and the rounds' medians and mins
    assert list(data["providers"]) == ["anthropic", "openai"]
    calls = runs * throughput.CALLS_PER_RUN
    warm_up = 8 * throughput.CALLS_PER_RUN
    for provider, r in data["providers"].items():
        for key in ("live_over_sdk", "live_over_ideal", "replay_over_live"):
            assert r[key] > 0, (provider, key)
        for key in ("live", "sdk_alone", "replay"):
            assert len(r[f"{key}_s"]) == rounds
            assert r[f"{key}_min_s"] == min(r[f"{key}_s"]) <= r[f"{key}_median_s"]
        # the SDK alone sent exactly the requests the live runs made; the replay sent none
        assert r["requests"] == r["live_calls"] == r["replay_cache_hits"] == calls
        assert r["replay_live_calls"] == 0
        case_calls = (
            2 * repeats * case_runs * throughput.CALLS_PER_RUN if provider == "anthropic" else 0
        )
        assert r["served"] == warm_up + rounds * 2 * calls + rounds * 2 * 2 * calls + case_calls, (
            provider
        )
        # issue #31: the second concurrency beside the first, CPU per call over the SDK's
        high = r["c4"]
        assert high["requests"] == high["live_calls"] == high["replay_cache_hits"] == 2 * calls
        assert (
            high["live_over_sdk"] > 0
            and high["cpu_per_call_over_sdk"] > 0
            and r["cpu_per_call_over_sdk"] > 0
        )
        assert r["cli_over_sdk"] is None and r["cli_s"] == []
        assert r["cli_cpu_over_sdk"] is None and r["cli_cpu_s"] == []
    assert data["live_over_sdk_c4"] == data["providers"]["anthropic"]["c4"]["live_over_sdk"]
    assert data["cli_over_sdk"] is None and "not measured (--cli-rounds 0)" in printed
    a = data["providers"]["anthropic"]
    assert (data["live_over_sdk"], data["replay_over_live"], data["live_s"]) == (
        a["live_over_sdk"],
        a["replay_over_live"],
        a["live_s"],
    )
    header = next(line for line in printed.splitlines() if line.startswith("side by side"))
    assert "anthropic (Messages API)" in header and "openai (Chat Completions)" in header

    # issue #31: the second workload, three tool round trips a run (four model calls)
    tools3_calls = throughput.calls_per_run("tools3")
    assert tools3_calls == 4
    for provider, r in data["tools3"].items():
        assert r["requests"] == r["live_calls"] == r["replay_cache_hits"] == 2 * tools3_calls, (
            provider
        )
        assert r["c4"]["requests"] == r["c4"]["live_calls"] == 4 * tools3_calls
        assert r["served"] == 8 * tools3_calls + rounds * 2 * (2 + 4) * tools3_calls, provider
    t3 = data["tools3"]["anthropic"]
    assert data["tools3_live_over_sdk_c2"] == t3["live_over_sdk"] > 0
    assert data["tools3_live_over_sdk_c4"] == t3["c4"]["live_over_sdk"] > 0
    assert data["tools3_cpu_per_call_over_sdk"] == t3["cpu_per_call_over_sdk"] > 0
    assert data["tools3_cli_over_sdk"] is None


def test_one_provider_leaves_out_the_top_level_keys_of_the_other(
    throughput: ModuleType, tmp_path: Path
) -> None:
    out = tmp_path / "throughput.json"
    argv = [
        "--runs",
        "2",
        "--rounds",
        "1",
        "--repeats",
        "1",
        "--case-runs",
        "2",
        "--overhead-runs",
        "5",
        "--own-cost-runs",
        "5",
        "--latency",
        "0.001",
        "--concurrency",
        "2",
        "--providers",
        "openai",
        "--high-runs",
        "2",
        "--cli-rounds",
        "1",
        "--tools3-runs",
        "0",
        "--json",
        str(out),
    ]
    assert throughput.main(argv) == 0
    data = json.loads(out.read_text())
    # agentprop run and the SDK alone, each a process of its own, against the same server
    openai = data["providers"]["openai"]
    assert (
        len(openai["cli_s"]) == len(openai["cli_sdk_alone_s"]) == 1 and openai["cli_over_sdk"] > 0
    )
    # ... and each process's CPU time (the kernel's accounting of the waited-for child)
    assert len(openai["cli_cpu_s"]) == len(openai["cli_sdk_alone_cpu_s"]) == 1
    assert openai["cli_cpu_s"][0] > 0 and openai["cli_sdk_alone_cpu_s"][0] > 0
    assert openai["cli_cpu_over_sdk"] > 0
    assert list(data["providers"]) == ["openai"] and data["case_provider"] == "openai"
    assert "live_over_sdk" not in data and "replay_over_live" not in data  # they are Anthropic's
    assert data["providers"]["openai"]["replay_live_calls"] == 0
    assert data["tools3"] is None  # --tools3-runs 0: not measured


def test_zero_rounds_is_a_usage_error(
    throughput: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        throughput.main(["--rounds", "0"])
    assert exit_info.value.code == 2
    assert "--rounds 0: give at least 1" in capsys.readouterr().err


def test_an_unknown_provider_is_a_usage_error(
    throughput: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        throughput.main(["--providers", "anthropic,gemini"])
    assert exit_info.value.code == 2
    assert "unknown gemini" in capsys.readouterr().err


def test_the_cli_rounds_run_both_sides_from_a_warmed_bytecode_cache(
    throughput: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a checkout's agentprop compiled from source in every process (PYTHONDONTWRITEBYTECODE)
    # against an SDK read from its .pyc files billed agentprop run for compiling itself
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    calls: list[tuple[str, dict[str, str]]] = []

    def fake(command: list[str], env: dict[str, str], what: str) -> tuple[float, float]:
        calls.append((what, env))
        return 1.0 + len(calls), 0.5 + len(calls)

    monkeypatch.setattr(throughput, "_timed_process", fake)
    out = throughput.cli_rounds("openai", "http://127.0.0.1:9/v1", [[{}]], 4, 2, tmp_path)
    # one untimed warm-up round, then the timed ones
    assert [w for w, _ in calls].count("agentprop run") == 3 == len(calls) // 2
    assert len(out["cli"]) == len(out["sdk"]) == 2 and 2.0 not in out["cli"] + out["sdk"]
    # each process's CPU time beside its wall time, from the same (timed) rounds
    assert [w - c for w, c in zip(out["cli"] + out["sdk"], out["cli_cpu"] + out["sdk_cpu"])] == [
        0.5
    ] * 4
    for _, env in calls:
        assert "PYTHONDONTWRITEBYTECODE" not in env
        assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "pycache")
    assert throughput.cli_rounds("openai", "x", [[{}]], 4, 0, tmp_path) == {
        "cli": [],
        "sdk": [],
        "cli_cpu": [],
        "sdk_cpu": [],
    }
