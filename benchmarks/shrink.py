"""Benchmark: the statistical shrinker against ddmin with a fixed 10 runs per query.

Seeded simulation. An input is a set of units; a hidden set of *needed* units must all be
present for the failure to happen, and then it happens with probability ``p`` per run. In
the noisy scenario every run can also fail with the same signature by chance at rate ``eps``
(whether or not the needed units are present). Outcomes are a pure function of (seed,
candidate, trial index), like memoised agent runs, so a rerun prints the same table.

For each scenario both shrinkers see the same inputs; "exact" means the returned reproducer
is exactly the needed set. Runs count everything the shrinker spent, calibration included.
ddmin works on the flat list of leaves (it has no notion of levels). The last row passes the
runs an oracle made of the original before shrinking as ``Calibration`` (not counted), to
show what knowing the failure rate better is worth.

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

from agentprop._shrink import Calibration, Outcome, Unit, ddmin, shrink

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
    oracle_evidence: int = 0  # runs of the original the oracle already made (not counted)
    target_runs: float | None = None
    target_exact: float | None = None

    def forest(self) -> tuple[Unit[int], ...]:
        if not self.tokens_per_clause:
            return tuple(Unit(i, label=f"c{i}") for i in range(self.clauses))
        k = self.tokens_per_clause
        if not self.hierarchical:
            return tuple(Unit(i, label=f"t{i}") for i in range(self.clauses * k))
        return tuple(
            Unit(-1 - c, children=tuple(Unit(c * k + j, label=f"c{c}t{j}") for j in range(k)),
                 label=f"c{c}")
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
    Scenario("8 clauses, 2 needed, p=0.5", 8, 0, 0.5, target_runs=32, target_exact=0.99),
    Scenario("8x5 tokens, clause->token, p=0.5", 8, 5, 0.5, target_runs=70),
    Scenario("8 clauses, background eps=0.05", 8, 0, 0.5, eps=0.05, target_exact=0.98),
    Scenario("8 clauses, p=0.2", 8, 0, 0.2, target_exact=0.99),
    Scenario("8 clauses, budget 80 runs", 8, 0, 0.5, budget=80, target_exact=0.97),
    Scenario("40 tokens flat (no hierarchy), p=0.5", 8, 5, 0.5, hierarchical=False),
    Scenario("8 clauses, p=0.5, 30 oracle runs reused", 8, 0, 0.5, oracle_evidence=30),
]


def run_scenario(scenario: Scenario, trials: int, seed: int) -> dict[str, float | str | None]:
    forest = scenario.forest()
    runs = exact = base_runs = base_exact = over_budget = 0
    for trial in range(trials):
        rng = random.Random(seed * 1_000_003 + trial)
        needed = scenario.needed(rng)
        oracle_seed = rng.getrandbits(48)
        oracle = make_oracle(needed, scenario.p, scenario.eps, oracle_seed)
        calibration = None
        if scenario.oracle_evidence:
            full = leaf_mask(forest)
            outcomes = [oracle(full, t) for t in range(scenario.oracle_evidence)]
            calibration = Calibration(
                runs=len(outcomes),
                failures=sum(o.failed and o.signature == SIGNATURE for o in outcomes),
                signature=SIGNATURE,
            )
        result = shrink(
            forest, oracle, budget=scenario.budget, build=leaf_mask,
            background_rate=scenario.eps, calibration=calibration,
        )
        runs += result.runs
        exact += result.reproducer == needed
        over_budget += result.runs > scenario.budget
        base = ddmin(forest, oracle, runs_per_query=10, budget=scenario.budget,
                     build=leaf_mask, signature=SIGNATURE)
        base_runs += base.runs
        base_exact += base.reproducer == needed
        over_budget += base.runs > scenario.budget
    if over_budget:
        raise AssertionError(f"{scenario.name}: a shrinker exceeded the run budget")
    return {
        "scenario": scenario.name,
        "mean_runs": runs / trials,
        "exact_rate": exact / trials,
        "baseline_mean_runs": base_runs / trials,
        "baseline_exact_rate": base_exact / trials,
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
        f"{'scenario':42} {'runs':>6} {'exact':>7} | {'ddmin runs':>10} {'exact':>7} | "
        f"{'ddmin/ours':>10} | {'target':24} {'met':>3}"
    )
    print(f"statistical shrinker vs ddmin (fixed N=10 runs per query), "
          f"{args.trials} seeded trials per scenario")
    print(head)
    print("-" * len(head))
    for row in rows:
        ours = f"{float(row['mean_runs']):6.1f} {100 * float(row['exact_rate']):6.1f}%"
        base = (f"{float(row['baseline_mean_runs']):10.1f} "
                f"{100 * float(row['baseline_exact_rate']):6.1f}%")
        ratio = float(row["baseline_mean_runs"]) / float(row["mean_runs"])
        print(f"{row['scenario']:42} {ours} | {base} | {ratio:9.2f}x | "
              f"{_target(row):24} {_met(row):>3}")
    print("runs: mean runs per shrink, calibration included; exact: the reproducer is exactly "
          "the needed set.")
    print("The runs<=32 target is the cost with the failure rate known exactly; the shrinker "
          "learns it as it goes (last row: given the oracle's 30 runs of the original).")
    sys.stdout.flush()
    print(f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    if args.json is not None:
        keys = ("scenario", "mean_runs", "exact_rate", "baseline_mean_runs", "baseline_exact_rate")
        payload = {"rows": [{k: row[k] for k in keys} for row in rows]}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
