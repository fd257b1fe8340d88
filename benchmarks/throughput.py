"""Throughput of the model-backed agents (Anthropic and OpenAI), and the framework's own overhead.

Usage: ``python benchmarks/throughput.py [--json PATH] [--runs N] [--latency S] [--concurrency C]
[--providers anthropic,openai]``

Three measurements, in one process (the API server runs in a subprocess, so client and server do
not share a GIL). Each timed phase starts on a collected heap (``gc.collect()``), so that a full
collection of what an earlier phase left behind cannot land inside a later phase's timing, and
keeps ``--concurrency`` runs in flight with that many workers (see :func:`in_flight`). Besides wall
times the table shows the client's CPU time (its main thread, where the event loop runs): the
client is CPU-bound on a small machine, and other processes on the machine inflate the wall times
but not the CPU times.

1. **Live**, per provider, side by side: ``--runs`` (1,000) runs of
   :class:`agentprop.AnthropicAgent` against :class:`agentprop.testing.MessagesServer`, and of
   :class:`agentprop.OpenAIAgent` (Chat Completions) against
   :class:`agentprop.testing.OpenAIServer`, on the SupportOps billing scenario (two model calls
   a run: ``get_account``, then ``respond``), the server answering after ``--latency`` (50 ms),
   ``--concurrency`` (32) runs in flight, recording into a fresh API cache. The baseline is the
   ideal wall time ``runs x calls per run x latency / concurrency``; target <= 1.3x. The
   official SDK alone sending the same requests is the floor.
2. **Replay.** The same runs again from the cache in ``replay-only`` mode (no HTTP at all);
   target <= 5% of the live time.
3. **Overhead.** A zero-latency Python agent (one tool call, then ``respond``) run through the
   runtime (``Project.arun``: world, conversation, trace) against the same function called
   directly with a bare stand-in context (no agentprop); the difference is agentprop's overhead
   per run.

``--json`` writes ``{"live_over_ideal", "replay_over_live", "overhead_us_per_run", ...}`` (the
Anthropic figures, as before) and ``"providers": {"anthropic": {...}, "openai": {...}}`` with
each provider's ``live_over_ideal``, ``replay_over_live``, ``live_over_sdk_alone`` and times. Inputs
(scenario, trials, replies, token counts) are fixed, so the table's shape and its counts repeat;
the timings are measurements.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
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


def serve(latency: float, provider: str) -> None:
    """Run a scripted server (Messages or OpenAI) that plays a correct billing agent; print its
    port; stop on EOF."""
    from agentprop.testing import MessagesServer, OpenAIServer, respond_reply, tool_use_reply

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
        if provider == "openai":  # the first call carries the system and the user message only
            return call if len(request["messages"]) == 2 else answer_msg
        return call if len(request["messages"]) == 1 else answer_msg

    server_type = OpenAIServer if provider == "openai" else MessagesServer
    with server_type(handler=handler, latency=latency) as server:
        print(server.port, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
        print(len(server.requests), flush=True)


class ServerProcess:
    def __init__(self, latency: float, provider: str = "anthropic") -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--latency", str(latency), "--serve-provider", provider],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.base_url = f"http://127.0.0.1:{self.port}" + ("/v1" if provider == "openai" else "")

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
    """The request bodies each conversation sent, in order (a user or tool message ends each
    prefix: the conversation as it was when each call was made)."""
    spec = project.spec
    tools = agent.tools_for(spec)
    system = agent.system_for(spec, project.bindings.context)
    out = []
    for conversation in conversations:
        messages = conversation.messages
        ends = [i + 1 for i, m in enumerate(messages) if m["role"] in ("user", "tool")]
        prefixes = [messages[:end] for end in ends if end == len(messages) or messages[end]["role"] == "assistant"]
        out.append([agent.request(system=system, tools=tools, messages=p) for p in prefixes])
    return out


def sdk_alone(provider: str, base_url: str, conversations: list[list[dict[str, Any]]], concurrency: int) -> tuple[float, float]:
    """(wall seconds, client CPU seconds) for the official SDK alone to send the same requests,
    a conversation's calls in sequence, ``concurrency`` conversations in flight (no agentprop:
    the floor of the live run)."""

    async def go() -> float:
        if provider == "openai":
            import openai

            client: Any = openai.AsyncOpenAI(base_url=base_url, api_key="benchmark", max_retries=0)
            create = client.chat.completions.create
        else:
            import anthropic

            client = anthropic.AsyncAnthropic(base_url=base_url, api_key="benchmark", max_retries=0)
            create = client.messages.create

        async def one(i: int) -> None:
            for body in conversations[i]:
                await create(**body)

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


MODELS = {"anthropic": MODEL, "openai": "gpt-4.1-mini"}


def measure_provider(provider: str, project: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Live, the SDK alone and replay-only for one provider, against its own server process."""
    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._modelapi.budget import Budget
    from agentprop._agents.openai import OpenAIAgent

    agent_type: Any = OpenAIAgent if provider == "openai" else AnthropicAgent
    model = MODELS[provider]
    server = ServerProcess(args.latency, provider)
    with tempfile.TemporaryDirectory() as tmp:
        options: dict[str, Any] = {
            "base_url": server.base_url,
            "cache": Path(tmp) / "api-cache.sqlite",
            "max_concurrent_requests": args.concurrency,
        }
        seeds = (SUPPORTOPS / "seed_prompt.txt", SUPPORTOPS / "seed_tool_descriptions.yaml")
        try:
            # warm-up: imports, the SDK client, the SQLite file (its own trials, not replayed)
            asyncio.run(_warm(project, agent_type(model, base_url=server.base_url, cache=False)))

            live_budget = Budget()
            live_agent = agent_type.from_files(model, *seeds, cache_mode="read-write", budget=live_budget, **options)
            live_s, live_traces, conversations, live_cpu = timed_agent_runs(project, live_agent, args.runs, args.concurrency)
            check_traces(live_traces, f"{provider} live")
            live_stats = live_agent.stats()

            bodies = request_bodies(live_agent, project, conversations)
            sdk_s, sdk_cpu = sdk_alone(provider, server.base_url, bodies, args.concurrency)

            replay_budget = Budget()
            replay_agent = agent_type.from_files(model, *seeds, cache_mode="replay-only", budget=replay_budget, **options)
            replay_s, replay_traces, _, replay_cpu = timed_agent_runs(project, replay_agent, args.runs, args.concurrency)
            check_traces(replay_traces, f"{provider} replay")
            replay_stats = replay_agent.stats()
        finally:
            served = server.stop()
    if [t.decisions for t in replay_traces] != [t.decisions for t in live_traces]:
        raise SystemExit(f"{provider}: the replay differs from the live run")
    ideal_s = args.runs * CALLS_PER_RUN * args.latency / args.concurrency
    return {
        "model": model,
        "live_over_ideal": live_s / ideal_s,
        "replay_over_live": replay_s / live_s,
        "live_over_sdk_alone": live_s / sdk_s,
        "live_s": live_s,
        "ideal_s": ideal_s,
        "sdk_alone_s": sdk_s,
        "replay_s": replay_s,
        "live_cpu_s": live_cpu,
        "sdk_cpu_s": sdk_cpu,
        "replay_cpu_s": replay_cpu,
        "requests": sum(map(len, bodies)),
        "live_calls": live_stats["live_calls"],
        "cache_hits_on_replay": replay_stats["cache_hits"],
        "replay_requests": replay_stats["live_calls"],
        "served": served,
        "live_usd": live_budget.snapshot().usd,
        "replay_saved_usd": replay_budget.snapshot().usd_saved,
        "retries": live_stats["retries"]["retries"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_path", help="write the results as JSON to this file")
    parser.add_argument("--runs", type=int, default=1000, help="agent runs against the server (default 1000)")
    parser.add_argument("--latency", type=float, default=0.05, help="server latency per reply, seconds (default 0.05)")
    parser.add_argument("--concurrency", type=int, default=32, help="runs in flight (default 32)")
    parser.add_argument("--overhead-runs", type=int, default=2000, help="runs of the overhead measurement (default 2000)")
    parser.add_argument("--providers", default="anthropic,openai", help="which model agents to measure (default anthropic,openai)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-provider", default="anthropic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency, args.serve_provider)
        return 0
    providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    unknown = sorted(set(providers) - set(MODELS))
    if unknown or not providers:
        parser.error(f"--providers: unknown {unknown or '(none)'}; use anthropic and/or openai")

    from agentprop._agents.project import load_project

    project = load_project(SUPPORTOPS)
    results = {provider: measure_provider(provider, project, args) for provider in providers}
    fw_s, base_s = measure_overhead(project, args.overhead_runs)
    overhead_us = (fw_s - base_s) * 1e6

    ideal_s = args.runs * CALLS_PER_RUN * args.latency / args.concurrency
    print(f"throughput: {args.runs} runs of {SCENARIO}, {args.latency * 1000:.0f} ms latency, concurrency {args.concurrency}")
    print(f"{'measurement':<66} {'time':>12}  ratio")
    rows = [("live: ideal (runs x calls x latency / concurrency)", f"{ideal_s:8.3f} s", "baseline")]
    for provider, r in results.items():
        api = "Messages API" if provider == "anthropic" else "Chat Completions"
        rows += [
            (f"{provider}: the SDK alone, the same {r['requests']} requests", f"{r['sdk_alone_s']:8.3f} s", f"{r['sdk_alone_s'] / ideal_s:5.2f}x ideal; client CPU {r['sdk_cpu_s']:.3f} s"),
            (f"{provider} live ({api}): {args.runs} runs, {r['live_calls']} API calls", f"{r['live_s']:8.3f} s", f"{r['live_over_ideal']:5.2f}x ideal (target <= 1.30x), {r['live_over_sdk_alone']:4.2f}x the SDK alone; client CPU {r['live_cpu_s']:.3f} s"),
            (f"{provider} replay-only: {args.runs} runs, {r['cache_hits_on_replay']} cache hits", f"{r['replay_s']:8.3f} s", f"{r['replay_over_live']:6.1%} of live (target <= 5%); client CPU {r['replay_cpu_s']:.3f} s"),
        ]
    rows += [
        ("direct call of the Python agent (no agentprop)", f"{base_s * 1e6:8.1f} us", "baseline"),
        ("the same agent through the runtime", f"{fw_s * 1e6:8.1f} us", f"{fw_s / base_s:5.1f}x; overhead {overhead_us:.1f} us/run"),
    ]
    for name, value, ratio in rows:
        print(f"{name:<66} {value:>12}  {ratio}")
    print("side by side:  " + "   ".join(
        f"{p}: live/ideal {r['live_over_ideal']:.2f}x, replay/live {r['replay_over_live']:.1%}" for p, r in results.items()
    ))
    for provider, r in results.items():
        print(
            f"{provider}: server answered {r['served']} requests (warm-up included); replay sent {r['replay_requests']}; "
            f"live cost ${r['live_usd']:.4f}, replay saved ${r['replay_saved_usd']:.4f}; retries {r['retries']}"
        )
    if args.json_path:
        first = results.get("anthropic") or next(iter(results.values()))
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "live_over_ideal": first["live_over_ideal"],
                    "replay_over_live": first["replay_over_live"],
                    "overhead_us_per_run": overhead_us,
                    "live_s": first["live_s"],
                    "ideal_s": ideal_s,
                    "sdk_alone_s": first["sdk_alone_s"],
                    "live_over_sdk_alone": first["live_over_sdk_alone"],
                    "replay_s": first["replay_s"],
                    "runtime_us_per_run": fw_s * 1e6,
                    "baseline_us_per_run": base_s * 1e6,
                    "runs": args.runs,
                    "latency_s": args.latency,
                    "concurrency": args.concurrency,
                    "providers": results,
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
