"""pass^k and pass@k: how often all, or at least one, of k runs of a case pass.

Both use the unbiased estimators over ``n >= k`` recorded runs, ``C(c, k) / C(n, k)`` and
``1 - C(n - c, k) / C(n, k)``, with exact integer binomials rounded once. Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from agentprop._stats._checks import check_count, check_successes
from agentprop.errors import InvalidArgument

__all__ = ["mean_pass_hat_k", "pass_at_k", "pass_hat_k"]


def _check_k(c: int, n: int, k: object) -> tuple[int, int, int]:
    c, n = check_successes(c, n)
    k_int = check_count("k", k, minimum=1)
    if k_int > n:
        raise InvalidArgument(
            f"k={k_int} is larger than the number of runs n={n}: the unbiased estimate needs "
            f"at least k runs per case. Run the case {k_int - n} more time(s) or lower k."
        )
    return c, n, k_int


def pass_hat_k(c: int, n: int, k: int) -> float:
    """Unbiased estimate of pass^k (all of ``k`` runs pass) from ``c`` passes in ``n`` runs.

    Returns ``C(c, k) / C(n, k)``; 0 when ``c < k``.
    """
    c, n, k = _check_k(c, n, k)
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(c: int, n: int, k: int) -> float:
    """Unbiased estimate of pass@k (at least one of ``k`` runs passes).

    Returns ``1 - C(n - c, k) / C(n, k)``; 1 when ``n - c < k``.
    """
    c, n, k = _check_k(c, n, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """pass^k of a suite: the mean of :func:`pass_hat_k` over cases.

    ``counts`` holds one ``(successes, runs)`` pair per case, in that order (the same order as
    the arguments of :func:`pass_hat_k`).
    """
    k = check_count("k", k, minimum=1)
    pairs = list(counts)
    if not pairs:
        raise InvalidArgument(
            "counts is empty: pass^k of a suite needs at least one (successes, runs) pair."
        )
    total = 0.0
    for index, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidArgument(
                f"counts[{index}]={pair!r} must be a (successes, runs) tuple of two integers."
            )
        total += pass_hat_k(pair[0], pair[1], k)
    return total / len(pairs)
