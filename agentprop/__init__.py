"""agentprop: property-based, statistically decided tests for tool-using LLM agents.

The public API lives here; everything under ``agentprop._*`` is internal. Names are loaded on
first use (PEP 562), so ``import agentprop`` and commands such as ``agentprop lint`` do not pay
for the subsystems they do not touch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentprop._version import __version__
from agentprop.errors import (
    AgentPropError,
    AgentPropertyViolation,
    AgentPropWarning,
    AgentRunError,
    ApiUnavailable,
    BindingsError,
    BudgetExhausted,
    CacheError,
    CacheMiss,
    InfrastructureError,
    InputError,
    InvalidArgument,
    MemoFileError,
    MissingApiKey,
    MissingDependency,
    ModelCallError,
    ParaphrasePoolError,
    SpecError,
    ToolError,
    UnpricedModel,
    Unsatisfiable,
)

_LAZY: dict[str, tuple[str, ...]] = {
    "agentprop._agents.loading": ("LoadedAgent", "load_agent", "make_factory"),
    "agentprop._agents.anthropic": ("AnthropicAgent", "AnthropicConversation"),
    "agentprop._agents.openai": ("OpenAIAgent",),
    "agentprop._agents.project": ("Project", "load_project"),
    "agentprop._agents.runtime": ("AgentFactory", "TurnContext", "arun_conversation", "run_conversation"),
    "agentprop._spec.bindings": ("Bindings", "load_bindings"),
    "agentprop._spec.lint": ("LintFinding",),
    "agentprop._spec.load": ("lint_spec", "load_spec"),
    "agentprop._spec.model": ("Spec",),
    "agentprop._spec.when": ("WhenClause", "evaluate", "parse_when"),
    "agentprop._spec.paths": ("TreePath", "enumerate_loop_paths", "enumerate_paths"),
    "agentprop._spec.response": ("response_model",),
    "agentprop._modelapi.cache": ("ApiCache", "CacheMode"),
    "agentprop._modelapi.budget": ("Budget", "ModelPrice"),
    "agentprop._scenario.build": ("Scenario", "ScenarioTurn", "build_scenario", "leaf_scenarios", "make_world", "solve"),
    "agentprop._scenario.trace": ("RunError", "ToolCall", "Trace", "Turn", "Usage"),
    "agentprop._scenario.world": ("Failure", "World"),
    "agentprop._decide.check": ("acheck", "check", "settings_scope"),
    "agentprop._decide.plain": ("Case", "Result", "Tools"),
    "agentprop._decide.settings": ("settings",),
    "agentprop._decide.session": ("Session",),
    "agentprop._decide.contracts": (
        "Verdict",
        "args_satisfy",
        "calls_in_order",
        "decision_in_enum",
        "decision_is",
        "evidence_grounded",
        "forbids_tools",
        "max_tool_calls",
        "no_canary_leak",
        "no_run_errors",
        "node_id_matches",
        "numbers_grounded",
        "requires_tools",
        "response_grounded",
        "response_valid",
        "tool_actions_match",
        "within_scope",
    ),
    "agentprop._decide.shrink": ("ShrinkReport", "shrink"),
    "agentprop._decide.corpus": ("Corpus", "CorpusEntry"),
    "agentprop._decide.memo": ("TrialMemo",),
    "agentprop._decide.judges": ("Calibration", "CalibrationStore", "CodeJudge", "ModelJudge", "Rubric", "calibrate", "code_judge"),
    "agentprop._decide.metamorphic": ("DirectionResult", "InvarianceResult", "check_direction", "check_invariance"),
    "agentprop._decide.oracle": ("CheckResult", "OracleSettings", "TrialRecord", "adecide", "decide"),
    "agentprop._decide.properties": ("mft_verdicts", "probe_verdicts"),
    "agentprop._decide.snapshot": (
        "Behaviour",
        "Snapshot",
        "SnapshotResult",
        "SnapshotStore",
        "acheck_snapshot",
        "behaviour_of",
        "check_snapshot",
    ),
    "agentprop._pipeline.mutation": ("MutationPack", "MutationReport", "load_mutation_pack", "mutation_test"),
    "agentprop._pipeline.promptsmith": ("CompileResult", "compile_prompt"),
    "agentprop._pipeline.surs": ("SursResult", "surs"),
    "agentprop._pipeline.tdad": ("TdadMetrics", "split_suite", "tdad_metrics"),
}
"""Where each lazily loaded public name is defined."""

_WHERE = {name: module for module, names in _LAZY.items() for name in names}
"""Name -> module (``__all__`` below lists them too; a test checks the two agree)."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'agentprop' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


def agent_settings(profile: str | None = None, **overrides: Any) -> hypothesis.settings:
    """Hypothesis settings for tests that run an agent (see :mod:`agentprop.pytest_plugin`):
    use it as a decorator, like :class:`hypothesis.settings`."""
    from agentprop.pytest_plugin import agent_settings as _impl

    return _impl(profile, **overrides)


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    import hypothesis

    from agentprop._agents.anthropic import AnthropicAgent, AnthropicConversation
    from agentprop._agents.loading import LoadedAgent, load_agent, make_factory
    from agentprop._agents.openai import OpenAIAgent
    from agentprop._agents.project import Project, load_project
    from agentprop._agents.runtime import AgentFactory, TurnContext, arun_conversation, run_conversation
    from agentprop._decide.check import acheck, check, settings_scope
    from agentprop._decide.contracts import (
        Verdict,
        args_satisfy,
        calls_in_order,
        decision_in_enum,
        decision_is,
        evidence_grounded,
        forbids_tools,
        max_tool_calls,
        no_canary_leak,
        no_run_errors,
        node_id_matches,
        numbers_grounded,
        requires_tools,
        response_grounded,
        response_valid,
        tool_actions_match,
        within_scope,
    )
    from agentprop._decide.corpus import Corpus, CorpusEntry
    from agentprop._decide.judges import Calibration, CalibrationStore, CodeJudge, ModelJudge, Rubric, calibrate, code_judge
    from agentprop._decide.memo import TrialMemo
    from agentprop._decide.metamorphic import DirectionResult, InvarianceResult, check_direction, check_invariance
    from agentprop._decide.oracle import CheckResult, OracleSettings, TrialRecord, adecide, decide
    from agentprop._decide.plain import Case, Result, Tools
    from agentprop._decide.properties import mft_verdicts, probe_verdicts
    from agentprop._decide.session import Session
    from agentprop._decide.settings import settings
    from agentprop._decide.shrink import ShrinkReport, shrink
    from agentprop._decide.snapshot import (
        Behaviour,
        Snapshot,
        SnapshotResult,
        SnapshotStore,
        acheck_snapshot,
        behaviour_of,
        check_snapshot,
    )
    from agentprop._modelapi.budget import Budget, ModelPrice
    from agentprop._modelapi.cache import ApiCache, CacheMode
    from agentprop._pipeline.mutation import MutationPack, MutationReport, load_mutation_pack, mutation_test
    from agentprop._pipeline.promptsmith import CompileResult, compile_prompt
    from agentprop._pipeline.surs import SursResult, surs
    from agentprop._pipeline.tdad import TdadMetrics, split_suite, tdad_metrics
    from agentprop._scenario.build import Scenario, ScenarioTurn, build_scenario, leaf_scenarios, make_world
    from agentprop._scenario.solver import solve
    from agentprop._scenario.trace import RunError, ToolCall, Trace, Turn, Usage
    from agentprop._scenario.world import Failure, World
    from agentprop._spec.bindings import Bindings, load_bindings
    from agentprop._spec.lint import LintFinding
    from agentprop._spec.load import lint_spec, load_spec
    from agentprop._spec.model import Spec
    from agentprop._spec.paths import TreePath, enumerate_loop_paths, enumerate_paths
    from agentprop._spec.response import response_model
    from agentprop._spec.when import WhenClause, evaluate, parse_when

__all__ = [
    "AgentFactory",
    "AgentPropError",
    "AgentPropWarning",
    "AgentPropertyViolation",
    "AgentRunError",
    "AnthropicAgent",
    "AnthropicConversation",
    "ApiCache",
    "ApiUnavailable",
    "Behaviour",
    "Bindings",
    "BindingsError",
    "Budget",
    "BudgetExhausted",
    "Case",
    "CacheError",
    "CacheMiss",
    "CacheMode",
    "Calibration",
    "CalibrationStore",
    "CheckResult",
    "CodeJudge",
    "CompileResult",
    "Corpus",
    "CorpusEntry",
    "DirectionResult",
    "Failure",
    "InfrastructureError",
    "InputError",
    "InvalidArgument",
    "InvarianceResult",
    "LintFinding",
    "LoadedAgent",
    "MemoFileError",
    "MissingApiKey",
    "MissingDependency",
    "ModelCallError",
    "ModelJudge",
    "ModelPrice",
    "MutationPack",
    "MutationReport",
    "OpenAIAgent",
    "OracleSettings",
    "ParaphrasePoolError",
    "Project",
    "Result",
    "Rubric",
    "RunError",
    "Scenario",
    "ScenarioTurn",
    "Session",
    "ShrinkReport",
    "Snapshot",
    "SnapshotResult",
    "SnapshotStore",
    "Spec",
    "SpecError",
    "SursResult",
    "TdadMetrics",
    "ToolCall",
    "ToolError",
    "Tools",
    "Trace",
    "TreePath",
    "TrialMemo",
    "TrialRecord",
    "Turn",
    "TurnContext",
    "UnpricedModel",
    "Unsatisfiable",
    "Usage",
    "Verdict",
    "WhenClause",
    "World",
    "__version__",
    "acheck",
    "acheck_snapshot",
    "adecide",
    "agent_settings",
    "args_satisfy",
    "arun_conversation",
    "behaviour_of",
    "build_scenario",
    "calibrate",
    "calls_in_order",
    "check",
    "check_direction",
    "check_invariance",
    "check_snapshot",
    "code_judge",
    "compile_prompt",
    "decide",
    "decision_in_enum",
    "decision_is",
    "enumerate_loop_paths",
    "enumerate_paths",
    "evaluate",
    "evidence_grounded",
    "forbids_tools",
    "leaf_scenarios",
    "lint_spec",
    "load_agent",
    "load_bindings",
    "load_mutation_pack",
    "load_project",
    "load_spec",
    "make_factory",
    "make_world",
    "max_tool_calls",
    "mft_verdicts",
    "mutation_test",
    "no_canary_leak",
    "no_run_errors",
    "node_id_matches",
    "numbers_grounded",
    "parse_when",
    "probe_verdicts",
    "requires_tools",
    "response_grounded",
    "response_model",
    "response_valid",
    "run_conversation",
    "settings",
    "settings_scope",
    "shrink",
    "solve",
    "split_suite",
    "surs",
    "tdad_metrics",
    "tool_actions_match",
    "within_scope",
]
