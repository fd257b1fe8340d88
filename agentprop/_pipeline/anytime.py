"""Where a budgeted run's deepening pass spends what the budget has left.

When the runs left cannot take every case to the pass's depth, cases are ranked by a failing run
first, then their kind's risk, then the weakest verdict; the rest are held for the next pass
(:mod:`agentprop._decide.holds`). A held case keeps its runs; corpus replays are never held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentprop._modelapi.budget import BudgetSnapshot
from agentprop._pipeline.report.model import CaseReport

RISKY_KINDS = ("PROBE", "DIR", "CORPUS", "REGRESSION")
"""Kinds deepened before any other case of the same standing."""
NEVER_HELD = ("CORPUS", "REGRESSION")
"""A known bug's replay is never held back."""
UNDECIDABLE = ("FAIL", "UNSTABLE", "NOT APPLICABLE")
"""Verdicts no deeper screen changes: such a case needs no more runs from a deepening pass."""


def runs_needed(case: CaseReport, depth: int) -> int:
    """The runs ``case`` still needs to reach ``depth`` clean runs (a DIR case: on each side; an
    INV case: on each side, at most its runs per side)."""
    if case.verdict in UNDECIDABLE or case.kind in NEVER_HELD:
        return 0
    if case.kind == "DIR":
        target = 2 * depth
    elif case.kind == "INV":
        per_side = int(case.details.get("runs_per_side") or depth)
        target = (1 + len(case.messages)) * min(depth, per_side)
    else:
        target = depth
    return max(0, target - case.runs)


def risk_rank(case: CaseReport) -> int:
    """0: a kind that carries more risk; 1: a case exercising a safety policy; 2: the rest."""
    if case.kind in RISKY_KINDS:
        return 0
    return 1 if "(safety:" in (case.rule or "") else 2


def priority(case: CaseReport) -> tuple[int, int, float, str]:
    """The sort key of the order above (smallest first)."""
    failing = case.runs - case.passes if case.kind != "INV" else len(case.failures)
    weakness = (failing + 1) / (case.runs + 2)
    return (0 if failing > 0 or case.failures else 1, risk_rank(case), -weakness, case.id)


def runs_left(snap: BudgetSnapshot) -> float | None:
    """The runs the budget has left: under a run limit, counted; under a dollar or token limit,
    estimated from the cost of the runs so far (``None``: nothing to estimate from)."""
    left: list[float] = []
    if snap.max_runs is not None:
        left.append(max(0, snap.max_runs - snap.runs))
    if snap.runs > 0:
        if snap.max_usd is not None and snap.usd > 0:
            left.append(
                max(0.0, snap.max_usd - snap.usd - snap.reserved_usd) / (snap.usd / snap.runs)
            )
        tokens = snap.input_tokens + snap.output_tokens
        if snap.max_tokens is not None and tokens > 0:
            left.append(
                max(0, snap.max_tokens - tokens - snap.reserved_tokens) / (tokens / snap.runs)
            )
    return min(left) if left else None


def held_back(
    cases: Sequence[CaseReport],
    depth: int,
    snap: BudgetSnapshot,
    names: Mapping[str, tuple[str, ...]],
) -> frozenset[str]:
    """The decision names a deepening pass to ``depth`` holds back: those of the cases past what
    the runs left reach, in :func:`priority` order (``names``: a DIR case's sides' decision names,
    by case id; any other case's decision is named by its id). Empty when every case fits."""
    pending = sorted((c for c in cases if runs_needed(c, depth) > 0), key=priority)
    left = runs_left(snap)
    if left is None or sum(runs_needed(c, depth) for c in pending) <= left:
        return frozenset()
    chosen: list[CaseReport] = []
    spent = 0
    for case in pending:
        need = runs_needed(case, depth)
        if chosen and spent + need > left:
            break
        chosen.append(case)
        spent += need
    keep = {n for c in chosen for n in names.get(c.id, (c.id,))}
    return frozenset(
        n for c in pending[len(chosen) :] for n in names.get(c.id, (c.id,)) if n not in keep
    )
