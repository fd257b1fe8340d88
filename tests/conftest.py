"""Shared fixtures: where the SpecSuite-Core specs and the SupportOps example live."""

from __future__ import annotations

import contextlib
import copy
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentprop._corpus
from agentprop._bindings import Bindings, load_bindings
from agentprop._spec.load import load_spec
from agentprop._spec.model import Spec

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECSUITE_DIR = REPO_ROOT.parent / "shared" / "specsuite-core"
SUPPORTOPS_EXAMPLE_DIR = REPO_ROOT / "examples" / "supportops"


@pytest.fixture(scope="session")
def specsuite_dir() -> Path:
    """The read-only SpecSuite-Core checkout next to the repo (skips when it is absent)."""
    if not SPECSUITE_DIR.is_dir():
        pytest.skip(f"SpecSuite-Core specs not found at {SPECSUITE_DIR} (expected ../shared/specsuite-core)")
    return SPECSUITE_DIR


@pytest.fixture(scope="session")
def supportops_example_dir() -> Path:
    """``examples/supportops``: spec.yaml + agentprop.yaml bindings + agent.py."""
    return SUPPORTOPS_EXAMPLE_DIR


@pytest.fixture(scope="session")
def supportops_spec(supportops_example_dir: Path) -> Spec:
    return load_spec(supportops_example_dir / "spec.yaml")


@pytest.fixture(scope="session")
def supportops_bindings(supportops_example_dir: Path, supportops_spec: Spec) -> Bindings:
    return load_bindings(supportops_example_dir / "agentprop.yaml", supportops_spec)


REAL_DEFAULT_CORPUS_DIR = agentprop._corpus.default_corpus_dir
"""The real default (beside the bindings), for the tests of the default location itself."""


@pytest.fixture(autouse=True)
def _corpus_outside_the_repo(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default corpus sits beside the bindings, i.e. inside examples/ for the example
    projects: tests keep it in a temporary directory instead, so no test replays another's
    reproducers and the repository stays clean. Tests of the default location restore it
    with ``monkeypatch.setattr(agentprop._corpus, "default_corpus_dir", REAL_DEFAULT_CORPUS_DIR)``."""
    root = tmp_path_factory.mktemp("corpus-default")
    monkeypatch.setattr(agentprop._corpus, "default_corpus_dir", lambda project: root / project.spec.spec_id)


@contextlib.contextmanager
def isolated_agentprop_state() -> Iterator[None]:
    """Save the module-level state of every loaded ``agentprop`` module (the plugin's session
    memo, budget, corpus, recorded results, profile …) and restore it on exit, so that a pytest
    session run in this process (``pytester.runpytest_inprocess``) leaves this one's untouched.
    Containers are restored in place: other modules hold references to the same objects."""
    saved: list[tuple[types.ModuleType, str, Any, Any]] = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "agentprop" or name.startswith("agentprop.")):
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("__") or callable(value) or isinstance(value, (types.ModuleType, type)):
                continue
            saved.append((module, attr, value, copy.copy(value) if type(value) in (list, dict, set) else None))
    try:
        yield
    finally:
        for module, attr, value, contents in saved:
            if isinstance(value, list):
                value[:] = contents
            elif isinstance(value, (dict, set)):
                value.clear()
                value.update(contents)
            setattr(module, attr, value)


@pytest.fixture(autouse=True)
def _agentprop_state_put_back(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that runs pytest sessions in this process (it uses ``pytester``) gets agentprop's
    state back as it was: the plugin of an inner session replaces the session memo, budget,
    corpus and profile."""
    if "pytester" not in request.fixturenames:
        yield
        return
    with isolated_agentprop_state():
        yield
