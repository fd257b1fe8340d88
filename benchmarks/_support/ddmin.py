"""Baseline: Zeller and Hildebrandt's delta debugging (ddmin) with a fixed number of runs.

Delta debugging assumes a deterministic test. The usual way to use it on a flaky one is to
run every query a fixed ``N`` times and call the candidate failing if at least one run
failed. This module implements exactly that, over the leaves of the same :class:`Unit`
forest the statistical shrinker uses (ddmin is flat: it ignores the hierarchy), so the
benchmark can compare the two on equal inputs. Queries are memoised and the run budget is
respected (a query the remaining budget cannot pay for in full is not started).

It is a baseline, not a recommendation: with ``N = 10`` every query costs 10 runs even when
the first one already failed (``stop_at_first_failure=True`` is the fairer baseline: a query
stops at its first failing run, which decides it), and with a background false-failure rate
``eps`` the "at least one failure" rule accepts a non-reproducing candidate with probability
``1 - (1 - eps)^N`` (40% at ``eps = 0.05``), so the result is rarely the true minimal input.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentprop._shrink.query import Outcome
from agentprop._shrink.search import Unit, UnitIndex
from agentprop.errors import InvalidArgument

__all__ = ["DdminResult", "ddmin"]

T = TypeVar("T")
C = TypeVar("C")


@dataclass(frozen=True)
class DdminResult(Generic[C]):
    """The reproducer ddmin settled on, the runs and queries it spent, and whether the budget
    stopped it."""

    reproducer: C
    units: tuple[Unit[Any], ...]
    runs: int
    queries: int
    budget_exhausted: bool
    kept_leaves: int


def ddmin(
    units: Sequence[Unit[T]],
    run: Callable[[C, int], Outcome],
    *,
    runs_per_query: int = 10,
    budget: int | None = None,
    build: Callable[[tuple[Unit[T], ...]], C] | None = None,
    signature: Hashable = None,
    protected: Callable[[Unit[T]], bool] | None = None,
    stop_at_first_failure: bool = False,
) -> DdminResult[C]:
    """Delta-debug the leaves of ``units`` with up to ``runs_per_query`` runs per query.

    A candidate "fails" if at least one of its runs fails with ``signature`` (with any
    signature when ``signature`` is None); with ``stop_at_first_failure`` a query makes no
    run after its first failing one (same answers, fewer runs). Protected leaves are in every
    candidate.
    """
    if not isinstance(runs_per_query, int) or runs_per_query < 1:
        raise InvalidArgument(f"runs_per_query must be a positive int, got {runs_per_query!r}.")
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise InvalidArgument(f"budget must be a positive int or None, got {budget!r}.")
    index = UnitIndex(units, protected)
    make: Callable[[tuple[Unit[T], ...]], Any] = build if build is not None else (lambda f: f)
    fixed = index.protected_mask
    leaves = [1 << i for i in range(len(index.leaf_paths)) if not fixed >> i & 1]
    memo: dict[int, bool] = {}
    spent = 0
    queries = 0
    exhausted = False

    def fails(config: list[int]) -> bool:
        nonlocal spent, queries, exhausted
        mask = fixed
        for bit in config:
            mask |= bit
        if mask in memo:
            return memo[mask]
        if budget is not None and spent + runs_per_query > budget:
            exhausted = True
            return False
        candidate = make(index.forest(mask))
        queries += 1
        hit = False
        for trial in range(runs_per_query):
            outcome = run(candidate, trial)
            spent += 1
            if outcome.failed and (signature is None or outcome.signature == signature):
                hit = True
                if stop_at_first_failure:
                    break
        memo[mask] = hit
        return hit

    config = list(leaves)
    granularity = 2
    while len(config) >= 2 and not exhausted:
        size = len(config)
        bounds = [size * i // granularity for i in range(granularity + 1)]
        subsets = [config[bounds[i] : bounds[i + 1]] for i in range(granularity)]
        subsets = [s for s in subsets if s]
        reduced = False
        for subset in subsets:
            if fails(subset):
                config, granularity, reduced = subset, 2, True
                break
        if not reduced:
            for i in range(len(subsets)):
                complement = [bit for j, s in enumerate(subsets) if j != i for bit in s]
                if fails(complement):
                    config, granularity, reduced = complement, max(granularity - 1, 2), True
                    break
        if not reduced:
            if granularity >= size:
                break
            granularity = min(size, 2 * granularity)
    mask = fixed
    for bit in config:
        mask |= bit
    forest = index.forest(mask)
    return DdminResult(
        reproducer=make(forest),
        units=forest,
        runs=spent,
        queries=queries,
        budget_exhausted=exhausted,
        kept_leaves=mask.bit_count(),
    )
