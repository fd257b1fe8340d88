"""agentprop: property-based, statistically decided tests for tool-using LLM agents."""

from __future__ import annotations

__version__ = "0.1.0"
