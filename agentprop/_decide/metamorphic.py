"""Metamorphic properties: invariance (INV) and direction (DIR), calibrated against noise.

INV runs the original and each variant ``n`` times and compares their behaviour distributions
with an exact two-sample test, Bonferroni-corrected over the variants: a variant fails only
beyond what sampling explains. DIR decides both sides of a flipped condition with the oracle;
the direction holds when both pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentprop._agents.loading import as_loaded_agent
from agentprop._agents.project import Project
from agentprop._decide.check import decide_scenario, scenario_settings
from agentprop._decide.memo import TrialMemo, trace_json
from agentprop._decide.oracle import CheckResult, OracleSettings, SampledRun, TrialRecord, adecide
from agentprop._decide.permits import RunPermits
from agentprop._decide.run_key import run_digest
from agentprop._decide.session import current_session, current_test
from agentprop._decide.settings import fold_deprecated, resolve
from agentprop._decide.settings import settings as AgentSettings
from agentprop._judge.case import compile_mft
from agentprop._judge.properties import first_failure
from agentprop._modelapi.budget import Budget
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import RunError, Trace
from agentprop._stats import categorical_two_sample_test
from agentprop._util.aio import run_sync
from agentprop.errors import AgentPropertyViolation, InvalidArgument

MetaVerdict = Literal["PASS", "FAIL", "INCONCLUSIVE", "NOT APPLICABLE"]
"""``NOT APPLICABLE``: the base case (the scenario's MFT) did not pass, so there is no correct
behaviour to keep invariant: two identically wrong sides would otherwise "pass"."""


def decision_signature(trace: Trace) -> str:
    """The decisions of a run, turn by turn (``ASK_CONFIRM_CANCEL>CANCELLED``); a broken run
    is ``ERROR:<kind>``. Invariance compares the distribution of this signature plus the MFT
    failure signature (``… !calls_in_order:…``), so a paraphrase that changes which tools run
    is caught even when the decision stays the same."""
    errors = trace.all_errors()
    if errors:
        return f"ERROR:{errors[0].kind}"
    return ">".join(d or "-" for d in trace.decisions)


MIN_RUNS_PER_SIDE = 5
"""The fewest runs a side an invariance test decides with (fewer tell noise from nothing)."""

EXAMPLES_PER_SIDE = 3
"""Runs kept for the report per side of an invariance test: the first of each behaviour."""


def behaviour_words(key: str) -> str:
    """A behaviour key (``A>B !signature@turn0:missing=x``) in words: ``A then B, failing
    signature (missing=x)``."""
    decisions, _, failing = key.partition(" !")
    text = " then ".join(d for d in decisions.split(">") if d) or "no decision"
    if failing:
        clause, _, rest = failing.partition("@")
        detail = rest.partition(":")[2]
        text += f", failing {clause}" + (f" ({detail})" if detail else "")
    return text


def distribution_words(counts: Mapping[str, int]) -> str:
    """``{'A>B': 11, 'A>B !sig': 9}`` -> ``11/20 A then B; 9/20 A then B, failing sig``."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    total = sum(n for _, n in items)
    return "; ".join(f"{n}/{total} {behaviour_words(k)}" for k, n in items) or "no runs"


def side_words(result: CheckResult) -> str:
    """What one side of a DIR pair did, in words: ``2/3 runs reached it; 1/3: turn 1 decided
    X; the spec expects Y`` (each failure's explanation, with how many runs it ended)."""
    text = f"{result.passes}/{result.runs} runs reached it"
    for f in result.failures:
        text += f"; {f.count}/{result.runs}: {f.explanation}"
    return text


class VariantResult(BaseModel):
    messages: list[str]
    decisions: dict[str, int]
    p_value: float
    mft_pass_rate: float
    differs: bool
    examples: list[SampledRun] = Field(default_factory=list, exclude=True, repr=False)
    """The first run of each behaviour (up to :data:`EXAMPLES_PER_SIDE`), for the report."""


class InvarianceResult(BaseModel):
    scenario: str
    verdict: MetaVerdict
    runs_per_side: int
    alpha: float
    original: dict[str, int]
    variants: list[VariantResult] = Field(default_factory=list)
    runs: int = 0
    budget_exhausted: bool = False
    reason: str | None = None
    original_examples: list[SampledRun] = Field(default_factory=list, exclude=True, repr=False)
    """The first run of each behaviour of the original (up to :data:`EXAMPLES_PER_SIDE`)."""
    """Why the verdict is NOT APPLICABLE (or INCONCLUSIVE before any comparison)."""
    base_verdict: str | None = None
    """The verdict of the base case (the scenario's MFT) the invariance was gated on."""
    infrastructure_error: RunError | None = None
    """The error, not the agent's, that stopped the comparison (see
    :class:`~agentprop.errors.InfrastructureError`)."""

    def summary(self) -> str:
        if self.verdict == "NOT APPLICABLE":
            return f"INV {self.scenario}: NOT APPLICABLE — {self.reason}"
        lines = [
            f"INV {self.scenario}: {self.verdict} (n={self.runs_per_side} per "
            f"side, alpha={self.alpha})",
            f"  original: {distribution_words(self.original)}",
        ]
        for v in self.variants:
            flag = "DIFFERS" if v.differs else "same"
            lines.append(
                f"  {flag:7} p={v.p_value:.4f} mft={v.mft_pass_rate:.0%} "
                f"{distribution_words(v.decisions)}  <- {v.messages[0][:60]!r}"
            )
        return "\n".join(lines)


def _behaviour(trace: Trace, failed: Any) -> str:
    """What an INV run is compared by: its decisions, and its first failure's signature if any."""
    return decision_signature(trace) + ("" if failed is None else f" !{failed.signature}")


def invariance_behaviour(project: Project, scenario: Scenario, trace: Trace) -> str:
    """The behaviour an INV side counts for one run of ``scenario`` (as
    :func:`acheck_invariance` judges it)."""
    case = compile_mft(project.spec, scenario, project.bindings.response_grounding(project.spec))
    return _behaviour(trace, first_failure(case.verdicts(trace)))


def compare_sides(
    original: Mapping[str, int], variants: Sequence[Mapping[str, int]], *, alpha: float, seed: int
) -> list[tuple[float, bool]]:
    """Each variant's p-value against the original (counts in the order first met) and whether it
    differs beyond ``alpha``, Bonferroni-corrected over ``variants``: the comparison
    :func:`acheck_invariance` makes, so a merge of sharded records can make it again."""
    corrected = alpha / len(variants) if variants else alpha
    out: list[tuple[float, bool]] = []
    for k, counts in enumerate(variants):
        p = side_p_value(original, counts, k=k, seed=seed)
        out.append((p, p < corrected))
    return out


def side_p_value(
    original: Mapping[str, int], counts: Mapping[str, int], *, k: int, seed: int
) -> float:
    """The p-value of variant ``k`` (0-based) against the original: the exact two-sample test,
    seeded by ``seed + k`` (its Monte Carlo fallback draws)."""
    return categorical_two_sample_test(dict(original), dict(counts), seed=seed + k)


async def _sample(
    project: Project,
    scenario: Scenario,
    loaded: Any,
    messages: Sequence[str],
    n: int,
    first_trial: int,
    memo: TrialMemo,
    budget: Budget | None,
    seed: int,
    examples: list[SampledRun] | None = None,
    concurrency: int = 1,
    permits: RunPermits | None = None,
) -> tuple[Counter[str], int, int, bool, RunError | None]:
    """Run ``messages`` ``n`` times; return behaviour counts, MFT passes, runs, budget_out
    and the error, not the agent's, that stopped the sampling (``None`` if none did).
    The runs are memoised like a check's (same key: the MFT check of the same messages shares
    them, finished or still in flight); the behaviour and the MFT verdict are worked out from
    each trace every time. Up to ``concurrency`` runs are in flight (all ``n`` are needed).
    ``examples`` receives the first run of each behaviour (up to :data:`EXAMPLES_PER_SIDE`)."""
    counts: Counter[str] = Counter()
    case = compile_mft(project.spec, scenario, project.bindings.response_grounding(project.spec))
    trial = {"next": first_trial}

    async def run_trial(i: int) -> Trace:
        return await project.arun(
            scenario, loaded.factory, trial=i, agent_name=loaded.ref, messages=list(messages)
        )

    def judge(trace: Trace) -> TrialRecord:
        failed = first_failure(case.verdicts(trace))
        behaviour = _behaviour(trace, failed)
        if examples is not None and behaviour not in counts and len(examples) < EXAMPLES_PER_SIDE:
            examples.append(
                SampledRun(
                    trial=trial["next"],
                    passed=failed is None,
                    signature=None if failed is None else failed.signature,
                    explanation=f"behaviour {behaviour}" if failed is None else failed.explanation,
                    clause=None if failed is None else failed.clause,
                    turn=None if failed is None else failed.turn,
                    step=None if failed is None else failed.step,
                    trace_json=trace_json(trace),
                )
            )
        counts[behaviour] += 1
        trial["next"] += 1  # the test is fed in trial order
        return TrialRecord(passed=failed is None)

    result = await adecide(
        run_trial,
        OracleSettings(mode="fixed", runs=n),
        judge=judge,
        name=f"INV {scenario.id}",
        memo=memo,
        input_digest=run_digest(project, scenario, messages, seed),
        fingerprint=loaded.fingerprint,
        budget=budget,
        concurrency=concurrency,
        first_trial=first_trial,
        permits=permits,
    )
    return counts, result.passes, result.runs, result.budget_exhausted, result.infrastructure_error


async def acheck_invariance(
    project: Project,
    scenario: Scenario,
    agent: Any,
    variants: Sequence[Sequence[str]],
    *,
    n: int = 20,
    alpha: float = 0.05,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    seed: int = 0,
    base: CheckResult | None = None,
    concurrency: int = 1,
    permits: RunPermits | None = None,
    take: int | None = None,
    look_past_undecided_base: bool = False,
    variants_taken: int | None = None,
    look: str = "a look of the budget's passes",
) -> InvarianceResult:
    """Compare the behaviour under each variant with the original's.

    ``base`` is the decided MFT of ``scenario`` for this agent: unless it is PASS, the
    invariance is not decided (NOT APPLICABLE, with the reason; INCONCLUSIVE when the base ran
    out of budget) and no run is spent on it. ``look_past_undecided_base`` (a budgeted run's
    passes): a base the budget left undecided with clean runs only still lets the comparison's
    runs be sampled, as far as the budget goes, and the verdict stays INCONCLUSIVE.

    ``take`` (a look of a budgeted run's pass): sample only that many runs a side (the same
    trials a full comparison starts with, so the passes share them); fewer than ``n`` a side
    decide nothing (INCONCLUSIVE, the runs per side in the reason). ``variants_taken`` (the
    first look of a budgeted run): sample only the first that many variants, so that every case
    gets a run before any case gets its second; the others wait for the next pass. ``look``
    says why a ``take`` short of ``n`` stopped there (the reason of the INCONCLUSIVE verdict)."""
    if not variants:
        raise InvalidArgument(
            "check_invariance needs at least one variant (a list of messages per variant)"
        )
    if n < MIN_RUNS_PER_SIDE:
        raise InvalidArgument(
            f"n={n} runs per side is too few to tell noise from change; use n >= "
            f"{MIN_RUNS_PER_SIDE} (20 is the default)"
        )
    for v in variants:
        if len(v) != len(scenario.turns):
            raise InvalidArgument(
                f"each variant needs {len(scenario.turns)} message(s), one per turn of "
                f"{scenario.id}; got {len(v)}"
            )
    undecided = (
        look_past_undecided_base
        and base is not None
        and base.verdict == "INCONCLUSIVE"
        and not base.failures
        and base.infrastructure_error is None
        and base.runs > 0
    )
    if base is not None and base.verdict != "PASS" and not undecided:
        return not_applicable(scenario, base, n=n, alpha=alpha)
    loaded = as_loaded_agent(agent)
    memo = memo if memo is not None else current_session().memo
    first_trial = seed * 1_000_003
    want = n if take is None else max(1, min(take, n))
    original_examples: list[SampledRun] = []
    original, _, runs, out, infra = await _sample(
        project,
        scenario,
        loaded,
        scenario.messages,
        want,
        first_trial,
        memo,
        budget,
        seed,
        original_examples,
        concurrency,
        permits,
    )
    results: list[VariantResult] = []
    sides = [runs]
    total = runs
    corrected = alpha / len(variants)
    for k, v in enumerate(variants):
        if infra is not None or (variants_taken is not None and k >= variants_taken):
            break
        # independent samples: each side gets its own trial indices (the two-sample test
        # assumes independence; shared indices would pair simulated agents' random draws);
        # a look takes the first of the same trials the full comparison runs
        examples: list[SampledRun] = []
        # a budget that refused the original's next run still shows each variant's runs made before
        counts, passes, r, refused, infra = await _sample(
            project,
            scenario,
            loaded,
            v,
            want,
            first_trial + (k + 1) * n,
            memo,
            budget,
            seed,
            examples,
            concurrency,
            permits,
        )
        out = out or refused
        total += r
        sides.append(r)
        if r < n:
            continue
        p = side_p_value(original, counts, k=k, seed=seed)
        results.append(
            VariantResult(
                messages=list(v),
                decisions=dict(counts),
                p_value=p,
                mft_pass_rate=passes / r,
                differs=p < corrected,
                examples=examples,
            )
        )
    short = runs < n or len(results) < len(variants)
    if out or infra is not None or short or undecided:
        verdict: MetaVerdict = "INCONCLUSIVE"
    else:
        verdict = "FAIL" if any(r.differs for r in results) else "PASS"
    reason = (
        None
        if infra is None
        else f"not the agent's ({infra.kind}): "
        f"{infra.message.splitlines()[0] if infra.message else infra.kind}"
    )
    if reason is None and verdict == "INCONCLUSIVE":
        sides += [0] * (len(variants) + 1 - len(sides))
        why = "the budget stopped it" if out or take is None else look
        parts = (
            [
                f"{why} at {'/'.join(map(str, sides))} of {n} runs per side (original/variants): "
                "nothing compared yet"
            ]
            if short
            else []
        )
        if undecided and base is not None:
            parts.append(
                f"its base case {scenario.id} is undecided ({base.passes}/{base.runs} clean "
                "runs): invariance is decided only where it passes"
            )
        reason = "; ".join(parts) or None
    return InvarianceResult(
        scenario=scenario.id,
        verdict=verdict,
        runs_per_side=n,
        alpha=alpha,
        original=dict(original),
        variants=results,
        runs=total,
        budget_exhausted=out,
        base_verdict=base.verdict if base is not None else None,
        original_examples=original_examples,
        reason=reason,
        infrastructure_error=infra,
    )


def not_applicable(
    scenario: Scenario, base: CheckResult, *, n: int, alpha: float
) -> InvarianceResult:
    """The invariance of a scenario whose base case did not pass: NOT APPLICABLE with the
    reason (INCONCLUSIVE when the base itself ran out of budget: it may yet pass)."""
    seen = f"{base.verdict}, pass rate {base.pass_rate:.0%} ({base.passes}/{base.runs})"
    if base.verdict == "INCONCLUSIVE":
        return InvarianceResult(
            scenario=scenario.id,
            verdict="INCONCLUSIVE",
            runs_per_side=n,
            alpha=alpha,
            original={},
            budget_exhausted=base.budget_exhausted,
            base_verdict=base.verdict,
            infrastructure_error=base.infrastructure_error,
            reason=f"its base case {scenario.id} is undecided ({seen}): invariance is decided "
            "only where the base case passes",
        )
    first = f"; first failure: {base.failures[0].explanation}" if base.failures else ""
    return InvarianceResult(
        scenario=scenario.id,
        verdict="NOT APPLICABLE",
        runs_per_side=n,
        alpha=alpha,
        original={},
        base_verdict=base.verdict,
        reason=(
            f"its base case {scenario.id} does not pass ({seen}{first}): there is no correct "
            "behaviour for a paraphrase to keep, so the invariance is not decided "
            "and counts for nothing"
        ),
    )


class DirectionResult(BaseModel):
    base: CheckResult
    perturbed: CheckResult
    expected_change: tuple[str | None, str | None]
    verdict: Literal["PASS", "FAIL", "UNSTABLE", "INCONCLUSIVE"]

    def summary(self) -> str:
        a, b = self.expected_change
        return (
            f"DIR {a} -> {b}: {self.verdict}\n  base: {self.base.summary()}\n  perturbed: "
            f"{self.perturbed.summary()}"
        )


async def acheck_direction(
    project: Project,
    base: Scenario,
    perturbed: Scenario,
    agent: Any,
    *,
    settings: OracleSettings | None = None,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    seed: int = 0,
    concurrency: int = 1,
    permits: RunPermits | None = None,
) -> DirectionResult:
    change = (base.expect_decision, perturbed.expect_decision)
    if change[0] == change[1] and base.leaf == perturbed.leaf:
        raise InvalidArgument(
            f"base {base.id} and perturbed {perturbed.id} expect the same outcome ({change[0]}); "
            "a direction test needs a perturbation that changes the spec's decision"
        )
    a = await decide_scenario(
        project,
        base,
        agent,
        settings=settings,
        memo=memo,
        budget=budget,
        seed=seed,
        name=f"DIR base {base.id}",
        concurrency=concurrency,
        permits=permits,
    )
    b = await decide_scenario(
        project,
        perturbed,
        agent,
        settings=settings,
        memo=memo,
        budget=budget,
        seed=seed,
        name=f"DIR perturbed {perturbed.id}",
        concurrency=concurrency,
        permits=permits,
    )
    order = ["FAIL", "UNSTABLE", "INCONCLUSIVE", "PASS"]
    verdict = min((a.verdict, b.verdict), key=order.index)
    return DirectionResult(base=a, perturbed=b, expected_change=change, verdict=verdict)


def check_invariance(
    project: Project,
    scenario: Scenario | str,
    agent: Any,
    variants: Sequence[Sequence[str]],
    *,
    n: int = 20,
    alpha: float = 0.05,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    seed: int | None = None,
    raise_on_failure: bool = True,
    require_base: bool = True,
    settings: AgentSettings | None = None,
) -> InvarianceResult:
    """The decisions under each variant (one message per turn) are distributed like the
    original's. Raises :class:`~agentprop.AgentPropertyViolation` unless PASS.

    With ``require_base`` (the default) the scenario's MFT is decided first (the oracle, with
    the scenario's settings; memoised); unless it passes, the result is NOT APPLICABLE and
    its ``runs`` are the base case's. ``require_base=False`` compares the distributions
    whatever the base case does (to study the two-sample test itself). The base case's
    settings and the seed are resolved like :func:`agentprop.check`'s (``settings``, then the
    scope: profile, marker, ``@settings``, ``with settings``); ``seed=`` is the deprecated
    spelling of ``settings=agentprop.settings(seed=...)`` (a ``DeprecationWarning`` says so)."""
    __tracebackhide__ = True  # a failure points at the test's line, not at agentprop's source
    settings = fold_deprecated("check_invariance", settings, seed=seed)
    sc = project.scenario(scenario) if isinstance(scenario, str) else scenario
    resolved = resolve(settings)
    base = None
    if require_base:
        oracle = scenario_settings(
            project, sc, max_runs=resolved.max_runs, explicit=resolved.explicit()
        ).settings
        base = run_sync(
            decide_scenario(
                project,
                sc,
                agent,
                settings=oracle,
                memo=memo if memo is not None else current_session().memo,
                budget=budget,
                seed=resolved.seed,
                name=f"INV base {sc.id}",
            )
        )
    result = run_sync(
        acheck_invariance(
            project,
            sc,
            agent,
            variants,
            n=n,
            alpha=alpha,
            memo=memo,
            budget=budget,
            seed=resolved.seed,
            base=base,
        )
    )
    if base is not None:
        result.runs += base.runs
    if raise_on_failure and result.verdict != "PASS":
        raise AgentPropertyViolation(result)
    return result


def check_direction(
    project: Project,
    base: Scenario | str,
    perturbed: Scenario | str,
    agent: Any,
    *,
    memo: TrialMemo | None = None,
    budget: Budget | None = None,
    seed: int | None = None,
    raise_on_failure: bool = True,
    settings: AgentSettings | None = None,
) -> DirectionResult:
    """Both sides decide what the spec expects, so the decision moves as the spec says.
    Raises :class:`~agentprop.AgentPropertyViolation` unless both sides pass. Settings and
    seed are resolved like :func:`agentprop.check`'s (``seed=`` is the deprecated spelling of
    ``settings=agentprop.settings(seed=...)``); the stricter side's oracle decides both."""
    __tracebackhide__ = True  # a failure points at the test's line, not at agentprop's source
    a = project.scenario(base) if isinstance(base, str) else base
    b = project.scenario(perturbed) if isinstance(perturbed, str) else perturbed
    from agentprop._decide.safety import stricter

    settings = fold_deprecated("check_direction", settings, seed=seed)
    resolved = resolve(settings)
    sides = [
        scenario_settings(project, sc, max_runs=resolved.max_runs, explicit=resolved.explicit())
        for sc in (a, b)
    ]
    oracle = stricter(*sides).settings
    result = run_sync(
        acheck_direction(
            project, a, b, agent, settings=oracle, memo=memo, budget=budget, seed=resolved.seed
        )
    )
    session = current_session()
    session.record(current_test(), result.base)
    session.record(current_test(), result.perturbed)
    if raise_on_failure and result.verdict != "PASS":
        raise AgentPropertyViolation(result)
    return result
