"""Exits that end a node's flow: how a branch that leaves on a tool's output reads the node's
required tools.

Off the happy value, tools listed after the deciding tool are permitted, not required; on it,
every tool stays required. :func:`exit_cut` is the rule; :func:`binding_downgrades` lists where it
applies, for lint. The other readings: :mod:`agentprop._spec.requirements`.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentprop._scenario.world import World, get_path
from agentprop._spec.bindings import Bindings, VariableBinding, node_tools
from agentprop._spec.lint import LintFinding
from agentprop._spec.model import Spec
from agentprop._spec.when import values_equal, variables

# ----------------------------------------------------------------------------- exits


@dataclass(frozen=True)
class ExitCut:
    """The tools up to ``index`` are required; the branch left the happy path on ``variable``."""

    index: int
    variable: str
    tool: str
    value: Any
    happy: Any


def _lookup(table: Mapping[Hashable, Any], value: Any) -> Any:
    for k, v in table.items():
        if values_equal(k, value) or k == value:
            return v
    raise KeyError(value)


def _base_output(spec: Spec, bindings: Bindings, tool: str) -> Any:
    cache = bindings._base_outputs
    if tool not in cache:
        world = World(spec=spec, seed=0, overrides={t: dict(v) for t, v in bindings.world.items()})
        cache[tool] = world.default_output(tool)
    return cache[tool]


def happy_value(spec: Spec, bindings: Bindings, var: VariableBinding) -> Any:
    """The value the bindings' base world gives a field-bound variable (``None``: unknown)."""
    if var.world is None or var.world.field is None:
        return None
    try:
        return get_path(_base_output(spec, bindings, var.world.tool), var.world.field)
    except (KeyError, IndexError, TypeError):
        return None


def off_happy_path(
    spec: Spec, bindings: Bindings, var: VariableBinding, value: Any
) -> tuple[bool, Any]:
    """Whether ``value`` leaves the happy path, and the happy value it is compared with.

    A ``field:`` binding leaves it when the value differs from the base world's; a ``values:``
    binding when its effect injects a failure or sets a field to another value than the base
    world's. An unknown happy value never counts as leaving it.
    """
    if var.world is None:
        return False, None
    if var.world.field is not None:
        happy = happy_value(spec, bindings, var)
        if happy is None:
            return False, None
        return not (values_equal(value, happy) or value == happy), happy
    try:
        effect = _lookup(var.world.values or {}, value)
    except KeyError:
        return False, None
    if effect.failure is not None:
        return True, "no failure"
    base = _base_output(spec, bindings, var.world.tool)
    for field, v in effect.set.items():
        try:
            if get_path(base, field) != v:
                return True, get_path(base, field)
        except (KeyError, IndexError, TypeError):
            return True, None
    return False, None


def exit_cut(
    spec: Spec,
    bindings: Bindings,
    node_id: str,
    branch: int,
    tools: Sequence[str],
    env: Mapping[str, Any],
) -> ExitCut | None:
    """Where branch ``branch`` of ``node_id`` (which ends the conversation) cuts the node's
    required ``tools``: after the last of them whose output the branch reads, when one of the
    values read is off the happy path. ``None``: every tool stays required."""
    clause = spec.nodes_by_id[node_id].branches[branch].clause
    reads: list[tuple[int, str, str]] = []
    leaving: list[tuple[str, str, Any, Any]] = []
    for name in variables(clause):
        var = bindings.variables.get(name)
        if var is None or var.world is None or var.world.tool not in tools:
            continue
        reads.append((list(tools).index(var.world.tool), name, var.world.tool))
        off, happy = off_happy_path(spec, bindings, var, env.get(name))
        if off:
            leaving.append((name, var.world.tool, env.get(name), happy))
    if not reads or not leaving:
        return None
    index = max(i for i, _, _ in reads)
    name, tool, value, happy = leaving[0]
    return ExitCut(index=index, variable=name, tool=tool, value=value, happy=happy)


def _show(value: Any) -> str:
    """A value as the YAML files write it (``false``, ``null``, ``3``, ``failed``)."""
    return json.dumps(value) if isinstance(value, (bool, type(None))) else str(value)


@dataclass(frozen=True)
class Downgrade:
    """A tool a node requires that a path reads as permitted (see :func:`exit_cut`)."""

    node: str
    branch: int
    when: str
    leaf: str
    variable: str
    tool: str
    value: Any
    happy: Any
    tools: list[str]

    def message(self) -> str:
        happy = "no failure" if self.happy == "no failure" else _show(self.happy)
        return (
            f"variable {self.variable} is {self.tool}'s output: {self.node} leaves to {self.leaf} "
            f"on `{self.when}` with {self.variable} = {_show(self.value)}, off the happy path "
            f"(the bindings' world gives {happy}); so {', '.join(self.tools)}, which {self.node} "
            f"requires after {self.tool}, is read as allowed, not required, on that path"
        )

    def fix(self) -> str:
        listed = ", ".join(self.tools)
        return (
            f"if {self.node} must still call {listed} there, route the branch in the spec through "
            f"a node that requires {'it' if len(self.tools) == 1 else 'them'}, or add `nodes: "
            f"{{{self.leaf}: {{must_call_tools_in_order: [{listed}]}}}}` to the bindings (written "
            f"out: nodes: {self.leaf}: must_call_tools_in_order: [{listed}]; every path into "
            f"{self.leaf} then requires it)"
        )


def binding_downgrades(spec: Spec, bindings: Bindings) -> list[Downgrade]:
    """Every (node, branch) where a binding makes a required tool permitted, on the paths the
    bindings realise, in tree order."""
    from agentprop._scenario.solver import solve
    from agentprop._spec.paths import enumerate_paths
    from agentprop.errors import Unsatisfiable

    leaves = set(spec.leaf_ids())
    out: dict[tuple[str, int], Downgrade] = {}
    for path in enumerate_paths(spec):
        try:
            env = solve(spec, bindings, path)
        except Unsatisfiable:
            continue
        for step in path.steps:
            if step.next not in leaves or (step.node, step.branch) in out:
                continue
            tools = node_tools(spec, bindings, step.node)
            cut = exit_cut(spec, bindings, step.node, step.branch, tools, env)
            if cut is None or not tools[cut.index + 1 :]:
                continue
            out[(step.node, step.branch)] = Downgrade(
                node=step.node,
                branch=step.branch,
                when=spec.nodes_by_id[step.node].branches[step.branch].when,
                leaf=step.next,
                variable=cut.variable,
                tool=cut.tool,
                value=cut.value,
                happy=cut.happy,
                tools=list(tools[cut.index + 1 :]),
            )
    order = {n.node_id: i for i, n in enumerate(spec.decision_tree)}
    return sorted(out.values(), key=lambda d: (order.get(d.node, 0), d.branch))


def binding_findings(bindings: Bindings, spec: Spec) -> list[LintFinding]:
    """B002 notes for ``agentprop lint``: each :class:`Downgrade` at its variable's binding line."""
    out: list[LintFinding] = []
    src = bindings._src
    for d in binding_downgrades(spec, bindings):
        loc = src.location(("variables", d.variable), key=True) if src is not None else None
        out.append(
            LintFinding(
                code="B002",
                severity="info",
                message=d.message(),
                file=str(loc.path)
                if loc is not None and loc.path
                else (str(bindings.path) if bindings.path else None),
                line=loc.line if loc is not None else None,
                column=loc.column if loc is not None else None,
                fix=d.fix(),
            )
        )
    return out
