"""Runs to a decision: Wald's SPRT against the matching fixed-N design.

Usage: ``python benchmarks/sequential.py [--json PATH] [--trials N] [--seed S]``

For each true pass rate ``p`` the benchmark simulates ``trials`` agents whose runs pass
independently with probability ``p`` and feeds the *same* outcome stream to two tests with
the same guarantees (tau = 0.9: H0 p >= 0.95 vs H1 p <= 0.80, alpha = beta = 0.05):

* ``SPRT()``: stops as soon as the evidence is convincing;
* ``FixedN.design(0.95, 0.80, 0.05, 0.05)``: the smallest fixed design with those error rates
  (50 runs, accept from 45 passes), the baseline.

It prints one table: the simulated mean runs of the SPRT next to its exact expectation
(lattice dynamic programming, ``SPRT.analyse``), the fixed design's runs, their ratio, and the
fraction of agents each test ACCEPTed. Everything is seeded, so a rerun prints the same table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from agentprop._stats import SPRT, Decision, FixedN, SequentialTest

RATES = (1.0, 0.95, 0.9, 0.8, 0.7, 0.5)
HORIZON = 1000  # pre-drawn outcomes per trial; P(SPRT needs more) < 1e-12 at every rate


def run_trial(
    test: SequentialTest, outcomes: np.ndarray, rng: np.random.Generator, p: float
) -> None:
    """Feed pre-drawn outcomes (and, should they run out, fresh draws) until ``test`` decides."""
    for outcome in outcomes:
        if test.update(bool(outcome)) is not None:
            return
    while not test.done:
        test.update(bool(rng.random() < p))


def simulate(p: float, trials: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng([seed, round(p * 10_000)])
    outcomes = rng.random((trials, HORIZON)) < p
    sprt_template = SPRT()
    fixed_template = FixedN.design(0.95, 0.80, 0.05, 0.05)
    sequential_runs = np.empty(trials)
    sequential_accepts = 0
    fixed_runs = np.empty(trials)
    fixed_accepts = 0
    for i in range(trials):
        sprt = sprt_template.fresh()
        run_trial(sprt, outcomes[i], rng, p)
        sequential_runs[i] = sprt.n
        sequential_accepts += sprt.decision is Decision.ACCEPT
        fixed = fixed_template.fresh()
        run_trial(fixed, outcomes[i], rng, p)
        fixed_runs[i] = fixed.n
        fixed_accepts += fixed.decision is Decision.ACCEPT
    theory = sprt_template.analyse(p)
    mean_sequential = float(sequential_runs.mean())
    mean_fixed = float(fixed_runs.mean())
    return {
        "p": p,
        "sequential_mean_runs": mean_sequential,
        "sequential_runs_se": float(sequential_runs.std(ddof=1) / np.sqrt(trials)),
        "dp_expected_runs": theory.expected_runs,
        "fixed_runs": mean_fixed,
        "ratio": mean_sequential / mean_fixed,
        "sequential_pass_rate": sequential_accepts / trials,
        "dp_accept_probability": theory.accept_probability,
        "fixed_pass_rate": fixed_accepts / trials,
        "fixed_accept_probability": fixed_template.analyse(p).accept_probability,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write the rows as JSON to this path")
    parser.add_argument("--trials", type=int, default=2000, help="simulated agents per rate")
    parser.add_argument("--seed", type=int, default=20240917)
    args = parser.parse_args(argv)

    rows = [simulate(p, args.trials, args.seed) for p in RATES]

    fixed = FixedN.design(0.95, 0.80, 0.05, 0.05)
    print(
        f"SPRT (H0 p>=0.95 vs H1 p<=0.80, alpha=beta=0.05) vs fixed N={fixed.runs} "
        f"(accept from {fixed.min_successes} passes); {args.trials} seeded trials per p"
    )
    header = (
        f"{'p':>5} {'seq runs':>9} {'DP theory':>10} {'fixed runs':>11} {'ratio':>6} "
        f"{'seq pass':>9} {'fixed pass':>11}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['p']:>5.2f} {row['sequential_mean_runs']:>9.2f} "
            f"{row['dp_expected_runs']:>10.2f} {row['fixed_runs']:>11.0f} "
            f"{row['ratio']:>6.2f} {row['sequential_pass_rate']:>9.3f} "
            f"{row['fixed_pass_rate']:>11.3f}"
        )
    by_p = {row["p"]: row for row in rows}
    targets = {
        "runs_at_p_1.0_le_19": by_p[1.0]["sequential_mean_runs"] <= 19,
        "runs_at_p_0.5_le_7": by_p[0.5]["sequential_mean_runs"] <= 7,
    }
    print(
        "targets: <= 19 runs at p=1.0: "
        f"{'met' if targets['runs_at_p_1.0_le_19'] else 'MISSED'}; "
        f"<= 7 runs at p=0.5: {'met' if targets['runs_at_p_0.5_le_7'] else 'MISSED'}"
    )

    if args.json is not None:
        payload = {
            "rows": rows,
            "trials": args.trials,
            "seed": args.seed,
            "fixed_design": {"n": fixed.runs, "min_successes": fixed.min_successes},
            "targets": targets,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
