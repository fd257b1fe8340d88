"""Verdict bands: turn a pass rate into PASS, UNSTABLE or FAIL.

The fuzzy-replay convention agentprop starts from: a case that passes at least 95% of its
runs is stable (PASS); one that passes between 70% and 95% of the time is borderline and needs
a look (UNSTABLE); below 70% it FAILs. The bands are parameters; a rate exactly on a band's
lower edge belongs to that band (0.95 is PASS, 0.70 is UNSTABLE).

The band of an *observed* rate from a handful of runs is itself noisy; the oracle decides with
sequential tests and uses these bands to label the estimate it reports.
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
            f"unstable_band={unstable_band} is above pass_band={pass_band}; the unstable band lies below the pass band (defaults 0.7 and 0.95)."
        )
    if rate >= pass_band:
        return "PASS"
    if rate >= unstable_band:
        return "UNSTABLE"
    return "FAIL"
