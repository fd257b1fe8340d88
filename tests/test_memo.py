"""The trial memo stores runs, not verdicts: properties are judged on every lookup.

An agent run is the expensive, noisy part of a check; a property over its trace is cheap and
deterministic. The memo keeps each run (its trace) under what determined it -- the spec as the
agent sees it, the scenario's world and messages, the context, the trial index and the agent --
and never under the property, so editing a property or the spec's expectations re-judges the
stored runs instead of replaying stale verdicts.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentprop
from agentprop import TrialMemo, check, make_factory
from agentprop._trace import Trace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402

PROJECT = agentprop.load_project(EXAMPLE)
CANCEL = "END_CANCELLED<-N7_CANCEL"

STARTED: list[str] = []
"""One entry per conversation the counting agent started (its factory is called once per run)."""


class CountingAgent(SupportOpsAgent):
    """The clean reference agent, counting its runs."""

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        super().__init__(faults)
        STARTED.append("run")


def _agent_runs(action: Callable[[], Any]) -> tuple[Any, int]:
    before = len(STARTED)
    out = action()
    return out, len(STARTED) - before


def _property(result: bool) -> Callable[[Trace], bool]:
    """A property that always returns ``result``. Both versions have the same module and
    qualified name, as a property edited between two test sessions does."""

    def prop(trace: Trace) -> bool:
        return result

    return prop


def test_an_edited_property_is_judged_afresh_on_the_stored_runs(tmp_path: Path) -> None:
    path = tmp_path / "trials.sqlite"
    agent = make_factory(CountingAgent)
    always_fail, always_pass = _property(False), _property(True)
    assert always_fail.__qualname__ == always_pass.__qualname__ and always_fail.__code__ is always_pass.__code__

    first, ran = _agent_runs(lambda: check(PROJECT, CANCEL, agent, prop=always_fail, mode="fixed", runs=5, memo=TrialMemo(path), raise_on_failure=False))
    assert first.verdict == "FAIL" and ran == 5 and first.memo_hits == 0

    # the property is edited to always pass; a new session opens the same memo file
    second, ran = _agent_runs(lambda: check(PROJECT, CANCEL, agent, prop=always_pass, mode="fixed", runs=5, memo=TrialMemo(path), raise_on_failure=False))
    assert second.verdict == "PASS" and second.passes == 5
    assert ran == 0 and second.memo_hits == 5  # the stored runs were judged again, not re-run
