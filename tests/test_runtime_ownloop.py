"""A user async agent's own loops: reused from one conversation to the next when clean, never when
anything of a conversation was abandoned on them, and closed when dropped or at exit."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentprop._agents.ownloop import OwnLoops, _OwnLoop
from agentprop._agents.runtime import TurnContext, arun_conversation, run_conversation
from agentprop._scenario.trace import Trace
from agentprop._scenario.world import World
from agentprop._spec.model import Spec

ACCOUNT = {"account_id": "A1"}


def respond(ctx: TurnContext) -> None:
    ctx.respond(
        node_id="N3_BILLING",
        decision="BILLING_ANSWER",
        tool_actions=[c.name for c in ctx.calls_this_turn],
        evidence="from tools",
        user_message="done",
    )


def run(spec: Spec, factory: Callable[[], Any], **kw: Any) -> Trace:
    return run_conversation(spec, factory, ["one"], World(spec=spec, seed=1), **kw)


def kinds(trace: Trace) -> list[str]:
    return [e.kind for e in trace.all_errors()]


def on_thread(threads: list[threading.Thread]) -> Callable[[str, TurnContext], Any]:
    """An async agent that notes the thread its turn runs on."""

    async def agent(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        respond(ctx)

    return agent


def test_a_second_conversation_reuses_the_first_s_loop_thread(supportops_spec: Spec) -> None:
    threads: list[threading.Thread] = []
    agent = on_thread(threads)
    traces = [run(supportops_spec, lambda: agent) for _ in range(3)]
    assert all(not t.errored for t in traces)
    assert len(threads) == 3 and len(set(threads)) == 1
    assert threads[0] is not threading.main_thread() and threads[0].daemon


def test_conversations_in_flight_at_once_each_have_a_loop_then_reuse_them(
    supportops_spec: Spec,
) -> None:
    # all four turns must be in flight at once for the barrier to open: on a shared loop, one
    # turn blocking it would keep the others from arriving
    barrier = threading.Barrier(4, timeout=30)
    threads: list[threading.Thread] = []

    async def agent(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        barrier.wait()
        respond(ctx)

    async def together() -> list[Trace]:
        return list(
            await asyncio.gather(
                *(
                    arun_conversation(
                        supportops_spec, lambda: agent, ["one"], World(spec=supportops_spec)
                    )
                    for _ in range(4)
                )
            )
        )

    traces = asyncio.run(together())
    assert all(not t.errored for t in traces), [kinds(t) for t in traces]
    assert len(set(threads)) == 4
    # from several threads at once, then one after the other: the same loops serve
    later: list[threading.Thread] = []
    again = on_thread(later)
    callers = [
        threading.Thread(target=run, args=(supportops_spec, lambda: again)) for _ in range(3)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    run(supportops_spec, lambda: again)
    assert len(later) == 4 and set(later) <= set(threads)


def test_a_conversation_whose_turn_timed_out_does_not_give_its_loop_back(
    supportops_spec: Spec,
) -> None:
    first: list[threading.Thread] = []
    run(supportops_spec, lambda: on_thread(first))
    timed_out: list[threading.Thread] = []

    async def slow(message: str, ctx: TurnContext) -> None:
        timed_out.append(threading.current_thread())
        await asyncio.sleep(30)

    trace = run(supportops_spec, lambda: slow, turn_timeout_s=0.05)
    assert kinds(trace) == ["timeout"]
    assert timed_out == first  # the clean loop was reused for it
    after: list[threading.Thread] = []
    run(supportops_spec, lambda: on_thread(after))
    assert after and after[0] is not first[0]  # but it was not given back
    first[0].join(30)  # abandoned, it closes itself once its task is cancelled
    assert not first[0].is_alive()


def test_a_loop_blocked_past_the_timeout_is_never_reused(supportops_spec: Spec) -> None:
    first: list[threading.Thread] = []
    run(supportops_spec, lambda: on_thread(first))
    release = threading.Event()
    blocked: list[threading.Thread] = []

    async def blocks(message: str, ctx: TurnContext) -> None:
        blocked.append(threading.current_thread())
        release.wait(100)  # blocks its loop, as time.sleep(100) would

    try:
        trace = run(supportops_spec, lambda: blocks, turn_timeout_s=0.2)
        after: list[threading.Thread] = []
        run(supportops_spec, lambda: on_thread(after))
    finally:
        release.set()
    assert kinds(trace) == ["timeout"]
    assert blocked == first  # the clean loop was reused for it
    assert after and after[0] is not first[0]


def test_a_cancelled_conversation_does_not_give_its_loop_back(supportops_spec: Spec) -> None:
    threads: list[threading.Thread] = []
    run(supportops_spec, lambda: on_thread(threads))

    async def waits(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        await asyncio.sleep(3600)

    async def cancelled() -> bool:
        conversation = asyncio.ensure_future(
            arun_conversation(supportops_spec, lambda: waits, ["one"], World(spec=supportops_spec))
        )
        while len(threads) < 2:  # until the turn is running on its loop
            await asyncio.sleep(0.01)
        conversation.cancel()
        try:
            await conversation
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(cancelled())
    run(supportops_spec, lambda: on_thread(threads))
    assert threads[1] is threads[0]  # reused while clean
    assert threads[2] is not threads[1]  # not once its conversation was cancelled


_LEFT: contextvars.ContextVar[str] = contextvars.ContextVar("left", default="unset")


def test_tasks_left_by_a_conversation_do_not_survive_into_the_next(supportops_spec: Spec) -> None:
    events: list[str] = []
    threads: list[threading.Thread] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            events.append("left task finished")

    class Leaves:
        background: set[asyncio.Task[None]] = set()

        async def turn(self, message: str, ctx: TurnContext) -> None:
            threads.append(threading.current_thread())
            self.background.add(asyncio.create_task(forever()))
            respond(ctx)

    class Looks:
        async def turn(self, message: str, ctx: TurnContext) -> None:
            threads.append(threading.current_thread())
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            events.append(f"next conversation sees {len(others)} other tasks")
            respond(ctx)

    assert not run(supportops_spec, Leaves).errored
    assert not run(supportops_spec, Looks).errored
    assert len(set(threads)) == 1  # the same loop, reused
    assert events == ["left task finished", "next conversation sees 0 other tasks"]


def test_a_left_task_that_will_not_stop_keeps_its_loop_from_reuse(supportops_spec: Spec) -> None:
    stop = threading.Event()
    threads: list[threading.Thread] = []

    async def stubborn() -> None:
        while not stop.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                continue  # refuses to be cancelled

    async def leaves(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        asyncio.get_running_loop().create_task(stubborn())
        respond(ctx)

    try:
        run(supportops_spec, lambda: on_thread(threads))
        assert not run(supportops_spec, lambda: leaves).errored
        run(supportops_spec, lambda: on_thread(threads))
    finally:
        stop.set()
    assert threads[0] is threads[1]  # reused while clean
    assert threads[2] is not threads[1]  # not once the agent left a task that would not stop
    threads[1].join(30)
    assert not threads[1].is_alive()


def test_a_reused_loop_runs_each_turn_in_a_copy_of_its_caller_s_context(
    supportops_spec: Spec,
) -> None:
    seen: list[tuple[str, threading.Thread]] = []

    async def agent(message: str, ctx: TurnContext) -> None:
        seen.append((_LEFT.get(), threading.current_thread()))
        _LEFT.set("set by the agent")  # in its copy: the caller and the next run never see it
        respond(ctx)

    async def main() -> list[str]:
        values = []
        for value in ("first caller", "second caller"):
            _LEFT.set(value)
            await arun_conversation(
                supportops_spec, lambda: agent, ["one"], World(spec=supportops_spec)
            )
            values.append(_LEFT.get())
        return values

    assert asyncio.run(main()) == ["first caller", "second caller"]
    assert [value for value, _ in seen] == ["first caller", "second caller"]
    assert seen[0][1] is seen[1][1]


def test_an_agent_s_sys_exit_fails_its_run_and_the_next_runs_on_a_fresh_loop(
    supportops_spec: Spec,
) -> None:
    threads: list[threading.Thread] = []

    async def exits(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        sys.exit(5)

    run(supportops_spec, lambda: on_thread(threads))
    trace = run(supportops_spec, lambda: exits)
    assert kinds(trace) == ["agent_exception"] and "sys.exit(5)" in trace.all_errors()[0].message
    after = run(supportops_spec, lambda: on_thread(threads))
    assert not after.errored
    assert threads[1] is threads[0]  # reused while clean
    assert threads[2] is not threads[1]  # not once agent code escaped its loop


async def give_back(pool: OwnLoops, *loops: _OwnLoop) -> None:
    for own in loops:
        await pool.give_back(own)


def test_idle_loops_are_bounded_and_closed_when_the_pool_is_dropped() -> None:
    pool = OwnLoops(max_idle=1)
    kept, extra = pool.take("kept"), pool.take("extra")
    assert kept.thread is not extra.thread

    asyncio.run(give_back(pool, kept, extra))
    assert pool.idle() == 1
    extra.thread.join(30)  # no room for it: stopped and closed
    assert not extra.thread.is_alive() and extra.loop.is_closed()
    assert kept.thread.is_alive() and not kept.loop.is_closed()
    del pool
    gc.collect()
    kept.thread.join(30)
    assert not kept.thread.is_alive() and kept.loop.is_closed()


def test_own_loops_are_closed_at_exit_without_a_warning(
    supportops_example_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "runs.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio
            import atexit
            import threading

            def loops_left():  # registered first, so it runs after agentprop's exit hooks
                names = [t.name for t in threading.enumerate()]
                print("threads left:", sum(n.startswith("agentprop-agent-loop") for n in names))

            atexit.register(loops_left)

            from agentprop._agents.runtime import run_conversation
            from agentprop._scenario.world import World
            from agentprop._spec.load import load_spec

            spec = load_spec({str(supportops_example_dir / "spec.yaml")!r})

            async def leaves(message, ctx):
                asyncio.get_running_loop().create_task(asyncio.sleep(3600))
                ctx.respond(node_id="N3_BILLING", decision="BILLING_ANSWER", tool_actions=[],
                            evidence="e", user_message="done")

            for _ in range(3):
                trace = run_conversation(spec, lambda: leaves, ["one"], World(spec=spec))
                assert not trace.errored, trace.all_errors()
            print("ran")
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-X", "dev", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["ran", "threads left: 0"], done.stdout + done.stderr
    for warning in ("unclosed event loop", "Task was destroyed", "Event loop is closed"):
        assert warning not in done.stderr, done.stderr


def test_a_timer_or_setting_left_by_a_conversation_keeps_its_loop_from_reuse(
    supportops_spec: Spec,
) -> None:
    fired: list[str] = []

    async def leaves_a_timer(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        asyncio.get_running_loop().call_later(0.2, fired.append, "timer")
        respond(ctx)

    async def sets_a_handler(message: str, ctx: TurnContext) -> None:
        threads.append(threading.current_thread())
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
        respond(ctx)

    for leaves in (leaves_a_timer, sets_a_handler):
        threads: list[threading.Thread] = []
        run(supportops_spec, lambda: on_thread(threads))
        assert not run(supportops_spec, lambda: leaves).errored  # noqa: B023 (called at once)
        run(supportops_spec, lambda: on_thread(threads))
        assert threads[0] is threads[1]  # reused while clean
        assert threads[2] is not threads[1]  # not once the agent left something on it
    assert fired == []  # the timer never fired in a later run: its loop was closed
