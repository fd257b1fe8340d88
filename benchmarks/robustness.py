"""Robustness: hostile inputs never crash or hang agentprop; a shared budget is not overrun.

Usage: ``python benchmarks/robustness.py [--json PATH] [--seed S] [--inputs N] [--timeout SECONDS]``

1. **Hostile inputs.** The attack of issue #15 (``benchmarks/_robustness/inputs.py``: recursive aliases,
   billion laughs, 1,000-deep nesting, 5,000-digit integers, control bytes, hostile ``when``
   expressions, impossible schemas, bad world values and ranges, path-like agent refs, huge
   list indices, duplicate keys, 120 KB values) followed by ``--inputs`` (300) inputs that
   Hypothesis makes from the bundled specs, bindings and phrase packs with seed ``--seed``
   (text-level and parsed-tree mutations). Each is judged in a forked worker process under
   ``--timeout`` (120 s) and a 2 GB address-space limit, as a user meets it (``agentprop lint``
   on a copy of the example project, then ``agentprop run`` with every case kind and 20 runs of
   the example's agent when lint accepts it; a pack is loaded and made into a paraphrase strategy):
   ``clear_error`` (exit 2, ``FILE:LINE:COL`` and a fix, at most 2,000 characters),
   ``accepted`` (exit 0/1: the mutation left a usable file), ``unclear_error``, ``traceback``
   or ``hang`` (the timeout fired; the worker is killed and replaced). Targets: 0 tracebacks,
   0 hangs, 0 unclear errors. The baseline is the same count on the unmutated files (all
   accepted), measured in the same run.
2. **Budget overrun.** ``--max-usd``-style budget of $0.05 shared by concurrency-8 runs of
   :class:`agentprop.AnthropicAgent` against the loopback Messages server
   (:class:`agentprop.testing.MessagesServer`), whose model loops on a tool call with large
   token counts: the worst ratio of dollars spent to the limit (``budget_max_overrun_ratio``)
   over a few seeds, measured with the Budget API as it stands, and the reserved worst case
   of one call (``max_tokens x price``) for comparison.

``--json`` writes ``{"inputs", "clear_errors", "tracebacks", "hangs", "budget_max_overrun_ratio", ...}``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._robustness.inputs import HostileInput, Outcome, base_text, curated_inputs, hostile_inputs, judge  # noqa: E402

MEMORY_LIMIT = 2 * 1024**3


# --------------------------------------------------------------------------------------------
# Hostile inputs
# --------------------------------------------------------------------------------------------


def generate(seed: int, count: int) -> list[HostileInput]:
    """``count`` inputs drawn by Hypothesis with ``seed`` (generation only: nothing is judged
    inside Hypothesis, so the list is the same on every run with the same seed)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    drawn: list[HostileInput] = []

    @hseed(seed)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(hostile_inputs())
    def collect(item: HostileInput) -> None:
        drawn.append(item)

    collect()
    return drawn[:count]


def _worker(conn: Any, workdir: str) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    i = 0
    while True:
        item = conn.recv()
        if item is None:
            return
        i += 1
        try:
            outcome = judge(item, Path(workdir) / f"w{i % 4}")
        except BaseException:  # noqa: BLE001 - anything at all is a traceback here
            outcome = Outcome("traceback", traceback.format_exc()[-3000:])
        conn.send(outcome)


class Judge:
    """A forked worker that judges inputs one at a time; killed and replaced on a timeout."""

    def __init__(self, workdir: Path, timeout: float) -> None:
        self.workdir = workdir
        self.timeout = timeout
        self.ctx = multiprocessing.get_context("fork")
        self._start()

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, str(self.workdir)), daemon=True)
        self.proc.start()

    def __call__(self, item: HostileInput) -> Outcome:
        self.conn.send(item)
        if self.conn.poll(self.timeout):
            try:
                return self.conn.recv()  # type: ignore[no-any-return]
            except EOFError:
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
            self._start()
            return Outcome("hang", f"still running after {self.timeout:g} s")
        self.proc.join()
        code = self.proc.exitcode
        self._start()
        return Outcome("traceback", f"the worker died (exit {code}): out of memory or a crash")

    def close(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


def fuzz(items: list[HostileInput], timeout: float, *, label: str) -> tuple[Counter[str], list[tuple[HostileInput, Outcome]], float]:
    started = time.perf_counter()
    tally: Counter[str] = Counter()
    bad: list[tuple[HostileInput, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="agentprop-robustness-") as tmp:
        worker = Judge(Path(tmp), timeout)
        try:
            for n, item in enumerate(items, 1):
                outcome = worker(item)
                tally[outcome.verdict] += 1
                if outcome.verdict in ("traceback", "hang", "unclear_error"):
                    bad.append((item, outcome))
                if sys.stderr.isatty():
                    print(f"\r  {label}: {n}/{len(items)} {dict(tally)}", end="", file=sys.stderr, flush=True)
        finally:
            worker.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return tally, bad, time.perf_counter() - started


def baseline_inputs() -> list[HostileInput]:
    from benchmarks._robustness.inputs import PACK_BASES, SPEC_BASES

    items = [HostileInput(kind, base, base_text(kind, base), "unchanged") for kind in ("spec", "bindings") for base in SPEC_BASES]
    items += [HostileInput("pack", base, base_text("pack", base), "unchanged") for base in PACK_BASES]
    return items


# --------------------------------------------------------------------------------------------
# Budget overrun
# --------------------------------------------------------------------------------------------


def budget_overrun(seeds: int = 3) -> dict[str, Any]:
    from benchmarks._robustness.budget import measure_overrun

    return measure_overrun(seeds=seeds)


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_path", help="write the figures to this file")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (default 0)")
    parser.add_argument("--inputs", type=int, default=300, help="generated inputs besides the curated attack (default 300)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds one input may take before it counts as a hang (default 120: a run of a project on a loaded machine can take 30)",
    )
    parser.add_argument("--budget-seeds", type=int, default=3, help="runs of the budget measurement (default 3)")
    args = parser.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_AS, (2 * MEMORY_LIMIT, 2 * MEMORY_LIMIT))  # this process too: never the machine

    base_tally, base_bad, base_s = fuzz(baseline_inputs(), args.timeout, label="baseline")
    curated = curated_inputs()
    generated = generate(args.seed, args.inputs)
    items = curated + generated
    tally, bad, seconds = fuzz(items, args.timeout, label="hostile")
    budget = budget_overrun(args.budget_seeds)

    print(
        f"hostile inputs: {len(curated)} curated (issue #15's attack) + {len(generated)} generated (seed {args.seed}), "
        f"each under a {args.timeout:g} s timeout and a 2 GB memory limit"
    )
    print(f"  baseline (unmutated files): {len(baseline_inputs())} inputs, {dict(base_tally)} in {base_s:.1f} s")
    print(f"  {'outcome':<14} {'inputs':>7}")
    for verdict in ("clear_error", "accepted", "unclear_error", "traceback", "hang"):
        print(f"  {verdict:<14} {tally[verdict]:>7}")
    per = seconds / max(len(items), 1)
    print(f"  {len(items)} inputs in {seconds:.1f} s ({per * 1000:.0f} ms each)")
    for item, outcome in (base_bad + bad)[:10]:
        print(
            f"  {outcome.verdict}: {item.kind} {item.base}: {item.how}\n    {outcome.detail.strip().splitlines()[-1] if outcome.detail.strip() else ''}"
        )
    print(
        f"budget: limit ${budget['limit_usd']:.4f}, concurrency {budget['concurrency']}, {budget['seeds']} seeds: "
        f"worst spend ${budget['worst_spent_usd']:.4f} = {budget['budget_max_overrun_ratio']:.2f}x the limit; "
        f"one call's reserved worst case ${budget['call_worst_case_usd']:.4f} "
        f"(limit + one call = {budget['allowed_ratio']:.2f}x)"
    )
    result = {
        "inputs": len(items),
        "clear_errors": tally["clear_error"],
        "tracebacks": tally["traceback"],
        "hangs": tally["hang"],
        "unclear_errors": tally["unclear_error"],
        "accepted": tally["accepted"],
        "curated": len(curated),
        "generated": len(generated),
        "seed": args.seed,
        "timeout_s": args.timeout,
        "seconds": round(seconds, 1),
        "baseline": {"inputs": sum(base_tally.values()), **dict(base_tally)},
        "failures": [{"kind": i.kind, "base": i.base, "how": i.how, "verdict": o.verdict, "detail": o.detail[-1500:]} for i, o in bad[:20]],
        **{k: v for k, v in budget.items() if k != "runs"},
    }
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"written to {args.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
