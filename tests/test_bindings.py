"""Bindings files: the SupportOps example loads; every kind of mistake is a
located BindingsError."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprop._spec.bindings import (
    Bindings,
    empty_bindings,
    find_bindings,
    load_bindings,
    parse_field_path,
    schema_at,
)
from agentprop._spec.implied import condition_variables
from agentprop._spec.load import load_spec
from agentprop._spec.model import Spec
from agentprop.errors import BindingsError


@pytest.fixture()
def bindings_text(supportops_example_dir: Path) -> str:
    return (supportops_example_dir / "agentprop.yaml").read_text(encoding="utf-8")


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"edit target {old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def position(text: str, needle: str, token: str | None = None) -> tuple[int, int]:
    at = text.index(needle) + (needle.index(token) if token is not None else 0)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def bindings_error(tmp_path: Path, text: str, spec: Spec) -> tuple[BindingsError, Path]:
    path = tmp_path / "agentprop.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BindingsError) as info:
        load_bindings(path, spec)
    return info.value, path


def assert_at(err: BindingsError, path: Path, line: int, col: int | None = None) -> None:
    assert err.location is not None and err.location.path == path, str(err)
    assert err.location.line == line, f"line {err.location.line}, expected {line}:\n{err}"
    if col is not None:
        assert err.location.column == col, f"column {err.location.column}, expected {col}:\n{err}"
    assert str(err).startswith(f"{path}:{line}:")
    assert err.fix and "\n  fix: " in str(err)


# ----------------------------------------------------------------------------- the example


def test_supportops_bindings_load(
    supportops_bindings: Bindings, supportops_spec: Spec, supportops_example_dir: Path
) -> None:
    b = supportops_bindings
    assert b.path == supportops_example_dir / "agentprop.yaml"
    assert b.base_dir == supportops_example_dir
    # every variable the spec reads is bound, so there is nothing to warn about
    assert set(b.variables) == set(condition_variables(supportops_spec))
    assert b.warnings == []
    assert b.variables["intent"].kind == "utterance"
    assert b.variables["verified"].kind == "world"
    assert b.variables["user_confirmation"].kind == "followup"
    # `unclear` is neither yes nor no: N6_CONFIRM_CANCEL's `otherwise` loop asks again
    assert b.variables["user_confirmation"].finite_values() == ["yes", "no", "unclear"]
    assert b.variables["verified"].finite_values() is None  # a free field value
    assert set(b.variables["intent"].finite_values() or []) == {
        "cancel_order",
        "change_address",
        "billing_question",
        "pii_request",
        "unknown",
    }
    assert b.pii == {"get_account": ["pii.ssn", "pii.dob", "pii.email", "pii.phone"]}
    assert b.agent == "agent:SupportOpsAgent"
    assert b.slots["last4"] == "4242"  # quoted in YAML: stays a string
    enum = supportops_spec.response_contract.decision_enum
    assert b.outcome("END_TICKET", "N7_CANCEL", enum) == "TICKET_CREATED"
    assert b.outcome("END_CANCELLED", "N7_CANCEL", enum) == "CANCELLED"


def test_find_bindings(supportops_example_dir: Path, tmp_path: Path) -> None:
    assert (
        find_bindings(supportops_example_dir / "spec.yaml")
        == supportops_example_dir / "agentprop.yaml"
    )
    assert find_bindings(supportops_example_dir) == supportops_example_dir / "agentprop.yaml"
    (tmp_path / "v1").mkdir()
    assert find_bindings(tmp_path / "v1" / "spec.yaml") is None
    (tmp_path / "agentprop.yaml").write_text("{}\n")
    assert find_bindings(tmp_path / "v1" / "spec.yaml") == tmp_path / "agentprop.yaml"


def test_outcome_mapping_per_incoming_node(tmp_path: Path, specsuite_dir: Path) -> None:
    spec = load_spec(specsuite_dir / "expenseguard" / "v1" / "spec.yaml")
    path = tmp_path / "agentprop.yaml"
    path.write_text(
        "outcomes:\n  END_APPROVE: APPROVE_SUBMIT\n  END_REJECT:\n    N4A_REJECT_DISALLOWED: "
        "REJECT_DISALLOWED\n    N6_DECIDE: REJECT_POLICY\n"
    )
    b = load_bindings(path, spec)
    enum = spec.response_contract.decision_enum
    assert b.outcome("END_APPROVE", "N7_SUBMIT", enum) == "APPROVE_SUBMIT"
    assert b.outcome("END_REJECT", "N4A_REJECT_DISALLOWED", enum) == "REJECT_DISALLOWED"
    assert b.outcome("END_REJECT", "N6_DECIDE", enum) == "REJECT_POLICY"
    assert b.outcome("END_REJECT", None, enum) is None  # ambiguous without the incoming node
    # mapped leaves no longer warn; unbound variables still do
    assert not [w for w in b.warnings if "END_REJECT" in w or "END_APPROVE" in w]
    assert any("receipt_found" in w for w in b.warnings)


# ----------------------------------------------------------------------------- mistakes


def test_unknown_variable_suggests_the_closest(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(bindings_text, "  verified:\n", "  verifed:\n")
    err, path = bindings_error(tmp_path, text, supportops_spec)
    key_line = position(text, "  verifed:")[0]
    assert err.location is not None and err.location.line in (key_line, key_line + 1)
    assert "'verifed'" in err.problem
    assert "did you mean 'verified'?" in (err.fix or "")
    assert "intent" in (err.fix or "")  # lists the variables the spec reads


def test_unknown_variable_points_at_its_name(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(bindings_text, "  verified:\n", "  verifed:\n")
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert_at(err, path, *position(text, "  verifed:", "verifed"))


def test_unknown_tool(tmp_path: Path, bindings_text: str, supportops_spec: Spec) -> None:
    old = "world: {tool: verify_identity, field: verified}"
    text = edit(bindings_text, old, old.replace("verify_identity", "verify_identty"))
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert_at(err, path, *position(text, "tool: verify_identty", "verify_identty"))
    assert "'verify_identty'" in err.problem
    assert "verify_identity" in (err.fix or "") and "respond" not in (err.fix or "")


@pytest.mark.parametrize(
    ("old", "new", "bad"),
    [
        (
            "world: {tool: verify_identity, field: verified}",
            "world: {tool: verify_identity, field: verfied}",
            "verfied",
        ),
        (
            'field: "orders[0].days_since_created"',
            'field: "orders[0].days_since"',
            "orders[0].days_since",
        ),
        ("get_account: [pii.ssn, pii.dob", "get_account: [pii.sn, pii.dob", "pii.sn"),
    ],
    ids=["top-level", "nested-in-list", "pii"],
)
def test_unknown_output_field(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec, old: str, new: str, bad: str
) -> None:
    text = edit(bindings_text, old, new)
    err, path = bindings_error(tmp_path, text, supportops_spec)
    line, col = position(text, new, bad)
    if new[new.index(bad) - 1] in "'\"":
        col -= 1  # a quoted scalar starts at its opening quote
    assert_at(err, path, line, col)
    assert f"no output field {bad!r}" in err.problem


def test_malformed_field_path(tmp_path: Path, bindings_text: str, supportops_spec: Spec) -> None:
    text = edit(
        bindings_text,
        'field: "orders[0].days_since_created"',
        'field: "orders[x].days_since_created"',
    )
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert_at(err, path, position(text, "orders[x]")[0])
    assert "orders[x]" in err.problem
    assert "orders[0].status" in (err.fix or "")


def test_world_override_field_is_checked(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(bindings_text, "    can_cancel: true\n", "    can_cancle: true\n")
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert "can_cancle" in err.problem
    assert err.location is not None and err.location.line in range(
        position(text, "  get_plan_rules:\n")[0], position(text, "    can_cancle")[0] + 1
    )


UNKNOWN_FAILURE = """  cancel_result.status:
    world:
      tool: cancel_order
      values:
        canceled: {set: {status: canceled}}
        failed: {failure: exploded}
"""


def test_unknown_failure_mode(tmp_path: Path, bindings_text: str, supportops_spec: Spec) -> None:
    text = edit(
        bindings_text,
        "  cancel_result.status:\n    world: {tool: cancel_order, field: status}\n",
        UNKNOWN_FAILURE,
    )
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert_at(err, path, *position(text, "failure: exploded", "exploded"))
    assert "'exploded'" in err.problem and "cancel_order" in err.problem
    for mode in ("timeout", "not_found", "rate_limited"):
        assert mode in (err.fix or "")


def test_effect_sets_unknown_field(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(
        bindings_text,
        "  cancel_result.status:\n    world: {tool: cancel_order, field: status}\n",
        UNKNOWN_FAILURE.replace("{set: {status: canceled}}", "{set: {state: canceled}}").replace(
            "exploded", "timeout"
        ),
    )
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert "'state'" in err.problem
    assert err.location is not None and err.location.line == position(text, "set: {state")[0]


def test_followup_after_decision_not_in_enum(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(bindings_text, "after_decision: ASK_CONFIRM_CANCEL", "after_decision: ASK_CONFIRM")
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert_at(err, path, *position(text, "after_decision: ASK_CONFIRM", "ASK_CONFIRM"))
    assert "'ASK_CONFIRM'" in err.problem
    assert "ASK_CONFIRM_CANCEL" in (err.fix or "")


@pytest.mark.parametrize(
    ("old", "new", "slot"),
    [
        (
            '"What\'s the SSN you have on file for me?"',
            '"What\'s the SSN on file for {account_ref}?"',
            "account_ref",
        ),
        ('"Yes, cancel it."', '"Yes, cancel {order_number}."', "order_number"),
    ],
    ids=["utterance", "followup"],
)
def test_template_slot_not_defined(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec, old: str, new: str, slot: str
) -> None:
    text = edit(bindings_text, old, new)
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert_at(err, path, *position(text, new))
    assert f"{{{slot}}}" in err.problem
    assert f"{slot}:" in (err.fix or "") and "slots:" in (err.fix or "")


def test_withheld_slot_not_defined(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    old = (
        "  plan_rules.address_change_allowed:\n    world: {tool: get_plan_rules, field: "
        "address_change_allowed}\n"
    )
    new = (
        '  plan_rules.address_change_allowed:\n    withhold: {"true": [], "false": [new_adress]}\n'
    )
    text = edit(bindings_text, old, new)
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert err.location is not None and err.location.line == position(text, "withhold:")[0]
    assert "'new_adress'" in err.problem
    assert "slots:" in (err.fix or "")


@pytest.mark.parametrize(
    ("outcomes", "bad", "in_problem"),
    [
        ("outcomes:\n  N2_AUTH: REFUSE_AUTH\n", "N2_AUTH", "not a terminal node"),
        ("outcomes:\n  END_TICKET: TICKET_OPENED\n", "TICKET_OPENED", "unknown decision"),
        ("outcomes:\n  END_TICKET:\n    N7_CANCL: TICKET_CREATED\n", "N7_CANCL", "unknown node"),
        (
            "outcomes:\n  END_TICKET:\n    N7_CANCEL: TICKET_OPENED\n",
            "TICKET_OPENED",
            "unknown decision",
        ),
    ],
    ids=["non-terminal", "unknown-decision", "unknown-via", "unknown-decision-via"],
)
def test_bad_outcomes(
    tmp_path: Path,
    bindings_text: str,
    supportops_spec: Spec,
    outcomes: str,
    bad: str,
    in_problem: str,
) -> None:
    text = bindings_text + outcomes
    err, path = bindings_error(tmp_path, text, supportops_spec)
    # the appended outcomes block is the last place the bad name occurs
    assert err.location is not None and err.location.path == path
    assert err.location.line == text[: text.rindex(bad)].count("\n") + 1, str(err)
    assert in_problem in err.problem and bad in err.problem
    assert err.fix


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("utterances: []\n", "utterances: []\nutterance_defaults: []\n", "utterance_defaults"),
        (
            "    world: {tool: verify_identity, field: verified}\n",
            "    wrld: {tool: verify_identity, field: verified}\n",
            "wrld",
        ),
        (
            "world: {tool: verify_identity, field: verified}",
            "world: {tool: verify_identity, field: verified, fields: x}",
            "fields",
        ),
    ],
    ids=["top-level", "variable", "world-binding"],
)
def test_unknown_key(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec, old: str, new: str, key: str
) -> None:
    text = edit(bindings_text, old, new)
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert err.location is not None and err.location.line == position(text, new, key)[0], str(err)
    assert key in err.problem
    assert f"remove or rename {key!r}" in (err.fix or "")


def test_variable_with_two_kinds(tmp_path: Path, bindings_text: str, supportops_spec: Spec) -> None:
    old = "    world: {tool: verify_identity, field: verified}\n"
    text = edit(bindings_text, old, old + '    withhold: {"false": [zip]}\n')
    err, path = bindings_error(tmp_path, text, supportops_spec)
    block = range(position(text, "  verified:\n")[0], position(text, "    withhold:")[0] + 1)
    assert err.location is not None and err.location.line in block
    assert "exactly one of" in err.problem and "withhold" in err.problem and "world" in err.problem


def test_variable_with_no_kind(tmp_path: Path, bindings_text: str, supportops_spec: Spec) -> None:
    old = "    world: {tool: verify_identity, field: verified}\n"
    text = edit(bindings_text, old, "    description: nothing else\n")
    err, _ = bindings_error(tmp_path, text, supportops_spec)
    assert "exactly one of" in err.problem and "variables.verified" in err.problem


def test_world_binding_needs_field_or_values(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(
        bindings_text,
        "world: {tool: verify_identity, field: verified}",
        "world: {tool: verify_identity}",
    )
    err, _ = bindings_error(tmp_path, text, supportops_spec)
    assert "field" in err.problem and "values" in err.problem


@pytest.mark.parametrize(
    ("old", "new", "bad"),
    [
        (
            "  verify_identity: {verified: true}\n",
            "  verify_identy: {verified: true}\n",
            "verify_identy",
        ),
        (
            "    must_call_tools_in_order: [create_ticket]\n",
            "    must_call_tools_in_order: [open_ticket]\n",
            "open_ticket",
        ),
        (
            "pii:                              # canaries",
            "handlers:\n  run_sql: handlers:sql\npii:  # canaries",
            "run_sql",
        ),
    ],
    ids=["world", "nodes", "handlers"],
)
def test_other_sections_name_unknown_tools(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec, old: str, new: str, bad: str
) -> None:
    text = edit(bindings_text, old, new)
    err, _ = bindings_error(tmp_path, text, supportops_spec)
    assert f"unknown tool {bad!r}" in err.problem


def test_unknown_nodes_in_nodes_and_capabilities(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    err, _ = bindings_error(
        tmp_path, edit(bindings_text, "  END_TICKET:\n", "  END_TIKET:\n"), supportops_spec
    )
    assert "'END_TIKET'" in err.problem
    err, _ = bindings_error(
        tmp_path,
        edit(bindings_text, "[N3_BILLING, END_BILLING_ANSWER]", "[N3_BILING]"),
        supportops_spec,
    )
    assert "'N3_BILING'" in err.problem and "single-step tools" in err.problem


def test_top_level_not_a_mapping(tmp_path: Path, supportops_spec: Spec) -> None:
    err, path = bindings_error(tmp_path, "- variables\n", supportops_spec)
    assert_at(err, path, 1, 1)


def test_yaml_syntax_error_is_a_bindings_error(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(bindings_text, "  order_id: O-1001\n", "  order_id: [O-1001\n")
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert (
        "YAML syntax error" in err.problem
        and err.location is not None
        and err.location.path == path
    )


def test_empty_file_is_empty_bindings(tmp_path: Path, supportops_spec: Spec) -> None:
    path = tmp_path / "agentprop.yaml"
    path.write_text("# nothing yet\n")
    b = load_bindings(path, supportops_spec)
    assert b.variables == {}
    assert len(b.warnings) == len(condition_variables(supportops_spec))


# ----------------------------------------------------------------------------- warnings


def test_unbound_variable_is_a_warning(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(
        bindings_text,
        "  cancel_result.status:\n    world: {tool: cancel_order, field: status}\n",
        "",
    )
    path = tmp_path / "agentprop.yaml"
    path.write_text(text)
    b = load_bindings(path, supportops_spec)
    assert len(b.warnings) == 1
    assert "'cancel_result.status'" in b.warnings[0] and "no binding" in b.warnings[0]


def test_ambiguous_leaves_warn_without_outcomes(specsuite_dir: Path) -> None:
    spec = load_spec(specsuite_dir / "expenseguard" / "v1" / "spec.yaml")
    warnings = empty_bindings(spec).warnings
    ambiguous = [w for w in warnings if "stands for no single decision" in w]
    assert {w.split()[2] for w in ambiguous} == {"END_REJECT", "END_APPROVE"}
    assert all("outcomes" in w for w in ambiguous)


# ----------------------------------------------------------------------------- field paths


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("verified", ["verified"]),
        ("pii.ssn", ["pii", "ssn"]),
        ("orders[0].days_since_created", ["orders", 0, "days_since_created"]),
        ("grid[1][2].v", ["grid", 1, 2, "v"]),
    ],
)
def test_parse_field_path(path: str, parts: list[str | int]) -> None:
    assert parse_field_path(path) == parts


@pytest.mark.parametrize("bad", ["", "a..b", "orders[x]", "1abc", "a.b[", "a b"])
def test_parse_field_path_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_field_path(bad)


def test_schema_at(supportops_spec: Spec) -> None:
    schema = supportops_spec.tool("get_account").output_schema
    assert schema_at(schema, ["orders", 0, "days_since_created"]) == {"type": "integer"}
    assert schema_at(schema, ["pii", "ssn"]) == {"type": "string"}
    assert schema_at(schema, ["orders", "status"]) is None  # an array needs an index
    assert schema_at(schema, ["plan_id", 0]) is None  # a string has no items
    assert schema_at(schema, ["nope"]) is None
    assert schema_at({"type": "object"}, ["anything", "below"]) == {}


def test_unquoted_yes_no_values_are_flagged(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(edit(bindings_text, '"yes": [', "yes: ["), '"no": [', "no: [")
    path = tmp_path / "agentprop.yaml"
    path.write_text(text)
    try:
        b = load_bindings(path, supportops_spec)
    except BindingsError as err:
        assert "quote" in str(err).lower()
        assert err.location is not None and err.location.line == position(text, "yes: [")[0]
    else:
        assert any("yes" in w and "quot" in w.lower() for w in b.warnings), b.warnings


# ----------------------------------------------------------------------------- languages


def test_languages_default_to_those_of_the_templates(
    supportops_bindings: Bindings, tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    assert supportops_bindings.languages == [
        "en",
        "zh",
    ] and supportops_bindings.declared_languages == ["en", "zh"]
    path = tmp_path / "agentprop.yaml"
    path.write_text(edit(bindings_text, "languages: [en, zh]", "# no languages"), encoding="utf-8")
    # the Chinese templates say so
    assert load_bindings(path, supportops_spec).declared_languages == ["en", "zh"]


def test_a_template_in_an_undeclared_language_is_located(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    text = edit(bindings_text, "languages: [en, zh]", "languages: [en]")
    err, path = bindings_error(tmp_path, text, supportops_spec)
    assert_at(err, path, *position(text, '"请帮我取消订单'))
    assert "written in zh, which `languages:` (en) does not declare" in str(
        err
    ) and "add zh to `languages:`" in str(err)


@pytest.mark.parametrize(
    ("languages", "token", "problem"),
    [
        ("[en, zh, en]", "en]", "listed twice"),
        ("[en, Chinese]", "Chinese", "is not a language code"),
        ("[]", "[]", "is empty"),
    ],
)
def test_bad_languages_are_located(
    tmp_path: Path,
    bindings_text: str,
    supportops_spec: Spec,
    languages: str,
    token: str,
    problem: str,
) -> None:
    text = edit(bindings_text, "languages: [en, zh]", f"languages: {languages}")
    err, path = bindings_error(tmp_path, text, supportops_spec)
    needle = f"languages: {languages}"
    at = position(text, needle, token if token != "en]" else None)
    if token == "en]":
        at = position(text, needle)[0], text.split("\n")[at[0] - 1].rindex("en") + 1
    assert_at(err, path, *at)
    assert problem in str(err)


def test_a_language_without_a_phrase_pack_is_located(
    tmp_path: Path, bindings_text: str, supportops_spec: Spec
) -> None:
    from agentprop.strategies._internal.packs import check_languages

    text = edit(bindings_text, "languages: [en, zh]", "languages: [en, zh, fr]")
    path = tmp_path / "agentprop.yaml"
    path.write_text(text, encoding="utf-8")
    # a well-formed code: the pack is checked where packs are known
    b = load_bindings(path, supportops_spec)
    with pytest.raises(BindingsError) as info:
        check_languages(b)
    line, _ = position(text, "languages: [en, zh, fr]")
    assert_at(info.value, path, line, text.split("\n")[line - 1].index("fr") + 1)
    assert "'fr' has no phrase pack" in str(info.value) and "en, zh" in str(info.value)


def test_lint_names_a_declared_language_without_a_pack(
    tmp_path: Path, bindings_text: str, supportops_example_dir: Path
) -> None:
    from agentprop._cli import main

    (tmp_path / "spec.yaml").write_text(
        (supportops_example_dir / "spec.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "agentprop.yaml").write_text(
        edit(bindings_text, "languages: [en, zh]", "languages: [en, zh, fr]"), encoding="utf-8"
    )
    import io

    out = io.StringIO()
    assert main(["lint", str(tmp_path)], out=out, err=out) == 2
    assert "agentprop.yaml:" in out.getvalue() and "'fr' has no phrase pack" in out.getvalue()
