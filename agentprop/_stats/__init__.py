"""Pure statistics for agentprop: intervals, pass^k, sequential tests, two-sample tests, bands
and judged rates.

Nothing here runs an agent or touches I/O; only numpy and the standard library are used.
"""

from __future__ import annotations

from agentprop._stats.bands import RateBand, classify_rate
from agentprop._stats.intervals import (
    RateEstimate,
    binomial_cdf,
    clopper_pearson_interval,
    estimate_rate,
    wilson_interval,
)
from agentprop._stats.judged import (
    CorrectedRate,
    JudgeAgreement,
    cohens_kappa,
    corrected_interval,
    judge_pass_probability,
    judged_hypotheses,
    rogan_gladen,
    self_disagreement,
)
from agentprop._stats.passk import mean_pass_hat_k, pass_at_k, pass_hat_k
from agentprop._stats.sequential import (
    SPRT,
    Decision,
    FixedN,
    Screen,
    SequentialAnalysis,
    SequentialTest,
    ZeroFailureCertification,
    zero_failure_runs,
)
from agentprop._stats.two_sample import (
    categorical_two_sample_test,
    fisher_exact_greater,
    fisher_exact_two_sided,
)

__all__ = [
    "SPRT",
    "CorrectedRate",
    "Decision",
    "FixedN",
    "JudgeAgreement",
    "RateBand",
    "RateEstimate",
    "Screen",
    "SequentialAnalysis",
    "SequentialTest",
    "ZeroFailureCertification",
    "binomial_cdf",
    "categorical_two_sample_test",
    "classify_rate",
    "clopper_pearson_interval",
    "cohens_kappa",
    "corrected_interval",
    "estimate_rate",
    "fisher_exact_greater",
    "fisher_exact_two_sided",
    "judge_pass_probability",
    "judged_hypotheses",
    "mean_pass_hat_k",
    "pass_at_k",
    "pass_hat_k",
    "rogan_gladen",
    "self_disagreement",
    "wilson_interval",
    "zero_failure_runs",
]
