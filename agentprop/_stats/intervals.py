"""Confidence intervals for a pass rate: Wilson and Clopper–Pearson.

Reports show both: Wilson is short and close to nominal coverage on average; Clopper–Pearson
never covers less than the nominal level. Every interval lies in ``[0, 1]``. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

from agentprop._stats._checks import check_open_unit, check_successes

__all__ = [
    "RateEstimate",
    "binomial_cdf",
    "clopper_pearson_interval",
    "estimate_rate",
    "wilson_interval",
]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion.

    ``successes`` of ``n`` runs passed; returns ``(lower, upper)`` with
    ``0 <= lower <= successes / n <= upper <= 1``. With 0 successes ``lower`` is exactly 0
    and with ``n`` successes ``upper`` is exactly 1.
    """
    s, n = check_successes(successes, n)
    confidence = check_open_unit("confidence", confidence)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    z2 = z * z
    rate = s / n
    denominator = 1.0 + z2 / n
    centre = (rate + z2 / (2.0 * n)) / denominator
    half_width = (z / denominator) * math.sqrt(rate * (1.0 - rate) / n + z2 / (4.0 * n * n))
    lower = 0.0 if s == 0 else max(0.0, min(rate, centre - half_width))
    upper = 1.0 if s == n else min(1.0, max(rate, centre + half_width))
    return lower, upper


def clopper_pearson_interval(
    successes: int, n: int, confidence: float = 0.95
) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval for a binomial proportion.

    ``lower`` solves ``P(X >= successes | p) = (1 - confidence) / 2`` and ``upper`` solves
    ``P(X <= successes | p) = (1 - confidence) / 2`` for ``X ~ Binomial(n, p)``. Its coverage
    is at least ``confidence`` for every true ``p``.
    """
    s, n = check_successes(successes, n)
    confidence = check_open_unit("confidence", confidence)
    tail = (1.0 - confidence) / 2.0
    if s == 0:
        lower = 0.0
    elif s == n:
        lower = tail ** (1.0 / n)
    else:
        # P(X >= s | p) increases with p; find where it reaches `tail`.
        lower = _bisect_increasing(lambda p: _binomial_upper_tail(s, n, p), tail)
    if s == n:
        upper = 1.0
    elif s == 0:
        upper = 1.0 - tail ** (1.0 / n)
    else:
        # P(X <= s | p) decreases with p; find where it falls to `tail`.
        upper = _bisect_increasing(lambda p: 1.0 - binomial_cdf(s, n, p), 1.0 - tail)
    return lower, upper


@dataclass(frozen=True)
class RateEstimate:
    """An observed pass rate with both intervals, as agentprop reports it."""

    successes: int
    n: int
    confidence: float
    wilson: tuple[float, float]
    clopper_pearson: tuple[float, float]

    @property
    def rate(self) -> float:
        """The observed pass rate ``successes / n``."""
        return self.successes / self.n

    def __str__(self) -> str:
        w_lo, w_hi = self.wilson
        c_lo, c_hi = self.clopper_pearson
        level = f"{self.confidence:.0%}"
        return (
            f"{self.rate:.3f} ({self.successes}/{self.n} runs; {level} Wilson [{w_lo:.3f}, "
            f"{w_hi:.3f}], Clopper-Pearson [{c_lo:.3f}, {c_hi:.3f}])"
        )


def estimate_rate(successes: int, n: int, confidence: float = 0.95) -> RateEstimate:
    """Bundle the observed rate, the runs used and both intervals."""
    s, n = check_successes(successes, n)
    return RateEstimate(
        successes=s,
        n=n,
        confidence=float(confidence),
        wilson=wilson_interval(s, n, confidence),
        clopper_pearson=clopper_pearson_interval(s, n, confidence),
    )


def binomial_cdf(k: int, n: int, p: float) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, p)``, via the regularized incomplete beta."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    # P(X <= k) = I_{1-p}(n - k, k + 1)
    return _regularized_beta(1.0 - p, float(n - k), float(k + 1))


def _binomial_upper_tail(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)`` with ``1 <= k <= n``: ``I_p(k, n - k + 1)``."""
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    return _regularized_beta(p, float(k), float(n - k + 1))


def _bisect_increasing(function: Callable[[float], float], target: float) -> float:
    """The ``p`` in ``[0, 1]`` where an increasing ``function(p)`` crosses ``target``.

    Bisection runs until the bracket cannot be split any more in floating point.
    """
    lo, hi = 0.0, 1.0
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if function(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


_TINY = 1e-300
_EPSILON = 1e-15


def _regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` for ``a, b > 0``.

    Uses the classical continued fraction, evaluated with the modified Lentz method, on the
    side of the symmetry ``I_x(a, b) = 1 - I_{1-x}(b, a)`` where it converges quickly.
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _regularized_beta(1.0 - x, b, a)
    log_front = (
        a * math.log(x)
        + b * math.log1p(-x)
        - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
        - math.log(a)
    )
    return math.exp(log_front) * _beta_continued_fraction(x, a, b)


def _beta_continued_fraction(x: float, a: float, b: float) -> float:
    """``1 / (1 + d1 / (1 + d2 / (1 + ...)))`` with the incomplete-beta coefficients ``d_m``."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = _TINY if abs(d) < _TINY else d
    d = 1.0 / d
    result = d
    for m in range(1, 100_000):
        # even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m))
        coefficient = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
        d = 1.0 + coefficient * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + coefficient / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        result *= d * c
        # odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
        coefficient = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
        d = 1.0 + coefficient * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + coefficient / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        step = d * c
        result *= step
        if abs(step - 1.0) < _EPSILON:
            break
    return result
