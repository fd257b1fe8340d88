"""Scenarios, worlds and traces: what one trial runs and what it records.

A :class:`Scenario` is a path of the spec made concrete (:func:`build_scenario`,
:func:`leaf_scenarios`, :func:`solve`); a :class:`World` answers the agent's tool calls for it
(:func:`make_world`; a :class:`Failure` injects a declared failure mode). A run is recorded as
a :class:`Trace` of :class:`Turn` s, :class:`ToolCall` s, :class:`RunError` s and
:class:`Usage`. :class:`DrawnScenario` and :class:`PathWorld` are what
:func:`agentprop.strategies.conversations` and :func:`agentprop.strategies.worlds` draw.
"""

from agentprop._scenario.build import (
    Scenario,
    ScenarioTurn,
    build_scenario,
    leaf_scenarios,
    make_world,
)
from agentprop._scenario.solver import solve
from agentprop._scenario.trace import RunError, ToolCall, Trace, Turn, Usage
from agentprop._scenario.world import Failure, World
from agentprop.strategies._internal.scenarios import (
    ConversationProvenance,
    DrawnScenario,
    PathWorld,
    Skipped,
)

__all__ = [
    "ConversationProvenance",
    "DrawnScenario",
    "Failure",
    "PathWorld",
    "RunError",
    "Scenario",
    "ScenarioTurn",
    "Skipped",
    "ToolCall",
    "Trace",
    "Turn",
    "Usage",
    "World",
    "build_scenario",
    "leaf_scenarios",
    "make_world",
    "solve",
]
