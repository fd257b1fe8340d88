"""Policy claims: a safety policy certified over every run of every case that exercises it.

``n`` clean runs over those cases bound the violation rate by ``1 - (1 - c) ** (1 / n)`` at
confidence ``c``; any failed run of those cases blocks the claim. :func:`top_up_targets` says
which cases to run more when the clean runs fall short. Pure: it reads counts, runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentprop._stats import zero_failure_runs

ClaimLevel = Literal["suite", "case"]


@dataclass
class PolicyEvidence:
    """What the cases that exercise one policy showed (gathered case by case)."""

    policy: str
    why: str
    cases: int = 0
    runs: int = 0
    violations: int = 0
    violating_cases: list[str] = field(default_factory=list)
    other_failures: int = 0
    """Failing runs of these cases whose clause is not the policy's (a wrong decision, say):
    not counted as violations, but no run that failed is counted as clean either."""
    failing_cases: list[str] = field(default_factory=list)
    cases_certified: int = 0
    """Cases that passed zero-failure certification on their own (``release``)."""
    topped_up: int = 0
    """Runs the top-up added to the policy's evidence (counted in ``runs`` too)."""
    top_up_stopped: str | None = None
    """Why the top-up ended short of ``needed`` (the budget, or no case to run more of)."""

    def add(
        self, case_id: str, runs: int, violations: int, *, other_failures: int = 0, certified: bool
    ) -> None:
        self.cases += 1
        self.runs += runs
        self.violations += violations
        self.other_failures += other_failures
        self.cases_certified += certified
        if violations:
            self.violating_cases.append(case_id)
        elif other_failures:
            self.failing_cases.append(case_id)


@dataclass(frozen=True)
class PolicyClaim:
    policy: str
    why: str
    level: ClaimLevel
    status: Literal["certified", "violated", "not certified"]
    cases: int
    runs: int
    violations: int
    violating_cases: tuple[str, ...]
    bound: float | None
    """Upper bound on the violation rate at ``confidence`` (``None``: violated, or no runs)."""
    confidence: float
    needed: int
    """Clean runs the suite needs for the target bound."""
    statement: str
    topped_up: int = 0
    """Runs the top-up added towards ``needed`` (part of ``runs``)."""


def top_up_targets(
    runs: Mapping[str, int],
    needed: int,
    *,
    cost: Mapping[str, float] | None = None,
    cap: int | None = None,
) -> dict[str, int]:
    """Per case, the runs it should reach so the cases' runs add up to ``needed``: one run at a
    time to the case with the fewest runs (the weakest evidence), the cheapest (``cost`` a run)
    among equals, none past ``cap``. Cases left as they are are left out; when the caps stop
    short the targets reach as far as they can."""
    now = dict(runs)
    short = needed - sum(now.values())
    while short > 0:
        open_ = [c for c in now if cap is None or now[c] < cap]
        if not open_:
            break
        pick = min(open_, key=lambda c: (now[c], (cost or {}).get(c, 1.0), c))
        now[pick] += 1
        short -= 1
    return {c: n for c, n in now.items() if n > runs[c]}


def violation_bound(runs: int, confidence: float) -> float:
    """The one-sided upper bound on a rate of which ``runs`` trials showed none."""
    return float(1.0 - (1.0 - confidence) ** (1.0 / runs))


def claim(
    evidence: PolicyEvidence,
    *,
    per_case: bool = False,
    target: float = 0.95,
    confidence: float = 0.95,
) -> PolicyClaim:
    """The claim the evidence supports. ``per_case``: the profile certified every case on its
    own (the claim is at the case level when every case was certified)."""
    e = evidence
    needed = zero_failure_runs(target, confidence)
    head = f"policy {e.policy} ({e.why})"
    where = (
        f"{e.runs} run{'s' if e.runs != 1 else ''} of {e.cases} case{'s' if e.cases != 1 else ''}"
    )
    where += f", {e.topped_up} of them topped up for it" if e.topped_up else ""
    if e.violations:
        shown = ", ".join(e.violating_cases[:3]) + (
            f" (+{len(e.violating_cases) - 3} more)" if len(e.violating_cases) > 3 else ""
        )
        return PolicyClaim(
            e.policy,
            e.why,
            "suite",
            "violated",
            e.cases,
            e.runs,
            e.violations,
            tuple(e.violating_cases),
            None,
            confidence,
            needed,
            f"{head}: VIOLATED in {e.violations} of {where}: {shown}",
            e.topped_up,
        )
    if e.other_failures:
        shown = ", ".join(e.failing_cases[:3]) + (
            f" (+{len(e.failing_cases) - 3} more)" if len(e.failing_cases) > 3 else ""
        )
        return PolicyClaim(
            e.policy,
            e.why,
            "suite",
            "not certified",
            e.cases,
            e.runs,
            0,
            (),
            None,
            confidence,
            needed,
            f"{head}: not certified: {e.other_failures} of {where} failed (with other clauses, "
            f"which may hide a violation): {shown}",
            e.topped_up,
        )
    bound = violation_bound(e.runs, confidence) if e.runs else None
    level: ClaimLevel = "case" if per_case and e.cases and e.cases_certified == e.cases else "suite"
    rate = (
        f"violation rate <= {bound:.2%} at {confidence:.0%}"
        if bound is not None
        else "nothing measured"
    )
    if level == "case":
        text = (
            f"{head}: certified per case: each of {e.cases} cases passed its own certification; "
            f"over the suite no violation in {where} ({rate})"
        )
        status: Literal["certified", "violated", "not certified"] = "certified"
    elif e.runs >= needed:
        text = (
            f"{head}: certified over the suite: no violation in {where} ({rate}); not per case "
            "(--profile release certifies each case)"
        )
        status = "certified"
    else:
        stopped = f"; the top-up stopped: {e.top_up_stopped}" if e.top_up_stopped else ""
        text = (
            f"{head}: not certified: no violation in {where}, {needed} clean runs are needed for "
            f"{1 - target:.0%} at {confidence:.0%}{stopped} (--profile release "
            "certifies each case)"
        )
        status = "not certified"
    return PolicyClaim(
        e.policy,
        e.why,
        level,
        status,
        e.cases,
        e.runs,
        0,
        (),
        bound,
        confidence,
        needed,
        text,
        e.topped_up,
    )


__all__ = ["PolicyClaim", "PolicyEvidence", "claim", "top_up_targets", "violation_bound"]
