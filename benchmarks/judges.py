"""Judged pass rates: the judge's error corrected (Rogan–Gladen) against the raw judge rate.

Usage: ``python benchmarks/judges.py [--json PATH] [--cases N] [--trials N] [--seed S]``

Everything is simulated with known truth. An agent's runs pass with probability ``p``; a judge
with sensitivity ``se`` and specificity ``sp`` passes a truly passing run with probability
``se`` and a truly failing one with probability ``1 - sp``. Before judging, each simulated
judge is calibrated on human-labelled examples (``--labels`` of each kind), so ``se`` and
``sp`` are only known up to the calibration's error, as in real use.

1. **Coverage** over ``--cases`` simulated cases (``p`` uniform in [0.5, 1], a judge drawn
   from ``JUDGES``, 100 judged runs): how often the 95% interval contains the true ``p``, for
   the corrected interval (``corrected_interval``) and for the raw judge rate's Wilson
   interval (the uncorrected baseline). Nominal: 0.95; the target is within 2 points.
2. **Decisions** at tau = 0.9 (good: ``p = 0.95``, bad: ``p = 0.80``, alpha = beta = 0.05),
   ``--trials`` agents of each kind per judge, the same judge verdicts fed to:
   ``corrected`` (an SPRT on the judge's verdicts between the judge rates the calibration
   maps 0.95 and 0.80 to, ``judged_hypotheses``), ``raw`` (the oracle's SPRT, 0.95 vs 0.80
   with a 100-run cap, taking the judge's word as the truth) and ``once`` (one run, the judge
   asked once, pass if it says pass: "threshold 0.5" as peer tools do). A wrong decision
   accepts a bad agent or rejects a good one; INCONCLUSIVE is not wrong (it does not gate).

Keys written with ``--json``: coverage_corrected, coverage_raw, wrong_decisions_corrected,
wrong_decisions_raw, wrong_decisions_once, judge_calls_per_decision (corrected), and the
per-judge table. Exit status 1 if the corrected coverage misses 0.95 by more than 2 points or
its wrong decisions exceed the designed 5% by more than three binomial standard errors.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agentprop._stats import SPRT, Decision, wilson_interval
from agentprop._stats.judged import (
    JudgeAgreement,
    corrected_interval,
    judge_pass_probability,
    judged_hypotheses,
)

CONFIDENCE = 0.95
P0, P1 = 0.95, 0.80
ALPHA = BETA = 0.05
RAW_CAP = 100
"""The oracle's default run cap (``OracleSettings.max_runs``)."""
CORRECTED_CAP = 2000


@dataclass(frozen=True)
class Judge:
    name: str
    sensitivity: float
    specificity: float


JUDGES = (
    Judge("strict-ish (se 0.95, sp 0.90)", 0.95, 0.90),
    Judge("lenient (se 0.98, sp 0.60)", 0.98, 0.60),
    Judge("harsh (se 0.85, sp 0.95)", 0.85, 0.95),
)


def calibrate(rng: np.random.Generator, judge: Judge, labels: int) -> JudgeAgreement:
    """A simulated calibration: ``labels`` human-passed and ``labels`` human-failed examples."""
    true_pass = int(rng.binomial(labels, judge.sensitivity))
    true_fail = int(rng.binomial(labels, judge.specificity))
    return JudgeAgreement(true_pass, labels - true_pass, true_fail, labels - true_fail)


def judged_runs(rng: np.random.Generator, judge: Judge, p: float, runs: int) -> np.ndarray:
    """The judge's verdicts on ``runs`` runs of an agent whose true pass rate is ``p``."""
    truth = rng.random(runs) < p
    noise = rng.random(runs)
    return np.where(truth, noise < judge.sensitivity, noise < 1.0 - judge.specificity)


def coverage(rng: np.random.Generator, cases: int, labels: int, runs: int) -> tuple[float, float]:
    covered_corrected = covered_raw = 0
    for index in range(cases):
        judge = JUDGES[index % len(JUDGES)]
        p = float(rng.uniform(0.5, 1.0))
        agreement = calibrate(rng, judge, labels)
        passes = int(
            rng.binomial(runs, judge_pass_probability(p, judge.sensitivity, judge.specificity))
        )
        lo, hi = corrected_interval(passes, runs, agreement, CONFIDENCE).interval
        covered_corrected += lo <= p <= hi
        raw_lo, raw_hi = wilson_interval(passes, runs, CONFIDENCE)
        covered_raw += raw_lo <= p <= raw_hi
    return covered_corrected / cases, covered_raw / cases


@dataclass
class Tally:
    accept: int = 0
    reject: int = 0
    inconclusive: int = 0
    calls: int = 0

    @property
    def decisions(self) -> int:
        return self.accept + self.reject + self.inconclusive

    def add(self, decision: Decision, calls: int) -> None:
        if decision is Decision.ACCEPT:
            self.accept += 1
        elif decision is Decision.REJECT:
            self.reject += 1
        else:
            self.inconclusive += 1
        self.calls += calls


def decide(test: SPRT, verdicts: np.ndarray) -> tuple[Decision, int]:
    for verdict in verdicts:
        if test.update(bool(verdict)) is not None:
            break
    return test.stop(), test.n


METHODS = ("corrected", "raw", "once")


def decisions(
    rng: np.random.Generator, trials: int, labels: int
) -> dict[tuple[str, str, str], Tally]:
    table: dict[tuple[str, str, str], Tally] = {}
    for judge in JUDGES:
        for agent, p in (("good", P0), ("bad", P1)):
            tallies = {method: Tally() for method in METHODS}
            for _ in range(trials):
                agreement = calibrate(rng, judge, labels)
                verdicts = judged_runs(rng, judge, p, CORRECTED_CAP)
                hypotheses = judged_hypotheses(P0, P1, agreement, CONFIDENCE)
                if hypotheses is None:
                    tallies["corrected"].add(Decision.INCONCLUSIVE, 0)
                else:
                    q0, q1 = hypotheses
                    tallies["corrected"].add(
                        *decide(
                            SPRT(p0=q0, p1=q1, alpha=ALPHA, beta=BETA, max_runs=CORRECTED_CAP),
                            verdicts,
                        )
                    )
                tallies["raw"].add(
                    *decide(SPRT(p0=P0, p1=P1, alpha=ALPHA, beta=BETA, max_runs=RAW_CAP), verdicts)
                )
                tallies["once"].add(Decision.ACCEPT if verdicts[0] else Decision.REJECT, 1)
            for method, tally in tallies.items():
                table[(judge.name, agent, method)] = tally
    return table


def wrong(table: dict[tuple[str, str, str], Tally], method: str) -> tuple[int, int]:
    count = total = 0
    for (_, agent, name), tally in table.items():
        if name != method:
            continue
        count += tally.reject if agent == "good" else tally.accept
        total += tally.decisions
    return count, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the measured figures here")
    parser.add_argument(
        "--cases", type=int, default=1000, help="simulated cases for coverage (default 1000)"
    )
    parser.add_argument(
        "--trials",
        type=int,
        default=500,
        help="simulated agents per judge and kind for decisions (default 500)",
    )
    parser.add_argument(
        "--labels",
        type=int,
        default=300,
        help="human labels of each kind per calibration (default 300)",
    )
    parser.add_argument("--seed", type=int, default=20261203)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    coverage_corrected, coverage_raw = coverage(rng, args.cases, 100, 100)
    print(
        f"Coverage of the true pass rate by the 95% interval, {args.cases} simulated cases (100 "
        "judged runs, 100 labels of each kind):"
    )
    print(f"  corrected (Rogan-Gladen, Lang-Reiczigel interval): {coverage_corrected:.3f}")
    print(f"  raw judge rate (Wilson), the uncorrected baseline: {coverage_raw:.3f}")
    print()

    table = decisions(rng, args.trials, args.labels)
    print(
        f"Decisions at tau = 0.9 (good p = {P0}, bad p = {P1}; alpha = beta = {ALPHA}), "
        f"{args.trials} agents per row, {args.labels} labels of each kind:"
    )
    print(
        f"  {'judge':<32} {'agent':<5} {'method':<10} {'accept':>7} {'reject':>7} {'inconcl':>7} "
        f"{'wrong':>7} {'calls/dec':>9}"
    )
    for (judge_name, agent, method), tally in table.items():
        wrong_count = tally.reject if agent == "good" else tally.accept
        print(
            f"  {judge_name:<32} {agent:<5} {method:<10} {tally.accept / tally.decisions:>7.3f} "
            f"{tally.reject / tally.decisions:>7.3f} {tally.inconclusive / tally.decisions:>7.3f} "
            f"{wrong_count / tally.decisions:>7.3f} {tally.calls / tally.decisions:>9.1f}"
        )
    figures: dict[str, float] = {}
    for method in METHODS:
        count, total = wrong(table, method)
        figures[f"wrong_decisions_{method}"] = count / total
    calls = sum(t.calls for (_, _, m), t in table.items() if m == "corrected")
    decided = sum(t.decisions for (_, _, m), t in table.items() if m == "corrected")
    figures["judge_calls_per_decision"] = calls / decided
    raw_calls = sum(t.calls for (_, _, m), t in table.items() if m == "raw") / decided
    print()
    print(
        f"Wrong decisions: corrected {figures['wrong_decisions_corrected']:.3f}, raw "
        f"{figures['wrong_decisions_raw']:.3f}, once {figures['wrong_decisions_once']:.3f} "
        f"(designed: at most {ALPHA})"
    )
    ratio = (
        figures["wrong_decisions_raw"] / figures["wrong_decisions_corrected"]
        if figures["wrong_decisions_corrected"] > 0
        else math.inf
    )
    print(f"  raw / corrected: {ratio:.1f}x")
    print(
        f"Judge calls per decision: corrected {figures['judge_calls_per_decision']:.1f}, raw "
        f"{raw_calls:.1f}, once 1.0"
    )

    results = {
        "coverage_corrected": coverage_corrected,
        "coverage_raw": coverage_raw,
        **figures,
        "judge_calls_per_decision_raw": raw_calls,
        "settings": {
            "cases": args.cases,
            "trials": args.trials,
            "labels": args.labels,
            "seed": args.seed,
        },
        "table": [
            {
                "judge": j,
                "agent": a,
                "method": m,
                "accept": t.accept,
                "reject": t.reject,
                "inconclusive": t.inconclusive,
                "calls": t.calls,
            }
            for (j, a, m), t in table.items()
        ],
    }
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    ok = abs(coverage_corrected - CONFIDENCE) <= 0.02
    count, total = wrong(table, "corrected")
    ok &= count / total <= ALPHA + 3.0 * math.sqrt(ALPHA * (1 - ALPHA) / total)
    if not ok:
        print(
            "FAILED: the corrected coverage or wrong-decision rate misses its target (see above)."
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
