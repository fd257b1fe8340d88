"""Requirement limits as verdicts: clarifying turns and retries counted in a trace (the limits
themselves are read from the spec by :func:`agentprop._spec.requirements.requirement_limits`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentprop._decide.contracts import Verdict, _fail, _ok
from agentprop._scenario.trace import Trace
from agentprop._spec.model import Spec
from agentprop._spec.requirements import _retry_allowance, requirement_limits

def requirement_verdicts(spec: Spec, path: Sequence[str], trace: Trace, failures: Sequence[Mapping[str, Any]] = ()) -> list[Verdict]:
    """The bounds of :func:`requirement_limits` that apply to a scenario through ``path``."""
    out: list[Verdict] = []
    for lim in requirement_limits(spec):
        if not set(lim.nodes) & set(path):
            continue
        if lim.kind == "clarify":
            asked = [i for i, d in enumerate(trace.decisions) if d in lim.counted]
            names = "/".join(lim.counted)
            if len(asked) > lim.limit:
                out.append(_fail(lim.key, f"the conversation has {len(asked)} clarifying turns ({names}), at most {lim.limit}: turns {', '.join(str(i + 1) for i in asked)}", lim.clause, asked[lim.limit], detail=f"clarify={len(asked)}"))
            else:
                out.append(_ok(lim.key, f"{len(asked)} clarifying turn(s) ({names}), at most {lim.limit}", lim.clause))
            continue
        for tool in lim.counted:
            calls = [c for c in trace.tool_calls if c.name == tool]
            allowed = 1 + lim.limit + _retry_allowance(spec, tool, failures, 1 + lim.limit)
            if len(calls) > allowed:
                extra = "" if allowed == 1 + lim.limit else f" (plus {allowed - 1 - lim.limit} for its retry_policy on the injected failure)"
                out.append(_fail("max_retries", f"{tool} was called {len(calls)} times: {len(calls) - 1} retries, at most {lim.limit}{extra}", lim.clause, calls[allowed].turn_index, detail=f"{tool}x{len(calls)}"))
            else:
                out.append(_ok("max_retries", f"{tool} was called {len(calls)} time(s), at most {allowed}", lim.clause))
    return out
