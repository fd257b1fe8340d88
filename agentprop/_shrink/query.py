"""The per-query decision of the statistical shrinker: "does this candidate still fail?".

A query is a small sequential test over runs of the candidate (trial ``k`` of a candidate is
always the same run). :class:`QueryEngine` keeps a ledger per candidate and answers
``REPRODUCES``, ``DOES_NOT_REPRODUCE`` or ``UNDECIDED``. With ``eps == 0`` one matching failure
proves a reproduction; with ``eps > 0`` each query is an SPRT, and an undecided query counts as
"does not reproduce". Under monotonicity the ledger answers many queries without a run.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING

from agentprop.errors import InvalidArgument

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Outcome",
    "QueryEngine",
    "QueryRecord",
    "ReproductionRate",
    "RatePosterior",
    "QueryVerdict",
    "wilson_interval",
]


@dataclass(frozen=True)
class Outcome:
    """The result of one run of a candidate: passed, or failed with a hashable signature.

    The signature names *which* failure happened (for example the contract, clause and step
    that failed) so that a different failure met while shrinking is not mistaken for the
    one being shrunk.
    """

    failed: bool
    signature: Hashable = None
    not_run: bool = False
    """The run could not be made (a shared budget refused it): it says nothing about the
    candidate. The engine stops as if its own budget were spent; it is never counted."""
    judge_calls: int = 0
    """Calls to a judge model the run's verdict took. Each counts as one run of the budget
    (a run judged by a model costs ``1 + judge_calls``)."""

    @classmethod
    def passed(cls, judge_calls: int = 0) -> Outcome:
        """A run in which nothing failed."""
        return cls(False, None, judge_calls=judge_calls)

    @classmethod
    def refused(cls) -> Outcome:
        """A run that was not made (a budget outside the shrinker refused it)."""
        return cls(False, None, not_run=True)

    @classmethod
    def failure(cls, signature: Hashable, judge_calls: int = 0) -> Outcome:
        """A run that failed with ``signature``."""
        return cls(True, signature, judge_calls=judge_calls)


class QueryVerdict(str, Enum):
    """The answer to one query."""

    REPRODUCES = "reproduces"
    DOES_NOT_REPRODUCE = "does not reproduce"
    UNDECIDED = "undecided"


def wilson_interval(failures: int, runs: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default).

    Returns ``(0.0, 1.0)`` when there are no runs.
    """
    if runs < 0 or failures < 0 or failures > runs:
        raise InvalidArgument(
            f"wilson_interval needs 0 <= failures <= runs, got failures={failures}, runs={runs}."
        )
    if runs == 0:
        return (0.0, 1.0)
    p = failures / runs
    z2 = z * z
    denom = 1.0 + z2 / runs
    centre = (p + z2 / (2 * runs)) / denom
    half = z * math.sqrt(p * (1.0 - p) / runs + z2 / (4 * runs * runs)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class ReproductionRate:
    """Matching failures out of runs, with the point estimate and a 95% Wilson interval."""

    failures: int
    runs: int

    @property
    def rate(self) -> float:
        return self.failures / self.runs if self.runs else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.failures, self.runs)

    def __str__(self) -> str:
        if not self.runs:
            return "no runs"
        low, high = self.interval
        return f"{self.failures}/{self.runs} = {self.rate:.2f} (95% CI {low:.2f}-{high:.2f})"


@cache
def _grid() -> np.ndarray:
    """The posterior's grid of rates: 1000 midpoints of (0, 1)."""
    import numpy as np

    return (np.arange(1, 1001) - 0.5) / 1000.0


class RatePosterior:
    """Posterior of a reproduction rate ``q`` from ``failures`` out of ``runs``, on a grid.

    The prior is ``Beta(a, b)``; the grid (1000 midpoints) keeps the tail near ``q = 0``,
    which dominates ``E[(1 - q)^n]``, accurate without special functions.
    """

    def __init__(self, failures: int, runs: int, prior: tuple[float, float] = (1.0, 3.0)) -> None:
        import numpy as np  # not at import: ``agentprop run`` imports this module, numpy is slow

        self._Q = _grid()
        a, b = prior
        log_post = (failures + a - 1.0) * np.log(self._Q) + (runs - failures + b - 1.0) * np.log1p(
            -self._Q
        )
        weights = np.exp(log_post - log_post.max())
        self.weights: np.ndarray = weights / weights.sum()

    @property
    def mean(self) -> float:
        return float(self.weights.dot(self._Q))

    def quantile(self, prob: float) -> float:
        cumulative = self.weights.cumsum()
        return float(self._Q[min(int(cumulative.searchsorted(prob)), self._Q.size - 1)])

    def miss_probability(self, runs: int) -> float:
        """``E[(1 - q)^runs]``: the chance that a reproducing candidate stays clean that long."""
        return float(self.weights.dot((1.0 - self._Q) ** runs))

    def runs_to_rule_out(self, error: float, limit: int) -> int:
        """Smallest ``n <= limit`` with ``E[(1 - q)^n] <= error`` (``limit`` if there is none)."""
        if self.miss_probability(limit) > error:
            return limit
        low, high = 0, limit
        while high - low > 1:
            mid = (low + high) // 2
            if self.miss_probability(mid) <= error:
                high = mid
            else:
                low = mid
        return high


@dataclass(frozen=True)
class QueryRecord:
    """One line of the shrinker's per-query log.

    ``source`` says how the verdict was reached: ``"ran"`` (the query spent runs),
    ``"memo"`` (the candidate already had a verdict), ``"inferred"`` (monotonicity or evidence
    gathered earlier decided it for free), ``"deferred"`` (a partial look whose evidence was
    already in hand), ``"calibration"`` (runs of the original) or ``"given"`` (evidence about
    the original passed in by the caller). ``clean_evidence`` and ``runs_needed`` are the clean
    runs counted against the candidate and the count that rules it out (specific signature).
    """

    index: int
    phase: str
    depth: int | None
    removed: tuple[str, ...]
    kept: int
    runs: int
    failures: int
    other_failures: int
    verdict: QueryVerdict
    source: str
    total_runs: int
    clean_evidence: int = 0
    runs_needed: int = 0


@dataclass
class _Entry:
    runs: int = 0
    failures: int = 0
    other: int = 0
    verdict: QueryVerdict | None = None


Oracle = Callable[[int, int], Outcome]
"""``oracle(mask, trial_index) -> Outcome`` on the engine's integer candidate masks."""


@dataclass
class QueryEngine:
    """Answers queries about candidates (integer bit masks of kept leaves) within a budget.

    The engine owns the run budget (it never starts a run the budget cannot pay for), the
    ledger of every candidate it ran, the rate posterior and the per-query log. It knows
    nothing about what the masks mean; the search builds them.
    """

    oracle: Oracle
    budget: int
    background_rate: float = 0.0
    miss_error: float = 1e-3
    false_reproduce_error: float = 1e-3
    provisional_miss: float = 0.1
    provisional_quantile: float = 0.25
    planning_quantile: float = 0.2
    prior: tuple[float, float] = (1.0, 3.0)
    monotone: bool = True
    signature: Hashable = None
    spent: int = 0
    """Budget spent: runs plus the judge calls their verdicts took."""
    judge_calls: int = 0
    exhausted: bool = False
    log: list[QueryRecord] = field(default_factory=list)
    other_signatures: Counter[Hashable] = field(default_factory=Counter)
    _ledger: dict[int, _Entry] = field(default_factory=dict)
    _original: int | None = None
    _posteriors: dict[tuple[int, int], RatePosterior] = field(default_factory=dict)

    # -- the reproduction rate ---------------------------------------------------------------

    def rate_counts(self) -> tuple[int, int]:
        """``(failures, runs)`` pooled over the original and every candidate known to
        reproduce."""
        failures = runs = 0
        for mask, entry in self._ledger.items():
            if mask == self._original or entry.verdict is QueryVerdict.REPRODUCES:
                failures += entry.failures
                runs += entry.runs
        return failures, runs

    def rate_posterior(self) -> RatePosterior:
        """Posterior of the reproduction rate given the runs so far."""
        key = self.rate_counts()
        found = self._posteriors.get(key)
        if found is None:
            found = RatePosterior(*key, prior=self.prior)
            self._posteriors[key] = found
        return found

    def runs_needed(self) -> int:
        """Clean runs that rule a candidate out at ``miss_error`` (specific signature)."""
        return self.rate_posterior().runs_to_rule_out(self.miss_error, limit=self.budget + 1)

    def rate_settled(self, tolerance: float = 0.5) -> bool:
        """Whether the rate is known well enough that more failures would barely shorten
        rule-outs: three more failures (at the current mean rate) would cut
        :meth:`runs_needed` by at most ``tolerance`` runs each. Until then every confirmed
        removal pays twice (a unit gone and a failure that sharpens ``q``), which is why the
        search only removes several small-level units at once after this turns true."""
        failures, runs = self.rate_counts()
        mean = self.rate_posterior().mean
        extra = 3
        richer = RatePosterior(
            failures + extra, runs + max(extra, round(extra / mean)), prior=self.prior
        )
        # Not capped by the budget: a cap would make both counts equal and look "settled".
        limit = 1_000_000
        now = self.rate_posterior().runs_to_rule_out(self.miss_error, limit=limit)
        gain = now - richer.runs_to_rule_out(self.miss_error, limit=limit)
        return gain <= tolerance * extra

    def provisional_cap(self) -> int:
        """Clean runs of a first look: a reproducing candidate fails within them with
        probability ``1 - provisional_miss`` at a cautious (lower-quantile) rate. They are not
        wasted when it does not: they count towards the full rule-out later."""
        q = self.rate_posterior().quantile(self.provisional_quantile)
        return max(1, math.ceil(math.log(self.provisional_miss) / math.log1p(-q)))

    def look_cap(self, look: int) -> int:
        """Clean runs of evidence at which a query at ``look`` stops: the first look's cap,
        doubled per look."""
        return self.provisional_cap() << look

    def look_is_final(self, look: int) -> bool:
        """Whether a query at ``look`` already runs to a decision."""
        return self.background_rate > 0.0 or self.look_cap(look) >= self.runs_needed()

    def planning_rate(self) -> float:
        """The alternative ``q1`` of the per-query SPRT (background noise)."""
        return self.rate_posterior().quantile(self.planning_quantile)

    # -- the ledger --------------------------------------------------------------------------

    def entry(self, mask: int) -> _Entry:
        found = self._ledger.get(mask)
        if found is None:
            found = _Entry()
            self._ledger[mask] = found
        return found

    def runs_of(self, mask: int) -> int:
        """Runs already spent on ``mask`` (so its next fresh trial index)."""
        found = self._ledger.get(mask)
        return found.runs if found is not None else 0

    def failures_of(self, mask: int) -> int:
        found = self._ledger.get(mask)
        return found.failures if found is not None else 0

    def verdict_of(self, mask: int) -> QueryVerdict | None:
        found = self._ledger.get(mask)
        return found.verdict if found is not None else None

    def _mark_live(self, mask: int) -> None:
        """``mask`` reproduces; under monotonicity so does everything containing it (clean
        streaks on those were misses, and now join the rate pool)."""
        self.entry(mask).verdict = QueryVerdict.REPRODUCES
        if not self.monotone:
            return
        for other_mask, other in self._ledger.items():
            if other_mask & mask == mask:
                other.verdict = QueryVerdict.REPRODUCES

    def _implied(self, mask: int) -> QueryVerdict | None:
        if not self.monotone:
            return None
        for other_mask, other in self._ledger.items():
            if other.verdict is QueryVerdict.REPRODUCES and other_mask & mask == other_mask:
                return QueryVerdict.REPRODUCES
            if other.verdict is QueryVerdict.DOES_NOT_REPRODUCE and other_mask & mask == mask:
                return QueryVerdict.DOES_NOT_REPRODUCE
        return None

    def clean_evidence(self, mask: int) -> int:
        """Clean runs that speak against ``mask`` reproducing (specific signature): its own,
        and under monotonicity those of every candidate containing it never seen to fail."""
        return self._clean_evidence(mask)

    def _clean_evidence(self, mask: int) -> int:
        """Clean runs that speak against ``mask`` reproducing (specific signature)."""
        if not self.monotone:
            return self.runs_of(mask)
        total = 0
        for other_mask, other in self._ledger.items():
            if (
                other_mask & mask == mask
                and other.failures == 0
                and other.verdict is not QueryVerdict.REPRODUCES
            ):
                total += other.runs
        return total

    # -- running -----------------------------------------------------------------------------

    def _run_once(self, mask: int) -> Outcome | None:
        """One run of ``mask`` at its next trial index, or None when the budget is spent."""
        if self.spent >= self.budget:
            self.exhausted = True
            return None
        entry = self.entry(mask)
        outcome = self.oracle(mask, entry.runs)
        if not isinstance(outcome, Outcome):
            raise InvalidArgument(
                f"The shrinker's run function returned {outcome!r}; it must return an Outcome: "
                "Outcome.passed() or Outcome.failure(signature)."
            )
        if outcome.not_run:  # refused outside: no evidence, and no more runs to come
            self.exhausted = True
            return None
        self.spent += 1 + outcome.judge_calls
        self.judge_calls += outcome.judge_calls
        entry.runs += 1
        if outcome.failed:
            if self.signature is None:
                self.signature = outcome.signature
            if outcome.signature == self.signature:
                entry.failures += 1
            else:
                entry.other += 1
                self.other_signatures[outcome.signature] += 1
        return outcome

    def calibrate(self, mask: int, *, min_failures: int, min_runs: int, max_runs: int) -> None:
        """Run the original until it has ``min_failures`` matching failures and ``min_runs``
        runs (``max_runs`` runs at most, counting earlier ones). The first failure fixes the
        signature when none was given. A matching failure makes it the starting reproducer."""
        self._original = mask
        entry = self.entry(mask)
        runs0, failures0, other0 = entry.runs, entry.failures, entry.other
        while entry.runs < max_runs and (entry.failures < min_failures or entry.runs < min_runs):
            if self._run_once(mask) is None:
                break
        verdict = QueryVerdict.REPRODUCES if entry.failures else QueryVerdict.UNDECIDED
        self._record(
            "calibration",
            None,
            (),
            mask,
            entry.runs - runs0,
            entry.failures - failures0,
            entry.other - other0,
            verdict,
            "calibration",
        )
        if entry.failures:
            self._mark_live(mask)

    def seed(self, mask: int, *, runs: int, failures: int) -> None:
        """Take evidence about the original gathered elsewhere (it used trial indices
        ``0..runs-1``; later runs continue from ``runs``)."""
        self._original = mask
        entry = self.entry(mask)
        entry.runs += runs
        entry.failures += failures
        verdict = QueryVerdict.REPRODUCES if entry.failures else QueryVerdict.UNDECIDED
        self._record("calibration", None, (), mask, 0, 0, 0, verdict, "given")
        if entry.failures:
            self._mark_live(mask)

    def _record(
        self,
        phase: str,
        depth: int | None,
        removed: tuple[str, ...],
        mask: int,
        runs: int,
        failures: int,
        other: int,
        verdict: QueryVerdict,
        source: str,
        clean_evidence: int = 0,
        runs_needed: int = 0,
    ) -> None:
        self.log.append(
            QueryRecord(
                index=len(self.log),
                phase=phase,
                depth=depth,
                removed=removed,
                kept=mask.bit_count(),
                runs=runs,
                failures=failures,
                other_failures=other,
                verdict=verdict,
                source=source,
                total_runs=self.spent,
                clean_evidence=clean_evidence,
                runs_needed=runs_needed,
            )
        )

    def ask(
        self,
        mask: int,
        *,
        look: int | None = None,
        phase: str = "search",
        depth: int | None = None,
        removed: tuple[str, ...] = (),
    ) -> QueryVerdict:
        """Does ``mask`` still fail with the calibrated signature?

        ``look=k`` (specific signature only) stops once there are ``look_cap(k)`` clean runs
        of evidence, answering ``UNDECIDED`` unless that already rules the candidate out;
        ``look=None`` runs to a decision or to the end of the budget. With background noise
        every query runs its SPRT to a decision.
        """
        entry = self._ledger.get(mask)
        if entry is not None and entry.verdict is not None:
            self._record(phase, depth, removed, mask, 0, 0, 0, entry.verdict, "memo")
            return entry.verdict
        implied = self._implied(mask)
        if implied is not None:
            if implied is QueryVerdict.REPRODUCES:
                self._mark_live(mask)
            else:
                self.entry(mask).verdict = implied
            self._record(phase, depth, removed, mask, 0, 0, 0, implied, "inferred")
            return implied
        if self.background_rate > 0.0:
            return self._ask_sprt(mask, phase=phase, depth=depth, removed=removed)
        return self._ask_specific(mask, look=look, phase=phase, depth=depth, removed=removed)

    def _ask_specific(
        self,
        mask: int,
        *,
        look: int | None,
        phase: str,
        depth: int | None,
        removed: tuple[str, ...],
    ) -> QueryVerdict:
        need = self.runs_needed()
        evidence = self._clean_evidence(mask)
        target = need if look is None else min(need, self.look_cap(look))
        entry = self.entry(mask)
        runs0, other0 = entry.runs, entry.other
        reproduced = False
        while evidence < target:
            if self._run_once(mask) is None:
                break
            if entry.failures:
                reproduced = True
                break
            evidence += 1
        spent = entry.runs - runs0
        if reproduced:
            self._mark_live(mask)
            verdict = QueryVerdict.REPRODUCES
        elif evidence >= need:
            entry.verdict = verdict = QueryVerdict.DOES_NOT_REPRODUCE
        else:
            verdict = QueryVerdict.UNDECIDED
        if spent:
            source = "ran"
        else:
            source = "deferred" if verdict is QueryVerdict.UNDECIDED else "inferred"
        self._record(
            phase,
            depth,
            removed,
            mask,
            spent,
            int(reproduced),
            entry.other - other0,
            verdict,
            source,
            clean_evidence=evidence,
            runs_needed=need,
        )
        return verdict

    def check_own(
        self, mask: int, *, phase: str, depth: int | None, removed: tuple[str, ...]
    ) -> QueryVerdict:
        """Look at ``mask`` itself, not only through other candidates: with a specific
        signature one clean run of its own (a unit that masks the failure shows at once
        when the failure is frequent; the rest of the evidence is inferred under monotonicity,
        which the 1-minimal statement then says); with background noise a candidate never run
        gets its own SPRT."""
        if self.background_rate > 0.0:
            entry = self.entry(mask)
            if entry.runs:
                verdict = entry.verdict or QueryVerdict.UNDECIDED
                self._record(phase, depth, removed, mask, 0, 0, 0, verdict, "memo")
                return verdict
            entry.verdict = None
            return self._ask_sprt(mask, phase=phase, depth=depth, removed=removed)
        return self.run_own(mask, need=1, phase=phase, depth=depth, removed=removed)

    def run_own(
        self, mask: int, *, need: int, phase: str, depth: int | None, removed: tuple[str, ...]
    ) -> QueryVerdict:
        """Run ``mask`` itself until it has ``need`` clean runs of its own or fails with the
        signature, whatever the ledger inferred about it. A failure makes it a reproducer (and
        only it: the clean runs of larger candidates stay what they were); ``UNDECIDED`` when
        the budget ran out first."""
        entry = self.entry(mask)
        runs0, failures0, other0 = entry.runs, entry.failures, entry.other
        while entry.failures == failures0 and entry.runs - entry.failures < need:
            if self._run_once(mask) is None:
                break
        if entry.failures > failures0:
            entry.verdict = verdict = QueryVerdict.REPRODUCES
        elif entry.runs - entry.failures >= need:
            entry.verdict = verdict = QueryVerdict.DOES_NOT_REPRODUCE
        else:
            verdict = QueryVerdict.UNDECIDED
        spent = entry.runs - runs0
        if spent or verdict is not QueryVerdict.DOES_NOT_REPRODUCE:
            self._record(
                phase,
                depth,
                removed,
                mask,
                spent,
                entry.failures - failures0,
                entry.other - other0,
                verdict,
                "ran" if spent else "memo",
                clean_evidence=entry.runs - entry.failures,
                runs_needed=need,
            )
        return verdict

    def sprt_plan(self) -> tuple[float, float, float, float, int]:
        """``(llr_fail, llr_pass, upper, lower, truncation)`` of the per-query SPRT."""
        eps = self.background_rate
        q1 = max(self.planning_rate(), 1.5 * eps)
        llr_fail = math.log(q1 / eps)
        llr_pass = math.log1p(-q1) - math.log1p(-eps)
        alpha, beta = self.false_reproduce_error, self.miss_error
        upper = math.log((1.0 - beta) / alpha)
        lower = math.log(beta / (1.0 - alpha))
        drift0 = eps * llr_fail + (1.0 - eps) * llr_pass
        drift1 = q1 * llr_fail + (1.0 - q1) * llr_pass
        expected = max(lower / drift0, upper / drift1)
        return llr_fail, llr_pass, upper, lower, max(20, math.ceil(4.0 * expected))

    def _ask_sprt(
        self, mask: int, *, phase: str, depth: int | None, removed: tuple[str, ...]
    ) -> QueryVerdict:
        llr_fail, llr_pass, upper, lower, truncation = self.sprt_plan()
        entry = self.entry(mask)
        runs0, failures0, other0 = entry.runs, entry.failures, entry.other

        def llr() -> float:
            return entry.failures * llr_fail + (entry.runs - entry.failures) * llr_pass

        while lower < llr() < upper and entry.runs < truncation:
            if self._run_once(mask) is None:
                break
        value = llr()
        if value >= upper:
            self._mark_live(mask)
            verdict = QueryVerdict.REPRODUCES
        elif value <= lower or entry.runs >= truncation:
            entry.verdict = verdict = QueryVerdict.DOES_NOT_REPRODUCE
        else:
            verdict = QueryVerdict.UNDECIDED
        spent = entry.runs - runs0
        self._record(
            phase,
            depth,
            removed,
            mask,
            spent,
            entry.failures - failures0,
            entry.other - other0,
            verdict,
            "ran" if spent else "deferred",
            runs_needed=truncation,
        )
        return verdict
