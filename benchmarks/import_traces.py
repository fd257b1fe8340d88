"""How fast ``agentprop import`` reads and judges a thousand production traces.

Usage: ``python benchmarks/import_traces.py [--json PATH] [--traces N] [--seed S] [--rounds R]``

Writes a seeded Chat Completions log of N conversations (default 1,000) of the quickstart in
the shapes of docs/examples/imports/openai_chat_quickstart.jsonl: a lookup answered from
``get_order`` (two logged calls), an answer given without the lookup (one call, breaks the
path's ``calls_in_order``) and an unclear message asked back, each with its own order id. Then,
in the same process and alternating over rounds, times ``agentprop import examples/quickstart
LOG`` run in-process (reading, judging, summarising; the project is loaded each time) against
the baseline of reading the same file with ``json.loads`` alone, line by line. Reports the
median seconds of each, traces per second and the ratio (import / baseline), and checks the
summary against the mix that was written (the counts must match, else exit 1).

JSON keys: ``traces``, ``lines``, ``seconds``, ``traces_per_s``, ``baseline_seconds``,
``ratio``, ``rounds``, ``passed``, ``failed``, ``behaviours``, ``counts_match``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentprop._cli import main  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart"
TEMPLATE = ROOT / "docs" / "examples" / "imports" / "openai_chat_quickstart.jsonl"


def write_log(path: Path, traces: int, seed: int) -> tuple[int, dict[str, int]]:
    """N conversations drawn from the three kinds; returns (lines written, kinds drawn)."""
    calls = [json.loads(line) for line in TEMPLATE.read_text(encoding="utf-8").splitlines()]
    kinds: dict[str, list[dict[str, Any]]] = {
        "lookup": calls[0:2],
        "no_lookup": calls[2:3],
        "unclear": calls[3:4],
    }
    rng = random.Random(seed)
    drawn = {k: 0 for k in kinds}
    lines = 0
    with path.open("w", encoding="utf-8") as handle:
        for n in range(traces):
            kind = rng.choice(list(kinds))
            drawn[kind] += 1
            order = f"O-{2000 + n}"
            for call in kinds[kind]:
                text = json.dumps(call).replace("O-1001", order).replace("O-1002", order)
                if kind == "unclear":  # distinct conversations, not one repeated prefix
                    text = text.replace("the thing?", f"the thing? ({n})")
                handle.write(text + "\n")
                lines += 1
    return lines, drawn


def baseline(path: Path) -> float:
    started = time.perf_counter()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            json.loads(line)
    return time.perf_counter() - started


def imported(path: Path) -> tuple[float, str]:
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stderr(err):  # the progress line
        main(["import", str(QUICKSTART), str(path)], out=out, err=err)
    return time.perf_counter() - started, out.getvalue()


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "traces.jsonl"
        lines, drawn = write_log(log, args.traces, args.seed)
        times: list[float] = []
        bases: list[float] = []
        summary = ""
        for r in range(max(1, args.rounds)):
            if r % 2:
                bases.append(baseline(log))
                seconds, summary = imported(log)
            else:
                seconds, summary = imported(log)
                bases.append(baseline(log))
            times.append(seconds)
    seconds, base = statistics.median(times), statistics.median(bases)
    counts = summary.splitlines()[1] if len(summary.splitlines()) > 1 else ""
    passed = drawn["lookup"] + drawn["unclear"]
    failed = drawn["no_lookup"]
    want = (
        f"{args.traces} trace(s): {passed} passed, {failed} failed (broke a contract); 3 "
        "distinct behaviour(s)"
    )
    match = counts == want
    result = {
        "traces": args.traces,
        "lines": lines,
        "seconds": round(seconds, 4),
        "traces_per_s": round(args.traces / seconds, 1),
        "baseline_seconds": round(base, 4),
        "ratio": round(seconds / base, 1),
        "rounds": len(times),
        "passed": passed,
        "failed": failed,
        "behaviours": 3,
        "counts_match": match,
    }
    print(
        f"{args.traces} traces ({lines} logged calls), seed {args.seed}, median of "
        f"{len(times)} round(s):"
    )
    print(f"  agentprop import: {seconds:.3f} s ({result['traces_per_s']} traces/s)")
    print(f"  baseline (json.loads of every line): {base:.4f} s")
    print(f"  ratio: {result['ratio']}x")
    print(f"  summary: {counts}")
    if not match:
        print(f"  MISMATCH: expected {want!r}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if match else 1


if __name__ == "__main__":
    raise SystemExit(main_())
