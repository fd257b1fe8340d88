"""Verdict bands: turn a pass rate into PASS (>= 0.95), UNSTABLE (>= 0.70) or FAIL.

The bands are parameters; a rate on a band's lower edge belongs to that band. They label the
estimate a report shows; decisions are made by the sequential tests.
"""

from __future__ import annotations

from typing import Literal

from agentprop._stats._checks import check_closed_unit
from agentprop.errors import InvalidArgument

__all__ = ["RateBand", "classify_rate"]

RateBand = Literal["PASS", "UNSTABLE", "FAIL"]


def classify_rate(rate: float, pass_band: float = 0.95, unstable_band: float = 0.7) -> RateBand:
    """``"PASS"`` if ``rate >= pass_band``, ``"UNSTABLE"`` if ``rate >= unstable_band``,
    else ``"FAIL"``."""
    rate = check_closed_unit("rate", rate)
    pass_band = check_closed_unit("pass_band", pass_band)
    unstable_band = check_closed_unit("unstable_band", unstable_band)
    if unstable_band > pass_band:
        raise InvalidArgument(
            f"unstable_band={unstable_band} is above pass_band={pass_band}; the unstable band "
            "lies below the pass band (defaults 0.7 and 0.95)."
        )
    if rate >= pass_band:
        return "PASS"
    if rate >= unstable_band:
        return "UNSTABLE"
    return "FAIL"
