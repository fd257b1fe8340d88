"""Semantic mutation testing: does the test suite catch a plausibly wrong agent?

TDAD's MutationSmith takes a *mutation intent* ("skip the authentication gate") and produces
an agent that behaves that way; an *activation probe* checks that the mutant really does; the
visible test suite then runs against every activated mutant. A mutant is **killed** when at
least one case fails, **survives** when every case passes (a blind spot of the suite) and is
**non-activating** when its probe never shows the intended violation (it is left out of the
score). The **mutation score** MS is killed / activated.

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

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentprop._agents import LoadedAgent
from agentprop._budget import Budget
from agentprop._check import acheck
from agentprop._memo import TrialMemo
from agentprop._oracle import OracleSettings
from agentprop._project import Project
from agentprop._report import CaseReport
from agentprop._scenario import Scenario, WorldSpec
from agentprop._trace import Trace
from agentprop._yaml_source import describe_loc, load_yaml
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
        raise InputError(f"no mutation {mutation_id!r} in pack {self.mutation_pack_id}", expected=f"one of {known}",
                         fix="check the id in the bindings' `mutations:` section")


def load_mutation_pack(path: str | Path) -> MutationPack:
    """Load a ``mutations.yaml`` (SpecSuite-Core format); errors name the file, line and fix."""
    src = load_yaml(path)
    if not isinstance(src.data, dict):
        raise InputError("a mutation pack must be a mapping at the top level", location=SourceLocation(Path(path), 1, 1),
                         expected="keys mutation_pack_id, generator, mutations", fix="see docs/tdad.md for the format")
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
    of its ``FAULTS``. Raises :class:`~agentprop.BindingsError` at the offending line."""
    from agentprop.errors import BindingsError

    src = project.bindings._src

    def fail(loc: tuple[Any, ...], problem: str, expected: str, fix: str) -> BindingsError:
        location = src.location(loc, key=True) if src is not None else None
        return BindingsError(problem, location=location, expected=expected, fix=fix)

    known = {m.id for m in pack.mutations}
    knobs = getattr(getattr(agent, "target", None), "FAULTS", None) if agent is not None else None
    ids = {s.id for s in project.scenarios()}
    for mid, binding in project.bindings.mutations.items():
        if mid not in known:
            raise fail(("mutations", mid), f"mutation {mid!r} is not an intent of mutation pack {pack.mutation_pack_id}",
                       f"one of {', '.join(m.id for m in pack.mutations)}", "use the pack's id (or remove the entry)")
        if knobs is not None:
            for knob, p in binding.faults.items():
                if knob not in knobs:
                    raise fail(("mutations", mid, "faults", knob), f"mutation {mid}: agent {agent.ref} has no fault knob {knob!r}",  # type: ignore[union-attr]
                               f"one of {', '.join(knobs)}", "name one of the agent's FAULTS under `faults:`")
                if not 0.0 <= p <= 1.0:
                    raise fail(("mutations", mid, "faults", knob), f"mutation {mid}: fault {knob}={p} is not a probability",
                               "a number between 0 and 1", "use 1.0 for a mutant that always misbehaves")
        if binding.probe.scenario is not None and binding.probe.scenario not in ids:
            raise fail(("mutations", mid, "probe", "scenario"), f"mutation {mid}: no scenario {binding.probe.scenario!r} for its probe",
                       "the full id of one of the spec's scenarios", "`agentprop run SPEC --kinds mft` lists the case ids")


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


class MutantResult(BaseModel):
    id: str
    severity: str
    category: str
    source: str
    status: Literal["killed", "survived", "non-activating", "inconclusive"]
    probe_runs: int = 0
    probe_violations: int = 0
    probe_explanation: str | None = None
    attempts: int = 1
    killed_by: str | None = None
    killing_failure: str | None = None
    cases_run: int = 0
    runs: int = 0
    cost_usd: float = 0.0

    def line(self) -> str:
        probe = f"probe {self.probe_violations}/{self.probe_runs}"
        if self.status == "killed":
            tail = f"KILLED by {self.killed_by}" + (f": {self.killing_failure}" if self.killing_failure else "")
        elif self.status == "survived":
            tail = f"SURVIVED all {self.cases_run} visible cases: the suite has a blind spot here"
        elif self.status == "non-activating":
            tail = "non-activating: the probe never showed the violation (left out of the score)"
        else:
            tail = "INCONCLUSIVE: the budget ran out"
        return f"{self.id:<28} {self.severity:<8} {probe:<11} {tail}"


class MutationReport(BaseModel):
    pack_id: str
    spec_id: str
    agent: str
    mutants: list[MutantResult] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    """Mutation ids of the pack with no mutant source (no knob bound, no prompt to mutate)."""
    runs: int = 0

    @property
    def killed(self) -> int:
        return sum(m.status == "killed" for m in self.mutants)

    @property
    def activated(self) -> int:
        return sum(m.status in ("killed", "survived") for m in self.mutants)

    @property
    def mutation_score(self) -> float | None:
        return self.killed / self.activated if self.activated else None

    def skipped_lines(self) -> list[str]:
        """One line per intent that had no mutant, saying how to give it one."""
        return [f"{mid:<28} {'':<8} {'':<11} not run: no mutant (bind a fault knob under the bindings' `mutations:`, "
                "or use a model agent: --agent anthropic)" for mid in self.skipped]

    def summary(self) -> str:
        lines = [m.line() for m in self.mutants] + self.skipped_lines()
        ms = self.mutation_score
        score = "n/a (no mutant activated)" if ms is None else f"{ms:.0%}"
        lines.append(f"MS {score}: {self.killed}/{self.activated} activated mutants killed; "
                     f"{sum(m.status == 'non-activating' for m in self.mutants)} non-activating, "
                     f"{len(self.skipped)} without a mutant; {self.runs} runs")
        return "\n".join(lines)


def probe_scenario(project: Project, scenario_id: str | None, mutation: Mutation) -> Scenario:
    """The world a probe runs in: a named scenario's, or the bindings' happy-path world."""
    if scenario_id:
        return project.scenario(scenario_id)
    return Scenario(id=f"PROBE {mutation.id}", spec_id=project.spec.spec_id, leaf=mutation.activation_probe.case, path=[],
                    turns=[], world=WorldSpec(overrides={t: dict(v) for t, v in project.bindings.world.items()}))


def fault_mutants(project: Project, pack: MutationPack, agent: LoadedAgent, make: Callable[[dict[str, float]], LoadedAgent]) -> list[Mutant]:
    """Mutants from the bindings' ``mutations:`` section (fault knobs of a Python agent)."""
    check_mutation_bindings(project, pack, agent)
    out = []
    for mid, binding in project.bindings.mutations.items():
        mutation = pack.get(mid)
        out.append(Mutant(
            mutation=mutation, agent=make({**agent.faults, **binding.faults}), source="faults",
            probe_turns=list(binding.probe.user_turns or mutation.activation_probe.user_turns),
            probe_scenario=probe_scenario(project, binding.probe.scenario, mutation),
        ))
    return out


async def _probe(project: Project, mutant: Mutant, runs: int, budget: Budget | None, seed: int) -> tuple[int, int, str | None]:
    violations, made, why = 0, 0, None
    for i in range(runs):
        if budget is not None and not budget.try_start_run():
            break
        trace = await project.arun(mutant.probe_scenario, mutant.agent.factory, trial=seed * 1_000_003 + 900_000 + i,
                                   agent_name=mutant.agent.ref, messages=mutant.probe_turns)
        made += 1
        reason = probe_violation(mutant.mutation.activation_probe.expect_violation, trace)
        if reason is not None:
            violations += 1
            why = why or reason
    return made, violations, why


Killer = tuple[str, Callable[[LoadedAgent], Awaitable[CaseReport]]]
"""``(case id, replay)``: a visible case that can be decided again for a mutant."""


def as_killers(project: Project, cases: Sequence[Scenario | Killer], *, settings: OracleSettings, memo: TrialMemo | None,
               budget: Budget | None, seed: int) -> list[Killer]:
    """Scenarios become MFT cases decided by the oracle; ``(id, replay)`` pairs (what
    ``agentprop tdad`` passes for BOUNDARY, DIR and INV cases) are kept as they are."""
    from agentprop._run_kinds import case_from_check

    memo = memo if memo is not None else TrialMemo()
    out: list[Killer] = []
    for case in cases:
        if isinstance(case, Scenario):
            async def replay(who: LoadedAgent, scenario: Scenario = case) -> CaseReport:
                r = await acheck(project, scenario, who, settings=settings, memo=memo, budget=budget, seed=seed, name=scenario.id)
                return case_from_check(scenario.id, "MFT", scenario, r, {})

            out.append((case.id, replay))
        else:
            out.append(case)
    return out


async def evaluate_mutant(
    project: Project,
    mutant: Mutant,
    cases: Sequence[Scenario | Killer],
    *,
    settings: OracleSettings,
    probe_runs: int = 3,
    budget: Budget | None = None,
    memo: TrialMemo | None = None,
    seed: int = 0,
    attempts: int = 1,
) -> MutantResult:
    """Probe the mutant, then decide ``cases`` on it until one FAILs."""
    m = mutant.mutation
    base = dict(id=m.id, severity=m.severity, category=m.category, source=mutant.source, attempts=attempts)
    made, violations, why = await _probe(project, mutant, probe_runs, budget, seed)
    if violations == 0:
        status = "inconclusive" if made < probe_runs else "non-activating"
        return MutantResult(status=status, probe_runs=made, probe_violations=0, runs=made, **base)  # type: ignore[arg-type]
    runs, cost = made, 0.0
    killers = as_killers(project, cases, settings=settings, memo=memo, budget=budget, seed=seed)
    for n, (case_id, replay) in enumerate(killers, 1):
        report = await replay(mutant.agent)
        runs += report.runs
        cost += report.cost_usd
        if report.verdict == "FAIL":
            failure = report.failures[0].explanation if report.failures else None
            return MutantResult(status="killed", probe_runs=made, probe_violations=violations, probe_explanation=why,
                                killed_by=case_id, killing_failure=failure, cases_run=n, runs=runs, cost_usd=cost, **base)  # type: ignore[arg-type]
        if report.verdict == "INCONCLUSIVE":
            return MutantResult(status="inconclusive", probe_runs=made, probe_violations=violations, probe_explanation=why,
                                cases_run=n, runs=runs, cost_usd=cost, **base)  # type: ignore[arg-type]
    return MutantResult(status="survived", probe_runs=made, probe_violations=violations, probe_explanation=why,
                        cases_run=len(killers), runs=runs, cost_usd=cost, **base)  # type: ignore[arg-type]


MutantFactory = Callable[[Mutation, int], Awaitable["Mutant | None"]]
"""``(mutation, attempt) -> Mutant`` for generated mutants (``None``: cannot make one)."""


async def amutation_test(
    project: Project,
    pack: MutationPack,
    agent: LoadedAgent,
    cases: Sequence[Scenario | Killer],
    *,
    mutants: Sequence[Mutant] = (),
    generate: MutantFactory | None = None,
    settings: OracleSettings | None = None,
    probe_runs: int = 3,
    budget: Budget | None = None,
    memo: TrialMemo | None = None,
    seed: int = 0,
    on_result: Callable[[MutantResult], None] | None = None,
) -> MutationReport:
    """Evaluate every mutation of ``pack``: the given ``mutants`` first (fault knobs), then,
    for the rest, mutants made by ``generate`` (prompt rewrites), retried up to the pack's
    ``max_attempts`` until one activates."""
    settings = settings or OracleSettings.for_spec(project.spec)
    report = MutationReport(pack_id=pack.mutation_pack_id, spec_id=project.spec.spec_id, agent=agent.ref)
    given = {m.mutation.id: m for m in mutants}
    for mutation in pack.mutations:
        result: MutantResult | None = None
        if mutation.id in given:
            result = await evaluate_mutant(project, given[mutation.id], cases, settings=settings, probe_runs=probe_runs,
                                           budget=budget, memo=memo, seed=seed)
        elif generate is not None:
            for attempt in range(1, pack.generator.max_attempts + 1):
                mutant = await generate(mutation, attempt)
                if mutant is None:
                    break
                result = await evaluate_mutant(project, mutant, cases, settings=settings, probe_runs=probe_runs,
                                               budget=budget, memo=memo, seed=seed + attempt - 1, attempts=attempt)
                if result.status != "non-activating":
                    break
        if result is None:
            report.skipped.append(mutation.id)
            continue
        report.mutants.append(result)
        report.runs += result.runs
        if on_result is not None:
            on_result(result)
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
    budget: Budget | None = None,
    memo: TrialMemo | None = None,
    seed: int = 0,
) -> MutationReport:
    """Mutation-test ``agent``'s suite: probe each mutant, then run ``cases`` (default: every
    MFT scenario of the project) on it until one fails.

    ``mutants`` defaults to the fault-knob mutants bound under the bindings' ``mutations:``
    (:func:`fault_mutants`); pass :class:`Mutant` objects to test others. Each case is decided
    by the oracle (``settings``, default the spec's); ``budget`` caps the runs.
    """
    from agentprop._check import as_loaded_agent
    from agentprop._sync import run_sync
    from agentprop.errors import InvalidArgument

    if not isinstance(probe_runs, int) or isinstance(probe_runs, bool) or probe_runs < 1:
        raise InvalidArgument(f"probe_runs={probe_runs!r} must be a positive int (3 is the default)")
    if mutants is not None and not all(isinstance(m, Mutant) for m in mutants):
        bad = next(m for m in mutants if not isinstance(m, Mutant))
        raise InvalidArgument(f"mutants must be a sequence of agentprop Mutant objects (see fault_mutants); got {bad!r}")
    loaded = as_loaded_agent(agent)
    p = pack if isinstance(pack, MutationPack) else load_mutation_pack(pack)
    chosen = list(mutants) if mutants is not None else fault_mutants(project, p, loaded, fault_knob_maker(loaded))
    suite = list(cases) if cases is not None else project.scenarios()
    return run_sync(amutation_test(project, p, loaded, suite, mutants=chosen, settings=settings, probe_runs=probe_runs,
                                   budget=budget, memo=memo, seed=seed))


def fault_knob_maker(agent: LoadedAgent) -> Callable[[dict[str, float]], LoadedAgent]:
    """``faults -> agent``: the same Python agent with other fault knobs turned on."""
    from agentprop._agents import make_factory

    def make(faults: dict[str, float]) -> LoadedAgent:
        target = getattr(agent, "target", None)
        if target is None:
            raise InputError(f"agent {agent.ref} cannot take fault knobs", expected="a Python agent class with a FAULTS table",
                             fix="fault-knob mutants need a Python agent; for a model agent use prompt mutants (--agent anthropic)")
        return make_factory(target, faults, ref=agent.ref)

    return make


# --- MutationSmith for model agents --------------------------------------------------------

MUTATIONSMITH_ROLE = (
    "You are MutationSmith. You rewrite the system prompt of a tool-using agent so that the agent "
    "shows one specific, plausible failure, for mutation testing of its test suite."
)


def mutationsmith_request(model: str, prompt: str, mutation: Mutation, generator: MutationGenerator) -> dict[str, Any]:
    """The Messages API request asking for one prompt mutant (what the API cache keys on)."""
    rules = "\n".join(f"- {c}" for c in generator.constraints)
    turns = "\n".join(f"  user: {t}" for t in mutation.activation_probe.user_turns)
    user = (
        f"Mutation intent {mutation.id} ({mutation.severity}, {mutation.category}):\n{mutation.intent}\n\n"
        f"Activation probe: in a conversation like this one the failure must show:\n{turns}\n\n"
        f"The system prompt that currently passes the visible tests:\n<prompt>\n{prompt}\n</prompt>"
    )
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": 4096,
        "system": MUTATIONSMITH_ROLE + ("\n\nRules:\n" + rules if rules else ""),
        "messages": [{"role": "user", "content": user}],
    }
    if generator.temperature is not None:
        body["temperature"] = generator.temperature
    return body


def _mutated_prompt(response: dict[str, Any]) -> str:
    text = "".join(b.get("text", "") for b in response.get("content", []) if isinstance(b, dict) and b.get("type") == "text").strip()
    if text.startswith("<prompt>") and text.endswith("</prompt>"):
        text = text[len("<prompt>"):-len("</prompt>")].strip()
    return text


def prompt_mutant_factory(model_agent: Any, project: Project, pack: MutationPack) -> MutantFactory:
    """Prompt mutants of a model agent (:class:`~agentprop.AnthropicAgent`): each attempt asks
    the same model, through the agent's API cache and budget, for the agent's system prompt
    rewritten to carry the mutation intent. The probe runs in the happy-path world unless the
    bindings' ``mutations:`` section says otherwise."""
    base_prompt = model_agent.system_for(project.spec, project.bindings.context)

    async def make(mutation: Mutation, attempt: int) -> Mutant | None:
        request = mutationsmith_request(model_agent.model, base_prompt, mutation, pack.generator)
        result = await model_agent.call_model(request, trial=attempt - 1, seed_parts=("mutationsmith", mutation.id))
        model_agent.charge(result)
        prompt = _mutated_prompt(result.response)
        if not prompt or prompt == base_prompt:
            return None
        binding = project.bindings.mutations.get(mutation.id)
        turns = (binding.probe.user_turns if binding is not None else None) or mutation.activation_probe.user_turns
        mutant_agent = model_agent.replace(system_prompt=prompt, name=f"{model_agent.ref}~{mutation.id}")
        return Mutant(
            mutation=mutation, agent=mutant_agent.loaded(), source="prompt", probe_turns=list(turns),
            probe_scenario=probe_scenario(project, binding.probe.scenario if binding is not None else None, mutation),
            prompt=prompt,
        )

    return make
