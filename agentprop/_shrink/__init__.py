"""Statistical shrinker core (placeholder docstring, replaced below)."""

from __future__ import annotations

from agentprop._shrink.ddmin import DdminResult, ddmin
from agentprop._shrink.query import Outcome, QueryRecord, RateEstimate, Verdict, wilson_interval
from agentprop._shrink.search import (
    Calibration,
    ShrinkResult,
    Unit,
    UnitIndex,
    Verification,
    shrink,
    verify,
)

__all__ = [
    "Calibration",
    "DdminResult",
    "Outcome",
    "QueryRecord",
    "RateEstimate",
    "ShrinkResult",
    "Unit",
    "UnitIndex",
    "Verdict",
    "Verification",
    "ddmin",
    "shrink",
    "verify",
    "wilson_interval",
]
