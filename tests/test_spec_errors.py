"""Every kind of bad spec ends in one SpecError naming the file, line, column, expectation and fix.

Bad specs are made by editing a copy of a real spec's text; expected positions are computed by
searching the edited text, never typed in by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprop._spec.load import lint_spec, load_spec, load_spec_text
from agentprop.errors import SpecError


@pytest.fixture()
def supportops_text(specsuite_dir: Path) -> str:
    return (specsuite_dir / "supportops" / "v1" / "spec.yaml").read_text(encoding="utf-8")


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"edit target {old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def position(text: str, needle: str, token: str | None = None, nth: int = 0) -> tuple[int, int]:
    """1-based (line, column) of ``token`` inside the ``nth`` occurrence of ``needle``."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    at = start + (needle.index(token) if token is not None else 0)
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    return line, col


def load_error(tmp_path: Path, text: str, name: str = "spec.yaml") -> tuple[SpecError, Path]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return info.value, path


def assert_points_at(err: SpecError, path: Path, line: int, col: int | None = None) -> None:
    assert err.location is not None
    assert err.location.path == path
    assert err.location.line == line, f"line {err.location.line}, expected {line}:\n{err}"
    if col is not None:
        assert err.location.column == col, f"column {err.location.column}, expected {col}:\n{err}"
        assert str(err).startswith(f"{path}:{line}:{col}: ")
    else:
        assert str(err).startswith(f"{path}:{line}:")


def assert_explains(err: SpecError, *, expected: bool = True) -> None:
    """The message says what was expected (when asked) and how to fix it."""
    text = str(err)
    assert err.fix and "\n  fix: " in text
    if expected:
        assert err.expected and "\n  expected: " in text


# ----------------------------------------------------------------------------- YAML and shape


def test_yaml_syntax_error(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "title: SupportOps Agent\n", "title: SupportOps: Agent\n")
    err, path = load_error(tmp_path, text)
    line, col = position(text, "title: SupportOps: Agent", ": Agent")
    assert_points_at(err, path, line, col)
    assert "YAML syntax error" in err.problem
    assert_explains(err)


def test_tab_indentation_is_a_yaml_syntax_error(tmp_path: Path, supportops_text: str) -> None:
    text = edit(
        supportops_text, "  reliability:\n    reruns: 10\n", "  reliability:\n\treruns: 10\n"
    )
    err, path = load_error(tmp_path, text)
    assert err.location is not None and err.location.path == path
    assert err.location.line == position(text, "\treruns")[0]
    assert "tab" in (err.fix or "")


def test_top_level_list(tmp_path: Path) -> None:
    err, path = load_error(tmp_path, "- spec_id: x\n- tools: []\n")
    assert_points_at(err, path, 1, 1)
    assert "mapping" in err.problem and "list" in err.problem
    assert "spec_id" in (err.expected or "")
    assert_explains(err)


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    err, path = load_error(tmp_path, content)
    assert_points_at(err, path, 1, 1)
    assert "empty" in err.problem
    assert_explains(err)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "nope.yaml")
    assert "not found" in info.value.problem
    assert str(tmp_path / "nope.yaml") in str(info.value)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"spec_id: caf\xe9\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "UTF-8" in str(info.value)


# ----------------------------------------------------------------------------- missing keys


def test_missing_decision_tree(tmp_path: Path, supportops_text: str) -> None:
    text = (
        supportops_text[: supportops_text.index("decision_tree:")]
        + supportops_text[supportops_text.index("tests:") :]
    )
    err, path = load_error(tmp_path, text)
    assert_points_at(err, path, 1, 1)  # the top-level mapping that should hold it
    assert "decision_tree" in err.problem and "missing" in err.problem
    assert "decision_tree" in (err.expected or "") and "decision_tree" in (err.fix or "")
    assert_explains(err)


def test_missing_tool_name(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "- name: get_plan_rules\n", "- nam: get_plan_rules\n")
    err, path = load_error(tmp_path, text)
    line, col = position(text, "- nam: get_plan_rules", "nam")
    assert_points_at(err, path, line, col)  # the tool mapping (tools[2]) that lacks it
    assert "'name'" in err.problem and "tools[2]" in err.problem
    assert_explains(err)


def test_missing_decision_enum(tmp_path: Path, supportops_text: str) -> None:
    old = "  decision_enum:\n  - REQUEST_AUTH_INFO\n"
    start = supportops_text.index(old)
    end = supportops_text.index("decision_tree:")
    text = supportops_text[:start] + supportops_text[end:]
    err, path = load_error(tmp_path, text)
    key_line = position(text, "response_contract:\n")[0]
    assert err.location is not None and err.location.path == path
    # the response_contract mapping: its key line or the first line of its body
    assert err.location.line in (key_line, key_line + 1), str(err)
    assert "decision_enum" in err.problem and "response_contract" in err.problem
    assert_explains(err)


# ----------------------------------------------------------------------------- wrong types


def test_tools_not_a_list(tmp_path: Path, supportops_text: str) -> None:
    text = (
        supportops_text[: supportops_text.index("tools:\n")]
        + "tools: verify_identity\n"
        + supportops_text[supportops_text.index("policies:") :]
    )
    err, path = load_error(tmp_path, text)
    line, col = position(text, "tools: verify_identity", "verify_identity")
    assert_points_at(err, path, line, col)
    assert "tools" in err.problem and "list" in (err.expected or "")
    assert "verify_identity" in err.problem  # says what it got
    assert_explains(err)


def test_reruns_a_string(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "reruns: 10", "reruns: ten")
    err, path = load_error(tmp_path, text)
    line, col = position(text, "reruns: ten", "ten")
    assert_points_at(err, path, line, col)
    assert "defaults.reliability.reruns" in err.problem
    assert "integer" in (err.expected or "")
    assert "'ten'" in err.problem
    assert_explains(err)


def test_min_pass_rate_out_of_range(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "min_pass_rate: 0.9", "min_pass_rate: 2")
    err, path = load_error(tmp_path, text)
    line, col = position(text, "min_pass_rate: 2", "2")
    assert_points_at(err, path, line, col)
    assert "min_pass_rate" in err.problem
    assert "1" in (err.expected or "")
    assert_explains(err)


def test_risk_level_not_allowed(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "risk_level: medium", "risk_level: extreme")
    err, path = load_error(tmp_path, text)
    line, col = position(text, "risk_level: extreme", "extreme")
    assert_points_at(err, path, line, col)
    assert "'extreme'" in err.problem
    for allowed in ("low", "medium", "high", "critical"):
        assert allowed in (err.expected or "")
    assert_explains(err)


def test_several_problems_are_counted(tmp_path: Path, supportops_text: str) -> None:
    text = edit(
        edit(supportops_text, "risk_level: medium", "risk_level: extreme"),
        "reruns: 10",
        "reruns: ten",
    )
    err, _ = load_error(tmp_path, text)
    assert "1 more problem" in err.problem


# ----------------------------------------------------------------------------- JSON Schemas


def test_invalid_schema_type(tmp_path: Path, supportops_text: str) -> None:
    old = "      reason:\n        type: string\n    required:\n    - verified\n"
    text = edit(supportops_text, old, old.replace("type: string", "type: strng"))
    err, path = load_error(tmp_path, text)
    line, col = position(text, "type: strng", "strng")
    assert_points_at(err, path, line, col)
    assert "verify_identity" in err.problem and "output_schema" in err.problem
    assert "strng" in err.problem
    assert "string" in (err.fix or "")
    assert_explains(err)


def test_invalid_schema_required(tmp_path: Path, supportops_text: str) -> None:
    old = "    required:\n    - account_id\n    - last4\n    - zip\n"
    text = edit(supportops_text, old, "    required: 5\n")
    err, path = load_error(tmp_path, text)
    line, col = position(text, "    required: 5", "5")
    assert_points_at(err, path, line, col)
    assert "verify_identity" in err.problem and "input_schema" in err.problem
    assert "array" in err.problem
    assert_explains(err)


# ----------------------------------------------------------------------------- conditions


@pytest.mark.parametrize(
    ("new_line", "bad_token"),
    [
        ("  - when: verified = false\n", "="),
        ("  - when: 'verified = false'\n", "="),
        ('  - when: "verified == false)"\n', ")"),
        ("  - when: verified == false and\n", None),
        ("  - when: 'verified == '\n", None),
    ],
    ids=["unquoted", "single-quoted", "double-quoted", "dangling-and", "quoted-trailing-space"],
)
def test_unparseable_when_points_into_the_expression(
    tmp_path: Path, supportops_text: str, new_line: str, bad_token: str | None
) -> None:
    text = edit(supportops_text, "  - when: verified == false\n", new_line)
    err, path = load_error(tmp_path, text)
    if bad_token is not None:
        line, col = position(text, new_line, bad_token)
    else:
        # the end of the expression: just past its last character (the closing quote, if any)
        line, _ = position(text, new_line)
        body = new_line.rstrip("\n")
        col = len(body) if body.endswith(("'", '"')) else len(body) + 1
    assert_points_at(err, path, line, col)
    assert "N2_AUTH" in err.problem
    assert "verified" in err.problem
    assert "intent == cancel_order" in (err.fix or "")
    assert_explains(err)


def test_quoted_when_column_in_load_spec_text(supportops_text: str) -> None:
    new_line = "  - when: 'verified = false'\n"
    text = edit(supportops_text, "  - when: verified == false\n", new_line)
    with pytest.raises(SpecError) as info:
        load_spec_text(text, name="inline.yaml")
    assert info.value.location is not None
    assert (info.value.location.line, info.value.location.column) == position(text, new_line, "=")


# ----------------------------------------------------------------------------- lint errors


def test_duplicate_tool(tmp_path: Path, supportops_text: str) -> None:
    block = supportops_text[
        supportops_text.index("- name: create_ticket\n") : supportops_text.index(
            "- name: respond\n"
        )
    ]
    text = supportops_text.replace("- name: respond\n", block + "- name: respond\n", 1)
    err, path = load_error(tmp_path, text)
    line, col = position(text, "- name: create_ticket\n", "create_ticket", nth=1)
    assert_points_at(err, path, line, col)
    assert "create_ticket" in err.problem and "twice" in err.problem
    assert_explains(err, expected=False)
    # lint_spec lists the same error without raising
    assert [f.code for f in lint_spec(path) if f.severity == "error"] == ["L004"]


def test_duplicate_node_id(tmp_path: Path, supportops_text: str) -> None:
    text = edit(
        supportops_text,
        "tests:\n",
        "- node_id: END_TICKET\n  description: again\n  branches: []\ntests:\n",
    )
    err, path = load_error(tmp_path, text)
    line, col = position(text, "- node_id: END_TICKET\n", "END_TICKET", nth=1)
    assert_points_at(err, path, line, col)
    assert "END_TICKET" in err.problem and "twice" in err.problem
    assert_explains(err, expected=False)


def test_next_to_undefined_node(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "    next: N3_BILLING\n", "    next: N3_BILLNG\n")
    err, path = load_error(tmp_path, text)
    line, col = position(text, "    next: N3_BILLNG\n", "N3_BILLNG")
    assert_points_at(err, path, line, col)
    assert "N3_BILLNG" in err.problem and "N1_INTENT" in err.problem
    assert "did you mean 'N3_BILLING'" in (err.fix or "")
    assert_explains(err, expected=False)


def test_next_to_undefined_end_node_is_only_a_warning(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "    next: END_BILLING_ANSWER\n", "    next: END_BILLING_REPLY\n")
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    spec = load_spec(path)
    assert "END_BILLING_REPLY" in spec.leaf_ids()
    l001 = [f for f in spec.lint_findings if f.code == "L001"]
    assert l001 and l001[0].severity == "warning"


def test_must_call_names_undeclared_tool(tmp_path: Path, supportops_text: str) -> None:
    old = "    - get_plan_rules\n  branches:\n  - when: verified == false\n"
    text = edit(supportops_text, old, old.replace("get_plan_rules", "get_plan_rule"))
    err, path = load_error(tmp_path, text)
    line, col = position(text, "    - get_plan_rule\n", "get_plan_rule")
    assert_points_at(err, path, line, col)
    assert "N2_AUTH" in err.problem and "'get_plan_rule'" in err.problem
    assert "did you mean 'get_plan_rules'" in (err.fix or "")
    assert_explains(err, expected=False)


def _bad_missing_decision(supportops_text: str) -> str:
    return edit(
        supportops_text,
        "on_missing_fields_decision: REQUEST_AUTH_INFO",
        "on_missing_fields_decision: ASK_AUTH",
    )


def test_on_missing_fields_decision_not_in_enum(tmp_path: Path, supportops_text: str) -> None:
    text = _bad_missing_decision(supportops_text)
    err, path = load_error(tmp_path, text)
    assert err.location is not None and err.location.path == path
    # somewhere inside N2_AUTH's requirements block
    first = position(text, "  requirements:\n    if_missing_fields:")[0]
    last = position(text, "on_missing_fields_decision: ASK_AUTH")[0]
    assert first <= (err.location.line or 0) <= last
    assert "ASK_AUTH" in err.problem and "N2_AUTH" in err.problem
    assert "decision_enum" in (err.fix or "")
    assert_explains(err, expected=False)


def test_on_missing_fields_decision_points_at_the_value(
    tmp_path: Path, supportops_text: str
) -> None:
    text = _bad_missing_decision(supportops_text)
    err, path = load_error(tmp_path, text)
    assert_points_at(err, path, *position(text, "on_missing_fields_decision: ASK_AUTH", "ASK_AUTH"))


def test_typo_of_a_required_key_is_named(tmp_path: Path, supportops_text: str) -> None:
    text = edit(supportops_text, "decision_tree:\n", "decison_tree:\n")
    err, path = load_error(tmp_path, text)
    assert "decison_tree" in str(err)
    assert_points_at(err, path, position(text, "decison_tree:")[0])


def test_empty_decision_tree(tmp_path: Path, supportops_text: str) -> None:
    text = (
        supportops_text[: supportops_text.index("decision_tree:")]
        + "decision_tree: []\n"
        + supportops_text[supportops_text.index("tests:") :]
    )
    err, path = load_error(tmp_path, text)
    assert_points_at(err, path, position(text, "decision_tree: []")[0])
    assert "decision_tree" in err.problem
