"""Throughput of the model-backed agent, and the framework's own overhead per run.

Usage: ``python benchmarks/throughput.py [--json PATH] [--runs N] [--latency S] [--concurrency C]``

Three measurements, in one process (the API server runs in a subprocess, so client and server do
not share a GIL). Each timed phase starts on a collected heap (``gc.collect()``), so that a full
collection of what an earlier phase left behind cannot land inside a later phase's timing, and
keeps ``--concurrency`` runs in flight with that many workers (see :func:`in_flight`). Besides wall
times the table shows the client's CPU time (its main thread, where the event loop runs): the
client is CPU-bound on a small machine, and other processes on the machine inflate the wall times
but not the CPU times.

1. **Live.** ``--runs`` (1,000) runs of :class:`agentprop.AnthropicAgent` on the SupportOps
   billing scenario (two model calls a run: ``get_account``, then ``respond``) against
   :class:`agentprop.testing.MessagesServer` answering after ``--latency`` (50 ms), with
   ``--concurrency`` (32) runs in flight, recording into a fresh API cache. The baseline is
   the ideal wall time ``runs x calls per run x latency / concurrency``; target <= 1.3x.
2. **Replay.** The same runs again from the cache in ``replay-only`` mode (no HTTP at all);
   target <= 5% of the live time.
3. **Overhead.** A zero-latency Python agent (one tool call, then ``respond``) run through the
   runtime (``Project.arun``: world, conversation, trace) against the same function called
   directly with a bare stand-in context (no agentprop); the difference is agentprop's overhead
   per run.

``--json`` writes ``{"live_over_ideal", "replay_over_live", "overhead_us_per_run", ...}``. Inputs
(scenario, trials, replies, token counts) are fixed, so the table's shape and its counts repeat;
the timings are measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
SCENARIO = "END_BILLING_ANSWER<-N3_BILLING"
MODEL = "claude-haiku-4-5"
CALLS_PER_RUN = 2


# --------------------------------------------------------------------------------------------
# The server (a subprocess)
# --------------------------------------------------------------------------------------------


def serve(latency: float) -> None:
    """Run a MessagesServer that plays a correct billing agent; print its port; stop on EOF."""
    from agentprop.testing import MessagesServer, respond_reply, tool_use_reply

    # The stand-in for the API must answer after ``latency``, not after a garbage collection:
    # it keeps every request it answers (4,000 parsed bodies), and a full collection of those
    # stalls all its threads, which would bill the server's pauses to the client being measured.
    # Reference counting still frees what the server drops.
    gc.disable()

    call = tool_use_reply("get_account", {"account_id": "A1"}, input_tokens=1500, output_tokens=40)
    answer = respond_reply(
        node_id="END_BILLING_ANSWER",
        decision="BILLING_ANSWER",
        tool_actions=["get_account"],
        evidence="get_account: plan PLAN-BASIC",
        user_message="You are on plan PLAN-BASIC; order O-1001 is processing.",
    )
    assert answer.message is not None
    answer_msg = {**answer.message, "usage": {"input_tokens": 1700, "output_tokens": 90}}

    def handler(request: dict[str, Any]) -> Any:
        return call if len(request["messages"]) == 1 else answer_msg

    with MessagesServer(handler=handler, latency=latency) as server:
        print(server.port, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
        print(len(server.requests), flush=True)


class ServerProcess:
    def __init__(self, latency: float) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--latency", str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.base_url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> int:
        """Stop the server; returns how many requests it answered."""
        out, _ = self.proc.communicate("", timeout=30)
        return int(out.strip() or 0)


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


async def in_flight(jobs: int, concurrency: int, job: Any) -> list[Any]:
    """``[await job(0), ..., await job(jobs - 1)]`` with ``concurrency`` jobs in flight: that many
    workers each take the next job as soon as their last one ends. (Not ``gather`` over a
    semaphore: with hundreds of waiters, ``asyncio.Semaphore.acquire`` in Python 3.11 scans them
    all on every call, which would bill the harness's own quadratic cost to what is measured.)"""
    results: list[Any] = [None] * jobs
    todo = iter(range(jobs))

    async def worker() -> None:
        for i in todo:
            results[i] = await job(i)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, jobs))))
    return results


async def run_many(project: Any, factory: Any, runs: int, concurrency: int, first_trial: int = 0) -> list[Any]:
    scenario = project.scenario(SCENARIO)

    async def one(i: int) -> Any:
        return await project.arun(scenario, factory, trial=first_trial + i)

    return await in_flight(runs, concurrency, one)


def _clean_heap() -> None:
    """Collect the garbage of earlier phases before a timed phase starts."""
    gc.collect()


def timed_agent_runs(project: Any, agent: Any, runs: int, concurrency: int) -> tuple[float, list[Any], list[Any], float]:
    """(wall seconds, traces, the conversations' agents, client CPU seconds) of ``runs`` runs."""
    conversations: list[Any] = []

    def factory() -> Any:
        conversation = agent.factory()
        conversations.append(conversation)
        return conversation

    async def go() -> tuple[float, list[Any]]:
        t0 = time.perf_counter()
        try:
            traces = await run_many(project, factory, runs, concurrency)
        finally:
            await agent.aclose()
        return time.perf_counter() - t0, traces

    _clean_heap()
    cpu0 = time.thread_time()
    elapsed, traces = asyncio.run(go())
    return elapsed, traces, conversations, time.thread_time() - cpu0


def request_bodies(agent: Any, project: Any, conversations: list[Any]) -> list[list[dict[str, Any]]]:
    """The request bodies each conversation sent, in order (user turns end each prefix)."""
    spec = project.spec
    tools = agent.tools_for(spec)
    system = agent.system_for(spec, project.bindings.context)
    out = []
    for conversation in conversations:
        prefixes = [conversation.messages[: i + 1] for i, m in enumerate(conversation.messages) if m["role"] == "user"]
        out.append([agent.request(system=system, tools=tools, messages=p) for p in prefixes])
    return out


def sdk_alone(base_url: str, conversations: list[list[dict[str, Any]]], concurrency: int) -> tuple[float, float]:
    """(wall seconds, client CPU seconds) for the official SDK alone to send the same requests,
    a conversation's calls in sequence, ``concurrency`` conversations in flight (no agentprop:
    the floor of the live run)."""
    import anthropic

    async def go() -> float:
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key="benchmark", max_retries=0)

        async def one(i: int) -> None:
            for body in conversations[i]:
                await client.messages.create(**body)

        t0 = time.perf_counter()
        await in_flight(len(conversations), concurrency, one)
        elapsed = time.perf_counter() - t0
        await client.close()
        return elapsed

    _clean_heap()
    cpu0 = time.thread_time()
    elapsed = asyncio.run(go())
    return elapsed, time.thread_time() - cpu0


def check_traces(traces: list[Any], what: str) -> None:
    bad = [t for t in traces if t.errored or t.final_decision != "BILLING_ANSWER"]
    if bad:
        raise SystemExit(f"{what}: {len(bad)} of {len(traces)} runs went wrong, e.g. {bad[0].all_errors()}")


def _trivial_agent_body(ctx: Any) -> None:
    account = ctx.call("get_account", account_id="A1")
    ctx.respond(
        node_id="END_BILLING_ANSWER",
        decision="BILLING_ANSWER",
        tool_actions=["get_account"],
        evidence=f"get_account: plan {account['plan_id']}",
        user_message=f"You are on plan {account['plan_id']}.",
    )


async def trivial_agent(message: str, ctx: Any) -> None:
    """The zero-latency Python agent: one tool call, then respond."""
    _trivial_agent_body(ctx)


class _BareContext:
    """The baseline's stand-in for a context: a dict lookup and a field store."""

    def __init__(self, outputs: dict[str, Any]) -> None:
        self.outputs = outputs
        self.response: dict[str, Any] | None = None

    def call(self, name: str, /, **args: Any) -> Any:
        return self.outputs[name]

    def respond(self, **fields: Any) -> None:
        self.response = fields


def measure_overhead(project: Any, runs: int) -> tuple[float, float]:
    """(agentprop seconds per run, baseline seconds per run), best of three rounds."""
    from agentprop._scenario.build import make_world

    scenario = project.scenario(SCENARIO)
    world = make_world(project.spec, project.bindings, scenario, seed=0)
    outputs = {"get_account": world.call("get_account", {"account_id": "A1"})}

    async def framework() -> float:
        _clean_heap()
        t0 = time.perf_counter()
        for i in range(runs):
            trace = await project.arun(scenario, lambda: trivial_agent, trial=i)
        elapsed = time.perf_counter() - t0
        assert trace.final_decision == "BILLING_ANSWER" and not trace.errored, trace.all_errors()
        return elapsed

    async def baseline() -> float:
        _clean_heap()
        t0 = time.perf_counter()
        for _ in range(runs):
            ctx = _BareContext(outputs)
            await trivial_agent("What plan am I on?", ctx)
        elapsed = time.perf_counter() - t0
        assert ctx.response is not None and ctx.response["decision"] == "BILLING_ANSWER"
        return elapsed

    fw = min(asyncio.run(framework()) for _ in range(3)) / runs
    base = min(asyncio.run(baseline()) for _ in range(3)) / runs
    return fw, base


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def trivial_sync_agent(message: str, ctx: Any) -> None:
    """The same zero-latency agent, sync: the runtime runs its conversation on a worker thread
    (so that a stuck turn could be abandoned at its timeout)."""
    _trivial_agent_body(ctx)


def measure_sync_overhead(project: Any, runs: int) -> tuple[float, float]:
    """(agentprop seconds per run, baseline seconds per run) for the sync agent, best of three
    rounds, the two interleaved."""
    from agentprop._scenario.build import make_world

    scenario = project.scenario(SCENARIO)
    world = make_world(project.spec, project.bindings, scenario, seed=0)
    outputs = {"get_account": world.call("get_account", {"account_id": "A1"})}

    async def framework() -> float:
        _clean_heap()
        t0 = time.perf_counter()
        for i in range(runs):
            trace = await project.arun(scenario, lambda: trivial_sync_agent, trial=i)
        elapsed = time.perf_counter() - t0
        assert trace.final_decision == "BILLING_ANSWER" and not trace.errored, trace.all_errors()
        return elapsed

    def baseline() -> float:
        _clean_heap()
        t0 = time.perf_counter()
        for _ in range(runs):
            ctx = _BareContext(outputs)
            trivial_sync_agent("What plan am I on?", ctx)
        elapsed = time.perf_counter() - t0
        assert ctx.response is not None and ctx.response["decision"] == "BILLING_ANSWER"
        return elapsed

    fw: list[float] = []
    base: list[float] = []
    for _ in range(3):
        fw.append(asyncio.run(framework()))
        base.append(baseline())
    return min(fw) / runs, min(base) / runs


def _model_agent(base_url: str, concurrency: int, cache: Path | bool, mode: str) -> Any:
    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._modelapi.budget import Budget

    return AnthropicAgent.from_files(
        MODEL, SUPPORTOPS / "seed_prompt.txt", SUPPORTOPS / "seed_tool_descriptions.yaml",
        cache_mode=mode, budget=Budget(), base_url=base_url, cache=cache, max_concurrent_requests=concurrency,
    )


def live_sdk_replay_rounds(project: Any, base_url: str, runs: int, concurrency: int, repeats: int, tmp: Path) -> dict[str, Any]:
    """``repeats`` rounds of: ``runs`` live runs recording into a fresh cache, the SDK alone
    sending the same requests, and the runs replayed from that round's cache. The SDK goes
    first in every other round, so that a drift in the machine's load favours neither."""
    out: dict[str, Any] = {k: [] for k in ("live", "sdk", "replay", "live_cpu", "sdk_cpu", "replay_cpu")}
    bodies: list[list[dict[str, Any]]] | None = None
    for r in range(repeats):
        cache = tmp / f"api-cache-{r}.sqlite"

        def live(cache: Path = cache) -> None:
            nonlocal bodies
            agent = _model_agent(base_url, concurrency, cache, "read-write")
            elapsed, traces, conversations, cpu = timed_agent_runs(project, agent, runs, concurrency)
            check_traces(traces, "live")
            out["live"].append(elapsed)
            out["live_cpu"].append(cpu)
            out["live_stats"] = agent.stats()
            out["live_decisions"] = [t.decisions for t in traces]
            if bodies is None:
                bodies = request_bodies(agent, project, conversations)

        def sdk() -> None:
            assert bodies is not None
            elapsed, cpu = sdk_alone(base_url, bodies, concurrency)
            out["sdk"].append(elapsed)
            out["sdk_cpu"].append(cpu)
            out["requests"] = sum(map(len, bodies))

        for step in ((live, sdk) if r % 2 == 0 or bodies is None else (sdk, live)):
            step()
        agent = _model_agent(base_url, concurrency, cache, "replay-only")
        elapsed, traces, _, cpu = timed_agent_runs(project, agent, runs, concurrency)
        check_traces(traces, "replay")
        if [t.decisions for t in traces] != out["live_decisions"]:
            raise SystemExit("the replay differs from the live run")
        out["replay"].append(elapsed)
        out["replay_cpu"].append(cpu)
        out["replay_stats"] = agent.stats()
    return out


def case_concurrency(project: Any, base_url: str, case_runs: int, concurrency: int, repeats: int) -> dict[str, list[float]]:
    """Wall seconds of one fixed-N case of ``case_runs`` model runs (``agentprop run --mode
    fixed --runs N --kinds mft --case SCENARIO``, no cache: every run calls the API) at
    ``--concurrency 1`` and at ``concurrency``, interleaved, ``repeats`` times each."""
    from agentprop._modelapi.budget import Budget
    from agentprop._decide.memo import TrialMemo
    from agentprop._pipeline.run import RunSettings, arun_cases

    scenario = project.scenario(SCENARIO)
    out: dict[str, list[float]] = {"serial": [], "concurrent": []}
    for r in range(repeats):
        for width in ((1, concurrency) if r % 2 == 0 else (concurrency, 1)):
            agent = _model_agent(base_url, concurrency, False, "off")
            settings = RunSettings(mode="fixed", runs=case_runs, kinds=("mft",), concurrency=width, explore=0, case_filter=(SCENARIO,))

            async def go(agent: Any = agent, settings: RunSettings = settings) -> Any:
                try:
                    return await arun_cases(project, agent.loaded(), [scenario], settings, memo=TrialMemo(), budget=Budget())
                finally:
                    await agent.aclose()

            _clean_heap()
            t0 = time.perf_counter()
            report = asyncio.run(go())
            elapsed = time.perf_counter() - t0
            [case] = report.cases
            if case.verdict != "PASS" or case.runs != case_runs or agent.stats()["live_calls"] != case_runs * CALLS_PER_RUN:
                raise SystemExit(f"the fixed-N case at concurrency {width} went wrong: {case.verdict}, {case.runs} runs, {agent.stats()}")
            out["serial" if width == 1 else "concurrent"].append(elapsed)
    return out


def _spread(values: list[float]) -> str:
    return f"min {min(values):.3f} median {statistics.median(values):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_path", help="write the results as JSON to this file")
    parser.add_argument("--runs", type=int, default=1000, help="agent runs against the server (default 1000)")
    parser.add_argument("--latency", type=float, default=0.05, help="server latency per reply, seconds (default 0.05)")
    parser.add_argument("--concurrency", type=int, default=32, help="runs in flight (default 32)")
    parser.add_argument("--overhead-runs", type=int, default=2000, help="runs of the overhead measurement (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds of each measurement (default 3)")
    parser.add_argument("--case-runs", type=int, default=200, help="runs of the fixed-N case (default 200)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency)
        return 0

    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._agents.project import load_project

    project = load_project(SUPPORTOPS)
    server = ServerProcess(args.latency)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            # warm-up: imports, the SDK client, the SQLite file (its own trials, not replayed)
            warm = AnthropicAgent(MODEL, base_url=server.base_url, cache=False)
            asyncio.run(_warm(project, warm))
            rounds = live_sdk_replay_rounds(project, server.base_url, args.runs, args.concurrency, args.repeats, Path(tmp))
            case = case_concurrency(project, server.base_url, args.case_runs, args.concurrency, args.repeats)
        finally:
            served = server.stop()

    fw_s, base_s = measure_overhead(project, args.overhead_runs)
    sync_fw_s, sync_base_s = measure_sync_overhead(project, args.overhead_runs)

    # ratios of the rounds' medians (each round measured its pair back to back)
    live_s, sdk_s, replay_s = (statistics.median(rounds[k]) for k in ("live", "sdk", "replay"))
    live_over_sdk = statistics.median(a / b for a, b in zip(rounds["live"], rounds["sdk"]))
    replay_over_live = statistics.median(a / b for a, b in zip(rounds["replay"], rounds["live"]))
    speedup = statistics.median(a / b for a, b in zip(case["serial"], case["concurrent"]))
    ideal_s = args.runs * CALLS_PER_RUN * args.latency / args.concurrency
    overhead_us = (fw_s - base_s) * 1e6
    sync_overhead_us = (sync_fw_s - sync_base_s) * 1e6
    live_stats, replay_stats = rounds["live_stats"], rounds["replay_stats"]
    rows = [
        (f"the SDK alone: the same {rounds['requests']} requests, no agentprop", f"{sdk_s:8.3f} s", f"baseline ({_spread(rounds['sdk'])}; {sdk_s / ideal_s:.2f}x the ideal {ideal_s:.3f} s); client CPU {statistics.median(rounds['sdk_cpu']):.3f} s"),
        (f"live: {args.runs} runs, {live_stats['live_calls']} API calls", f"{live_s:8.3f} s", f"{live_over_sdk:5.2f}x the SDK alone (target <= 1.15x; {_spread(rounds['live'])}); client CPU {statistics.median(rounds['live_cpu']):.3f} s"),
        (f"replay-only: {args.runs} runs, {replay_stats['cache_hits']} cache hits", f"{replay_s:8.3f} s", f"{replay_over_live:6.1%} of live (target <= 5%; {_spread(rounds['replay'])}); client CPU {statistics.median(rounds['replay_cpu']):.3f} s"),
        (f"fixed-N case of {args.case_runs} model runs, --concurrency 1", f"{statistics.median(case['serial']):8.3f} s", f"baseline ({_spread(case['serial'])})"),
        (f"the same case, --concurrency {args.concurrency}", f"{statistics.median(case['concurrent']):8.3f} s", f"{speedup:5.1f}x faster (target >= 10x; {_spread(case['concurrent'])})"),
        ("direct call of the async Python agent (no agentprop)", f"{base_s * 1e6:8.1f} us", "baseline"),
        ("the same agent through the runtime", f"{fw_s * 1e6:8.1f} us", f"overhead {overhead_us:.1f} us/run"),
        ("direct call of the sync Python agent (no agentprop)", f"{sync_base_s * 1e6:8.1f} us", "baseline"),
        ("the same agent through the runtime (one thread hop a run)", f"{sync_fw_s * 1e6:8.1f} us", f"overhead {sync_overhead_us:.1f} us/run"),
    ]
    print(
        f"throughput: {args.runs} runs of {SCENARIO}, {args.latency * 1000:.0f} ms latency, concurrency {args.concurrency}; "
        f"{args.repeats} interleaved rounds, medians (ratios: median of the rounds' ratios)"
    )
    print(f"{'measurement':<62} {'time':>12}  ratio")
    for name, value, ratio in rows:
        print(f"{name:<62} {value:>12}  {ratio}")
    print(
        f"server answered {served} requests (warm-up included); replay sent {replay_stats['live_calls']}; "
        f"retries {live_stats['retries']['retries']}"
    )
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "live_over_sdk": live_over_sdk,
                    "replay_over_live": replay_over_live,
                    "overhead_us_per_run": overhead_us,
                    "sync_overhead_us_per_run": sync_overhead_us,
                    "case_concurrency_speedup": speedup,
                    "live_s": rounds["live"],
                    "sdk_alone_s": rounds["sdk"],
                    "replay_s": rounds["replay"],
                    "case_serial_s": case["serial"],
                    "case_concurrent_s": case["concurrent"],
                    "live_over_ideal": live_s / ideal_s,
                    "ideal_s": ideal_s,
                    "runtime_us_per_run": fw_s * 1e6,
                    "baseline_us_per_run": base_s * 1e6,
                    "sync_runtime_us_per_run": sync_fw_s * 1e6,
                    "sync_baseline_us_per_run": sync_base_s * 1e6,
                    "runs": args.runs,
                    "case_runs": args.case_runs,
                    "latency_s": args.latency,
                    "concurrency": args.concurrency,
                    "repeats": args.repeats,
                },
                indent=2,
            )
        )
    return 0


async def _warm(project: Any, agent: Any) -> None:
    try:
        await run_many(project, agent.factory, 8, 8, first_trial=10_000_000)
    finally:
        await agent.aclose()


if __name__ == "__main__":
    sys.exit(main())
