"""The statistical shrinker: minimise a failing input when the test itself is noisy.

Generic: it knows units, candidates and outcomes, not conversations. The input is a forest of
:class:`Unit` (``protected`` units are never removed); the oracle runs a candidate on a trial
index and returns an :class:`Outcome` whose failure carries a signature (another signature is
another bug). Each "does it still fail?" is a truncated sequential test
(:mod:`agentprop._shrink.query`); the search (:mod:`agentprop._shrink.search`) moves only to a
candidate a query confirmed, so the run budget is never exceeded and stopping early returns the
smallest confirmed reproducer. The design and its measured costs: docs/architecture.md, "The
statistical shrinker".
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
