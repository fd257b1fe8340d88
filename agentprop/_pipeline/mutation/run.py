"""Killing mutants: the cases the clean agent passes, decided by the oracle on each activated
mutant, and ``mutation_test`` over a pack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.project import Project
from agentprop._decide.check import decide_scenario
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import OracleSettings
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.mutation.mutants import Mutant, MutantResult, MutationReport, fault_mutants
from agentprop._pipeline.mutation.pack import Mutation, MutationPack, load_mutation_pack
from agentprop._pipeline.mutation.probe import (
    PROBE_ALPHA,
    ProbeSample,
    _control_key,
    _probe,
    activation_decision,
    default_control_runs,
    min_control_runs,
    sample_probe,
)
from agentprop._pipeline.report.model import CaseReport
from agentprop._scenario.build import Scenario
from agentprop.errors import InputError

# --- the killing cases --------------------------------------------------------------------

Replay = Callable[[LoadedAgent], Awaitable[CaseReport]]

Killer = tuple[str, Replay]
"""``(case id, replay)``: a visible case that can be decided again for a mutant."""


@dataclass(frozen=True)
class KillerCase:
    """A visible case that may kill a mutant, with the clean agent's verdict when known (the
    run's own verdict in ``agentprop tdad``); unknown, it is decided on the clean agent the
    first time a mutant fails the case."""

    id: str
    replay: Replay
    clean_verdict: str | None = None


def as_killers(
    project: Project,
    cases: Sequence[Scenario | Killer | KillerCase],
    *,
    settings: OracleSettings,
    memo: TrialMemo | None,
    budget: Budget | None,
    seed: int,
) -> list[KillerCase]:
    """Scenarios become MFT cases decided by the oracle; ``(id, replay)`` pairs and
    :class:`KillerCase` (what ``agentprop tdad`` passes for every visible case, with its
    verdict) are kept as they are."""
    from agentprop._pipeline.kinds import case_from_check

    memo = memo if memo is not None else TrialMemo()
    out: list[KillerCase] = []
    for case in cases:
        if isinstance(case, Scenario):

            async def replay(who: LoadedAgent, scenario: Scenario = case) -> CaseReport:
                r = await decide_scenario(
                    project,
                    scenario,
                    who,
                    settings=settings,
                    memo=memo,
                    budget=budget,
                    seed=seed,
                    name=scenario.id,
                )
                return case_from_check(scenario.id, "MFT", scenario, r, {})

            out.append(KillerCase(case.id, replay))
        elif isinstance(case, KillerCase):
            out.append(case)
        else:
            out.append(KillerCase(case[0], case[1]))
    return out


@dataclass
class Controls:
    """What the clean agent did, shared by every mutant of one mutation test: each probe's
    control sample and each case's clean verdict."""

    clean: LoadedAgent
    control_runs: int
    probe_alpha: float = PROBE_ALPHA
    seed: int = 0
    probes: dict[str, ProbeSample] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    runs: int = 0


async def _control(
    project: Project, mutant: Mutant, controls: Controls, budget: Budget | None
) -> ProbeSample:
    key = _control_key(mutant)
    known = controls.probes.get(key)
    if known is not None and known.complete:
        return known
    sample = await sample_probe(
        project,
        controls.clean,
        mutant.probe_scenario,
        mutant.probe_turns,
        mutant.mutation.activation_probe.expect_violation,
        controls.control_runs,
        budget,
        controls.seed,
    )
    controls.runs += sample.runs
    controls.probes[key] = sample
    return sample


async def evaluate_mutant(
    project: Project,
    mutant: Mutant,
    cases: Sequence[Scenario | Killer | KillerCase],
    *,
    settings: OracleSettings,
    controls: Controls,
    probe_runs: int = 3,
    budget: Budget | None = None,
    memo: TrialMemo | None = None,
    seed: int = 0,
    attempts: int = 1,
) -> MutantResult:
    """Run the probe on the clean agent (once per probe, shared through ``controls``) and on
    the mutant; if it activates (:func:`activation_decision`), decide ``cases`` on the mutant
    until one that the clean agent passes FAILs."""
    m = mutant.mutation
    base: dict[str, Any] = dict(
        id=m.id, severity=m.severity, category=m.category, source=mutant.source, attempts=attempts
    )
    runs_before = controls.runs
    control = await _control(project, mutant, controls, budget)
    base.update(
        control_runs=control.runs,
        control_violations=control.violations,
        control_explanation=control.explanation,
    )
    if not control.complete:
        return MutantResult(status="inconclusive", runs=controls.runs - runs_before, **base)
    best = activation_decision(
        probe_runs, probe_runs, control.violations, control.runs, controls.probe_alpha
    )
    # even a mutant firing every time could not be told from the clean agent
    if best.status == "vacuous":
        return MutantResult(
            status="vacuous", probe_p_value=1.0, runs=controls.runs - runs_before, **base
        )
    made, violations, why = await _probe(project, mutant, probe_runs, budget, seed)
    runs = controls.runs - runs_before + made
    base.update(probe_runs=made, probe_violations=violations, probe_explanation=why)
    if made < probe_runs:
        return MutantResult(status="inconclusive", runs=runs, **base)
    decision = activation_decision(
        violations, made, control.violations, control.runs, controls.probe_alpha
    )
    base["probe_p_value"] = decision.p_value
    if decision.status != "activated":
        return MutantResult(status=decision.status, runs=runs, **base)
    cost = 0.0
    uncounted: list[str] = []
    killers = as_killers(project, cases, settings=settings, memo=memo, budget=budget, seed=seed)
    run_on_mutant = 0
    for killer in killers:
        clean_verdict = controls.verdicts.get(killer.id, killer.clean_verdict)
        if clean_verdict is not None and clean_verdict != "PASS":
            controls.verdicts[killer.id] = clean_verdict
            uncounted.append(killer.id)
            continue
        report = await killer.replay(mutant.agent)
        runs += report.runs
        cost += report.cost_usd
        if report.verdict == "NOT APPLICABLE":
            # its base case fails on this mutant: it kills nothing
            base["not_applicable"] = base.get("not_applicable", 0) + 1
            continue
        run_on_mutant += 1
        if report.verdict == "INCONCLUSIVE":
            return MutantResult(
                status="inconclusive",
                cases_run=run_on_mutant,
                uncounted=uncounted,
                runs=runs,
                cost_usd=cost,
                **base,
            )
        if report.verdict != "FAIL":
            continue
        if clean_verdict is None:  # a kill needs a case the clean agent passes: decide it once
            clean_report = await killer.replay(controls.clean)
            runs += clean_report.runs
            cost += clean_report.cost_usd
            if clean_report.verdict == "INCONCLUSIVE":
                return MutantResult(
                    status="inconclusive",
                    cases_run=run_on_mutant,
                    uncounted=uncounted,
                    runs=runs,
                    cost_usd=cost,
                    **base,
                )
            controls.verdicts[killer.id] = clean_verdict = clean_report.verdict
            if clean_verdict != "PASS":
                uncounted.append(killer.id)
                continue
        failure = report.failures[0].explanation if report.failures else None
        return MutantResult(
            status="killed",
            killed_by=killer.id,
            killing_failure=failure,
            cases_run=run_on_mutant,
            uncounted=uncounted,
            runs=runs,
            cost_usd=cost,
            **base,
        )
    return MutantResult(
        status="survived",
        cases_run=run_on_mutant,
        cases_counted=len(killers) - len(uncounted) - base.get("not_applicable", 0),
        uncounted=uncounted,
        runs=runs,
        cost_usd=cost,
        **base,
    )


MutantFactory = Callable[[Mutation, int], Awaitable["Mutant | None"]]
"""``(mutation, attempt) -> Mutant`` for generated mutants (``None``: cannot make one)."""


def check_control_runs(
    control_runs: object, probe_runs: int, probe_alpha: float = PROBE_ALPHA
) -> int:
    """``control_runs`` (``None``: :func:`default_control_runs`), checked to be enough for the
    activation rule to be able to say "activated", once ``probe_runs`` and ``probe_alpha`` are
    checked (the checks of :func:`mutation_test` and :func:`amutation_test` alike)."""
    from agentprop.errors import InvalidArgument

    if not isinstance(probe_runs, int) or isinstance(probe_runs, bool) or probe_runs < 1:
        raise InvalidArgument(
            f"probe_runs={probe_runs!r} must be a positive int (3 is the default)"
        )
    if not isinstance(probe_alpha, float) or not 0.0 < probe_alpha < 1.0:
        raise InvalidArgument(
            f"probe_alpha={probe_alpha!r} must be a float strictly between 0 and 1 "
            "(0.05 is the default)"
        )
    if control_runs is None:
        return default_control_runs(probe_runs, probe_alpha)
    if not isinstance(control_runs, int) or isinstance(control_runs, bool) or control_runs < 1:
        raise InvalidArgument(
            f"control_runs={control_runs!r} must be a positive int (None: "
            f"{default_control_runs(probe_runs, probe_alpha)})"
        )
    need = min_control_runs(probe_runs, probe_alpha)
    if control_runs < need:
        raise InvalidArgument(
            f"control_runs={control_runs} is too few: with probe_runs={probe_runs} no mutant "
            f"could be told from the clean agent at probe_alpha={probe_alpha}; use at least "
            f"{need} (or leave it None)"
        )
    return control_runs


async def amutation_test(
    project: Project,
    pack: MutationPack,
    agent: LoadedAgent,
    cases: Sequence[Scenario | Killer | KillerCase],
    *,
    mutants: Sequence[Mutant] = (),
    generate: MutantFactory | None = None,
    settings: OracleSettings | None = None,
    probe_runs: int = 3,
    control_runs: int | None = None,
    probe_alpha: float = PROBE_ALPHA,
    budget: Budget | None = None,
    memo: TrialMemo | None = None,
    seed: int = 0,
    on_result: Callable[[MutantResult], None] | None = None,
) -> MutationReport:
    """Evaluate every mutation of ``pack``: the given ``mutants`` first (fault knobs), then,
    for the rest, mutants made by ``generate`` (prompt rewrites), retried up to the pack's
    ``max_attempts`` until one activates. ``agent`` is the clean agent: every probe also runs
    on it (``control_runs`` times, see :func:`default_control_runs`) and a case kills only if
    it passes on it."""
    settings = settings or OracleSettings.for_spec(project.spec)
    controls = Controls(
        clean=agent,
        control_runs=check_control_runs(control_runs, probe_runs, probe_alpha),
        probe_alpha=probe_alpha,
        seed=seed,
    )
    for case in cases:
        if isinstance(case, KillerCase) and case.clean_verdict is not None:
            controls.verdicts.setdefault(case.id, case.clean_verdict)
    report = MutationReport(
        pack_id=pack.mutation_pack_id,
        spec_id=project.spec.spec_id,
        agent=agent.ref,
        probe_alpha=probe_alpha,
    )
    given = {m.mutation.id: m for m in mutants}
    for mutation in pack.mutations:
        result: MutantResult | None = None
        if mutation.id in given:
            result = await evaluate_mutant(
                project,
                given[mutation.id],
                cases,
                settings=settings,
                controls=controls,
                probe_runs=probe_runs,
                budget=budget,
                memo=memo,
                seed=seed,
            )
        elif generate is not None:
            for attempt in range(1, pack.generator.max_attempts + 1):
                mutant = await generate(mutation, attempt)
                if mutant is None:
                    break
                result = await evaluate_mutant(
                    project,
                    mutant,
                    cases,
                    settings=settings,
                    controls=controls,
                    probe_runs=probe_runs,
                    budget=budget,
                    memo=memo,
                    seed=seed + attempt - 1,
                    attempts=attempt,
                )
                # a vacuous probe is the same for every rewrite
                if result.status != "non-activating":
                    break
        if result is None:
            report.skipped.append(mutation.id)
            continue
        report.mutants.append(result)
        report.runs += result.runs
        if on_result is not None:
            on_result(result)
    report.clean_not_passing = {cid: v for cid, v in controls.verdicts.items() if v != "PASS"}
    return report


def mutation_test(
    project: Project,
    pack: MutationPack | str | Path,
    agent: Any,
    cases: Sequence[Scenario] | None = None,
    *,
    mutants: Sequence[Mutant] | None = None,
    settings: OracleSettings | None = None,
    probe_runs: int = 3,
    control_runs: int | None = None,
    probe_alpha: float = PROBE_ALPHA,
    budget: Budget | None = None,
    memo: TrialMemo | None = None,
    seed: int = 0,
) -> MutationReport:
    """Mutation-test ``agent``'s suite: probe each mutant against the clean ``agent`` (the
    control), then run ``cases`` (default: every MFT scenario of the project) on each activated
    one until a case the clean agent passes fails.

    ``mutants`` defaults to the fault-knob mutants bound under the bindings' ``mutations:``
    (:func:`fault_mutants`); pass :class:`Mutant` objects to test others. Each case is decided
    by the oracle (``settings``, default the spec's); ``budget`` caps the runs. A mutant is
    activated when its probe fires significantly more often than on the clean agent
    (:func:`activation_decision`, ``probe_alpha``; ``control_runs`` clean runs per probe).
    """
    from agentprop._agents.loading import as_loaded_agent
    from agentprop._util.aio import run_sync
    from agentprop.errors import InvalidArgument

    check_control_runs(control_runs, probe_runs, probe_alpha)
    if mutants is not None and not all(isinstance(m, Mutant) for m in mutants):
        bad = next(m for m in mutants if not isinstance(m, Mutant))
        raise InvalidArgument(
            "mutants must be a sequence of agentprop Mutant objects (see "
            f"fault_mutants); got {bad!r}"
        )
    loaded = as_loaded_agent(agent)
    p = pack if isinstance(pack, MutationPack) else load_mutation_pack(pack)
    chosen = (
        list(mutants)
        if mutants is not None
        else fault_mutants(project, p, loaded, fault_knob_maker(loaded))
    )
    suite = list(cases) if cases is not None else project.scenarios()
    return run_sync(
        amutation_test(
            project,
            p,
            loaded,
            suite,
            mutants=chosen,
            settings=settings,
            probe_runs=probe_runs,
            control_runs=control_runs,
            probe_alpha=probe_alpha,
            budget=budget,
            memo=memo,
            seed=seed,
        )
    )


def fault_knob_maker(agent: LoadedAgent) -> Callable[[dict[str, float]], LoadedAgent]:
    """``faults -> agent``: the same Python agent with other fault knobs turned on."""
    from agentprop._agents.loading import make_factory

    def make(faults: dict[str, float]) -> LoadedAgent:
        target = getattr(agent, "target", None)
        if target is None:
            raise InputError(
                f"agent {agent.ref} cannot take fault knobs",
                expected="a Python agent class with a FAULTS table",
                fix="fault-knob mutants need a Python agent; for a model agent use prompt "
                "mutants (--agent anthropic)",
            )
        return make_factory(target, faults, ref=agent.ref)

    return make
