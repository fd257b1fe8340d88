"""agentprop's framework extras install together: one environment satisfies all of them.

Issue #28: langchain-mcp-adapters requires ``mcp<2`` while agentprop's ``mcp`` extra once
required ``mcp>=2.3``, so pip installed an SDK agentprop refused. Here every requirement of the
extras a framework user combines (``mcp``, ``langchain-mcp``, ``langgraph``, ``openai-agents``,
``pydantic-ai``, ``openai``, ``anthropic``) is checked against the installed distributions,
and so are the frameworks' own requirements (what ``pip check`` reports for them): the
project's test environment installs them all (``agentprop[test]``), so a pin that rules
another out fails here, naming both.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = [
    "mcp",
    "langchain-mcp",
    "langgraph",
    "openai-agents",
    "pydantic-ai",
    "openai",
    "anthropic",
]
FRAMEWORKS = ["langchain-mcp-adapters", "langgraph", "openai-agents", "pydantic-ai-slim", "mcp"]


def _installed(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _extras() -> dict[str, list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    return {name: [Requirement(r) for r in extras[name]] for name in EXTRAS}


def test_every_framework_extra_is_satisfied_by_one_environment() -> None:
    missing = [r.name for reqs in _extras().values() for r in reqs if _installed(r.name) is None]
    if missing:
        pytest.skip(
            f"not installed: {', '.join(sorted(set(missing)))} (pip install 'agentprop[test]')"
        )
    conflicts = [
        f"agentprop[{extra}] requires {r}, the environment has {r.name} {_installed(r.name)}"
        for extra, reqs in _extras().items()
        for r in reqs
        if not r.specifier.contains(str(_installed(r.name)), prereleases=True)
    ]
    assert conflicts == []


def test_the_frameworks_own_requirements_hold_beside_agentprops() -> None:
    if any(_installed(name) is None for name in FRAMEWORKS):
        pytest.skip("the frameworks are not all installed (pip install 'agentprop[test]')")
    conflicts = []
    for framework in FRAMEWORKS:
        for text in requires(framework) or []:
            r = Requirement(text)
            if r.marker is not None and not r.marker.evaluate({"extra": ""}):
                continue  # an optional part of the framework
            have = _installed(r.name)
            if have is not None and not r.specifier.contains(have, prereleases=True):
                conflicts.append(f"{framework} requires {r}, the environment has {have}")
    assert conflicts == []
