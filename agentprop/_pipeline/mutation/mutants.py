"""Mutants and what became of them: the fault-knob mutants of a Python agent and the report of a
mutation run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.project import Project
from agentprop._pipeline.mutation.pack import (
    Mutation,
    MutationPack,
    check_mutation_bindings,
    probe_scenario,
)
from agentprop._scenario.build import Scenario

# --- mutants and results ------------------------------------------------------------------


class Mutant(BaseModel):
    """One mutated agent for one mutation intent."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    mutation: Mutation
    agent: LoadedAgent
    source: Literal["faults", "prompt"]
    probe_turns: list[str]
    probe_scenario: Scenario
    prompt: str | None = None
    """The mutated system prompt (prompt mutants)."""


Status = Literal["killed", "survived", "vacuous", "non-activating", "inconclusive"]


class MutantResult(BaseModel):
    id: str
    severity: str
    category: str
    source: str
    status: Status
    probe_runs: int = 0
    probe_violations: int = 0
    """Runs of the probe on the mutant, and how many showed the violation."""
    probe_explanation: str | None = None
    control_runs: int = 0
    control_violations: int = 0
    """Runs of the same probe on the clean agent (the control), and how many showed it."""
    control_explanation: str | None = None
    """What the clean agent's run showed, when it fired the probe."""
    probe_p_value: float | None = None
    """One-sided Fisher exact p-value: the mutant fires the probe no more often
    than the clean agent."""
    attempts: int = 1
    killed_by: str | None = None
    killing_failure: str | None = None
    cases_run: int = 0
    """Visible cases decided on the mutant."""
    cases_counted: int = 0
    """Of the visible cases, those that could kill it (the clean agent passes them)."""
    uncounted: list[str] = Field(default_factory=list)
    """Visible cases that could not kill this mutant because the clean agent does not pass them."""
    not_applicable: int = 0
    """Cases NOT APPLICABLE on this mutant (base case did not pass): they kill nothing and are
    not counted in ``cases_run``."""
    runs: int = 0
    cost_usd: float = 0.0

    def rates(self) -> str:
        """``mutant k/n vs clean k/n`` (the probe's two samples)."""
        return (
            f"probe {self.probe_violations}/{self.probe_runs} vs clean "
            f"{self.control_violations}/{self.control_runs}"
        )

    def line(self) -> str:
        probe = self.rates()
        if self.status == "killed":
            tail = f"KILLED by {self.killed_by}" + (
                f": {self.killing_failure}" if self.killing_failure else ""
            )
        elif self.status == "survived" and self.cases_counted == 0:
            tail = "SURVIVED: the suite has no visible case the clean agent passes to kill it"
            if self.not_applicable:
                tail += (
                    f" ({self.not_applicable} not applicable on the mutant, counted for nothing)"
                )
        elif self.status == "survived":
            tail = (
                f"SURVIVED all {self.cases_counted} visible cases the clean agent passes: the "
                "suite has a blind spot here"
            )
            if self.not_applicable:
                tail += f" ({self.not_applicable} more not applicable, counted for nothing)"
        elif self.status == "vacuous":
            why = f" ({self.control_explanation})" if self.control_explanation else ""
            tail = (
                "VACUOUS probe: the clean agent shows the violation in "
                f"{self.control_violations}/{self.control_runs} runs{why}, so it cannot tell this "
                "mutant from a correct agent (left out of the score; move the probe: the "
                "bindings' `mutations:` probe scenario/user_turns)"
            )
        elif self.status == "non-activating":
            p = "" if self.probe_p_value is None else f", p={self.probe_p_value:.3g}"
            tail = (
                "non-activating: the probe did not show the violation more often on the mutant "
                f"than on the clean agent{p} (left out of the score)"
            )
        else:
            tail = "INCONCLUSIVE: the budget ran out"
        if self.uncounted and self.status in ("killed", "survived"):
            tail += (
                f"; {len(self.uncounted)} visible cases the clean agent does "
                "not pass cannot kill it"
            )
        return f"{self.id:<28} {self.severity:<8} {probe:<26} {tail}"


class MutationReport(BaseModel):
    pack_id: str
    spec_id: str
    agent: str
    mutants: list[MutantResult] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    """Mutation ids of the pack with no mutant source (no knob bound, no prompt to mutate)."""
    clean_not_passing: dict[str, str] = Field(default_factory=dict)
    """Case id -> the clean agent's verdict, for the visible cases it does not pass: none of
    them counts as a kill."""
    probe_alpha: float = 0.05
    runs: int = 0
    """Every agent run, the probes' control runs on the clean agent included."""

    @property
    def killed(self) -> int:
        return sum(m.status == "killed" for m in self.mutants)

    @property
    def activated(self) -> int:
        """Mutants whose probe showed the violation more often than on the clean agent."""
        return sum(m.status in ("killed", "survived") for m in self.mutants)

    @property
    def vacuous(self) -> int:
        return sum(m.status == "vacuous" for m in self.mutants)

    @property
    def non_activating(self) -> int:
        return sum(m.status == "non-activating" for m in self.mutants)

    @property
    def mutation_score(self) -> float | None:
        """Killed / activated (vacuous probes and non-activating mutants are left out)."""
        return self.killed / self.activated if self.activated else None

    def skipped_lines(self) -> list[str]:
        """One line per intent that had no mutant, saying how to give it one."""
        return [
            f"{mid:<28} {'':<8} {'':<26} not run: no mutant (bind a fault knob under the "
            "bindings' `mutations:`, or use a model agent: --agent anthropic)"
            for mid in self.skipped
        ]

    def clean_not_passing_lines(self) -> list[str]:
        """One line per visible case that kills nothing because the clean agent does not pass it."""
        return [
            f"cannot kill: {cid} (the clean agent's verdict is {verdict})"
            for cid, verdict in self.clean_not_passing.items()
        ]

    def summary(self) -> str:
        lines = (
            [m.line() for m in self.mutants] + self.skipped_lines() + self.clean_not_passing_lines()
        )
        ms = self.mutation_score
        score = "n/a (no mutant activated)" if ms is None else f"{ms:.0%}"
        lines.append(
            f"MS {score}: {self.killed}/{self.activated} activated mutants killed; "
            f"{self.vacuous} vacuous probes, {self.non_activating} non-activating, "
            f"{len(self.skipped)} without a mutant; {len(self.clean_not_passing)} cases the clean "
            f"agent does not pass cannot kill; {self.runs} runs"
        )
        return "\n".join(lines)


def fault_mutants(
    project: Project,
    pack: MutationPack,
    agent: LoadedAgent,
    make: Callable[[dict[str, float]], LoadedAgent],
) -> list[Mutant]:
    """Mutants from the bindings' ``mutations:`` section (fault knobs of a Python agent)."""
    check_mutation_bindings(project, pack, agent)
    out = []
    for mid, binding in project.bindings.mutations.items():
        mutation = pack.get(mid)
        out.append(
            Mutant(
                mutation=mutation,
                agent=make({**agent.faults, **binding.faults}),
                source="faults",
                probe_turns=list(binding.probe.user_turns or mutation.activation_probe.user_turns),
                probe_scenario=probe_scenario(project, binding.probe.scenario, mutation),
            )
        )
    return out
