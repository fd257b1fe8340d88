"""What agentprop's pytest plugin costs a project that does not use it, beside Hypothesis's own.

Usage: ``python benchmarks/startup.py [--json PATH] [--rounds N]``

In a scratch project with one trivial test (no agentprop, no Hypothesis), ``python -m pytest``
is timed (CPU time of the process, user + system: on a shared machine wall time measures the
other processes) in fresh processes three ways per round, in an order that rotates: with every
plugin, with ``-p no:agentprop``, and with ``-p no:hypothesispytest`` (Hypothesis's plugin). A
plugin's overhead is reported two ways, both from the same runs: the median over rounds of
(time with it - time without it), each pair measured back to back so the machine's drift
cancels; and the difference of the fastest runs (min with - min without): the runs least
disturbed by other processes, which a busy machine slows but never speeds up. ``import agentprop``
is timed the same way against ``python -c pass``, and so is what a test module that uses a strategy
imports: ``from agentprop import strategies as aps; aps.paraphrases`` (the strategy looked up,
not drawn: a draw imports Hypothesis as well). Whole pytest runs vary by tens of ms on a busy
machine, more than a light plugin costs, so the cost of loading each plugin is also timed inside one
process (CPU time of ``import agentprop.pytest_plugin`` / ``import _hypothesis_pytestplugin`` after
``import pytest``, in alternating order), a short interval that other processes barely touch.

Bytecode. An installed package has its ``.pyc`` files (pip compiles them), as Hypothesis's
plugin here has; a checkout run with ``PYTHONDONTWRITEBYTECODE`` set compiles agentprop's
sources in every process. The target's figures are measured like for like, with a bytecode
cache for everything (``PYTHONPYCACHEPREFIX`` in the scratch directory, filled by a warm-up
run); the plugin's overhead *without* a bytecode cache for agentprop, as this environment runs
when it sets ``PYTHONDONTWRITEBYTECODE``, is measured in the same rounds and reported beside it.
Target: the agentprop plugin's overhead (median, with bytecode) <= 50 ms.

JSON keys: ``plugin_overhead_ms`` (agentprop's, median), ``plugin_overhead_min_ms``,
``plugin_overhead_iqr_ms`` (the interquartile range of its paired differences: the noise),
``hypothesis_plugin_overhead_ms`` (median), ``hypothesis_plugin_overhead_min_ms``,
``plugin_overhead_no_bytecode_ms`` (median; ``null`` when the environment writes bytecode, so
there is no such setting to measure), ``plugin_import_ms`` and ``hypothesis_plugin_import_ms``
(in-process, median), ``import_agentprop_ms``, ``import_strategy_ms``, ``pytest_ms`` (the median run
with every plugin), all CPU ms; ``rounds``, ``target_ms``, ``met`` (the median overhead within
the target).
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
STRATEGY = "from agentprop import strategies as aps; aps.paraphrases"
"""What a test module that uses a strategy imports (the strategy looked up, not drawn)."""
ROOT = Path(__file__).resolve().parents[1]


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    """The CPU time (user + system, ms) of one fresh ``python ARGS`` process: on a machine
    other processes share, its wall time mostly measures them."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(args)} failed ({proc.returncode}):\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


PLUGINS = {
    "agentprop_plugin": "agentprop.pytest_plugin",
    "hypothesis_plugin": "_hypothesis_pytestplugin",
}


def plugin_imports(cwd: Path, env: dict[str, str], *, first: str) -> dict[str, float]:
    """CPU ms of importing each plugin module after ``import pytest``, in one fresh process."""
    order = [first, *(k for k in PLUGINS if k != first)]
    code = "import json, time, pytest\nout = {}\n" + "".join(
        f"t = time.process_time()\nimport {PLUGINS[k]}\nout[{k!r}] = "
        "(time.process_time() - t) * 1000\n"
        for k in order
    )
    proc = subprocess.run(
        [sys.executable, "-c", code + "print(json.dumps(out))"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"timing the plugins' imports failed ({proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    return {k: float(v) for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


def spread(with_it: list[float], without: list[float]) -> float:
    """The interquartile range of the paired differences (ms): how much the machine's noise
    moves one pair, against which the median is read (0 with fewer than 2 rounds)."""
    diffs = [a - b for a, b in zip(with_it, without, strict=True)]
    if len(diffs) < 2:
        return 0.0
    q = statistics.quantiles(diffs, n=4)
    return q[2] - q[0]


def overhead(with_it: list[float], without: list[float]) -> tuple[float, float]:
    """(median of the paired differences, min - min), in ms."""
    return statistics.median(a - b for a, b in zip(with_it, without, strict=True)), min(
        with_it
    ) - min(without)


def measure(rounds: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="agentprop-startup-") as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        (project / "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        base = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
        }
        cached = {**base, "PYTHONPATH": path, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        # the environment as it is
        no_bytecode = {**base, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
        pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py"]
        variants: dict[str, tuple[list[str], dict[str, str]]] = {
            "all": (pytest_args, cached),
            "no_agentprop": ([*pytest_args, "-p", "no:agentprop"], cached),
            "no_hypothesis": ([*pytest_args, "-p", "no:hypothesispytest"], cached),
        }
        measure_no_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        if measure_no_bytecode:  # agentprop compiled in every process; the rest from its own .pyc
            variants["all_no_bytecode"] = (pytest_args, no_bytecode)
            variants["no_agentprop_no_bytecode"] = (
                [*pytest_args, "-p", "no:agentprop"],
                no_bytecode,
            )
        imports = {
            "agentprop": (["-c", "import agentprop"], cached),
            "strategy": (["-c", STRATEGY], cached),
            "bare": (["-c", "pass"], cached),
        }
        for args, env in [*variants.values(), *imports.values()]:
            # fill the bytecode cache and the file cache before anything counts
            timed(args, project, env)
        plugin_imports(project, cached, first="agentprop_plugin")
        runs: dict[str, list[float]] = {k: [] for k in [*variants, *imports, *PLUGINS]}
        names = list(variants)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                args_, env_ = variants[name]
                runs[name].append(timed(args_, project, env_))
            kinds = list(imports)
            for name in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
                args_, env_ = imports[name]
                runs[name].append(timed(args_, project, env_))
            for name, ms in plugin_imports(
                project, cached, first="agentprop_plugin" if r % 2 == 0 else "hypothesis_plugin"
            ).items():
                runs[name].append(ms)
    agentprop_median, agentprop_min = overhead(runs["all"], runs["no_agentprop"])
    hypothesis_median, hypothesis_min = overhead(runs["all"], runs["no_hypothesis"])
    cold = (
        overhead(runs["all_no_bytecode"], runs["no_agentprop_no_bytecode"])[0]
        if measure_no_bytecode
        else None
    )
    return {
        "plugin_overhead_ms": round(agentprop_median, 1),
        "plugin_overhead_min_ms": round(agentprop_min, 1),
        "plugin_overhead_iqr_ms": round(spread(runs["all"], runs["no_agentprop"]), 1),
        "hypothesis_plugin_overhead_ms": round(hypothesis_median, 1),
        "hypothesis_plugin_overhead_min_ms": round(hypothesis_min, 1),
        "plugin_overhead_no_bytecode_ms": round(cold, 1) if cold is not None else None,
        "plugin_import_ms": round(statistics.median(runs["agentprop_plugin"]), 1),
        "hypothesis_plugin_import_ms": round(statistics.median(runs["hypothesis_plugin"]), 1),
        "import_agentprop_ms": round(overhead(runs["agentprop"], runs["bare"])[0], 1),
        "import_strategy_ms": round(overhead(runs["strategy"], runs["bare"])[0], 1),
        "pytest_ms": round(statistics.median(runs["all"]), 1),
        "rounds": rounds,
        "target_ms": TARGET_MS,
        "met": agentprop_median <= TARGET_MS,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    result = measure(args.rounds)
    print(
        f"pytest on a project without agentprop, CPU time, {args.rounds} interleaved rounds, "
        f"bytecode cached: median {result['pytest_ms']} ms"
    )
    print("  overhead of a plugin (median of paired differences / difference of the fastest runs):")
    verdict = "met" if result["met"] else "NOT met"
    print(
        f"  agentprop plugin:  {result['plugin_overhead_ms']:>7} ms / "
        f"{result['plugin_overhead_min_ms']:>7} ms  (target <= {TARGET_MS:.0f} ms on "
        f"the median: {verdict})"
    )
    print(
        "  (agentprop's paired differences spread over an interquartile range of "
        f"{result['plugin_overhead_iqr_ms']} ms: the machine's noise)"
    )
    print(
        f"  Hypothesis plugin: {result['hypothesis_plugin_overhead_ms']:>7} ms / "
        f"{result['hypothesis_plugin_overhead_min_ms']:>7} ms  (the baseline, same runs)"
    )
    ratio = "n/a (Hypothesis's overhead is not positive)"
    if float(str(result["hypothesis_plugin_overhead_ms"])) > 0:
        ours, hypothesis = (
            float(str(result[k])) for k in ("plugin_overhead_ms", "hypothesis_plugin_overhead_ms")
        )
        ratio = f"{ours / hypothesis:.2f}x"
    print(f"  agentprop / Hypothesis (medians): {ratio}")
    print(
        "  loading the plugin, in-process CPU time (median): agentprop "
        f"{result['plugin_import_ms']} ms, Hypothesis {result['hypothesis_plugin_import_ms']} ms"
    )
    cold = result["plugin_overhead_no_bytecode_ms"]
    if cold is None:
        print("  without a bytecode cache: not measured (PYTHONDONTWRITEBYTECODE is not set here)")
    else:
        print(
            "  agentprop plugin without a bytecode cache for agentprop (PYTHONDONTWRITEBYTECODE, "
            f"as set here): {cold} ms (median)"
        )
    print(
        f"import agentprop: {result['import_agentprop_ms']} ms over `python -c "
        "pass` (bytecode cached)"
    )
    print(f"{STRATEGY}: {result['import_strategy_ms']} ms over `python -c pass` (bytecode cached)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
