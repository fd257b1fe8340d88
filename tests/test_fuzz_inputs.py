"""Fuzzing the loaders: Hypothesis mutates the bundled specs, bindings and phrase packs.

Text-level edits (control characters, YAML indicators, re-indented or dropped lines, appended
billion laughs, deep nesting, 5,000-digit integers, 120 KB values) and parsed-tree edits (a value
replaced by null, a huge number, ``.inf``, a path-like or brace-holding string, a deep list, a
value from elsewhere in the file; keys deleted, duplicated, renamed) from
``benchmarks/_robustness/inputs.py``. Whatever comes out: no traceback, no hang, and either a
clear error (exit 2, ``FILE:LINE:COL`` and a fix, a short message) or a file that loads. A
small, derandomised number of examples keeps this to seconds in CI;
``benchmarks/robustness.py`` runs 1,500 (every tenth also through ``agentprop run``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_input import deadline

from benchmarks._robustness.inputs import SPEC_BASES, HostileInput, base_text, hostile_inputs, judge

FUZZ = settings(
    max_examples=10,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


def _check(item: HostileInput, workdir: Path) -> None:
    with deadline(30):
        outcome = judge(item, workdir, run=False)
    assert outcome.verdict in ("clear_error", "accepted"), (
        f"{outcome.verdict} for {item.kind} {item.base} ({item.how}):\n{outcome.detail}"
    )


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


ISSUE_27 = (
    '"\\ud83d"',
    '"\\udc80\\ud83d"',
    '"\\0"',
    '"\\e[2J"',
    '"\\e]0;owned\\a"',
    "0x" + "F" * 5000,
    "0x" + "F" * 3700,
    ":".join(["1"] + ["59"] * 3000),
    '"{nope}"',
    '"[a [b] c]"',
)
"""Issue #27's hostile pieces: lone surrogates, NUL and escape sequences as YAML escapes, integers
past the digit limit in hex and sexagesimal, a template with an undefined slot or nested parts."""


@settings(FUZZ, max_examples=20)
@given(
    kind=st.sampled_from(["spec", "bindings"]),
    base=st.sampled_from(SPEC_BASES),
    piece=st.sampled_from(ISSUE_27),
    at=st.integers(min_value=0, max_value=10**6),
)
def test_issue_27_pieces_anywhere_are_clear_errors_or_load(
    workdir: Path, kind: str, base: str, piece: str, at: int
) -> None:
    text = base_text(kind, base)
    lines = text.splitlines(keepends=True)
    i = at % len(lines)
    line = lines[i]
    colon = line.find(": ")
    # the piece as a value (after a key's colon) where the line has one, else as a line of its own
    lines[i] = line[: colon + 2] + piece + "\n" if colon >= 0 else line + piece + "\n"
    _check(
        HostileInput(kind, base, "".join(lines), f"line {i + 1} value -> {piece[:20]!r}"), workdir
    )
