"""Throughput of the model-backed agents (Anthropic and OpenAI), and the framework's own overhead.

Usage: ``python benchmarks/throughput.py [--json PATH] [--runs N] [--rounds R] [--latency S]
[--concurrency C] [--high-concurrency C] [--high-runs N] [--cli-rounds R] [--repeats R]
[--case-runs N] [--overhead-runs N] [--own-cost-runs N] [--tools3-runs N] [--tools3-high-runs N]
[--providers anthropic,openai]``

Eight measurements, in one process (each API server runs in a subprocess of its own, so client
and server do not share a GIL). Each timed phase starts on a collected heap (``gc.collect()``), so
that a full collection of what an earlier phase left behind cannot land inside a later phase's
timing, and keeps ``--concurrency`` runs in flight with that many workers (see :func:`in_flight`);
like the SDK alone, which keeps nothing of its requests, the runs keep nothing but their traces
(their conversations only in the first round, which the SDK alone's requests are read from).
Measurements are repeated in interleaved rounds (``--rounds``, 15, for live / SDK alone / replay;
``--repeats``, 3, for the fixed-N case) and reported as median and min; a ratio is the median of
the rounds' ratios (each round measures its pair back to back). Many short rounds rather than a
few long ones: on a shared machine the speed of the CPU drifts by tens of percent within a
minute, and a ratio taken over seconds, many times, cancels that drift where one taken over
half a minute does not. Besides
wall times the table shows the client's CPU time (its main thread, where the event loop runs):
the client is CPU-bound on a small machine, and other processes on the machine inflate the wall
times but not the CPU times.

1. **Live, the SDK alone, replay**, per provider of ``--providers`` (both by default), side by
   side: :class:`agentprop.agents.AnthropicAgent` against
   :class:`agentprop.testing.MessagesServer`, and
   :class:`agentprop.agents.OpenAIAgent` (Chat Completions) against
   :class:`agentprop.testing.OpenAIServer`. A round of a provider: ``--runs`` (200) runs on the
   SupportOps billing scenario (two model calls a run: ``get_account``, then ``respond``), the
   server answering after ``--latency`` (50 ms), recording into a fresh API cache (**live**); the
   provider's official SDK alone sending the same request bodies, a conversation's calls in
   sequence (**the SDK alone**: the baseline, the floor of the live run; it goes first in every
   other round); the same runs again from that round's cache in ``replay-only`` mode, no HTTP at
   all (**replay**). The providers take turns within a round (the order alternates too). Targets:
   live <= 1.15x the SDK alone, replay <= 5% of live. Live is also shown over the ideal wall time
   ``runs x calls per run x latency / concurrency``, which the SDK itself cannot reach on a
   small machine.
2. **In-case concurrency.** One fixed-N case of ``--case-runs`` (200) model runs, no cache, at
   ``--concurrency 1`` and at ``--concurrency``, interleaved (against the Anthropic server, or the
   first provider's when Anthropic is not measured); target >= 10x faster.
3. **Overhead, async.** A zero-latency async Python agent (one tool call, then ``respond``) run
   ``--overhead-runs`` (2,000) times through the runtime (``Project.arun``: world, conversation,
   trace) against the same function called directly with a bare stand-in context (no
   agentprop); the difference is agentprop's overhead per run (best of three rounds).
4. **Overhead, sync.** The same for a sync agent (its conversation runs on a worker thread).
5. **agentprop's own cost per model call.** ``--own-cost-runs`` (2,000) Anthropic runs with the
   HTTP layer stubbed out (the provider's ``send`` returns the canned reply at once), with a
   read-write API cache and without one, best of three: the client CPU per model call that
   agentprop itself spends (world, runtime, agent loop, tool call, budget, cache), i.e. about
   what live adds over the SDK alone.

6. **The second concurrency.** Measurement 1 again at ``--high-concurrency`` (128), with
   ``--high-runs`` (800) runs a round (the cache files of its own).
7. **``agentprop run`` over the SDK alone**, each a fresh process (interpreter start and imports
   included on both sides), ``--cli-rounds`` (5) interleaved rounds: ``agentprop run`` of the
   billing case in fixed mode with ``--runs`` runs at ``--concurrency``, recording into a fresh
   API cache, against the SDK alone sending the requests of measurement 1 (``--cli-rounds 0``:
   not measured, and the key is ``null``). Both from a bytecode cache, as an installed package
   runs (pip compiles one; ``PYTHONPYCACHEPREFIX`` in the scratch directory, filled by an
   untimed warm-up round): in an environment that sets ``PYTHONDONTWRITEBYTECODE`` a checkout's
   agentprop would otherwise be compiled from source in every process, while the SDK is not.
   Besides the wall times, each process's CPU time (user and system, from the kernel's
   accounting of the waited-for child), which the other processes on a shared machine do not
   inflate: ``cli_cpu_over_sdk`` is the median of the rounds' ratios.

8. **The tools3 workload**: measurements 1, 6 and 7 again on a second workload, three tool
   round trips a run (``get_account`` three times, then ``respond``: four model calls) with tool
   outputs of about 4 KB each (a copy of the example whose world's account is padded),
   ``--tools3-runs`` (100) runs a round at ``--concurrency`` and ``--tools3-high-runs`` (400) at
   ``--high-concurrency`` (``--tools3-runs 0``: not measured, its keys ``null``).

Client CPU per model call over the SDK's is the median of the rounds' ratios of measurement 1's
client CPU times (target <= 1.2x). ``--json`` writes ``live_over_sdk``, ``replay_over_live``,
``live_over_ideal`` and the live, SDK and replay times of Anthropic at the top level (absent when
Anthropic is not measured), ``overhead_us_per_run``, ``sync_overhead_us_per_run``,
``case_concurrency_speedup``, ``own_cpu_ms_per_call`` (with the cache) and
``own_cpu_ms_per_call_no_cache``, and ``live_over_sdk_c128`` (the key names ``--high-concurrency``),
``cli_over_sdk``, ``cli_cpu_over_sdk`` and ``cpu_per_call_over_sdk`` (Anthropic's, at the top
level), the tools3 workload's ``tools3_live_over_sdk_c32``, ``tools3_live_over_sdk_c128``,
``tools3_cli_over_sdk``, ``tools3_cli_cpu_over_sdk``, ``tools3_cpu_per_call_over_sdk`` and
``tools3_cpu_per_call_over_sdk_c128`` (Anthropic's; the numbers name the concurrencies),
``"tools3": {provider: {...}}`` with its figures, and ``"providers": {"anthropic": {...},
"openai": {...}}`` with each provider's ``live_over_sdk``, ``cpu_per_call_over_sdk``,
``cli_over_sdk``, ``cli_cpu_over_sdk``, ``c128`` (measurement 6's figures),
``live_over_ideal``, ``replay_over_live``, the rounds' times and their medians and mins. Inputs
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
CALLS_PER_RUN = 2
WORKLOADS = ("billing", "tools3")
"""``billing``: one tool round trip a run (``get_account``, then ``respond``), the SupportOps
example's world; ``tools3``: three (``get_account`` three times, then ``respond``: the billing
case allows no other tool), each tool output about 4 KB of JSON (a copy of the example whose
world's account is padded with orders)."""
TOOLS3_CALLS = (("get_account", {"account_id": "A1"}),) * 3
TOOLS3_OUTPUT_BYTES = 4096
PROVIDERS = ("anthropic", "openai")
MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4.1-mini"}
APIS = {"anthropic": "Messages API", "openai": "Chat Completions"}


def agent_type(provider: str) -> Any:
    """The model agent class of ``provider``."""
    if provider == "openai":
        from agentprop._agents.openai import OpenAIAgent

        return OpenAIAgent
    from agentprop._agents.anthropic import AnthropicAgent

    return AnthropicAgent


# --------------------------------------------------------------------------------------------
# The server (a subprocess)
# --------------------------------------------------------------------------------------------


def calls_per_run(workload: str) -> int:
    return len(TOOLS3_CALLS) + 1 if workload == "tools3" else CALLS_PER_RUN


def workload_project(workload: str, tmp: Path) -> Path:
    """The project directory of ``workload``: the SupportOps example, or for ``tools3`` a copy
    of it whose world's ``get_account`` output is padded to about :data:`TOOLS3_OUTPUT_BYTES`."""
    if workload != "tools3":
        return SUPPORTOPS
    import shutil

    import yaml

    where = tmp / "supportops-tools3"
    if where.exists():
        return where
    shutil.copytree(
        SUPPORTOPS,
        where,
        ignore=shutil.ignore_patterns("__snapshots__", ".agentprop", "__pycache__"),
    )
    bindings = yaml.safe_load((where / "agentprop.yaml").read_text())
    world = bindings["world"]
    order = dict(world["get_account"]["orders"][0])
    orders = [order]
    while len(json.dumps(world["get_account"] | {"orders": orders})) < TOOLS3_OUTPUT_BYTES:
        orders.append({**order, "order_id": f"O-{2000 + len(orders)}", "status": "delivered"})
    world["get_account"]["orders"] = orders
    (where / "agentprop.yaml").write_text(
        yaml.safe_dump(bindings, allow_unicode=True, sort_keys=False)
    )
    return where


def workload_replies(workload: str) -> list[dict[str, Any]]:
    """The replies of one run of ``workload`` in order, as message JSON: its tool calls, then
    the answer (the k-th reply answers a request with k assistant turns)."""
    call, answer = billing_replies()
    if workload != "tools3":
        return [call, answer]
    from agentprop.testing import tool_use_reply

    calls = [
        tool_use_reply(
            name, args, id=f"toolu_{i}", input_tokens=1500 + 1100 * i, output_tokens=40
        ).message
        for i, (name, args) in enumerate(TOOLS3_CALLS)
    ]
    tools = [name for name, _ in TOOLS3_CALLS]
    answer = {
        **answer,
        "content": [
            {
                **answer["content"][0],
                "input": {**answer["content"][0]["input"], "tool_actions": tools},
            }
        ],
    }
    return [dict(c) for c in calls if c is not None] + [answer]


def serve(latency: float, provider: str, workload: str = "billing") -> None:
    """Run the provider's API server (a MessagesServer or an OpenAIServer) playing a correct
    agent of ``workload``; print its port; stop on EOF."""
    from agentprop.testing import MessagesServer, OpenAIServer

    # The stand-in for the API must answer after ``latency``, not after a garbage collection:
    # it keeps every request it answers (4,000 parsed bodies a round), and a full collection of
    # those stalls all its threads, which would bill the server's pauses to the client being
    # measured. Reference counting still frees what the server drops.
    gc.disable()

    replies = workload_replies(workload)

    def handler(request: dict[str, Any]) -> Any:
        # the k-th call of a run is the one with k assistant turns before it (in
        # either API's messages)
        return replies[
            min(sum(m.get("role") == "assistant" for m in request["messages"]), len(replies) - 1)
        ]

    server_type = OpenAIServer if provider == "openai" else MessagesServer
    with server_type(handler=handler, latency=latency) as server:
        print(server.port, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
        print(len(server.requests), flush=True)


class ServerProcess:
    """The provider's API server in a subprocess (see :func:`serve`)."""

    def __init__(self, latency: float, provider: str, workload: str = "billing") -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        self.provider = provider
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                "--latency",
                str(latency),
                "--serve-provider",
                provider,
                "--serve-workload",
                workload,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        # the openai SDK expects the /v1 prefix in base_url; the anthropic SDK adds it itself
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


async def run_many(
    project: Any, factory: Any, runs: int, concurrency: int, first_trial: int = 0
) -> list[Any]:
    scenario = project.scenario(SCENARIO)

    async def one(i: int) -> Any:
        return await project.arun(scenario, factory, trial=first_trial + i)

    return await in_flight(runs, concurrency, one)


def _clean_heap() -> None:
    """Collect the garbage of earlier phases before a timed phase starts."""
    gc.collect()


def timed_agent_runs(
    project: Any, agent: Any, runs: int, concurrency: int, keep_conversations: bool = False
) -> tuple[float, list[Any], list[Any], float]:
    """(wall seconds, traces, the conversations' agents, client CPU seconds) of ``runs`` runs.
    The conversations are kept only with ``keep_conversations`` (else the list is empty): the
    SDK alone keeps nothing of its requests, and what a phase keeps is what the collector's
    young generation sees grow, so the harness holds on to nothing it does not need."""
    conversations: list[Any] = []

    def factory() -> Any:
        conversation = agent.factory()
        if keep_conversations:
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


def request_bodies(
    agent: Any, project: Any, conversations: list[Any]
) -> list[list[dict[str, Any]]]:
    """The request bodies each conversation sent, in order: the conversation as it was at each
    call, i.e. each prefix that ends in a user or tool message and is followed by the reply (or
    is the whole conversation)."""
    spec = project.spec
    tools = agent.tools_for(spec)
    system = agent.system_for(spec, project.bindings.context)
    out = []
    for conversation in conversations:
        messages = conversation.messages
        ends = [i + 1 for i, m in enumerate(messages) if m["role"] in ("user", "tool")]
        prefixes = [
            messages[:end]
            for end in ends
            if end == len(messages) or messages[end]["role"] == "assistant"
        ]
        out.append([agent.request(system=system, tools=tools, messages=p) for p in prefixes])
    return out


def sdk_alone(
    provider: str, base_url: str, conversations: list[list[dict[str, Any]]], concurrency: int
) -> tuple[float, float]:
    """(wall seconds, client CPU seconds) for the provider's official SDK alone to send the same
    requests, a conversation's calls in sequence, ``concurrency`` conversations in flight (no
    agentprop: the floor of the live run)."""

    async def go() -> float:
        client: Any
        if provider == "openai":
            import openai

            client = openai.AsyncOpenAI(base_url=base_url, api_key="benchmark", max_retries=0)
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
        raise SystemExit(
            f"{what}: {len(bad)} of {len(traces)} runs went wrong, e.g. {bad[0].all_errors()}"
        )


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


def _model_agent(
    provider: str, base_url: str, concurrency: int, cache: Path | bool, mode: str
) -> Any:
    from agentprop._modelapi.budget import Budget

    return agent_type(provider).from_files(
        MODELS[provider],
        SUPPORTOPS / "seed_prompt.txt",
        SUPPORTOPS / "seed_tool_descriptions.yaml",
        cache_mode=mode,
        budget=Budget(),
        base_url=base_url,
        cache=cache,
        max_concurrent_requests=concurrency,
    )


def billing_replies() -> tuple[dict[str, Any], dict[str, Any]]:
    """The two replies of a billing run, as message JSON: the ``get_account`` tool call, then
    the answer (what the servers send, and what the stubbed measurement returns)."""
    from agentprop.testing import respond_reply, tool_use_reply

    call = tool_use_reply(
        "get_account", {"account_id": "A1"}, input_tokens=1500, output_tokens=40
    ).message
    answer = respond_reply(
        node_id="END_BILLING_ANSWER",
        decision="BILLING_ANSWER",
        tool_actions=["get_account"],
        evidence="get_account: plan PLAN-BASIC",
        user_message="You are on plan PLAN-BASIC; order O-1001 is processing.",
    ).message
    assert call is not None and answer is not None
    return dict(call), {**answer, "usage": {"input_tokens": 1700, "output_tokens": 90}}


def canned_replies() -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`billing_replies` as the Anthropic API would send them (model and id filled in)."""
    call, answer = billing_replies()
    model = MODELS["anthropic"]
    return {**call, "model": model, "id": "msg_call"}, {
        **answer,
        "model": model,
        "id": "msg_answer",
    }


def own_cost(project: Any, runs: int, concurrency: int, tmp: Path) -> dict[str, float]:
    """agentprop's own client CPU per model call, in ms, with the HTTP layer stubbed out: the
    Anthropic provider's ``send`` returns the canned reply at once (a fresh copy, as JSON
    decoding would give), so what is left is the world, the runtime, the agent loop, the tool
    call, the budget and the API cache (``cache``: read-write, recording; ``no cache``: off).
    Best of three rounds each. What live over the SDK alone adds is about this per call."""
    from unittest import mock

    from agentprop._modelapi.providers import ANTHROPIC_MESSAGES

    call, answer = canned_replies()
    call_text, answer_text = json.dumps(call), json.dumps(answer)

    async def send(self: Any, client: Any, body: Any, *, stream: bool = False) -> dict[str, Any]:
        await asyncio.sleep(0)
        answered = any(m.get("role") == "assistant" for m in body["messages"])
        return json.loads(answer_text if answered else call_text)

    out: dict[str, float] = {}
    with mock.patch.object(type(ANTHROPIC_MESSAGES), "send", send):
        for label, cache in (("cache", True), ("no cache", False)):
            best = float("inf")
            for r in range(3):
                where: Path | bool = tmp / f"own-cost-{r}.sqlite" if cache else False
                agent = _model_agent(
                    "anthropic", "http://127.0.0.1:9", concurrency, where, "read-write"
                )
                _, traces, _, cpu = timed_agent_runs(project, agent, runs, concurrency)
                check_traces(traces, f"own cost ({label})")
                best = min(best, cpu / (runs * CALLS_PER_RUN) * 1e3)
            out[label] = best
    return out


ROUND_KEYS = ("live", "sdk", "replay", "live_cpu", "sdk_cpu", "replay_cpu")


def live_sdk_replay_round(
    provider: str,
    project: Any,
    base_url: str,
    runs: int,
    concurrency: int,
    sdk_first: bool,
    cache: Path,
    out: dict[str, Any],
) -> None:
    """One round of one provider, appended to ``out``: ``runs`` live runs recording into a fresh
    cache, the SDK alone sending the same requests (first if ``sdk_first`` and the requests are
    known), and the runs replayed from that round's cache."""

    def live() -> None:
        agent = _model_agent(provider, base_url, concurrency, cache, "read-write")
        # the requests are read from the conversations once, the first round's
        elapsed, traces, conversations, cpu = timed_agent_runs(
            project, agent, runs, concurrency, keep_conversations="bodies" not in out
        )
        check_traces(traces, f"{provider} live")
        out["live"].append(elapsed)
        out["live_cpu"].append(cpu)
        out["live_stats"] = agent.stats()
        out["live_decisions"] = [t.decisions for t in traces]
        if "bodies" not in out:
            out["bodies"] = request_bodies(agent, project, conversations)

    def sdk() -> None:
        bodies = out["bodies"]
        elapsed, cpu = sdk_alone(provider, base_url, bodies, concurrency)
        out["sdk"].append(elapsed)
        out["sdk_cpu"].append(cpu)
        out["requests"] = sum(map(len, bodies))

    for step in (sdk, live) if sdk_first and "bodies" in out else (live, sdk):
        step()
    agent = _model_agent(provider, base_url, concurrency, cache, "replay-only")
    elapsed, traces, _, cpu = timed_agent_runs(project, agent, runs, concurrency)
    check_traces(traces, f"{provider} replay")
    if [t.decisions for t in traces] != out["live_decisions"]:
        raise SystemExit(f"{provider}: the replay differs from the live run")
    out["replay"].append(elapsed)
    out["replay_cpu"].append(cpu)
    out["replay_stats"] = agent.stats()


def live_sdk_replay_rounds(
    project: Any,
    servers: dict[str, ServerProcess],
    runs: int,
    concurrency: int,
    repeats: int,
    tmp: Path,
) -> dict[str, dict[str, Any]]:
    """``repeats`` rounds; in each, every provider's live runs, SDK alone and replay
    (:func:`live_sdk_replay_round`). The SDK goes first in every other round, and the providers
    take turns in alternating order, so that a drift in the machine's load favours neither
    side of a ratio nor either provider."""
    out: dict[str, dict[str, Any]] = {p: {k: [] for k in ROUND_KEYS} for p in servers}
    order = list(servers)
    for r in range(repeats):
        for provider in order if r % 2 == 0 else order[::-1]:
            cache = tmp / f"api-cache-{provider}-{r}.sqlite"
            live_sdk_replay_round(
                provider,
                project,
                servers[provider].base_url,
                runs,
                concurrency,
                r % 2 == 1,
                cache,
                out[provider],
            )
    return out


def case_concurrency(
    provider: str, project: Any, base_url: str, case_runs: int, concurrency: int, repeats: int
) -> dict[str, list[float]]:
    """Wall seconds of one fixed-N case of ``case_runs`` model runs (``agentprop run --mode
    fixed --runs N --kinds mft --case SCENARIO``, no cache: every run calls the API) at
    ``--concurrency 1`` and at ``concurrency``, interleaved, ``repeats`` times each."""
    from agentprop._decide.memo import TrialMemo
    from agentprop._modelapi.budget import Budget
    from agentprop._pipeline.run import RunSettings, arun_cases

    scenario = project.scenario(SCENARIO)
    out: dict[str, list[float]] = {"serial": [], "concurrent": []}
    for r in range(repeats):
        for width in (1, concurrency) if r % 2 == 0 else (concurrency, 1):
            agent = _model_agent(provider, base_url, concurrency, False, "off")
            settings = RunSettings(
                mode="fixed",
                runs=case_runs,
                kinds=("mft",),
                concurrency=width,
                explore=0,
                case_filter=(SCENARIO,),
            )

            async def go(agent: Any = agent, settings: RunSettings = settings) -> Any:
                try:
                    return await arun_cases(
                        project,
                        agent.loaded(),
                        [scenario],
                        settings,
                        memo=TrialMemo(),
                        budget=Budget(),
                    )
                finally:
                    await agent.aclose()

            _clean_heap()
            t0 = time.perf_counter()
            report = asyncio.run(go())
            elapsed = time.perf_counter() - t0
            [case] = report.cases
            if (
                case.verdict != "PASS"
                or case.runs != case_runs
                or agent.stats()["live_calls"] != case_runs * CALLS_PER_RUN
            ):
                raise SystemExit(
                    f"the fixed-N case at concurrency {width} went wrong: {case.verdict}, "
                    f"{case.runs} runs, {agent.stats()}"
                )
            out["serial" if width == 1 else "concurrent"].append(elapsed)
    return out


SDK_CHILD = """
import asyncio, json, sys
provider, base_url, bodies_path, concurrency = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, sys.argv[5])
from throughput import in_flight
conversations = json.loads(open(bodies_path).read())
async def go():
    if provider == "openai":
        import openai
        client = openai.AsyncOpenAI(base_url=base_url, api_key="benchmark", max_retries=0)
        create = client.chat.completions.create
    else:
        import anthropic
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key="benchmark", max_retries=0)
        create = client.messages.create
    async def one(i):
        for body in conversations[i]:
            await create(**body)
    await in_flight(len(conversations), concurrency, one)
    await client.close()
asyncio.run(go())
"""  # noqa: E501
"""The SDK alone as a process of its own: interpreter start, the SDK's import and the same
requests as the CLI run sends (the baseline of ``cli_over_sdk``)."""


def _timed_process(command: list[str], env: dict[str, str], what: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process: its user and system time, which other
    processes on the machine do not inflate as they do the wall time."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 3):  # 3: every case passed, the spec has untestable parts
        raise SystemExit(f"{what} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return elapsed, cpu


def cli_rounds(
    provider: str,
    base_url: str,
    bodies: list[list[dict[str, Any]]],
    concurrency: int,
    rounds: int,
    tmp: Path,
    project_dir: Path = SUPPORTOPS,
) -> dict[str, list[float]]:
    """Wall seconds (``cli``, ``sdk``) and CPU seconds (``cli_cpu``, ``sdk_cpu``) of
    ``agentprop run`` (a fixed-N case of as many runs as ``bodies`` has conversations,
    recording into a fresh API cache) and of the SDK alone sending the same requests, each a
    fresh process, interleaved ``rounds`` times (the SDK first in every other round), after an
    untimed warm-up round that fills the bytecode cache both use."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    # both sides from a bytecode cache, as an installed package runs (see the docstring)
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    env["ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"] = "benchmark"
    bodies_path = tmp / f"bodies-{provider}-{project_dir.name}.json"
    bodies_path.write_text(json.dumps(bodies))
    out: dict[str, list[float]] = {"cli": [], "sdk": [], "cli_cpu": [], "sdk_cpu": []}
    for r in range(-1, rounds) if rounds else ():  # round -1: the warm-up, not timed
        cache = tmp / f"cli-cache-{provider}-{project_dir.name}-{r}.sqlite"
        cli = [
            sys.executable, "-m", "agentprop", "run", str(project_dir),
            "--agent", provider, "--model", MODELS[provider], "--base-url", base_url,
            "--cache", str(cache), "--kinds", "mft", "--mode", "fixed", "--runs", str(len(bodies)),
            "--case", SCENARIO, "--concurrency", str(concurrency), "--shrink-budget", "0",
            "--corpus", "none", "--explore", "0",
        ]  # fmt: skip
        sdk = [
            sys.executable,
            "-c",
            SDK_CHILD,
            provider,
            base_url,
            str(bodies_path),
            str(concurrency),
            str(Path(__file__).parent),
        ]
        steps = [("cli", cli, "agentprop run"), ("sdk", sdk, "the SDK alone")]
        for key, command, what in steps if r % 2 == 0 else steps[::-1]:
            _clean_heap()
            elapsed, cpu = _timed_process(command, env, what)
            if r >= 0:
                out[key].append(elapsed)
                out[f"{key}_cpu"].append(cpu)
    return out


def _cli_figures(r: dict[str, Any], c: dict[str, list[float]]) -> None:
    """``agentprop run``'s figures of :func:`cli_rounds` into a provider's results: the wall and
    CPU ratios over the SDK alone (``None`` when not measured) and the rounds' times."""
    r["cli_over_sdk"] = _ratio(c["cli"], c["sdk"]) if c["cli"] else None
    r["cli_cpu_over_sdk"] = _ratio(c["cli_cpu"], c["sdk_cpu"]) if c["cli"] else None
    r["cli_s"], r["cli_sdk_alone_s"] = c["cli"], c["sdk"]
    r["cli_cpu_s"], r["cli_sdk_alone_cpu_s"] = c["cli_cpu"], c["sdk_cpu"]


def _cli_text(r: dict[str, Any]) -> str:
    """``agentprop run`` over the SDK alone, wall and CPU, as a sentence."""
    if r["cli_over_sdk"] is None:
        return "agentprop run not measured (--cli-rounds 0)"
    return (
        f"agentprop run over the SDK alone {r['cli_over_sdk']:.2f}x ({_spread(r['cli_s'])} s "
        f"against {_spread(r['cli_sdk_alone_s'])} s; target <= 1.15x), its CPU time "
        f"{r['cli_cpu_over_sdk']:.2f}x the SDK's ({_spread(r['cli_cpu_s'])} s against "
        f"{_spread(r['cli_sdk_alone_cpu_s'])} s)"
    )


def _spread(values: list[float]) -> str:
    return f"min {min(values):.3f} median {statistics.median(values):.3f}"


def _ratio(numerators: list[float], denominators: list[float]) -> float:
    """The median of the rounds' ratios."""
    return statistics.median(a / b for a, b in zip(numerators, denominators, strict=True))


def provider_results(
    provider: str, rounds: dict[str, Any], ideal_s: float, served: int
) -> dict[str, Any]:
    """One provider's figures (what ``--json`` writes under ``providers``)."""
    live, sdk, replay = rounds["live"], rounds["sdk"], rounds["replay"]
    live_stats, replay_stats = rounds["live_stats"], rounds["replay_stats"]
    out: dict[str, Any] = {
        "model": MODELS[provider],
        "api": APIS[provider],
        "live_over_sdk": _ratio(live, sdk),
        "live_over_ideal": statistics.median(live) / ideal_s,
        "sdk_over_ideal": statistics.median(sdk) / ideal_s,
        "replay_over_live": _ratio(replay, live),
    }
    for key, values in (("live", live), ("sdk_alone", sdk), ("replay", replay)):
        out[f"{key}_median_s"] = statistics.median(values)
        out[f"{key}_min_s"] = min(values)
    out.update(
        {
            "live_s": live,
            "sdk_alone_s": sdk,
            "replay_s": replay,
            "live_cpu_s": rounds["live_cpu"],
            "sdk_cpu_s": rounds["sdk_cpu"],
            "replay_cpu_s": rounds["replay_cpu"],
            "requests": rounds["requests"],
            "live_calls": live_stats["live_calls"],
            "replay_cache_hits": replay_stats["cache_hits"],
            "replay_live_calls": replay_stats["live_calls"],
            "retries": live_stats["retries"]["retries"],
            "served": served,
        }
    )
    return out


def print_side_by_side(results: dict[str, dict[str, Any]], ideal_s: float) -> None:
    """The providers' live, SDK-alone and replay figures, one column per provider."""

    def cpu(r: dict[str, Any], key: str, calls: int) -> str:
        seconds = statistics.median(r[key])
        return f"{seconds:.3f} s, {seconds / calls * 1e3:.2f} ms/call"

    def wall(r: dict[str, Any], key: str) -> str:
        return f"{r[key + '_median_s']:.3f} s (min {r[key + '_min_s']:.3f})"

    rows: list[tuple[str, Any]] = [
        ("ideal: runs x calls per run x latency / concurrency", lambda r: f"{ideal_s:.3f} s"),
        ("the SDK alone, the same requests (the baseline)", lambda r: wall(r, "sdk_alone")),
        ("  over the ideal", lambda r: f"{r['sdk_over_ideal']:.2f}x"),
        (
            "  requests; client CPU",
            lambda r: f"{r['requests']}; {cpu(r, 'sdk_cpu_s', r['requests'])}",
        ),
        ("live: the runs through agentprop", lambda r: wall(r, "live")),
        ("  over the SDK alone (target <= 1.15x)", lambda r: f"{r['live_over_sdk']:.2f}x"),
        ("  over the ideal", lambda r: f"{r['live_over_ideal']:.2f}x"),
        (
            "  API calls; client CPU",
            lambda r: f"{r['live_calls']}; {cpu(r, 'live_cpu_s', r['live_calls'])}",
        ),
        ("replay-only: the same runs from the cache", lambda r: wall(r, "replay")),
        ("  of live (target <= 5%)", lambda r: f"{r['replay_over_live']:.1%}"),
        (
            "  cache hits; client CPU",
            lambda r: f"{r['replay_cache_hits']}; {cpu(r, 'replay_cpu_s', r['replay_cache_hits'])}",
        ),
        ("server: requests answered (warm-up included)", lambda r: str(r["served"])),
        (
            "requests the replay sent; retries of live calls",
            lambda r: f"{r['replay_live_calls']}; {r['retries']}",
        ),
    ]
    width = 30
    print(
        f"{'side by side (wall: median of the rounds, min)':<52}"
        + "".join(f"{f'{p} ({APIS[p]})':>{width}}" for p in results)
    )
    for name, cell in rows:
        print(f"{name:<52}" + "".join(f"{cell(r):>{width}}" for r in results.values()))


def measure_tools3(
    args: argparse.Namespace, providers: list[str], tmp: Path
) -> dict[str, dict[str, Any]]:
    """The tools3 workload (three tool round trips a run, 4 KB tool outputs): measurement 1 at
    ``--concurrency`` and ``--high-concurrency`` and measurement 7, per provider; each
    provider's figures as :func:`provider_results` gives them, with ``cpu_per_call_over_sdk``,
    ``cli_over_sdk`` and the high concurrency's figures under ``c<N>``."""
    from agentprop._agents.project import load_project

    project_dir = workload_project("tools3", tmp)
    project = load_project(project_dir)
    calls = calls_per_run("tools3")
    servers: dict[str, ServerProcess] = {}
    served: dict[str, int] = {}
    work = tmp / "tools3"
    work.mkdir(exist_ok=True)
    try:
        for provider in providers:
            servers[provider] = ServerProcess(args.latency, provider, "tools3")
            warm = agent_type(provider)(
                MODELS[provider], base_url=servers[provider].base_url, cache=False
            )
            asyncio.run(_warm(project, warm))
        low = live_sdk_replay_rounds(
            project, servers, args.tools3_runs, args.concurrency, args.rounds, work
        )
        high_dir = work / f"c{args.high_concurrency}"
        high_dir.mkdir()
        high = live_sdk_replay_rounds(
            project, servers, args.tools3_high_runs, args.high_concurrency, args.rounds, high_dir
        )
        cli = {
            p: cli_rounds(
                p,
                servers[p].base_url,
                low[p]["bodies"],
                args.concurrency,
                args.cli_rounds,
                work,
                project_dir,
            )
            for p in providers
        }
    finally:
        for provider, server in servers.items():
            served[provider] = server.stop()
    out: dict[str, dict[str, Any]] = {}
    for p in providers:
        r = provider_results(
            p, low[p], args.tools3_runs * calls * args.latency / args.concurrency, served[p]
        )
        h = provider_results(
            p,
            high[p],
            args.tools3_high_runs * calls * args.latency / args.high_concurrency,
            served[p],
        )
        for figures, rounds in ((r, low[p]), (h, high[p])):
            figures["cpu_per_call_over_sdk"] = (
                _ratio(rounds["live_cpu"], rounds["sdk_cpu"])
                * figures["requests"]
                / figures["live_calls"]
            )
        _cli_figures(r, cli[p])
        r[f"c{args.high_concurrency}"] = h
        out[p] = r
    return out


def print_tools3(args: argparse.Namespace, tools3: dict[str, dict[str, Any]]) -> None:
    calls = calls_per_run("tools3")
    rounds = f"{args.rounds} interleaved round{'s' if args.rounds != 1 else ''}"
    print(
        f"tools3 (three tool round trips a run, {TOOLS3_OUTPUT_BYTES // 1024} KB tool outputs, "
        f"{calls} model calls a run): {args.tools3_runs} runs, concurrency "
        f"{args.concurrency}; {rounds}"
    )
    print_side_by_side(tools3, args.tools3_runs * calls * args.latency / args.concurrency)
    high = {p: r[f"c{args.high_concurrency}"] for p, r in tools3.items()}
    print(
        f"tools3 at concurrency {args.high_concurrency}: {args.tools3_high_runs} "
        f"runs a round, {rounds}"
    )
    print_side_by_side(high, args.tools3_high_runs * calls * args.latency / args.high_concurrency)
    for p, r in tools3.items():
        print(
            f"  {p} tools3: library over the SDK alone {r['live_over_sdk']:.2f}x at concurrency "
            f"{args.concurrency}, {high[p]['live_over_sdk']:.2f}x at {args.high_concurrency} "
            f"(target <= 1.10x); {_cli_text(r)}; client CPU per model call over the "
            f"SDK's {r['cpu_per_call_over_sdk']:.2f}x, "
            f"{high[p]['cpu_per_call_over_sdk']:.2f}x (target <= 1.2x)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_path", help="write the results as JSON to this file")
    parser.add_argument(
        "--runs",
        type=int,
        default=200,
        help="agent runs against the server per round (default 200)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=15,
        help="interleaved rounds of live, SDK alone and replay (default 15)",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.05,
        help="server latency per reply, seconds (default 0.05)",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="runs in flight (default 32)")
    parser.add_argument(
        "--high-concurrency",
        type=int,
        default=128,
        help="the second concurrency measured, live / SDK alone / replay (default 128)",
    )
    parser.add_argument(
        "--high-runs",
        type=int,
        default=800,
        help="agent runs per round at --high-concurrency (default 800)",
    )
    parser.add_argument(
        "--cli-rounds",
        type=int,
        default=5,
        help="interleaved rounds of agentprop run and the SDK alone, each a "
        "fresh process (default 5)",
    )
    parser.add_argument(
        "--overhead-runs",
        type=int,
        default=2000,
        help="runs of the overhead measurement (default 2000)",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="interleaved rounds of the fixed-N case (default 3)"
    )
    parser.add_argument(
        "--case-runs", type=int, default=200, help="runs of the fixed-N case (default 200)"
    )
    parser.add_argument(
        "--own-cost-runs",
        type=int,
        default=2000,
        help="runs of the stubbed-HTTP measurement of agentprop's own cost (default 2000)",
    )
    parser.add_argument(
        "--tools3-runs",
        type=int,
        default=100,
        help="agent runs per round of the tools3 workload at --concurrency (default "
        "100; 0: not measured)",
    )
    parser.add_argument(
        "--tools3-high-runs",
        type=int,
        default=400,
        help="agent runs per round of the tools3 workload at --high-concurrency (default 400)",
    )
    parser.add_argument(
        "--providers",
        default=",".join(PROVIDERS),
        help="the model agents to measure, side by side (default anthropic,openai)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--serve-provider", choices=PROVIDERS, default="anthropic", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--serve-workload", choices=WORKLOADS, default="billing", help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency, args.serve_provider, args.serve_workload)
        return 0
    if args.cli_rounds < 0:
        parser.error(f"--cli-rounds {args.cli_rounds}: give 0 (not measured) or more")
    for name in ("runs", "rounds", "repeats", "high_runs", "high_concurrency"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: give at least 1")
    if args.latency <= 0:
        parser.error(
            f"--latency {args.latency}: give a positive number of seconds (the ideal wall time, "
            "live's reference, is proportional to it)"
        )
    providers = list(dict.fromkeys(p.strip() for p in args.providers.split(",") if p.strip()))
    unknown = [p for p in providers if p not in PROVIDERS]
    if unknown or not providers:
        parser.error(
            f"--providers {args.providers!r}: "
            f"{'unknown ' + ', '.join(unknown) if unknown else 'none given'}; give anthropic, "
            "openai or both, comma-separated"
        )
    case_provider = "anthropic" if "anthropic" in providers else providers[0]

    from agentprop._agents.project import load_project

    project = load_project(SUPPORTOPS)
    servers: dict[str, ServerProcess] = {}
    served: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for provider in providers:
                servers[provider] = ServerProcess(args.latency, provider)
                # warm-up: imports, the SDK client, the SQLite file (its own trials, not replayed)
                warm = agent_type(provider)(
                    MODELS[provider], base_url=servers[provider].base_url, cache=False
                )
                asyncio.run(_warm(project, warm))
            rounds = live_sdk_replay_rounds(
                project, servers, args.runs, args.concurrency, args.rounds, Path(tmp)
            )
            high_dir = Path(tmp) / f"c{args.high_concurrency}"
            high_dir.mkdir()
            high = live_sdk_replay_rounds(
                project, servers, args.high_runs, args.high_concurrency, args.rounds, high_dir
            )
            cli = {
                p: cli_rounds(
                    p,
                    servers[p].base_url,
                    rounds[p]["bodies"],
                    args.concurrency,
                    args.cli_rounds,
                    Path(tmp),
                )
                for p in providers
            }
            case = case_concurrency(
                case_provider,
                project,
                servers[case_provider].base_url,
                args.case_runs,
                args.concurrency,
                args.repeats,
            )
            own = own_cost(project, args.own_cost_runs, args.concurrency, Path(tmp))
        finally:
            for provider, server in servers.items():
                served[provider] = server.stop()
        tools3 = measure_tools3(args, providers, Path(tmp)) if args.tools3_runs > 0 else None

    fw_s, base_s = measure_overhead(project, args.overhead_runs)
    sync_fw_s, sync_base_s = measure_sync_overhead(project, args.overhead_runs)

    ideal_s = args.runs * CALLS_PER_RUN * args.latency / args.concurrency
    results = {p: provider_results(p, rounds[p], ideal_s, served[p]) for p in providers}
    high_ideal_s = args.high_runs * CALLS_PER_RUN * args.latency / args.high_concurrency
    high_results = {p: provider_results(p, high[p], high_ideal_s, served[p]) for p in providers}
    for p in providers:
        r, c = results[p], cli[p]
        r["cpu_per_call_over_sdk"] = (
            _ratio(rounds[p]["live_cpu"], rounds[p]["sdk_cpu"]) * r["requests"] / r["live_calls"]
        )
        _cli_figures(r, c)
        h = high_results[p]
        h["cpu_per_call_over_sdk"] = (
            _ratio(high[p]["live_cpu"], high[p]["sdk_cpu"]) * h["requests"] / h["live_calls"]
        )
        r[f"c{args.high_concurrency}"] = h
    speedup = _ratio(case["serial"], case["concurrent"])
    overhead_us = (fw_s - base_s) * 1e6
    sync_overhead_us = (sync_fw_s - sync_base_s) * 1e6

    print(
        f"throughput: {args.runs} runs of {SCENARIO}, {args.latency * 1000:.0f} ms latency, "
        f"concurrency {args.concurrency}; {args.rounds} interleaved "
        f"round{'s' if args.rounds != 1 else ''}, medians (ratios: median of the rounds' ratios)"
    )
    print_side_by_side(results, ideal_s)
    print(
        f"the same at concurrency {args.high_concurrency}: {args.high_runs} runs a round, "
        f"{args.rounds} interleaved round{'s' if args.rounds != 1 else ''}"
    )
    print_side_by_side(high_results, high_ideal_s)
    print(
        f"agentprop run (a fresh process: a fixed-N case of {args.runs} runs, concurrency "
        f"{args.concurrency}) against the SDK alone in a fresh process sending the same requests, "
        f"{args.cli_rounds} interleaved round{'s' if args.cli_rounds != 1 else ''}"
    )
    for p in providers:
        r = results[p]
        print(
            f"  {p}: {_cli_text(r)}"
            if r["cli_over_sdk"] is not None
            else f"  {p}: not measured (--cli-rounds 0); cli_over_sdk is null"
        )
    for p in providers:
        r, h = results[p], high_results[p]
        print(
            f"  {p}: client CPU per model call over the SDK's: {r['cpu_per_call_over_sdk']:.2f}x "
            f"at concurrency {args.concurrency}, {h['cpu_per_call_over_sdk']:.2f}x at "
            f"{args.high_concurrency} (target <= 1.2x)"
        )
    rows = [
        (
            f"fixed-N case of {args.case_runs} model runs ({case_provider}), --concurrency 1",
            f"{statistics.median(case['serial']):8.3f} s",
            f"baseline ({_spread(case['serial'])})",
        ),
        (
            f"the same case, --concurrency {args.concurrency}",
            f"{statistics.median(case['concurrent']):8.3f} s",
            f"{speedup:5.1f}x faster (target >= 10x; {_spread(case['concurrent'])})",
        ),
        (
            "direct call of the async Python agent (no agentprop)",
            f"{base_s * 1e6:8.1f} us",
            "baseline",
        ),
        (
            "the same agent through the runtime",
            f"{fw_s * 1e6:8.1f} us",
            f"overhead {overhead_us:.1f} us/run",
        ),
        (
            "direct call of the sync Python agent (no agentprop)",
            f"{sync_base_s * 1e6:8.1f} us",
            "baseline",
        ),
        (
            "the same agent through the runtime (one thread hop a run)",
            f"{sync_fw_s * 1e6:8.1f} us",
            f"overhead {sync_overhead_us:.1f} us/run",
        ),
    ]
    rows += [
        (
            "agentprop's own CPU per model call, HTTP stubbed, with the cache",
            f"{own['cache']:8.3f} ms",
            "what live adds over the SDK alone, about (best of 3)",
        ),
        ("the same without the cache", f"{own['no cache']:8.3f} ms", "(best of 3)"),
    ]
    if tools3 is not None:
        print_tools3(args, tools3)
    else:
        print("tools3 not measured (--tools3-runs 0): its keys are null")
    print(f"{'measurement':<62} {'time':>12}  ratio")
    for name, value, ratio in rows:
        print(f"{name:<62} {value:>12}  {ratio}")
    if "anthropic" not in results:
        print(
            "anthropic not measured: the JSON's top-level live, SDK-alone and replay keys "
            "(Anthropic's) are left out"
        )
    if args.json_path:
        top: dict[str, Any] = {}
        if "anthropic" in results:  # the top-level figures are Anthropic's, as before the providers
            a = results["anthropic"]
            top = {
                "live_over_sdk": a["live_over_sdk"],
                f"live_over_sdk_c{args.high_concurrency}": a[f"c{args.high_concurrency}"][
                    "live_over_sdk"
                ],
                "cli_over_sdk": a["cli_over_sdk"],
                "cli_cpu_over_sdk": a["cli_cpu_over_sdk"],
                "cpu_per_call_over_sdk": a["cpu_per_call_over_sdk"],
                "replay_over_live": a["replay_over_live"],
                "live_over_ideal": a["live_over_ideal"],
                "live_s": a["live_s"],
                "sdk_alone_s": a["sdk_alone_s"],
                "replay_s": a["replay_s"],
            }
            t3 = tools3["anthropic"] if tools3 is not None else None
            top.update(
                {
                    f"tools3_live_over_sdk_c{args.concurrency}": t3 and t3["live_over_sdk"],
                    f"tools3_live_over_sdk_c{args.high_concurrency}": t3
                    and t3[f"c{args.high_concurrency}"]["live_over_sdk"],
                    "tools3_cli_over_sdk": t3 and t3["cli_over_sdk"],
                    "tools3_cli_cpu_over_sdk": t3 and t3["cli_cpu_over_sdk"],
                    "tools3_cpu_per_call_over_sdk": t3 and t3["cpu_per_call_over_sdk"],
                    f"tools3_cpu_per_call_over_sdk_c{args.high_concurrency}": t3
                    and t3[f"c{args.high_concurrency}"]["cpu_per_call_over_sdk"],
                }
            )
        Path(args.json_path).write_text(
            json.dumps(
                {
                    **top,
                    "overhead_us_per_run": overhead_us,
                    "sync_overhead_us_per_run": sync_overhead_us,
                    "case_concurrency_speedup": speedup,
                    "own_cpu_ms_per_call": own["cache"],
                    "own_cpu_ms_per_call_no_cache": own["no cache"],
                    "case_provider": case_provider,
                    "case_serial_s": case["serial"],
                    "case_concurrent_s": case["concurrent"],
                    "ideal_s": ideal_s,
                    "runtime_us_per_run": fw_s * 1e6,
                    "baseline_us_per_run": base_s * 1e6,
                    "sync_runtime_us_per_run": sync_fw_s * 1e6,
                    "sync_baseline_us_per_run": sync_base_s * 1e6,
                    "providers": results,
                    "tools3": tools3,
                    "runs": args.runs,
                    "case_runs": args.case_runs,
                    "latency_s": args.latency,
                    "concurrency": args.concurrency,
                    "rounds": args.rounds,
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
