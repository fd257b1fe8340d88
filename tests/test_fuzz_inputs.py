"""Fuzzing the loaders: Hypothesis mutates the bundled specs, bindings and phrase packs.

Text-level edits (control characters, YAML indicators, re-indented or dropped lines, appended
billion laughs, deep nesting, 5,000-digit integers, 120 KB values) and parsed-tree edits (a value
replaced by null, a huge number, ``.inf``, a path-like or brace-holding string, a deep list, a
value from elsewhere in the file; keys deleted, duplicated, renamed) from
``benchmarks/_robustness/inputs.py``. Whatever comes out: no traceback, no hang, and either a
clear error (exit 2, ``FILE:LINE:COL`` and a fix, a short message) or a file that loads. A
small, derandomised number of examples keeps this to seconds in CI;
``benchmarks/robustness.py`` runs hundreds (each also through ``agentprop run``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from test_hostile_input import deadline

from benchmarks._robustness.inputs import HostileInput, hostile_inputs, judge

FUZZ = settings(
    max_examples=10,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


def _check(item: HostileInput, workdir: Path) -> None:
    with deadline(30):
        outcome = judge(item, workdir, run=False)
    assert outcome.verdict in ("clear_error", "accepted"), f"{outcome.verdict} for {item.kind} {item.base} ({item.how}):\n{outcome.detail}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(item=hostile_inputs(kinds=("spec",)))
def test_mutated_specs_are_clear_errors_or_load(workdir: Path, item: HostileInput) -> None:
    _check(item, workdir)


@FUZZ
@given(item=hostile_inputs(kinds=("bindings",)))
def test_mutated_bindings_are_clear_errors_or_load(workdir: Path, item: HostileInput) -> None:
    _check(item, workdir)


@settings(FUZZ, max_examples=25)
@given(item=hostile_inputs(kinds=("pack",)))
def test_mutated_phrase_packs_are_clear_errors_or_load(workdir: Path, item: HostileInput) -> None:
    _check(item, workdir)
