"""What a run did not test, and why: no silent green.

Every branch, path, decision, policy, retry, declared tool failure or optional response field
that no case of the run reaches is named with its reason. A full run that passes every case but
leaves something untested is INCOMPLETE (exit code 3), never green; items skipped only by a
``--case`` filter are not untested.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentprop._agents.project import Project
from agentprop._decide.safety import exercises, safety_policies
from agentprop._pipeline.probe import toolless_policies
from agentprop._pipeline.report.model import CaseReport
from agentprop._scenario.build import PathProblem
from agentprop._spec.lint import missing_optional_fields, unrouted_failures
from agentprop._spec.paths import enumerate_paths


@dataclass(frozen=True)
class Untested:
    """One thing the run did not test: ``what`` is ``branch``, ``path``, ``decision``,
    ``policy``, ``retry``, ``failure`` or ``field``; ``id`` names it (``N9_UPDATE_ADDRESS#1``,
    ``END_TICKET<-N9_UPDATE_ADDRESS``, ``TICKET_CREATED``, ``policies.P3``,
    ``tools.update_address.retry_policy``, ``tools.renew_loan.failure_modes.timeout``,
    ``respond.total_due``)."""

    what: str
    id: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"what": self.what, "id": self.id, "reason": self.reason}

    def render(self) -> str:
        return f"{self.what} {self.id} ({self.reason})"


_CALLS = re.compile(
    r"requires (\d+) tool calls in turn \d+ \(([^)]*)\) but max_tool_calls_per_turn is (\d+)"
)
_UNBOUND = re.compile(r"needs variable '?([\w.@]+)'?|variable '?([\w.]+)'? (?:is not bound|has no)")


def why(problem: PathProblem) -> str:
    """A short reason for an unrealisable path, from its problem."""
    m = _CALLS.search(problem.reason)
    if m:
        return (
            f"over the call limit: needs {m.group(1)} calls ({m.group(2)}), "
            f"max_tool_calls_per_turn is {m.group(3)}"
        )
    if problem.code == "P005":
        return (
            f"contradictory cases: {problem.path_id} expect different things of one "
            "conversation and world (P005)"
        )
    if problem.reason.startswith("no values"):
        return "contradictory conditions: first-match-wins makes it impossible"
    m = _UNBOUND.search(problem.reason)
    if m:
        return f"unbound: variable {m.group(1) or m.group(2)} has no binding that realises it"
    return "unrealisable: " + (
        problem.reason if len(problem.reason) <= 120 else problem.reason[:119] + "…"
    )


def _branch_pairs(project: Project, nodes: Sequence[str]) -> set[str]:
    out = set()
    for a, b in zip(nodes, nodes[1:]):
        node = project.spec.nodes_by_id.get(a)
        if node is None:
            continue
        for k, br in enumerate(node.branches):
            if br.next == b:
                out.add(f"{a}#{k}")
    return out


def untested(
    project: Project, cases: Iterable[CaseReport], *, not_run: Iterable[str] = ()
) -> list[Untested]:
    """Everything the run's ``cases`` did not reach, in spec order; ``not_run`` are the branches
    a ``--case`` filter left out (not counted)."""
    spec = project.spec
    cases = list(cases)
    skipped = set(not_run)
    problems = project.path_problems
    ran = {c.id for c in cases}
    scenarios = [s for s in project.scenarios() if s.id in ran]
    filtered = len(scenarios) < len(project.scenarios())
    out: list[Untested] = []

    # branches
    covered = {b for c in cases for b in c.branches}
    for node in spec.decision_tree:
        for k, _ in enumerate(node.branches):
            bid = f"{node.node_id}#{k}"
            if bid in covered or bid in skipped:
                continue
            reasons = [
                why(p)
                for p in problems
                if p.code == "P001" and bid in _branch_pairs(project, p.nodes)
            ]
            reasons += [
                why(p)
                for p in problems
                if p.code == "P005" and f"decision_tree.{node.node_id}.branches[{k}]" in p.reason
            ]
            reasons.sort(key=lambda r: r.startswith("contradictory"))
            out.append(Untested("branch", bid, reasons[0] if reasons else "no case reaches it"))

    # paths: every path key (a loop-free path's, or an unrealisable loop path's)
    # no scenario realises
    realised = {s.id.split("/", 1)[0] for s in project.scenarios()}
    keys = list(
        dict.fromkeys(
            [
                *(p.id for p in enumerate_paths(spec)),
                *(p.path_id for p in problems if p.code == "P001"),
            ]
        )
    )
    for key in keys:
        if key in realised:
            continue
        mine = [why(p) for p in problems if p.code == "P001" and p.path_id == key]
        mine += [
            why(p)
            for p in problems
            if p.code == "P005"
            and key in p.path_id.split(" vs ")[0].split("/")[:1] + p.path_id.split(" vs ")[1:]
        ]
        mine.sort(key=lambda r: r.startswith("contradictory"))
        out.append(Untested("path", key, mine[0] if mine else "no case realises it"))

    if filtered:
        return out

    # decisions that only unrealisable paths decide
    expected = {d for c in cases for d in c.expected_decisions if d}
    enum = spec.response_contract.decision_enum
    by_key = {p.id: p for p in enumerate_paths(spec)}
    unrealised = [u.id for u in out if u.what == "path"]
    deciders: dict[str, list[str]] = {}
    for key in unrealised:
        path = by_key.get(key)
        if path is None:
            continue
        decision = (
            path.missing.decision
            if path.missing is not None
            else project.bindings.outcome(path.leaf, path.via, enum)
        )
        if decision is not None:
            deciders.setdefault(decision, []).append(key)
    for decision in enum:
        if decision in deciders and decision not in expected:
            out.append(
                Untested(
                    "decision",
                    decision,
                    f"no case expects it: only {', '.join(deciders[decision])} decide(s) it, and "
                    "no case realises that",
                )
            )

    # policies that name what the tree uses (tools, nodes, decisions) but no case exercises
    probed = {str(c.details.get("clause")) for c in cases if c.kind == "PROBE"}
    toolless = {p.id: forbidden for p, forbidden in toolless_policies(project)}
    unsafe = safety_policies(spec, project.bindings)
    names = (
        [t.name for t in spec.action_tools]
        + [n.node_id for n in spec.decision_tree]
        + list(enum)
        + spec.leaf_ids()
    )
    for policy in spec.policies:
        if f"policies.{policy.id}" in probed or any(
            exercises(spec, project.bindings, s, policy) for s in scenarios
        ):
            continue
        named = [n for n in dict.fromkeys(names) if re.search(rf"\b{re.escape(n)}\b", policy.text)]
        if named:
            out.append(
                Untested(
                    "policy",
                    f"policies.{policy.id}",
                    f"no case exercises it (it names {', '.join(named)})",
                )
            )
        elif policy.id in toolless:
            how = (
                "only PROBE cases that tempt the agent exercise it, and none ran"
                if toolless[policy.id] is not None
                else "and its text states no prohibition (never / do not ...) a "
                "PROBE case could tempt"
            )
            kind = "a safety policy" if policy.id in unsafe else "a policy forbidding advice"
            out.append(
                Untested(
                    "policy",
                    f"policies.{policy.id}",
                    f"{kind} that names no tool, node or decision: {how}",
                )
            )

    # a required tool's retry that no case can check (over the call limit, contradictory)
    for p in problems:
        if p.code == "P002" and "fits no scenario" in p.reason:
            tool = p.path_id.split(":", 1)[0]
            out.append(Untested("retry", f"tools.{tool}.retry_policy", why(p)))

    # a declared failure the tree does not route (L018) that no case injected
    injected = {
        (str(f.get("tool")), str(f.get("mode"))) for s in scenarios for f in s.world.failures
    }
    injected |= {
        (str(f.get("tool")), str(f.get("mode")))
        for c in cases
        for f in (c.world or {}).get("failures") or []
        if isinstance(f, dict)
    }
    for tool, modes in unrouted_failures(spec).items():
        for mode in modes:
            if (tool, mode) not in injected:
                out.append(
                    Untested(
                        "failure",
                        f"tools.{tool}.failure_modes.{mode}",
                        "declared, but no branch routes it and no retry_policy retries it "
                        "(L018): no case injects it",
                    )
                )

    # an optional response field the respond schema lacks (L021) that no kept run's response carried
    sent = {k for c in cases for r in c.traces for t in r.trace.turns for k in (t.response or {})}
    for name in missing_optional_fields(spec):
        if name not in sent:
            out.append(
                Untested(
                    "field",
                    f"respond.{name}",
                    "optional in response_contract but not in the respond tool's input_schema "
                    "(L021), and no run's response carried it",
                )
            )
    return out


def condition_coverage(project: Project, cases: Iterable[CaseReport]) -> dict[str, Any]:
    """MC/DC condition coverage: every atom of an ``and`` / ``or`` branch condition, the ones a
    run case shows changing its branch on its own (its MC/DC case ran, or a path case already
    was that case), and why the others are not shown."""
    from agentprop._scenario.mcdc import condition_atoms

    ran = {c.id for c in cases}
    gaps = project.condition_gaps
    atoms = [a.id for a in condition_atoms(project.spec)]
    built = {s.id.rsplit("/MCDC ", 1)[1]: s.id for s in project.scenarios() if "/MCDC " in s.id}
    shown = [a for a in atoms if a not in gaps and (a not in built or built[a] in ran)]
    not_shown = {a: gaps.get(a, "its MC/DC case was not run") for a in atoms if a not in shown}
    return {"atoms": atoms, "shown": shown, "not_shown": not_shown}
