"""pass^k: how often an agent gets *every one* of k attempts right.

A case was run ``n`` times and passed ``c`` times. pass^k is the probability that ``k``
independent runs of the same case all pass, i.e. ``p ** k`` for the true pass rate ``p``. It
is the reliability measure of tau-bench: an agent that passes 90% of the time passes ten runs
in a row only about 35% of the time.

The obvious estimate ``(c / n) ** k`` is biased upwards for small ``n`` (with ``n = k`` it is
1 whenever all runs passed, even though pass^k is then certainly below 1 for any agent that
ever fails). The unbiased estimate, used here, is

    pass^k = C(c, k) / C(n, k),

the fraction of the ``C(n, k)`` ways to pick ``k`` of the ``n`` recorded runs in which all
``k`` picked runs passed. Its expectation over the binomial draw of ``c`` is exactly ``p ** k``.
It needs ``n >= k`` runs per case. Across a suite, pass^k is the mean of the per-case values.

:func:`pass_at_k` is the companion measure from code generation (Chen et al., 2021): the
probability that *at least one* of ``k`` runs passes, estimated without bias by
``1 - C(n - c, k) / C(n, k)``.

Binomial coefficients are exact Python integers and the ratio is rounded once, so the values
are exact to double precision for any ``n``.
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
        raise InvalidArgument("counts is empty: pass^k of a suite needs at least one (successes, runs) pair.")
    total = 0.0
    for index, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidArgument(f"counts[{index}]={pair!r} must be a (successes, runs) tuple of two integers.")
        total += pass_hat_k(pair[0], pair[1], k)
    return total / len(pairs)
