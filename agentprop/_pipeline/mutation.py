"""Semantic mutation testing: does the test suite catch a plausibly wrong agent?

TDAD's MutationSmith takes a *mutation intent* ("skip the authentication gate") and produces
an agent that behaves that way; an *activation probe* checks that the mutant really does; the
visible test suite then runs against every activated mutant. A mutant is **killed** when at
least one case the clean agent passes fails on it, **survives** when every such case passes
(a blind spot of the suite) and is **non-activating** when its probe does not show the
intended violation (it is left out of the score). The **mutation score** MS is killed /
activated.

The probe has a **control**: it also runs on the clean agent (:func:`activation_decision`). A
mutant is activated only when it shows the violation significantly more often than the clean
agent (one-sided Fisher exact test at ``probe_alpha``); a probe the clean agent itself fires,
with the mutant not shown to fire it more often, is **vacuous**: it cannot tell a mutant from
a correct agent, so the mutant is reported with both firing rates and left out of MS. A case
that the clean agent does not pass (FAIL, UNSTABLE, ...) kills nothing: it is not run on the
mutants and is listed as such.

Mutation packs are SpecSuite-Core's ``mutations.yaml`` files, loaded unchanged
(:func:`load_mutation_pack`). Mutants come from one of two sources:

* **Fault knobs** (Python agents): the bindings map a mutation id to knobs of the agent,
  ``mutations: {SKIP_AUTH_GATE: {faults: {skip_auth: 1.0}}}``. A knob is a hand-written
  mutant of the agent's code.
* **Prompts** (model agents): :func:`generate_prompt_mutant` asks a model, through the Messages
  API, for the agent's system prompt rewritten to carry the intent, under the pack's generator
  constraints; up to ``max_attempts`` rewrites are tried until one activates.

Each case on a mutant is decided by the oracle, exactly as in ``agentprop run``, so a noisy
mutant is killed only by a failure the oracle is sure of.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.project import Project
from agentprop._decide.check import decide_scenario
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import OracleSettings
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES, Provider, TextPrompt
from agentprop._pipeline.report.model import CaseReport
from agentprop._scenario.build import Scenario, WorldSpec
from agentprop._scenario.trace import Trace
from agentprop._stats.two_sample import fisher_exact_greater
from agentprop._util.yaml_source import describe_loc, load_yaml
from agentprop.errors import InputError, SourceLocation


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class OrderViolation(_Strict):
    must_not_happen: list[str] = Field(min_length=2)
    """Tools in an order the spec forbids: the violation is each called before the next."""


class TraceViolation(_Strict):
    called: list[str] = Field(default_factory=list)
    not_called: list[str] = Field(default_factory=list)
    order_violation: OrderViolation | None = None


class TextViolation(_Strict):
    contains_any: list[str] = Field(default_factory=list)
    not_contains_any: list[str] = Field(default_factory=list)


class FieldIn(_Strict):
    field: str
    allowed: list[Any]


class JsonViolation(_Strict):
    field_in: FieldIn | None = None


class ExpectViolation(_Strict):
    """What a run of the probe shows when the mutation is active; every stated part must hold."""

    trace: TraceViolation | None = None
    text: TextViolation | None = None
    json_: JsonViolation | None = Field(None, alias="json")


class ActivationProbe(_Strict):
    case: str
    user_turns: list[str] = Field(min_length=1)
    expect_violation: ExpectViolation


class Mutation(_Strict):
    id: str
    severity: str
    category: str
    intent: str
    activation_probe: ActivationProbe


class MutationGenerator(_Strict):
    role: str = "MutationSmith"
    temperature: float | None = None
    max_attempts: int = Field(5, ge=1)
    constraints: list[str] = Field(default_factory=list)


class MutationPack(_Strict):
    """A SpecSuite-Core mutation pack: the intents a good test suite must catch."""

    mutation_pack_id: str
    spec_lineage: str = ""
    applies_to: dict[str, Any] = Field(default_factory=dict)
    generator: MutationGenerator = Field(default_factory=MutationGenerator)
    mutations: list[Mutation] = Field(min_length=1)

    def get(self, mutation_id: str) -> Mutation:
        for m in self.mutations:
            if m.id == mutation_id:
                return m
        known = ", ".join(m.id for m in self.mutations)
        raise InputError(
            f"no mutation {mutation_id!r} in pack {self.mutation_pack_id}",
            expected=f"one of {known}",
            fix="check the id in the bindings' `mutations:` section",
        )


def load_mutation_pack(path: str | Path) -> MutationPack:
    """Load a ``mutations.yaml`` (SpecSuite-Core format); errors name the file, line and fix."""
    src = load_yaml(path)
    if not isinstance(src.data, dict):
        raise InputError(
            "a mutation pack must be a mapping at the top level",
            location=SourceLocation(Path(path), 1, 1),
            expected="keys mutation_pack_id, generator, mutations",
            fix="see docs/tdad.md for the format",
        )
    try:
        return MutationPack.model_validate(src.data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(err["loc"])
        raise InputError(
            f"invalid mutation pack at {describe_loc(loc) or 'the top level'}: {err['msg']}",
            location=src.location(loc, key=err["type"] == "extra_forbidden"),
            expected="the SpecSuite-Core mutation pack format (docs/tdad.md)",
            fix="correct the value at that line",
        ) from None


def check_mutation_bindings(project: Project, pack: MutationPack, agent: LoadedAgent | None = None) -> None:
    """Check the bindings' ``mutations:`` section before anything runs: every id is an intent of
    ``pack``, every probe scenario exists and, for a Python ``agent``, every fault knob is one
    of its ``FAULTS``. Raises :class:`~agentprop.errors.BindingsError` at the offending line."""
    from agentprop.errors import BindingsError

    src = project.bindings._src

    def fail(loc: tuple[Any, ...], problem: str, expected: str, fix: str) -> BindingsError:
        location = src.location(loc, key=True) if src is not None else None
        return BindingsError(problem, location=location, expected=expected, fix=fix)

    known = {m.id for m in pack.mutations}
    knobs = getattr(getattr(agent, "target", None), "FAULTS", None) if agent is not None else None
    ids = {s.id for s in project.scenarios()}
    worlds: dict[str, list[Scenario]] | None = None
    for mid, binding in project.bindings.mutations.items():
        if mid not in known:
            raise fail(
                ("mutations", mid),
                f"mutation {mid!r} is not an intent of mutation pack {pack.mutation_pack_id}",
                f"one of {', '.join(m.id for m in pack.mutations)}",
                "use the pack's id (or remove the entry)",
            )
        if agent is not None and knobs is not None:
            for knob, p in binding.faults.items():
                if knob not in knobs:
                    raise fail(
                        ("mutations", mid, "faults", knob),
                        f"mutation {mid}: agent {agent.ref} has no fault knob {knob!r}",
                        f"one of {', '.join(knobs)}",
                        "name one of the agent's FAULTS under `faults:`",
                    )
                if not 0.0 <= p <= 1.0:
                    raise fail(
                        ("mutations", mid, "faults", knob),
                        f"mutation {mid}: fault {knob}={p} is not a probability",
                        "a number between 0 and 1",
                        "use 1.0 for a mutant that always misbehaves",
                    )
        named = binding.probe.scenario
        if named is None or named in ids:
            continue
        if named.startswith(("BOUNDARY ", "DIR ")):
            worlds = worlds if worlds is not None else case_worlds(project)
            if len(worlds.get(named, [])) == 1:
                continue
            problem = (
                f"mutation {mid}: {named!r} names {len(worlds[named])} different cases"
                if named in worlds
                else f"mutation {mid}: no BOUNDARY or DIR case {named!r} for its probe"
            )
            raise fail(
                ("mutations", mid, "probe", "scenario"),
                problem,
                "the id of one BOUNDARY or DIR case, as `agentprop run` reports it",
                "`agentprop run SPEC --kinds boundary,dir` lists the case ids",
            )
        raise fail(
            ("mutations", mid, "probe", "scenario"),
            f"mutation {mid}: no scenario {named!r} for its probe",
            "the full id of one of the spec's scenarios, or of a BOUNDARY or DIR case",
            "`agentprop run SPEC` lists the case ids",
        )


def find_mutation_pack(project: Project) -> Path | None:
    """``mutations.yaml`` next to the spec, or one directory up (SpecSuite-Core's layout)."""
    here = project.spec_path.parent
    for candidate in (here / "mutations.yaml", here.parent / "mutations.yaml"):
        if candidate.is_file():
            return candidate
    return None


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
    """One-sided Fisher exact p-value: the mutant fires the probe no more often than the clean agent."""
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
        return f"probe {self.probe_violations}/{self.probe_runs} vs clean {self.control_violations}/{self.control_runs}"

    def line(self) -> str:
        probe = self.rates()
        if self.status == "killed":
            tail = f"KILLED by {self.killed_by}" + (f": {self.killing_failure}" if self.killing_failure else "")
        elif self.status == "survived" and self.cases_counted == 0:
            tail = "SURVIVED: the suite has no visible case the clean agent passes to kill it"
            if self.not_applicable:
                tail += f" ({self.not_applicable} not applicable on the mutant, counted for nothing)"
        elif self.status == "survived":
            tail = f"SURVIVED all {self.cases_counted} visible cases the clean agent passes: the suite has a blind spot here"
            if self.not_applicable:
                tail += f" ({self.not_applicable} more not applicable, counted for nothing)"
        elif self.status == "vacuous":
            why = f" ({self.control_explanation})" if self.control_explanation else ""
            tail = (
                f"VACUOUS probe: the clean agent shows the violation in {self.control_violations}/{self.control_runs} runs{why}, "
                "so it cannot tell this mutant from a correct agent (left out of the score; move the probe: the bindings' "
                "`mutations:` probe scenario/user_turns)"
            )
        elif self.status == "non-activating":
            p = "" if self.probe_p_value is None else f", p={self.probe_p_value:.3g}"
            tail = f"non-activating: the probe did not show the violation more often on the mutant than on the clean agent{p} (left out of the score)"
        else:
            tail = "INCONCLUSIVE: the budget ran out"
        if self.uncounted and self.status in ("killed", "survived"):
            tail += f"; {len(self.uncounted)} visible cases the clean agent does not pass cannot kill it"
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
            f"{mid:<28} {'':<8} {'':<26} not run: no mutant (bind a fault knob under the bindings' `mutations:`, "
            "or use a model agent: --agent anthropic)"
            for mid in self.skipped
        ]

    def clean_not_passing_lines(self) -> list[str]:
        """One line per visible case that kills nothing because the clean agent does not pass it."""
        return [f"cannot kill: {cid} (the clean agent's verdict is {verdict})" for cid, verdict in self.clean_not_passing.items()]

    def summary(self) -> str:
        lines = [m.line() for m in self.mutants] + self.skipped_lines() + self.clean_not_passing_lines()
        ms = self.mutation_score
        score = "n/a (no mutant activated)" if ms is None else f"{ms:.0%}"
        lines.append(
            f"MS {score}: {self.killed}/{self.activated} activated mutants killed; "
            f"{self.vacuous} vacuous probes, {self.non_activating} non-activating, "
            f"{len(self.skipped)} without a mutant; {len(self.clean_not_passing)} cases the clean agent does not pass "
            f"cannot kill; {self.runs} runs"
        )
        return "\n".join(lines)


def case_worlds(project: Project) -> dict[str, list[Scenario]]:
    """``case id -> scenarios`` for the BOUNDARY and DIR cases of ``agentprop run`` (ids as in
    its report): a probe may run in any of their worlds. A DIR id stands for its perturbed
    side; ``"<DIR id> (base)"`` names the base side. Some ids are shared by several cases."""
    from agentprop.strategies._internal.boundary import boundary_values
    from agentprop.strategies._internal.directional import directional_pairs

    out: dict[str, list[Scenario]] = {}
    for case in boundary_values(project.spec, project.bindings):
        if case.scenario is None:
            continue
        moved = ", ".join(f"{m.name}={m.value!r}" for m in case.moved)
        where = case.comparison.policy or case.comparison.node or case.comparison.location
        out.setdefault(f"BOUNDARY {moved} @{where}", []).append(case.scenario)
    for pair in directional_pairs(project.spec, project.bindings):
        if not (pair.realisable and pair.changes_decision) or pair.base.scenario is None or pair.perturbed.scenario is None:
            continue
        dir_id = f"DIR {pair.variable}: {pair.base_value!r} -> {pair.perturbed_value!r} @{pair.node}#{pair.branch}"
        out.setdefault(dir_id, []).append(pair.perturbed.scenario)
        out.setdefault(f"{dir_id} (perturbed)", []).append(pair.perturbed.scenario)
        out.setdefault(f"{dir_id} (base)", []).append(pair.base.scenario)
    return {k: _distinct(v) for k, v in out.items()}


def _distinct(scenarios: list[Scenario]) -> list[Scenario]:
    seen: dict[str, Scenario] = {}
    for sc in scenarios:
        seen.setdefault(sc.model_dump_json(), sc)
    return list(seen.values())


def resolve_probe_world(project: Project, scenario_id: str) -> Scenario:
    """The scenario whose world a probe names: an MFT scenario id (or a unique substring of
    one), or a BOUNDARY / DIR case id exactly as ``agentprop run`` reports it."""
    from agentprop.errors import InvalidArgument

    if scenario_id.startswith(("BOUNDARY ", "DIR ")):
        worlds = case_worlds(project)
        found = worlds.get(scenario_id)
        if not found:
            close = difflib.get_close_matches(scenario_id, list(worlds), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InvalidArgument(
                f"no BOUNDARY or DIR case {scenario_id!r} in {project.spec.spec_id}; {hint}`agentprop run SPEC --kinds boundary,dir` lists their ids"
            )
        if len(found) > 1:
            raise InvalidArgument(
                f"{scenario_id!r} names {len(found)} different cases (their ids coincide); "
                "name an MFT scenario or another BOUNDARY/DIR case for the probe"
            )
        return found[0]
    return project.scenario(scenario_id)


def probe_scenario(project: Project, scenario_id: str | None, mutation: Mutation) -> Scenario:
    """The world a probe runs in: a named scenario's (MFT, BOUNDARY or DIR case, see
    :func:`resolve_probe_world`), or the bindings' happy-path world."""
    if scenario_id:
        return resolve_probe_world(project, scenario_id)
    return Scenario(
        id=f"PROBE {mutation.id}",
        spec_id=project.spec.spec_id,
        leaf=mutation.activation_probe.case,
        path=[],
        turns=[],
        world=WorldSpec(overrides={t: dict(v) for t, v in project.bindings.world.items()}),
    )


def fault_mutants(project: Project, pack: MutationPack, agent: LoadedAgent, make: Callable[[dict[str, float]], LoadedAgent]) -> list[Mutant]:
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


def activation_decision(mutant_fired: int, mutant_runs: int, clean_fired: int, clean_runs: int, alpha: float = PROBE_ALPHA) -> ActivationDecision:
    """Did the mutant activate? The rule compares the two samples of the probe:

    * **activated** when the mutant shows the violation significantly more often than the
      clean agent: the one-sided Fisher exact test of "mutant rate <= clean rate" rejects at
      ``alpha`` (``fisher_exact_greater(mutant_fired, mutant_runs, clean_fired, clean_runs)``);
    * otherwise **vacuous** when the clean agent fired the probe at least once: the probe
      does not separate a mutant from a correct agent;
    * otherwise **non-activating**: neither fired it (enough).

    ``mutant_runs`` may be 0 (the control alone already shows the probe is vacuous).
    """
    p = fisher_exact_greater(mutant_fired, mutant_runs, clean_fired, clean_runs) if mutant_runs else 1.0
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
    project: Project, agent: LoadedAgent, scenario: Scenario, turns: list[str], expect: ExpectViolation, runs: int, budget: Budget | None, seed: int
) -> ProbeSample:
    """``runs`` runs of a probe (``turns`` in ``scenario``'s world) on ``agent``. Trial ``i`` is
    the same for every agent, so the mutant and its control see the same draws."""
    out = ProbeSample()
    for i in range(runs):
        if budget is not None and not budget.try_start_run():
            return out.model_copy(update={"complete": False})
        trace = await project.arun(scenario, agent.factory, trial=seed * 1_000_003 + 900_000 + i, agent_name=agent.ref, messages=turns)
        out.runs += 1
        reason = probe_violation(expect, trace)
        if reason is not None:
            out.violations += 1
            out.explanation = out.explanation or reason
    return out


async def _probe(project: Project, mutant: Mutant, runs: int, budget: Budget | None, seed: int) -> tuple[int, int, str | None]:
    sample = await sample_probe(
        project, mutant.agent, mutant.probe_scenario, mutant.probe_turns, mutant.mutation.activation_probe.expect_violation, runs, budget, seed
    )
    return sample.runs, sample.violations, sample.explanation


def _control_key(mutant: Mutant) -> str:
    return "\x00".join(
        [mutant.probe_scenario.model_dump_json(), *mutant.probe_turns, mutant.mutation.activation_probe.expect_violation.model_dump_json()]
    )


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
                r = await decide_scenario(project, scenario, who, settings=settings, memo=memo, budget=budget, seed=seed, name=scenario.id)
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


async def _control(project: Project, mutant: Mutant, controls: Controls, budget: Budget | None) -> ProbeSample:
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
    base: dict[str, Any] = dict(id=m.id, severity=m.severity, category=m.category, source=mutant.source, attempts=attempts)
    runs_before = controls.runs
    control = await _control(project, mutant, controls, budget)
    base.update(control_runs=control.runs, control_violations=control.violations, control_explanation=control.explanation)
    if not control.complete:
        return MutantResult(status="inconclusive", runs=controls.runs - runs_before, **base)
    best = activation_decision(probe_runs, probe_runs, control.violations, control.runs, controls.probe_alpha)
    if best.status == "vacuous":  # even a mutant firing every time could not be told from the clean agent
        return MutantResult(status="vacuous", probe_p_value=1.0, runs=controls.runs - runs_before, **base)
    made, violations, why = await _probe(project, mutant, probe_runs, budget, seed)
    runs = controls.runs - runs_before + made
    base.update(probe_runs=made, probe_violations=violations, probe_explanation=why)
    if made < probe_runs:
        return MutantResult(status="inconclusive", runs=runs, **base)
    decision = activation_decision(violations, made, control.violations, control.runs, controls.probe_alpha)
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
            base["not_applicable"] = base.get("not_applicable", 0) + 1  # its base case fails on this mutant: it kills nothing
            continue
        run_on_mutant += 1
        if report.verdict == "INCONCLUSIVE":
            return MutantResult(status="inconclusive", cases_run=run_on_mutant, uncounted=uncounted, runs=runs, cost_usd=cost, **base)
        if report.verdict != "FAIL":
            continue
        if clean_verdict is None:  # a kill needs a case the clean agent passes: decide it once
            clean_report = await killer.replay(controls.clean)
            runs += clean_report.runs
            cost += clean_report.cost_usd
            if clean_report.verdict == "INCONCLUSIVE":
                return MutantResult(status="inconclusive", cases_run=run_on_mutant, uncounted=uncounted, runs=runs, cost_usd=cost, **base)
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


def check_control_runs(control_runs: object, probe_runs: int, probe_alpha: float = PROBE_ALPHA) -> int:
    """``control_runs`` (``None``: :func:`default_control_runs`), checked to be enough for the
    activation rule to be able to say "activated"."""
    from agentprop.errors import InvalidArgument

    if control_runs is None:
        return default_control_runs(probe_runs, probe_alpha)
    if not isinstance(control_runs, int) or isinstance(control_runs, bool) or control_runs < 1:
        raise InvalidArgument(f"control_runs={control_runs!r} must be a positive int (None: {default_control_runs(probe_runs, probe_alpha)})")
    need = min_control_runs(probe_runs, probe_alpha)
    if control_runs < need:
        raise InvalidArgument(
            f"control_runs={control_runs} is too few: with probe_runs={probe_runs} no mutant could be told from the "
            f"clean agent at probe_alpha={probe_alpha}; use at least {need} (or leave it None)"
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
    controls = Controls(clean=agent, control_runs=check_control_runs(control_runs, probe_runs, probe_alpha), probe_alpha=probe_alpha, seed=seed)
    for case in cases:
        if isinstance(case, KillerCase) and case.clean_verdict is not None:
            controls.verdicts.setdefault(case.id, case.clean_verdict)
    report = MutationReport(pack_id=pack.mutation_pack_id, spec_id=project.spec.spec_id, agent=agent.ref, probe_alpha=probe_alpha)
    given = {m.mutation.id: m for m in mutants}
    for mutation in pack.mutations:
        result: MutantResult | None = None
        if mutation.id in given:
            result = await evaluate_mutant(
                project, given[mutation.id], cases, settings=settings, controls=controls, probe_runs=probe_runs, budget=budget, memo=memo, seed=seed
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
                if result.status != "non-activating":  # a vacuous probe is the same for every rewrite
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

    if not isinstance(probe_runs, int) or isinstance(probe_runs, bool) or probe_runs < 1:
        raise InvalidArgument(f"probe_runs={probe_runs!r} must be a positive int (3 is the default)")
    if not isinstance(probe_alpha, float) or not 0.0 < probe_alpha < 1.0:
        raise InvalidArgument(f"probe_alpha={probe_alpha!r} must be a float strictly between 0 and 1 (0.05 is the default)")
    check_control_runs(control_runs, probe_runs, probe_alpha)
    if mutants is not None and not all(isinstance(m, Mutant) for m in mutants):
        bad = next(m for m in mutants if not isinstance(m, Mutant))
        raise InvalidArgument(f"mutants must be a sequence of agentprop Mutant objects (see fault_mutants); got {bad!r}")
    loaded = as_loaded_agent(agent)
    p = pack if isinstance(pack, MutationPack) else load_mutation_pack(pack)
    chosen = list(mutants) if mutants is not None else fault_mutants(project, p, loaded, fault_knob_maker(loaded))
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
                fix="fault-knob mutants need a Python agent; for a model agent use prompt mutants (--agent anthropic)",
            )
        return make_factory(target, faults, ref=agent.ref)

    return make


# --- MutationSmith for model agents --------------------------------------------------------

MUTATIONSMITH_ROLE = (
    "You are MutationSmith. You rewrite the system prompt of a tool-using agent so that the agent "
    "shows one specific, plausible failure, for mutation testing of its test suite."
)


def mutationsmith_prompt(prompt: str, mutation: Mutation, generator: MutationGenerator) -> TextPrompt:
    """What MutationSmith is asked for one prompt mutant, in any provider's terms."""
    rules = "\n".join(f"- {c}" for c in generator.constraints)
    turns = "\n".join(f"  user: {t}" for t in mutation.activation_probe.user_turns)
    user = (
        f"Mutation intent {mutation.id} ({mutation.severity}, {mutation.category}):\n{mutation.intent}\n\n"
        f"Activation probe: in a conversation like this one the failure must show:\n{turns}\n\n"
        f"The system prompt that currently passes the visible tests:\n<prompt>\n{prompt}\n</prompt>"
    )
    system = MUTATIONSMITH_ROLE + ("\n\nRules:\n" + rules if rules else "")
    return TextPrompt(system=system, user=user, max_tokens=4096, temperature=generator.temperature)


def mutationsmith_request(
    model: str, prompt: str, mutation: Mutation, generator: MutationGenerator, provider: Provider = ANTHROPIC_MESSAGES
) -> dict[str, Any]:
    """The request body asking for one prompt mutant in ``provider``'s API (what the API cache
    keys on)."""
    return provider.text_body(model, mutationsmith_prompt(prompt, mutation, generator))


def _mutated_prompt(text: str) -> str:
    text = text.strip()
    if text.startswith("<prompt>") and text.endswith("</prompt>"):
        text = text[len("<prompt>") : -len("</prompt>")].strip()
    return text


def prompt_mutant_factory(model_agent: Any, project: Project, pack: MutationPack) -> MutantFactory:
    """Prompt mutants of a model agent (:class:`~agentprop.agents.AnthropicAgent`,
    :class:`~agentprop.agents.OpenAIAgent`): each attempt asks
    the same model, through the agent's API cache and budget, for the agent's system prompt
    rewritten to carry the mutation intent. The probe runs in the happy-path world unless the
    bindings' ``mutations:`` section says otherwise."""
    base_prompt = model_agent.system_for(project.spec, project.bindings.context)

    async def make(mutation: Mutation, attempt: int) -> Mutant | None:
        ask = mutationsmith_prompt(base_prompt, mutation, pack.generator)
        text, _ = await model_agent.complete_text(ask, trial=attempt - 1, seed_parts=("mutationsmith", mutation.id))
        prompt = _mutated_prompt(text)
        if not prompt or prompt == base_prompt:
            return None
        binding = project.bindings.mutations.get(mutation.id)
        turns = (binding.probe.user_turns if binding is not None else None) or mutation.activation_probe.user_turns
        mutant_agent = model_agent.replace(system_prompt=prompt, name=f"{model_agent.ref}~{mutation.id}")
        return Mutant(
            mutation=mutation,
            agent=mutant_agent.loaded(),
            source="prompt",
            probe_turns=list(turns),
            probe_scenario=probe_scenario(project, binding.probe.scenario if binding is not None else None, mutation),
            prompt=prompt,
        )

    return make
