"""Hostile input: every malformed spec, bindings file or phrase pack is a clear error.

Each input of the attack in issue #15 must end as ``agentprop: error: FILE:LINE:COL: ...`` with
a fix, exit code 2, in bounded time and memory, and with a message that never echoes a long
value. Every input is made by editing a copy of the SupportOps example (its spec, its bindings)
or of a shipped phrase pack; no agent runs.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop.errors import InputError
from agentprop.strategies._internal.packs import builtin_pack_dir, load_pack_text

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
SPEC = (EXAMPLE / "spec.yaml").read_text(encoding="utf-8")
BINDINGS = (EXAMPLE / "agentprop.yaml").read_text(encoding="utf-8")
PACK = (builtin_pack_dir() / "en.yaml").read_text(encoding="utf-8")

MAX_MESSAGE = 2_000
"""No error message is longer than this (the attack's 120 KB value must not come back)."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, f"edit target {old!r} not found"
    return text.replace(old, new, 1)


def project(tmp_path: Path, *, spec: str = SPEC, bindings: str = BINDINGS) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "spec.yaml").write_text(spec, encoding="utf-8")
    (root / "agentprop.yaml").write_text(bindings, encoding="utf-8")
    shutil.copy(EXAMPLE / "agent.py", root / "agent.py")
    return root


def lint(root: Path, seconds: float = 20.0) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with deadline(seconds):
        code = main(["lint", str(root)], out=out, err=err)
    return code, err.getvalue()


LOCATED = re.compile(
    r"^agentprop: error: (?P<file>\S+?):(?P<line>\d+):(?P<col>\d+): (?P<problem>.+)$", re.M
)


def assert_clear_error(code: int, err: str, file: Path, *words: str) -> re.Match[str]:
    """Exit 2, one message ``FILE:LINE:COL: problem`` with a fix, short, naming ``words``."""
    assert code == 2, f"exit {code}, expected 2 (an input error):\n{err[:3000]}"
    assert "Traceback" not in err
    m = LOCATED.search(err)
    assert m is not None, f"no FILE:LINE:COL in:\n{err[:3000]}"
    assert Path(m["file"]) == file, err
    assert "  fix: " in err, err
    assert len(err) <= MAX_MESSAGE, f"{len(err)} characters of error message"
    for word in words:
        assert word.lower() in err.lower(), f"{word!r} not in:\n{err}"
    return m


def line_of(text: str, needle: str) -> int:
    return text.count("\n", 0, text.index(needle)) + 1


def named(*cases: tuple[object, ...]) -> list[object]:
    """Parameter sets whose test id is their first element (the inputs are too long for ids)."""
    return [pytest.param(*case, id=str(case[0])) for case in cases]


# --------------------------------------------------------------------------- YAML itself

LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip([None, "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi")
)


@pytest.mark.parametrize(
    "name, text, words",
    named(
        ("recursive alias (sequence)", "spec_id: &a [*a]\n", ["alias", "itself"]),
        ("recursive alias (mapping)", "spec_id: &a {x: *a}\n", ["alias", "itself"]),
        ("billion laughs", LAUGHS, ["alias", "limit"]),
        (
            "1,000 nested flow lists",
            "spec_id: " + "[" * 1000 + "]" * 1000 + "\n",
            ["deep", "limit"],
        ),
        (
            "1,000 nested flow maps",
            "spec_id: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n",
            ["deep", "limit"],
        ),
        (
            "1,000 nested block lists",
            "spec_id:\n" + "".join("  " * i + "-\n" for i in range(1000)),
            ["deep", "limit"],
        ),
        (
            "an integer of 5,000 digits",
            edit(SPEC, "max_tool_calls_per_turn: 4", "max_tool_calls_per_turn: " + "9" * 5000),
            ["digits", "limit"],
        ),
        ("a control byte", edit(SPEC, "SupportOps Agent", "Support\x01Ops"), ["control character"]),
        ("a NUL byte", edit(SPEC, "SupportOps Agent", "Support\x00Ops"), ["control character"]),
    ),
)
def test_hostile_yaml_is_a_located_error(
    tmp_path: Path, name: str, text: str, words: list[str]
) -> None:
    root = project(tmp_path, spec=text)
    code, err = lint(root)
    assert_clear_error(code, err, root / "spec.yaml", *words)


def test_billion_laughs_in_the_bindings_stops_early(tmp_path: Path) -> None:
    root = project(tmp_path, bindings=BINDINGS + "\n" + "x" + LAUGHS.replace("\n", "\nx")[:-1])
    code, err = lint(root, seconds=10)
    assert_clear_error(code, err, root / "agentprop.yaml", "alias")


def test_a_yaml_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    root = project(tmp_path, spec=SPEC + "#" + "x" * (5 * 1024 * 1024) + "\n")
    code, err = lint(root)
    assert_clear_error(code, err, root / "spec.yaml", "limit", "bytes")


def test_control_byte_points_at_its_line_and_column(tmp_path: Path) -> None:
    text = edit(SPEC, "SupportOps Agent", "Support\x01Ops")
    root = project(tmp_path, spec=text)
    m = assert_clear_error(*lint(root), root / "spec.yaml")
    at = text.index("\x01")
    assert int(m["line"]) == text.count("\n", 0, at) + 1
    assert int(m["col"]) == at - text.rfind("\n", 0, at)


# --------------------------------------------------------------------------- the spec

WHEN = "intent == pii_request"


@pytest.mark.parametrize(
    "name, new, words",
    named(
        (
            "130 nested parentheses",
            "(" * 130 + "intent == pii_request" + ")" * 130,
            ["nested", "limit"],
        ),
        ("400 nots", "not " * 400 + "intent == pii_request", ["nested", "limit"]),
        ("1,000 unary minuses", "-" * 1000 + "1 == x", ["nested", "limit"]),
        ("a 5,000-digit number", "x == " + "9" * 5000, ["digits"]),
        ("3,000 additions", " + ".join(["x"] * 3000) + " > 1", ["long", "limit"]),
    ),
)
def test_hostile_when_is_a_located_error(
    tmp_path: Path, name: str, new: str, words: list[str]
) -> None:
    text = edit(SPEC, f"when: {WHEN}", f"when: '{new}'")
    root = project(tmp_path, spec=text)
    m = assert_clear_error(*lint(root), root / "spec.yaml", *words)
    assert int(m["line"]) == line_of(text, "when: '")


@pytest.mark.parametrize("value", ["{x: 1}", "5", "[A, B]"])
def test_a_decision_enum_that_is_not_strings_is_a_located_error(tmp_path: Path, value: str) -> None:
    old = "      decision:\n        type: string\n        enum:\n        - REQUEST_AUTH_INFO\n"
    text = edit(SPEC, old, old + f"        - {value}\n")
    root = project(tmp_path, spec=text)
    m = assert_clear_error(*lint(root), root / "spec.yaml", "decision", "enum")
    assert int(m["line"]) == line_of(text, f"        - {value}\n")


def test_a_contract_decision_enum_holding_an_object_is_a_located_error(tmp_path: Path) -> None:
    text = edit(SPEC, "  decision_enum:\n", "  decision_enum:\n  - {x: 1}\n")
    root = project(tmp_path, spec=text)
    assert_clear_error(*lint(root), root / "spec.yaml", "decision_enum")


SCHEMA_FIELD = "            days_since_created:\n              type: integer\n"


@pytest.mark.parametrize(
    "name, extra, words",
    named(
        (
            "minimum > maximum",
            "              minimum: 10\n              maximum: 1\n",
            ["minimum", "maximum"],
        ),
        (
            "exclusiveMinimum >= maximum",
            "              exclusiveMinimum: 5\n              maximum: 5\n",
            ["exclusiveMinimum", "maximum"],
        ),
        ("an infinite maximum", "              maximum: .inf\n", ["maximum", "finite"]),
        ("a maximum of 10^300", "              maximum: 1.0e+300\n", ["maximum", "limit"]),
    ),
)
def test_an_impossible_output_schema_is_a_located_error(
    tmp_path: Path, name: str, extra: str, words: list[str]
) -> None:
    text = edit(SPEC, SCHEMA_FIELD, SCHEMA_FIELD + extra)
    root = project(tmp_path, spec=text)
    m = assert_clear_error(*lint(root), root / "spec.yaml", *words)
    assert line_of(text, SCHEMA_FIELD) <= int(m["line"]) <= line_of(text, SCHEMA_FIELD) + 4


@pytest.mark.parametrize(
    "extra, words",
    [
        ("        minItems: 50000000\n", ["minItems", "limit"]),
        ("        minItems: 3\n        maxItems: 1\n", ["minItems", "maxItems"]),
    ],
    ids=["minItems 5e7", "minItems > maxItems"],
)
def test_an_output_list_too_long_to_generate_is_a_located_error(
    tmp_path: Path, extra: str, words: list[str]
) -> None:
    text = edit(
        SPEC, "      orders:\n        type: array\n", "      orders:\n        type: array\n" + extra
    )
    root = project(tmp_path, spec=text)
    assert_clear_error(*lint(root), root / "spec.yaml", *words)


def test_long_values_are_cut_in_error_messages(tmp_path: Path) -> None:
    text = edit(SPEC, "risk_level: medium", "risk_level: '" + "x" * 120_000 + "'")
    root = project(tmp_path, spec=text)
    assert_clear_error(*lint(root), root / "spec.yaml", "risk_level", "characters")


# --------------------------------------------------------------------------- the bindings


def test_a_field_under_a_true_sub_schema_loads_and_is_generated(tmp_path: Path) -> None:
    """``verified: true`` (the boolean schema that accepts anything) may hold fields: the
    bindings load, every case is built, and each world answers with the field set."""
    from agentprop._agents.project import load_project
    from agentprop._scenario.build import make_world

    spec = edit(SPEC, "      verified:\n        type: boolean\n", "      verified: true\n")
    bindings = edit(
        BINDINGS,
        "world: {tool: verify_identity, field: verified}",
        "world: {tool: verify_identity, field: verified.deeper}",
    )
    root = project(tmp_path, spec=spec, bindings=bindings)
    code, err = lint(root)
    assert code in (0, 1) and "error:" not in err, err
    loaded = load_project(root)
    scenarios = loaded.scenarios()
    assert scenarios
    for sc in scenarios:
        output = make_world(loaded.spec, loaded.bindings, sc).default_output("verify_identity")
        assert isinstance(output, dict)


def test_a_field_under_a_false_sub_schema_is_a_located_error(tmp_path: Path) -> None:
    spec = edit(SPEC, "      verified:\n        type: boolean\n", "      verified: false\n")
    root = project(tmp_path, spec=spec)
    assert_clear_error(*lint(root), root / "agentprop.yaml", "verified")


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("    can_cancel: true\n", "    can_cancel: [1, 2]\n", ["can_cancel", "boolean"]),
        (
            "    cancel_window_days: 30\n",
            "    cancel_window_days: abc\n",
            ["cancel_window_days", "integer"],
        ),
        (
            "  verify_identity: {verified: true}\n",
            "  verify_identity: {verified: 7}\n",
            ["verified", "boolean"],
        ),
    ],
    ids=["list for a boolean", "word for an integer", "number for a boolean"],
)
def test_a_world_value_of_the_wrong_type_is_a_located_error(
    tmp_path: Path, old: str, new: str, words: list[str]
) -> None:
    bindings = edit(BINDINGS, old, new)
    root = project(tmp_path, bindings=bindings)
    m = assert_clear_error(*lint(root), root / "agentprop.yaml", *words)
    assert int(m["line"]) == line_of(bindings, new.strip())


def test_a_world_value_that_is_a_slot_template_still_loads(tmp_path: Path) -> None:
    """``order_id: "{order_id}"`` is filled in from ``slots:``; it is not a type error."""
    code, err = lint(project(tmp_path))
    assert code in (0, 1), err
    assert "error" not in err


@pytest.mark.parametrize(
    "old, new, words",
    [
        (
            "cancel_window_days, min: 0}",
            "cancel_window_days, min: 0, max: .inf}",
            ["max", "finite"],
        ),
        ("cancel_window_days, min: 0}", "cancel_window_days, min: .nan}", ["min", "finite"]),
        ("cancel_window_days, min: 0}", "cancel_window_days, min: 10, max: 1}", ["min", "max"]),
        (
            "cancel_window_days, min: 0}",
            "cancel_window_days, min: 0, max: 1.0e+300}",
            ["max", "limit"],
        ),
    ],
    ids=["max .inf", "min .nan", "min > max", "max 1e300"],
)
def test_a_bad_world_range_is_a_located_error(
    tmp_path: Path, old: str, new: str, words: list[str]
) -> None:
    bindings = edit(BINDINGS, old, new)
    root = project(tmp_path, bindings=bindings)
    m = assert_clear_error(*lint(root), root / "agentprop.yaml", *words)
    assert int(m["line"]) == line_of(bindings, new)


@pytest.mark.parametrize(
    "ref", ["../x", "../x:Agent", "..x:Agent", "/etc/passwd:Agent", "agent:Agent;rm", "a b:C", ""]
)
def test_an_agent_ref_that_is_not_module_colon_attr_is_a_located_error(
    tmp_path: Path, ref: str
) -> None:
    bindings = edit(BINDINGS, "agent: agent:SupportOpsAgent", f"agent: {ref!r}")
    root = project(tmp_path, bindings=bindings)
    m = assert_clear_error(*lint(root), root / "agentprop.yaml", "agent")
    assert int(m["line"]) == line_of(bindings, "agent: '")


@pytest.mark.parametrize(
    "index", ["100000", "99999999999", "9" * 400], ids=["1e5", "1e11", "400 digits"]
)
def test_a_huge_list_index_is_a_located_error(tmp_path: Path, index: str) -> None:
    bindings = edit(
        BINDINGS, '"orders[0].days_since_created"', f'"orders[{index}].days_since_created"'
    )
    root = project(tmp_path, bindings=bindings)
    assert_clear_error(*lint(root), root / "agentprop.yaml", "index", "limit")


def test_duplicate_keys_in_the_bindings_are_an_error(tmp_path: Path) -> None:
    bindings = edit(
        BINDINGS, "    can_cancel: true\n", "    can_cancel: true\n    can_cancel: false\n"
    )
    root = project(tmp_path, bindings=bindings)
    m = assert_clear_error(*lint(root), root / "agentprop.yaml", "duplicate", "can_cancel")
    assert int(m["line"]) == line_of(bindings, "    can_cancel: false")


def test_duplicate_keys_in_the_bindings_are_an_error_at_the_top_level(tmp_path: Path) -> None:
    bindings = edit(BINDINGS, "version: 1\n", "version: 1\nversion: 1\n")
    root = project(tmp_path, bindings=bindings)
    m = assert_clear_error(*lint(root), root / "agentprop.yaml", "duplicate", "version")
    assert int(m["line"]) == 4


def test_a_120kb_bindings_value_is_cut_in_the_message(tmp_path: Path) -> None:
    bindings = edit(BINDINGS, "slots:", "utterances: {x: '" + "y" * 120_000 + "'}\nslots:")
    root = project(tmp_path, bindings=bindings)
    assert_clear_error(*lint(root), root / "agentprop.yaml")


# --------------------------------------------------------------------------- phrase packs


@pytest.mark.parametrize(
    "name, text, words",
    named(
        ("billion laughs", "lang: en\n" + LAUGHS.replace("a: &a", "greetings: &a", 1), ["alias"]),
        ("recursive alias", "lang: en\ngreetings: &g [*g]\n", ["alias", "itself"]),
        ("deep nesting", "lang: en\ngreetings: " + "[" * 1000 + "]" * 1000 + "\n", ["deep"]),
        ("a huge integer", "lang: en\ngreetings: [" + "1" * 5000 + "]\n", ["digits"]),
        (
            "a control byte",
            PACK.replace("greetings:", "greetings:\n  - 'he\x07llo'", 1),
            ["control character"],
        ),
        (
            "a 120 KB phrase with braces",
            "lang: en\ngreetings: ['{" + "z" * 120_000 + "}']\n",
            ["braces"],
        ),
    ),
)
def test_hostile_phrase_packs_are_located_errors(name: str, text: str, words: list[str]) -> None:
    with deadline(10), pytest.raises(InputError) as info:
        load_pack_text(text, name="pack.yaml")
    err = info.value
    assert (
        err.location is not None
        and err.location.line is not None
        and err.location.column is not None
    ), str(err)
    assert err.fix
    assert len(str(err)) <= MAX_MESSAGE
    for word in words:
        assert word.lower() in str(err).lower(), str(err)
