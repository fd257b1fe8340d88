"""Sequential tests: decide whether an agent's pass rate is good enough, run by run.

:class:`SPRT`, :class:`ZeroFailureCertification`, :class:`FixedN` and :class:`Screen` share one
life cycle: ``update(passed)`` until ``done``, then ``decision`` (INCONCLUSIVE when ``max_runs``
ends undecided: no verdict is forced). Each decides from its counts alone, so ``analyse(p)``
computes expected runs and error rates exactly, before any run.
"""

from __future__ import annotations

import enum
import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentprop._stats._checks import (
    check_closed_unit,
    check_count,
    check_open_unit,
)
from agentprop._stats.intervals import (
    RateEstimate,
    _binomial_upper_tail,
    binomial_cdf,
    estimate_rate,
)
from agentprop.errors import InvalidArgument

__all__ = [
    "SPRT",
    "Decision",
    "FixedN",
    "SequentialAnalysis",
    "Screen",
    "SequentialTest",
    "ZeroFailureCertification",
    "zero_failure_runs",
]


def _is_bool(value: object) -> bool:
    """A bool, or numpy's (only possible once numpy is imported: it is not imported here, as
    ``agentprop run`` imports this module and numpy takes a fifth of a second)."""
    if isinstance(value, bool):
        return True
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.bool_)


class Decision(enum.Enum):
    """The outcome of a sequential test."""

    ACCEPT = "accept"
    """The pass rate is acceptable (for the SPRT: H0, ``p >= p0``, is accepted)."""
    REJECT = "reject"
    """The pass rate is too low (for zero-failure certification: not certified)."""
    INCONCLUSIVE = "inconclusive"
    """The run budget ended before the evidence was convincing either way."""


@dataclass(frozen=True)
class SequentialAnalysis:
    """How a test behaves when the true pass rate is ``p``, computed exactly."""

    p: float
    expected_runs: float
    accept_probability: float
    reject_probability: float
    inconclusive_probability: float


@runtime_checkable
class SequentialTest(Protocol):
    """What the oracle needs from a sequential test (all tests in this module fit)."""

    @property
    def n(self) -> int: ...

    @property
    def successes(self) -> int: ...

    @property
    def failures(self) -> int: ...

    @property
    def decision(self) -> Decision | None: ...

    @property
    def done(self) -> bool: ...

    @property
    def max_runs(self) -> int | None: ...

    def update(self, success: bool) -> Decision | None: ...

    def stop(self) -> Decision: ...

    def estimate(self, confidence: float = 0.95) -> RateEstimate: ...

    def analyse(self, p: float) -> SequentialAnalysis: ...

    def fresh(self) -> SequentialTest: ...


# Probability mass below which the exact analysis of an untruncated test stops walking the
# lattice; what is left is reported as inconclusive (it is far below any printed digit).
_TAIL_MASS = 1e-14
_MAX_ANALYSIS_STEPS = 1_000_000


class _LatticeTest(ABC):
    """Shared state and analysis of tests whose decision depends only on the counts."""

    def __init__(self, max_runs: int | None) -> None:
        self._max_runs = max_runs
        self._successes = 0
        self._failures = 0
        self._decision: Decision | None = None

    # -- the rule ---------------------------------------------------------------------------
    @abstractmethod
    def _rule(self, successes: int, failures: int) -> Decision | None:
        """The decision after these counts, ignoring the run budget (None: keep going)."""

    def _decide(self, successes: int, failures: int) -> Decision | None:
        decision = self._rule(successes, failures)
        if (
            decision is None
            and self._max_runs is not None
            and successes + failures >= self._max_runs
        ):
            return Decision.INCONCLUSIVE
        return decision

    @abstractmethod
    def fresh(self) -> _LatticeTest:
        """A new test with the same parameters and no runs yet."""

    # -- state --------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Runs seen so far."""
        return self._successes + self._failures

    @property
    def successes(self) -> int:
        """Runs that passed."""
        return self._successes

    @property
    def failures(self) -> int:
        """Runs that failed."""
        return self._failures

    @property
    def decision(self) -> Decision | None:
        """The decision, or ``None`` while the test is still running."""
        return self._decision

    @property
    def done(self) -> bool:
        """Whether the test has decided (no more runs are wanted)."""
        return self._decision is not None

    @property
    def max_runs(self) -> int | None:
        """The most runs this test can ask for (``None``: no fixed limit)."""
        return self._max_runs

    # -- driving the test -----------------------------------------------------------------------
    def update(self, success: bool) -> Decision | None:
        """Record one run; return the decision if this run settled it, else ``None``."""
        if not _is_bool(success):
            raise InvalidArgument(
                f"update(success={success!r}) needs a bool (True = the run passed), got "
                f"{type(success).__name__}. Convert the run's verdict with bool(...)."
            )
        if self._decision is not None:
            raise InvalidArgument(
                f"{self!r} already decided {self._decision.name} after {self.n} runs; it "
                "wants no more runs. Check `done` before running again, or call fresh() "
                "for a new test with the same parameters."
            )
        if success:
            self._successes += 1
        else:
            self._failures += 1
        self._decision = self._decide(self._successes, self._failures)
        return self._decision

    def run(self, outcomes: Iterable[bool]) -> Decision | None:
        """Feed outcomes until the test decides or they run out; return the decision."""
        for outcome in outcomes:
            if self.update(outcome) is not None:
                break
        return self._decision

    def stop(self) -> Decision:
        """End the test now (e.g. the caller's budget is spent).

        An undecided test becomes INCONCLUSIVE; a decided one keeps its decision.
        """
        if self._decision is None:
            self._decision = Decision.INCONCLUSIVE
        return self._decision

    def estimate(self, confidence: float = 0.95) -> RateEstimate:
        """The observed pass rate so far with Wilson and Clopper–Pearson intervals."""
        if self.n == 0:
            raise InvalidArgument("estimate() needs at least one run; call update() first.")
        return estimate_rate(self._successes, self.n, confidence)

    # -- exact analysis -----------------------------------------------------------------------
    def analyse(self, p: float) -> SequentialAnalysis:
        """Exact expected runs and decision probabilities if the true pass rate is ``p``.

        Walks the (runs, failures) lattice: ``alive`` maps the number of failures to the
        probability of having reached that state without a decision. Each run moves every
        alive state one step (pass with probability ``p``, fail with ``1 - p``); states the
        rule decides leave ``alive`` and add their mass to that decision. The expected number
        of runs is the sum over runs of the probability of still being alive before it.
        """
        p = check_closed_unit("p", p)
        q = 1.0 - p
        alive: dict[int, float] = {0: 1.0}
        if self._decide(0, 0) is not None:
            raise AssertionError("a lattice test must not decide before its first run")
        expected = accept = reject = inconclusive = 0.0
        runs = 0
        while alive:
            mass = math.fsum(alive.values())
            if self._max_runs is None and mass < _TAIL_MASS:
                inconclusive += mass
                break
            if runs >= _MAX_ANALYSIS_STEPS:
                raise InvalidArgument(
                    f"analyse({p}) did not settle within {_MAX_ANALYSIS_STEPS} runs; set max_runs "
                    "to analyse a test that may run this long."
                )
            expected += mass
            runs += 1
            stepped: dict[int, float] = {}
            for failures, probability in alive.items():
                if p > 0.0:
                    stepped[failures] = stepped.get(failures, 0.0) + probability * p
                if q > 0.0:
                    stepped[failures + 1] = stepped.get(failures + 1, 0.0) + probability * q
            alive = {}
            for failures, probability in stepped.items():
                decision = self._decide(runs - failures, failures)
                if decision is None:
                    alive[failures] = probability
                elif decision is Decision.ACCEPT:
                    accept += probability
                elif decision is Decision.REJECT:
                    reject += probability
                else:
                    inconclusive += probability
        return SequentialAnalysis(
            p=p,
            expected_runs=expected,
            accept_probability=accept,
            reject_probability=reject,
            inconclusive_probability=inconclusive,
        )

    def expected_sample_size(self, p: float) -> float:
        """Exact expected number of runs to a decision if the true pass rate is ``p``."""
        return self.analyse(p).expected_runs

    def _state_repr(self) -> str:
        state = f"n={self.n}, successes={self._successes}"
        if self._decision is not None:
            state += f", decision={self._decision.name}"
        return state


class SPRT(_LatticeTest):
    """Wald's sequential probability ratio test on pass/fail runs.

    H0 (ACCEPT): the pass rate is at least ``p0``. H1 (REJECT): it is at most ``p1``.
    ``alpha`` is the tolerated false-fail rate at ``p0``, ``beta`` the false-pass rate at
    ``p1``. Choose the hypotheses in one of three ways:

    * ``SPRT(tau)``: halve/double the tolerated failure rate ``1 - tau``, i.e.
      ``p0 = (1 + tau) / 2`` and ``p1 = 2 tau - 1`` (needs ``tau > 0.5``). The default
      ``tau = 0.9`` gives 0.95 vs 0.80.
    * ``SPRT(tau, delta)``: the additive zone ``p0 = tau + delta``, ``p1 = tau - delta``.
    * ``SPRT(p0=..., p1=...)``: explicit hypotheses (``tau``, if given, must lie between).

    With ``max_runs`` the test ends INCONCLUSIVE if no boundary is crossed by then.
    """

    def __init__(
        self,
        tau: float | None = None,
        delta: float | None = None,
        alpha: float = 0.05,
        beta: float = 0.05,
        max_runs: int | None = None,
        *,
        p0: float | None = None,
        p1: float | None = None,
    ) -> None:
        self.tau, self.p0, self.p1 = _resolve_hypotheses(tau, delta, p0, p1)
        self.delta = delta
        self.alpha = check_open_unit("alpha", alpha)
        self.beta = check_open_unit("beta", beta)
        if self.alpha + self.beta >= 1.0:
            raise InvalidArgument(
                f"alpha={self.alpha} and beta={self.beta} add up to 1 or more, so the test "
                "could decide without any run. Use small error rates such as 0.05."
            )
        if max_runs is not None:
            max_runs = check_count("max_runs", max_runs, minimum=1)
        super().__init__(max_runs)
        self.success_step = math.log(self.p1 / self.p0)
        """Change of ``log_lr`` on a passing run (negative)."""
        self.failure_step = math.log((1.0 - self.p1) / (1.0 - self.p0))
        """Change of ``log_lr`` on a failing run (positive)."""
        self.reject_bound = math.log((1.0 - self.beta) / self.alpha)
        """REJECT once ``log_lr`` reaches this (Wald's upper boundary)."""
        self.accept_bound = math.log(self.beta / (1.0 - self.alpha))
        """ACCEPT once ``log_lr`` falls to this (Wald's lower boundary)."""

    def _log_lr(self, successes: int, failures: int) -> float:
        return successes * self.success_step + failures * self.failure_step

    @property
    def log_lr(self) -> float:
        """``log(L(p1) / L(p0))`` of the runs so far: positive favours "too low"."""
        return self._log_lr(self._successes, self._failures)

    def _rule(self, successes: int, failures: int) -> Decision | None:
        value = self._log_lr(successes, failures)
        if value >= self.reject_bound:
            return Decision.REJECT
        if value <= self.accept_bound:
            return Decision.ACCEPT
        return None

    def fresh(self) -> SPRT:
        return SPRT(
            self.tau,
            self.delta,
            self.alpha,
            self.beta,
            self._max_runs,
            p0=None if self.delta is not None else self.p0,
            p1=None if self.delta is not None else self.p1,
        )

    def __repr__(self) -> str:
        return (
            f"SPRT(p0={self.p0:g}, p1={self.p1:g}, alpha={self.alpha:g}, beta={self.beta:g}, "
            f"max_runs={self._max_runs}; {self._state_repr()})"
        )


def _resolve_hypotheses(
    tau: float | None, delta: float | None, p0: float | None, p1: float | None
) -> tuple[float | None, float, float]:
    """Turn the three ways of stating the SPRT's hypotheses into ``(tau, p0, p1)``."""
    if p0 is not None or p1 is not None:
        if p0 is None or p1 is None:
            raise InvalidArgument(
                f"SPRT got p0={p0!r} and p1={p1!r}: give both (for example p0=0.95, "
                "p1=0.80) or neither."
            )
        if delta is not None:
            raise InvalidArgument(
                f"SPRT got delta={delta!r} together with p0/p1: delta defines p0 and p1 from tau, "
                "so pass either delta or p0 and p1, not both."
            )
        p0_value = check_open_unit("p0", p0)
        p1_value = check_open_unit("p1", p1)
        if not p1_value < p0_value:
            raise InvalidArgument(
                f"p1={p1_value} must be smaller than p0={p0_value}: p0 is the acceptable pass "
                "rate (H0) and p1 the unacceptable one (H1)."
            )
        tau_value = None
        if tau is not None:
            tau_value = check_open_unit("tau", tau)
            if not p1_value <= tau_value <= p0_value:
                raise InvalidArgument(
                    f"tau={tau_value} lies outside [p1, p0] = [{p1_value}, {p0_value}]; the "
                    "tolerated rate must sit inside the indifference zone."
                )
        return tau_value, p0_value, p1_value
    tau_value = check_open_unit("tau", 0.9 if tau is None else tau)
    if delta is None:
        if tau_value <= 0.5:
            raise InvalidArgument(
                f"tau={tau_value}: the default zone doubles the tolerated failure rate "
                f"1 - tau, which needs tau > 0.5. Pass delta (zone tau +- delta) or p0 and "
                "p1 explicitly."
            )
        # round away representation noise (e.g. (1 + 0.9) / 2) so p0/p1 print as expected
        return tau_value, round((1.0 + tau_value) / 2.0, 12), round(2.0 * tau_value - 1.0, 12)
    delta_value = check_open_unit("delta", delta)
    p0_value, p1_value = tau_value + delta_value, tau_value - delta_value
    if not 0.0 < p1_value < p0_value < 1.0:
        raise InvalidArgument(
            f"tau={tau_value} with delta={delta_value} gives p0={p0_value:g}, "
            f"p1={p1_value:g}; both must lie strictly between 0 and 1. Use a smaller delta."
        )
    return tau_value, p0_value, p1_value


def zero_failure_runs(target: float = 0.9, confidence: float = 0.95) -> int:
    """Clean runs needed to certify ``pass rate >= target`` at ``confidence``.

    The smallest ``n`` with ``target ** n <= 1 - confidence``: 29 for 0.90, 59 for 0.95 and
    299 for 0.99 at 95% confidence.
    """
    target = check_open_unit("target", target)
    confidence = check_open_unit("confidence", confidence)
    allowed = 1.0 - confidence
    n = max(1, math.ceil(math.log(allowed) / math.log(target)))
    while target**n > allowed:  # guard against rounding in the logarithms
        n += 1
    while n > 1 and target ** (n - 1) <= allowed:
        n -= 1
    return n


class ZeroFailureCertification(_LatticeTest):
    """Certify ``pass rate >= target`` with ``confidence`` by a run of clean passes.

    ACCEPT after :func:`zero_failure_runs` consecutive passes; REJECT ("not certified") at
    the first failure.
    """

    def __init__(self, target: float = 0.9, confidence: float = 0.95) -> None:
        self.target = check_open_unit("target", target)
        self.confidence = check_open_unit("confidence", confidence)
        self.required_runs = zero_failure_runs(self.target, self.confidence)
        super().__init__(self.required_runs)

    def _rule(self, successes: int, failures: int) -> Decision | None:
        if failures > 0:
            return Decision.REJECT
        if successes >= self.required_runs:
            return Decision.ACCEPT
        return None

    def fresh(self) -> ZeroFailureCertification:
        return ZeroFailureCertification(self.target, self.confidence)

    @classmethod
    def with_runs(cls, runs: int, confidence: float = 0.95) -> ZeroFailureCertification:
        """The certification that needs exactly ``runs`` clean runs (TDAD's high-risk gate is
        50): its ``target`` is the pass rate those runs certify at ``confidence``."""
        runs = check_count("runs", runs, minimum=1)
        confidence = check_open_unit("confidence", confidence)
        target = (1.0 - confidence) ** (1.0 / runs)
        # nudge past floating-point error so that exactly `runs` clean runs are required
        while zero_failure_runs(target, confidence) > runs:
            target = math.nextafter(target, 0.0)
        while zero_failure_runs(target, confidence) < runs:
            target = math.nextafter(target, 1.0)
        return cls(target, confidence)

    def __repr__(self) -> str:
        return (
            f"ZeroFailureCertification(target={self.target:g}, "
            f"confidence={self.confidence:g}, required_runs={self.required_runs}; "
            f"{self._state_repr()})"
        )


class FixedN(_LatticeTest):
    """Run exactly ``n`` times, then ACCEPT if the pass rate is at least ``threshold``.

    The defaults (50 runs, threshold 0.9, i.e. accept from 45 passes) are the smallest fixed
    design with 5% false-fail at 0.95 and 5% false-pass at 0.80, the same guarantees as the
    default :class:`SPRT`.
    """

    def __init__(self, n: int = 50, threshold: float = 0.9) -> None:
        self.runs = check_count("n", n, minimum=1)
        self.threshold = check_closed_unit("threshold", threshold)
        self.min_successes = next(
            (s for s in range(self.runs + 1) if s / self.runs >= self.threshold),
            self.runs,
        )
        """The fewest passes out of ``n`` that make the rate reach ``threshold``."""
        super().__init__(self.runs)

    @classmethod
    def design(
        cls,
        p0: float = 0.95,
        p1: float = 0.80,
        alpha: float = 0.05,
        beta: float = 0.05,
        *,
        max_n: int = 100_000,
    ) -> FixedN:
        """The smallest fixed design with false-fail ``<= alpha`` at ``p0`` and false-pass
        ``<= beta`` at ``p1`` (exact binomial tails).

        For each ``n`` it takes the fewest passes ``c`` with ``P(X >= c | p1) <= beta`` and
        keeps the first ``n`` for which also ``P(X < c | p0) <= alpha``.
        """
        p0 = check_open_unit("p0", p0)
        p1 = check_open_unit("p1", p1)
        alpha = check_open_unit("alpha", alpha)
        beta = check_open_unit("beta", beta)
        max_n = check_count("max_n", max_n, minimum=1)
        if not p1 < p0:
            raise InvalidArgument(f"p1={p1} must be smaller than p0={p0}.")
        for n in range(1, max_n + 1):
            # P(X >= c | p1) decreases in c: find the smallest c with it <= beta.
            lo, hi = 1, n + 1  # c = n + 1 (never accept) always satisfies the beta side
            while lo < hi:
                mid = (lo + hi) // 2
                if _binomial_upper_tail(mid, n, p1) <= beta:
                    hi = mid
                else:
                    lo = mid + 1
            c = lo
            if c <= n and binomial_cdf(c - 1, n, p0) <= alpha:
                return cls(n, c / n)
        raise InvalidArgument(
            f"no fixed design with at most max_n={max_n} runs separates p0={p0} from "
            f"p1={p1} at alpha={alpha}, beta={beta}; widen the zone or raise max_n."
        )

    def _rule(self, successes: int, failures: int) -> Decision | None:
        if successes + failures < self.runs:
            return None
        return Decision.ACCEPT if successes >= self.min_successes else Decision.REJECT

    def fresh(self) -> FixedN:
        return FixedN(self.runs, self.threshold)

    def __repr__(self) -> str:
        return f"FixedN(n={self.runs}, threshold={self.threshold:g}; {self._state_repr()})"


class Screen(_LatticeTest):
    """ACCEPT after ``depth`` clean runs; from the first failure on, decide as ``inner`` does
    on the same counts (the inner tests decide on counts alone, so nothing is lost)."""

    def __init__(self, inner: _LatticeTest, depth: int) -> None:
        self.inner = inner.fresh()
        self.depth = check_count("depth", depth, minimum=1)
        super().__init__(inner.max_runs)

    def _rule(self, successes: int, failures: int) -> Decision | None:
        if failures == 0 and successes >= self.depth:
            return Decision.ACCEPT
        return self.inner._rule(successes, failures)

    @property
    def screened(self) -> bool:
        """Whether the screen (not the inner test) accepted: clean runs, fewer than the
        inner test needs."""
        return (
            self.decision is Decision.ACCEPT
            and self.failures == 0
            and self.inner._decide(self.successes, 0) is not Decision.ACCEPT
        )

    def fresh(self) -> Screen:
        return Screen(self.inner, self.depth)

    def __repr__(self) -> str:
        return f"Screen(depth={self.depth}, then {type(self.inner).__name__}; {self._state_repr()})"
