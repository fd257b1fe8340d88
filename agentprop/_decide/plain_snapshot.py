"""Behaviour snapshots of a plain agent: the spec-free tier's ``check_snapshot``.

The same snapshots and approval rules as a spec's (:mod:`agentprop._decide.snapshot`), for the
case given by the messages and tools, under the spec id ``plain``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentprop._decide.corpus import PLAIN_SPEC_ID
from agentprop._decide.memo import input_key
from agentprop._decide.plain import (
    PlainAgent,
    ToolFunctions,
    agent_ref,
    plain_fingerprint,
    plain_run,
    run_plain_agent,
)
from agentprop._decide.snapshot import (
    Snapshot,
    SnapshotResult,
    SnapshotStore,
    _check_args,
    _check_ignore,
    _check_same_case,
    check_reason,
    decide_snapshot,
    summarise,
)
from agentprop._judge.judges import JudgeLike
from agentprop._modelapi.budget import Budget
from agentprop._scenario.trace import Trace
from agentprop.errors import InvalidArgument

__all__ = ["acheck_plain_snapshot"]


async def acheck_plain_snapshot(
    agent: PlainAgent,
    messages: str | Sequence[str],
    *,
    tools: ToolFunctions | None = None,
    store: SnapshotStore | str | Path,
    name: str | None = None,
    runs: int = 10,
    alpha: float = 0.05,
    update: bool = False,
    reason: str | None = None,
    allow_ci: bool = False,
    ignore: Sequence[str] = (),
    budget: Budget | None = None,
    seed: int = 0,
    judges: Sequence[JudgeLike] = (),
) -> SnapshotResult:
    """Compare the plain agent's behaviour on ``messages`` (with ``tools``) with its approved
    baseline in ``store``, under ``name`` (default: the agent's name). Never raises for a
    NEW or CHANGED snapshot: the result says so (the callers raise)."""
    run = plain_run(agent, tools)
    msgs = [messages] if isinstance(messages, str) else [str(m) for m in messages]
    if not msgs or not all(isinstance(m, str) for m in msgs):
        raise InvalidArgument(
            "check_snapshot(agent, messages, ...): messages must be a string or a "
            "non-empty list of strings"
        )
    _check_args(runs, alpha)
    _check_ignore(ignore)
    if update:
        reason = check_reason(reason, allow_ci=allow_ci)
    store = store if isinstance(store, SnapshotStore) else SnapshotStore(store)
    name = name or run.name
    world = "tools:" + input_key(sorted(run.tools or {}))[:12]
    baseline = store.load(name)
    rerecord = False
    if baseline is not None:  # before any run: a mismatch should not cost runs
        rerecord = _check_same_case(
            baseline, PLAIN_SPEC_ID, msgs, world, list(ignore), str(store.path(name)), update=update
        )
    base = seed * 1_000_003 + 500_000
    traces: list[Trace] = []
    for i in range(runs):
        if budget is not None and not budget.try_start_run():
            break
        traces.append(await run_plain_agent(run, msgs, base + i, seed))
    case = Snapshot(
        name=name,
        spec_id=PLAIN_SPEC_ID,
        scenario_id=run.name,
        messages=msgs,
        world=world,
        ignore=list(ignore),
        runs=0,
        seed=seed,
        agent=agent_ref(run),
        agent_fingerprint=plain_fingerprint(run),
        behaviours=[],
    )
    current, made, infra = summarise(case, traces, judges=judges)
    return decide_snapshot(
        store,
        current,
        baseline,
        made=made,
        runs=runs,
        infra=infra,
        rerecord=rerecord,
        alpha=alpha,
        update=update,
        reason=reason,
        seed=seed,
    )
