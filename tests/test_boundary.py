"""Boundary values: every numeric edge of the example specs, both sides, expectations checked
by evaluating the ``when`` ASTs independently of the module under test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

import agentprop
from agentprop import check, load_agent, load_project
from agentprop._scenario.build import Unsatisfiable
from agentprop._scenario.world import World, get_path
from agentprop._spec.bindings import Bindings, VariableBinding, empty_bindings, load_bindings
from agentprop._spec.load import load_spec
from agentprop._spec.model import Spec
from agentprop._spec.when import Compare, Literal, atoms, evaluate
from agentprop._spec.when import Path as VarPath
from agentprop.errors import InvalidArgument
from agentprop.strategies._internal.boundary import BoundaryCase, boundaries, boundary_values

REPO = Path(__file__).resolve().parents[1]
SPECSUITE = REPO / "tests" / "data" / "specsuite-core"  # vendored, see THIRD_PARTY.md there
EXAMPLES = ["supportops", "expenseguard", "datainsights"]

FAST = settings(
    deadline=None,
    database=None,
    max_examples=25,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)

MINI_SPEC = """
spec_id: refunds_test
title: Refund limits (a small spec for the boundary tests)
tools:
- name: get_order
  description: Fetch the order to refund.
  input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
  output_schema:
    type: object
    properties:
      amount: {type: number, minimum: 0}
      limit: {type: number, maximum: 1000}
      items: {type: integer, minimum: 1, maximum: 50}
      fee: {type: number}
      days: {type: integer}
    required: [amount, limit, items]
  failure_modes: [timeout]
- name: respond
  description: Submit the structured response.
  input_schema:
    type: object
    properties:
      decision: {type: string, enum: [REFUND, DENY, ESCALATE]}
    required: [decision]
policies:
- id: P1_BIG_REFUNDS
  text: If amount exceeds 500, a manager must approve the refund.
response_contract:
  required_json_fields: [decision]
  decision_enum: [REFUND, DENY, ESCALATE]
decision_tree:
- node_id: N1_CHECK
  requirements:
    must_call_tools_in_order: [get_order]
  branches:
  - when: amount > limit
    next: END_DENY
  - when: amount + fee > limit
    next: END_ESCALATE
  - when: items >= 10 and checked == true
    next: END_ESCALATE
  - when: days < 0
    next: END_DENY
  - when: otherwise
    next: END_REFUND
"""

MINI_BINDINGS = """
version: 1
utterances: ["Please refund my order.", "I want my money back for my order."]
world:
  get_order: {amount: 40.0, limit: 100.0, items: 3, fee: 0.5, days: 7}
variables:
  amount: {world: {tool: get_order, field: amount, precision: 0.5}}
  limit: {world: {tool: get_order, field: limit}}
  fee: {world: {tool: get_order, field: fee}}
  items: {world: {tool: get_order, field: items}}
  days: {world: {tool: get_order, field: days}}
  checked: {internal: true}
"""


# ----------------------------------------------------------------------------- helpers


def load_example(name: str) -> tuple[Spec, Bindings]:
    d = REPO / "examples" / name
    if not (d / "agentprop.yaml").is_file():
        pytest.skip(f"examples/{name}/agentprop.yaml is absent")
    spec = load_spec(d / "spec.yaml")
    return spec, load_bindings(d / "agentprop.yaml", spec)


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> tuple[Spec, Bindings]:
    d = tmp_path_factory.mktemp("mini")
    (d / "spec.yaml").write_text(MINI_SPEC)
    (d / "agentprop.yaml").write_text(MINI_BINDINGS)
    spec = load_spec(d / "spec.yaml")
    return spec, load_bindings(d / "agentprop.yaml", spec)


def first_match(spec: Spec, b: Bindings, node_id: str, env: dict[str, Any]) -> int | None:
    """First-match-wins at a node, evaluated straight from the AST."""
    for i, br in enumerate(spec.nodes_by_id[node_id].branches):
        if br.clause.expr is None or evaluate(br.clause.expr, env):
            return i
    return None


def numeric_atoms(spec: Spec) -> list[tuple[str, int, Compare]]:
    """Numeric comparisons of the tree, found by the test's own rule."""
    out = []
    for node in spec.decision_tree:
        for i, br in enumerate(node.branches):
            for a in atoms(br.clause):
                if isinstance(a, Compare) and (
                    a.op in (">", ">=", "<", "<=")
                    or any(
                        isinstance(s, Literal)
                        and isinstance(s.value, (int, float))
                        and not isinstance(s.value, bool)
                        for s in (a.left, a.right)
                    )
                ):
                    out.append((node.node_id, i, a))
    return out


def world_value(spec: Spec, case_world: dict[str, dict[str, Any]], tool: str, field: str) -> Any:
    return get_path(World(spec=spec, overrides=case_world).default_output(tool), field)


def check_case(spec: Spec, b: Bindings, c: BoundaryCase) -> None:
    """Everything a case claims, re-derived from the spec."""
    env = c.assignment
    for m in c.moved:
        if m.variable is not None:
            assert env[m.variable] == m.value or (m.value is None and env[m.variable] is None)
    if c.comparison.origin == "decision_tree":
        node = spec.nodes_by_id[c.comparison.node]
        atom = next(
            a
            for a in atoms(node.branches[c.comparison.branch].clause)
            if str(a) == c.comparison.source
        )
        assert evaluate(atom, env) is c.holds
    if c.expected is not None:
        branch = first_match(spec, b, c.comparison.node, env)
        assert c.expected.branch == branch
        if branch is not None:
            assert c.expected.next == spec.nodes_by_id[c.comparison.node].branches[branch].next
    # the route is the chain of first matches from the root
    for step in c.route.steps:
        assert step.branch == first_match(spec, b, step.node, env)
    if c.scenario is not None:
        assert c.unrealisable is None
        assert c.scenario.path == c.route.nodes
        assert c.scenario.expect_decision == c.route.decision
        for m in c.moved:
            if m.tool is not None and m.field is not None and m.value is not None:
                assert world_value(spec, c.scenario.world.overrides, m.tool, m.field) == m.value
    else:
        assert c.unrealisable


# ----------------------------------------------------------------------------- coverage


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_numeric_comparison_has_both_sides(name: str) -> None:
    spec, b = load_example(name)
    cases = boundary_values(spec, b)
    found = numeric_atoms(spec)
    for node, branch, atom in found:
        for side in (atom.left, atom.right):
            if not isinstance(side, VarPath):
                continue
            var = b.variables.get(side.dotted)
            mine = [
                c
                for c in cases
                if c.comparison.node == node
                and c.comparison.branch == branch
                and c.comparison.source == str(atom)
                and c.moved[0].variable == side.dotted
            ]
            if var is None or var.internal:
                assert not mine
                assert any(
                    s.variable == side.dotted and s.comparison == str(atom) for s in cases.skipped
                )
                continue
            assert {c.holds for c in mine} == {True, False}, f"{atom} moving {side.dotted}"
            edge = mine[0].edge
            values = {c.moved[0].value for c in mine}
            skipped = {
                s.value
                for s in cases.skipped
                if s.variable == side.dotted and s.comparison == str(atom)
            }
            for v in (edge - 1, edge, edge + 1):  # every integer edge triple is a case or skipped
                assert v in values or v in skipped
    for c in cases:
        check_case(spec, b, c)


def test_supportops_window_edge_is_placed_by_the_bindings() -> None:
    spec, b = load_example("supportops")
    window = b.world["get_plan_rules"]["cancel_window_days"]
    cases = boundary_values(spec, b, node="N5_CANCEL_ELIGIBILITY")
    days = {c.moved[0].value: c for c in cases if c.moved[0].variable == "order.days_since_created"}
    assert {window - 1, window, window + 1} <= set(days)
    # `>`: the edge itself and below keep the order cancellable, above denies it
    denied_next = spec.nodes_by_id["N5_CANCEL_ELIGIBILITY"].branches[1].next
    assert days[window + 1].expected.next == denied_next
    assert days[window].expected.next != denied_next
    assert days[window].scenario is not None and days[window + 1].scenario is not None
    assert days[window].scenario.expect_decision != days[window + 1].scenario.expect_decision
    # binding `min: 0` excludes negatives, listed as skipped
    assert any(s.label == "negative" and "min" in s.reason for s in cases.skipped)
    # the field is optional in the orders schema: "missing" is a case
    assert None in days


def test_boundary_cases_catch_the_window_off_by_one() -> None:
    """The reference agent passes every edge value; its `>=`-instead-of-`>` fault fails exactly
    at the edge, which the default leaf scenario (an order well inside the window) misses."""
    if not (REPO / "examples" / "supportops" / "agent.py").is_file():
        pytest.skip("the SupportOps reference agent is absent")
    project = load_project(REPO / "examples" / "supportops")
    cases = [
        c
        for c in boundary_values(
            project.spec, project.bindings, node="N5_CANCEL_ELIGIBILITY"
        ).realisable
        if c.moved[0].variable == "order.days_since_created"
        and c.moved[0].label in ("t-1", "t", "t+1")
    ]
    assert len(cases) == 3
    good = load_agent(project.bindings.agent, project.base_dir)
    bad = load_agent(project.bindings.agent, project.base_dir, faults={"window_off_by_one": 1.0})

    def passed(agent: object, scenario: object) -> bool:
        return check(
            project, scenario, agent, raise_on_failure=False, settings=agentprop.settings(runs=3)
        ).passed  # type: ignore[arg-type]

    assert all(passed(good, c.scenario) for c in cases)
    assert {c.moved[0].label for c in cases if not passed(bad, c.scenario)} == {"t"}
    leaf = project.scenario("END_CANCELLED<-N7_CANCEL")
    assert passed(bad, leaf)


def test_datainsights_finite_bindings_add_nearest_realisable_values() -> None:
    spec, b = load_example("datainsights")
    cases = boundary_values(spec, b, node="N4_RUN_SQL")
    listed = sorted(v for v in b.variables["row_count"].utterance if isinstance(v, int))
    row = [c for c in cases if c.comparison.source == "row_count > 0"]
    by_value = {c.moved[0].value: c for c in row}
    assert by_value[1].scenario is None and "realises only" in (by_value[1].unrealisable or "")
    above = min(v for v in listed if v > 0)
    assert by_value[above].moved[0].label == "nearest-above"
    assert by_value[above].scenario is not None and by_value[above].holds
    assert by_value[0].scenario is not None and not by_value[0].holds
    # a negative count matches no branch of N4_RUN_SQL: reported, not invented
    assert by_value[-1].expected is not None and by_value[-1].expected.branch is None
    assert by_value[-1].route.stop and by_value[-1].scenario is None


def test_number_precision_schema_bounds_arithmetic_and_internal(
    mini: tuple[Spec, Bindings],
) -> None:
    spec, b = mini
    cases = boundary_values(spec, b)
    for c in cases:
        check_case(spec, b, c)
    limit = b.world["get_order"]["limit"]
    amount = {
        c.moved[0].value
        for c in cases
        if c.comparison.source == "amount > limit" and c.moved[0].variable == "amount"
    }
    assert {limit - 0.5, limit, limit + 0.5} <= amount  # the binding's precision
    moved_limit = {
        c.moved[0].value
        for c in cases
        if c.comparison.source == "amount > limit" and c.moved[0].variable == "limit"
    }
    a0 = b.world["get_order"]["amount"]
    assert {round(a0 - 0.01, 2), a0, round(a0 + 0.01, 2)} <= moved_limit  # default precision 0.01
    # "large" respects the schema maximum, "negative" the schema minimum
    assert 1000 in moved_limit and 1_000_000_000.0 not in moved_limit
    assert any(
        s.variable == "amount" and s.label == "negative" and "minimum" in s.reason
        for s in cases.skipped
    )
    # optional field: missing is a case; required field: missing is skipped
    assert any(c.moved[0].variable == "days" and c.moved[0].value is None for c in cases)
    assert any(
        s.variable == "limit" and s.label == "missing" and "required" in s.reason
        for s in cases.skipped
    )
    # schema bounds are edges of their own; values outside the schema are skipped
    schema = [c for c in cases if c.comparison.origin == "output_schema"]
    assert {(c.moved[0].variable, c.moved[0].value) for c in schema} >= {
        ("amount", 0),
        ("items", 1),
        ("items", 50),
        ("limit", 1000),
    }
    assert any(
        s.variable == "items" and s.value == 51 and "outside the output_schema" in s.reason
        for s in cases.skipped
    )
    # variables inside arithmetic are not moved, and say so
    arith = [s for s in cases.skipped if s.comparison == "(amount + fee) > limit"]
    assert {s.variable for s in arith if "arithmetic" in s.reason} == {"amount", "fee"}
    # the policy's number is an edge too, for the bound field
    policy = [c for c in cases if c.comparison.origin == "policy"]
    assert {c.moved[0].value for c in policy} >= {499.5, 500.0, 500.5}
    assert all(c.holds == (c.moved[0].value > 500) for c in policy)


def test_internal_variables_are_reported_not_moved() -> None:
    spec, b = load_example("supportops")
    b2 = b.model_copy(deep=True)
    b2.variables["plan_rules.cancel_window_days"] = VariableBinding(internal=True)
    cases = boundary_values(spec, b2)
    assert not any(m.variable == "plan_rules.cancel_window_days" for c in cases for m in c.moved)
    reasons = [s.reason for s in cases.skipped if s.variable == "plan_rules.cancel_window_days"]
    assert reasons and all("not controllable" in r for r in reasons)
    # the other side depends on it, so days cannot be placed either: said, not dropped
    assert any(
        s.variable == "order.days_since_created" and "internal" in s.reason for s in cases.skipped
    )


def test_expenseguard_policy_threshold_moves_the_receipt_total() -> None:
    spec, b = load_example("expenseguard")
    cases = boundary_values(spec, b)
    assert not numeric_atoms(spec)  # the tree itself compares no numbers
    t = b.world["get_policy"]["receipt_required_over"]
    totals = {
        c.moved[0].value: c
        for c in cases
        if c.moved[0].field == "total" and c.moved[0].tool == "get_receipt"
    }
    for v in (round(t - 0.01, 2), t, round(t + 0.01, 2)):
        c = totals[v]
        assert c.comparison.policy == "P2_RECEIPT_REQUIRED"
        assert c.holds == (v > t)
        assert c.scenario is not None
        assert world_value(spec, c.scenario.world.overrides, "get_receipt", "total") == v
        # the scenario actually calls the tool whose output was moved
        assert any("get_receipt" in turn.required_tools for turn in c.scenario.turns)
        assert c.caveat and "get_receipt.total" in c.caveat
    # far values of a field no variable is bound to are left out, with the reason
    assert {s.label for s in cases.skipped if s.variable == "get_receipt.total"} >= {
        "large",
        "negative",
        "zero",
    }


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_shared_specs_without_bindings_list_every_comparison_as_skipped(
    name: str, version: str
) -> None:
    path = SPECSUITE / name / version / "spec.yaml"
    spec = load_spec(path)
    cases = boundary_values(spec, empty_bindings(spec))
    assert list(cases) == []
    for _node, _branch, atom in numeric_atoms(spec):
        assert any(s.comparison == str(atom) and "no binding" in s.reason for s in cases.skipped)


# ----------------------------------------------------------------------------- strategy


def test_boundaries_strategy_shrinks_to_the_first_case() -> None:
    spec, b = load_example("supportops")
    realisable = boundary_values(spec, b).realisable
    assert find(boundaries(spec, b), lambda c: True, settings=FAST) == realisable[0]
    first_holding = next(c for c in realisable if c.holds)
    assert find(boundaries(spec, b), lambda c: c.holds, settings=FAST) == first_holding


@pytest.mark.parametrize("name", ["supportops", "datainsights"])
def test_drawn_cases_are_consistent(name: str) -> None:
    spec, b = load_example(name)

    @FAST
    @given(boundaries(spec, b))
    def inner(case: BoundaryCase) -> None:
        assert case.scenario is not None
        check_case(spec, b, case)

    inner()


def test_boundaries_without_numeric_comparisons_is_unsatisfiable() -> None:
    spec, b = load_example("supportops")
    with pytest.raises(Unsatisfiable, match="no realisable boundary case"):
        boundaries(spec, b, node="N1_INTENT")


# ----------------------------------------------------------------------------- validation


def test_argument_validation() -> None:
    spec, b = load_example("supportops")
    with pytest.raises(InvalidArgument, match="load_spec"):
        boundary_values("spec.yaml", b)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="load_bindings"):
        boundary_values(spec, {"variables": {}})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="did you mean 'N5_CANCEL_ELIGIBILITY'"):
        boundary_values(spec, b, node="N5_CANCEL_ELIGIBILTY")
    with pytest.raises(InvalidArgument, match="terminal"):
        boundary_values(spec, b, node="END_CANCELLED")
    with pytest.raises(InvalidArgument, match="node id string"):
        boundary_values(spec, b, node=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="realisable_only"):
        boundaries(spec, b, realisable_only="yes")  # type: ignore[arg-type]


def test_a_variable_scaled_by_a_constant_gets_the_edge_of_the_comparison(tmp_path: Path) -> None:
    """Issue #23: ``items * 100 < days * 80`` (an 80% rule written in integers) used to move
    neither variable ("inside arithmetic"), so only 0/1 were tried and a stale 75% rule
    passed. Each side scaled by a constant is inverted: with days 30 the edge of ``items``
    is 24 (23, 24, 25 tried), with items 3 the edge of ``days`` is 3.75 (3 and 4)."""
    spec_text = MINI_SPEC.replace("  - when: days < 0\n", "  - when: items * 100 < days * 80\n", 1)
    assert spec_text != MINI_SPEC
    (tmp_path / "spec.yaml").write_text(spec_text)
    (tmp_path / "agentprop.yaml").write_text(MINI_BINDINGS.replace("days: 7}", "days: 30}"))
    spec = load_spec(tmp_path / "spec.yaml")
    b = load_bindings(tmp_path / "agentprop.yaml", spec)
    cases = [
        c for c in boundary_values(spec, b) if c.comparison.source == "(items * 100) < (days * 80)"
    ]
    for c in cases:
        check_case(spec, b, c)
    moved = {(c.moved[0].variable, c.moved[0].value): c.holds for c in cases}
    assert {
        ("items", 23): True,
        ("items", 24): False,
        ("items", 25): False,
    }.items() <= moved.items()
    assert {("days", 3): False, ("days", 4): True}.items() <= moved.items()
