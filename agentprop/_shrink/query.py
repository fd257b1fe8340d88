"""The per-query decision of the statistical shrinker: "does this candidate still fail?".

A *query* asks whether a candidate input still shows the failure being shrunk. The oracle is
noisy, so a query is a small sequential test over runs of the candidate, each with its own
trial index. The module keeps, for every candidate it has ever run, a ledger entry (runs,
matching failures, failures with another signature, decided verdict), and answers a query in
one of three ways: ``REPRODUCES``, ``DOES_NOT_REPRODUCE`` or ``UNDECIDED`` (stopped at a
provisional cap or at the end of the budget).

Two regimes, chosen by the background false-failure rate ``eps`` the caller states:

* **Specific signature** (``eps == 0``): a run that fails with the calibrated signature cannot
  happen on a candidate that does not reproduce, so one matching failure proves "still fails"
  and the query stops at once. "Does not reproduce" is declared after ``n`` clean runs, where
  ``n`` is the smallest number with ``E[(1 - q)^n] <= miss_error`` under the Beta posterior of
  the reproduction rate ``q`` pooled over every candidate known to reproduce (the original's
  calibration runs included). With a known ``q`` this is the familiar ``(1 - q)^n <= error``
  (10 runs at ``q = 0.5`` and error 0.001); the posterior expectation makes the rule honest
  when ``q`` is only estimated from a handful of runs, which matters most for rare failures.
* **Background noise** (``eps > 0``): a matching failure can also happen by chance, so each
  query is Wald's SPRT of ``H0: rate = eps`` against ``H1: rate = q1``, with ``q1`` a lower
  posterior quantile of the pooled reproduction rate and error rates ``false_reproduce_error``
  (accepting a candidate that does not reproduce) and ``miss_error`` (rejecting one that
  does). Queries that reach the truncation point without a decision count as "does not
  reproduce": the shrinker never keeps a candidate it has not confirmed.

Monotonicity (on by default, the same assumption delta debugging makes): if a candidate
reproduces, so does every candidate that contains it. Under that assumption the ledger
answers many queries without running anything: a candidate containing a confirmed reproducer
reproduces; a candidate contained in a candidate already decided "does not reproduce" does
not; and, in the specific-signature regime, clean runs of any not-yet-live candidate that
contains the queried one count as evidence against it (if the smaller one reproduced, the
bigger one would too). The last rule is what lets the search spend a few *provisional* runs
on a query, move on, and top the evidence up later once the pooled rate is better known.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from agentprop.errors import InvalidArgument

__all__ = [
    "Outcome",
    "QueryEngine",
    "QueryRecord",
    "RateEstimate",
    "Verdict",
    "RatePosterior",
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

    @classmethod
    def passed(cls) -> Outcome:
        """A run in which nothing failed."""
        return cls(False, None)

    @classmethod
    def failure(cls, signature: Hashable) -> Outcome:
        """A run that failed with ``signature``."""
        return cls(True, signature)


class Verdict(str, Enum):
    """The answer to one query."""

    REPRODUCES = "reproduces"
    DOES_NOT_REPRODUCE = "does not reproduce"
    UNDECIDED = "undecided"


def wilson_interval(failures: int, runs: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (default 95%).

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
class RateEstimate:
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


# --------------------------------------------------------------------------------------------
# Small statistics needed by the queries (kept local: the shrinker must not depend on the
# oracle's statistics module, which sits on another floor).


class RatePosterior:
    """Posterior of the reproduction rate ``q`` (flat prior, computed on a grid).

    The data must not be chosen by their own outcomes, or the estimate is biased: a query
    stops at its first matching failure, so a reproducing candidate that fails quickly becomes
    "known to reproduce" while one that happened to stay clean does not, and pooling the known
    ones would overestimate ``q`` (and so make queries too short). Two kinds of data are used:

    * ``binomial``: ``(failures, runs)`` of the original input, which is taken to reproduce
      before any of its runs are seen, so any stopping rule is fine;
    * ``truncated``: for each other candidate that proved itself by a matching failure,
      ``(clean, window)``: the failure came after ``clean`` clean runs of a query that would
      have stopped after ``window`` runs. Its likelihood *conditional on failing within the
      window* is ``q (1 - q)^clean / (1 - (1 - q)^window)``, which is exactly the selection.

    Candidates that never failed carry no information about ``q`` under this conditioning
    and are left out.
    """

    _Q = (np.arange(1, 1001) - 0.5) / 1000.0

    def __init__(
        self,
        binomial: tuple[int, int],
        truncated: Sequence[tuple[int, int]] = (),
        prior: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        q = self._Q
        log_q, log_1q = np.log(q), np.log1p(-q)
        failures, runs = binomial
        a0, b0 = prior
        total = (failures + a0 - 1.0) * log_q + (runs - failures + b0 - 1.0) * log_1q
        for (clean, window), count in Counter(truncated).items():
            term = log_q + clean * log_1q
            if window < 10_000:
                term = term - np.log(-np.expm1(window * log_1q))
            total = total + count * term
        total = total - total.max()
        weights = np.exp(total)
        self.weights: np.ndarray = weights / weights.sum()

    @property
    def mean(self) -> float:
        return float(np.dot(self.weights, self._Q))

    def quantile(self, prob: float) -> float:
        cumulative = np.cumsum(self.weights)
        return float(self._Q[min(int(np.searchsorted(cumulative, prob)), self._Q.size - 1)])

    def miss_probability(self, runs: int) -> float:
        """``E[(1 - q)^runs]``: the chance that a reproducing candidate stays clean that long."""
        return float(np.dot(self.weights, (1.0 - self._Q) ** runs))

    def runs_to_rule_out(self, error: float, limit: int) -> int:
        """Smallest ``n <= limit`` with ``E[(1 - q)^n] <= error`` (``limit`` if none)."""
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


# --------------------------------------------------------------------------------------------
# The ledger and the engine.


@dataclass(frozen=True)
class QueryRecord:
    """One line of the shrinker's per-query log.

    ``source`` is ``"ran"`` when the query spent runs, ``"memo"`` when the candidate already
    had a verdict, ``"inferred"`` when monotonicity or earlier evidence decided it for free,
    and ``"calibration"`` for the runs of the original input.
    """

    index: int
    phase: str
    depth: int | None
    removed: tuple[str, ...]
    kept: int
    runs: int
    failures: int
    other_failures: int
    verdict: Verdict
    source: str
    total_runs: int
    clean_evidence: int = 0
    runs_needed: int = 0


@dataclass
class _Entry:
    runs: int = 0
    failures: int = 0
    other: int = 0
    verdict: Verdict | None = None
    proof: tuple[int, int] | None = None  # (clean runs before the failure, window) of its ask


Oracle = Callable[[int, int], Outcome]
"""``oracle(mask, trial_index) -> Outcome`` on the engine's integer candidate masks."""


@dataclass
class QueryEngine:
    """Answers queries about candidates (integer bit masks of kept leaves) within a budget.

    The engine owns the run budget (it never starts a run the budget cannot pay for), the
    ledger of every candidate it ran, the pooled posterior of the reproduction rate and the
    per-query log. It knows nothing about what the masks mean; the search builds them.
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
    exhausted: bool = False
    log: list[QueryRecord] = field(default_factory=list)
    other_signatures: Counter[Hashable] = field(default_factory=Counter)
    _ledger: dict[int, _Entry] = field(default_factory=dict)
    _original: int | None = None
    _posterior_cache: dict[tuple[tuple[int, int], tuple[tuple[int, int], ...]], RatePosterior] = (
        field(default_factory=dict)
    )

    # -- the reproduction rate ---------------------------------------------------------------

    def rate_posterior(self) -> RatePosterior:
        """Posterior of the reproduction rate given the runs so far (see :class:`RatePosterior`)."""
        failures = runs = 0
        truncated: list[tuple[int, int]] = []
        for mask, entry in self._ledger.items():
            if mask == self._original or (
                self.background_rate == 0.0 and entry.verdict is Verdict.REPRODUCES
            ):
                failures += entry.failures
                runs += entry.runs
        key = ((failures, runs), tuple(truncated))
        found = self._posterior_cache.get(key)
        if found is None:
            if len(self._posterior_cache) > 10_000:
                self._posterior_cache.clear()
            found = RatePosterior((failures, runs), truncated, self.prior)
            self._posterior_cache[key] = found
        return found

    def runs_needed(self) -> int:
        """Clean runs that rule a candidate out at ``miss_error`` (specific-signature regime)."""
        return self.rate_posterior().runs_to_rule_out(self.miss_error, limit=self.budget + 1)

    def provisional_cap(self) -> int:
        """A first look: clean runs after which a reproducing candidate would have failed with
        probability ``1 - provisional_miss`` at a cautious (lower-quantile) rate. Its clean
        runs are not wasted: they count towards the full rule-out later."""
        q = self.rate_posterior().quantile(self.provisional_quantile)
        return max(1, math.ceil(math.log(self.provisional_miss) / math.log1p(-q)))

    def look_cap(self, look: int) -> int:
        """Clean runs of evidence a query at ``look`` stops at (before the full rule-out)."""
        return self.provisional_cap() * 2**look

    def look_is_final(self, look: int) -> bool:
        """Whether a query at ``look`` already runs to the full rule-out count."""
        return self.look_cap(look) >= self.runs_needed()

    def planning_rate(self) -> float:
        """The alternative ``q1`` of the per-query SPRT (background-noise regime)."""
        return self.rate_posterior().quantile(self.planning_quantile)

    # -- ledger helpers ----------------------------------------------------------------------

    def entry(self, mask: int) -> _Entry:
        found = self._ledger.get(mask)
        if found is None:
            found = _Entry()
            self._ledger[mask] = found
        return found

    def runs_of(self, mask: int) -> int:
        """Runs already spent on ``mask`` (its next fresh trial index)."""
        found = self._ledger.get(mask)
        return found.runs if found is not None else 0

    def verdict_of(self, mask: int) -> Verdict | None:
        found = self._ledger.get(mask)
        return found.verdict if found is not None else None

    def _mark_live(self, mask: int) -> None:
        """Record that ``mask`` reproduces; under monotonicity so does everything containing it
        (clean streaks on those were misses)."""
        self.entry(mask).verdict = Verdict.REPRODUCES
        if not self.monotone:
            return
        for other_mask, other in self._ledger.items():
            if other_mask != mask and other_mask & mask == mask:
                other.verdict = Verdict.REPRODUCES

    def _implied(self, mask: int) -> Verdict | None:
        if not self.monotone:
            return None
        for other_mask, other in self._ledger.items():
            if other.verdict is Verdict.REPRODUCES and other_mask & mask == other_mask:
                return Verdict.REPRODUCES
            if other.verdict is Verdict.DOES_NOT_REPRODUCE and other_mask & mask == mask:
                return Verdict.DOES_NOT_REPRODUCE
        return None

    def _clean_evidence(self, mask: int) -> int:
        """Clean runs that speak against ``mask`` reproducing (specific-signature regime)."""
        if not self.monotone:
            entry = self._ledger.get(mask)
            return entry.runs if entry is not None else 0
        total = 0
        for other_mask, other in self._ledger.items():
            if (
                other_mask & mask == mask
                and other.failures == 0
                and other.verdict is not Verdict.REPRODUCES
            ):
                total += other.runs
        return total

    # -- running -----------------------------------------------------------------------------

    def _run_once(self, mask: int) -> Outcome | None:
        if self.spent >= self.budget:
            self.exhausted = True
            return None
        entry = self.entry(mask)
        trial = entry.runs
        outcome = self.oracle(mask, trial)
        if not isinstance(outcome, Outcome):
            raise InvalidArgument(
                f"The shrinker's run function returned {outcome!r}; it must return an "
                "agentprop Outcome (Outcome.passed() or Outcome.failure(signature))."
            )
        self.spent += 1
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
        runs (at most ``max_runs`` runs in all); the first failure fixes the signature when
        none was given. The original is treated as the starting reproducer."""
        self._original = mask
        entry = self.entry(mask)
        before_runs, before_fail, before_other = entry.runs, entry.failures, entry.other
        while entry.runs < max_runs and (entry.failures < min_failures or entry.runs < min_runs):
            if self._run_once(mask) is None:
                break
        self._record(
            "calibration", None, (), mask, entry.runs - before_runs, entry.failures - before_fail,
            entry.other - before_other, Verdict.REPRODUCES if entry.failures else Verdict.UNDECIDED,
            "calibration",
        )
        if entry.failures:
            self._mark_live(mask)

    def seed(self, mask: int, *, runs: int, failures: int) -> None:
        """Record evidence about the original gathered elsewhere (trial indices ``0..runs-1``)."""
        self._original = mask
        entry = self.entry(mask)
        entry.runs += runs
        entry.failures += failures
        self._record("calibration", None, (), mask, 0, 0, 0,
                     Verdict.REPRODUCES if entry.failures else Verdict.UNDECIDED, "given")
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
        verdict: Verdict,
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
    ) -> Verdict:
        """Does ``mask`` still fail with the calibrated signature?

        ``look=k`` (specific-signature regime only) stops after ``provisional_cap() * 2**k``
        clean runs of evidence, answering ``UNDECIDED`` unless that evidence already suffices
        to rule the candidate out; ``look=None`` runs until a decision or the end of the budget.
        In the background-noise regime every query runs its SPRT to a decision.
        """
        entry = self._ledger.get(mask)
        if entry is not None and entry.verdict is not None:
            self._record(phase, depth, removed, mask, 0, 0, 0, entry.verdict, "memo")
            return entry.verdict
        implied = self._implied(mask)
        if implied is not None:
            if implied is Verdict.REPRODUCES:
                self._mark_live(mask)
            else:
                self.entry(mask).verdict = implied
            self._record(phase, depth, removed, mask, 0, 0, 0, implied, "inferred")
            return implied
        if self.background_rate > 0.0:
            return self._ask_sprt(mask, phase=phase, depth=depth, removed=removed)
        return self._ask_specific(mask, look=look, phase=phase, depth=depth, removed=removed)

    def _ask_specific(
        self, mask: int, *, look: int | None, phase: str, depth: int | None, removed: tuple[str, ...]
    ) -> Verdict:
        need = self.runs_needed()
        evidence = self._clean_evidence(mask)
        target = need if look is None else min(need, self.look_cap(look))
        entry = self.entry(mask)
        runs0, other0 = entry.runs, entry.other
        window = target - evidence
        reproduced = False
        while evidence < target:
            outcome = self._run_once(mask)
            if outcome is None:
                break
            if entry.failures:
                reproduced = True
                break
            evidence += 1
        spent = entry.runs - runs0
        if reproduced:
            entry.proof = (spent - 1, window)
            self._mark_live(mask)
            verdict = Verdict.REPRODUCES
        elif evidence >= need:
            entry.verdict = Verdict.DOES_NOT_REPRODUCE
            verdict = Verdict.DOES_NOT_REPRODUCE
        else:
            verdict = Verdict.UNDECIDED
        source = "ran" if spent else ("inferred" if verdict is not Verdict.UNDECIDED else "deferred")
        self._record(phase, depth, removed, mask, spent, int(reproduced), entry.other - other0,
                     verdict, source, clean_evidence=evidence, runs_needed=need)
        return verdict

    def sprt_plan(self) -> tuple[float, float, float, float, int]:
        """``(llr_fail, llr_pass, upper, lower, truncation)`` of the per-query SPRT."""
        eps = self.background_rate
        q1 = self.planning_rate()
        if q1 <= eps * 1.5:
            q1 = eps * 1.5
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
    ) -> Verdict:
        llr_fail, llr_pass, upper, lower, truncation = self.sprt_plan()
        entry = self.entry(mask)
        runs0, fail0, other0 = entry.runs, entry.failures, entry.other

        def llr() -> float:
            return entry.failures * llr_fail + (entry.runs - entry.failures) * llr_pass

        while lower < llr() < upper and entry.runs < truncation:
            if self._run_once(mask) is None:
                break
        value = llr()
        if value >= upper:
            self._mark_live(mask)
            verdict = Verdict.REPRODUCES
        elif value <= lower or entry.runs >= truncation:
            entry.verdict = Verdict.DOES_NOT_REPRODUCE
            verdict = Verdict.DOES_NOT_REPRODUCE
        else:
            verdict = Verdict.UNDECIDED
        self._record(phase, depth, removed, mask, entry.runs - runs0, entry.failures - fail0,
                     entry.other - other0, verdict, "ran" if entry.runs > runs0 else "deferred")
        return verdict
