"""The searches of the statistical shrinker, and the input model they work on.

An input is a forest of :class:`Unit` objects (for a conversation: turns -> clauses ->
tokens). A candidate is the original forest with some subtrees removed; internally it is an
integer bit mask over the forest's leaves, so that memoisation and the monotonicity rules of
:mod:`agentprop._shrink.query` are cheap set operations. A unit with children exists exactly
as long as one of its leaves does, and a protected unit (or any unit that holds a protected
leaf) is never removed.

The search, in order:

1. **Calibration**: run the original until it fails with a signature (or take the caller's
   evidence, e.g. the runs the oracle used to decide that the input fails).
2. **Explore**, level by level from the top (turns, then clauses, then tokens): on a large
   level, first try removing chunks (halves, quarters, ... of the level's units), then try
   every unit on its own. Every query here is *provisional*: a few runs, enough to catch a
   candidate that reproduces at the pooled rate with probability ``1 - provisional_miss``.
   A unit whose removal is not confirmed stays, for now.
3. **Confirm**: sweep the levels again, one unit at a time, with full queries. The clean runs
   of the exploration still count (under monotonicity, a clean run of a bigger candidate
   without the unit is evidence against the smaller one), so a unit the exploration already
   looked at only needs topping up; by now the pooled rate has been learnt from every
   removal that worked, so "enough clean runs" is judged with far better knowledge of the
   rate than the original's few calibration runs gave. Sweeps repeat until nothing changes.

Why this shape: a query that reproduces costs about ``1/q`` runs, one that does not costs the
full "rule-out" count (about 10 at ``q = 0.5``), so the cheapest searches ask few questions
whose answer is "no". On small levels that is one unit at a time (most units are removable,
each success is cheap); on large levels, chunks remove many units for the price of one
success. The exploration/confirmation split defers every expensive "no" until the rate is
known, and spends the budget on removals first, so a search cut short by the budget has
already made most of its progress. The current candidate only ever changes to a candidate a
query confirmed, so the shrinker is anytime: whenever it stops, it holds the smallest
confirmed reproducer so far.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentprop._shrink.query import (
    Outcome,
    QueryEngine,
    QueryRecord,
    RateEstimate,
    Verdict,
)
from agentprop.errors import InvalidArgument

__all__ = [
    "Calibration",
    "ShrinkResult",
    "Unit",
    "UnitIndex",
    "Verification",
    "shrink",
    "verify",
]

T = TypeVar("T")
C = TypeVar("C")


@dataclass(frozen=True)
class Unit(Generic[T]):
    """One unit of a shrinkable input: a payload and, optionally, finer units inside it.

    ``value`` is whatever the caller's ``build`` function needs (a turn's role, a clause's
    text, a token). ``children`` are the finer units the search descends into once this level
    is done. ``protected`` units (ids, amounts, other slots the failure is *about*) are never
    removed, and neither is any unit that contains one. ``label`` names the unit in the log.
    """

    value: T
    children: tuple[Unit[T], ...] = ()
    protected: bool = False
    label: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.children, tuple):
            object.__setattr__(self, "children", tuple(self.children))
        for child in self.children:
            if not isinstance(child, Unit):
                raise InvalidArgument(
                    f"Unit children must be Unit objects, got {child!r}; wrap each finer "
                    "piece as Unit(value)."
                )

    @classmethod
    def leaves_of(cls, values: Sequence[T], *, protected: Callable[[T], bool] | None = None) -> tuple[Unit[T], ...]:
        """One leaf unit per value, protected where ``protected(value)`` is true."""
        return tuple(cls(v, protected=bool(protected(v)) if protected else False) for v in values)

    def describe(self) -> str:
        return self.label if self.label is not None else repr(self.value)


@dataclass(frozen=True)
class _Node:
    path: tuple[int, ...]
    depth: int
    mask: int
    removable: bool
    label: str


class UnitIndex(Generic[T]):
    """Flattens a forest of units into leaf bits and per-depth nodes, and rebuilds the pruned
    forest for a mask. Public so that adapters can map their own inputs to masks."""

    def __init__(
        self, units: Sequence[Unit[T]], protected: Callable[[Unit[T]], bool] | None = None
    ) -> None:
        self.units: tuple[Unit[T], ...] = tuple(units)
        self.leaf_paths: list[tuple[int, ...]] = []
        self.levels: list[list[_Node]] = []
        self.protected_mask = 0

        def visit(unit: Unit[T], path: tuple[int, ...], inherited: bool) -> tuple[int, bool]:
            is_protected = inherited or unit.protected or bool(protected and protected(unit))
            if not unit.children:
                bit = 1 << len(self.leaf_paths)
                self.leaf_paths.append(path)
                if is_protected:
                    self.protected_mask |= bit
                mask, holds_protected = bit, is_protected
            else:
                mask, holds_protected = 0, is_protected
                for i, child in enumerate(unit.children):
                    child_mask, child_protected = visit(child, path + (i,), is_protected)
                    mask |= child_mask
                    holds_protected = holds_protected or child_protected
            depth = len(path) - 1
            while len(self.levels) <= depth:
                self.levels.append([])
            self.levels[depth].append(
                _Node(path, depth, mask, not holds_protected, unit.describe())
            )
            return mask, holds_protected

        for i, unit in enumerate(self.units):
            if not isinstance(unit, Unit):
                raise InvalidArgument(
                    f"shrink() needs a sequence of Unit objects, got {unit!r} at position {i}."
                )
            visit(unit, (i,), False)
        for level in self.levels:
            level.sort(key=lambda node: node.path)
        self.full_mask = (1 << len(self.leaf_paths)) - 1

    @property
    def depth(self) -> int:
        return len(self.levels)

    def removable(self, depth: int, mask: int) -> list[_Node]:
        """Removable nodes at ``depth`` still present in ``mask``, in document order."""
        return [n for n in self.levels[depth] if n.removable and n.mask & mask]

    def forest(self, mask: int) -> tuple[Unit[T], ...]:
        """The original forest pruned to the leaves in ``mask``."""

        def prune(unit: Unit[T], path: tuple[int, ...]) -> Unit[T] | None:
            if not unit.children:
                return unit if mask >> self._leaf_bit[path] & 1 else None
            kept = tuple(
                child
                for child in (prune(c, path + (i,)) for i, c in enumerate(unit.children))
                if child is not None
            )
            if not kept:
                return None
            if len(kept) == len(unit.children) and all(a is b for a, b in zip(kept, unit.children)):
                return unit
            return dataclasses.replace(unit, children=kept)

        out = []
        for i, unit in enumerate(self.units):
            pruned = prune(unit, (i,))
            if pruned is not None:
                out.append(pruned)
        return tuple(out)

    @property
    def _leaf_bit(self) -> dict[tuple[int, ...], int]:
        cached = self.__dict__.get("_leaf_bit_cache")
        if cached is None:
            cached = {path: i for i, path in enumerate(self.leaf_paths)}
            self.__dict__["_leaf_bit_cache"] = cached
        return cached


@dataclass(frozen=True)
class Calibration:
    """Evidence about the original input gathered before shrinking (for example the runs the
    oracle used to decide that it fails). ``runs`` are assumed to have used trial indices
    ``0..runs-1``; the shrinker continues from there."""

    runs: int
    failures: int
    signature: Hashable

    def __post_init__(self) -> None:
        if self.runs < 0 or not 0 <= self.failures <= self.runs:
            raise InvalidArgument(
                f"Calibration needs 0 <= failures <= runs, got failures={self.failures}, "
                f"runs={self.runs}."
            )


@dataclass(frozen=True)
class ShrinkResult(Generic[C]):
    """What :func:`shrink` found.

    ``reproducer`` is the smallest candidate confirmed to fail with ``signature`` (the
    original if nothing smaller was confirmed). ``minimal`` is true when every remaining
    removable unit was *decided* necessary; it is false when the budget ran out first or the
    original never reproduced. ``stop_reason`` says which.
    """

    reproducer: C
    units: tuple[Unit[Any], ...]
    original: C
    signature: Hashable
    runs: int
    queries: int
    log: tuple[QueryRecord, ...]
    budget: int
    budget_exhausted: bool
    minimal: bool
    stop_reason: str
    original_rate: RateEstimate
    pooled_rate: float
    pooled_rate_interval: tuple[float, float]
    other_signatures: dict[Hashable, int]
    kept_leaves: int
    original_leaves: int
    reproducer_trials_used: int
    original_trials_used: int

    def summary(self) -> str:
        lines = [
            f"shrunk {self.original_leaves} -> {self.kept_leaves} units in {self.runs} runs "
            f"({self.queries} queries; budget {self.budget}{', exhausted' if self.budget_exhausted else ''})",
            f"signature: {self.signature!r}; original: {self.original_rate}",
            f"stopped: {self.stop_reason}",
        ]
        if self.other_signatures:
            lines.append(f"other failures seen while shrinking: {dict(self.other_signatures)!r}")
        return "\n".join(lines)


def _validate_probability(name: str, value: float, *, low_open: bool = True) -> None:
    ok = (0.0 < value < 1.0) if low_open else (0.0 <= value < 1.0)
    if not isinstance(value, (int, float)) or not ok:
        interval = "(0, 1)" if low_open else "[0, 1)"
        raise InvalidArgument(f"{name} must be a probability in {interval}, got {value!r}.")


@dataclass
class _Search(Generic[T]):
    index: UnitIndex[T]
    engine: QueryEngine
    small_level: int
    current: int = 0
    removed_any: bool = False

    def try_remove(self, nodes: Sequence[_Node], *, look: int | None, phase: str) -> Verdict:
        removed_mask = 0
        for node in nodes:
            removed_mask |= node.mask
        candidate = self.current & ~removed_mask
        if candidate == self.current:
            return Verdict.DOES_NOT_REPRODUCE
        verdict = self.engine.ask(
            candidate,
            look=look,
            phase=phase,
            depth=nodes[0].depth,
            removed=tuple(n.label for n in nodes),
        )
        if verdict is Verdict.REPRODUCES:
            self.current = candidate
            self.removed_any = True
        return verdict

    def chunks(self, depth: int) -> None:
        nodes = self.index.removable(depth, self.current)
        size = len(nodes) // 2
        while size >= 2 and not self.engine.exhausted:
            i = 0
            while i < len(nodes) and not self.engine.exhausted:
                chunk = nodes[i : i + size]
                if len(chunk) < 2:
                    break
                if self.try_remove(chunk, look=0, phase="explore") is Verdict.REPRODUCES:
                    nodes = self.index.removable(depth, self.current)
                else:
                    i += size
            size //= 2

    def one_at_a_time(self, depth: int, *, look: int | None, phase: str) -> bool:
        """One pass of single-unit deletions at ``depth``; True if every remaining unit has a
        decided "needed" verdict."""
        all_decided = True
        i = 0
        nodes = self.index.removable(depth, self.current)
        while i < len(nodes):
            if self.engine.exhausted:
                return False
            verdict = self.try_remove([nodes[i]], look=look, phase=phase)
            if verdict is Verdict.REPRODUCES:
                nodes = self.index.removable(depth, self.current)
                continue
            if verdict is Verdict.UNDECIDED:
                all_decided = False
            i += 1
        return all_decided

    def run(self) -> bool:
        """Explore, then confirm with ever longer looks; True when the result was proved
        minimal (every remaining removable unit decided necessary)."""
        for depth in range(self.index.depth):
            if self.engine.exhausted:
                return False
            if len(self.index.removable(depth, self.current)) > self.small_level:
                self.chunks(depth)
            self.one_at_a_time(depth, look=0, phase="explore")
        look = 1
        while not self.engine.exhausted:
            final = self.engine.look_is_final(look)
            self.removed_any = False
            decided = True
            for depth in range(self.index.depth):
                decided = self.one_at_a_time(
                    depth, look=None if final else look, phase="confirm"
                ) and decided
                if self.engine.exhausted:
                    return False
            if final and not self.removed_any:
                return decided
            if not final:
                look += 1
        return False


def shrink(
    units: Sequence[Unit[T]],
    run: Callable[[C, int], Outcome],
    *,
    budget: int,
    build: Callable[[tuple[Unit[T], ...]], C] | None = None,
    signature: Hashable = None,
    calibration: Calibration | None = None,
    background_rate: float = 0.0,
    miss_error: float = 1e-3,
    false_reproduce_error: float = 1e-3,
    protected: Callable[[Unit[T]], bool] | None = None,
    small_level: int = 8,
    calibration_failures: int | None = None,
    max_calibration_runs: int = 50,
    provisional_miss: float = 0.1,
    assume_monotone: bool = True,
) -> ShrinkResult[C]:
    """Shrink a failing input to a small one that still fails the same way, under noise.

    ``run(candidate, trial_index)`` runs the test once on a candidate (as built by ``build``
    from the kept units; by default the candidate *is* the tuple of kept units) and returns an
    :class:`~agentprop._shrink.query.Outcome`. ``budget`` is the total number of runs
    (calibration included) and is never exceeded. ``signature`` is the failure to chase; if
    omitted, the first failure seen while calibrating defines it. ``background_rate`` is the
    rate at which candidates that do *not* reproduce still fail with that signature (0 for a
    specific signature); above 0 every query becomes an SPRT.

    ``miss_error`` bounds the chance that a query wrongly says "does not reproduce" (which
    leaves a removable unit in the result); ``false_reproduce_error`` bounds the chance that
    it wrongly says "reproduces" (only possible with background noise).
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise InvalidArgument(f"budget must be a positive int (a number of runs), got {budget!r}.")
    _validate_probability("miss_error", miss_error)
    _validate_probability("false_reproduce_error", false_reproduce_error)
    _validate_probability("background_rate", background_rate, low_open=False)
    _validate_probability("provisional_miss", provisional_miss)
    if not isinstance(small_level, int) or small_level < 1:
        raise InvalidArgument(f"small_level must be a positive int, got {small_level!r}.")
    if calibration is not None and not isinstance(calibration, Calibration):
        raise InvalidArgument(
            f"calibration must be a Calibration(runs=..., failures=..., signature=...), got {calibration!r}."
        )
    if calibration is not None and signature is not None and calibration.signature != signature:
        raise InvalidArgument(
            f"signature={signature!r} disagrees with calibration.signature="
            f"{calibration.signature!r}; pass one of them."
        )
    index = UnitIndex(units, protected)
    if not index.leaf_paths:
        raise InvalidArgument("shrink() needs at least one unit to shrink.")
    if not callable(run):
        raise InvalidArgument(f"run must be callable as run(candidate, trial_index), got {run!r}.")
    make: Callable[[tuple[Unit[T], ...]], Any] = build if build is not None else (lambda forest: forest)
    built: dict[int, Any] = {}

    def oracle(mask: int, trial: int) -> Outcome:
        candidate = built.get(mask)
        if candidate is None:
            candidate = make(index.forest(mask))
            if len(built) > 4096:
                built.clear()
            built[mask] = candidate
        return run(candidate, trial)

    engine = QueryEngine(
        oracle=oracle,
        budget=budget,
        background_rate=background_rate,
        miss_error=miss_error,
        false_reproduce_error=false_reproduce_error,
        provisional_miss=provisional_miss,
        monotone=assume_monotone,
        signature=calibration.signature if calibration is not None else signature,
    )
    full = index.full_mask
    if calibration is not None:
        engine.seed(full, runs=calibration.runs, failures=calibration.failures)
    if engine.verdict_of(full) is not Verdict.REPRODUCES:
        wanted = calibration_failures if calibration_failures is not None else (
            1 if background_rate == 0.0 else 3
        )
        engine.calibrate(
            full,
            min_failures=wanted,
            min_runs=0 if background_rate == 0.0 else 10,
            max_runs=min(max_calibration_runs, budget) + engine.runs_of(full),
        )
    search = _Search(index=index, engine=engine, small_level=small_level, current=full)
    original_entry = engine.entry(full)
    if engine.verdict_of(full) is not Verdict.REPRODUCES:
        minimal, reason = False, (
            f"the original input did not fail with the signature in {original_entry.runs} runs; "
            "nothing to shrink (check that the failure reproduces, or pass calibration= with "
            "the evidence that it does)"
        )
    elif background_rate > 0.0 and engine.planning_rate() <= 1.5 * background_rate:
        minimal, reason = False, (
            f"the original's failure rate ({RateEstimate(original_entry.failures, original_entry.runs)}) "
            f"is not clearly above background_rate={background_rate}; queries could not tell a "
            "reproduction from noise"
        )
    else:
        minimal = search.run()
        if minimal:
            reason = "minimal: every remaining unit was shown to be needed"
        elif engine.exhausted:
            reason = "budget exhausted; returning the smallest confirmed reproducer so far"
        else:
            reason = "stopped with undecided units"
    forest = index.forest(search.current)
    posterior = engine.rate_posterior()
    return ShrinkResult(
        reproducer=make(forest),
        units=forest,
        original=make(index.forest(full)),
        signature=engine.signature,
        runs=engine.spent,
        queries=sum(1 for r in engine.log if r.runs and r.source == "ran"),
        log=tuple(engine.log),
        budget=budget,
        budget_exhausted=engine.exhausted,
        minimal=minimal,
        stop_reason=reason,
        original_rate=RateEstimate(original_entry.failures, original_entry.runs),
        pooled_rate=posterior.mean,
        pooled_rate_interval=(posterior.quantile(0.025), posterior.quantile(0.975)),
        other_signatures=dict(engine.other_signatures),
        kept_leaves=search.current.bit_count(),
        original_leaves=full.bit_count(),
        reproducer_trials_used=engine.runs_of(search.current),
        original_trials_used=engine.runs_of(full),
    )


@dataclass(frozen=True)
class Verification:
    """Fresh-run reproduction rates of the reproducer and of the original, side by side."""

    reproducer: RateEstimate
    original: RateEstimate
    signature: Hashable
    fresh_from: int

    def __str__(self) -> str:
        return f"reproducer {self.reproducer}; original {self.original}"


def verify(
    result: ShrinkResult[C],
    run: Callable[[C, int], Outcome],
    *,
    runs: int = 30,
    rerun_original: bool = False,
) -> Verification:
    """Re-run the reproducer ``runs`` times with trial indices it has never used and report
    its rate of the shrunk signature with a Wilson interval, next to the original's (its
    calibration evidence, or ``runs`` fresh runs of it with ``rerun_original=True``)."""
    if not isinstance(runs, int) or runs < 1:
        raise InvalidArgument(f"runs must be a positive int, got {runs!r}.")
    start = max(result.reproducer_trials_used, result.original_trials_used)

    def rate(candidate: C) -> RateEstimate:
        failures = 0
        for trial in range(start, start + runs):
            outcome = run(candidate, trial)
            if outcome.failed and outcome.signature == result.signature:
                failures += 1
        return RateEstimate(failures, runs)

    original = rate(result.original) if rerun_original else result.original_rate
    return Verification(rate(result.reproducer), original, result.signature, start)
