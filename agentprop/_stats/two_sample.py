"""Two-sample tests: did a change of input change the agent's behaviour, beyond noise?

Each function compares runs on the original input with runs on the changed input and returns
a p-value: the probability, if the change made no difference, of two samples at least as
different as the ones seen: Fisher's exact test for two pass rates, Freeman–Halton (exact or
seeded Monte Carlo) for several outcomes. Both condition on the margins, so they are slightly
conservative. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentprop._stats._checks import check_count
from agentprop.errors import InvalidArgument

if TYPE_CHECKING:
    import numpy as np

__all__ = ["categorical_two_sample_test", "fisher_exact_greater", "fisher_exact_two_sided"]

# Tables whose probability is within this relative distance of the observed table's count as
# "no more likely" (guards against rounding in floating-point log probabilities).
_RELATIVE_TIE = 1e-7


def _two_samples(
    test: str, a_succ: int, a_n: int, b_succ: int, b_n: int
) -> tuple[int, int, int, int, int, int]:
    """The checked counts of a 2x2 table, with its pooled passes and fails; bad counts raise
    :class:`InvalidArgument` naming ``test``."""
    a_n = check_count("a_n", a_n, minimum=1)
    b_n = check_count("b_n", b_n, minimum=1)
    a_succ = check_count("a_succ", a_succ)
    b_succ = check_count("b_succ", b_succ)
    if a_succ > a_n or b_succ > b_n:
        raise InvalidArgument(
            f"{test}({a_succ}, {a_n}, {b_succ}, {b_n}): successes cannot exceed runs. The "
            "arguments are (a_succ, a_n, b_succ, b_n)."
        )
    passes = a_succ + b_succ
    return a_succ, a_n, b_succ, b_n, passes, a_n + b_n - passes


def fisher_exact_two_sided(a_succ: int, a_n: int, b_succ: int, b_n: int) -> float:
    """Two-sided Fisher exact test that two samples share one pass probability.

    ``a_succ`` of ``a_n`` runs passed in sample A and ``b_succ`` of ``b_n`` in sample B.
    Returns the p-value in ``(0, 1]``.
    """
    a_succ, a_n, b_succ, b_n, passes, fails = _two_samples(
        "fisher_exact_two_sided", a_succ, a_n, b_succ, b_n
    )
    total = a_n + b_n
    low, high = max(0, a_n - fails), min(passes, a_n)
    # weight(x) = C(passes, x) * C(fails, a_n - x) is proportional to P(X = x); exact ints.
    weights = [math.comb(passes, x) * math.comb(fails, a_n - x) for x in range(low, high + 1)]
    observed = weights[a_succ - low]
    extreme = sum(w for w in weights if w <= observed)
    return min(1.0, extreme / math.comb(total, a_n))


def fisher_exact_greater(a_succ: int, a_n: int, b_succ: int, b_n: int) -> float:
    """One-sided Fisher exact test that sample A's rate is *higher* than sample B's.

    **Null:** A's probability is at most B's. Given the pooled number of successes, the
    p-value is the hypergeometric probability that A gets ``a_succ`` or more of them. Used by
    mutation testing: does the mutant show the probe's violation more often than the clean
    agent? Returns the p-value in ``(0, 1]``.
    """
    a_succ, a_n, b_succ, b_n, passes, fails = _two_samples(
        "fisher_exact_greater", a_succ, a_n, b_succ, b_n
    )
    total = a_n + b_n
    high = min(passes, a_n)
    tail = sum(math.comb(passes, x) * math.comb(fails, a_n - x) for x in range(a_succ, high + 1))
    return min(1.0, tail / math.comb(total, a_n))


def categorical_two_sample_test(
    counts_a: Mapping[str, int],
    counts_b: Mapping[str, int],
    *,
    seed: int | np.random.Generator,
    permutations: int = 10_000,
    exact_limit: int = 100_000,
) -> float:
    """Test that two samples of categorical outcomes come from the same distribution.

    ``counts_a`` and ``counts_b`` map each outcome (e.g. a decision label) to how often it
    was seen; a label missing from one mapping counts as 0 there. Returns the p-value of the
    Freeman–Halton exact test: exact when at most ``exact_limit`` tables are possible,
    otherwise estimated from ``permutations`` seeded random relabellings.
    """
    import numpy as np  # not at import: ``agentprop run`` imports this module, numpy is slow

    labels = sorted(set(counts_a) | set(counts_b))
    a = [_category_count("counts_a", counts_a, label) for label in labels]
    b = [_category_count("counts_b", counts_b, label) for label in labels]
    permutations = check_count("permutations", permutations, minimum=1)
    exact_limit = check_count("exact_limit", exact_limit)
    if not isinstance(seed, (int, np.integer, np.random.Generator)) or isinstance(seed, bool):
        raise InvalidArgument(
            f"seed={seed!r} must be an int or a numpy Generator, so the Monte Carlo "
            "p-value is reproducible."
        )
    n_a, n_b = sum(a), sum(b)
    if n_a == 0 or n_b == 0:
        raise InvalidArgument(
            f"categorical_two_sample_test needs at least one outcome in each sample; got {n_a} in "
            f"counts_a and {n_b} in counts_b."
        )
    kept = [(x, x + y) for x, y in zip(a, b, strict=True) if x + y > 0]
    if len(kept) <= 1:
        return 1.0  # every run in both samples gave the same outcome
    observed = [x for x, _ in kept]
    totals = [m for _, m in kept]
    # log C(m_i, x) for every category i and every possible count x
    log_comb = [_log_comb_row(m) for m in totals]
    log_observed = sum(row[x] for row, x in zip(log_comb, observed, strict=True))
    cutoff = log_observed + _RELATIVE_TIE
    if _count_tables(totals, n_a) <= exact_limit:
        log_probabilities = _enumerate_log_weights(totals, n_a, log_comb)
        log_total = _log_comb(sum(totals), n_a)
        extreme = log_probabilities[log_probabilities <= cutoff]
        return float(min(1.0, np.exp(extreme - log_total).sum()))
    generator = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    draws = generator.multivariate_hypergeometric(
        np.asarray(totals, dtype=np.int64), n_a, size=permutations
    )
    log_weights = np.zeros(permutations)
    for column, row in enumerate(log_comb):
        log_weights += row[draws[:, column]]
    hits = int(np.count_nonzero(log_weights <= cutoff))
    return (1 + hits) / (1 + permutations)


def _category_count(name: str, counts: Mapping[str, int], label: str) -> int:
    if not isinstance(counts, Mapping):
        raise InvalidArgument(
            f"{name} must be a mapping from outcome label to count, got {type(counts).__name__}. "
            "Use collections.Counter(outcomes)."
        )
    return check_count(f"{name}[{label!r}]", counts.get(label, 0))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _log_comb_row(m: int) -> np.ndarray:
    import numpy as np

    return np.array([_log_comb(m, x) for x in range(m + 1)])


def _count_tables(totals: list[int], n_a: int) -> int:
    """How many count vectors ``0 <= x_i <= totals[i]`` sum to ``n_a`` (exact integer)."""
    ways = [1] + [0] * n_a  # ways[s]: partial vectors summing to s
    for m in totals:
        prefix = [0]
        for value in ways:
            prefix.append(prefix[-1] + value)
        ways = [prefix[s + 1] - prefix[max(0, s - m)] for s in range(n_a + 1)]
    return ways[n_a]


def _enumerate_log_weights(totals: list[int], n_a: int, log_comb: list[np.ndarray]) -> np.ndarray:
    """``sum_i log C(totals[i], x_i)`` for every table with ``sum_i x_i = n_a``.

    Builds the tables category by category, keeping only the partial sum and the partial
    log weight, and pruning partial tables that the remaining categories cannot complete.
    """
    import numpy as np

    capacity_after = np.cumsum(totals[::-1])[::-1].tolist()[1:] + [0]
    sums = np.zeros(1, dtype=np.int64)
    weights = np.zeros(1)
    for m, row, room in zip(totals, log_comb, capacity_after, strict=True):
        # feasible counts for this category, per partial table: lo..hi
        lo = np.maximum(0, n_a - sums - room)
        hi = np.minimum(m, n_a - sums)
        lengths = hi - lo + 1
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        x = np.arange(int(lengths.sum()), dtype=np.int64) - starts + np.repeat(lo, lengths)
        sums = np.repeat(sums, lengths) + x
        weights = np.repeat(weights, lengths) + row[x]
    return weights
