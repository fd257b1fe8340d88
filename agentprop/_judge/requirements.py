"""Requirement limits as verdicts: clarifying turns and retries counted in a trace (the limits
themselves are read from the spec by :func:`agentprop._spec.requirements.requirement_limits`).

:func:`requirement_checks` compiles the limits that apply to a path into checks of a trace,
once per scenario (:mod:`agentprop._judge.case`); every spec lookup, the retry allowance a
tool's ``retry_policy`` grants on the scenario's injected failures included, is done there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentprop._judge.verdict import Verdict, _fail, _ok
from agentprop._scenario.trace import Trace
from agentprop._spec.model import Spec
from agentprop._spec.requirements import RequirementLimit, requirement_limits, retry_allowance
from agentprop._spec.retries import spec_retries

RequirementCheck = tuple[str, str, Callable[[Trace], Verdict]]
"""``(contract, clause, check)``."""


def requirement_checks(
    spec: Spec, path: Sequence[str], failures: Sequence[Mapping[str, Any]] = ()
) -> list[RequirementCheck]:
    """The bounds of :func:`requirement_limits` that apply to a scenario through ``path`` (with
    the world's injected ``failures``), as checks of a trace."""
    out: list[RequirementCheck] = []
    for lim in requirement_limits(spec):
        if not set(lim.nodes) & set(path):
            continue
        if lim.kind == "clarify":
            out.append((lim.key, lim.clause, _clarify_check(lim)))
            continue
        same = {r.tool for r in spec_retries(spec) if r.target == lim.node and r.policy_too(spec)}
        for tool in lim.counted:
            # a retry node and the tool's retry_policy that describe the same retry: one retry
            allowance = 0 if tool in same else retry_allowance(spec, tool, failures, 1 + lim.limit)
            allowed = 1 + lim.limit + allowance
            out.append(("max_retries", lim.clause, _retry_check(lim, tool, allowed)))
    return out


def _clarify_check(lim: RequirementLimit) -> Callable[[Trace], Verdict]:
    names = "/".join(lim.counted)

    def check(trace: Trace) -> Verdict:
        asked = [i for i, d in enumerate(trace.decisions) if d in lim.counted]
        if len(asked) > lim.limit:
            turns = ", ".join(str(i + 1) for i in asked)
            return _fail(
                lim.key,
                f"the conversation has {len(asked)} clarifying turns ({names}), at most "
                f"{lim.limit}: turns {turns}",
                lim.clause,
                asked[lim.limit],
                detail=f"clarify={len(asked)}",
            )
        return _ok(
            lim.key, f"{len(asked)} clarifying turn(s) ({names}), at most {lim.limit}", lim.clause
        )

    return check


def _retry_check(lim: RequirementLimit, tool: str, allowed: int) -> Callable[[Trace], Verdict]:
    extra = (
        ""
        if allowed == 1 + lim.limit
        else f" (plus {allowed - 1 - lim.limit} for its retry_policy on the injected failure)"
    )

    def check(trace: Trace) -> Verdict:
        calls = [c for c in trace.tool_calls if c.name == tool]
        if len(calls) > allowed:
            return _fail(
                "max_retries",
                f"{tool} was called {len(calls)} times: {len(calls) - 1} retries, at "
                f"most {lim.limit}{extra}",
                lim.clause,
                calls[allowed].turn_index,
                calls[allowed].step,
                detail=f"{tool}x{len(calls)}",
            )
        return _ok(
            "max_retries", f"{tool} was called {len(calls)} time(s), at most {allowed}", lim.clause
        )

    return check


def requirement_verdicts(
    spec: Spec, path: Sequence[str], trace: Trace, failures: Sequence[Mapping[str, Any]] = ()
) -> list[Verdict]:
    """The verdicts of :func:`requirement_checks` on one trace."""
    return [check(trace) for _, _, check in requirement_checks(spec, path, failures)]
