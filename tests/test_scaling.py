"""A suite's cost grows with its cases, not with cases times spec size (benchmarks/scaling.py)."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest

import agentprop
from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._spec.model import Spec
from agentprop.oracle import TrialMemo

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def scaling() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "scaling_benchmark", ROOT / "benchmarks" / "scaling.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scaling_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_the_whole_tree_is_read_once_per_spec_not_once_per_scenario(
    scaling: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each scenario used to list the spec's leaves (a quadratic walk) and its required tools
    # anew: a suite of N cases over a spec of N leaves cost N^2
    scaling.write_project(tmp_path, 2, 3)
    project = load_project(tmp_path)
    calls = 0
    original = Spec.leaf_ids

    def counted(self: Spec) -> list[str]:
        nonlocal calls
        calls += 1
        return original(self)

    monkeypatch.setattr(Spec, "leaf_ids", counted)
    scenarios = project.scenarios()
    assert len(scenarios) == 2 * 3 * 3 + 1
    assert calls <= 10, f"the leaves were listed {calls} times for {len(scenarios)} scenarios"
    leaves = project.spec.leaf_ids()
    leaves.append("NOT_A_LEAF")  # a caller's copy: the spec's own list is unchanged
    assert "NOT_A_LEAF" not in project.spec.leaf_ids()
    assert project.spec.leaf_ids()[-1] == "END_CLARIFY"


def test_the_synthetic_spec_is_passed_by_its_scripted_agent(
    scaling: ModuleType, tmp_path: Path
) -> None:
    scaling.write_project(tmp_path, 1, 2)
    out = io.StringIO()
    code = main(
        ["run", str(tmp_path), "--corpus", "none", "--explore", "0", "--kinds", "mft"],
        out=out,
        err=io.StringIO(),
    )
    assert code == 0, out.getvalue()
    assert "5 cases: 5 passed" in out.getvalue()


def test_the_slope_is_the_exponent_of_a_power_law(scaling: ModuleType) -> None:
    assert scaling.slope([100.0, 1000.0, 10000.0], [1.0, 10.0, 100.0]) == pytest.approx(1.0)
    assert scaling.slope([100.0, 1000.0], [1.0, 100.0]) == pytest.approx(2.0)
    assert scaling.slope([100.0], [1.0]) is None


def test_the_scripted_agent_reads_an_order_id_as_users_write_it(
    scaling: ModuleType, tmp_path: Path
) -> None:
    """The benchmark's correct agent must pass the explored inputs: "O 1001", "O1001" and a
    corrected id are the order O-1001. Was: 384 of 984 cases failed it ("CLARIFY")."""
    scaling.write_project(tmp_path, 1, 2)
    project = load_project(tmp_path)
    agent = agentprop.load_agent(project.bindings.agent or "", project.base_dir, {})
    scenario = project.scenarios()[0]
    group = scenario.id.split("_")[1].lower()
    for message in (
        f"group {group}: where is my order O 1001?",
        f"about {group}, what is the status of order O1001?",
        f"Group {group}: order O 1101 - no wait, it should be: order O-1001",
    ):
        found = agentprop.check(
            project, scenario, agent, messages=[message], memo=TrialMemo(), raise_on_failure=False
        )
        assert found.verdict == "PASS", (message, found.failures)
