"""Agents and running them: the runtime that records a trace, loading agents named
``MODULE:ATTR``, the project (spec + bindings), compiled prompts and the model-backed agents."""
