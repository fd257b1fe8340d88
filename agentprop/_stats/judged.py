"""Pass rates measured by a judge that makes mistakes, and how much its mistakes cost.

Calibration against human labels gives the judge's sensitivity, specificity and kappa; the
Rogan–Gladen estimator corrects a judged rate, with Lang and Reiczigel's interval; and
:func:`judged_hypotheses` maps an SPRT's rates onto judge rates, or refuses when the judge cannot
tell them apart. Invariants: every function is pure; every interval lies in ``[0, 1]``
(kappa's in ``[-1, 1]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

from agentprop._stats._checks import (
    check_closed_unit,
    check_count,
    check_open_unit,
    check_successes,
)
from agentprop._stats.intervals import wilson_interval
from agentprop.errors import InvalidArgument

__all__ = [
    "CorrectedRate",
    "JudgeAgreement",
    "cohens_kappa",
    "corrected_interval",
    "judged_hypotheses",
    "judge_pass_probability",
    "rogan_gladen",
    "self_disagreement",
]


@dataclass(frozen=True)
class JudgeAgreement:
    """A calibration's 2x2 table: the judge's verdicts against human labels.

    ``true_pass``: human pass, judge pass; ``false_fail``: human pass, judge fail;
    ``true_fail``: human fail, judge fail; ``false_pass``: human fail, judge pass.
    """

    true_pass: int
    false_fail: int
    true_fail: int
    false_pass: int

    def __post_init__(self) -> None:
        for name in ("true_pass", "false_fail", "true_fail", "false_pass"):
            check_count(name, getattr(self, name))

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[bool, bool]]) -> JudgeAgreement:
        """Count ``(human_pass, judge_pass)`` pairs."""
        counts = {(True, True): 0, (True, False): 0, (False, False): 0, (False, True): 0}
        for human, judge in pairs:
            counts[(bool(human), bool(judge))] += 1
        return cls(
            counts[(True, True)],
            counts[(True, False)],
            counts[(False, False)],
            counts[(False, True)],
        )

    @property
    def labelled_pass(self) -> int:
        """Examples the human passed."""
        return self.true_pass + self.false_fail

    @property
    def labelled_fail(self) -> int:
        """Examples the human failed."""
        return self.true_fail + self.false_pass

    @property
    def n(self) -> int:
        """All labelled examples."""
        return self.labelled_pass + self.labelled_fail

    @property
    def sensitivity(self) -> float:
        """P(judge passes | human passed); needs at least one human pass."""
        _need("sensitivity", self.labelled_pass, "human-passed")
        return self.true_pass / self.labelled_pass

    @property
    def specificity(self) -> float:
        """P(judge fails | human failed); needs at least one human fail."""
        _need("specificity", self.labelled_fail, "human-failed")
        return self.true_fail / self.labelled_fail

    def sensitivity_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson interval for the sensitivity."""
        _need("sensitivity", self.labelled_pass, "human-passed")
        return wilson_interval(self.true_pass, self.labelled_pass, confidence)

    def specificity_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson interval for the specificity."""
        _need("specificity", self.labelled_fail, "human-failed")
        return wilson_interval(self.true_fail, self.labelled_fail, confidence)

    @property
    def youden(self) -> float:
        """``se + sp - 1``: 0 for a coin, 1 for a perfect judge."""
        return self.sensitivity + self.specificity - 1.0


def _need(what: str, count: int, kind: str) -> None:
    if count == 0:
        raise InvalidArgument(
            f"The judge's {what} needs at least one {kind} example, and the labels have none. Add "
            "labelled examples of both kinds."
        )


def judge_pass_probability(p: float, sensitivity: float, specificity: float) -> float:
    """``q = se p + (1 - sp)(1 - p)``: how often the judge passes a run of an agent whose
    true rate is ``p``."""
    p = check_closed_unit("p", p)
    se = check_closed_unit("sensitivity", sensitivity)
    sp = check_closed_unit("specificity", specificity)
    return se * p + (1.0 - sp) * (1.0 - p)


def rogan_gladen(raw_rate: float, sensitivity: float, specificity: float) -> float:
    """The Rogan–Gladen estimate ``(q + sp - 1) / (se + sp - 1)`` of the true pass rate,
    clipped to ``[0, 1]``."""
    q = check_closed_unit("raw_rate", raw_rate)
    se = check_closed_unit("sensitivity", sensitivity)
    sp = check_closed_unit("specificity", specificity)
    youden = se + sp - 1.0
    if youden <= 0.0:
        raise InvalidArgument(
            f"sensitivity={se:g} and specificity={sp:g} add up to {se + sp:g}, not more than 1: "
            "the judge does no better than a coin, so its verdicts say nothing about the pass "
            "rate. Improve the rubric or the judge model and calibrate again."
        )
    return min(1.0, max(0.0, (q + sp - 1.0) / youden))


@dataclass(frozen=True)
class CorrectedRate:
    """A pass rate estimated from judged runs, corrected for the judge's measured error."""

    raw_passes: int
    runs: int
    raw_rate: float
    rate: float
    interval: tuple[float, float]
    confidence: float


def corrected_interval(
    raw_passes: int, runs: int, agreement: JudgeAgreement, confidence: float = 0.95
) -> CorrectedRate:
    """Rogan–Gladen estimate and Lang–Reiczigel interval for the true pass rate.

    ``raw_passes`` of ``runs`` judged runs passed. Each of the three proportions gets
    ``z^2 / 2`` pseudo passes and failures; with ``J`` the adjusted Youden index the variance is
    ``(q(1-q)/n + p^2 se(1-se)/n_se + (1-p)^2 sp(1-sp)/n_sp) / J^2``. A judge whose adjusted
    ``J`` is not positive gives the whole ``[0, 1]``.
    """
    s, n = check_successes(raw_passes, runs)
    confidence = check_open_unit("confidence", confidence)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    z2 = z * z
    raw_rate = s / n
    n_q, n_se, n_sp = n + z2, agreement.labelled_pass + z2, agreement.labelled_fail + z2
    q = (s + z2 / 2.0) / n_q
    se = (agreement.true_pass + z2 / 2.0) / n_se
    sp = (agreement.true_fail + z2 / 2.0) / n_sp
    youden = se + sp - 1.0
    if agreement.labelled_pass == 0 or agreement.labelled_fail == 0 or youden <= 0.0:
        return CorrectedRate(s, n, raw_rate, math.nan, (0.0, 1.0), confidence)
    point = (
        rogan_gladen(raw_rate, agreement.sensitivity, agreement.specificity)
        if agreement.youden > 0.0
        else math.nan
    )
    centre = (q + sp - 1.0) / youden
    variance = (
        q * (1.0 - q) / n_q
        + centre**2 * se * (1.0 - se) / n_se
        + (1.0 - centre) ** 2 * sp * (1.0 - sp) / n_sp
    ) / youden**2
    half = z * math.sqrt(variance)
    lower = min(1.0, max(0.0, centre - half))
    upper = max(0.0, min(1.0, centre + half))
    return CorrectedRate(s, n, raw_rate, point, (lower, upper), confidence)


def judged_hypotheses(
    p0: float, p1: float, agreement: JudgeAgreement, calibration_confidence: float = 0.95
) -> tuple[float, float] | None:
    """Judge rates ``(q0, q1)`` for an SPRT on judged runs that tests ``p >= p0``
    against ``p <= p1``.

    The judge passes a run of an agent at ``p`` with probability ``se p + (1 - sp)(1 - p)``;
    its estimate from the calibration has standard error ``sqrt(p^2 v_se + (1 - p)^2 v_sp)``
    (``v`` the binomial variances of the measured sensitivity and specificity). ``q0`` is the
    estimate at ``p0`` lowered, and ``q1`` the estimate at ``p1`` raised, by ``z`` of those errors,
    ``z`` the one-sided quantile of ``calibration_confidence``: a judge as good as the
    calibration says, or worse by up to that margin, keeps the SPRT's error rates. ``None`` when
    ``q1 >= q0``: with this calibration no test on the judge's verdicts separates the two.
    """
    p0 = check_open_unit("p0", p0)
    p1 = check_open_unit("p1", p1)
    if not p1 < p0:
        raise InvalidArgument(f"p1={p1} must be smaller than p0={p0}.")
    calibration_confidence = check_open_unit("calibration_confidence", calibration_confidence)
    se, sp = agreement.sensitivity, agreement.specificity
    if se + sp <= 1.0:
        return None
    # Agresti-Coull-style pseudo counts keep a perfect calibration (se = 1) from claiming no error.
    z = NormalDist().inv_cdf(calibration_confidence)
    v_se = _adjusted_variance(agreement.true_pass, agreement.labelled_pass, z)
    v_sp = _adjusted_variance(agreement.true_fail, agreement.labelled_fail, z)
    q0 = se * p0 + (1.0 - sp) * (1.0 - p0) - z * math.sqrt(p0 * p0 * v_se + (1.0 - p0) ** 2 * v_sp)
    q1 = se * p1 + (1.0 - sp) * (1.0 - p1) + z * math.sqrt(p1 * p1 * v_se + (1.0 - p1) ** 2 * v_sp)
    if not 0.0 < q1 < q0 < 1.0:
        return None
    return q0, q1


def _adjusted_variance(successes: int, n: int, z: float) -> float:
    """Binomial variance of a proportion with ``z^2 / 2`` pseudo successes and failures."""
    total = n + z * z
    rate = (successes + z * z / 2.0) / total
    return rate * (1.0 - rate) / total


def cohens_kappa(
    agreement: JudgeAgreement, confidence: float = 0.95
) -> tuple[float, tuple[float, float]]:
    """Cohen's kappa between judge and human, with a large-sample interval clipped to ``[-1, 1]``.

    ``kappa = (po - pe) / (1 - pe)``; its standard error is ``sqrt(po (1 - po) / n) / (1 - pe)``.
    When chance agreement is total (one side always says the same) kappa is 0 with interval
    ``[-1, 1]``."""
    confidence = check_open_unit("confidence", confidence)
    n = agreement.n
    if n == 0:
        raise InvalidArgument("Cohen's kappa needs at least one labelled example.")
    po = (agreement.true_pass + agreement.true_fail) / n
    human_pass = agreement.labelled_pass / n
    judge_pass = (agreement.true_pass + agreement.false_pass) / n
    pe = human_pass * judge_pass + (1.0 - human_pass) * (1.0 - judge_pass)
    if pe >= 1.0:
        return 0.0, (-1.0, 1.0)
    kappa = (po - pe) / (1.0 - pe)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    half = z * math.sqrt(po * (1.0 - po) / n) / (1.0 - pe)
    return kappa, (max(-1.0, kappa - half), min(1.0, kappa + half))


def self_disagreement(
    votes: Iterable[tuple[int, int]], confidence: float = 0.95
) -> tuple[float, tuple[float, float], int]:
    """How often the judge contradicts itself on the same trace.

    ``votes`` holds ``(passes, samples)`` per trace, each asked ``samples >= 2`` times. Returns
    the mean pairwise disagreement (the chance two of its answers on one trace differ, averaged
    over traces), a Wilson interval for the share of traces it was not unanimous on, and that
    number of traces.
    """
    rates: list[float] = []
    split = 0
    for passes, samples in votes:
        a, k = check_successes(passes, samples, n_minimum=2)
        rates.append(2.0 * a * (k - a) / (k * (k - 1)))
        split += 0 < a < k
    if not rates:
        raise InvalidArgument("self_disagreement needs at least one trace asked two or more times.")
    return math.fsum(rates) / len(rates), wilson_interval(split, len(rates), confidence), split
