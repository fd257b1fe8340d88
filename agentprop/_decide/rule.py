"""The decision rule: the oracle's settings, the sequential test they make, and the verdict
that test reaches on judged runs (:func:`decision_of`), with no runs, memo or records of its own.

Invariant: :func:`agentprop._decide.oracle.adecide` and the per-trial records
(:func:`agentprop._decide.records.recompute`) reach a verdict only through this module, so a
decision recomputed from its records is the decision the oracle made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentprop._judge.judges import JUDGED_MAX_RUNS, JudgeCorrection
from agentprop._scenario.trace import RunError
from agentprop._spec.model import Spec
from agentprop._stats import (
    SPRT,
    Decision,
    FixedN,
    Screen,
    SequentialTest,
    ZeroFailureCertification,
)
from agentprop.errors import InvalidArgument

__all__ = ["Mode", "OracleSettings", "OracleVerdict", "TrialRecord", "decision_of", "reach_verdict"]


Mode = Literal["sprt", "zero-failure", "fixed"]
OracleVerdict = Literal["PASS", "FAIL", "UNSTABLE", "INCONCLUSIVE"]


@dataclass(frozen=True)
class OracleSettings:
    """How a property is decided. :meth:`for_spec` derives the defaults from a spec."""

    mode: Mode = "sprt"
    tau: float = 0.9
    alpha: float = 0.05
    beta: float = 0.05
    max_runs: int = 100
    """Truncation of the SPRT: undecided after this many runs means UNSTABLE."""
    runs: int = 50
    """Runs of ``fixed`` and of ``zero-failure`` mode."""
    unstable_floor: float = 0.7
    """Below this pass rate a rejected property is FAIL; at or above it, UNSTABLE."""
    confidence: float = 0.95
    judge: JudgeCorrection | None = None
    """Set when the property is a model judge's: the SPRT then tests the judge's pass rate
    between the values its calibration maps ``p0`` and ``p1`` to, the result carries the
    corrected rate (:class:`JudgedRate`), and a judge that may not gate reports only."""
    screen: int | None = None
    """Clean runs that pass a case before the mode's own test would (``None``: no screen)."""

    def __post_init__(self) -> None:
        if self.mode not in ("sprt", "zero-failure", "fixed"):
            raise InvalidArgument(
                f"mode={self.mode!r} is not one of 'sprt', 'zero-failure', 'fixed'"
            )
        if not 0.0 < self.tau <= 1.0:
            raise InvalidArgument(f"tau={self.tau} must be in (0, 1]")
        if self.mode == "sprt" and not 0.5 < self.tau < 1.0:
            raise InvalidArgument(
                f"tau={self.tau}: the sequential test needs 0.5 < tau < 1; for tau=1.0 use "
                "mode='zero-failure' (certification by clean runs)"
            )
        if self.screen is not None and self.screen < 1:
            raise InvalidArgument(
                f"screen={self.screen} must be at least 1 (or None for no screen)"
            )
        for name in ("max_runs", "runs"):
            if getattr(self, name) < 1:
                raise InvalidArgument(f"{name}={getattr(self, name)} must be at least 1")

    @classmethod
    def for_spec(cls, spec: Spec, **overrides: Any) -> OracleSettings:
        """Defaults from ``defaults.reliability`` and ``risk_level``: high or critical risk
        means zero-failure certification with 50 runs (TDAD's tau = 1.0); otherwise the SPRT
        at ``tau = min_pass_rate``. These are the spec-wide defaults; a case's own settings
        (zero-failure for safety cases, the bindings' ``policies:``) come from
        :func:`agentprop._decide.safety.case_settings`."""
        rel = spec.defaults.reliability
        base: dict[str, Any] = {"tau": rel.min_pass_rate, "runs": max(rel.reruns, 1)}
        if spec.risk_level in ("high", "critical"):
            base.update(mode="zero-failure", runs=50, tau=1.0)
        elif not 0.5 < rel.min_pass_rate < 1.0:
            base.update(mode="zero-failure", runs=50) if rel.min_pass_rate >= 1.0 else base.update(
                mode="fixed"
            )
        base.update({k: v for k, v in overrides.items() if v is not None})
        if base.get("mode") == "fixed" and "runs" not in overrides:
            base["runs"] = max(rel.reruns, 1)
        return cls(**base)

    def judge_scale(self) -> tuple[float, float] | None:
        """The SPRT's hypotheses on a gating judge's scale (``None``: not judged, or the judge
        cannot separate them, or the mode is not the SPRT)."""
        if self.judge is None or not self.judge.gates or self.mode != "sprt":
            return None
        plain = SPRT(tau=self.tau, alpha=self.alpha, beta=self.beta)
        return self.judge.hypotheses(plain.p0, plain.p1)

    def make_test(self) -> SequentialTest:
        test: SPRT | ZeroFailureCertification | FixedN
        scale = self.judge_scale()
        if scale is not None:
            q0, q1 = scale
            test = SPRT(
                p0=q0,
                p1=q1,
                alpha=self.alpha,
                beta=self.beta,
                max_runs=max(self.max_runs, JUDGED_MAX_RUNS),
            )
        elif self.mode == "sprt":
            test = SPRT(tau=self.tau, alpha=self.alpha, beta=self.beta, max_runs=self.max_runs)
        elif self.mode == "zero-failure":
            test = ZeroFailureCertification.with_runs(self.runs, self.confidence)
        else:
            test = FixedN(self.runs, min(self.tau, 1.0))
        return Screen(test, self.screen) if self.screen is not None else test


@dataclass(frozen=True)
class TrialRecord:
    """What the property said of one run: worked out from the run's trace on every decision
    (never stored: the memo keeps runs)."""

    passed: bool
    signature: str | None = None
    explanation: str | None = None
    clause: str | None = None
    turn: int | None = None
    """0-based turn where the failure is (``None``: the whole conversation)."""
    step: int | None = None
    """0-based tool call of ``turn`` that broke the promise (``None``: the turn's reply or
    the turn as a whole)."""
    checks: int | None = None
    """How many checks judged the run (``None``: a property that does not say)."""
    failed_checks: tuple[str, ...] = ()
    """The signature of every check the run failed (for the per-trial records)."""


def reach_verdict(
    test: SequentialTest, settings: OracleSettings, budget_out: bool, infra: RunError | None = None
) -> tuple[OracleVerdict, str]:
    """The verdict and the rule that reached it, once ``test`` has taken every judged run
    (``budget_out``: the budget refused a run the test needed; ``infra``: an error that is not
    the agent's stopped it)."""
    verdict, decided_by = _plain_verdict(test, settings, budget_out, infra)
    judge = settings.judge
    if judge is None or decided_by in ("infrastructure", "budget"):
        return verdict, decided_by
    if settings.judge_scale() is None:
        return "INCONCLUSIVE", "judge reports only"
    return verdict, f"{decided_by} on the judge's verdicts, corrected for its error"


def _plain_verdict(
    test: SequentialTest, settings: OracleSettings, budget_out: bool, infra: RunError | None = None
) -> tuple[OracleVerdict, str]:
    if infra is not None and not test.done:
        return "INCONCLUSIVE", "infrastructure"
    decision = test.decision
    rate = test.successes / test.n if test.n else 0.0
    corrected = (
        settings.judge.corrected(test.successes, test.n) if settings.judge is not None else None
    )
    if corrected is not None and corrected.rate == corrected.rate:  # not NaN
        rate = corrected.rate
    if decision is None and budget_out and test.failures and rate < settings.tau:
        # the budget stopped the test after failures: what the runs made show, as a fixed batch
        # of that size would say it (never a pass; ``--runs 1`` would say the same of 1 run)
        return (
            "FAIL" if rate < settings.unstable_floor else "UNSTABLE"
        ), f"budget ({test.n} run(s), not confirmed)"
    if decision is None:
        return ("INCONCLUSIVE", "budget") if budget_out else ("INCONCLUSIVE", settings.mode)
    if decision == Decision.ACCEPT:
        return "PASS", "screen" if isinstance(test, Screen) and test.screened else settings.mode
    if decision == Decision.INCONCLUSIVE:
        return "UNSTABLE", f"{settings.mode} (truncated at {test.n} runs)"
    if settings.mode == "zero-failure":
        return "FAIL", settings.mode
    return ("FAIL" if rate < settings.unstable_floor else "UNSTABLE"), settings.mode


def decision_of(
    settings: OracleSettings, passed: Sequence[bool], *, refused: bool, infra: bool
) -> tuple[OracleVerdict, str, int, int]:
    """The verdict, rule, runs and passes of a decision made on the outcomes ``passed`` (judged
    runs in trial order), as :func:`agentprop._decide.oracle.adecide` reaches it: ``refused`` when
    the budget refused a run the test needed, ``infra`` when an error that is not the agent's
    stopped it (the per-trial records decide again with it:
    :func:`agentprop._decide.records.recompute`)."""
    test = settings.make_test()
    for outcome in passed:
        if test.done:
            break
        test.update(outcome)
    error = RunError(kind="infrastructure", message="recorded") if infra else None
    verdict, decided_by = reach_verdict(
        test, settings, refused and not test.done and not infra, error
    )
    return verdict, decided_by, test.n, test.successes
