"""Mutation packs: SpecSuite-Core's ``mutations.yaml`` as models, loaded unchanged; the bindings
that turn a mutation into a mutant; the worlds a probe runs in.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.project import Project
from agentprop._scenario.build import Scenario, WorldSpec
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


def check_mutation_bindings(
    project: Project, pack: MutationPack, agent: LoadedAgent | None = None
) -> None:
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
        if (
            not (pair.realisable and pair.changes_decision)
            or pair.base.scenario is None
            or pair.perturbed.scenario is None
        ):
            continue
        dir_id = (
            f"DIR {pair.variable}: {pair.base_value!r} -> {pair.perturbed_value!r} "
            f"@{pair.node}#{pair.branch}"
        )
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
                f"no BOUNDARY or DIR case {scenario_id!r} in {project.spec.spec_id}; "
                f"{hint}`agentprop run SPEC --kinds boundary,dir` lists their ids"
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
