"""Issue #27 (part A): an interrupted run keeps what it decided; agents that exit, interrupt,
block or flood are bounded per run, never crash the runner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"


def project_with(tmp_path: Path, name: str, source: str) -> Path:
    """A copy of the SupportOps example with one more agent module, ``name.py``."""
    target = tmp_path / "proj"
    if not target.exists():
        shutil.copytree(SUPPORTOPS, target, ignore=shutil.ignore_patterns(".agentprop", "__snapshots__", "__pycache__"))
    (target / f"{name}.py").write_text(source)
    return target


# --------------------------------------------------------------------------- Ctrl-C (item 12)

INTERRUPTING = """
import os
import signal
import threading

from agent import SupportOpsAgent

_turns = [0]
_lock = threading.Lock()


class Interrupting(SupportOpsAgent):
    '''Presses Ctrl-C (SIGINT to its own process) at its 40th turn.'''

    def turn(self, message, ctx):
        with _lock:
            _turns[0] += 1
            now = _turns[0]
        if now == 40:
            os.kill(os.getpid(), signal.SIGINT)
        super().turn(message, ctx)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to the own process")
def test_ctrl_c_during_run_writes_the_partial_report_and_says_interrupted(tmp_path: Path) -> None:
    project = project_with(tmp_path, "interrupting", INTERRUPTING)
    outputs = {name: tmp_path / f"r.{name}" for name in ("json", "junit", "markdown", "html")}
    flags = [arg for name, path in outputs.items() for arg in (f"--{name}", str(path))]
    argv = ["run", str(project), "--agent", "interrupting:Interrupting", "--runs", "3", "--concurrency", "1", "--kinds", "mft", "--corpus", "none"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "agentprop", *argv, *flags], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 130, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    report = json.loads(outputs["json"].read_text())
    interrupted = report["metrics"]["extra"]["interrupted"]
    decided = interrupted["cases_decided"]
    assert 0 < decided < interrupted["cases_planned"] and len(report["cases"]) == decided
    assert all(c["runs"] == 3 for c in report["cases"])  # whole cases only, each with its runs
    budget = report["metrics"]["extra"]["budget"]
    assert budget["runs"] >= report["metrics"]["runs"] == 3 * decided
    assert f"interrupted: {decided} case(s) decided before it" in done.stdout and f"({budget['runs']} runs started, $0.0000 spent)" in done.stdout
    assert 'name="interrupted"' in outputs["junit"].read_text() and 'type="INTERRUPTED"' in outputs["junit"].read_text()
    assert "(interrupted)" in outputs["markdown"].read_text() and "sum-interrupted" in outputs["html"].read_text()


# --------------------------------------------------------------------------- agents that end the process (item 9)

HOSTILE = """
import sys

from agent import SupportOpsAgent


class Exits(SupportOpsAgent):
    def turn(self, message, ctx):
        sys.exit(5)


class Interrupts(SupportOpsAgent):
    def turn(self, message, ctx):
        raise KeyboardInterrupt


class AsyncExits:
    async def turn(self, message, ctx):
        sys.exit(5)


class AsyncInterrupts:
    async def turn(self, message, ctx):
        raise KeyboardInterrupt


class ExitsOnClose(SupportOpsAgent):
    def close_conversation(self):
        sys.exit(3)


def exiting_factory():
    sys.exit(4)


class BadGetattr(SupportOpsAgent):
    def __getattr__(self, name):
        raise RuntimeError(f"no attribute {name} here")
"""


def cli(*argv: str) -> tuple[int, str, str]:
    import io

    from agentprop._cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        ("Exits", "the agent called sys.exit(5) (SystemExit)"),
        ("Interrupts", "the agent raised KeyboardInterrupt"),
        ("AsyncExits", "the agent called sys.exit(5) (SystemExit)"),
        ("AsyncInterrupts", "the agent raised KeyboardInterrupt"),
        ("ExitsOnClose", "close_conversation(): the agent called sys.exit(3) (SystemExit)"),
        ("exiting_factory", "agent factory: the agent called sys.exit(4) (SystemExit)"),
        ("BadGetattr", None),
    ],
)
def test_an_agent_that_exits_or_interrupts_fails_its_runs_and_the_run_reports(tmp_path: Path, agent: str, says: str | None) -> None:
    project = project_with(tmp_path, "hostile", HOSTILE)
    report = tmp_path / "r.json"
    argv = ("run", str(project), "--agent", f"hostile:{agent}", "--runs", "2", "--kinds", "mft", "--case", "END_BILLING_ANSWER<-N3_BILLING")
    code, out, err = cli(*argv, "--corpus", "none", "--shrink-budget", "0", "--json", str(report))
    cases = json.loads(report.read_text())["cases"]
    assert cases and all(c["runs"] == 2 for c in cases), out + err
    if says is None:  # a __getattr__ that raises is an agent without the optional hooks, not a crash
        assert code == 0 and all(c["verdict"] == "PASS" for c in cases), out + err
        return
    assert code == 1 and all(c["verdict"] == "FAIL" for c in cases), out + err
    assert all(says in c["failures"][0]["explanation"] for c in cases), cases[0]["failures"][0]
