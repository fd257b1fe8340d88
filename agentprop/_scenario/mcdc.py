"""Condition coverage like avionics code: MC/DC for ``and`` / ``or`` branch conditions.

:func:`mcdc_scenarios` adds the scenarios that show each atom of a condition changing the
outcome on its own, unless an equal scenario exists. An atom no case can show is named with the
reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agentprop._scenario.build import Scenario, build_scenario
from agentprop._scenario.solver import Solver
from agentprop._spec.bindings import Bindings
from agentprop._spec.model import Spec
from agentprop._spec.paths import Constraint, TreePath, enumerate_paths
from agentprop._spec.when import And, Or
from agentprop.errors import BindingsError, Unsatisfiable

MAX_TRIES = 12
"""Paths tried per atom before the atom is reported as not shown."""


@dataclass(frozen=True)
class Atom:
    """Atom ``index`` (1-based) of branch ``branch`` of ``node``: ``id`` is ``N1_TRIAGE#0.2``."""

    node: str
    branch: int
    index: int
    text: str
    op: str

    @property
    def id(self) -> str:
        return f"{self.node}#{self.branch}.{self.index}"


def condition_atoms(spec: Spec) -> list[Atom]:
    """The atoms of every top-level ``and`` / ``or`` branch condition, in tree order."""
    out = []
    for node in spec.decision_tree:
        for k, branch in enumerate(node.branches):
            expr = branch.clause.expr
            if isinstance(expr, (And, Or)):
                op = "and" if isinstance(expr, And) else "or"
                out += [
                    Atom(node.node_id, k, i + 1, str(item), op) for i, item in enumerate(expr.items)
                ]
    return out


def _key(sc: Scenario) -> str:
    return json.dumps([sc.messages, sc.world.model_dump(mode="json")], sort_keys=True, default=str)


def mcdc_scenarios(
    spec: Spec, bindings: Bindings, existing: list[Scenario]
) -> tuple[list[Scenario], dict[str, str]]:
    """The scenarios that show each atom on its own (ids ``PATH/MCDC N#k.i``), and per atom id
    that no case can show, the reason. An atom shown by an existing scenario (the same
    conversation and world as the one built) adds none."""
    seen = {_key(sc) for sc in existing}
    solver = Solver(spec, bindings)
    paths = [p for p in enumerate_paths(spec) if p.missing is None]
    out: list[Scenario] = []
    not_shown: dict[str, str] = {}
    for atom in condition_atoms(spec):
        clause = spec.nodes_by_id[atom.node].branches[atom.branch].clause
        assert isinstance(clause.expr, (And, Or))
        items = clause.expr.items
        taken = atom.op == "or"  # or: the atom alone takes the branch; and: the atom alone drops it
        candidates: list[tuple[TreePath, int]] = []
        for path in paths:
            for s, step in enumerate(path.steps):
                if step.node == atom.node and (step.branch == atom.branch) == taken:
                    candidates.append((path, s))
                    break
        reason = "no path of the tree " + (
            "takes the branch" if taken else "takes another branch of the node"
        )
        for path, s in candidates[:MAX_TRIES]:
            extra = [
                Constraint(item, atom.node, negated=(i + 1 == atom.index) != taken, step=s)
                for i, item in enumerate(items)
            ]
            try:
                env = solver._solve(path, [*path.constraints(), *extra])
                scenario = build_scenario(spec, bindings, path, assignment=env)
            except (Unsatisfiable, BindingsError) as exc:
                reason = f"{path.id}: {exc}"
                continue
            if _key(scenario) not in seen:
                scenario.id = f"{path.id}/MCDC {atom.id}"
                seen.add(_key(scenario))
                out.append(scenario)
            break
        else:
            not_shown[atom.id] = reason
    return out, not_shown
