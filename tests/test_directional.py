"""Directional pairs: exactly one atom of the branch flips, and the branch choice the pair
states is the one the ``when`` ASTs give on each side (re-evaluated here)."""

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
from agentprop._spec.when import atoms, evaluate, variables
from agentprop.errors import InvalidArgument
from agentprop.strategies._internal.directional import (
    DirectionalPair,
    directional,
    directional_pairs,
)

REPO = Path(__file__).resolve().parents[1]
SPECSUITE = REPO / "tests" / "data" / "specsuite-core"  # vendored, see THIRD_PARTY.md there
EXAMPLES = ["supportops", "expenseguard", "datainsights"]

FAST = settings(
    deadline=None,
    database=None,
    max_examples=20,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)


def load_example(name: str) -> tuple[Spec, Bindings]:
    d = REPO / "examples" / name
    if not (d / "agentprop.yaml").is_file():
        pytest.skip(f"examples/{name}/agentprop.yaml is absent")
    spec = load_spec(d / "spec.yaml")
    return spec, load_bindings(d / "agentprop.yaml", spec)


def first_match(spec: Spec, b: Bindings, node_id: str, env: dict[str, Any]) -> int | None:
    for i, br in enumerate(spec.nodes_by_id[node_id].branches):
        if br.clause.expr is None or evaluate(br.clause.expr, env):
            return i
    return None


def check_pair(spec: Spec, b: Bindings, p: DirectionalPair) -> None:
    node = spec.nodes_by_id[p.node]
    clause = node.branches[p.branch].clause
    assert clause.source == p.clause
    base, pert = p.base.assignment, p.perturbed.assignment
    # the two assignments differ in exactly one variable (the perturbed side may add defaults
    # for variables its new route reads)
    differ = [
        k
        for k in base.keys() & pert.keys()
        if base[k] != pert[k] or type(base[k]) is not type(pert[k])
    ]
    assert differ == [p.variable]
    assert base[p.variable] == p.base_value and pert[p.variable] == p.perturbed_value
    # exactly one atom of the branch's clause changes truth, and it is the stated one
    truth_base = {str(a): evaluate(a, base) for a in atoms(clause)}
    truth_pert = {str(a): evaluate(a, pert) for a in atoms(clause)}
    assert [a for a in truth_base if truth_base[a] != truth_pert[a]] == [p.atom]
    assert p.base.atoms == truth_base and p.perturbed.atoms == truth_pert
    # the branch choice on each side is first-match-wins over the ASTs
    assert first_match(spec, b, p.node, base) == p.branch == p.base.choice.branch
    got = first_match(spec, b, p.node, pert)
    assert got == p.perturbed.choice.branch
    if got is not None:
        assert p.perturbed.choice.next == node.branches[got].next
    assert p.changes_branch == (got != p.branch)
    # decisions come from the route's leaf, and the scenarios agree with them
    for side in (p.base, p.perturbed):
        for step in side.route.steps:
            assert step.branch == first_match(spec, b, step.node, side.assignment)
        if side.scenario is not None:
            assert side.scenario.expect_decision == side.decision
            assert side.scenario.path == side.route.nodes
    # world-bound variables really take the two values in the two worlds
    var = b.variables[p.variable]
    if p.realisable and var.world is not None and var.world.field is not None:
        for side, value in ((p.base, p.base_value), (p.perturbed, p.perturbed_value)):
            assert side.scenario is not None
            out = World(spec=spec, overrides=side.scenario.world.overrides).default_output(
                var.world.tool
            )
            assert get_path(out, var.world.field) == value


@pytest.mark.parametrize("name", EXAMPLES)
def test_pairs_flip_exactly_one_atom(name: str) -> None:
    spec, b = load_example(name)
    pairs = directional_pairs(spec, b)
    assert pairs
    for p in pairs:
        check_pair(spec, b, p)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_atom_has_a_pair_or_a_reason(name: str) -> None:
    spec, b = load_example(name)
    pairs = directional_pairs(spec, b)
    for node in spec.decision_tree:
        for i, br in enumerate(node.branches):
            for a in atoms(br.clause):
                have = any(
                    p.node == node.node_id and p.branch == i and p.atom == str(a) for p in pairs
                )
                why = [
                    s
                    for s in pairs.skipped
                    if s.location == f"decision_tree.{node.node_id}.branches[{i}].when"
                    and s.comparison == str(a)
                ]
                assert have or why, f"{node.node_id}#{i} `{a}` has neither a pair nor a reason"
                for v in variables(a):
                    if have and v in b.variables and not b.variables[v].internal:
                        # every controllable variable of the atom either flips it or is explained
                        assert any(
                            p.variable == v and p.atom == str(a) and p.node == node.node_id
                            for p in pairs
                        ) or any(s.variable == v and s.comparison == str(a) for s in pairs.skipped)


def test_supportops_two_variable_comparison_flips_either_way() -> None:
    spec, b = load_example("supportops")
    pairs = directional_pairs(spec, b, "N5_CANCEL_ELIGIBILITY")
    window = [
        p for p in pairs if p.atom == "order.days_since_created > plan_rules.cancel_window_days"
    ]
    assert {p.variable for p in window} == {
        "order.days_since_created",
        "plan_rules.cancel_window_days",
    }
    denied = spec.nodes_by_id["N5_CANCEL_ELIGIBILITY"].branches[1].next
    for p in window:
        assert p.base.next == denied and p.perturbed.next != denied
        assert p.realisable and p.changes_decision
        assert abs(p.perturbed_value - p.base_value) == 1  # the nearest value across the edge


def test_reference_agent_follows_every_realisable_pair() -> None:
    """Both sides of every pair are runnable, and a correct agent moves as the pair states."""
    if not (REPO / "examples" / "supportops" / "agent.py").is_file():
        pytest.skip("the SupportOps reference agent is absent")
    project = load_project(REPO / "examples" / "supportops")
    agent = load_agent(project.bindings.agent, project.base_dir)
    for p in directional_pairs(project.spec, project.bindings).realisable:
        for side in (p.base, p.perturbed):
            result = check(
                project,
                side.scenario,
                agent,
                raise_on_failure=False,
                settings=agentprop.settings(runs=2),
            )  # type: ignore[arg-type]
            assert result.passed, (p.id, side.decision, result.verdict)


def test_complementary_atoms_of_other_clauses_are_reported() -> None:
    spec, b = load_example("supportops")
    pairs = directional_pairs(spec, b, "N2_AUTH")
    p = next(p for p in pairs if p.branch == 1 and p.atom == "verified == true")
    # `verified == false` (branch 0) flips with it; it is not part of branch 1's clause
    assert p.also_flipped == ["verified == false"]
    assert p.perturbed.choice.branch == 0


def test_internal_atoms_are_skipped_with_a_reason() -> None:
    spec, b = load_example("datainsights")
    pairs = directional_pairs(spec, b)
    internal = [n for n, v in b.variables.items() if v.internal]
    for s in pairs.skipped:
        if any(n in s.comparison for n in internal) and "not controllable" in s.reason:
            break
    else:
        pytest.fail("no internal atom was reported as not controllable")
    assert not any(p.variable in internal for p in pairs)


def test_unbound_spec_gives_no_pairs_and_says_why() -> None:
    path = SPECSUITE / "supportops" / "v1" / "spec.yaml"
    spec = load_spec(path)
    pairs = directional_pairs(spec, empty_bindings(spec))
    assert list(pairs) == []
    assert pairs.skipped and all(s.reason for s in pairs.skipped)


def test_strategy_draws_realisable_pairs_and_shrinks_to_the_first() -> None:
    spec, b = load_example("supportops")
    pairs = directional_pairs(spec, b, "N2_AUTH").realisable

    @FAST
    @given(directional(spec, b, "N2_AUTH"))
    def inner(p: DirectionalPair) -> None:
        assert p.realisable
        check_pair(spec, b, p)

    inner()
    assert find(directional(spec, b, "N2_AUTH"), lambda p: True, settings=FAST) == pairs[0]


def test_strategy_without_realisable_pairs_is_unsatisfiable() -> None:
    spec, b = load_example("supportops")
    b2 = b.model_copy(deep=True)
    b2.variables["plan_rules.address_change_allowed"] = VariableBinding(internal=True)
    with pytest.raises(Unsatisfiable, match="no realisable directional pair"):
        directional(spec, b2, "N8_ADDRESS_ELIGIBILITY")


def test_argument_validation() -> None:
    spec, b = load_example("supportops")
    with pytest.raises(InvalidArgument, match="did you mean 'N2_AUTH'"):
        directional_pairs(spec, b, "N2_AUHT")
    with pytest.raises(InvalidArgument, match="terminal"):
        directional(spec, b, "END_TICKET")
    with pytest.raises(InvalidArgument, match="Spec"):
        directional(None, b, "N2_AUTH")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="realisable_only"):
        directional(spec, b, "N2_AUTH", realisable_only=1)  # type: ignore[arg-type]
