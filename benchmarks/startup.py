"""What agentprop's pytest plugin costs a project that does not use it, beside Hypothesis's own.

Usage: ``python benchmarks/startup.py [--json PATH] [--rounds N]``

In a scratch project with one trivial test (no agentprop, no Hypothesis), ``python -m pytest``
is timed (CPU time of the process, user + system: on a shared machine wall time measures the
other processes) in fresh processes three ways per round, in an order that rotates: with every plugin,
with ``-p no:agentprop``, and with ``-p no:hypothesispytest`` (Hypothesis's plugin). The overhead
of a plugin is the median over rounds of (time with it - time without it), each pair measured
back to back, so that the machine's drift cancels. ``import agentprop`` is timed the same way
against ``python -c pass``. Target: the agentprop plugin's overhead <= 50 ms.

JSON keys: ``plugin_overhead_ms`` (agentprop's), ``hypothesis_plugin_overhead_ms``,
``import_agentprop_ms``, ``pytest_ms`` (the median run with every plugin), all CPU ms, ``rounds``,
``target_ms``, ``met`` (whether the overhead is within the target).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_MS = 50.0
ROOT = Path(__file__).resolve().parents[1]


def timed(args: list[str], cwd: Path) -> float:
    """The CPU time (user + system, ms) of one fresh ``python ARGS`` process: on a machine
    other processes share, its wall time mostly measures them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


def measure(rounds: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="agentprop-startup-") as tmp:
        project = Path(tmp)
        (project / "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py"]
        variants = {
            "all": pytest_args,
            "no_agentprop": [*pytest_args, "-p", "no:agentprop"],
            "no_hypothesis": [*pytest_args, "-p", "no:hypothesispytest"],
        }
        runs: dict[str, list[float]] = {k: [] for k in variants}
        imports: dict[str, list[float]] = {"agentprop": [], "bare": []}
        timed(variants["all"], project)  # warm the file cache before anything counts
        for r in range(rounds):
            order = list(variants)[r % 3 :] + list(variants)[: r % 3]
            for name in order:
                runs[name].append(timed(variants[name], project))
            pair = [("bare", ["-c", "pass"]), ("agentprop", ["-c", "import agentprop"])]
            for name, args in pair if r % 2 == 0 else reversed(pair):
                imports[name].append(timed(args, project))
    agentprop_overhead = statistics.median(a - b for a, b in zip(runs["all"], runs["no_agentprop"], strict=True))
    hypothesis_overhead = statistics.median(a - b for a, b in zip(runs["all"], runs["no_hypothesis"], strict=True))
    import_ms = statistics.median(a - b for a, b in zip(imports["agentprop"], imports["bare"], strict=True))
    return {
        "plugin_overhead_ms": round(agentprop_overhead, 1),
        "hypothesis_plugin_overhead_ms": round(hypothesis_overhead, 1),
        "import_agentprop_ms": round(import_ms, 1),
        "pytest_ms": round(statistics.median(runs["all"]), 1),
        "rounds": rounds,
        "target_ms": TARGET_MS,
        "met": agentprop_overhead <= TARGET_MS,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    result = measure(args.rounds)
    print(f"pytest on a project without agentprop, CPU time, median of {args.rounds} interleaved rounds: {result['pytest_ms']} ms")
    print(
        f"  agentprop plugin overhead:  {result['plugin_overhead_ms']:>7} ms  (target <= {TARGET_MS:.0f} ms: {'met' if result['met'] else 'NOT met'})"
    )
    print(f"  Hypothesis plugin overhead: {result['hypothesis_plugin_overhead_ms']:>7} ms  (the baseline, same runs)")
    ratio = "n/a (Hypothesis's overhead is not positive)"
    if float(str(result["hypothesis_plugin_overhead_ms"])) > 0:
        ratio = f"{float(str(result['plugin_overhead_ms'])) / float(str(result['hypothesis_plugin_overhead_ms'])):.2f}x"
    print(f"  agentprop / Hypothesis:     {ratio}")
    print(f"import agentprop: {result['import_agentprop_ms']} ms over `python -c pass`")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
