"""Tests of agentprop._stats, the pure statistics layer.

Statistical behaviour is checked with seeded simulations whose true rates are known, against
theory computed independently of the code under test (brute-force binomial sums with
math.comb, enumeration of outcome sequences, closed forms). Every tolerance is stated where
it is used. Monte Carlo noise bounds use 3 or 4 binomial standard errors, so with the fixed
seeds the tests are deterministic and a genuine error of that size would still be caught.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from agentprop._stats import (
    SPRT,
    Decision,
    FixedN,
    SequentialTest,
    ZeroFailureCertification,
    binomial_cdf,
    categorical_two_sample_test,
    classify_rate,
    clopper_pearson_interval,
    estimate_rate,
    fisher_exact_two_sided,
    mean_pass_hat_k,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
    zero_failure_runs,
)
from agentprop.errors import InvalidArgument

# ---------------------------------------------------------------------------------------------
# independent reference computations (exact integers, no shared code with agentprop._stats)


def binom_pmf(k: int, n: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1.0 - p) ** (n - k)


def binom_le(k: int, n: int, p: float) -> float:
    return math.fsum(binom_pmf(i, n, p) for i in range(0, k + 1))


def binom_ge(k: int, n: int, p: float) -> float:
    return math.fsum(binom_pmf(i, n, p) for i in range(k, n + 1))


def three_se(p: float, trials: int) -> float:
    return 3.0 * math.sqrt(p * (1.0 - p) / trials)


# ---------------------------------------------------------------------------------------------
# intervals


def test_clopper_pearson_zero_and_all_successes_have_closed_forms() -> None:
    lower, upper = clopper_pearson_interval(0, 10)
    assert lower == 0.0
    assert upper == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-15)
    lower, upper = clopper_pearson_interval(10, 10)
    assert upper == 1.0
    assert lower == pytest.approx(0.025 ** (1 / 10), rel=1e-15)
    lower, upper = clopper_pearson_interval(0, 29, confidence=0.9)
    assert lower == 0.0
    assert upper == pytest.approx(1 - 0.05 ** (1 / 29), rel=1e-15)


def test_textbook_values() -> None:
    # R: binom.test(5, 10)$conf.int and prop.test(5, 10, correct = FALSE)$conf.int
    assert clopper_pearson_interval(5, 10) == pytest.approx((0.187086, 0.812914), abs=1e-6)
    assert wilson_interval(5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    # Wilson at 0 successes has the closed form upper = z^2 / (n + z^2)
    z = 1.959963984540054
    lower, upper = wilson_interval(0, 20)
    assert lower == 0.0
    assert upper == pytest.approx(z * z / (20 + z * z), rel=1e-12)


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
@pytest.mark.parametrize(("successes", "n"), [(1, 7), (3, 10), (18, 20), (44, 50), (97, 100)])
def test_clopper_pearson_endpoints_solve_their_defining_equations(
    successes: int, n: int, confidence: float
) -> None:
    tail = (1 - confidence) / 2
    lower, upper = clopper_pearson_interval(successes, n, confidence)
    assert binom_ge(successes, n, lower) == pytest.approx(tail, rel=1e-9)
    assert binom_le(successes, n, upper) == pytest.approx(tail, rel=1e-9)


def test_binomial_cdf_matches_brute_force() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 120))
        k = int(rng.integers(-1, n + 2))
        p = float(rng.random())
        expected = 0.0 if k < 0 else 1.0 if k >= n else binom_le(k, n, p)
        assert binomial_cdf(k, n, p) == pytest.approx(expected, rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("n", [5, 13, 30])
def test_clopper_pearson_exact_coverage_never_below_nominal(n: int) -> None:
    # Exact coverage: sum of P(X = s) over the s whose interval contains p.
    intervals = [clopper_pearson_interval(s, n) for s in range(n + 1)]
    for p in np.linspace(0.005, 0.995, 199):
        coverage = math.fsum(
            binom_pmf(s, n, float(p)) for s, (lo, hi) in enumerate(intervals) if lo <= p <= hi
        )
        assert coverage >= 0.95 - 1e-12


@pytest.mark.parametrize(("n", "p"), [(10, 0.9), (30, 0.95), (50, 0.5), (100, 0.97)])
def test_simulated_coverage(n: int, p: float) -> None:
    trials = 4000
    draws = np.random.default_rng(n * 1000 + round(p * 100)).binomial(n, p, size=trials)
    cp = {s: clopper_pearson_interval(s, n) for s in range(n + 1)}
    wilson = {s: wilson_interval(s, n) for s in range(n + 1)}
    cp_cover = np.mean([cp[s][0] <= p <= cp[s][1] for s in draws])
    wilson_cover = np.mean([wilson[s][0] <= p <= wilson[s][1] for s in draws])
    # Clopper-Pearson guarantees >= 95%: allow only Monte Carlo noise (3 SE ~ 0.010).
    assert cp_cover >= 0.95 - three_se(0.95, trials)
    # Wilson is near nominal but oscillates below it (dips to ~0.93 for these n are known,
    # Brown, Cai & DasGupta 2001): allow 0.02 plus Monte Carlo noise.
    assert wilson_cover >= 0.95 - 0.02 - three_se(0.95, trials)
    # and it is the shorter interval on average, which is why it is reported at all
    assert np.mean([wilson[s][1] - wilson[s][0] for s in draws]) < np.mean(
        [cp[s][1] - cp[s][0] for s in draws]
    )


def test_exact_interval_contains_wilson_away_from_the_extremes() -> None:
    for n in range(2, 51):
        for s in range(1, n):
            w_lo, w_hi = wilson_interval(s, n)
            cp_lo, cp_hi = clopper_pearson_interval(s, n)
            assert cp_lo <= w_lo <= s / n <= w_hi <= cp_hi


def test_estimate_rate_bundles_both_intervals() -> None:
    estimate = estimate_rate(18, 20)
    assert estimate.rate == 0.9
    assert estimate.wilson == wilson_interval(18, 20)
    assert estimate.clopper_pearson == clopper_pearson_interval(18, 20)
    assert "18/20" in str(estimate)


@pytest.mark.parametrize("interval", [wilson_interval, clopper_pearson_interval])
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((11, 10), "cannot exceed"),
        ((0, 0), "n=0"),
        ((-1, 10), "successes=-1"),
        ((2.5, 10), "must be an integer"),
        ((True, 10), "must be an integer"),
        ((5, 10, 1.0), "strictly between 0 and 1"),
        ((5, 10, 0.0), "strictly between 0 and 1"),
        ((5, 10, float("nan")), "finite"),
    ],
)
def test_interval_argument_validation(
    interval: object, args: tuple[object, ...], fragment: str
) -> None:
    assert callable(interval)
    with pytest.raises(InvalidArgument, match=fragment):
        interval(*args)


# ---------------------------------------------------------------------------------------------
# pass^k


def test_pass_hat_k_equals_enumeration_of_k_subsets() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(outcomes, k))
                all_pass = sum(all(s) for s in subsets) / len(subsets)
                any_pass = sum(any(s) for s in subsets) / len(subsets)
                assert pass_hat_k(c, n, k) == pytest.approx(all_pass, rel=1e-15)
                assert pass_at_k(c, n, k) == pytest.approx(any_pass, rel=1e-15, abs=1e-15)


def test_pass_hat_k_is_unbiased_where_rate_power_is_not() -> None:
    n, k, p = 8, 4, 0.8
    unbiased = math.fsum(binom_pmf(c, n, p) * pass_hat_k(c, n, k) for c in range(n + 1))
    plug_in = math.fsum(binom_pmf(c, n, p) * (c / n) ** k for c in range(n + 1))
    assert unbiased == pytest.approx(p**k, rel=1e-12)
    assert plug_in > p**k + 0.02  # the naive estimate is biased upwards


def test_mean_pass_hat_k_averages_cases_and_matches_simulation() -> None:
    assert mean_pass_hat_k([(4, 4), (2, 4), (0, 4)], 2) == pytest.approx((1 + 1 / 6 + 0) / 3)
    rng = np.random.default_rng(5)
    rates = rng.uniform(0.5, 1.0, size=400)
    counts = [(int(rng.binomial(10, r)), 10) for r in rates]
    # theory: the mean of p**3 over the cases; the estimate's SE here is about 0.01
    assert mean_pass_hat_k(counts, 3) == pytest.approx(float(np.mean(rates**3)), abs=0.04)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: pass_hat_k(3, 4, 5), "larger than the number of runs"),
        (lambda: pass_hat_k(3, 4, 0), "k=0"),
        (lambda: pass_hat_k(5, 4, 2), "cannot exceed"),
        (lambda: mean_pass_hat_k([], 1), "empty"),
        (lambda: mean_pass_hat_k([(1, 2, 3)], 1), "two integers"),  # type: ignore[list-item]
    ],
)
def test_pass_hat_k_validation(call: object, fragment: str) -> None:
    assert callable(call)
    with pytest.raises(InvalidArgument, match=fragment):
        call()


# ---------------------------------------------------------------------------------------------
# sequential tests: helpers


def simulate(
    test: SequentialTest, p: float, trials: int, seed: int, horizon: int = 3000
) -> tuple[list[Decision], np.ndarray]:
    """Run fresh copies of ``test`` on Bernoulli(p) outcomes; decisions and runs used."""
    rng = np.random.default_rng(seed)
    outcomes = rng.random((trials, horizon)) < p
    decisions: list[Decision] = []
    runs = np.empty(trials)
    for i in range(trials):
        case = test.fresh()
        for outcome in outcomes[i]:
            if case.update(bool(outcome)) is not None:
                break
        assert case.decision is not None, "horizon too short for the simulation"
        decisions.append(case.decision)
        runs[i] = case.n
    return decisions, runs


def test_all_tests_satisfy_the_protocol() -> None:
    for test in (SPRT(), ZeroFailureCertification(), FixedN()):
        assert isinstance(test, SequentialTest)
        assert (test.n, test.successes, test.failures, test.decision, test.done) == (
            0,
            0,
            0,
            None,
            False,
        )


# ---------------------------------------------------------------------------------------------
# SPRT


def test_sprt_hypotheses_from_tau_delta_or_explicit() -> None:
    default = SPRT()
    assert (default.tau, default.p0, default.p1) == (0.9, 0.95, 0.8)
    assert (SPRT(0.99).p0, SPRT(0.99).p1) == (0.995, 0.98)
    additive = SPRT(0.9, 0.05)
    assert (additive.p0, additive.p1) == pytest.approx((0.95, 0.85))
    explicit = SPRT(p0=0.7, p1=0.5)
    assert (explicit.tau, explicit.p0, explicit.p1) == (None, 0.7, 0.5)
    assert math.isclose(default.reject_bound, math.log(19))
    assert math.isclose(default.accept_bound, -math.log(19))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"p0": 0.8, "p1": 0.9}, "must be smaller than p0"),
        ({"p0": 0.9}, "give both"),
        ({"delta": 0.05, "p0": 0.95, "p1": 0.8}, "not both"),
        ({"tau": 0.5}, "tau > 0.5"),
        ({"tau": 0.9, "delta": 0.2}, "strictly between 0 and 1"),
        ({"tau": 0.99, "p0": 0.95, "p1": 0.8}, "outside"),
        ({"alpha": 0.5, "beta": 0.5}, "add up to 1"),
        ({"max_runs": 0}, "max_runs=0"),
    ],
)
def test_sprt_validation(kwargs: dict[str, float], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        SPRT(**kwargs)  # type: ignore[arg-type]


def test_sprt_log_lr_and_clean_run_length() -> None:
    test = SPRT()
    for outcome in [True, False, True, True]:
        test.update(outcome)
    expected = 3 * math.log(0.8 / 0.95) + 1 * math.log(0.2 / 0.05)
    assert test.log_lr == pytest.approx(expected, rel=1e-12)
    # with no failures the test accepts after ceil(log(19) / log(0.95 / 0.8)) = 18 passes
    clean = SPRT()
    needed = math.ceil(math.log(19) / math.log(0.95 / 0.8))
    assert [clean.update(True) for _ in range(needed - 1)] == [None] * (needed - 1)
    assert clean.update(True) is Decision.ACCEPT
    assert clean.n == needed == 18
    # three straight failures: 3 * log(4) = 4.16 > log(19) = 2.94, but two are not enough
    failing = SPRT()
    assert failing.run([False, False, False]) is Decision.REJECT
    assert failing.n == 3


def test_sprt_refuses_runs_after_deciding_and_non_bool_outcomes() -> None:
    test = SPRT()
    test.run([False] * 3)
    with pytest.raises(InvalidArgument, match="already decided REJECT"):
        test.update(True)
    with pytest.raises(InvalidArgument, match="needs a bool"):
        SPRT().update(1)  # type: ignore[arg-type]
    import numpy as np

    numpy_bool = SPRT()
    numpy_bool.update(np.bool_(True))  # type: ignore[arg-type]  # numpy's bools still count
    assert numpy_bool.n == 1
    fresh = test.fresh()
    assert (fresh.n, fresh.decision, fresh.p0, fresh.p1) == (0, None, 0.95, 0.8)


def test_sprt_truncation_is_inconclusive() -> None:
    test = SPRT(max_runs=10)
    # alternate so log_lr stays inside the boundaries: 1 failure per 9 passes is +1.39 - 1.55
    outcomes = [True] * 4 + [False] + [True] * 5
    decisions = [test.update(o) for o in outcomes]
    assert decisions[:-1] == [None] * 9
    assert decisions[-1] is Decision.INCONCLUSIVE
    assert test.accept_bound < test.log_lr < test.reject_bound
    stopped = SPRT()
    stopped.update(True)
    assert stopped.stop() is Decision.INCONCLUSIVE and stopped.done


def test_sprt_analysis_matches_enumeration_of_all_outcome_sequences() -> None:
    # For a truncated test, enumerate all 2^m sequences: an independent check of the DP.
    m, p = 12, 0.85
    test = SPRT(max_runs=m)
    probability = {d: 0.0 for d in Decision}
    expected_runs = 0.0
    for sequence in itertools.product([True, False], repeat=m):
        case = test.fresh()
        case.run(sequence)
        assert case.decision is not None
        weight = p ** sum(sequence) * (1 - p) ** (m - sum(sequence))
        probability[case.decision] += weight
        expected_runs += weight * case.n
    analysis = test.analyse(p)
    assert analysis.expected_runs == pytest.approx(expected_runs, rel=1e-12)
    assert analysis.accept_probability == pytest.approx(probability[Decision.ACCEPT], rel=1e-12)
    assert analysis.reject_probability == pytest.approx(probability[Decision.REJECT], rel=1e-12)
    assert analysis.inconclusive_probability == pytest.approx(
        probability[Decision.INCONCLUSIVE], rel=1e-12
    )


@pytest.mark.parametrize(
    ("p", "design_runs"), [(1.0, 18), (0.95, 31), (0.9, 44), (0.8, 23), (0.7, 12), (0.5, 6)]
)
def test_sprt_expected_runs_match_design_numbers(p: float, design_runs: int) -> None:
    analysis = SPRT().analyse(p)
    assert abs(analysis.expected_runs - design_runs) <= 1
    total = analysis.accept_probability + analysis.reject_probability
    assert total + analysis.inconclusive_probability == pytest.approx(1.0, abs=1e-12)
    assert analysis.inconclusive_probability < 1e-12  # untruncated: always decides


def test_sprt_error_rates_by_simulation() -> None:
    trials = 2000
    alpha = beta = 0.05
    test = SPRT()
    # Wald's boundaries ignore the overshoot past the boundary, so the true error rates are
    # not exactly alpha and beta; Wald's inequality bounds them by alpha / (1 - beta) and
    # beta / (1 - alpha) (0.0526). Tolerance: that bound plus 3 binomial SEs of a 2,000-trial
    # estimate (0.0146).
    fail_decisions, fail_runs = simulate(test, 0.95, trials, seed=95)
    false_fail = fail_decisions.count(Decision.REJECT) / trials
    assert false_fail <= alpha / (1 - beta) + three_se(alpha, trials)
    pass_decisions, pass_runs = simulate(test, 0.80, trials, seed=80)
    false_pass = pass_decisions.count(Decision.ACCEPT) / trials
    assert false_pass <= beta / (1 - alpha) + three_se(beta, trials)
    # the exact error rates from the lattice analysis agree with the simulation (4 SE)
    exact_fail = test.analyse(0.95).reject_probability
    exact_pass = test.analyse(0.80).accept_probability
    assert abs(false_fail - exact_fail) <= 4 * math.sqrt(exact_fail * (1 - exact_fail) / trials)
    assert abs(false_pass - exact_pass) <= 4 * math.sqrt(exact_pass * (1 - exact_pass) / trials)
    # simulated mean runs agree with the exact expectation (4 standard errors of the mean)
    for runs, p in ((fail_runs, 0.95), (pass_runs, 0.80)):
        se = runs.std(ddof=1) / math.sqrt(trials)
        assert abs(runs.mean() - test.expected_sample_size(p)) <= 4 * se


@pytest.mark.parametrize("p", [1.0, 0.9, 0.7, 0.5])
def test_sprt_simulated_mean_runs_match_theory(p: float) -> None:
    trials = 1000
    decisions, runs = simulate(SPRT(), p, trials, seed=int(p * 1000))
    theory = SPRT().expected_sample_size(p)
    se = runs.std(ddof=1) / math.sqrt(trials)
    assert abs(runs.mean() - theory) <= max(4 * se, 1e-9)
    assert decisions.count(Decision.INCONCLUSIVE) == 0


def test_truncated_sprt_inconclusive_rate_matches_theory() -> None:
    trials = 2000
    test = SPRT(max_runs=30)
    decisions, runs = simulate(test, 0.9, trials, seed=30)
    analysis = test.analyse(0.9)
    rate = decisions.count(Decision.INCONCLUSIVE) / trials
    q = analysis.inconclusive_probability
    assert 0.3 < q < 0.8  # a budget of 30 is often too small at p = tau: inconclusive is common
    assert abs(rate - q) <= 4 * math.sqrt(q * (1 - q) / trials)
    assert runs.max() == 30


# ---------------------------------------------------------------------------------------------
# zero-failure certification


@pytest.mark.parametrize(("target", "runs"), [(0.90, 29), (0.95, 59), (0.99, 299)])
def test_zero_failure_run_counts(target: float, runs: int) -> None:
    assert zero_failure_runs(target, 0.95) == runs
    assert target**runs <= 0.05 < target ** (runs - 1)
    assert ZeroFailureCertification(target).required_runs == runs


def test_zero_failure_certification_behaviour() -> None:
    test = ZeroFailureCertification(0.9)
    assert test.run([True] * 28) is None
    assert test.update(True) is Decision.ACCEPT and test.n == 29
    failing = ZeroFailureCertification(0.9)
    assert failing.run([True] * 10 + [False]) is Decision.REJECT
    assert failing.n == 11


def test_zero_failure_certification_guarantee_by_simulation() -> None:
    # An agent whose true rate is exactly the target is certified with probability
    # 0.9 ** 29 = 0.047 <= 1 - confidence. Tolerance: 3 SEs of a 2,000-trial estimate.
    trials = 2000
    test = ZeroFailureCertification(0.9, 0.95)
    decisions, runs = simulate(test, 0.9, trials, seed=29)
    certified = decisions.count(Decision.ACCEPT) / trials
    assert certified <= 0.05 + three_se(0.05, trials)
    assert abs(certified - 0.9**29) <= 4 * math.sqrt(0.9**29 * (1 - 0.9**29) / trials)
    # expected runs: a geometric run truncated at 29, sum_{i<29} 0.9^i
    theory = math.fsum(0.9**i for i in range(29))
    assert test.expected_sample_size(0.9) == pytest.approx(theory, rel=1e-12)
    assert abs(runs.mean() - theory) <= 4 * runs.std(ddof=1) / math.sqrt(trials)


# ---------------------------------------------------------------------------------------------
# fixed N


def test_fixed_n_decides_only_after_n_runs_by_threshold() -> None:
    test = FixedN(20, threshold=0.7)
    assert test.run([False] * 19) is None  # hopeless, but a fixed design still runs on
    assert test.update(True) is Decision.REJECT and test.n == 20
    assert FixedN(20, 0.7).run([True] * 14 + [False] * 6) is Decision.ACCEPT  # 0.70 >= 0.7
    assert FixedN(20, 0.7).run([True] * 13 + [False] * 7) is Decision.REJECT
    assert FixedN(50, 0.9).min_successes == 45


def test_fixed_n_design_reproduces_matching_design() -> None:
    design = FixedN.design(0.95, 0.80, 0.05, 0.05)
    assert (design.runs, design.min_successes) == (50, 45)
    # independent check: 45 of 50 meets both error rates and no smaller n has any cutoff
    assert binom_le(44, 50, 0.95) <= 0.05 and binom_ge(45, 50, 0.80) <= 0.05
    for n in range(1, 50):
        assert not any(
            binom_le(c - 1, n, 0.95) <= 0.05 and binom_ge(c, n, 0.80) <= 0.05 for c in range(n + 1)
        )


def test_fixed_n_analysis_matches_binomial() -> None:
    analysis = FixedN(50, 0.9).analyse(0.9)
    assert analysis.expected_runs == 50
    assert analysis.accept_probability == pytest.approx(binom_ge(45, 50, 0.9), rel=1e-10)


# ---------------------------------------------------------------------------------------------
# two-sample tests


def test_fisher_textbook_and_symmetry() -> None:
    # Fisher's tea tasting: 3 of 4 vs 1 of 4 correct; two-sided p = 34 / 70
    assert fisher_exact_two_sided(3, 4, 1, 4) == pytest.approx(34 / 70, rel=1e-15)
    assert fisher_exact_two_sided(5, 5, 5, 5) == 1.0
    assert fisher_exact_two_sided(7, 20, 15, 30) == pytest.approx(
        fisher_exact_two_sided(15, 30, 7, 20), rel=1e-15
    )
    assert fisher_exact_two_sided(10, 10, 0, 10) == pytest.approx(2 / math.comb(20, 10))


def test_fisher_null_rejection_rate_and_power() -> None:
    rng = np.random.default_rng(2024)
    trials = 1000
    null = [
        fisher_exact_two_sided(int(rng.binomial(20, 0.8)), 20, int(rng.binomial(20, 0.8)), 20)
        for _ in range(trials)
    ]
    # a conditional exact test is conservative: at most 5% plus Monte Carlo noise (3 SE)
    assert np.mean(np.array(null) <= 0.05) <= 0.05 + three_se(0.05, trials)
    alternative = [
        fisher_exact_two_sided(int(rng.binomial(30, 0.95)), 30, int(rng.binomial(30, 0.5)), 30)
        for _ in range(200)
    ]
    assert np.mean(np.array(alternative) <= 0.05) >= 0.9


def test_fisher_validation() -> None:
    with pytest.raises(InvalidArgument, match="cannot exceed"):
        fisher_exact_two_sided(5, 4, 1, 4)
    with pytest.raises(InvalidArgument, match="a_n=0"):
        fisher_exact_two_sided(0, 0, 1, 4)


def test_categorical_with_two_categories_equals_fisher() -> None:
    for a, b in [(3, 1), (18, 9), (20, 20), (0, 7)]:
        expected = fisher_exact_two_sided(a, 20, b, 20)
        got = categorical_two_sample_test(
            {"approve": a, "deny": 20 - a}, {"approve": b, "deny": 20 - b}, seed=0
        )
        assert got == pytest.approx(expected, rel=1e-9)


def test_categorical_exact_matches_brute_force_enumeration() -> None:
    a = {"approve": 3, "deny": 1, "escalate": 0}
    b = {"approve": 1, "deny": 1, "escalate": 2}
    totals, n_a = [4, 2, 2], 4
    total = math.comb(8, 4)

    def weight(x: tuple[int, ...]) -> int:
        return math.prod(math.comb(m, k) for m, k in zip(totals, x, strict=True))

    observed = weight((3, 1, 0))
    tables = [x for x in itertools.product(*(range(m + 1) for m in totals)) if sum(x) == n_a]
    expected = sum(weight(x) for x in tables if weight(x) <= observed) / total
    assert categorical_two_sample_test(a, b, seed=0) == pytest.approx(expected, rel=1e-9)


def test_categorical_monte_carlo_is_seeded_and_close_to_exact() -> None:
    a = {"approve": 18, "deny": 2}
    b = {"approve": 9, "deny": 6, "escalate": 5}
    exact = categorical_two_sample_test(a, b, seed=0)
    first = categorical_two_sample_test(a, b, seed=7, exact_limit=0, permutations=20_000)
    again = categorical_two_sample_test(a, b, seed=7, exact_limit=0, permutations=20_000)
    assert first == again
    assert abs(first - exact) <= 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1 / 20_000


@pytest.mark.parametrize("exact_limit", [100_000, 0])
def test_categorical_null_rejection_rate_and_power(exact_limit: int) -> None:
    rng = np.random.default_rng(77 + exact_limit)
    labels = ["approve", "deny", "escalate"]
    null_probs = [0.6, 0.3, 0.1]
    trials = 600 if exact_limit else 200

    def sample(probs: list[float], n: int) -> Counter[str]:
        return Counter(rng.choice(labels, size=n, p=probs).tolist())

    null = [
        categorical_two_sample_test(
            sample(null_probs, 25),
            sample(null_probs, 25),
            seed=i,
            exact_limit=exact_limit,
            permutations=400,
        )
        for i in range(trials)
    ]
    # conditional test: at most 5% plus 3 SE of Monte Carlo noise over the trials
    assert np.mean(np.array(null) <= 0.05) <= 0.05 + three_se(0.05, trials)
    alternative = [
        categorical_two_sample_test(
            sample(null_probs, 25),
            sample([0.1, 0.3, 0.6], 25),
            seed=i,
            exact_limit=exact_limit,
            permutations=400,
        )
        for i in range(100)
    ]
    # power at this alternative is about 0.99 (checked by a 500-trial simulation)
    assert np.mean(np.array(alternative) <= 0.05) >= 0.9


def test_categorical_edge_cases_and_validation() -> None:
    assert categorical_two_sample_test({"approve": 5}, {"approve": 9}, seed=0) == 1.0
    with pytest.raises(InvalidArgument, match="at least one outcome"):
        categorical_two_sample_test({}, {"approve": 3}, seed=0)
    with pytest.raises(InvalidArgument, match="counts_b\\['deny'\\]=-1"):
        categorical_two_sample_test({"approve": 3}, {"deny": -1}, seed=0)
    with pytest.raises(InvalidArgument, match="seed"):
        categorical_two_sample_test({"a": 3}, {"b": 1}, seed="x")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# verdict bands


def test_classify_rate_bands() -> None:
    assert classify_rate(1.0) == "PASS"
    assert classify_rate(0.95) == "PASS"
    assert classify_rate(0.9499) == "UNSTABLE"
    assert classify_rate(0.7) == "UNSTABLE"
    assert classify_rate(0.6999) == "FAIL"
    assert classify_rate(0.0) == "FAIL"
    assert classify_rate(0.85, pass_band=0.8, unstable_band=0.5) == "PASS"
    with pytest.raises(InvalidArgument, match="above pass_band"):
        classify_rate(0.5, pass_band=0.6, unstable_band=0.8)
    with pytest.raises(InvalidArgument, match="between 0 and 1"):
        classify_rate(1.2)
