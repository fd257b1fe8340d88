"""The pytest side of shrinking: when a test fails with :class:`AgentPropertyViolation`, shrink
the failing conversation and attach the reproducer to the report (``--agentprop-shrink-budget``).
"""

from __future__ import annotations

from typing import Any

from agentprop._check import ViolationContext
from agentprop._conversation_shrink import shrink
from agentprop._corpus import Corpus, entry_from_shrink
from agentprop._oracle import AgentPropertyViolation, CheckResult


def shrink_violation(exc: BaseException, *, budget: int, corpus: Corpus | None, session_budget: Any = None) -> str | None:
    """Shrink the failure behind ``exc``; returns the text for the report section, or ``None``
    when ``exc`` is not a shrinkable agent violation."""
    if not isinstance(exc, AgentPropertyViolation) or budget <= 0:
        return None
    context = getattr(exc, "context", None)
    result = exc.result
    if not isinstance(context, ViolationContext) or not isinstance(result, CheckResult) or not result.failures:
        return None
    report = shrink(
        context.project,
        context.scenario,
        context.agent,
        messages=context.messages,
        prop=context.prop,
        failing=result,
        budget=budget,
        session_budget=session_budget,
        seed=context.seed,
    )
    text = report.summary()
    if corpus is not None and report.reproducer_rate is not None and report.reproducer_rate.failures > 0:
        prop_id = "mft" if context.prop is None else getattr(context.prop, "__qualname__", "custom")
        entry = entry_from_shrink(report, spec_id=context.project.spec.spec_id, spec_path=str(context.project.spec_path.parent), agent=context.agent, prop=prop_id)
        corpus.save(entry)
        text += f"\n  saved as corpus entry {entry.id} (agentprop corpus show {entry.id} --pytest)"
    return text
