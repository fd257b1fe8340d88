"""Sharded runs on one machine: wall time of 1, 2 and 4 shards against a loopback model with
latency, the merge's time for 100,000 trial records, and the Redis ledger's cost per model call
next to the file ledger's.

Usage: ``python benchmarks/shards.py [--json PATH] [--runs N] [--latency S] [--concurrency C]
[--merge-records N] [--calls N] [--redis URL]``

1. **Shards.** The SupportOps example's MFT cases, each decided on a fixed ``--runs`` runs (seed
   1: ``--seed 0`` would leave the explored inputs' seed to chance, and the shards would not be of
   one run), by an I/O-bound agent: the reference agent, which first waits on a loopback
   OpenAI-compatible server (:class:`agentprop.testing.OpenAIServer`, ``--latency`` per request,
   in this process) on every turn. For N in 1, 2, 4 the N shards are N ``agentprop run --shard
   i/N --records DIR`` processes started at once; the wall time is from the first start to the
   last exit, and the CPU time is the shard processes' user + system time (every shard process
   pays the startup work again: on a small machine that CPU, not the model's latency, can bound
   the speedup). The
   1-shard run is the baseline; each N's shards are merged (``agentprop merge``)
   and must decide the same names with the same verdicts and runs as the baseline, and the
   server must have answered as many requests, else the script exits 1.
2. **Merge.** ``agentprop merge`` (a fresh process, ``--json``) of 4 shard directories holding
   at least ``--merge-records`` trial lines (default 100,000): the 4-shard run's records, each
   shard's decisions copied as many times as needed, each copy renumbered and its case names
   suffixed ``#copyK`` so that every copy is a decision name of its own.
3. **Ledger.** ``benchmarks/ledger.py``'s :func:`per_call_us` (reserve + settle, ``--calls``
   calls) on the SQLite file ledger and on a Redis ledger (``--redis URL``, else a
   ``redis-server`` started on loopback). Without redis-py or a server the Redis figure is not
   measured: the output says so and the exit code is 3.

``--json PATH`` writes ``wall_s_1_shard``, ``wall_s_2_shards``, ``wall_s_4_shards``,
``speedup_2_shards``, ``speedup_4_shards``, ``cpu_s_1_shard`` (and ``_2_shards``, ``_4_shards``),
``merge_s_100k_records`` (``null`` when fewer than 100,000 trial lines were merged), ``merge_s``,
``merge_trial_records``, ``ledger_us_per_call_file``, ``ledger_us_per_call_redis`` (``null`` when
not measured) and the settings.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
SHARD_COUNTS = (1, 2, 4)

AGENT_SOURCE = '''"""The SupportOps reference agent, waiting on a loopback model on every turn (I/O-bound)."""
import importlib.util
import json
import os
import urllib.request

_spec = importlib.util.spec_from_file_location("supportops_reference_agent", {agent_path!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
_URL = os.environ["AGENTPROP_SHARDS_BENCH_URL"]
_BODY = json.dumps({{"model": "bench", "messages": [{{"role": "user", "content": "hi"}}]}}).encode()


class WaitingAgent(_module.SupportOpsAgent):
    def turn(self, message, ctx):
        request = urllib.request.Request(_URL, data=_BODY, headers={{"Content-Type": "application/json"}})
        with urllib.request.urlopen(request, timeout=60) as reply:
            reply.read()
        super().turn(message, ctx)
'''  # noqa: E501


def _ledger_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ledger_benchmark_for_shards", Path(__file__).parent / "ledger.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _env(url: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "AGENTPROP_SHARDS_BENCH_URL": url,
    }
    env.pop("CI", None)
    return env


def run_shards(
    count: int, args: argparse.Namespace, agent: Path, env: dict[str, str], base: Path
) -> tuple[float, float, list[Path]]:
    """Wall seconds of ``count`` shard processes started at once, their CPU seconds (user +
    system, all shards together), and their records directories."""
    dirs = [base / f"n{count}-s{i}" for i in range(1, count + 1)]
    command = [
        sys.executable, "-m", "agentprop._cli", "run", str(SUPPORTOPS),
        "--agent", f"{agent}:WaitingAgent", "--kinds", "mft", "--mode", "fixed",
        "--runs", str(args.runs), "--seed", "1", "--explore", "0", "--corpus", "none",
        "--shrink-budget", "0",
        "--concurrency", str(args.concurrency),
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*command, "--shard", f"{i}/{count}", "--records", str(d)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, d in enumerate(dirs, 1)
    ]
    outputs = [p.communicate(timeout=1800)[0] for p in procs]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    for i, (p, output) in enumerate(zip(procs, outputs, strict=True), 1):
        if p.returncode not in (0, 1, 3):
            raise SystemExit(f"shard {i}/{count} exited {p.returncode}:\n{output[-3000:]}")
    return wall, cpu, dirs


def merged_key(dirs: list[Path]) -> dict[tuple[str | None, str], tuple[str, int, int]]:
    """Each merged decision name's (verdict, runs, passes)."""
    from agentprop._pipeline.merge import merge_shards

    return {(c.kind, c.name): (c.verdict, c.runs, c.passes) for c in merge_shards(dirs).cases}


def synthesise(dirs: list[Path], target: int, out: Path) -> int:
    """Copies of the shards in ``dirs`` under ``out`` holding at least ``target`` trial lines in
    all (see the module docstring); returns the number of trial lines written."""
    shards = [
        [
            json.loads(line)
            for line in (d / "trials.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        for d in dirs
    ]
    per_copy = sum(r["type"] == "trial" for records in shards for r in records)
    if per_copy == 0:
        raise SystemExit("the shard records hold no trial line to copy")
    copies = -(-target // per_copy)
    written = 0
    for d, records in zip(dirs, shards, strict=True):
        top = max((r["decision"] for r in records), default=0)
        target_dir = out / d.name
        target_dir.mkdir(parents=True)
        shutil.copy(d / "shard.json", target_dir / "shard.json")
        with open(target_dir / "trials.jsonl", "w", encoding="utf-8") as f:
            for k in range(copies):
                for r in records:
                    copy = {
                        **r,
                        "decision": r["decision"] + k * top,
                        "case": f"{r['case']}#copy{k}",
                    }
                    written += copy["type"] == "trial"
                    f.write(json.dumps(copy, separators=(",", ":")) + "\n")
        (target_dir / "traces.jsonl").write_text("", encoding="utf-8")
    return written


def time_merge(dirs: list[Path], env: dict[str, str], out: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentprop._cli",
            "merge",
            "--records-only",
            *map(str, dirs),
            "--json",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    # the synthetic shards hold records only (no report.json: "did not finish"), so the merge
    # says INCOMPLETE and exits 3; what is timed is reading and deciding their records
    if proc.returncode not in (0, 1, 3) or "merged the records of" not in proc.stdout:
        raise SystemExit(
            f"agentprop merge exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument(
        "--runs", type=int, default=10, help="runs per case (fixed mode, default 10)"
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.05,
        help="the loopback model's latency per request, seconds (default 0.05)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, help="runs in flight in each shard (default 8)"
    )
    parser.add_argument(
        "--merge-records", type=int, default=100_000, help="trial lines to merge (default 100000)"
    )
    parser.add_argument(
        "--calls", type=int, default=2000, help="model calls booked per ledger (default 2000)"
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="a Redis server for the ledger figure (default: start one on loopback)",
    )
    args = parser.parse_args(argv)
    if (
        args.runs < 1
        or args.latency <= 0
        or args.concurrency < 1
        or args.merge_records < 1
        or args.calls < 1
    ):
        parser.error(
            "--runs, --concurrency, --merge-records and --calls must be >= 1 and --latency > 0"
        )
    from agentprop.testing import OpenAIServer

    figures: dict[str, Any] = {
        "runs_per_case": args.runs,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
    }
    walls: dict[int, float] = {}
    cpus: dict[int, float] = {}
    served: dict[int, int] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        agent = tmp / "waiting_agent.py"
        agent.write_text(
            AGENT_SOURCE.format(agent_path=str(SUPPORTOPS / "agent.py")), encoding="utf-8"
        )
        shard_dirs: dict[int, list[Path]] = {}
        with OpenAIServer(handler=lambda request: "ok", latency=args.latency) as server:
            env = _env(f"http://127.0.0.1:{server.port}/v1/chat/completions")
            for count in SHARD_COUNTS:
                before = len(server.requests)
                walls[count], cpus[count], shard_dirs[count] = run_shards(
                    count, args, agent, env, tmp
                )
                served[count] = len(server.requests) - before
        baseline = merged_key(shard_dirs[1])
        for count in SHARD_COUNTS[1:]:
            if merged_key(shard_dirs[count]) != baseline:
                failures.append(
                    f"the {count} shards' merge does not decide the same names, verdicts and "
                    "runs as the 1-shard run"
                )
            if served[count] != served[1]:
                failures.append(
                    f"the {count} shards made {served[count]} model requests, the "
                    f"1-shard run {served[1]}"
                )
        synthetic = tmp / "synthetic"
        merged_trials = synthesise(shard_dirs[4], args.merge_records, synthetic)
        merge_s = time_merge(sorted(synthetic.iterdir()), env, tmp / "merged.json")
    file_us, redis_us, why = _ledger_bench().ledger_figures(args.calls, args.redis)

    cases = len(baseline)
    print(
        f"shards: {cases} MFT cases of SupportOps x {args.runs} runs, a loopback model answering "
        f"after {args.latency * 1000:.0f} ms per turn, concurrency {args.concurrency} per shard; "
        f"one machine ({os.cpu_count()} CPUs)"
    )
    for count in SHARD_COUNTS:
        label = "1 shard (baseline)" if count == 1 else f"{count} shards"
        ratio = "" if count == 1 else f"  speedup {walls[1] / walls[count]:.2f}x"
        print(
            f"  {label:<20} {walls[count]:8.2f} s wall, {cpus[count]:6.2f} s CPU of the shards, "
            f"{served[count]} model requests{ratio}"
        )
    print(
        f"merge: {merged_trials} trial lines in 4 shards (the 4-shard run's records copied), "
        f"agentprop merge --json: {merge_s:.2f} s"
    )
    print(f"ledger, {args.calls} model calls (reserve + settle, one process):")
    print(f"  file ledger (baseline): {file_us:9.1f} us/call")
    if redis_us is None:
        print(f"  redis ledger:           not measured: {why}")
    else:
        print(
            f"  redis ledger:           {redis_us:9.1f} us/call  "
            f"({redis_us / file_us:.2f}x the file ledger)"
        )
    for failure in failures:
        print(f"CHECK FAILED: {failure}")
    figures |= {
        "cases": cases,
        "wall_s_1_shard": walls[1],
        "wall_s_2_shards": walls[2],
        "wall_s_4_shards": walls[4],
        "cpu_s_1_shard": cpus[1],
        "cpu_s_2_shards": cpus[2],
        "cpu_s_4_shards": cpus[4],
        "speedup_2_shards": walls[1] / walls[2],
        "speedup_4_shards": walls[1] / walls[4],
        "model_requests": served[1],
        "merge_s": merge_s,
        "merge_trial_records": merged_trials,
        "merge_s_100k_records": merge_s if merged_trials >= 100_000 else None,
        "ledger_calls": args.calls,
        "ledger_us_per_call_file": file_us,
        "ledger_us_per_call_redis": redis_us,
        "redis_over_file": None if redis_us is None else redis_us / file_us,
        "not_measured": why or None,
        "checks_failed": failures,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    if failures:
        return 1
    return 3 if redis_us is None else 0


if __name__ == "__main__":
    sys.exit(main())
