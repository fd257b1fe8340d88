"""Runs to a decision: Wald's SPRT against fixed-N designs, and the rules people deploy.

Usage: ``python benchmarks/sequential.py [--json PATH] [--trials N] [--seed S]``

For each true pass rate ``p`` the benchmark simulates ``trials`` agents whose runs pass
independently with probability ``p`` and feeds the *same* outcome stream to every test:

* ``SPRT(max_runs=100)``: the oracle's default as deployed (tau = 0.9: H0 p >= 0.95 vs H1
  p <= 0.80, alpha = beta = 0.05), truncated at the 100-run cap; a case still undecided
  there is UNSTABLE (the ``cap`` column: how often, simulated and exact);
* ``fixed N``: ``FixedN.design(0.95, 0.80, 0.05, 0.05)``, the smallest fixed design with
  the same error rates (50 runs, accept from 45 passes);
* ``curtailed``: the same design stopped as soon as its verdict is certain (45 passes: no
  failure to come can reject; 6 failures: no pass to come can accept). Same verdicts, same
  error rates, fewer runs: the baseline a skeptic would use, and the ratio ``SPRT/curt``.

Every count has its exact expectation next to the simulation (lattice dynamic programming,
``analyse``). A second table scores the rules people actually deploy instead of a test --
``2 of 3``, ``8 of 10`` (each curtailed: stop once the verdict is certain) and ``best of 4``
(pass at the first passing run) -- by the probability each passes an agent of each rate,
next to the SPRT's: a rule that passes a p = 0.8 agent (the SPRT's "bad" rate, which it
passes at most 5% of the time) most of the time is cheap because it decides little.
Everything is seeded, so a rerun prints the same tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from agentprop._stats import SPRT, Decision, FixedN, SequentialTest
from agentprop._stats.sequential import SequentialAnalysis

RATES = (1.0, 0.95, 0.9, 0.8, 0.7, 0.5)
HORIZON = 1000  # pre-drawn outcomes per trial; P(SPRT needs more) < 1e-12 at every rate
CAP = 100
"""The oracle's default truncation (``OracleSettings.max_runs``)."""


class CurtailedFixedN(FixedN):
    """A fixed design that stops once its verdict is certain: ACCEPT at ``min_successes``
    passes, REJECT once so many runs failed that ``min_successes`` cannot be reached. Its
    verdict on every outcome stream is the uncurtailed design's."""

    def _rule(self, successes: int, failures: int) -> Decision | None:
        if successes >= self.min_successes:
            return Decision.ACCEPT
        if failures > self.runs - self.min_successes:
            return Decision.REJECT
        return None

    def fresh(self) -> CurtailedFixedN:
        return CurtailedFixedN(self.runs, self.threshold)


class BestOf(FixedN):
    """Pass at the first passing run of at most ``n`` ("best of n", pass@n)."""

    def __init__(self, n: int) -> None:
        super().__init__(n, 1.0 / n)

    def _rule(self, successes: int, failures: int) -> Decision | None:
        if successes >= 1:
            return Decision.ACCEPT
        if failures >= self.runs:
            return Decision.REJECT
        return None

    def fresh(self) -> BestOf:
        return BestOf(self.runs)


DEPLOYED: dict[str, SequentialTest] = {
    "2 of 3": CurtailedFixedN(3, 2 / 3),
    "8 of 10": CurtailedFixedN(10, 0.8),
    "best of 4": BestOf(4),
}


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
    tests: dict[str, SequentialTest] = {
        "sprt": SPRT(max_runs=CAP),
        "fixed": FixedN.design(0.95, 0.80, 0.05, 0.05),
        "curtailed": CurtailedFixedN(*_design_args()),
        **{name: t for name, t in DEPLOYED.items()},
    }
    runs = {name: np.empty(trials) for name in tests}
    accepts = dict.fromkeys(tests, 0)
    capped = 0
    for i in range(trials):
        for name, template in tests.items():
            test = template.fresh()
            run_trial(test, outcomes[i], rng, p)
            runs[name][i] = test.n
            accepts[name] += test.decision is Decision.ACCEPT
            if name == "sprt":
                capped += test.decision is Decision.INCONCLUSIVE
        verdicts = (tests["fixed"].fresh(), tests["curtailed"].fresh())
        for t in verdicts:
            run_trial(t, outcomes[i], rng, p)
        assert verdicts[0].decision is verdicts[1].decision, "curtailing changed a verdict"
    exact: dict[str, SequentialAnalysis] = {name: t.analyse(p) for name, t in tests.items()}
    row: dict[str, float] = {"p": p}
    for name in tests:
        row[f"{name}_mean_runs"] = float(runs[name].mean())
        row[f"{name}_dp_runs"] = exact[name].expected_runs
        row[f"{name}_pass_rate"] = accepts[name] / trials
        row[f"{name}_dp_accept"] = exact[name].accept_probability
    row["sprt_runs_se"] = float(runs["sprt"].std(ddof=1) / np.sqrt(trials))
    row["sprt_capped_rate"] = capped / trials
    row["sprt_dp_capped"] = exact["sprt"].inconclusive_probability
    row["ratio_fixed"] = row["sprt_mean_runs"] / row["fixed_mean_runs"]
    row["ratio_curtailed"] = row["sprt_mean_runs"] / row["curtailed_mean_runs"]
    # names of the first benchmark version, kept for readers of old JSON
    row.update(
        sequential_mean_runs=row["sprt_mean_runs"],
        dp_expected_runs=row["sprt_dp_runs"],
        fixed_runs=row["fixed_mean_runs"],
        ratio=row["ratio_fixed"],
    )
    return row


def _design_args() -> tuple[int, float]:
    d = FixedN.design(0.95, 0.80, 0.05, 0.05)
    return d.runs, d.threshold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="write the rows as JSON to this path")
    parser.add_argument("--trials", type=int, default=2000, help="simulated agents per rate")
    parser.add_argument("--seed", type=int, default=20240917)
    args = parser.parse_args(argv)

    rows = [simulate(p, args.trials, args.seed) for p in RATES]

    fixed = FixedN.design(0.95, 0.80, 0.05, 0.05)
    print(
        f"SPRT (H0 p>=0.95 vs H1 p<=0.80, alpha=beta=0.05, capped at {CAP} runs) vs fixed "
        f"N={fixed.runs} (accept from {fixed.min_successes} passes) and the same design "
        f"curtailed; {args.trials} seeded trials per p; runs: simulated mean (exact)"
    )
    header = (
        f"{'p':>5} {'SPRT runs':>15} {'cap':>6} {'fixed':>6} {'curtailed':>15} {'SPRT/fixed':>10} "
        f"{'SPRT/curt':>9} {'SPRT pass':>9} {'fixed pass':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['p']:>5.2f} {row['sprt_mean_runs']:>6.2f} ({row['sprt_dp_runs']:>6.2f}) "
            f"{row['sprt_capped_rate']:>6.1%} {row['fixed_mean_runs']:>6.0f} "
            f"{row['curtailed_mean_runs']:>6.2f} ({row['curtailed_dp_runs']:>6.2f}) "
            f"{row['ratio_fixed']:>10.2f} {row['ratio_curtailed']:>9.2f} "
            f"{row['sprt_pass_rate']:>9.3f} {row['fixed_pass_rate']:>10.3f}"
        )
    print()
    print(
        "deployed rules: probability of passing an agent of each rate (exact), and "
        "runs at p=0.8 (exact)"
    )
    names = ["SPRT", *DEPLOYED]
    keys = ["sprt", *DEPLOYED]
    print(f"{'p':>5} " + " ".join(f"{n:>10}" for n in names))
    for row in rows:
        print(f"{row['p']:>5.2f} " + " ".join(f"{row[f'{k}_dp_accept']:>10.3f}" for k in keys))
    at_08 = next(r for r in rows if r["p"] == 0.8)
    print(f"{'runs':>5} " + " ".join(f"{at_08[f'{k}_dp_runs']:>10.2f}" for k in keys))
    print(
        "a p=0.8 agent is one the SPRT must fail (its false-pass rate there is at most 5%): "
        + ", ".join(
            f"{n} passes it {at_08[f'{k}_dp_accept']:.0%} of the time" for n, k in zip(names, keys)
        )
    )

    by_p = {row["p"]: row for row in rows}
    targets = {
        "runs_at_p_1.0_le_19": by_p[1.0]["sprt_mean_runs"] <= 19,
        "runs_at_p_0.5_le_7": by_p[0.5]["sprt_mean_runs"] <= 7,
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
            "cap": CAP,
            "fixed_design": {"n": fixed.runs, "min_successes": fixed.min_successes},
            "deployed": {
                name: {"runs": t.max_runs, "accept_at_p_0.8": at_08[f"{name}_dp_accept"]}
                for name, t in DEPLOYED.items()
            },
            "targets": targets,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
