"""The memo key of an agent run: everything that decides the run, and nothing that judges it.

The key covers the spec as the agent and runtime see it, the bindings' runtime part, the
scenario's id, world and messages, and the trial seed; it leaves out the decision tree and
what only judges a run. So an expectation or a property can change without a new agent run.
An agent that reads the decision tree through ``ctx.spec`` is outside this contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentprop._agents.loading import source_digest
from agentprop._agents.project import Project
from agentprop._decide.memo import input_key
from agentprop._scenario.build import Scenario, load_object
from agentprop._spec.bindings import Bindings
from agentprop._spec.model import Spec

_JUDGING_ONLY = {"decision_tree", "tests", "risk_level"}
_JUDGING_ONLY_DEFAULTS = ("reliability", "compile_budget")
_JUDGING_ONLY_POLICY = ("enforcement", "test_guidance")


def spec_as_run_sees_it(spec: Spec) -> dict[str, Any]:
    """The spec without the parts that only judge a run (see the module's docstring)."""
    data: dict[str, Any] = spec.model_dump(mode="json", exclude=_JUDGING_ONLY)
    defaults = data.get("defaults")
    if isinstance(defaults, dict):
        for name in _JUDGING_ONLY_DEFAULTS:
            defaults.pop(name, None)
    for policy in data.get("policies") or []:
        if isinstance(policy, dict):
            for name in _JUDGING_ONLY_POLICY:
                policy.pop(name, None)
    return data


def bindings_as_run_sees_them(bindings: Bindings) -> dict[str, Any]:
    """The bindings' context, canary fields and tool handlers (reference and source digest)."""
    handlers = {
        tool: [ref, source_digest(load_object(ref, bindings.base_dir, what=f"handler of {tool}"))]
        for tool, ref in sorted(bindings.handlers.items())
    }
    return {"context": bindings.context, "pii": bindings.pii, "handlers": handlers}


def project_digest(project: Project) -> str:
    """The digest of what a project gives every run (its spec and bindings as the run sees
    them); work it out once for many keys of one project."""
    return input_key(
        {
            "spec": spec_as_run_sees_it(project.spec),
            "bindings": bindings_as_run_sees_them(project.bindings),
        }
    )


def run_digest(
    project: Project,
    scenario: Scenario,
    messages: Sequence[str],
    seed: int,
    *,
    project_key: str | None = None,
) -> str:
    """The input part of the memo key of a run of ``messages`` in ``scenario``'s world
    (``project_key``: :func:`project_digest` of ``project``, if already known)."""
    return input_key(
        {
            "run": 2,
            "project": project_key if project_key is not None else project_digest(project),
            "scenario": scenario.id,
            "world": scenario.world.model_dump(mode="json"),
            "messages": list(messages),
            "seed": seed,
        }
    )
