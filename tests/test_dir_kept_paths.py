"""A DIR pair is decided only where both sides' paths are cases the compiler kept: a side on a
path dropped as contradictory (P005, an ``internal`` variable's assumed value) expects what no
agent can be made to do, so the correct agent would fail it (the blind zoo's travel spec,
read-only)."""

from __future__ import annotations

from pathlib import Path

from agentprop import load_project
from agentprop._pipeline.caselist import list_cases
from agentprop._pipeline.kinds import dir_pairs
from agentprop.strategies._internal.directional import directional_pairs

TRAVEL = Path(__file__).parent.parent / "benchmarks" / "_specs_zoo" / "travel_change"


def test_a_dir_side_on_a_dropped_contradictory_path_is_not_decided() -> None:
    project = load_project(TRAVEL)
    kept = {s.id for s in project.scenarios()}
    # dropped: differs only by loyalty_tier's assumed value
    assert "END_GOLD_DESK<-N1_LOOKUP" not in kept
    every = [
        p
        for p in directional_pairs(project.spec, project.bindings)
        if p.changes_decision and p.perturbed.scenario is not None
    ]
    assert any(
        p.perturbed.scenario is not None and p.perturbed.scenario.id == "END_GOLD_DESK<-N1_LOOKUP"
        for p in every
    )
    decided = dir_pairs(project)
    assert decided and all(
        base.id in kept and perturbed.id in kept for _pair, base, perturbed in decided
    )
    assert all(perturbed.id != "END_GOLD_DESK<-N1_LOOKUP" for _pair, _base, perturbed in decided)
    listed = [
        c for c in list_cases(project, project.scenarios(), ("dir",), explore=0) if c.kind == "DIR"
    ]
    assert len(listed) == len({(b.model_dump_json(), q.model_dump_json()) for _p, b, q in decided})
