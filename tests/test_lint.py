"""Spec linting: the real specs' findings, and each check on an edited copy of a spec."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentprop._spec.implied import implied_decision
from agentprop._spec.lint import LintFinding, lint
from agentprop._spec.load import lint_spec, load_spec
from agentprop.errors import SpecError

SPECS = [
    f"{suite}/{v}" for suite in ("supportops", "expenseguard", "datainsights") for v in ("v1", "v2")
]


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"edit target {old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def line_of(text: str, needle: str, nth: int = 0) -> int:
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return text.count("\n", 0, at) + 1


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def codes(findings: list[LintFinding]) -> list[str]:
    return [f.code for f in findings]


@pytest.fixture()
def supportops_text(specsuite_dir: Path) -> str:
    return (specsuite_dir / "supportops" / "v1" / "spec.yaml").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the real specs


@pytest.mark.parametrize("spec_rel", SPECS)
def test_real_specs_have_no_lint_errors(specsuite_dir: Path, spec_rel: str) -> None:
    findings = lint_spec(specsuite_dir / spec_rel / "spec.yaml")
    assert [f.render() for f in findings if f.severity == "error"] == []
    for f in findings:
        assert f.file == str(specsuite_dir / spec_rel / "spec.yaml")
        assert f.line is not None and f.line >= 1
        assert f.message


def test_supportops_v1_is_clean(specsuite_dir: Path) -> None:
    findings = lint_spec(specsuite_dir / "supportops" / "v1" / "spec.yaml")
    # every node is defined, every decision is in the enum, no v2 without base_version
    assert not {"L001", "L003", "L008", "L012"} & set(codes(findings))


@pytest.mark.parametrize(
    "spec_rel", ["expenseguard/v1", "expenseguard/v2", "datainsights/v1", "datainsights/v2"]
)
def test_undefined_end_targets_are_l001_warnings_at_each_next(
    specsuite_dir: Path, spec_rel: str
) -> None:
    path = specsuite_dir / spec_rel / "spec.yaml"
    text = path.read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    defined = {n["node_id"] for n in raw["decision_tree"]}
    expected_lines = sorted(
        i + 1
        for i, line in enumerate(text.splitlines())
        if line.strip().startswith("next: END_") and line.split("next:")[1].strip() not in defined
    )
    assert expected_lines, "these specs route to undefined END_* nodes"
    l001 = [f for f in lint_spec(path) if f.code == "L001"]
    assert sorted(f.line for f in l001) == expected_lines  # type: ignore[type-var]
    assert {f.severity for f in l001} == {"warning"}
    for f in l001:
        assert "END_" in f.message and "node_id" in (f.fix or "")


@pytest.mark.parametrize(
    ("spec_rel", "leaves"),
    [
        ("datainsights/v1", {"END_WAIT_USER"}),
        ("datainsights/v2", {"END_WAIT_USER", "END_COST_REFUSAL"}),
    ],
)
def test_leaves_without_a_decision_are_l003_warnings(
    specsuite_dir: Path, spec_rel: str, leaves: set[str]
) -> None:
    l003 = [f for f in lint_spec(specsuite_dir / spec_rel / "spec.yaml") if f.code == "L003"]
    named = {leaf for f in l003 for leaf in leaves if leaf in f.message}
    assert named == leaves
    assert len(l003) == len(leaves)
    assert {f.severity for f in l003} == {"warning"}
    for f in l003:
        assert "outcomes" in (f.fix or "")


@pytest.mark.parametrize("spec_rel", ["expenseguard/v2", "datainsights/v2"])
def test_v2_without_base_version_is_l008_at_the_version_line(
    specsuite_dir: Path, spec_rel: str
) -> None:
    path = specsuite_dir / spec_rel / "spec.yaml"
    text = path.read_text(encoding="utf-8")
    l008 = [f for f in lint_spec(path) if f.code == "L008"]
    assert len(l008) == 1
    assert l008[0].severity == "warning"
    assert l008[0].line == line_of(text, "\nversion:") + 1
    assert "base_version: '1.0'" in (l008[0].fix or "")


@pytest.mark.parametrize("spec_rel", ["expenseguard/v1", "expenseguard/v2"])
def test_ambiguous_end_reject_and_approve_are_l012(specsuite_dir: Path, spec_rel: str) -> None:
    l012 = [f for f in lint_spec(specsuite_dir / spec_rel / "spec.yaml") if f.code == "L012"]
    assert {f.message.split()[2] for f in l012} == {"END_REJECT", "END_APPROVE"}
    reject = next(f for f in l012 if "END_REJECT" in f.message)
    assert "REJECT_DISALLOWED" in reject.message and "REJECT_POLICY" in reject.message
    assert all(f.severity != "error" for f in l012)


def test_implied_decision() -> None:
    enum = [
        "TICKET_CREATED",
        "CANCELLED",
        "CANCEL_DENIED",
        "REJECT_POLICY",
        "REJECT_DISALLOWED",
        "ANSWER",
    ]
    assert implied_decision("END_CANCELLED", enum) == ("CANCELLED", ["CANCELLED"])
    assert implied_decision("END_CANCEL_DENIED", enum)[0] == "CANCEL_DENIED"
    assert implied_decision("END_TICKET", enum)[0] == "TICKET_CREATED"
    decision, candidates = implied_decision("END_REJECT", enum)
    assert decision is None and set(candidates) == {"REJECT_POLICY", "REJECT_DISALLOWED"}
    assert implied_decision("END_WAIT_USER", enum) == (None, [])


# ----------------------------------------------------------- lint_spec never raises for lint errors


def test_lint_spec_returns_errors_without_raising(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "    next: N3_BILLING\n", "    next: N3_BILLNG\n")
    text = edit(
        text,
        "on_missing_fields_decision: REQUEST_AUTH_INFO",
        "on_missing_fields_decision: ASK_AUTH",
    )
    path = write(tmp_path, text)
    with pytest.raises(SpecError):
        load_spec(path)
    findings = lint_spec(path)
    errors = [f for f in findings if f.severity == "error"]
    assert sorted(codes(errors)) == ["L001", "L003"]
    bad_next = next(f for f in errors if f.code == "L001")
    assert bad_next.line == line_of(text, "next: N3_BILLNG")
    rendered = bad_next.render()
    assert rendered.startswith(f"{path}:{bad_next.line}:")
    assert "error L001" in rendered and "fix:" in rendered


def test_lint_spec_still_raises_for_a_type_error(tmp_path: Path, supportops_text: str) -> None:
    path = write(tmp_path, edit(supportops_text, "reruns: 10", "reruns: ten"))
    with pytest.raises(SpecError):
        lint_spec(path)


def test_lint_without_source_has_no_positions(specsuite_dir: Path) -> None:
    spec = load_spec(specsuite_dir / "expenseguard" / "v2" / "spec.yaml")
    findings = lint(spec)
    assert "L008" in codes(findings)
    assert all(f.file is None and f.line is None for f in findings)
    assert findings[0].render().startswith("<spec>: ")


# ----------------------------------------------------------------------------- each check


def test_l007_typo_of_decision_tree(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "decision_tree:\n", "decison_tree:\n")
    findings = lint_spec(write(tmp_path, text))
    l007 = [f for f in findings if f.code == "L007"]
    assert l007 and "decision_tree" in l007[0].message
    assert l007[0].line == line_of(text, "decison_tree:")


@pytest.mark.parametrize(
    ("old", "new", "typo", "meant"),
    [
        ("assumptions:\n", "asumptions:\n", "asumptions", "assumptions"),
        (
            "- node_id: N1_INTENT\n  description:",
            "- node_id: N1_INTENT\n  descripton:",
            "descripton",
            "description",
        ),
        (
            "  failure_modes:\n  - timeout\n  retry_policy:\n    retries: 0\n",
            "  failure_mode:\n  - timeout\n  retry_policy:\n    retries: 0\n",
            "failure_mode",
            "failure_modes",
        ),
    ],
    ids=["top-level", "node", "tool"],
)
def test_l007_typos_of_optional_keys(
    tmp_path: Path, supportops_text: str, old: str, new: str, typo: str, meant: str
) -> None:
    text = edit(supportops_text, old, new)
    findings = lint_spec(write(tmp_path, text))
    l007 = [f for f in findings if f.code == "L007"]
    assert len(l007) == 1
    assert f"{typo!r}" in l007[0].message and f"did you mean {meant!r}" in l007[0].message
    assert l007[0].line == line_of(text, f"{typo}:")
    assert l007[0].severity == "warning"
    assert meant in (l007[0].fix or "")


def test_unknown_key_far_from_any_known_key_is_not_a_typo(
    tmp_path: Path, supportops_text: str
) -> None:
    text = edit(
        supportops_text,
        "title: SupportOps Agent\n",
        "title: SupportOps Agent\nx_owner_team: support\n",
    )
    findings = lint_spec(write(tmp_path, text))
    assert "L007" not in codes(findings)
    assert load_spec(tmp_path / "spec.yaml").model_extra == {"x_owner_team": "support"}


def test_l009_branch_after_otherwise(tmp_path: Path, supportops_text: str) -> None:
    old = "  - when: otherwise\n    next: END_BILLING_ANSWER\n"
    text = edit(supportops_text, old, old + "  - when: intent == unknown\n    next: END_TICKET\n")
    findings = lint_spec(write(tmp_path, text))
    l009 = [f for f in findings if f.code == "L009"]
    assert len(l009) == 1
    assert "N3_BILLING" in l009[0].message
    assert l009[0].line == line_of(text, "  - when: intent == unknown\n    next: END_TICKET\n")
    assert l009[0].severity == "warning"
    # the spec still loads
    assert load_spec(tmp_path / "spec.yaml").lint_findings


def test_otherwise_last_is_fine(supportops_text: str, tmp_path: Path) -> None:
    assert "L009" not in codes(lint_spec(write(tmp_path, supportops_text)))


def test_l005_unreachable_node(tmp_path: Path, supportops_text: str) -> None:
    orphan = "- node_id: N99_ORPHAN\n  branches:\n  - when: otherwise\n    next: END_TICKET\n"
    text = edit(supportops_text, "- node_id: END_TICKET\n", orphan + "- node_id: END_TICKET\n")
    findings = lint_spec(write(tmp_path, text))
    l005 = [f for f in findings if f.code == "L005"]
    assert [f.line for f in l005] == [line_of(text, "- node_id: N99_ORPHAN")]
    assert "N99_ORPHAN" in l005[0].message and "N1_INTENT" in l005[0].message


def test_l013_respond_enum_differs_from_contract(tmp_path: Path, supportops_text: str) -> None:
    old = "        - TICKET_CREATED\n      tool_actions:"
    text = edit(supportops_text, old, old.replace("TICKET_CREATED", "TICKET_OPENED"))
    findings = lint_spec(write(tmp_path, text))
    l013 = [f for f in findings if f.code == "L013"]
    assert len(l013) == 1
    assert "TICKET_OPENED" in l013[0].message and "TICKET_CREATED" in l013[0].message
    assert l013[0].severity == "warning"
    # reported at the tool's enum list
    enum_line = line_of(text, "        enum:\n        - REQUEST_AUTH_INFO")
    assert l013[0].line in (enum_line, enum_line + 1)


def test_l013_same_values_in_another_order_is_fine(tmp_path: Path, supportops_text: str) -> None:
    old = "        - REQUEST_AUTH_INFO\n        - REFUSE_AUTH\n"
    text = edit(supportops_text, old, "        - REFUSE_AUTH\n        - REQUEST_AUTH_INFO\n")
    assert "L013" not in codes(lint_spec(write(tmp_path, text)))


def test_l011_duplicate_yaml_key(tmp_path: Path, supportops_text: str) -> None:
    text = edit(
        supportops_text, "title: SupportOps Agent\n", "title: SupportOps Agent\ntitle: Again\n"
    )
    findings = lint_spec(write(tmp_path, text))
    l011 = [f for f in findings if f.code == "L011"]
    assert len(l011) == 1
    assert l011[0].line == line_of(text, "title: Again") and l011[0].column == 1
    assert "'title'" in l011[0].message
    assert load_spec(tmp_path / "spec.yaml").title == "Again"  # the later value wins, as stated


def test_l011_duplicate_key_inside_a_node(tmp_path: Path, supportops_text: str) -> None:
    old = "- node_id: N7_CANCEL\n"
    text = edit(supportops_text, old, old + "  description: first\n")
    findings = lint_spec(write(tmp_path, text))
    l011 = [f for f in findings if f.code == "L011"]
    assert len(l011) == 1
    assert l011[0].line == line_of(text, "  description: first") + 1


def test_l006_missing_respond_tool_is_info(tmp_path: Path, supportops_text: str) -> None:
    start = supportops_text.index("- name: respond\n")
    end = supportops_text.index("policies:")
    findings = lint_spec(write(tmp_path, supportops_text[:start] + supportops_text[end:]))
    l006 = [f for f in findings if f.code == "L006"]
    assert len(l006) == 1 and l006[0].severity == "info"


def test_l006_required_field_missing_from_respond_schema(
    tmp_path: Path, supportops_text: str
) -> None:
    old = (
        "      evidence:\n        type: string\n        description: Brief references to "
        "tool outputs relied on\n"
    )
    findings = lint_spec(write(tmp_path, edit(supportops_text, old, "")))
    l006 = [f for f in findings if f.code == "L006"]
    assert len(l006) == 1 and "'evidence'" in l006[0].message and l006[0].severity == "warning"
