"""Spec-evolution regression (SURS) on the real SpecSuite-Core v1 -> v2 pairs.

Which v1 cases are invariants is derived from the two trees (a case is kept exactly when no
node on its path changed); the reference v1 agent stands in for a v2 agent, which is what a
v2 agent must do on those paths anyway.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

import agentprop
import agentprop.spec
from agentprop._cli import main
from agentprop._pipeline.surs import changed_nodes, invariant_scenarios, surs
from agentprop._spec.implied import condition_variables

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "tests" / "data" / "specsuite-core"  # vendored, see THIRD_PARTY.md there
LINEAGES = ["supportops", "expenseguard", "datainsights"]


def v2_project(tmp_path: Path, lineage: str) -> agentprop.Project:
    """The v2 spec beside the v1 example's agent and bindings, the variables v2 adds bound as
    internal (solved, not staged), so that v2's own cases can be built."""
    target = tmp_path / f"{lineage}_v2"
    target.mkdir()
    example = ROOT / "examples" / lineage
    for name in ("agent.py", *(["warehouse.py"] if (example / "warehouse.py").exists() else [])):
        shutil.copy(example / name, target / name)
    shutil.copy(SHARED / lineage / "v2" / "spec.yaml", target / "spec.yaml")
    bindings = yaml.safe_load((example / "agentprop.yaml").read_text(encoding="utf-8"))
    bindings.pop("mutations", None)
    v2 = agentprop.spec.load_spec(target / "spec.yaml")
    for name in sorted(set(condition_variables(v2)) - set(bindings["variables"])):
        bindings["variables"][name] = {"internal": True}
    (target / "agentprop.yaml").write_text(
        yaml.safe_dump(bindings, sort_keys=False), encoding="utf-8"
    )
    return agentprop.load_project(target)


def test_an_unchanged_spec_keeps_every_case() -> None:
    v1 = agentprop.load_project(ROOT / "examples" / "supportops")
    assert changed_nodes(v1.spec, v1.spec) == {}
    kept, excluded = invariant_scenarios(v1, v1.spec)
    assert [s.id for s in kept] == [s.id for s in v1.scenarios()] and excluded == []


@pytest.mark.parametrize("lineage", LINEAGES)
def test_invariants_are_exactly_the_cases_whose_path_v2_left_alone(lineage: str) -> None:
    v1 = agentprop.load_project(ROOT / "examples" / lineage)
    v2 = agentprop.spec.load_spec(SHARED / lineage / "v2" / "spec.yaml")
    changed = changed_nodes(v1.spec, v2)
    assert changed  # every published v2 changes something
    kept, excluded = invariant_scenarios(v1, v2)
    assert len(kept) + len(excluded) == len(v1.scenarios())
    for s in kept:
        assert not set([*s.path, s.leaf]) & set(changed), s.id
    for e in excluded:
        scenario = next(s for s in v1.scenarios() if s.id == e.case)
        hit = set([*scenario.path, scenario.leaf]) & set(changed)
        assert hit and any(node in e.reason for node in hit), e


def test_surs_is_full_for_a_faithful_agent_and_drops_for_a_regression(tmp_path: Path) -> None:
    v1 = agentprop.load_project(ROOT / "examples" / "supportops")
    v2 = v2_project(tmp_path, "supportops")
    clean = surs(v1, v2, agentprop.load_agent("agent:SupportOpsAgent", v2.base_dir))
    assert clean.invariants > 0 and clean.surs == 1.0
    leaky = surs(
        v1, v2, agentprop.load_agent("agent:SupportOpsAgent", v2.base_dir, {"leak_pii": 1.0})
    )
    pii_cases = [c.id for c in leaky.cases if "PII" in c.id]
    assert pii_cases, "END_REFUSE_PII is a v1 invariant (v2 did not change its path)"
    assert {c.id for c in leaky.cases if c.verdict != "PASS"} == set(pii_cases)
    assert leaky.surs == pytest.approx((leaky.invariants - len(pii_cases)) / leaky.invariants)
    assert "reveals the planted PII" in leaky.summary()


def test_a_base_or_project_without_cases_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an empty suite proves nothing: v2 with v1's bindings cannot build a single v2 path
    monkeypatch.chdir(tmp_path)
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(SHARED / "supportops" / "v2" / "spec.yaml", bare / "spec.yaml")
    shutil.copy(ROOT / "examples" / "supportops" / "agent.py", bare / "agent.py")
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["tdad", str(bare), "--agent", "agent:SupportOpsAgent", "--mutations", "none"],
        out=out,
        err=err,
    )
    assert code == 2 and "no case can be built" in err.getvalue()
    v2 = v2_project(tmp_path, "supportops")
    code = main(
        ["tdad", str(v2.base_dir), "--base", str(bare), "--kinds", "mft", "--mutations", "none"],
        out=out,
        err=err,
    )
    assert code == 2 and "(given as --base)" in err.getvalue()


def test_tdad_command_reports_surs_with_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    v2 = v2_project(tmp_path, "supportops")
    out, err = io.StringIO(), io.StringIO()
    code = main(
        [
            "tdad",
            str(v2.base_dir),
            "--base",
            str(ROOT / "examples" / "supportops"),
            "--kinds",
            "mft",
            "--mutations",
            "none",
            "--fault",
            "leak_pii=1",
            "--json",
            "r.json",
        ],
        out=out,
        err=err,
    )
    assert code == 1, out.getvalue() + err.getvalue()
    text = out.getvalue()
    assert "SURS " in text and "v1 invariant cases pass" in text and "excluded" in text
    assert "no mutation pack" in text
    tdad = json.loads(Path("r.json").read_text(encoding="utf-8"))["metrics"]["extra"]["tdad"]
    # leak_pii breaks the v1 invariants that end in a PII refusal: the direct one and, now that
    # loops are unrolled, the one reached after a clarifying question
    assert 0 < tdad["surs"] < 1 and tdad["surs_passed"] == tdad["surs_invariants"] - 2
    assert "END_REFUSE_PII<-N1_INTENT" in text
    assert tdad["surs_detail"]["excluded"]
