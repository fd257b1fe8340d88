"""agentprop: property-based, statistically decided tests for tool-using LLM agents.

The top level holds what a first test uses (``check``, ``settings``, ``Case``, ``Trace``, the
agent protocol, the main errors); everything else lives in a documented sub-module:
:mod:`agentprop.strategies`, :mod:`agentprop.contracts`, :mod:`agentprop.errors`,
:mod:`agentprop.agents`, :mod:`agentprop.spec`, :mod:`agentprop.scenarios`,
:mod:`agentprop.oracle`, :mod:`agentprop.snapshots`, :mod:`agentprop.judges`,
:mod:`agentprop.phrases`, :mod:`agentprop.tdad`, :mod:`agentprop.modelapi`,
:mod:`agentprop.testing`. ``agentprop._*`` is internal. Names are loaded on first use
(PEP 562), so ``import agentprop`` stays cheap. A name that used to live here still resolves,
with a :class:`DeprecationWarning` naming its new import path.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from agentprop._version import __version__
from agentprop.errors import (
    AgentPropError,
    AgentPropertyViolation,
    InputError,
    InvalidArgument,
    ToolError,
)

_LAZY: dict[str, tuple[str, ...]] = {
    "agentprop._agents.loading": ("LoadedAgent", "load_agent"),
    "agentprop._agents.project": ("Project", "load_project"),
    "agentprop._agents.runtime": ("AgentFactory", "TurnContext"),
    "agentprop._scenario.trace": ("ToolCall", "Trace"),
    "agentprop._decide.check": ("acheck", "check"),
    "agentprop._decide.plain": ("Case", "Result", "Tools"),
    "agentprop._decide.settings": ("settings",),
    "agentprop._judge.verdict": ("Verdict",),
    "agentprop._decide.metamorphic": ("check_direction", "check_invariance"),
    "agentprop._decide.snapshot_check": ("check_snapshot",),
}
"""Where each lazily loaded top-level name is defined."""

_WHERE = {name: module for module, names in _LAZY.items() for name in names}
"""Name -> module (``__all__`` below lists them too; a test checks the two agree)."""

_MOVED: dict[str, tuple[str, ...]] = {
    "agentprop.agents": (
        "AnthropicAgent",
        "AnthropicConversation",
        "OpenAIAgent",
        "arun_conversation",
        "make_factory",
        "run_conversation",
    ),
    "agentprop.spec": (
        "Bindings",
        "LintFinding",
        "Spec",
        "TreePath",
        "WhenClause",
        "enumerate_loop_paths",
        "enumerate_paths",
        "evaluate",
        "lint_spec",
        "load_bindings",
        "load_spec",
        "parse_when",
        "response_model",
    ),
    "agentprop.scenarios": (
        "Failure",
        "RunError",
        "Scenario",
        "ScenarioTurn",
        "Turn",
        "Usage",
        "World",
        "build_scenario",
        "leaf_scenarios",
        "make_world",
        "solve",
    ),
    "agentprop.oracle": (
        "CheckResult",
        "Corpus",
        "CorpusEntry",
        "DirectionResult",
        "InvarianceResult",
        "OracleSettings",
        "Session",
        "ShrinkReport",
        "TrialMemo",
        "TrialRecord",
        "adecide",
        "decide",
        "settings_scope",
        "shrink",
    ),
    "agentprop.snapshots": (
        "Behaviour",
        "Snapshot",
        "SnapshotResult",
        "SnapshotStore",
        "acheck_snapshot",
        "behaviour_of",
    ),
    "agentprop.judges": (
        "Calibration",
        "CalibrationStore",
        "CodeJudge",
        "ModelJudge",
        "Rubric",
        "calibrate",
        "code_judge",
    ),
    "agentprop.tdad": (
        "CompileResult",
        "MutationPack",
        "MutationReport",
        "SursResult",
        "TdadMetrics",
        "compile_prompt",
        "load_mutation_pack",
        "mutation_test",
        "split_suite",
        "surs",
        "tdad_metrics",
    ),
    "agentprop.modelapi": ("ApiCache", "Budget", "CacheMode", "ModelPrice"),
    "agentprop.errors": (
        "AgentPropWarning",
        "AgentRunError",
        "ApiUnavailable",
        "BindingsError",
        "BudgetExhausted",
        "CacheError",
        "CacheMiss",
        "InfrastructureError",
        "MemoFileError",
        "MissingApiKey",
        "MissingDependency",
        "ModelCallError",
        "ParaphrasePoolError",
        "SpecError",
        "UnpricedModel",
        "Unsatisfiable",
    ),
}
"""Names that left the top level -> the public module that holds them now (deprecated here).
The contracts left too: every name of :mod:`agentprop.contracts` (its ``__all__`` is their one
list) but ``Verdict`` (see :func:`_moved_to`)."""

_MOVED_TO = {name: module for module, names in _MOVED.items() for name in names}

_SUBMODULES = frozenset(
    (
        "adapters",
        "agents",
        "contracts",
        "errors",
        "judges",
        "modelapi",
        "oracle",
        "phrases",
        "pytest_plugin",
        "scenarios",
        "snapshots",
        "spec",
        "strategies",
        "tdad",
        "testing",
    )
)
"""The public sub-modules: ``agentprop.spec.load_spec(...)`` works after ``import agentprop`` alone
(each is imported on first use, so ``import agentprop`` stays cheap)."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"agentprop.{name}")  # the import system sets the attribute
    new = _moved_to(name)
    if new is not None:
        warnings.warn(
            f"agentprop.{name} is deprecated: import it from {new} instead (from "
            f"{new} import {name})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), name)  # not cached: every use warns
    raise AttributeError(f"module 'agentprop' has no attribute {name!r}")


def _moved_to(name: str) -> str | None:
    """The public module that now holds ``name``, a name that left the top level, or ``None``."""
    new = _MOVED_TO.get(name)
    if (
        new is None
        and not name.startswith("_")
        and name in importlib.import_module("agentprop.contracts").__all__
    ):
        new = "agentprop.contracts"
    return new


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


def agent_settings(profile: str | None = None, **overrides: Any) -> hypothesis.settings:
    """Hypothesis settings for tests that run an agent (see :mod:`agentprop.pytest_plugin`):
    use it as a decorator, like :class:`hypothesis.settings`."""
    from agentprop.pytest_plugin import agent_settings as _impl

    return _impl(profile, **overrides)


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    import hypothesis

    from agentprop._agents.loading import LoadedAgent, load_agent
    from agentprop._agents.project import Project, load_project
    from agentprop._agents.runtime import AgentFactory, TurnContext
    from agentprop._decide.check import acheck, check
    from agentprop._decide.metamorphic import check_direction, check_invariance
    from agentprop._decide.plain import Case, Result, Tools
    from agentprop._decide.settings import settings
    from agentprop._decide.snapshot_check import check_snapshot
    from agentprop._judge.verdict import Verdict
    from agentprop._scenario.trace import ToolCall, Trace

__all__ = [
    "AgentFactory",
    "AgentPropError",
    "AgentPropertyViolation",
    "Case",
    "InputError",
    "InvalidArgument",
    "LoadedAgent",
    "Project",
    "Result",
    "ToolCall",
    "ToolError",
    "Tools",
    "Trace",
    "TurnContext",
    "Verdict",
    "__version__",
    "acheck",
    "agent_settings",
    "check",
    "check_direction",
    "check_invariance",
    "check_snapshot",
    "load_agent",
    "load_project",
    "settings",
]
