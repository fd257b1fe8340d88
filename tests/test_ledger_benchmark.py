"""benchmarks/ledger.py: the Redis ledger's cost per call beside the file ledger's, and an
exit code that shows when the Redis figure was not measured."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ledger_benchmark", ROOT / "benchmarks" / "ledger.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ledger_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_both_ledgers_are_measured_with_the_file_ledger_as_baseline(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("redis")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (.ci/run installs it)")
    assert bench.main(["--calls", "5", "--json", str(tmp_path / "l.json")]) == 0
    figures = json.loads((tmp_path / "l.json").read_text(encoding="utf-8"))
    assert figures["redis_over_file"] == pytest.approx(
        figures["redis_ledger_us_per_call"] / figures["file_ledger_us_per_call"]
    )
    assert "x the file ledger" in capsys.readouterr().out


def test_without_a_redis_server_the_figure_is_not_measured_and_the_exit_code_says_so(
    bench: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("redis")
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    assert bench.main(["--calls", "3", "--json", str(tmp_path / "l.json")]) == 3
    figures = json.loads((tmp_path / "l.json").read_text(encoding="utf-8"))
    assert figures["redis_ledger_us_per_call"] is None and figures["redis_over_file"] is None
    assert "redis ledger:             not measured: no redis-server" in capsys.readouterr().out
