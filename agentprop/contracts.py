"""Contracts: promises about a trace, checked as pure functions.

Each takes a :class:`~agentprop.Trace` (and what it checks against) and returns a
:class:`Verdict` whose explanation points at the turn, the step and the spec clause. Use them
as properties of :func:`agentprop.check` (``prop=lambda trace: [requires_tools(trace, [...]),
...]``) or on traces you recorded yourself. The scenario's own expectations (its MFT) are
:func:`mft_verdicts` (:func:`probe_verdicts` for probe cases).

::

    from agentprop.contracts import calls_in_order, no_canary_leak

    agentprop.check(project, scenario, agent,
                    prop=lambda t: [calls_in_order(t, ["verify_identity", "cancel_order"]), no_canary_leak(t)])
"""  # noqa: E501

from agentprop._judge.contracts import (
    args_satisfy,
    calls_in_order,
    decision_in_enum,
    decision_is,
    forbids_tools,
    max_tool_calls,
    no_canary_leak,
    no_run_errors,
    requires_tools,
    response_valid,
    within_scope,
)
from agentprop._judge.grounded import (
    evidence_grounded,
    node_id_matches,
    numbers_grounded,
    response_grounded,
    tool_actions_match,
)
from agentprop._judge.properties import mft_verdicts, probe_verdicts
from agentprop._judge.verdict import Verdict

__all__ = [
    "Verdict",
    "args_satisfy",
    "calls_in_order",
    "decision_in_enum",
    "decision_is",
    "evidence_grounded",
    "forbids_tools",
    "max_tool_calls",
    "mft_verdicts",
    "no_canary_leak",
    "no_run_errors",
    "node_id_matches",
    "numbers_grounded",
    "probe_verdicts",
    "requires_tools",
    "response_grounded",
    "response_valid",
    "tool_actions_match",
    "within_scope",
]
