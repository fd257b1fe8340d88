"""agentprop: property-based, statistically decided tests for tool-using LLM agents.

The public API lives here; everything under ``agentprop._*`` is internal.
"""

from __future__ import annotations

from agentprop._agents import LoadedAgent, load_agent, make_factory
from agentprop._anthropic_agent import AnthropicAgent, AnthropicConversation
from agentprop._modelapi.client import MissingApiKey, ModelCallError
from agentprop._openai_agent import OpenAIAgent
from agentprop._bindings import Bindings, load_bindings
from agentprop._modelapi.cache import ApiCache, CacheMiss, CacheMode
from agentprop._conversation_shrink import ShrinkReport, shrink
from agentprop._corpus import Corpus, CorpusEntry
from agentprop._modelapi.budget import Budget, BudgetExhausted, ModelPrice, UnpricedModel
from agentprop._check import acheck, check, settings_scope
from agentprop._contracts import (
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
from agentprop._memo import TrialMemo
from agentprop._mutation import MutationPack, MutationReport, load_mutation_pack, mutation_test
from agentprop._metamorphic import DirectionResult, InvarianceResult, check_direction, check_invariance
from agentprop._oracle import AgentPropertyViolation, CheckResult, OracleSettings, TrialRecord, adecide, decide
from agentprop._paths import TreePath, enumerate_loop_paths, enumerate_paths
from agentprop._project import Project, load_project
from agentprop._promptsmith import CompileResult, compile_prompt
from agentprop._properties import mft_verdicts
from agentprop._response import response_model
from agentprop._runtime import AgentFactory, TurnContext, arun_conversation, run_conversation
from agentprop._scenario import Scenario, ScenarioTurn, Unsatisfiable, build_scenario, leaf_scenarios, make_world, solve
from agentprop._snapshot import (
    Behaviour,
    Snapshot,
    SnapshotResult,
    SnapshotStore,
    acheck_snapshot,
    behaviour_of,
    check_snapshot,
)
from agentprop._spec.lint import LintFinding
from agentprop._spec.load import lint_spec, load_spec
from agentprop._spec.model import Spec
from agentprop._spec.when import WhenClause, evaluate, parse_when
from agentprop._surs import SursResult, surs
from agentprop._tdad import TdadMetrics, split_suite, tdad_metrics
from agentprop._trace import RunError, ToolCall, Trace, Turn, Usage
from agentprop._world import Failure, World
from agentprop.errors import (
    AgentPropError,
    AgentPropWarning,
    BindingsError,
    InputError,
    InvalidArgument,
    MemoFileError,
    SpecError,
    ToolError,
)

from agentprop._version import __version__


def agent_settings(profile: str | None = None, **overrides: object) -> object:
    """Hypothesis settings for tests that run an agent (see :mod:`agentprop.pytest_plugin`)."""
    from agentprop.pytest_plugin import agent_settings as _impl

    return _impl(profile, **overrides)


__all__ = [
    "AgentPropertyViolation", "Budget", "BudgetExhausted", "CheckResult", "LoadedAgent",
    "OracleSettings", "TrialMemo", "TrialRecord", "acheck", "adecide", "agent_settings", "check", "decide",
    "load_agent", "make_factory", "settings_scope", "check_invariance", "check_direction",
    "InvarianceResult", "DirectionResult", "AnthropicAgent", "AnthropicConversation", "OpenAIAgent",
    "MissingApiKey", "ModelCallError", "ModelPrice", "UnpricedModel", "ApiCache", "CacheMiss", "CacheMode", "ShrinkReport",
    "shrink", "Corpus", "CorpusEntry", "Behaviour", "Snapshot", "SnapshotResult", "SnapshotStore",
    "acheck_snapshot", "behaviour_of", "check_snapshot", "MutationPack", "MutationReport",
    "load_mutation_pack", "mutation_test", "TdadMetrics", "split_suite", "tdad_metrics",
    "CompileResult", "compile_prompt", "SursResult", "surs",
    "AgentFactory", "AgentPropError", "AgentPropWarning", "Bindings", "BindingsError", "Failure", "InputError",
    "InvalidArgument", "LintFinding", "MemoFileError", "Project", "RunError", "Scenario", "ScenarioTurn", "Spec",
    "SpecError", "ToolCall", "ToolError", "Trace", "TreePath", "Turn", "TurnContext",
    "Unsatisfiable", "Usage", "Verdict", "WhenClause", "World", "__version__", "args_satisfy",
    "arun_conversation", "build_scenario", "calls_in_order", "decision_in_enum", "decision_is",
    "enumerate_loop_paths", "enumerate_paths", "evaluate", "forbids_tools", "leaf_scenarios", "lint_spec",
    "load_bindings", "load_project", "load_spec", "make_world", "max_tool_calls",
    "mft_verdicts", "no_canary_leak", "no_run_errors", "numbers_grounded", "parse_when",
    "requires_tools", "response_model", "response_valid", "run_conversation", "solve",
    "within_scope", "evidence_grounded", "node_id_matches", "response_grounded", "tool_actions_match",
]
