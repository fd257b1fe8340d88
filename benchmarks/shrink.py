"""Benchmark: the statistical shrinker against ddmin with up to 10 runs per query.

Seeded simulation. An input is a set of units; a hidden set of *needed* units must all be
present for the failure to happen, and then it happens with probability ``p`` per run. In
the noisy scenario every run can also fail with the same signature by chance at rate ``eps``
(whether or not the needed units are present). Outcomes are a pure function of (seed,
candidate, trial index), like memoised agent runs, so a rerun prints the same table.

For each scenario all shrinkers see the same inputs; "exact" means the returned reproducer
is exactly the needed set. ddmin works on the flat list of leaves (it has no notion of levels)
and ignores any evidence about the original. Two ddmin baselines: the textbook one, which runs
every query 10 times, and the fairer one a skeptic would write, which stops a query at its
first failing run (same answers: a query fails when any of its runs fails).

Two columns of runs for the statistical shrinker, so nothing is hidden:

* ``runs``: every run ``shrink()`` itself made, its own calibration of the original included.
* ``+oracle``: the same plus the runs of the original an oracle made *before* shrinking and
  handed over as ``Calibration`` (equal to ``runs`` where nothing was handed over). The
  ratios against ddmin count these runs: ddmin gets no such evidence and pays nothing for it.

Where the shrinker's evidence about the original comes from:

* ``q known`` (the first row): the rate is given exactly (``Calibration`` of 100,000 runs at
  ``p``, which the shrinker does not pay for). This is the setting in which one-at-a-time deletion
  with early stopping costs 32 runs in expectation (6 / q removals plus 2 x 10 clean runs), and so
  the setting of the "8 clauses, 2 needed, p = 0.5: <= 32 runs" target; the ddmin baseline's fixed
  10 runs per query is likewise the count that suits ``q = 0.5``.
* ``q learned`` (every other row, unless it says otherwise): no evidence; ``shrink()`` runs
  the original until it fails once and learns ``q`` as it searches.
* ``oracle SPRT``: what really happens in agentprop. The oracle's default sequential test
  (``OracleSettings().make_test()``: Wald's SPRT at tau = 0.9, 0.95 vs 0.80, 5%/5%, at most
  100 runs) decides that the original fails; its runs and failures are passed on, exactly as
  ``agentprop.oracle.shrink`` passes ``CheckResult.runs`` and the failure count.
* ``30 oracle runs``: a fixed batch of 30 runs of the original.

Learning ``q`` has a price no rule can avoid: ``benchmarks/shrink_bound.py`` computes the
least number of runs any shrinker that learns ``q`` needs for the 8-clause row (about 45 at
99% exactly minimal), which is why that row's run target is held in the known-rate setting
and the learned-rate rows are shown next to it.

    python benchmarks/shrink.py [--trials N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentprop._decide.oracle import OracleSettings
from agentprop._shrink import Calibration, Outcome, Unit, shrink
from agentprop._stats import Decision

ROOT_DIR = Path(__file__).resolve().parents[1]
if str(ROOT_DIR) not in sys.path:
    sys.path.insert(0, str(ROOT_DIR))

from benchmarks._support.ddmin import ddmin  # noqa: E402

SIGNATURE = ("contract:refund_limit", "clause:C3", "step:2")
_M64 = (1 << 64) - 1


def _mix(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _uniform(seed: int, mask: int, trial: int, salt: int) -> float:
    return _mix(_mix(_mix(seed * 4 + salt) ^ mask) ^ trial) / 2.0**64


def leaf_mask(forest: tuple[Unit[int], ...]) -> int:
    """The candidate the simulated oracle sees: a bit mask of the kept leaf ids."""
    mask = 0
    stack = list(forest)
    while stack:
        unit = stack.pop()
        if unit.children:
            stack.extend(unit.children)
        else:
            mask |= 1 << unit.value
    return mask


def make_oracle(needed: int, p: float, eps: float, seed: int) -> Callable[[int, int], Outcome]:
    def run(candidate: int, trial: int) -> Outcome:
        if candidate & needed == needed and _uniform(seed, candidate, trial, 1) < p:
            return Outcome.failure(SIGNATURE)
        if eps and _uniform(seed, candidate, trial, 2) < eps:
            return Outcome.failure(SIGNATURE)
        return Outcome.passed()

    return run


@dataclass(frozen=True)
class Scenario:
    name: str
    clauses: int
    tokens_per_clause: int  # 0 = clauses are leaves
    p: float
    eps: float = 0.0
    budget: int = 2000
    hierarchical: bool = True
    evidence: str | int | None = None  # "sprt", "known", or a fixed number of oracle runs
    target_runs: float | None = None
    target_exact: float | None = None

    def forest(self) -> tuple[Unit[int], ...]:
        if not self.tokens_per_clause:
            return tuple(Unit(i, label=f"c{i}") for i in range(self.clauses))
        k = self.tokens_per_clause
        if not self.hierarchical:
            return tuple(Unit(i, label=f"t{i}") for i in range(self.clauses * k))
        return tuple(
            Unit(
                -1 - c,
                children=tuple(Unit(c * k + j, label=f"c{c}t{j}") for j in range(k)),
                label=f"c{c}",
            )
            for c in range(self.clauses)
        )

    def needed(self, rng: random.Random) -> int:
        """Two needed leaves, in two different clauses."""
        first, second = rng.sample(range(self.clauses), 2)
        k = self.tokens_per_clause
        if not k:
            return (1 << first) | (1 << second)
        return (1 << (first * k + rng.randrange(k))) | (1 << (second * k + rng.randrange(k)))


SCENARIOS = [
    Scenario(
        "8 clauses, 2 needed, p=0.5 (q known)",
        8,
        0,
        0.5,
        evidence="known",
        target_runs=32,
        target_exact=0.99,
    ),
    Scenario("8 clauses, p=0.5, q learned", 8, 0, 0.5, target_exact=0.99),
    Scenario(
        "8 clauses, p=0.5, oracle SPRT evidence", 8, 0, 0.5, evidence="sprt", target_exact=0.99
    ),
    Scenario("8 clauses, p=0.5, 30 oracle runs", 8, 0, 0.5, evidence=30),
    Scenario("8x5 tokens, clause->token, p=0.5", 8, 5, 0.5, target_runs=70),
    Scenario("8 clauses, background eps=0.05", 8, 0, 0.5, eps=0.05, target_exact=0.98),
    Scenario("8 clauses, p=0.2", 8, 0, 0.2, target_exact=0.99),
    Scenario("8 clauses, budget 80 runs", 8, 0, 0.5, budget=80, target_exact=0.97),
    Scenario("40 tokens flat (no hierarchy), p=0.5", 8, 5, 0.5, hierarchical=False),
]

KNOWN_RATE_RUNS = 100_000


def oracle_evidence(
    scenario: Scenario, oracle: Callable[[int, int], Outcome], full: int
) -> tuple[Calibration | None, int, bool]:
    """``(calibration, runs the oracle made, whether it decided "fails")`` for a scenario."""
    if scenario.evidence is None:
        return None, 0, True
    if scenario.evidence == "known":
        failures = round(KNOWN_RATE_RUNS * scenario.p)
        return Calibration(KNOWN_RATE_RUNS, failures, SIGNATURE), 0, True
    if scenario.evidence == "sprt":
        test = OracleSettings().make_test()
        trial = 0
        while not test.done:
            outcome = oracle(full, trial)
            test.update(not (outcome.failed and outcome.signature == SIGNATURE))
            trial += 1
        return (
            Calibration(test.n, test.failures, SIGNATURE),
            test.n,
            test.decision is Decision.REJECT,
        )
    runs = int(scenario.evidence)
    failures = 0
    for trial in range(runs):
        outcome = oracle(full, trial)
        failures += outcome.failed and outcome.signature == SIGNATURE
    return Calibration(runs, failures, SIGNATURE), runs, True


def run_scenario(scenario: Scenario, trials: int, seed: int) -> dict[str, float | str | None]:
    forest = scenario.forest()
    full = leaf_mask(forest)
    runs = oracle_runs = exact = base_runs = base_exact = over_budget = undecided = 0
    early_runs = early_exact = 0
    for trial in range(trials):
        rng = random.Random(seed * 1_000_003 + trial)
        needed = scenario.needed(rng)
        oracle_seed = rng.getrandbits(48)
        oracle = make_oracle(needed, scenario.p, scenario.eps, oracle_seed)
        calibration, spent, rejected = oracle_evidence(scenario, oracle, full)
        oracle_runs += spent
        undecided += not rejected
        result = shrink(
            forest,
            oracle,
            budget=scenario.budget,
            build=leaf_mask,
            background_rate=scenario.eps,
            calibration=calibration,
        )
        runs += result.runs
        exact += result.reproducer == needed
        over_budget += result.runs > scenario.budget
        base = ddmin(
            forest,
            oracle,
            runs_per_query=10,
            budget=scenario.budget,
            build=leaf_mask,
            signature=SIGNATURE,
        )
        base_runs += base.runs
        base_exact += base.reproducer == needed
        over_budget += base.runs > scenario.budget
        early = ddmin(
            forest,
            oracle,
            runs_per_query=10,
            budget=scenario.budget,
            build=leaf_mask,
            signature=SIGNATURE,
            stop_at_first_failure=True,
        )
        early_runs += early.runs
        early_exact += early.reproducer == needed
        over_budget += early.runs > scenario.budget
    if over_budget:
        raise AssertionError(f"{scenario.name}: a shrinker exceeded the run budget")
    return {
        "scenario": scenario.name,
        "mean_runs": runs / trials,
        "exact_rate": exact / trials,
        "baseline_mean_runs": base_runs / trials,
        "baseline_exact_rate": base_exact / trials,
        "early_baseline_mean_runs": early_runs / trials,
        "early_baseline_exact_rate": early_exact / trials,
        "mean_oracle_runs": oracle_runs / trials,
        "mean_runs_with_oracle": None
        if scenario.evidence == "known"
        else (runs + oracle_runs) / trials,
        "oracle_not_rejected": undecided if scenario.evidence == "sprt" else 0,
        "target_runs": scenario.target_runs,
        "target_exact_rate": scenario.target_exact,
    }


def _target(row: dict[str, float | str | None]) -> str:
    parts = []
    if row["target_runs"] is not None:
        parts.append(f"runs<={row['target_runs']:g}")
    if row["target_exact_rate"] is not None:
        parts.append(f"exact>={100 * float(row['target_exact_rate']):g}%")
    return ", ".join(parts) or "-"


def _met(row: dict[str, float | str | None]) -> str:
    ok = True
    if row["target_runs"] is not None:
        ok = ok and float(row["mean_runs"]) <= float(row["target_runs"])
    if row["target_exact_rate"] is not None:
        ok = ok and float(row["exact_rate"]) >= float(row["target_exact_rate"])
    if row["target_runs"] is None and row["target_exact_rate"] is None:
        return ""
    return "yes" if ok else "NO"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = [run_scenario(s, args.trials, args.seed) for s in SCENARIOS]
    head = (
        f"{'scenario':40} {'runs':>6} {'+oracle':>7} {'exact':>7} | {'ddmin N=10':>10} "
        f"{'exact':>7} | {'stop@fail':>9} {'exact':>7} | {'N=10/ours':>9} {'stop/ours':>9} | "
        f"{'target':22} {'met':>3}"
    )
    print(
        "statistical shrinker vs ddmin (10 runs per query; and stopping a query at its first "
        f"failure), {args.trials} seeded trials per scenario; ratios: ddmin runs / our "
        "runs with the oracle's"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        with_oracle = row["mean_runs_with_oracle"]
        plus = "q given" if with_oracle is None else f"{float(with_oracle):7.1f}"
        ours = f"{float(row['mean_runs']):6.1f} {plus:>7} {100 * float(row['exact_rate']):6.1f}%"
        base = (
            f"{float(row['baseline_mean_runs']):10.1f} "
            f"{100 * float(row['baseline_exact_rate']):6.1f}%"
        )
        early = (
            f"{float(row['early_baseline_mean_runs']):9.1f} "
            f"{100 * float(row['early_baseline_exact_rate']):6.1f}%"
        )
        paid = float(row["mean_runs"] if with_oracle is None else with_oracle)
        ratio = float(row["baseline_mean_runs"]) / paid
        early_ratio = float(row["early_baseline_mean_runs"]) / paid
        row["ratio"], row["early_ratio"] = ratio, early_ratio
        print(
            f"{row['scenario']:40} {ours} | {base} | {early} | {ratio:8.2f}x {early_ratio:8.2f}x "
            f"| {_target(row):22} {_met(row):>3}"
        )
    print(
        "runs: mean runs shrink() made, its own calibration included; +oracle: plus the "
        "oracle's runs of the original handed over as Calibration (what the ratios count; "
        "'q given' rows count runs only); exact: the reproducer is exactly the needed set."
    )
    print(
        "Targets are held against `runs`. runs<=32 is the cost of one-at-a-time deletion "
        "with the rate q known: the '(q known)' row is that setting. Every other row learns q "
        "as it goes. No shrinker that learns q can reach 32 at >=99% exactly minimal: "
        "`python benchmarks/shrink_bound.py` proves a floor of ~45 runs for that row."
    )
    for row in rows:
        if row["oracle_not_rejected"]:
            print(
                f"note: in {row['oracle_not_rejected']} trials of '{row['scenario']}' the "
                "oracle's SPRT did not reject; the shrinker was given its runs anyway."
            )
    sys.stdout.flush()
    print(f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    if args.json is not None:
        keys = (
            "scenario",
            "mean_runs",
            "exact_rate",
            "baseline_mean_runs",
            "baseline_exact_rate",
            "early_baseline_mean_runs",
            "early_baseline_exact_rate",
            "mean_oracle_runs",
            "mean_runs_with_oracle",
            "ratio",
            "early_ratio",
            "target_runs",
            "target_exact_rate",
        )
        payload = {"rows": [{k: row[k] for k in keys} for row in rows]}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
