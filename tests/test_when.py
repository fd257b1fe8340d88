"""``when`` expressions: parsing, precedence, symbols vs paths, evaluation, errors, round-trip."""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentprop._spec.when import (
    And,
    Arith,
    Compare,
    Expr,
    Literal,
    Not,
    Or,
    Path,
    Symbol,
    UnboundVariable,
    WhenClause,
    WhenSyntaxError,
    atoms,
    evaluate,
    lookup,
    parse_when,
    variables,
)

SPECS = [
    f"{suite}/{v}" for suite in ("supportops", "expenseguard", "datainsights") for v in ("v1", "v2")
]


def P(dotted: str) -> Path:
    return Path(tuple(dotted.split(".")))


def expr_of(text: str) -> Expr:
    clause = parse_when(text)
    assert clause.expr is not None
    return clause.expr


# ----------------------------------------------------------------------------- the real specs


def _raw_whens(spec_file: FsPath) -> list[str]:
    data = yaml.safe_load(spec_file.read_text(encoding="utf-8"))
    return [b["when"] for node in data["decision_tree"] for b in (node.get("branches") or [])]


@pytest.mark.parametrize("spec_rel", SPECS)
def test_every_when_of_the_real_specs_parses(specsuite_dir: FsPath, spec_rel: str) -> None:
    whens = _raw_whens(specsuite_dir / spec_rel / "spec.yaml")
    assert len(whens) >= 10
    for text in whens:
        clause = parse_when(text)
        assert clause.source == text
        if text.strip() == "otherwise":
            assert clause.is_otherwise and clause.expr is None
        else:
            assert clause.expr is not None
            # every expression reads at least one variable: none is a constant
            assert variables(clause), text
        # the printed form parses back to the same clause
        assert parse_when(str(clause)) == WhenClause(str(clause), clause.expr, clause.after)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("intent == pii_request", ["intent"]),
        ("verified == true and intent == cancel_order", ["verified", "intent"]),
        (
            "order.days_since_created > plan_rules.cancel_window_days",
            ["order.days_since_created", "plan_rules.cancel_window_days"],
        ),
        ("sql_error == true and retry_count >= 1", ["sql_error", "retry_count"]),
        ("cost_ok == false and cost_rewrite_count == 0", ["cost_ok", "cost_rewrite_count"]),
        ("intent == unknown after clarify", ["intent"]),
        ("cancel_result.status == canceled", ["cancel_result.status"]),
        ("otherwise", []),
        # first-seen order, no duplicates
        ("b > a and a < c or b == 1", ["b", "a", "c"]),
        ("not (x.y + z * 2 >= x.y)", ["x.y", "z"]),
    ],
)
def test_variables_of_sample_clauses(text: str, expected: list[str]) -> None:
    assert variables(parse_when(text)) == expected


def test_atoms_splits_boolean_structure() -> None:
    e = expr_of("a == 1 and (not b or c.d > 2)")
    assert atoms(e) == [
        Compare("==", P("a"), Literal(1)),
        P("b"),
        Compare(">", P("c.d"), Literal(2)),
    ]


# ----------------------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a or b and c", Or((P("a"), And((P("b"), P("c")))))),
        ("a and b or c", Or((And((P("a"), P("b"))), P("c")))),
        ("(a or b) and c", And((Or((P("a"), P("b"))), P("c")))),
        ("not a and b", And((Not(P("a")), P("b")))),
        ("not a == b", Not(Compare("==", P("a"), Symbol("b")))),
        ("not not a", Not(Not(P("a")))),
        ("a or b or c", Or((P("a"), P("b"), P("c")))),
        ("a + b * c > d", Compare(">", Arith("+", P("a"), Arith("*", P("b"), P("c"))), P("d"))),
        ("(a + b) * c > d", Compare(">", Arith("*", Arith("+", P("a"), P("b")), P("c")), P("d"))),
        ("a - b - c < 0", Compare("<", Arith("-", Arith("-", P("a"), P("b")), P("c")), Literal(0))),
        (
            "a / b % c == 1",
            Compare("==", Arith("%", Arith("/", P("a"), P("b")), P("c")), Literal(1)),
        ),
        ("-3 < a", Compare("<", Literal(-3), P("a"))),
        ("-a < 1", Compare("<", Arith("-", Literal(0), P("a")), Literal(1))),
        ("a && b || !c", Or((And((P("a"), P("b"))), Not(P("c"))))),
        ("A AND B", And((P("A"), P("B")))),
    ],
)
def test_precedence_and_associativity(text: str, tree: Expr) -> None:
    assert expr_of(text) == tree


def test_bare_word_on_the_right_of_equality_is_a_symbol() -> None:
    assert expr_of("intent == unknown") == Compare("==", P("intent"), Symbol("unknown"))
    assert expr_of("intent != unknown") == Compare("!=", P("intent"), Symbol("unknown"))
    # a dotted path on the right stays a variable path
    assert expr_of("a.b == c.d") == Compare("==", P("a.b"), P("c.d"))
    # ordering comparisons read variables on both sides
    assert expr_of("a.b > c.d") == Compare(">", P("a.b"), P("c.d"))
    assert expr_of("x > y") == Compare(">", P("x"), P("y"))
    # the left side is always a path
    assert expr_of("unknown == intent") == Compare("==", P("unknown"), Symbol("intent"))
    assert variables(parse_when("intent == unknown")) == ["intent"]
    assert variables(parse_when("a.b == c.d")) == ["a.b", "c.d"]


def test_literals() -> None:
    assert expr_of("a == true") == Compare("==", P("a"), Literal(True))
    assert expr_of("a == FALSE") == Compare("==", P("a"), Literal(False))
    assert expr_of("a == null") == Compare("==", P("a"), Literal(None))
    assert expr_of("a == none") == Compare("==", P("a"), Literal(None))
    assert expr_of("a == 'two words'") == Compare("==", P("a"), Literal("two words"))
    assert expr_of('a == "it\'s"') == Compare("==", P("a"), Literal("it's"))
    assert expr_of("a == 1.5") == Compare("==", P("a"), Literal(1.5))
    assert expr_of("a == 2e3") == Compare("==", P("a"), Literal(2000.0))
    n = expr_of("a == 7")
    assert isinstance(n, Compare) and isinstance(n.right, Literal) and type(n.right.value) is int


def test_otherwise_and_after() -> None:
    o = parse_when("otherwise")
    assert o.is_otherwise and o.expr is None and o.after is None and str(o) == "otherwise"
    assert parse_when("  otherwise  ").is_otherwise
    c = parse_when("intent == unknown after clarify")
    assert not c.is_otherwise
    assert c.after == "clarify"
    assert c.expr == Compare("==", P("intent"), Symbol("unknown"))
    assert str(c) == "intent == unknown after clarify"
    assert parse_when("a and b after confirm").after == "confirm"
    assert parse_when("intent == unknown").after is None


# ----------------------------------------------------------------------------- evaluation


def test_evaluate_nested_and_flat_lookups() -> None:
    c = parse_when("order.days_since_created > plan_rules.cancel_window_days")
    nested = {"order": {"days_since_created": 45}, "plan_rules": {"cancel_window_days": 30}}
    flat = {"order.days_since_created": 45, "plan_rules.cancel_window_days": 30}
    assert evaluate(c, nested) is True
    assert evaluate(c, flat) is True
    assert evaluate(c, {**flat, "order.days_since_created": 30}) is False
    # mixed: one flat, one nested
    assert (
        evaluate(c, {"order.days_since_created": 31, "plan_rules": {"cancel_window_days": 30}})
        is True
    )


def test_flat_key_wins_over_nesting_and_prefixes_are_used() -> None:
    assert lookup({"a.b": 1, "a": {"b": 2}}, "a.b") == 1
    assert lookup({"a.b": {"c": 3}}, "a.b.c") == 3
    assert lookup({"a": {"b": {"c": 4}}}, "a.b.c") == 4
    assert evaluate(parse_when("a.b == 1"), {"a.b": 1, "a": {"b": 2}}) is True


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ("a.b > 1", {}),
        ("a.b > 1", {"a": {}}),
        ("a.b > 1", {"a": 5}),
        ("a.b.c > 1", {"a": {"b": 5}}),
        ("missing == yes", {"present": "yes"}),
    ],
)
def test_unbound_variable(text: str, env: dict[str, Any]) -> None:
    with pytest.raises(UnboundVariable) as info:
        evaluate(parse_when(text), env)
    assert info.value.path == variables(parse_when(text))[0]
    assert info.value.path in str(info.value)
    assert isinstance(info.value, KeyError)


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("intent == unknown", {"intent": "unknown"}, True),
        ("intent == unknown", {"intent": "cancel_order"}, False),
        ("intent != unknown", {"intent": "cancel_order"}, True),
        ("verified == true", {"verified": True}, True),
        ("verified == true", {"verified": False}, False),
        # booleans stay booleans: the string "true" is not the literal true, 1 is not true
        ("verified == true", {"verified": "true"}, False),
        ("verified == true", {"verified": 1}, False),
        ("verified == false", {"verified": 0}, False),
        ("user_confirmation == yes", {"user_confirmation": "yes"}, True),
        ("count == 3", {"count": 3.0}, True),
        ("retry_count >= 1", {"retry_count": 1}, True),
        ("retry_count >= 1", {"retry_count": 0}, False),
        ("x > 1", {"x": None}, False),
        ("x <= 1", {"x": None}, False),
        ("x == null", {"x": None}, True),
        ("x != null", {"x": None}, False),
        ("a + b * 2 == 7", {"a": 1, "b": 3}, True),
        ("(a + b) * 2 == 8", {"a": 1, "b": 3}, True),
        ("a - b - c == -4", {"a": 1, "b": 2, "c": 3}, True),
        ("-a == -2", {"a": 2}, True),
        ("a % 3 == 1", {"a": 7}, True),
        ("not a", {"a": False}, True),
        ("flag", {"flag": True}, True),
        ("flag", {"flag": 0}, False),
        ("a == 1 or b == 2 and c == 3", {"a": 1, "b": 0, "c": 0}, True),
        ("(a == 1 or b == 2) and c == 3", {"a": 1, "b": 0, "c": 0}, False),
        ("not a == 1", {"a": 1}, False),
        ("intent == unknown after clarify", {"intent": "unknown"}, True),
    ],
)
def test_evaluate(text: str, env: dict[str, Any], expected: bool) -> None:
    assert evaluate(parse_when(text), env) is expected


def test_otherwise_is_always_true() -> None:
    assert evaluate(parse_when("otherwise"), {}) is True


def test_evaluate_accepts_a_bare_expression() -> None:
    assert evaluate(expr_of("a > 1"), {"a": 2}) is True


# ----------------------------------------------------------------------------- syntax errors


@pytest.mark.parametrize(
    ("text", "column", "in_message"),
    [
        ("", 1, "empty"),
        ("a ==", 5, "end of the expression"),
        ("a == b c", 8, "'c'"),
        ("a = b", 3, "'='"),
        ("(a == b", 8, "')'"),
        ("(a == b or (c > 1)", 19, "')'"),
        ("a < b < c", 7, "chained"),
        ("a == 1 == 2", 8, "chained"),
        ("x.", 3, "field name"),
        ("x. == 1", 4, "field name"),
        ("a == b $", 8, "'$'"),
        ("a == 'unterminated", 6, "unexpected character"),
        ("otherwise x", 11, "otherwise"),
        ("a == b after", 13, "after"),
        ("a == b after clarify extra", 22, "'extra'"),
        ("and a", 1, "expected a value"),
    ],
)
def test_syntax_errors_point_at_the_column(text: str, column: int, in_message: str) -> None:
    with pytest.raises(WhenSyntaxError) as info:
        parse_when(text)
    err = info.value
    assert err.offset + 1 == column, (err.offset, str(err))
    assert err.text == text
    assert in_message in err.message
    assert err.expected  # says what would have been valid
    assert f"column {column}" in str(err)


def test_non_string_condition_is_a_syntax_error() -> None:
    with pytest.raises(WhenSyntaxError) as info:
        parse_when(True)  # type: ignore[arg-type]
    assert "string" in info.value.message


# ----------------------------------------------------------------------------- round-trip property

NAMES = ["a", "b", "intent", "x_1", "plan_rules", "status", "order"]
KEYWORDS = {"and", "or", "not", "true", "false", "null", "none", "otherwise", "after"}

names = st.sampled_from(NAMES)
paths = st.lists(names, min_size=1, max_size=3).map(lambda parts: Path(tuple(parts)))
printable_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("éü€"),
    max_size=8,
)
numbers = st.integers(-1000, 1000) | st.floats(
    allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6
)
scalar_literals = st.one_of(
    numbers.map(Literal),
    printable_text.map(Literal),
    st.sampled_from([True, False, None]).map(Literal),
)
COMPARE_OPS = ["==", "!=", ">", ">=", "<", "<="]
ARITH_OPS = ["+", "-", "*", "/", "%"]


def _values(leaf: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    """Value-level expressions: literals, paths and (parenthesised) arithmetic."""
    return st.recursive(
        leaf,
        lambda inner: st.builds(Arith, st.sampled_from(ARITH_OPS), inner, inner),
        max_leaves=4,
    )


def _compare(values: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    def build(op: str, left: Expr, right: Expr) -> Expr:
        # the parser reads a single bare name on the right of ==/!= as a symbol
        if op in ("==", "!=") and isinstance(right, Path) and len(right.parts) == 1:
            right = Symbol(right.parts[0])
        return Compare(op, left, right)

    return st.builds(build, st.sampled_from(COMPARE_OPS), values, values)


def _boolean(atom: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.recursive(
        atom,
        lambda inner: st.one_of(
            inner.map(Not),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: And(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Or(tuple(xs))),
        ),
        max_leaves=6,
    )


# The shapes the specs use: booleans over comparisons (or bare paths), arithmetic only inside
# comparisons, printable strings.
well_formed_exprs = _boolean(st.one_of(_compare(_values(st.one_of(scalar_literals, paths))), paths))


def _full_grammar() -> st.SearchStrategy[Expr]:
    """Everything the grammar admits, parenthesised sub-expressions included: ``(a == b) + 1``,
    ``(a and b) == false``, strings with any character."""
    any_text = st.text(max_size=6)
    leaf = st.one_of(scalar_literals, any_text.map(Literal), paths)

    def extend(inner: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        return st.one_of(
            st.builds(Arith, st.sampled_from(ARITH_OPS), inner, inner),
            _compare(inner),
            inner.map(Not),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: And(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Or(tuple(xs))),
        )

    return st.recursive(leaf, extend, max_leaves=6)


env_values = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([0.5, -2.25, True, False, None, "a", "b", "intent", "", "yes"]),
)


# a variable holds a scalar, or a mapping (one or two levels) that dotted paths read into
env_entries = st.one_of(
    env_values,
    st.dictionaries(names, env_values, max_size=3),
    st.dictionaries(names, st.dictionaries(names, env_values, max_size=2), max_size=2),
)


def environments() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(names, env_entries, max_size=len(NAMES))


def _outcome(e: Expr, env: dict[str, Any]) -> tuple[str, Any]:
    try:
        value = evaluate(e, env)
    except Exception as exc:  # the same failure counts as the same behaviour
        return ("raised", type(exc).__name__)
    return ("value", value)


def _roundtrip(e: Expr) -> Expr:
    return expr_of(str(WhenClause("", e)))


@settings(max_examples=150, deadline=None)
@given(well_formed_exprs, st.lists(environments(), min_size=2, max_size=2))
def test_printed_ast_parses_back_to_the_same_tree(e: Expr, envs: list[dict[str, Any]]) -> None:
    back = _roundtrip(e)
    assert back == e, f"{e!r} printed as {str(e)!r} parsed to {back!r}"
    for env in envs:
        assert _outcome(back, env) == _outcome(e, env)


@settings(max_examples=100, deadline=None)
@given(well_formed_exprs, st.sampled_from(["clarify", "confirm"]))
def test_after_suffix_round_trips(e: Expr, after: str) -> None:
    clause = WhenClause("", e, after)
    back = parse_when(str(clause))
    assert back.expr == e and back.after == after


def test_boolean_operand_of_a_comparison_is_printed_with_parentheses() -> None:
    e = expr_of("(a and b) == false")
    assert e == Compare("==", And((P("a"), P("b"))), Literal(False))
    env = {"a": False, "b": True}
    assert evaluate(e, env) is True
    assert _roundtrip(e) == e


def test_string_literal_with_a_newline_round_trips() -> None:
    e = Compare("==", P("a"), Literal("line1\nline2"))
    assert _roundtrip(e) == e


@settings(max_examples=300, deadline=None)
@given(_full_grammar(), st.lists(environments(), min_size=3, max_size=3))
@example(Arith("+", Compare("==", P("a"), Symbol("b")), Literal(1)), [{"a": "b"}, {}, {}])
@example(Compare("==", Not(P("a")), Literal(False)), [{"a": 0}, {}, {}])
@example(Compare("==", P("a"), Literal("\n")), [{"a": "\n"}, {}, {}])
def test_full_grammar_round_trips_to_an_equivalent_expression(
    e: Expr, envs: list[dict[str, Any]]
) -> None:
    back = _roundtrip(e)
    for env in envs:
        assert _outcome(back, env) == _outcome(e, env), (
            f"{e!r} printed as {str(e)!r} re-parsed as {back!r}"
        )


def test_division_by_zero_does_not_crash_evaluation() -> None:
    # a ratio condition over a zero denominator must not raise out of evaluate()
    assert evaluate(parse_when("a / b > 1000"), {"a": 1, "b": 0}) is True
