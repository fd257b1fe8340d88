"""Tests of agentprop._stats.judged: a judge's measured error and pass rates corrected for it.

Statistical claims are checked with seeded simulations of a judge of known sensitivity and
specificity over an agent of known pass rate; tolerances are 4 binomial standard errors.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from agentprop._stats import (
    SPRT,
    JudgeAgreement,
    cohens_kappa,
    corrected_interval,
    judge_pass_probability,
    judged_hypotheses,
    rogan_gladen,
    self_disagreement,
    wilson_interval,
)
from agentprop.errors import InvalidArgument

ROOT = Path(__file__).resolve().parents[1]


def test_rogan_gladen_inverts_the_judges_pass_probability() -> None:
    for p in (0.0, 0.3, 0.8, 0.95, 1.0):
        for se, sp in ((0.9, 0.8), (0.98, 0.6), (0.7, 0.99)):
            assert rogan_gladen(judge_pass_probability(p, se, sp), se, sp) == pytest.approx(
                p, abs=1e-12
            )
    # below the judge's floor (1 - sp) and above its ceiling (se) the estimate is clipped
    assert rogan_gladen(0.1, 0.9, 0.8) == 0.0
    assert rogan_gladen(0.95, 0.9, 0.8) == 1.0


def test_a_judge_no_better_than_a_coin_cannot_correct() -> None:
    with pytest.raises(InvalidArgument, match="no better than a coin"):
        rogan_gladen(0.5, 0.6, 0.4)
    coin = JudgeAgreement(true_pass=30, false_fail=30, true_fail=30, false_pass=30)
    assert corrected_interval(50, 100, coin).interval == (0.0, 1.0)
    assert judged_hypotheses(0.95, 0.8, coin) is None


def test_agreement_counts_pairs_and_kappa_matches_the_hand_computation() -> None:
    pairs = (
        [(True, True)] * 40 + [(True, False)] * 10 + [(False, False)] * 35 + [(False, True)] * 15
    )
    agreement = JudgeAgreement.from_pairs(pairs)
    assert (
        agreement.true_pass,
        agreement.false_fail,
        agreement.true_fail,
        agreement.false_pass,
    ) == (40, 10, 35, 15)
    assert agreement.sensitivity == 0.8 and agreement.specificity == 0.7
    # po = 0.75; human pass 0.5, judge pass 0.55 -> pe = 0.5*0.55 + 0.5*0.45 = 0.5; kappa = 0.5
    kappa, (lo, hi) = cohens_kappa(agreement)
    assert kappa == pytest.approx(0.5)
    half = 1.959963984540054 * math.sqrt(0.75 * 0.25 / 100) / 0.5
    assert (lo, hi) == pytest.approx((0.5 - half, 0.5 + half))
    assert agreement.sensitivity_interval() == wilson_interval(40, 50)
    perfect = JudgeAgreement(20, 0, 20, 0)
    assert cohens_kappa(perfect)[0] == 1.0


def test_self_disagreement_is_the_chance_two_answers_differ() -> None:
    # unanimous traces disagree 0; 1 of 3 -> 2*1*2/(3*2) = 2/3
    mean, interval, split = self_disagreement([(3, 3), (0, 3), (1, 3)])
    assert mean == pytest.approx((0 + 0 + 2 / 3) / 3)
    assert split == 1 and interval == wilson_interval(1, 3)
    with pytest.raises(InvalidArgument):
        self_disagreement([(1, 1)])


def _coverage(
    rng: np.random.Generator, se: float, sp: float, p: float, labels: int, runs: int, cases: int
) -> tuple[float, float]:
    corrected = raw = 0
    for _ in range(cases):
        tp, tf = int(rng.binomial(labels, se)), int(rng.binomial(labels, sp))
        agreement = JudgeAgreement(tp, labels - tp, tf, labels - tf)
        passes = int(rng.binomial(runs, judge_pass_probability(p, se, sp)))
        lo, hi = corrected_interval(passes, runs, agreement).interval
        corrected += lo <= p <= hi
        raw_lo, raw_hi = wilson_interval(passes, runs)
        raw += raw_lo <= p <= raw_hi
    return corrected / cases, raw / cases


def test_the_corrected_interval_covers_the_true_rate_and_the_raw_one_does_not() -> None:
    rng = np.random.default_rng(7)
    cases = 600
    tolerance = 4 * math.sqrt(0.95 * 0.05 / cases)
    # a judge that misses 20% of failures over an agent that passes 80% of its runs: raw rate ~0.76
    corrected, raw = _coverage(rng, se=0.9, sp=0.8, p=0.8, labels=100, runs=100, cases=cases)
    assert abs(corrected - 0.95) <= tolerance + 0.02
    assert raw < 0.85
    corrected, raw = _coverage(rng, se=0.85, sp=0.9, p=0.7, labels=200, runs=200, cases=cases)
    assert abs(corrected - 0.95) <= tolerance + 0.02
    assert raw < 0.5


def test_judged_hypotheses_keep_the_sprts_error_rates_for_the_calibrated_judge() -> None:
    se, sp = 0.95, 0.9
    agreement = JudgeAgreement(285, 15, 270, 30)  # exactly se, sp over 300 labels each
    hypotheses = judged_hypotheses(0.95, 0.8, agreement)
    assert hypotheses is not None
    q0, q1 = hypotheses
    assert q0 < judge_pass_probability(0.95, se, sp) and q1 > judge_pass_probability(0.8, se, sp)
    test = SPRT(p0=q0, p1=q1, alpha=0.05, beta=0.05)
    assert test.analyse(judge_pass_probability(0.95, se, sp)).reject_probability <= 0.05
    assert test.analyse(judge_pass_probability(0.8, se, sp)).accept_probability <= 0.05
    # the SPRT on raw verdicts rejects this good agent far more often than designed
    raw = SPRT(p0=0.95, p1=0.8, alpha=0.05, beta=0.05)
    assert raw.analyse(judge_pass_probability(0.95, se, sp)).reject_probability > 0.2
    # with few labels the judge cannot separate 0.95 from 0.80 at all
    assert judged_hypotheses(0.95, 0.8, JudgeAgreement(9, 1, 8, 2)) is None


def test_the_benchmark_writes_the_keys_the_issue_names(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "judges_benchmark", ROOT / "benchmarks" / "judges.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["judges_benchmark"] = module
    spec.loader.exec_module(module)
    out = tmp_path / "judges.json"
    module.main(["--json", str(out), "--cases", "200", "--trials", "40"])
    figures = json.loads(out.read_text())
    for key in (
        "coverage_corrected",
        "coverage_raw",
        "wrong_decisions_corrected",
        "wrong_decisions_raw",
        "judge_calls_per_decision",
    ):
        assert isinstance(figures[key], float)
    assert figures["coverage_corrected"] > figures["coverage_raw"]
    assert (
        figures["wrong_decisions_corrected"]
        < figures["wrong_decisions_raw"]
        < figures["wrong_decisions_once"]
    )
