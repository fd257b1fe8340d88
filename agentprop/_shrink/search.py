"""The searches of the statistical shrinker, and the input model they work on.

An input is a forest of :class:`Unit` objects; a candidate is a bit mask over its leaves. A
unit with children exists as long as one of its leaves does; a protected unit, and any unit
holding one, is never removed. The search calibrates, explores level by level, then confirms.
The current candidate only changes to one a query confirmed, so the search is anytime: it
always holds the smallest confirmed reproducer found so far.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentprop._shrink.query import (
    Outcome,
    QueryEngine,
    QueryRecord,
    QueryVerdict,
    ReproductionRate,
)
from agentprop.errors import InvalidArgument

__all__ = [
    "Calibration",
    "ShrinkResult",
    "Unit",
    "UnitIndex",
    "Verification",
    "shrink",
    "runs_to_see",
    "verify",
]

T = TypeVar("T")
C = TypeVar("C")


@dataclass(frozen=True)
class Unit(Generic[T]):
    """One unit of a shrinkable input: a payload and, optionally, finer units inside it.

    ``value`` is whatever the caller's ``build`` function needs (a turn's role, a clause's
    text, a token). ``children`` are the finer units the search descends into after this
    level. ``protected`` units (ids, amounts and other slots the failure is about) are never
    removed, and neither is any unit containing one. ``label`` names the unit in the log.
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
    def leaves(
        cls, values: Sequence[T], *, protected: Callable[[T], bool] | None = None
    ) -> tuple[Unit[T], ...]:
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
    """A forest of units flattened into leaf bits and per-depth nodes; rebuilds the pruned
    forest for any mask of kept leaves."""

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
            node = _Node(path, depth, mask, not holds_protected, unit.describe())
            self.levels[depth].append(node)
            return mask, holds_protected

        for i, unit in enumerate(self.units):
            if not isinstance(unit, Unit):
                raise InvalidArgument(
                    f"Expected a sequence of Unit objects, got {unit!r} at position {i}."
                )
            visit(unit, (i,), False)
        for level in self.levels:
            level.sort(key=lambda node: node.path)
        self.full_mask = (1 << len(self.leaf_paths)) - 1
        self._leaf_bit = {path: i for i, path in enumerate(self.leaf_paths)}

    @property
    def depth(self) -> int:
        return len(self.levels)

    def removable(self, depth: int, mask: int) -> list[_Node]:
        """Removable nodes at ``depth`` still present in ``mask``, in document order."""
        return [n for n in self.levels[depth] if n.removable and n.mask & mask]

    def forest(self, mask: int) -> tuple[Unit[T], ...]:
        """The original forest pruned to the leaves in ``mask`` (unchanged units are reused)."""

        def prune(unit: Unit[T], path: tuple[int, ...]) -> Unit[T] | None:
            if not unit.children:
                return unit if mask >> self._leaf_bit[path] & 1 else None
            kept = []
            for i, child in enumerate(unit.children):
                pruned = prune(child, path + (i,))
                if pruned is not None:
                    kept.append(pruned)
            if not kept:
                return None
            if len(kept) == len(unit.children) and all(a is b for a, b in zip(kept, unit.children)):
                return unit
            return dataclasses.replace(unit, children=tuple(kept))

        out = []
        for i, unit in enumerate(self.units):
            pruned = prune(unit, (i,))
            if pruned is not None:
                out.append(pruned)
        return tuple(out)


@dataclass(frozen=True)
class Calibration:
    """Evidence about the original input gathered before shrinking, for example the runs the
    oracle used to decide that it fails. They are taken to have used trial indices
    ``0..runs-1``; the shrinker's own runs of the original continue from ``runs``."""

    runs: int
    failures: int
    signature: Hashable

    def __post_init__(self) -> None:
        if self.runs < 0 or not 0 <= self.failures <= self.runs:
            raise InvalidArgument(
                "Calibration needs 0 <= failures <= runs, got "
                f"failures={self.failures}, runs={self.runs}."
            )


@dataclass(frozen=True)
class ShrinkResult(Generic[C]):
    """What :func:`shrink` found.

    ``reproducer`` is the smallest candidate confirmed to fail with ``signature`` (the
    original when nothing smaller was confirmed) and ``units`` its pruned forest. ``minimal``
    is true when every remaining removable unit was *decided* necessary; it is false when the
    budget ran out first or the original never reproduced, and ``stop_reason`` says which.
    ``runs`` counts every run, calibration included; ``queries`` the queries that ran;
    ``judge_calls`` the judge-model calls the runs' verdicts took (each spends one run of the
    budget, so ``runs + judge_calls`` stays within it, but for the last run's calls).
    ``pooled_rate`` is the posterior mean reproduction rate the queries were planned with.
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
    original_rate: ReproductionRate
    pooled_rate: float
    pooled_rate_interval: tuple[float, float]
    other_signatures: dict[Hashable, int]
    kept_leaves: int
    original_leaves: int
    reproducer_trials_used: int
    original_trials_used: int
    judge_calls: int = 0
    reproducer_rate: ReproductionRate | None = None
    """The confirmed reproducer's own evidence (failures with the signature in its runs):
    what a further search starting from it can take as its calibration."""
    single_removals: tuple[tuple[str, int, int], ...] = ()
    """Set when ``minimal``: each single simplification of the result (one removable unit
    taken out), the clean runs that speak against it (its own, which alone decided it, and
    under monotonicity those of candidates containing it that never failed) and how many of
    those were its own."""
    miss_error: float = 1e-3
    """The chance each "does not reproduce" verdict is wrong (the queries' planning error)."""

    def minimality(self) -> str:
        """What was checked of ``minimal``, from measured runs ("1-minimal at X% confidence:
        each single simplification passed N runs"), or what was not checked."""
        if not self.minimal:
            return f"not shown 1-minimal: {self.stop_reason}"
        return one_minimal_statement(self.single_removals, self.miss_error)

    def summary(self) -> str:
        exhausted = ", exhausted" if self.budget_exhausted else ""
        lines = [
            (
                f"shrunk {self.original_leaves} -> {self.kept_leaves} units in {self.runs} runs "
                + (f"and {self.judge_calls} judge calls " if self.judge_calls else "")
                + f"({self.queries} queries; budget {self.budget}{exhausted})"
            ),
            f"signature {self.signature!r}; original failed {self.original_rate}",
            f"stopped: {self.stop_reason}",
        ]
        if self.other_signatures:
            lines.append(f"other failures seen while shrinking: {self.other_signatures!r}")
        return "\n".join(lines)


def one_minimal_statement(
    single_removals: Sequence[tuple[str, int, int]], miss_error: float
) -> str:
    """The sentence "1-minimal at X% confidence: each single simplification passed N runs": X is the
    union bound over the simplifications (each "does not reproduce" is wrong with probability at
    most ``miss_error``), N the measured clean runs that decided each (a range when they differ),
    and how many of them were the simplification's own runs."""
    k = len(single_removals)
    if not k:
        return "1-minimal: nothing removable is left"
    confidence = max(0.0, 1.0 - k * miss_error)
    clean = sorted(n for _, n, _ in single_removals)
    own = sum(o for _, _, o in single_removals)
    total = sum(clean)
    runs = f"{clean[0]}" if clean[0] == clean[-1] else f"{clean[0]}-{clean[-1]}"
    where = (
        "all on the simplifications themselves"
        if own == total
        else (
            f"{own} of these {total} runs on the simplifications themselves; the rest, on larger "
            "candidates without the unit, count only if no unit masks the failure"
        )
    )
    return (
        f"1-minimal at {confidence:.1%} confidence: each of the {k} single simplification(s) "
        f"passed {runs} run(s) without the failure ({where})"
    )


def _check_probability(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and ((0.0 <= value < 1.0) if allow_zero else (0.0 < value < 1.0))
    )
    if not ok:
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise InvalidArgument(f"{name} must be a probability in {interval}, got {value!r}.")


@dataclass
class _Search(Generic[T]):
    index: UnitIndex[T]
    engine: QueryEngine
    small_level: int
    current: int
    removed_any: bool = False

    def try_remove(self, nodes: Sequence[_Node], *, look: int | None, phase: str) -> QueryVerdict:
        removed = 0
        for node in nodes:
            removed |= node.mask
        candidate = self.current & ~removed
        verdict = self.engine.ask(
            candidate,
            look=look,
            phase=phase,
            depth=nodes[0].depth,
            removed=tuple(n.label for n in nodes),
        )
        if verdict is QueryVerdict.REPRODUCES:
            self.current = candidate
            self.removed_any = True
        return verdict

    def chunks(self, depth: int, *, largest: int | None = None) -> None:
        """First looks at removing halves, quarters, ... of a level (chunks of at most
        ``largest`` units)."""
        nodes = self.index.removable(depth, self.current)
        size = len(nodes) // 2 if largest is None else min(largest, len(nodes) // 2)
        while size >= 2 and not self.engine.exhausted:
            i = 0
            while i + 1 < len(nodes) and not self.engine.exhausted:
                chunk = nodes[i : i + size]
                if self.try_remove(chunk, look=0, phase="explore") is QueryVerdict.REPRODUCES:
                    nodes = self.index.removable(depth, self.current)
                else:
                    i += size
            size //= 2

    def one_at_a_time(self, depth: int, *, look: int | None, phase: str) -> bool:
        """One pass of single-unit removals at ``depth``; True when every remaining unit there
        was decided necessary."""
        all_decided = True
        nodes = self.index.removable(depth, self.current)
        i = 0
        while i < len(nodes):
            if self.engine.exhausted:
                return False
            verdict = self.try_remove([nodes[i]], look=look, phase=phase)
            if verdict is QueryVerdict.REPRODUCES:
                nodes = self.index.removable(depth, self.current)
                continue
            all_decided = all_decided and verdict is QueryVerdict.DOES_NOT_REPRODUCE
            i += 1
        return all_decided

    def check_singles(self) -> str:
        """Run every single simplification of the current reproducer (one removable unit taken
        out) that lacks runs of its own: a verdict inferred from larger candidates assumes
        monotonicity, which a unit that masks the failure breaks. ``"moved"`` when one
        reproduced (it is the new current), ``"unpaid"`` when the budget ran out first,
        ``"checked"`` when each was decided on its own runs."""
        seen: set[int] = set()
        for depth in range(self.index.depth):
            for node in self.index.removable(depth, self.current):
                candidate = self.current & ~node.mask
                if candidate in seen:
                    continue
                seen.add(candidate)
                verdict = self.engine.check_own(
                    candidate, phase="check", depth=depth, removed=(node.label,)
                )
                if verdict is QueryVerdict.REPRODUCES:
                    self.current = candidate
                    return "moved"
                if verdict is not QueryVerdict.DOES_NOT_REPRODUCE:
                    return "unpaid"
        return "checked"

    def run(self) -> bool:
        """Explore, then confirm with ever longer looks; True when the result was proved
        minimal."""
        for depth in range(self.index.depth):
            if self.engine.exhausted:
                return False
            size = len(self.index.removable(depth, self.current))
            if size > self.small_level:
                self.chunks(depth)
            elif size >= 4 and self.engine.background_rate == 0.0 and self.engine.rate_settled():
                # Pairs only with a specific signature: there a failing pair costs a short
                # first look that still counts as evidence; with background noise every
                # query is a full SPRT.
                self.chunks(depth, largest=2)
            self.one_at_a_time(depth, look=0, phase="explore")
        look = 1
        while not self.engine.exhausted:
            final = self.engine.look_is_final(look)
            self.removed_any = False
            decided = True
            for depth in range(self.index.depth):
                swept = self.one_at_a_time(depth, look=None if final else look, phase="confirm")
                decided = decided and swept
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
    """Shrink a failing input to a smaller one that still fails the same way, under noise.

    ``units`` is the input as a forest of :class:`Unit`. ``build(kept_units)`` turns the kept
    units into the candidate the test runs on (by default the candidate *is* the tuple of
    kept units), and ``run(candidate, trial_index)`` runs the test once and returns an
    :class:`~agentprop._shrink.query.Outcome`. ``budget`` caps the total number of runs,
    calibration included; it is never exceeded, and whatever happens the result holds the
    smallest reproducer confirmed so far.

    ``signature`` is the failure to chase (the first failure seen while calibrating, if
    omitted); failures with any other signature count as passes and are reported in
    ``other_signatures``. ``calibration`` passes evidence about the original gathered
    elsewhere, saving the calibration runs. ``background_rate`` is the rate at which
    candidates that do *not* reproduce still fail with the signature: 0 for a specific
    signature, and above 0 every query becomes an SPRT.

    ``miss_error`` bounds the chance that a query wrongly says "does not reproduce" (which
    leaves a removable unit in the result); ``false_reproduce_error`` the chance that it
    wrongly says "reproduces" (only possible with background noise). ``protected(unit)``
    marks more units as never removable. ``small_level`` is the level size above which the
    search tries chunks before single units. ``assume_monotone=False`` turns off the
    inferences that rely on "a candidate containing a reproducer reproduces".
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise InvalidArgument(f"budget must be a positive int (a number of runs), got {budget!r}.")
    _check_probability("miss_error", miss_error)
    _check_probability("false_reproduce_error", false_reproduce_error)
    _check_probability("background_rate", background_rate, allow_zero=True)
    _check_probability("provisional_miss", provisional_miss)
    if not isinstance(small_level, int) or isinstance(small_level, bool) or small_level < 1:
        raise InvalidArgument(f"small_level must be a positive int, got {small_level!r}.")
    if not isinstance(max_calibration_runs, int) or max_calibration_runs < 1:
        raise InvalidArgument(
            f"max_calibration_runs must be a positive int, got {max_calibration_runs!r}."
        )
    if calibration_failures is not None and (
        not isinstance(calibration_failures, int) or calibration_failures < 1
    ):
        raise InvalidArgument(
            f"calibration_failures must be a positive int or None, got {calibration_failures!r}."
        )
    if calibration is not None and not isinstance(calibration, Calibration):
        raise InvalidArgument(
            "calibration must be Calibration(runs=..., failures=..., signature=...), "
            f"got {calibration!r}."
        )
    if calibration is not None and signature is not None and calibration.signature != signature:
        raise InvalidArgument(
            f"signature={signature!r} disagrees with "
            f"calibration.signature={calibration.signature!r}; pass only one of them."
        )
    if not callable(run):
        raise InvalidArgument(f"run must be callable as run(candidate, trial_index), got {run!r}.")
    index = UnitIndex(units, protected)
    if not index.leaf_paths:
        raise InvalidArgument("shrink() needs at least one unit to shrink; got an empty input.")
    make: Callable[[tuple[Unit[T], ...]], Any] = build if build is not None else (lambda f: f)
    built: dict[int, Any] = {}

    def oracle(mask: int, trial: int) -> Outcome:
        candidate = built.get(mask)
        if candidate is None:
            if len(built) >= 4096:
                built.clear()
            candidate = built[mask] = make(index.forest(mask))
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
    if engine.verdict_of(full) is not QueryVerdict.REPRODUCES:
        noisy = background_rate > 0.0
        engine.calibrate(
            full,
            min_failures=calibration_failures or (3 if noisy else 1),
            min_runs=10 if noisy else 0,
            max_runs=engine.runs_of(full) + max_calibration_runs,
        )
    search = _Search(index=index, engine=engine, small_level=small_level, current=full)
    original_rate = ReproductionRate(engine.failures_of(full), engine.runs_of(full))
    if engine.verdict_of(full) is not QueryVerdict.REPRODUCES:
        minimal = False
        reason = (
            f"the original input did not fail with the signature in {original_rate.runs} runs, "
            "so there is nothing to shrink; check that the failure reproduces, raise "
            "max_calibration_runs, or pass calibration= with the evidence that it fails"
        )
    elif background_rate > 0.0 and engine.planning_rate() <= 1.5 * background_rate:
        minimal = False
        reason = (
            f"the original's failure rate ({original_rate}) is not clearly above "
            f"background_rate={background_rate}, so queries could not tell a reproduction "
            "from noise; give the signature more detail or calibrate with more runs"
        )
    elif not any(index.removable(d, full) for d in range(index.depth)):
        minimal, reason = True, "nothing to remove: every unit is protected"
    else:
        checked = ""
        minimal = search.run()
        while minimal:
            checked = search.check_singles()
            if checked != "moved":
                minimal = checked == "checked"
                break
            minimal = search.run()  # a simplification reproduced on its own runs: go on from it
        if minimal:
            reason = "minimal: " + one_minimal_statement(
                _single_removals(index, engine, search.current), miss_error
            )
        elif checked == "unpaid":
            reason = (
                "the budget ran out before every single simplification was run itself (inferring "
                "them from larger candidates assumes monotonicity), so 1-minimality was not "
                "checked; returning the smallest confirmed reproducer so far"
            )
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
        runs=engine.spent - engine.judge_calls,
        judge_calls=engine.judge_calls,
        queries=sum(1 for r in engine.log if r.source == "ran"),
        log=tuple(engine.log),
        budget=budget,
        budget_exhausted=engine.exhausted,
        minimal=minimal,
        stop_reason=reason,
        original_rate=original_rate,
        pooled_rate=posterior.mean,
        pooled_rate_interval=(posterior.quantile(0.025), posterior.quantile(0.975)),
        other_signatures=dict(engine.other_signatures),
        kept_leaves=search.current.bit_count(),
        original_leaves=full.bit_count(),
        reproducer_trials_used=engine.runs_of(search.current),
        original_trials_used=engine.runs_of(full),
        reproducer_rate=ReproductionRate(
            engine.failures_of(search.current), engine.runs_of(search.current)
        ),
        single_removals=_single_removals(index, engine, search.current) if minimal else (),
        miss_error=miss_error,
    )


def _single_removals(
    index: UnitIndex[Any], engine: QueryEngine, current: int
) -> tuple[tuple[str, int, int], ...]:
    """Each removable unit of ``current`` (leaf or group, every depth), the clean runs that
    speak against ``current`` without it, and how many of them it ran itself."""
    out: list[tuple[str, int, int]] = []
    seen: set[int] = set()
    for depth in range(index.depth):
        for node in index.removable(depth, current):
            candidate = current & ~node.mask
            if candidate not in seen:  # a group of one unit and its unit are one simplification
                seen.add(candidate)
                own = engine.runs_of(candidate) - engine.failures_of(candidate)
                out.append((node.label, engine.clean_evidence(candidate), own))
    return tuple(out)


@dataclass(frozen=True)
class Verification:
    """Fresh-run reproduction rates of the reproducer and of the original, side by side
    (each with its 95% Wilson interval)."""

    reproducer: ReproductionRate
    original: ReproductionRate
    signature: Hashable
    first_trial: int
    refused: int = 0
    """Runs of the reproducer that were asked for but not made (``Outcome.refused()``): the
    rate counts only the runs made, so ``reproducer.runs`` may be fewer than asked, or 0."""

    def __str__(self) -> str:
        return f"reproducer failed {self.reproducer}; original failed {self.original}"


def verify(
    result: ShrinkResult[C],
    run: Callable[[C, int], Outcome],
    *,
    runs: int = 30,
    rerun_original: bool = False,
    see_rate: float | None = None,
    max_runs: int | None = None,
) -> Verification:
    """Re-run the reproducer ``runs`` times with trial indices the shrinker never used and
    report how often it fails with the shrunk signature, next to the original's rate (its
    calibration evidence, or ``runs`` fresh runs of it with ``rerun_original=True``).

    ``runs`` is the least; with ``see_rate`` (a rate the failure is known to have, such as
    the original's), a reproducer still clean after ``runs`` gets more runs, up to
    ``max_runs``, until a failure at that rate would have shown with 95% probability. A run
    the caller refuses (``Outcome.refused()``) ends the verification; only runs made count."""
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise InvalidArgument(f"runs must be a positive int, got {runs!r}.")
    first = max(result.reproducer_trials_used, result.original_trials_used)
    wanted = runs
    if see_rate is not None and 0.0 < see_rate < 1.0:
        wanted = max(runs, min(max_runs if max_runs is not None else runs, runs_to_see(see_rate)))
    refused = 0

    def rate(candidate: C, least: int, most: int) -> ReproductionRate:
        nonlocal refused
        failures = made = 0
        while made < least or (failures == 0 and made < most):
            outcome = run(candidate, first + made)
            if outcome.not_run:
                refused += (most if failures == 0 else least) - made
                break
            made += 1
            if outcome.failed and outcome.signature == result.signature:
                failures += 1
        return ReproductionRate(failures, made)

    original = rate(result.original, runs, runs) if rerun_original else result.original_rate
    return Verification(
        rate(result.reproducer, runs, wanted), original, result.signature, first, refused
    )


def runs_to_see(rate: float, confidence: float = 0.95) -> int:
    """Runs in which a failure of probability ``rate`` shows at least once with
    ``confidence``: the smallest ``n`` with ``(1 - rate)^n <= 1 - confidence``."""
    if not 0.0 < rate < 1.0:
        return 1
    return max(1, math.ceil(math.log1p(-confidence) / math.log1p(-rate)))
