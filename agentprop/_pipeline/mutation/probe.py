"""The activation probe and its control: whether a mutant shows the intended violation
significantly more often than the clean agent (one-sided Fisher exact test).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.project import Project
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.mutation.mutants import Mutant
from agentprop._pipeline.mutation.pack import ExpectViolation
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._stats.two_sample import fisher_exact_greater

# --- the probe ----------------------------------------------------------------------------


def _visible_text(trace: Trace) -> str:
    return "\n".join(t.user_visible_text for t in trace.turns)


def probe_violation(expect: ExpectViolation, trace: Trace) -> str | None:
    """Why ``trace`` shows the violation (every stated condition holds), or ``None``."""
    names = trace.tool_names()
    reasons: list[str] = []
    if expect.trace is not None:
        t = expect.trace
        missing = [n for n in t.called if n not in names]
        if missing:
            return None
        reasons.extend(f"called {n}" for n in t.called)
        present = [n for n in t.not_called if n in names]
        if present:
            return None
        reasons.extend(f"never called {n}" for n in t.not_called)
        if t.order_violation is not None:
            order = t.order_violation.must_not_happen
            position = -1
            for name in order:
                later = [i for i, n in enumerate(names) if n == name and i > position]
                if not later:
                    return None
                position = later[0]
            reasons.append("called " + " before ".join(order))
    if expect.text is not None:
        text = _visible_text(trace).lower()
        if expect.text.contains_any:
            hits = [s for s in expect.text.contains_any if s.lower() in text]
            if not hits:
                return None
            reasons.append(f"said {hits[0]!r}")
        said = [s for s in expect.text.not_contains_any if s.lower() in text]
        if said:
            return None
        reasons.extend(f"never said {s!r}" for s in expect.text.not_contains_any)
    if expect.json_ is not None and expect.json_.field_in is not None:
        f = expect.json_.field_in
        values = [t.response.get(f.field) for t in trace.turns if t.response is not None]
        if not values or values[-1] not in f.allowed:
            return None
        reasons.append(f"respond.{f.field} = {values[-1]!r}")
    return "; ".join(reasons) or "no condition stated"


# --- the probe's control and the activation rule --------------------------------------------

PROBE_ALPHA = 0.05
"""Level of the one-sided test that a mutant fires its probe more often than the clean agent."""

MIN_CONTROL_RUNS = 10


def min_control_runs(probe_runs: int, alpha: float = PROBE_ALPHA) -> int:
    """The fewest clean runs with which a mutant firing in every one of ``probe_runs`` runs can
    be told from a clean agent that never fires: ``1 / C(probe_runs + n, probe_runs) <= alpha``."""
    n = 1
    while fisher_exact_greater(probe_runs, probe_runs, 0, n) > alpha:
        n += 1
    return n


def default_control_runs(probe_runs: int, alpha: float = PROBE_ALPHA) -> int:
    """Clean runs of each probe: :data:`MIN_CONTROL_RUNS`, or more when ``probe_runs`` is too
    small for that to tell an always-firing mutant from a never-firing clean agent."""
    return max(MIN_CONTROL_RUNS, min_control_runs(probe_runs, alpha))


@dataclass(frozen=True)
class ActivationDecision:
    status: Literal["activated", "vacuous", "non-activating"]
    p_value: float


def activation_decision(
    mutant_fired: int,
    mutant_runs: int,
    clean_fired: int,
    clean_runs: int,
    alpha: float = PROBE_ALPHA,
) -> ActivationDecision:
    """Did the mutant activate? The rule compares the two samples of the probe:

    * **activated** when the mutant shows the violation significantly more often than the
      clean agent: the one-sided Fisher exact test of "mutant rate <= clean rate" rejects at
      ``alpha`` (``fisher_exact_greater(mutant_fired, mutant_runs, clean_fired, clean_runs)``);
    * otherwise **vacuous** when the clean agent fired the probe at least once: the probe
      does not separate a mutant from a correct agent;
    * otherwise **non-activating**: neither fired it (enough).

    ``mutant_runs`` may be 0 (the control alone already shows the probe is vacuous).
    """
    p = (
        fisher_exact_greater(mutant_fired, mutant_runs, clean_fired, clean_runs)
        if mutant_runs
        else 1.0
    )
    if p <= alpha:
        return ActivationDecision("activated", p)
    return ActivationDecision("vacuous" if clean_fired else "non-activating", p)


class ProbeSample(BaseModel):
    """Runs of one probe on one agent."""

    runs: int = 0
    violations: int = 0
    explanation: str | None = None
    """Why the first firing run shows the violation."""
    complete: bool = True
    """``False`` when the budget stopped the sample early."""


async def sample_probe(
    project: Project,
    agent: LoadedAgent,
    scenario: Scenario,
    turns: list[str],
    expect: ExpectViolation,
    runs: int,
    budget: Budget | None,
    seed: int,
) -> ProbeSample:
    """``runs`` runs of a probe (``turns`` in ``scenario``'s world) on ``agent``. Trial ``i`` is
    the same for every agent, so the mutant and its control see the same draws."""
    out = ProbeSample()
    for i in range(runs):
        if budget is not None and not budget.try_start_run():
            return out.model_copy(update={"complete": False})
        trace = await project.arun(
            scenario,
            agent.factory,
            trial=seed * 1_000_003 + 900_000 + i,
            agent_name=agent.ref,
            messages=turns,
        )
        out.runs += 1
        reason = probe_violation(expect, trace)
        if reason is not None:
            out.violations += 1
            out.explanation = out.explanation or reason
    return out


async def _probe(
    project: Project, mutant: Mutant, runs: int, budget: Budget | None, seed: int
) -> tuple[int, int, str | None]:
    sample = await sample_probe(
        project,
        mutant.agent,
        mutant.probe_scenario,
        mutant.probe_turns,
        mutant.mutation.activation_probe.expect_violation,
        runs,
        budget,
        seed,
    )
    return sample.runs, sample.violations, sample.explanation


def _control_key(mutant: Mutant) -> str:
    return "\x00".join(
        [
            mutant.probe_scenario.model_dump_json(),
            *mutant.probe_turns,
            mutant.mutation.activation_probe.expect_violation.model_dump_json(),
        ]
    )
