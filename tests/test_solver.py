"""The one solver (agentprop._scenario.solver): case compilation and the strategies ask the
same object, so what ``solve`` picks for a path is what the tree walk says that path is."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprop._scenario.solver import Solver, solve
from agentprop._spec.bindings import load_bindings
from agentprop._spec.load import load_spec
from agentprop._spec.paths import enumerate_paths
from agentprop.errors import Unsatisfiable
from agentprop.strategies._internal.scenarios import Context

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PROJECTS = sorted(p.parent.name for p in EXAMPLES.glob("*/agentprop.yaml"))


def _load(name: str):
    spec = load_spec(EXAMPLES / name / "spec.yaml")
    return spec, load_bindings(EXAMPLES / name / "agentprop.yaml", spec)


@pytest.mark.parametrize("project", PROJECTS)
def test_the_walk_of_a_solved_assignment_follows_its_path(project: str) -> None:
    spec, bindings = _load(project)
    solver = Solver(spec, bindings)
    walked = 0
    for path in enumerate_paths(spec):
        if path.missing is not None or path.loop_step is not None:
            continue
        try:
            env = solver.solve(path)
        except Unsatisfiable:
            continue
        route, _ = solver.walk(env)
        assert route.path_id == path.id, f"{project}: solve({path.id}) = {env} walks {route}"
        walked += 1
    assert walked >= 2, f"{project}: only {walked} paths solved"


@pytest.mark.parametrize("project", PROJECTS)
def test_the_strategies_context_is_the_solver(project: str) -> None:
    """The strategies' context adds realising to the solver and nothing else: same defaults,
    same assignments."""
    spec, bindings = _load(project)
    ctx, solver = Context(spec, bindings), Solver(spec, bindings)
    assert isinstance(ctx, Solver)
    for name in bindings.variables:
        assert ctx.default(name) == solver.default(name)
    for path in enumerate_paths(spec):
        try:
            expected = solve(spec, bindings, path)
        except Unsatisfiable:
            continue
        assert ctx.solve(path) == expected


def _spec_with_internal(tmp_path: Path, condition: str):
    (tmp_path / "spec.yaml").write_text(
        f"""spec_id: internal_numbers
title: An internal number (the agent's own risk score)
tools:
- name: get_account
  description: Fetch the account.
  input_schema: {{type: object, properties: {{account_id: {{type: string}}}}, required: [account_id]}}
  output_schema: {{type: object, properties: {{status: {{type: string}}}}}}
- name: respond
  description: Submit the structured response.
  input_schema: {{type: object, properties: {{decision: {{type: string, enum: [HIGH, LOW]}}}}, required: [decision]}}
response_contract:
  required_json_fields: [decision]
  decision_enum: [HIGH, LOW]
decision_tree:
- node_id: N1_SCORE
  branches:
  - when: {condition}
    next: END_HIGH
  - when: otherwise
    next: END_LOW
""",  # noqa: E501
        encoding="utf-8",
    )
    (tmp_path / "agentprop.yaml").write_text(
        'version: 1\nutterances: ["How risky is my account?"]\nvariables:\n  '
        "risk: {internal: true}\n",
        encoding="utf-8",
    )
    spec = load_spec(tmp_path / "spec.yaml")
    return spec, load_bindings(tmp_path / "agentprop.yaml", spec)


@pytest.mark.parametrize("condition", ["risk > 5", "risk < 5", "risk >= 5", "risk == 5"])
def test_an_internal_number_compared_strictly_is_solvable_both_ways(
    tmp_path: Path, condition: str
) -> None:
    """An internal variable takes the constants it is compared with and one either side, so
    ``risk > 5`` is satisfiable (5 alone was not) and so is its ``otherwise``."""
    spec, bindings = _spec_with_internal(tmp_path, condition)
    solver = Solver(spec, bindings)
    taken = set()
    for path in enumerate_paths(spec):
        env = solver.solve(path)
        route, _ = solver.walk(env)
        assert route.path_id == path.id
        taken.add(route.leaf)
    assert taken == {"END_HIGH", "END_LOW"}
