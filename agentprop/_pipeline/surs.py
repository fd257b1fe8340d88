"""Spec-evolution regression (TDAD's SURS): does the v2 agent still do what v1 asked, wherever v2
did not change the rules?

The v1 invariants are the v1 cases whose whole path v2 left untouched (excluded cases name the
node that excludes them). They run in the v2 world, are judged by the v1 checks and decided by
the oracle; SURS is the share that pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from agentprop._agents.project import Project
from agentprop._decide.check import decide_scenario
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import OracleSettings
from agentprop._judge.case import compile_mft
from agentprop._modelapi.budget import Budget
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._spec.model import Spec


def changed_nodes(v1: Spec, v2: Spec) -> dict[str, str]:
    """``node id -> how v2 changed it`` for every v1 node v2 removed or redefined."""
    new = {n.node_id: n for n in v2.decision_tree}
    out: dict[str, str] = {}
    for node in v1.decision_tree:
        other = new.get(node.node_id)
        if other is None:
            out[node.node_id] = "removed in v2"
            continue
        a, b = node.model_dump(), other.model_dump()
        fields = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if fields:
            out[node.node_id] = "changed in v2 (" + ", ".join(fields) + ")"
    return out


class Exclusion(BaseModel):
    case: str
    reason: str


def invariant_scenarios(v1: Project, v2: Spec) -> tuple[list[Scenario], list[Exclusion]]:
    """The v1 cases v2 keeps unchanged, and the excluded ones with the reason."""
    changed = changed_nodes(v1.spec, v2)
    decisions = set(v2.response_contract.decision_enum)
    tools = set(v2.tools_by_name)
    kept: list[Scenario] = []
    excluded: list[Exclusion] = []
    for scenario in v1.scenarios():
        nodes = [*scenario.path, scenario.leaf]
        hit = next((n for n in nodes if n in changed), None)
        if hit is not None:
            excluded.append(
                Exclusion(case=scenario.id, reason=f"goes through {hit}, {changed[hit]}")
            )
            continue
        gone_tools = sorted({t for turn in scenario.turns for t in turn.required_tools} - tools)
        if gone_tools:
            excluded.append(
                Exclusion(
                    case=scenario.id,
                    reason=f"expects tool(s) v2 no longer has: {', '.join(gone_tools)}",
                )
            )
            continue
        gone = sorted(
            {d for d in (t.expect_decision for t in scenario.turns) if d is not None} - decisions
        )
        if gone:
            excluded.append(
                Exclusion(
                    case=scenario.id,
                    reason=f"expects decision(s) v2 no longer has: {', '.join(gone)}",
                )
            )
            continue
        kept.append(scenario)
    return kept, excluded


class V1Checks:
    """The v1 case's own MFT checks, as a ``prop`` for :func:`agentprop.check`."""

    def __init__(self, spec: Spec, scenario: Scenario) -> None:
        self.spec, self.scenario = spec, scenario
        self.case = compile_mft(spec, scenario)

    def __call__(self, trace: Trace) -> Any:
        return self.case.verdicts(trace)

    def __repr__(self) -> str:
        return f"v1-mft:{self.spec.spec_id}:{self.scenario.id}"


class SursCase(BaseModel):
    id: str
    verdict: str
    pass_rate: float
    runs: int
    first_failure: str | None = None


class SursResult(BaseModel):
    base_spec: str
    spec: str
    agent: str
    invariants: int
    passed: int
    excluded: list[Exclusion] = Field(default_factory=list)
    cases: list[SursCase] = Field(default_factory=list)
    runs: int = 0

    @property
    def surs(self) -> float | None:
        return self.passed / self.invariants if self.invariants else None

    def summary(self) -> str:
        lines = [
            f"SURS {self.base_spec} -> {self.spec}: {len(self.cases)} v1 invariant case(s), "
            f"{len(self.excluded)} excluded"
        ]
        for c in self.cases:
            if c.verdict != "PASS":
                lines.append(f"  {c.verdict:<12} {c.id}  {c.first_failure or ''}".rstrip())
        for e in self.excluded:
            lines.append(f"  excluded     {e.case}: {e.reason}")
        return "\n".join(lines)


async def asurs(
    base: Project,
    project: Project,
    agent: Any,
    *,
    settings: OracleSettings | None = None,
    budget: Budget | None = None,
    seed: int = 0,
    cases: Sequence[Scenario] | None = None,
) -> SursResult:
    """Run the v1 invariants of ``base`` (the v1 project) on ``agent`` in ``project`` (v2)."""
    from agentprop._agents.loading import as_loaded_agent

    loaded = as_loaded_agent(agent)
    kept, excluded = invariant_scenarios(base, project.spec)
    if cases is not None:
        wanted = {c.id for c in cases}
        kept = [s for s in kept if s.id in wanted]
    settings = settings or OracleSettings.for_spec(base.spec)
    memo = TrialMemo()
    result = SursResult(
        base_spec=base.spec.spec_id,
        spec=project.spec.spec_id,
        agent=loaded.ref,
        invariants=len(kept),
        passed=0,
        excluded=excluded,
    )
    for scenario in kept:
        r = await decide_scenario(
            project,
            scenario,
            loaded,
            prop=V1Checks(base.spec, scenario),
            settings=settings,
            memo=memo,
            budget=budget,
            seed=seed,
            name=f"SURS {scenario.id}",
        )
        result.runs += r.runs
        result.passed += r.verdict == "PASS"
        result.cases.append(
            SursCase(
                id=scenario.id,
                verdict=r.verdict,
                pass_rate=r.pass_rate,
                runs=r.runs,
                first_failure=r.failures[0].explanation if r.failures else None,
            )
        )
    return result


def surs(
    base: Project,
    project: Project,
    agent: Any,
    *,
    settings: OracleSettings | None = None,
    budget: Budget | None = None,
    seed: int = 0,
    cases: Sequence[Scenario] | None = None,
) -> SursResult:
    """Run the invariant cases of ``base`` (the previous version's project) on ``agent`` in
    ``project`` (the new version), judged by the v1 checks; see the module doc."""
    from agentprop._util.aio import run_sync

    return run_sync(
        asurs(base, project, agent, settings=settings, budget=budget, seed=seed, cases=cases)
    )
