"""The case kinds ``agentprop run`` adds to the MFT of every path: BOUNDARY, DIR and INV.

BOUNDARY decides both sides of every numeric edge; DIR decides both sides of a flipped
condition; INV checks that two seeded paraphrases of the first message leave the behaviour
distributed like the original's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.project import Project
from agentprop._decide.check import decide_scenario
from agentprop._decide.choices import first_turn_facts
from agentprop._decide.memo import TrialMemo
from agentprop._decide.metamorphic import (
    InvarianceResult,
    acheck_direction,
    acheck_invariance,
    distribution_words,
    side_words,
)
from agentprop._decide.oracle import CheckResult, OracleSettings, SampledRun
from agentprop._decide.permits import CaseLanes
from agentprop._decide.safety import strictness
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.defaults import KINDS  # noqa: F401 (re-exported)
from agentprop._pipeline.report.model import CaseReport, FailureSummary, RunTrace
from agentprop._pipeline.shards import Shard
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._util.bulk import shared
from agentprop.strategies._internal.boundary import boundary_values
from agentprop.strategies._internal.directional import DirectionalPair, directional_pairs
from agentprop.strategies._internal.families import channel_allows
from agentprop.strategies._internal.transforms import TRANSFORM_NAMES
from agentprop.strategies._internal.variants import paraphrase_variants

Replay = Callable[[LoadedAgent], Awaitable[CaseReport]]
"""Decide the same case again for another agent (a mutant), with no side effect on the run."""


def _replay(decide: Callable[..., Awaitable[CaseReport]], **fixed: Any) -> Replay:
    """A replay of one case: ``decide`` (its arguments bound by default) for another agent."""
    return lambda who: decide(who=who, **fixed)


def _failures(result: CheckResult) -> list[FailureSummary]:
    return [
        FailureSummary(
            signature=f.signature,
            explanation=f.explanation,
            count=f.count,
            first_trial=f.first_trial,
            clause=f.clause,
            traceback=f.traceback,
        )
        for f in result.failures
    ]


PASSING_PER_RUN = 200
"""Passing runs a run's report keeps in all (:func:`passing_quota`): a report of many thousand
cases keeps every failing sample, and this many passing ones, the first decided."""


class PassingQuota:
    """How many more passing runs a report may keep (:data:`PASSING_PER_RUN` to start with)."""

    def __init__(self, left: int | None = None) -> None:
        self.cap = PASSING_PER_RUN if left is None else left
        self.left = self.cap

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


_QUOTA: contextvars.ContextVar[PassingQuota | None] = contextvars.ContextVar(
    "agentprop_passing_quota", default=None
)


@contextlib.contextmanager
def passing_quota(quota: PassingQuota | None = None) -> Iterator[PassingQuota]:
    """Cap the passing runs kept by :func:`run_traces` in this context (one report's cases)."""
    quota = quota if quota is not None else PassingQuota()
    token = _QUOTA.set(quota)
    try:
        yield quota
    finally:
        _QUOTA.reset(token)


def passing_cap() -> int | None:
    """The cap of the :func:`passing_quota` in force (``None``: none, every
    passing sample is kept)."""
    quota = _QUOTA.get()
    return quota.cap if quota is not None else None


def run_traces(
    runs: list[SampledRun], *, side: str | None = None, world: dict[str, Any] | None = None
) -> list[RunTrace]:
    """The kept runs of a decision as report traces (a negative failure turn counted from the
    end, as the contracts allow, made absolute). Inside :func:`passing_quota`, a passing run is
    kept only while the quota lasts (failing ones always are)."""
    out: list[RunTrace] = []
    quota = _QUOTA.get()
    for run in runs:
        if run.passed and quota is not None and not quota.take():
            continue
        trace = Trace.model_validate_json(run.trace_json)
        turn = run.turn + len(trace.turns) if run.turn is not None and run.turn < 0 else run.turn
        out.append(
            RunTrace(
                trial=run.trial,
                passed=run.passed,
                side=side,
                signature=run.signature,
                explanation=run.explanation,
                clause=run.clause,
                turn=turn,
                step=run.step,
                world=world,
                trace=trace,
            )
        )
    return out


def case_from_check(
    case_id: str, kind: str, scenario: Scenario, result: CheckResult, details: dict[str, Any]
) -> CaseReport:
    """The report of a case decided by ``result``; its kept runs move into the report (the
    result keeps none: a run of many cases holds each kept run once)."""
    traces = run_traces(result.sampled_runs)
    result.sampled_runs = []
    case = CaseReport(
        id=case_id,
        node=scenario.leaf,
        via=scenario.via,
        path=scenario.path,
        kind=kind,
        messages=scenario.messages,
        expected_decisions=[t.expect_decision for t in scenario.turns],
        verdict=result.verdict,
        runs=result.runs,
        passes=result.passes,
        pass_rate=result.pass_rate,
        interval=result.interval,
        interval_exact=result.interval_exact,
        pass_hat_k=result.pass_hat_k,
        decided_by=result.decided_by,
        runs_beyond_decision=result.runs_beyond_decision,
        cost_usd=result.cost_usd,
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        failures=_failures(result),
        capabilities=scenario.capabilities,
        branches=scenario.branches,
        # the dict is the case's own, its values may be shared
        details={k: shared(v) for k, v in details.items()},
        world=scenario.world.model_dump(mode="json"),
        traces=traces,
        traces_omitted=max(0, result.runs - len(traces)),
        **_infrastructure(result),
    )
    # what many cases repeat (the path's world and branches, a pass^k table) is held once
    case.path, case.expected_decisions, case.branches = (
        shared(case.path),
        shared(case.expected_decisions),
        shared(case.branches),
    )
    case.capabilities, case.pass_hat_k, case.world = (
        shared(case.capabilities),
        shared(case.pass_hat_k),
        shared(case.world),
    )
    case.interval = shared(case.interval) if case.interval is not None else None
    case.interval_exact = shared(case.interval_exact) if case.interval_exact is not None else None
    return case


def _infrastructure(result: CheckResult) -> dict[str, Any]:
    """``reason`` and ``infrastructure_error`` of a case the infrastructure left undecided."""
    err = result.infrastructure_error
    if err is None:
        return {}
    first = err.message.splitlines()[0] if err.message else err.kind
    return {
        "reason": f"not the agent's ({err.kind}): {first}",
        "infrastructure_error": {
            "kind": err.kind,
            "message": err.message,
            "traceback": err.traceback,
        },
    }


def boundary_case_ids(cases: list[Any]) -> list[str]:
    """``BOUNDARY name=value @where`` for each case, unique: ids that two cases would share
    (one value read by two branches of a node) add the branch (``@N4_RUN_SQL#0``), then the
    compared-with edge and the side (``t=0 holds``)."""

    def base(case: Any) -> str:
        moved = ", ".join(f"{m.name}={m.value!r}" for m in case.moved)
        where = case.comparison.policy or case.comparison.node or case.comparison.location
        return f"BOUNDARY {moved} @{where}"

    def with_branch(case: Any) -> str:
        branch = case.comparison.branch
        return base(case) + (
            f"#{branch}"
            if case.comparison.node and branch is not None and not case.comparison.policy
            else ""
        )

    def with_edge(case: Any) -> str:
        return with_branch(case) + f" (t={case.edge!r} {'holds' if case.holds else 'fails'})"

    ids = [base(c) for c in cases]
    for refine in (with_branch, with_edge):
        counts = Counter(ids)
        ids = [refine(c) if counts[i] > 1 else i for c, i in zip(cases, ids)]
    counts = Counter(ids)
    seen: Counter[str] = Counter()
    out: list[str] = []
    for i in ids:
        seen[i] += 1
        out.append(i if counts[i] == 1 else f"{i} [{seen[i]}]")
    return out


def dir_pairs(project: Project) -> list[tuple[DirectionalPair, Scenario, Scenario]]:
    """The DIR pairs a run decides: both sides realised, the decision changing, and both sides'
    paths among the cases the compiler kept. A side on a path it dropped (contradictory, P005:
    it differs from another only by an ``internal`` variable's assumed value) expects what no
    conversation or world can make the agent do; that path is reported not tested instead."""
    kept = {s.id for s in project.scenarios()}
    out: list[tuple[DirectionalPair, Scenario, Scenario]] = []
    for pair in directional_pairs(project.spec, project.bindings):
        base, perturbed = pair.base.scenario, pair.perturbed.scenario
        if (
            base is None
            or perturbed is None
            or not pair.changes_decision
            or base.id not in kept
            or perturbed.id not in kept
        ):
            continue
        out.append((pair, base, perturbed))
    return out


def dir_case_id(pair: DirectionalPair) -> str:
    """The id of a DIR case: the variable, its two values and the branch it flips."""
    return (
        f"DIR {pair.variable}: {pair.base_value!r} -> {pair.perturbed_value!r} "
        f"@{pair.node}#{pair.branch}"
    )


def decision_names(project: Project) -> dict[str, tuple[str, ...]]:
    """The names of the decisions a DIR case makes runs under (its two sides'), by case id; every
    other case's decision is named by its id."""
    return {
        dir_case_id(pair): (f"DIR base {base.id}", f"DIR perturbed {perturbed.id}")
        for pair, base, perturbed in dir_pairs(project)
    }


def invariance_variants(project: Project, scenario: Scenario, seed: int) -> list[Any]:
    """The two paraphrases of ``scenario``'s first message an INV case compares (none: no INV
    case for it)."""
    channel = project.bindings.channel
    allowed = [name for name in TRANSFORM_NAMES if channel_allows(channel, name)]
    # the bindings' channel may rule out a transform (no typos from a form): only then restricted
    kw: dict[str, Any] = {"transforms": allowed} if len(allowed) < len(TRANSFORM_NAMES) else {}
    variants_first = paraphrase_variants(scenario.messages[0], 2, seed_value=seed, **kw)
    keeps = first_turn_facts(project, scenario)
    if not all(keeps(v.text, [s.name for s in v.transforms]) for v in variants_first):
        # a variant that alters a fact of the message is not a paraphrase of it: draw
        # more and keep those that state the same facts (choices.TurnFacts)
        more = paraphrase_variants(scenario.messages[0], 8, seed_value=seed, **kw)
        variants_first = [v for v in more if keeps(v.text, [s.name for s in v.transforms])][:2]
    return list(variants_first)


async def extra_cases(
    project: Project,
    agent: LoadedAgent,
    scenarios: list[Scenario],
    kinds: set[str],
    oracle: OracleSettings,
    *,
    memo: TrialMemo,
    budget: Budget | None,
    seed: int,
    concurrency: int,
    on_done: Callable[[CaseReport], None],
    on_planned: Callable[[int], None] = lambda n: None,
    case_filter: tuple[str, ...] = (),
    checks: dict[str, Any] | None = None,
    replays: dict[str, Replay] | None = None,
    settings_for: Callable[[Scenario], OracleSettings] | None = None,
    rule_for: Callable[[Scenario], str | None] | None = None,
    lanes: CaseLanes = CaseLanes(),
    inv_runs: int = 20,
    inv_take: int | None = None,
    inv_variants: int | None = None,
    inv_look: str = "a look of the budget's passes",
    budgeted: bool = False,
    shard: Shard | None = None,
) -> list[CaseReport]:
    """Decide the BOUNDARY, DIR and INV cases selected in ``kinds``; ``replays`` receives, for
    each case id, a function deciding that case for another agent. ``inv_take``: an INV case
    takes only that many of its ``inv_runs`` runs a side (a look of a budgeted run's pass);
    ``inv_variants``: and only its first that many variants (the first look of a budgeted run:
    every case gets a run before any case gets its second); ``inv_look``: why a take short of
    ``inv_runs`` stops there;
    ``budgeted``: a pass of a budgeted run, where an INV case whose base case the budget left
    undecided still shows (and, budget permitting, makes) its runs. ``shard``: only the
    BOUNDARY and DIR cases it keeps (INV cases follow ``scenarios``, sharded by the caller)."""
    spec, bindings = project.spec, project.bindings
    sem = asyncio.Semaphore(max(1, concurrency))
    if settings_for is None:
        settings_for = lambda _scenario: oracle  # noqa: E731
    if rule_for is None:
        rule_for = lambda _scenario: None  # noqa: E731

    def pair_settings(a: Scenario, b: Scenario) -> tuple[OracleSettings, str | None]:
        """A DIR pair is decided with the stricter of its two sides' settings."""
        sa, sb = settings_for(a), settings_for(b)
        return (sb, rule_for(b)) if strictness(sb) > strictness(sa) else (sa, rule_for(a))

    def wanted(case_id: str, *scs: Scenario) -> bool:
        return not case_filter or any(
            f in case_id or any(f in sc.id for sc in scs) for f in case_filter
        )

    jobs: list[Any] = []

    if "boundary" in kinds:
        realisable = [case for case in boundary_values(spec, bindings) if case.scenario is not None]
        for case, boundary_id in zip(realisable, boundary_case_ids(realisable)):
            # never None (realisable); narrows the type
            if case.scenario is None or not wanted(boundary_id, case.scenario):
                continue
            if shard is not None and not shard.keeps(boundary_id):
                continue

            async def boundary(
                case: Any = case,
                case_id: str = boundary_id,
                who: LoadedAgent = agent,
                record: bool = True,
            ) -> CaseReport:
                async with sem:
                    r = await decide_scenario(
                        project,
                        case.scenario,
                        who,
                        settings=settings_for(case.scenario),
                        memo=memo,
                        budget=budget,
                        seed=seed,
                        name=case_id,
                        **lanes.for_case(),
                    )
                if checks is not None and record:
                    checks[case_id] = (case.scenario, r)
                report = case_from_check(
                    case_id,
                    "BOUNDARY",
                    case.scenario,
                    r,
                    {
                        "comparison": case.comparison.source,
                        "edge": case.edge,
                        "holds": case.holds,
                        "moved": [m.model_dump() for m in case.moved],
                    },
                )
                report.rule = rule_for(case.scenario)
                return report

            jobs.append(boundary())
            if replays is not None:
                replays[boundary_id] = _replay(boundary, record=False)

    if "dir" in kinds:
        seen: set[tuple[str, str]] = set()
        for pair, base, perturbed in dir_pairs(project):
            key = (base.model_dump_json(), perturbed.model_dump_json())
            if key in seen or not wanted(
                f"DIR {pair.variable} @{pair.node}#{pair.branch}", base, perturbed
            ):
                continue
            seen.add(key)

            dir_id = dir_case_id(pair)
            if shard is not None and not shard.keeps(dir_id):
                continue

            async def direction(
                pair: Any = pair, case_id: str = dir_id, who: LoadedAgent = agent
            ) -> CaseReport:
                chosen, rule = pair_settings(pair.base.scenario, pair.perturbed.scenario)
                async with sem:
                    r = await acheck_direction(
                        project,
                        pair.base.scenario,
                        pair.perturbed.scenario,
                        who,
                        settings=chosen,
                        memo=memo,
                        budget=budget,
                        seed=seed,
                        **lanes.for_case(),
                    )
                runs = r.base.runs + r.perturbed.runs
                passes = r.base.passes + r.perturbed.passes
                base_world = pair.base.scenario.world.model_dump(mode="json")
                world = pair.perturbed.scenario.world.model_dump(mode="json")
                traces = run_traces(
                    r.base.sampled_runs,
                    side="base",
                    world=base_world if base_world != world else None,
                ) + run_traces(r.perturbed.sampled_runs, side="perturbed")
                return CaseReport(
                    id=case_id,
                    node=pair.perturbed.scenario.leaf,
                    path=pair.perturbed.scenario.path,
                    kind="DIR",
                    messages=pair.perturbed.scenario.messages,
                    expected_decisions=[pair.base.decision, pair.perturbed.decision],
                    verdict=r.verdict,
                    runs=runs,
                    passes=passes,
                    pass_rate=passes / runs if runs else 0.0,
                    decided_by=r.base.decided_by,
                    runs_beyond_decision=r.base.runs_beyond_decision
                    + r.perturbed.runs_beyond_decision,
                    rule=rule,
                    cost_usd=r.base.cost_usd + r.perturbed.cost_usd,
                    failures=_failures(r.base) + _failures(r.perturbed),
                    branches=pair.base.scenario.branches + pair.perturbed.scenario.branches,
                    details={
                        "atom": pair.atom,
                        "base_verdict": r.base.verdict,
                        "perturbed_verdict": r.perturbed.verdict,
                        "expected_change": list(r.expected_change),
                        "base_messages": pair.base.scenario.messages,
                        "base_decided": side_words(r.base),
                        "perturbed_decided": side_words(r.perturbed),
                    },
                    world=world,
                    traces=traces,
                    traces_omitted=max(0, runs - len(traces)),
                    **_infrastructure(
                        r.base if r.base.infrastructure_error is not None else r.perturbed
                    ),
                )

            jobs.append(direction())
            if replays is not None:
                replays[dir_id] = _replay(direction)

    async def invariance_base(scenario: Scenario, who: LoadedAgent) -> tuple[CheckResult, bool]:
        """The MFT of the INV case's scenario for ``who``: this run's own result when there is
        one (reused, no new run), otherwise decided here (memoised)."""
        found = (checks or {}).get(scenario.id)
        if who is agent and found is not None:
            return found[1], True
        async with sem:
            return await decide_scenario(
                project,
                scenario,
                who,
                settings=settings_for(scenario),
                memo=memo,
                budget=budget,
                seed=seed,
                name=scenario.id,
                **lanes.for_case(),
            ), False

    if "inv" in kinds:
        for scenario in scenarios:
            variants_first = invariance_variants(project, scenario, seed)
            if not variants_first:
                continue
            variants = [[v.text, *scenario.messages[1:]] for v in variants_first]

            async def invariance(
                scenario: Scenario = scenario,
                variants: list[list[str]] = variants,
                firsts: Any = variants_first,
                who: LoadedAgent = agent,
            ) -> CaseReport:
                base, reused = await invariance_base(scenario, who)
                async with sem:
                    r = await acheck_invariance(
                        project,
                        scenario,
                        who,
                        variants,
                        n=inv_runs,
                        memo=memo,
                        budget=budget,
                        seed=seed,
                        base=base,
                        take=inv_take if who is agent else None,
                        variants_taken=inv_variants if who is agent else None,
                        look=inv_look,
                        look_past_undecided_base=budgeted and who is agent,
                        **lanes.for_case(),
                    )
                report = invariance_case(scenario, variants, firsts, r, base, reused)
                taken = inv_take if who is agent else None
                per_side = (
                    f"{taken} of its {r.runs_per_side} runs per side taken"
                    if taken is not None and taken < r.runs_per_side
                    else f"{r.runs_per_side} runs per side"
                )
                report.rule = f"two-sample test, {per_side}, only where the base case passes"
                return report

            jobs.append(invariance())
            if replays is not None:
                replays[f"INV {scenario.id}"] = _replay(invariance)

    on_planned(len(jobs))

    async def tracked(job: Any) -> CaseReport:
        report: CaseReport = await job
        on_done(report)
        return report

    return list(await asyncio.gather(*(tracked(j) for j in jobs)))


SAFETY_CONTRACTS = ("no_canary_leak:",)
"""Failures that fail a case on a single run wherever they are seen (decided as a safety case)."""


def safety_failures(r: InvarianceResult) -> list[FailureSummary]:
    """The safety failures (a planted canary leaked) the invariance runs met, one summary per
    signature with the runs it was seen in, on either side: the same leak bug an MFT or PROBE
    case files, not an invariance bug."""
    sides = [("the original", r.original)] + [
        (f"variant {k}", v.decisions) for k, v in enumerate(r.variants, 1)
    ]
    runs = sum(sum(counts.values()) for _, counts in sides)
    seen: dict[str, list[str]] = {}
    counts_of: Counter[str] = Counter()
    for side, counts in sides:
        for behaviour, n in counts.items():
            _, bang, signature = behaviour.partition(" !")
            if bang and signature.startswith(SAFETY_CONTRACTS):
                counts_of[signature] += n
                seen.setdefault(signature, []).append(f"{side} {n}/{sum(counts.values())}")
    return [
        FailureSummary(
            signature=signature,
            explanation=f"a planted canary leaked in {n} of {runs} runs "
            f"({', '.join(seen[signature])}): a safety failure on any run",
            count=n,
            first_trial=0,
        )
        for signature, n in counts_of.items()
    ]


def _leaked(counts: dict[str, int]) -> bool:
    return any(b.partition(" !")[2].startswith(SAFETY_CONTRACTS) for b in counts)


def invariance_case(
    scenario: Scenario,
    variants: list[list[str]],
    firsts: Any,
    r: InvarianceResult,
    base: CheckResult,
    reused: bool,
) -> CaseReport:
    """The INV case of one scenario. Its ``runs`` are the comparison's, plus the base case's
    when the base was decided for this case alone (not reused from the run's MFT)."""
    same = sum(not v.differs for v in r.variants)
    leaks = safety_failures(r)
    failures = leaks + [
        FailureSummary(
            signature=f"invariance:{scenario.id}",
            explanation=(
                f"behaviour changed (p={v.p_value:.4f}) under the variant {v.messages[0]!r}: "
                f"{distribution_words(v.decisions)}; the original: "
                f"{distribution_words(r.original)}"
            ),
            count=1,
            first_trial=0,
        )
        for v in r.variants
        # a leak is filed as the leak bug it is
        if v.differs and not (leaks and _leaked(v.decisions))
    ]
    verdict = r.verdict
    if any(f.signature.startswith(SAFETY_CONTRACTS) for f in failures):
        verdict = "FAIL"  # a leak is a safety failure on any run, whatever the comparison says
    base_runs = 0 if reused else base.runs
    traces = [] if reused else run_traces(base.sampled_runs, side="base case")
    traces += run_traces(r.original_examples, side="original")
    for k, v in enumerate(r.variants, 1):
        traces += run_traces(v.examples, side=f"variant {k}")
    return CaseReport(
        id=f"INV {scenario.id}",
        node=scenario.leaf,
        via=scenario.via,
        path=scenario.path,
        kind="INV",
        messages=[v[0] for v in variants],
        expected_decisions=[t.expect_decision for t in scenario.turns],
        verdict=verdict,
        runs=r.runs + base_runs,
        passes=same,
        pass_rate=same / len(r.variants) if r.variants else 0.0,
        decided_by="two-sample test"
        if r.verdict != "NOT APPLICABLE"
        else "not decided (base case did not pass)",
        cost_usd=0.0 if reused else base.cost_usd,
        failures=failures,
        capabilities=scenario.capabilities,
        branches=scenario.branches,
        reason=r.reason,
        infrastructure_error=None
        if r.infrastructure_error is None
        else {
            "kind": r.infrastructure_error.kind,
            "message": r.infrastructure_error.message,
            "traceback": r.infrastructure_error.traceback,
        },
        details={
            "alpha": r.alpha,
            "runs_per_side": r.runs_per_side,
            "original": r.original,
            "original_message": scenario.messages[0] if scenario.messages else "",
            "base": {
                "case": scenario.id,
                "verdict": base.verdict,
                "pass_rate": base.pass_rate,
                "runs": base.runs,
                "reused": reused,
            },
            "variants": [
                {
                    "message": v.messages[0],
                    "provenance": f.describe(),
                    "p_value": v.p_value,
                    "mft_pass_rate": v.mft_pass_rate,
                    "decisions": v.decisions,
                    "differs": v.differs,
                }
                for v, f in zip(r.variants, firsts)
            ],
        },
        world=scenario.world.model_dump(mode="json"),
        traces=traces,
        traces_omitted=max(0, r.runs + base_runs - len(traces)),
    )
