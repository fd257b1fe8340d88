"""benchmarks/budget.py: the faults it runs, and a table that says which targets were met."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def budget() -> ModuleType:
    spec = importlib.util.spec_from_file_location("budget_benchmark", ROOT / "benchmarks" / "budget.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["budget_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_the_quick_run_takes_one_fault_per_example_and_full_takes_the_zoo(budget: ModuleType) -> None:
    quick = budget.chosen_faults(False)
    assert sorted(f.example for f in quick) == sorted(budget.EXAMPLES)
    assert budget.chosen_faults(True) == list(budget.ZOO)


def summary(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "faults": 3,
        "full": False,
        "found_rate_at_1x": 1.0,
        "found_rate_at_3x": 1.0,
        "found_rate_at_10x": 1.0,
        "found_rate_unlimited": 1.0,
        "found_rate_one_run_per_case": 1.0,
        "default_runs_per_case": 2.6,
        "default_runs_per_case_by_example": {"supportops": 2.6},
        "false_alarms": 0,
        "runs_one_run_per_case": 100,
        "runs_unlimited": 80,
        "entries": [],
    }
    return {**base, **over}


def test_the_table_says_which_target_is_not_met(budget: ModuleType) -> None:
    assert "NOT MET" not in budget.render(summary())
    text = budget.render(summary(found_rate_at_1x=0.5, default_runs_per_case=3.5))
    assert "found at 1x >= one run per case: NOT MET" in text and "default runs per case <= 3: NOT MET" in text
    assert "found at 3x >= 0.9 of unlimited: met" in text
    # a baseline that found nothing gives no ratio, and says why
    assert "not measured (baseline found nothing)" in budget.render(summary(found_rate_one_run_per_case=0.0))
