"""Loading the six SpecSuite-Core specs unchanged, and navigating a loaded spec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agentprop._spec.load import lint_spec, load_spec, load_spec_text, resolve_spec_path
from agentprop._spec.model import Spec
from agentprop.errors import SpecError

SPECS = [
    f"{suite}/{v}" for suite in ("supportops", "expenseguard", "datainsights") for v in ("v1", "v2")
]


def _raw(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("spec_rel", SPECS)
def test_real_spec_loads_unchanged(specsuite_dir: Path, spec_rel: str) -> None:
    path = specsuite_dir / spec_rel / "spec.yaml"
    raw = _raw(path)
    spec = load_spec(path)
    assert isinstance(spec, Spec)
    assert spec.source_path == path
    assert spec.spec_id == raw["spec_id"]
    assert spec.version == str(raw["version"])
    assert [t.name for t in spec.tools] == [t["name"] for t in raw["tools"]]
    assert [n.node_id for n in spec.decision_tree] == [n["node_id"] for n in raw["decision_tree"]]
    assert spec.response_contract.decision_enum == raw["response_contract"]["decision_enum"]
    assert (
        spec.response_contract.required_json_fields
        == raw["response_contract"]["required_json_fields"]
    )
    for node, raw_node in zip(spec.decision_tree, raw["decision_tree"]):
        raw_branches = raw_node.get("branches") or []
        assert [(b.when, b.next) for b in node.branches] == [
            (b["when"], b["next"]) for b in raw_branches
        ]
        # conditions were parsed at load time
        for b in node.branches:
            assert b.clause.source == b.when
    for tool, raw_tool in zip(spec.tools, raw["tools"]):
        assert tool.input_schema == raw_tool.get("input_schema", tool.input_schema)
        assert tool.output_schema == raw_tool.get("output_schema")
        assert tool.failure_modes == raw_tool.get("failure_modes", [])
    limits = raw.get("defaults", {}).get("limits", {})
    assert spec.max_tool_calls_per_turn == limits.get("max_tool_calls_per_turn")
    # loading never modified the file (it is read-only shared data)
    assert _raw(path) == raw
    # no lint error (errors would have raised); findings are kept on the spec
    assert all(f.severity != "error" for f in spec.lint_findings)


def test_directory_with_versions_needs_a_choice(specsuite_dir: Path) -> None:
    with pytest.raises(SpecError) as info:
        resolve_spec_path(specsuite_dir / "supportops")
    msg = str(info.value)
    assert "v1" in msg and "v2" in msg
    assert (
        resolve_spec_path(specsuite_dir / "supportops" / "v1")
        == specsuite_dir / "supportops" / "v1" / "spec.yaml"
    )
    # a directory holding spec.yaml loads like the file
    assert load_spec(specsuite_dir / "supportops" / "v1").spec_id == "supportops_v1"


def test_empty_directory_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path)
    assert str(tmp_path) in str(info.value)
    assert info.value.fix


def test_supportops_v2_declares_its_base_version(specsuite_dir: Path) -> None:
    spec = load_spec(specsuite_dir / "supportops" / "v2" / "spec.yaml")
    assert spec.version == "2.0"
    assert spec.declared_base_version == "1.0"
    assert spec.effective_base_version == "1.0"
    assert not [f for f in spec.lint_findings if f.code == "L008"]


@pytest.mark.parametrize("suite", ["expenseguard", "datainsights"])
def test_other_v2_specs_infer_base_version_with_l008(specsuite_dir: Path, suite: str) -> None:
    path = specsuite_dir / suite / "v2" / "spec.yaml"
    assert "base_version" not in _raw(path)
    spec = load_spec(path)
    assert spec.declared_base_version is None
    assert spec.effective_base_version == "1.0"
    l008 = [f for f in spec.lint_findings if f.code == "L008"]
    assert len(l008) == 1 and l008[0].severity == "warning"
    assert "1.0" in (l008[0].fix or "")


@pytest.mark.parametrize("suite", ["supportops", "expenseguard", "datainsights"])
def test_v1_specs_evolve_nothing(specsuite_dir: Path, suite: str) -> None:
    spec = load_spec(specsuite_dir / suite / "v1" / "spec.yaml")
    assert spec.effective_base_version is None


def test_version_numbers_are_text(specsuite_dir: Path) -> None:
    text = (specsuite_dir / "supportops" / "v1" / "spec.yaml").read_text(encoding="utf-8")
    spec = load_spec_text(text.replace("version: '1.0'", "version: 3"), name="v.yaml")
    assert spec.version == "3"
    assert spec.effective_base_version == "2.0"


def test_tool_and_node_lookups(specsuite_dir: Path) -> None:
    spec = load_spec(specsuite_dir / "supportops" / "v1" / "spec.yaml")
    assert spec.tool("cancel_order").failure_modes == ["timeout", "not_found", "rate_limited"]
    assert spec.tool("verify_identity").retry_policy is not None
    assert spec.tool("verify_identity").retry_policy.on == ["timeout"]  # type: ignore[union-attr]
    with pytest.raises(KeyError) as info:
        spec.tool("refund_order")
    assert "refund_order" in str(info.value) and "cancel_order" in str(info.value)
    assert spec.root.node_id == "N1_INTENT"
    auth = spec.nodes_by_id["N2_AUTH"]
    assert auth.requirements.must_call_tools_in_order == [
        "verify_identity",
        "get_account",
        "get_plan_rules",
    ]
    assert auth.requirements.missing_field_outcomes() == [(["last4", "zip"], "REQUEST_AUTH_INFO")]
    assert spec.nodes_by_id["N5_CANCEL_ELIGIBILITY"].requirements.missing_field_outcomes() == [
        (["order_id"], "CLARIFY")
    ]
    assert spec.nodes_by_id["END_TICKET"].is_terminal
    assert not auth.is_terminal
    assert "respond" not in [t.name for t in spec.action_tools]
    assert len(spec.action_tools) == len(spec.tools) - 1
    assert spec.max_tool_calls_per_turn == 4


def test_leaf_ids_include_undefined_end_targets(specsuite_dir: Path) -> None:
    spec = load_spec(specsuite_dir / "expenseguard" / "v1" / "spec.yaml")
    defined = set(spec.nodes_by_id)
    leaves = spec.leaf_ids()
    assert {"END_REQUEST_INFO", "END_REJECT", "END_APPROVE"} <= set(leaves)
    assert not ({"END_REQUEST_INFO", "END_REJECT", "END_APPROVE"} & defined)
    assert len(leaves) == len(set(leaves))  # END_REJECT is routed to twice, listed once
    # every leaf is a defined branchless node or an undefined target
    for leaf in leaves:
        assert leaf not in defined or spec.nodes_by_id[leaf].is_terminal
    # every undefined target is a leaf
    assert spec.targets() - defined <= set(leaves)


@pytest.mark.parametrize("spec_rel", SPECS)
def test_leaf_ids_are_exactly_the_terminal_nodes(specsuite_dir: Path, spec_rel: str) -> None:
    raw = _raw(specsuite_dir / spec_rel / "spec.yaml")
    defined = {n["node_id"]: n for n in raw["decision_tree"]}
    targets = {b["next"] for n in raw["decision_tree"] for b in (n.get("branches") or [])}
    expected = {nid for nid, n in defined.items() if not n.get("branches")} | (
        targets - set(defined)
    )
    assert set(load_spec(specsuite_dir / spec_rel / "spec.yaml").leaf_ids()) == expected


def test_lint_spec_and_load_spec_agree_on_a_clean_spec(specsuite_dir: Path) -> None:
    path = specsuite_dir / "datainsights" / "v1" / "spec.yaml"
    from_load = [(f.code, f.line) for f in load_spec(path).lint_findings]
    from_lint = [(f.code, f.line) for f in lint_spec(path)]
    assert from_load == from_lint
    assert from_lint  # datainsights routes to undefined END_* nodes


def test_the_suite_reads_specsuite_core_from_inside_the_repository(specsuite_dir: Path) -> None:
    # a fresh clone has no ../shared checkout: the specs, packs and prompts are vendored with
    # their licence, and no test file reaches outside the repository for them
    tests = Path(__file__).resolve().parent
    assert specsuite_dir.is_relative_to(tests)
    assert "Apache License" in (specsuite_dir / "LICENSE").read_text(encoding="utf-8")
    assert "f-labs-io/tdad-paper-code" in (specsuite_dir / "THIRD_PARTY.md").read_text(
        encoding="utf-8"
    )
    for suite in ("supportops", "expenseguard", "datainsights"):
        for name in (
            "v1/spec.yaml",
            "v2/spec.yaml",
            "mutations.yaml",
            "seed_prompt.txt",
            "seed_tool_descriptions.yaml",
        ):
            assert (specsuite_dir / suite / name).is_file(), f"{suite}/{name}"
    outside = ('"shared" / "specsuite-core"', "/work/shared", "../shared")
    for source in sorted(tests.glob("*.py")):
        text = source.read_text(encoding="utf-8")
        assert not [s for s in outside if s in text and source.name != "test_spec_load.py"], (
            source.name
        )
