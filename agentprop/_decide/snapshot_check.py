"""``check_snapshot``: one entry point for behaviour snapshots of a spec's case
and of a plain agent.

It resolves the settings, picks the snapshot of a case (:mod:`agentprop._decide.snapshot`) or of
a plain agent (:mod:`agentprop._decide.plain_snapshot`), and raises on NEW or CHANGED.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentprop._agents.project import Project
from agentprop._decide.plain_snapshot import acheck_plain_snapshot
from agentprop._decide.settings import fold_deprecated, resolve
from agentprop._decide.settings import settings as AgentSettings
from agentprop._decide.snapshot import (
    SnapshotResult,
    SnapshotStore,
    acheck_snapshot,
    default_snapshot_dir,
)
from agentprop._judge.judges import JudgeLike
from agentprop._modelapi.budget import Budget
from agentprop._scenario.build import Scenario
from agentprop._util.aio import run_sync
from agentprop.errors import AgentPropertyViolation, InvalidArgument

__all__ = ["check_snapshot"]


def check_snapshot(
    project: Project | Callable[..., Any],
    scenario: Scenario | str | Sequence[str],
    agent: Any = None,
    *,
    tools: Mapping[str, Callable[..., Any]] | Sequence[Callable[..., Any]] | None = None,
    name: str | None = None,
    directory: str | Path | None = None,
    runs: int = 10,
    alpha: float = 0.05,
    update: bool = False,
    reason: str | None = None,
    allow_ci: bool = False,
    ignore: Sequence[str] = (),
    budget: Budget | None = None,
    seed: int | None = None,
    messages: Sequence[str] | None = None,
    raise_on_failure: bool = True,
    settings: AgentSettings | None = None,
    judges: Sequence[JudgeLike] = (),
) -> SnapshotResult:
    """Compare the agent's behaviour on ``scenario`` with its approved baseline.

    Runs the case ``runs`` times and tests the distribution of behaviours against the
    baseline's (exact two-sample test at ``alpha``). NEW (no baseline) and CHANGED write a
    pending candidate and raise :class:`~agentprop.AgentPropertyViolation` with the diff;
    ``update=True`` with a ``reason`` approves instead (refused when ``CI`` is set unless
    ``allow_ci``). Snapshots live in ``directory`` (default ``__snapshots__`` next to the
    spec) under ``name`` (default: the scenario id). The seed is resolved like
    :func:`agentprop.check`'s (``settings``, the scope, the session's; ``seed=`` is the
    deprecated spelling of ``settings=agentprop.settings(seed=...)``). Each of
    ``judges`` (code or model judges) is recorded per run as part of the behaviour, so a change
    in what they say is a change.

    Without a project, ``check_snapshot(agent, messages, tools=...)`` snapshots a plain agent
    (:mod:`agentprop._decide.plain_snapshot`): the same store, review and approval; the
    snapshot is named after the agent unless ``name`` is given, and kept in ``directory``
    (default ``__snapshots__`` in the current directory).
    """
    __tracebackhide__ = True  # a failure points at the test's line, not at agentprop's source
    settings = fold_deprecated("check_snapshot", settings, seed=seed)
    # what the plain and the spec snapshot take alike
    shared: dict[str, Any] = dict(
        name=name,
        runs=runs,
        alpha=alpha,
        update=update,
        reason=reason,
        allow_ci=allow_ci,
        ignore=ignore,
        budget=budget,
        seed=resolve(settings).seed,
        judges=judges,
    )

    if not isinstance(project, Project):
        if agent is not None or messages is not None:
            raise InvalidArgument(
                "check_snapshot(agent, messages, tools=...) snapshots a plain agent: the third "
                "argument and messages= are for check_snapshot(project, scenario, agent); give "
                "the messages as the second argument"
            )
        result = run_sync(
            acheck_plain_snapshot(
                project,
                scenario
                if isinstance(scenario, str)
                else [str(m) for m in scenario]
                if not isinstance(scenario, Scenario)
                else [],
                tools=tools,
                store=SnapshotStore(directory if directory is not None else "__snapshots__"),
                **shared,
            )
        )
    else:
        sc = (
            project.scenario(scenario)
            if isinstance(scenario, str)
            else scenario
            if isinstance(scenario, Scenario)
            else _not_a_scenario(scenario)
        )
        result = run_sync(
            acheck_snapshot(
                project,
                sc,
                agent,
                store=SnapshotStore(
                    directory if directory is not None else default_snapshot_dir(project)
                ),
                messages=messages,
                **shared,
            )
        )
    if raise_on_failure and not result.passed:
        raise AgentPropertyViolation(result)
    return result


def _not_a_scenario(given: object) -> Scenario:
    raise InvalidArgument(
        "check_snapshot(project, scenario, agent): the second argument is a scenario or its id; "
        "give the messages as messages="
    )
