"""Issue #27 (part A): an interrupted run keeps what it decided; agents that exit, interrupt,
block or flood are bounded per run, never crash the runner."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"


def project_with(tmp_path: Path, name: str, source: str) -> Path:
    """A copy of the SupportOps example with one more agent module, ``name.py``."""
    target = tmp_path / "proj"
    if not target.exists():
        shutil.copytree(
            SUPPORTOPS,
            target,
            ignore=shutil.ignore_patterns(".agentprop", "__snapshots__", "__pycache__"),
        )
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


def _default_sigint() -> None:
    """In the child, before it starts: SIGINT back to the default disposition. An ignored
    signal stays ignored across ``exec``, and Python (so asyncio's Ctrl-C handler) then leaves
    it ignored: without this, the child of a test suite started in the background by a shell
    (``pytest ... &`` in a script, which ignores SIGINT) never sees its Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    """This (test) process ignores SIGINT meanwhile, as a suite started in the background by
    a non-interactive shell does: what the children inherit must not decide the test."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to the own process")
@pytest.mark.usefixtures("sigint_ignored")
def test_ctrl_c_during_run_writes_the_partial_report_and_says_interrupted(tmp_path: Path) -> None:
    project = project_with(tmp_path, "interrupting", INTERRUPTING)
    outputs = {name: tmp_path / f"r.{name}" for name in ("json", "junit", "markdown", "html")}
    flags = [arg for name, path in outputs.items() for arg in (f"--{name}", str(path))]
    argv = [
        "run",
        str(project),
        "--agent",
        "interrupting:Interrupting",
        "--runs",
        "3",
        "--concurrency",
        "1",
        "--kinds",
        "mft",
        "--corpus",
        "none",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "agentprop", *argv, *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert done.returncode == 130, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    report = json.loads(outputs["json"].read_text())
    interrupted = report["metrics"]["extra"]["interrupted"]
    decided = interrupted["cases_decided"]
    assert 0 < decided < interrupted["cases_planned"] and len(report["cases"]) == decided
    assert all(c["runs"] == 3 for c in report["cases"])  # whole cases only, each with its runs
    budget = report["metrics"]["extra"]["budget"]
    assert budget["runs"] >= report["metrics"]["runs"] == 3 * decided
    assert (
        f"interrupted: {decided} case(s) decided before it" in done.stdout
        and f"({budget['runs']} runs started, $0.0000 spent)" in done.stdout
    )
    assert (
        'name="interrupted"' in outputs["junit"].read_text()
        and 'type="INTERRUPTED"' in outputs["junit"].read_text()
    )
    assert (
        "(interrupted)" in outputs["markdown"].read_text()
        and "sum-interrupted" in outputs["html"].read_text()
    )


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM to the own process")
def test_sigterm_during_run_writes_the_partial_report_and_exits_143(tmp_path: Path) -> None:
    """A CI runner cancelling a job sends SIGTERM: the run died at once, with no report. It now
    ends as on Ctrl-C, the reports holding the cases decided and naming SIGTERM, exit 143."""
    project = project_with(
        tmp_path, "interrupting", INTERRUPTING.replace("signal.SIGINT", "signal.SIGTERM")
    )
    outputs = {name: tmp_path / f"r.{name}" for name in ("json", "junit", "markdown")}
    flags = [arg for name, path in outputs.items() for arg in (f"--{name}", str(path))]
    argv = ["run", str(project), "--agent", "interrupting:Interrupting", "--runs", "3"]
    argv += ["--concurrency", "1", "--kinds", "mft", "--corpus", "none"]
    done = subprocess.run(
        [sys.executable, "-m", "agentprop", *argv, *flags],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert done.returncode == 143, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(outputs["json"].read_text())
    interrupted = report["metrics"]["extra"]["interrupted"]
    decided = interrupted["cases_decided"]
    assert 0 < decided < interrupted["cases_planned"] and len(report["cases"]) == decided
    assert interrupted["by"] == "SIGTERM"
    assert f"interrupted by SIGTERM: {decided} case(s) decided before it" in done.stdout
    assert "interrupted (SIGTERM) after" in outputs["junit"].read_text()
    assert "**Interrupted** (SIGTERM)" in outputs["markdown"].read_text()


PRESSES_CTRL_C_AT = """
import os
import signal
import sys

import inspect
import time

import agentprop._pipeline.run as run

name, times = sys.argv[1].partition("*")[::2]
original = getattr(run, name)


def press():  # Ctrl-C (or $SIGNAL) as this stage of the run starts, once or more
    for _ in range(int(times or 1)):
        os.kill(os.getpid(), getattr(signal, os.environ.get("SIGNAL", "SIGINT")))
        time.sleep(0.05)  # each press handled before the next


async def pressed_async(*args, **kwargs):
    press()
    return await original(*args, **kwargs)


def pressed(*args, **kwargs):
    press()
    return original(*args, **kwargs)


setattr(run, name, pressed_async if inspect.iscoroutinefunction(original) else pressed)
from agentprop._cli import main

raise SystemExit(main(sys.argv[2:]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to the own process")
@pytest.mark.parametrize(
    ("how", "flags"),
    [
        # the agent presses it at its 10th turn, in the first pass of a budgeted run (one run a
        # case): that pass's partial report was taken for its result and the passes went on
        ("interrupting:Interrupting", ["--max-runs", "400"]),
        # pressed as the pooled top-up of the policies starts, after every case was decided:
        # the cancellation escaped the run and took every decided case with it
        ("top_up_policies", []),
    ],
    ids=["budgeted-pass", "policy-top-up"],
)
def test_ctrl_c_in_any_stage_of_a_run_ends_it_with_the_cases_decided(
    tmp_path: Path, how: str, flags: list[str]
) -> None:
    project = project_with(tmp_path, "interrupting", INTERRUPTING.replace("== 40", "== 10"))
    argv = ["run", str(project), "--kinds", "mft", "--corpus", "none", "--concurrency", "1"]
    report_path = tmp_path / "r.json"
    argv += [*flags, "--json", str(report_path)]
    if ":" in how:
        command = [sys.executable, "-m", "agentprop", *argv, "--agent", how]
    else:
        command = [sys.executable, "-c", PRESSES_CTRL_C_AT, how, *argv]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert done.returncode == 130, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    decided = report["metrics"]["extra"]["interrupted"]["cases_decided"]
    assert 0 < decided == len(report["cases"])
    assert f"interrupted: {decided} case(s) decided before it" in done.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to the own process")
@pytest.mark.parametrize(
    ("presses", "name", "code"), [(1, "SIGINT", 130), (2, "SIGINT", 130), (2, "SIGTERM", 143)]
)
def test_ctrl_c_once_the_run_is_decided_keeps_it_and_twice_exits_at_once(
    tmp_path: Path, presses: int, name: str, code: int
) -> None:
    """Pressed as the table is printed, after the last case was decided: once, the reports are
    written in full and the run exits 130 saying so (Python's handler threw the run away
    there); twice, it exits at once (after SIGTERM, with 143)."""
    report_path = tmp_path / "r.json"
    argv = ["run", str(SUPPORTOPS), "--kinds", "mft", "--corpus", "none", "--runs", "1"]
    done = subprocess.run(
        [sys.executable, "-c", PRESSES_CTRL_C_AT, f"render_table*{presses}", *argv]
        + ["--json", str(report_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SIGNAL": name},
        timeout=300,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    if presses == 1:
        report = json.loads(report_path.read_text())
        assert "interrupted" not in report["metrics"]["extra"] and len(report["cases"]) == 25
        assert "interrupted: after every case was decided" in done.stdout
    else:
        said = "agentprop: interrupted" + (" (SIGTERM)" if name == "SIGTERM" else "")
        assert not report_path.exists() and done.stderr.strip() == said


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to the own process")
def test_ctrl_c_while_the_command_line_is_read_says_interrupted(tmp_path: Path) -> None:
    """Building the parser was outside the code that turns a Ctrl-C into exit 130: a press
    there printed a KeyboardInterrupt traceback."""
    driver = (
        "import os, signal, sys, time\n"
        "import agentprop._cli as cli\n"
        "built = cli.parser\n"
        "def parser():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.05)\n"
        "    return built()\n"
        "cli.parser = parser\n"
        "raise SystemExit(cli.main(['run', sys.argv[1]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", driver, str(SUPPORTOPS)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert (done.returncode, done.stderr.strip()) == (130, "agentprop: interrupted"), done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to the own process")
def test_ctrl_c_while_the_script_loads_its_modules_says_interrupted(tmp_path: Path) -> None:
    """The ``agentprop`` script imported ``agentprop._cli`` (asyncio and every command's
    parser) before any code of ours could catch a Ctrl-C: a press there printed a traceback.
    Its entry point now imports the command line itself, and a press there exits 130."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["agentprop"] == "agentprop.__main__:console"
    driver = (  # Ctrl-C as the command line's modules are being imported, as the script runs
        "import os, signal, sys, time\n"
        "class Press:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'asyncio':\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "            time.sleep(0.05)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Press())\n"
        "from agentprop.__main__ import console\n"
        "raise SystemExit(console())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", driver, "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    assert (done.returncode, done.stderr.strip()) == (130, "agentprop: interrupted"), done.stderr


CHECKS = """
from pathlib import Path

import pytest

import agentprop

HERE = Path(__file__).parent
project = agentprop.load_project(HERE)
AGENT = agentprop.load_agent("interrupting:Interrupting", HERE, "")


@pytest.mark.parametrize(
    "case", ["END_REFUSE_PII<-N1_INTENT", "END_CANCELLED<-N7_CANCEL", "END_REFUSE_AUTH<-N2_AUTH"]
)
def test_check(case):
    agentprop.check(project, project.scenario(case), AGENT)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to the own process")
def test_ctrl_c_in_a_pytest_session_keeps_the_checks_decided_before_it(tmp_path: Path) -> None:
    """pytest handles the KeyboardInterrupt (exit 2): the agentprop summary and the
    --agentprop-json record still hold the checks decided before it (the agent presses Ctrl-C
    at its 70th turn, in the second check: the first takes fewer runs of one turn)."""
    project = project_with(tmp_path, "interrupting", INTERRUPTING.replace("== 40", "== 70"))
    (project / "test_checks.py").write_text(CHECKS)
    record = tmp_path / "session.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
        + ["test_checks.py", "--agentprop-json", str(record), "--agentprop-fresh"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        cwd=project,
        preexec_fn=_default_sigint,
    )
    assert done.returncode == 2, done.stdout + done.stderr  # pytest's "interrupted"
    assert "KeyboardInterrupt" in done.stdout and "1 passed" in done.stdout
    checks = json.loads(record.read_text())["checks"]
    assert [c["verdict"] for c in checks] == ["PASS"] and 0 < checks[0]["runs"] < 70
    assert "= agentprop =" in done.stdout and "1 checks, 1 passed" in done.stdout


# ------------------------------------------------------------- agents that end the process (item 9)

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
def test_an_agent_that_exits_or_interrupts_fails_its_runs_and_the_run_reports(
    tmp_path: Path, agent: str, says: str | None
) -> None:
    project = project_with(tmp_path, "hostile", HOSTILE)
    report = tmp_path / "r.json"
    argv = (
        "run",
        str(project),
        "--agent",
        f"hostile:{agent}",
        "--runs",
        "2",
        "--kinds",
        "mft",
        "--case",
        "END_BILLING_ANSWER<-N3_BILLING",
    )
    code, out, err = cli(*argv, "--corpus", "none", "--shrink-budget", "0", "--json", str(report))
    cases = json.loads(report.read_text())["cases"]
    assert cases and all(c["runs"] == 2 for c in cases), out + err
    # a __getattr__ that raises is an agent without the optional hooks, not a crash
    if says is None:
        assert code == 0 and all(c["verdict"] == "PASS" for c in cases), out + err
        return
    assert code == 1 and all(c["verdict"] == "FAIL" for c in cases), out + err
    assert all(says in c["failures"][0]["explanation"] for c in cases), cases[0]["failures"][0]


# ------------------------------------------------------------ the runtime bounds the agent (item 8)


def _respond(ctx: Any, message: str = "done") -> None:
    ctx.respond(
        node_id="N3_BILLING",
        decision="BILLING_ANSWER",
        tool_actions=[],
        evidence="from tools",
        user_message=message,
    )


def _run(spec: Any, agent: Any, **kw: Any) -> Any:
    from agentprop._agents.runtime import run_conversation
    from agentprop._scenario.world import World

    return run_conversation(
        spec, lambda: agent, ["what plan am I on?"], World(spec=spec, seed=1), **kw
    )


def test_a_blocking_close_conversation_is_timed_out(supportops_spec: Any) -> None:
    release = threading.Event()

    class BlocksOnClose:
        def turn(self, message: str, ctx: Any) -> None:
            _respond(ctx)

        def close_conversation(self) -> None:
            # blocks until the test ends (10 s at most: before the fix it hung the runner)
            release.wait(10)

    try:
        trace = _run(supportops_spec, BlocksOnClose(), turn_timeout_s=0.2)
    finally:
        release.set()
    assert [(e.kind, e.message) for e in trace.errors] == [
        ("timeout", "close_conversation() did not finish within 0.2 s")
    ]


def test_an_agent_looping_on_refused_calls_has_its_turn_ended_and_its_trace_bounded(
    supportops_spec: Any,
) -> None:
    from agentprop import ToolError
    from agentprop._agents.runtime import MAX_REFUSED_CALLS_PER_TURN

    attempts = [0]

    def loops(message: str, ctx: Any) -> None:
        while attempts[0] < 100_000:  # as good as forever
            attempts[0] += 1
            try:
                ctx.call("no_such_tool", attempt=attempts[0])
            except ToolError:
                continue

    trace = _run(supportops_spec, loops, turn_timeout_s=None)
    turn = trace.turns[0]
    assert len(turn.tool_calls) == MAX_REFUSED_CALLS_PER_TURN + 1
    [limit] = [e for e in turn.errors if e.kind == "limit_exceeded"]
    assert (
        "kept calling after 20 of its calls were refused this turn" in limit.message
        and "the turn is ended" in limit.message
    )
    assert len(trace.to_json()) < 100_000


def test_a_huge_reply_or_tool_argument_ends_the_turn_with_a_clear_error(
    supportops_spec: Any,
) -> None:
    from agentprop._agents.runtime import MAX_TEXT_CHARS

    huge = "x" * (MAX_TEXT_CHARS + 1)

    def big_reply(message: str, ctx: Any) -> None:
        _respond(ctx, message=huge)

    def big_args(message: str, ctx: Any) -> None:
        ctx.call("get_account", account_id=huge)

    for agent, what in (
        (big_reply, "the reply (respond's fields) is"),
        (big_args, "the arguments of get_account are"),
    ):
        trace = _run(supportops_spec, agent, turn_timeout_s=5.0)
        [limit] = [e for e in trace.all_errors() if e.kind == "limit_exceeded"]
        assert (
            what in limit.message
            and f"over the {MAX_TEXT_CHARS:,} agentprop records" in limit.message
        )
        assert len(trace.to_json()) < 100_000


def test_a_worker_looping_forever_on_refused_calls_is_let_go_at_once_not_at_the_timeout(
    supportops_spec: Any,
) -> None:
    def forever(message: str, ctx: Any) -> None:
        while True:  # catches everything, never returns
            try:
                ctx.call("no_such_tool")
            except Exception:
                pass

    trace = _run(supportops_spec, forever, turn_timeout_s=60.0)
    kinds = [e.kind for e in trace.all_errors()]
    # let go at the bound, not at the 60 s timeout
    assert "limit_exceeded" in kinds and "timeout" not in kinds


# ----------------------------------------------------------- a live run's timeout replays (item 13)


def test_a_turn_timed_out_on_a_slow_live_model_replays_to_the_same_timeout(tmp_path: Path) -> None:
    """The live run's second model call outlives the turn: its turn times out. The replay used
    to miss the cache on that call (the live run never finished it) and end INCONCLUSIVE on a
    cache miss; the cut-off call is now recorded, and the replay times out on it too."""
    import asyncio

    # imported before the clock runs: the first turn must reach the model
    pytest.importorskip("anthropic")
    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._agents.project import load_project
    from agentprop._modelapi.retry import RetryPolicy
    from agentprop.testing import MessagesServer, respond_reply, slow_reply, tool_use_reply

    project = load_project(SUPPORTOPS)
    scenario = project.scenario("END_BILLING_ANSWER<-N3_BILLING")
    answer = respond_reply(
        node_id="END_BILLING_ANSWER",
        decision="BILLING_ANSWER",
        tool_actions=["get_account"],
        evidence="get_account",
        user_message="Plan PLAN-BASIC.",
    )

    def model(request: Any) -> Any:
        calls = sum(1 for m in request["messages"] if m["role"] == "assistant")
        return (
            tool_use_reply("get_account", {"account_id": "A1"})
            if calls == 0
            else slow_reply(answer, 10.0)
        )

    def run(server: MessagesServer, mode: str) -> Any:
        agent = AnthropicAgent(
            "claude-sonnet-4-6",
            base_url=server.base_url,
            cache=tmp_path / "api.sqlite",
            cache_mode=mode,
            retry_policy=RetryPolicy(max_attempts=1),
        )

        async def go() -> Any:
            try:
                return await project.arun(
                    scenario, agent.factory, trial=0, agent_name=agent.ref, turn_timeout_s=3.0
                )
            finally:
                await agent.aclose()

        return asyncio.run(go())

    with MessagesServer(handler=model) as server:
        live = run(server, "read-write")
        sent = len(server.requests)
        replay = run(server, "replay-only")
        assert len(server.requests) == sent == 2  # the replay sent nothing
    assert [e.kind for e in live.all_errors()] == ["timeout"]
    assert [e.kind for e in replay.all_errors()] == ["timeout"], replay.all_errors()
    assert (
        "when this call was recorded, it did not answer before the turn's timeout"
        in replay.all_errors()[0].message
    )
    assert (
        [c.name for c in replay.turns[0].tool_calls]
        == [c.name for c in live.turns[0].tool_calls]
        == ["get_account"]
    )


def test_a_call_the_live_api_never_answered_replays_as_unavailable_without_a_call(
    tmp_path: Path,
) -> None:
    """Every attempt of the live run's second call timed out on the client (``timeout``): the
    run was INCONCLUSIVE, api_unavailable. Its replay-only run used to miss the cache on that
    call (a cache miss, "record it first") though the live run recorded all there was; it now
    ends as the live one did, with no call. A mode that may call the API asks again."""
    import asyncio

    pytest.importorskip("anthropic")
    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._agents.project import load_project
    from agentprop._modelapi.retry import RetryPolicy
    from agentprop.testing import MessagesServer, respond_reply, slow_reply, tool_use_reply

    project = load_project(SUPPORTOPS)
    scenario = project.scenario("END_BILLING_ANSWER<-N3_BILLING")
    answer = respond_reply(
        node_id="END_BILLING_ANSWER",
        decision="BILLING_ANSWER",
        tool_actions=["get_account"],
        evidence="get_account",
        user_message="Plan PLAN-BASIC.",
    )
    delay = [2.0]

    def model(request: Any) -> Any:
        calls = sum(1 for m in request["messages"] if m["role"] == "assistant")
        return (
            tool_use_reply("get_account", {"account_id": "A1"})
            if calls == 0
            else slow_reply(answer, delay[0])
        )

    def run(server: MessagesServer, mode: str) -> Any:
        agent = AnthropicAgent(
            "claude-sonnet-4-6",
            base_url=server.base_url,
            cache=tmp_path / "api.sqlite",
            cache_mode=mode,
            retry_policy=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.01),
            timeout=0.5,
        )

        async def go() -> Any:
            try:
                return await project.arun(
                    scenario, agent.factory, trial=0, agent_name=agent.ref, turn_timeout_s=30.0
                )
            finally:
                await agent.aclose()

        return asyncio.run(go())

    with MessagesServer(handler=model) as server:
        live = run(server, "read-write")
        sent = len(server.requests)
        replay = run(server, "replay-only")
        # one answered, two timed out; the replay sent nothing
        assert len(server.requests) == sent == 3
        delay[0] = 0.0
        again = run(server, "read-write")  # asks again, and keeps the answer
        assert len(server.requests) == sent + 1
        replayed = run(server, "replay-only")
        assert len(server.requests) == sent + 1
    assert (
        live.infrastructure_error is not None
        and live.infrastructure_error.kind == "api_unavailable"
    )
    error = replay.infrastructure_error
    assert error is not None and error.kind == "api_unavailable", replay.all_errors()
    assert (
        "when this call was recorded, the API did not answer it (APITimeoutError" in error.message
    )
    assert again.infrastructure_error is None and replayed.infrastructure_error is None
    assert [c.name for c in replayed.turns[0].tool_calls] == [
        c.name for c in again.turns[0].tool_calls
    ]
