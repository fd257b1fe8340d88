"""Robustness: hostile inputs never crash or hang agentprop; a shared budget is not overrun.

Usage:
``python benchmarks/robustness.py [--json PATH] [--seed S] [--inputs N] [--run-every K] [--timeout SECONDS]``

1. **Hostile inputs.** The attack of issue #15 (``benchmarks/_robustness/inputs.py``: recursive
   aliases, billion laughs, 1,000-deep nesting, 5,000-digit integers, control bytes, hostile
   ``when`` expressions, impossible schemas, bad world values and ranges, path-like agent refs, huge
   list indices, duplicate keys, 120 KB values) followed by ``--inputs`` (1,500) inputs that
   Hypothesis makes from the bundled specs, bindings and phrase packs with seed ``--seed``
   (text-level and parsed-tree mutations; issue #27's lone-surrogate escapes, hex and
   sexagesimal integers, NULs and escape sequences among the pieces inserted). Each is judged in
   a forked worker process under ``--timeout`` (120 s) and a 2 GB address-space limit, as a user
   meets it (``agentprop lint`` on a copy of the example project, then, for every
   ``--run-every``-th input (10) that lint accepts, ``agentprop run`` with every case kind and 20
   runs of the example's agent; a pack is loaded and made into a paraphrase strategy):
   ``clear_error`` (exit 2, ``FILE:LINE:COL`` and a fix, at most 2,000 characters),
   ``accepted`` (exit 0/1: the mutation left a usable file), ``unclear_error``, ``traceback``
   or ``hang`` (the timeout fired; the worker is killed and replaced). Targets: 0 tracebacks,
   0 hangs, 0 unclear errors. The baseline is the same count on the unmutated files (all
   accepted), measured in the same run.
2. **Budget overrun.** ``--max-usd``-style budget of $0.05 shared by concurrency-8 runs of
   :class:`agentprop.agents.AnthropicAgent` against the loopback Messages server
   (:class:`agentprop.testing.MessagesServer`), whose model loops on a tool call with large
   token counts: the worst ratio of dollars spent to the limit (``budget_max_overrun_ratio``)
   over a few seeds, measured with the Budget API as it stands, and the reserved worst case
   of one call (``max_tokens x price``) for comparison.

3. **Issue #27's categories.** Part B (``benchmarks/_robustness/attack_b.py``: lone surrogates,
   damaged and foreign caches, full disks and bad output paths, a corpus entry back after
   retirement, huge integers, unprintable names, unrenderable templates, special files, the
   ``serve --http`` token) and part A (``benchmarks/_robustness/attack_a.py``: its ``ATTACKS``,
   name -> ``fn(timeout_s=)`` returning its counts; the billing loopback server's worst
   overrun among them). part A also replays live runs whose model calls timed out (item 13). Each
   category runs in a forked worker under the timeout and the memory limit; its cases end ``ok``,
   ``traceback``, ``data_lost`` or ``silent_wrong``, the worker's fate adds ``hang`` and ``oom``.
   Every file part B wrote is searched for the API key it was given; part A counts its own
   (``keys on disk``). An item no attack covers is named as not covered, with no figure, and the
   exit code is 1.

Targets: tracebacks 0, hangs 0, OOM 0, data lost 0, silent wrong 0, keys on disk 0, worst dollar
overrun at most one call's reservation; the exit code is 0 only when every target is met and
every category was run. ``--json`` writes ``{"tracebacks", "hangs", "oom", "data_lost",
"silent_wrong", "keys_on_disk", "worst_overrun_usd", "reservation_usd", "inputs", ...}``.
"""  # noqa: E501

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

from benchmarks._robustness.inputs import (  # noqa: E402
    HostileInput,
    Outcome,
    base_text,
    curated_inputs,
    hostile_inputs,
    judge,
)

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
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
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
        job = conn.recv()
        if job is None:
            return
        item, run = job
        i += 1
        try:
            outcome = judge(item, Path(workdir) / f"w{i % 4}", run=run)
        except MemoryError:
            outcome = Outcome("oom", "MemoryError under the 2 GB limit")
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

    def __call__(self, item: HostileInput, run: bool = True) -> Outcome:
        self.conn.send((item, run))
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
        if code == -9:  # SIGKILL: the kernel's out-of-memory killer
            return Outcome("oom", "the worker was killed (SIGKILL): out of memory")
        return Outcome("traceback", f"the worker died (exit {code}): a crash")

    def close(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


def fuzz(
    items: list[HostileInput], timeout: float, *, label: str, run_every: int = 1
) -> tuple[Counter[str], list[tuple[HostileInput, Outcome]], float]:
    started = time.perf_counter()
    tally: Counter[str] = Counter()
    bad: list[tuple[HostileInput, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="agentprop-robustness-") as tmp:
        worker = Judge(Path(tmp), timeout)
        try:
            for n, item in enumerate(items, 1):
                outcome = worker(item, run=n % run_every == 0)
                tally[outcome.verdict] += 1
                if outcome.verdict in ("traceback", "hang", "oom", "unclear_error"):
                    bad.append((item, outcome))
                if sys.stderr.isatty():
                    print(
                        f"\r  {label}: {n}/{len(items)} {dict(tally)}",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            worker.close()
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return tally, bad, time.perf_counter() - started


def baseline_inputs() -> list[HostileInput]:
    from benchmarks._robustness.inputs import PACK_BASES, SPEC_BASES

    items = [
        HostileInput(kind, base, base_text(kind, base), "unchanged")
        for kind in ("spec", "bindings")
        for base in SPEC_BASES
    ]
    items += [
        HostileInput("pack", base, base_text("pack", base), "unchanged") for base in PACK_BASES
    ]
    return items


# --------------------------------------------------------------------------------------------
# Issue #27's categories
# --------------------------------------------------------------------------------------------

SENTINEL_KEY = "sk-ant-api03-robustness-SENTINEL-0123456789abcdefghijklmnopqrstuvwxyz"
"""The API key the categories run with: found in any file they wrote, it is a key on disk."""

PART_A = {
    "corpus_prune": "1 corpus prune from elsewhere",
    "agents": "2+8+9+12 hostile agents (key, bounds, exits, Ctrl-C)",
    "abandoned_calls": "3 abandoned calls billed",
    "trees": "4+11 path explosion, deep trees",
    "timed_out_replay": "13 timed-out live runs replayed",
}
"""Issue #27's items of part A by the name of the attack in ``attack_a.ATTACKS`` that covers
them (``""``: no attack there covers it); each is covered only if that attack is run."""


def _category_worker(conn: Any, module: str, name: str, workdir: str) -> None:
    import importlib
    import os

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.environ["ANTHROPIC_API_KEY"] = SENTINEL_KEY
    try:
        if module.endswith("attack_a"):  # part A: fn(timeout_s=) -> {"inputs", "tracebacks", ...}
            os.chdir(workdir)
            got = importlib.import_module(module).ATTACKS[name](timeout_s=300.0)
            bad = sum(
                int(got.get(k, 0)) for k in ("tracebacks", "hangs", "data_lost", "silent_wrong")
            )
            notes = [
                f"{k}: {v}"
                for k, v in got.items()
                if k
                in (
                    "billed_usd",
                    "reported_usd",
                    "worst_overrun_usd",
                    "reservation_usd",
                    "replay_live_calls",
                )
                or k.endswith("_verdicts")
            ]
            found = {
                **got,
                "cases": int(got.get("inputs", 0)),
                "ok": max(int(got.get("inputs", 0)) - bad, 0),
                "notes": notes,
            }
            conn.send(("done", found))
            return
        fn = importlib.import_module(module).CATEGORIES[name]
        result = fn(Path(workdir))
        conn.send(("done", result.as_dict() if hasattr(result, "as_dict") else dict(result)))
    except MemoryError:
        conn.send(("oom", "MemoryError under the 2 GB limit"))
    except BaseException:  # noqa: BLE001 - anything that escapes the category is a traceback
        conn.send(("traceback", traceback.format_exc()[-2000:]))


def run_category(module: str, name: str, workdir: Path, timeout: float) -> dict[str, Any]:
    """One category in a forked worker: its tally, with ``hangs`` and ``oom`` from its fate."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    workdir.mkdir(parents=True, exist_ok=True)
    proc = ctx.Process(
        target=_category_worker, args=(child, module, name, str(workdir)), daemon=True
    )
    started = time.perf_counter()
    proc.start()
    blank = {
        "cases": 0,
        "ok": 0,
        "tracebacks": 0,
        "data_lost": 0,
        "silent_wrong": 0,
        "hangs": 0,
        "oom": 0,
        "keys_on_disk": 0,
        "notes": [],
    }
    if parent.poll(timeout):
        status, payload = parent.recv()
        proc.join(10)
        if status == "done":
            result = {**blank, **payload}
        else:
            result = {
                **blank,
                "cases": 1,
                "tracebacks": int(status == "traceback"),
                "oom": int(status == "oom"),
                "notes": [str(payload)[-500:]],
            }
    else:
        alive = proc.is_alive()
        if alive:
            proc.kill()
        proc.join()
        oom = not alive and proc.exitcode == -9
        result = {
            **blank,
            "cases": 1,
            "hangs": int(alive),
            "oom": int(oom),
            "tracebacks": int(not alive and not oom),
        }
        result["notes"] = [
            f"still running after {timeout:g} s"
            if alive
            else f"the worker died (exit {proc.exitcode})"
        ]
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def keys_on_disk(root: Path) -> tuple[int, int]:
    """Files under ``root`` holding :data:`SENTINEL_KEY`, and files searched."""
    hits = searched = 0
    needle = SENTINEL_KEY.encode()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            searched += 1
            try:
                hits += needle in path.read_bytes()
            except OSError:
                pass
    return hits, searched


def categories(
    timeout: float, only: list[str] | None = None
) -> tuple[dict[str, dict[str, Any]], list[str], tuple[int, int]]:
    """Every category of parts B and A that exists: results by name, the names not covered,
    and (keys found on disk, files searched)."""
    import importlib.util

    from benchmarks._robustness.attack_b import CATEGORIES as PART_B

    results: dict[str, dict[str, Any]] = {}
    not_covered: list[str] = []
    plan: list[tuple[str, str, str]] = [
        ("benchmarks._robustness.attack_b", name, name) for name in PART_B
    ]
    attacks: dict[str, Any] = {}
    if importlib.util.find_spec("benchmarks._robustness.attack_a") is not None:
        attacks = dict(
            getattr(importlib.import_module("benchmarks._robustness.attack_a"), "ATTACKS", {})
        )
    for key, label in PART_A.items():
        if key in attacks:
            plan.append(("benchmarks._robustness.attack_a", key, label))
        else:
            where = (
                "no attack in benchmarks/_robustness/attack_a.py covers it"
                if attacks
                else "benchmarks/_robustness/attack_a.py has no ATTACKS"
            )
            not_covered.append(f"{label} ({where})")
    with tempfile.TemporaryDirectory(prefix="agentprop-attack-") as tmp:
        for n, (module, name, label) in enumerate(plan):
            if only and not any(o in label for o in only):
                not_covered.append(f"{label} (not selected by --category)")
                continue
            if sys.stderr.isatty():
                print(
                    f"\r  category {n + 1}/{len(plan)}: {label}",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
            results[label] = run_category(module, name, Path(tmp) / f"c{n}", timeout)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        keys = keys_on_disk(Path(tmp))
    return results, not_covered, keys


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
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the generated inputs (default 0)"
    )
    parser.add_argument(
        "--inputs",
        type=int,
        default=1500,
        help="generated inputs besides the curated attack (default 1,500)",
    )
    parser.add_argument(
        "--run-every",
        type=int,
        default=10,
        help="also `agentprop run` every K-th generated input lint accepts (default 10)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds one input may take before it counts as a hang (default 120: a run of a "
        "project on a loaded machine can take 30)",
    )
    parser.add_argument(
        "--category-timeout",
        type=float,
        default=900.0,
        help="seconds one category of issue #27 may take (default 900)",
    )
    parser.add_argument(
        "--category",
        action="append",
        help="run only the categories whose name holds this text (repeatable)",
    )
    parser.add_argument(
        "--budget-seeds", type=int, default=3, help="runs of the budget measurement (default 3)"
    )
    args = parser.parse_args(argv)
    # this process too: never the machine
    resource.setrlimit(resource.RLIMIT_AS, (2 * MEMORY_LIMIT, 2 * MEMORY_LIMIT))

    base_tally, base_bad, base_s = fuzz(baseline_inputs(), args.timeout, label="baseline")
    curated = curated_inputs()
    generated = generate(args.seed, args.inputs)
    items = curated + generated
    tally, bad, seconds = fuzz(
        items, args.timeout, label="hostile", run_every=max(args.run_every, 1)
    )
    found, not_covered, (keys, searched) = categories(args.category_timeout, args.category)
    budget = budget_overrun(args.budget_seeds)

    print(
        f"hostile inputs: {len(curated)} curated (issue #15's attack) + {len(generated)} "
        f"generated (seed {args.seed}), each under a {args.timeout:g} s timeout and a 2 GB memory "
        f"limit; every {args.run_every}-th also run"
    )
    print(
        f"  baseline (unmutated files): {len(baseline_inputs())} inputs, "
        f"{dict(base_tally)} in {base_s:.1f} s"
    )
    print(f"  {'outcome':<14} {'inputs':>7}")
    for verdict in ("clear_error", "accepted", "unclear_error", "traceback", "hang", "oom"):
        print(f"  {verdict:<14} {tally[verdict]:>7}")
    per = seconds / max(len(items), 1)
    print(f"  {len(items)} inputs in {seconds:.1f} s ({per * 1000:.0f} ms each)")
    for item, outcome in (base_bad + bad)[:10]:
        print(
            f"  {outcome.verdict}: {item.kind} {item.base}: {item.how}\n    "
            f"{outcome.detail.strip().splitlines()[-1] if outcome.detail.strip() else ''}"
        )
    print(
        "issue #27 categories (each in a forked worker, 2 GB, timeout "
        f"{args.category_timeout:g} s):"
    )
    columns = ("cases", "ok", "tracebacks", "hangs", "oom", "data_lost", "silent_wrong")
    print(f"  {'category':<42}" + "".join(f" {c:>12}" for c in columns) + f" {'seconds':>8}")
    for name, r in found.items():
        print(f"  {name:<42}" + "".join(f" {r[c]:>12}" for c in columns) + f" {r['seconds']:>8}")
        for note in r["notes"][:3]:
            print(f"    {note}")
    for name in not_covered:
        print(f"  NOT COVERED: {name}")
    part_a_keys = sum(int(r.get("keys_on_disk", 0)) for r in found.values())
    print(
        f"  keys on disk: {keys} of {searched} files part B wrote hold the API key it ran with; "
        f"part A's own count: {part_a_keys}"
    )
    print(
        f"budget: limit ${budget['limit_usd']:.4f}, concurrency {budget['concurrency']}, "
        f"{budget['seeds']} seeds: worst spend ${budget['worst_spent_usd']:.4f} = "
        f"{budget['budget_max_overrun_ratio']:.2f}x the limit; one call's reserved worst case "
        f"${budget['call_worst_case_usd']:.4f} (limit + one call = {budget['allowed_ratio']:.2f}x)"
    )
    overrun = max(0.0, budget["worst_spent_usd"] - budget["limit_usd"])
    within = overrun <= budget["call_worst_case_usd"]
    # part A's abandoned calls: what the loopback server billed over the limit
    for r in found.values():
        if "worst_overrun_usd" in r and "reservation_usd" in r:
            print(
                f"  abandoned calls: billed ${r.get('billed_usd', 0):.4f}, reported "
                f"${r.get('reported_usd', 0):.4f}, over the limit by "
                f"${r['worst_overrun_usd']:.4f}; one reservation ${r['reservation_usd']:.4f}"
            )
            within = within and r["worst_overrun_usd"] <= r["reservation_usd"]
            overrun = max(overrun, r["worst_overrun_usd"])
    keys += sum(int(r.get("keys_on_disk", 0)) for r in found.values())
    totals = {
        c: sum(r[c] for r in found.values())
        for c in ("tracebacks", "hangs", "oom", "data_lost", "silent_wrong")
    }
    totals["tracebacks"] += tally["traceback"]
    totals["hangs"] += tally["hang"]
    totals["oom"] += tally["oom"]
    print(
        f"totals: tracebacks {totals['tracebacks']}, hangs {totals['hangs']}, OOM "
        f"{totals['oom']}, data lost {totals['data_lost']}, silent wrong "
        f"{totals['silent_wrong']}, keys on disk {keys}, worst dollar overrun ${overrun:.4f} "
        f"({'within' if within else 'MORE than'} one reservation in every measurement above)"
    )
    met = not any(totals.values()) and keys == 0 and within and tally["unclear_error"] == 0
    if not_covered:
        print(f"not every category was run: {len(not_covered)} not covered (listed above); exit 1")
    result = {
        "inputs": len(items),
        "clear_errors": tally["clear_error"],
        **totals,
        "keys_on_disk": keys,
        "files_searched_for_keys": searched,
        "worst_overrun_usd": round(overrun, 6),
        "reservation_usd": budget["call_worst_case_usd"],
        "overrun_within_one_reservation": within,
        "unclear_errors": tally["unclear_error"],
        "accepted": tally["accepted"],
        "curated": len(curated),
        "generated": len(generated),
        "run_every": args.run_every,
        "seed": args.seed,
        "timeout_s": args.timeout,
        "seconds": round(seconds, 1),
        "baseline": {"inputs": sum(base_tally.values()), **dict(base_tally)},
        "fuzz_tracebacks": tally["traceback"],
        "fuzz_hangs": tally["hang"],
        "categories": found,
        "not_covered": not_covered,
        "targets_met": met and not not_covered,
        "failures": [
            {
                "kind": i.kind,
                "base": i.base,
                "how": i.how,
                "verdict": o.verdict,
                "detail": o.detail[-1500:],
            }
            for i, o in bad[:20]
        ],
        **{k: v for k, v in budget.items() if k != "runs"},
    }
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"written to {args.json_path}")
    return 0 if met and not not_covered else 1


if __name__ == "__main__":
    sys.exit(main())
