"""The statistical shrinker: minimise a failing input when the test itself is noisy.

Generic: it knows units, candidates and outcomes, not conversations; ``protected`` units are
never removed and a failure with another signature is another bug. It moves only to a candidate
a query confirmed, never exceeds the run budget, and stopping early returns the smallest
confirmed reproducer.
"""

from __future__ import annotations

from agentprop._shrink.query import (
    Outcome,
    QueryRecord,
    QueryVerdict,
    RatePosterior,
    ReproductionRate,
    wilson_interval,
)
from agentprop._shrink.search import (
    Calibration,
    ShrinkResult,
    Unit,
    UnitIndex,
    Verification,
    runs_to_see,
    shrink,
    verify,
)

__all__ = [
    "Calibration",
    "Outcome",
    "QueryRecord",
    "ReproductionRate",
    "RatePosterior",
    "ShrinkResult",
    "Unit",
    "UnitIndex",
    "QueryVerdict",
    "Verification",
    "runs_to_see",
    "shrink",
    "verify",
    "wilson_interval",
]
