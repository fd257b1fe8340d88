"""One run's verdicts as the oracle's trial record: the first failing verdict names the failure."""

from __future__ import annotations

from agentprop._decide.oracle import TrialRecord
from agentprop._judge.verdict import Verdict

__all__ = ["record_for"]


def record_for(verdicts: list[Verdict]) -> TrialRecord:
    """One run's outcome from its verdicts: the first failing one names the failure."""
    failing = tuple(v.signature for v in verdicts if not v.passed)
    failed = next((v for v in verdicts if not v.passed), None)
    if failed is None:
        return TrialRecord(passed=True, checks=len(verdicts))
    return TrialRecord(
        passed=False,
        signature=failed.signature,
        explanation=failed.explanation,
        clause=failed.clause,
        turn=failed.turn,
        step=failed.step,
        checks=len(verdicts),
        failed_checks=failing,
    )
