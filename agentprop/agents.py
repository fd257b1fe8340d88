"""Agents: the protocol agentprop drives, loading an agent, and the model-backed agents.

An agent is a class whose ``turn(message, ctx)`` answers one user message through
:class:`TurnContext` (``ctx.call_tool``, ``ctx.respond``); :class:`AgentFactory` makes one per
trial. :func:`load_agent` resolves ``module:Class`` the way ``agentprop run --agent`` does.
:class:`AnthropicAgent` and :class:`OpenAIAgent` run a prompt against a real model API, configured
by keyword arguments or one :class:`ModelOptions`.
"""

from agentprop._agents.anthropic import AnthropicAgent, AnthropicConversation
from agentprop._agents.loading import LoadedAgent, load_agent, make_factory
from agentprop._agents.openai import OpenAIAgent
from agentprop._agents.runtime import AgentFactory, TurnContext, arun_conversation, run_conversation
from agentprop._modelapi.options import ModelOptions

__all__ = [
    "AgentFactory",
    "AnthropicAgent",
    "AnthropicConversation",
    "LoadedAgent",
    "ModelOptions",
    "OpenAIAgent",
    "TurnContext",
    "arun_conversation",
    "load_agent",
    "make_factory",
    "run_conversation",
]
