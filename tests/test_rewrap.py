"""tools/rewrap.py: long lines wrapped without changing what the module means."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rewrap", ROOT / "tools" / "rewrap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["rewrap"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


rewrap = _load()
LIMIT = 100


def _value(source: str, names: dict[str, object] | None = None) -> object:
    return eval(source, dict(names or {}))


def _wrapped(src: str) -> str:
    """``src`` rewrapped without ruff: passes until nothing changes (as the tool does)."""
    current = src
    for _ in range(10):
        new = rewrap.apply(current, rewrap.rewrap_pass(current, LIMIT).edits)
        if new == current:
            return new
        current = new
    raise AssertionError("did not settle")


def _long_lines(src: str) -> list[str]:
    return [line for line in src.splitlines() if rewrap.overlong(line, LIMIT)]


# --- string literals: the value is byte-identical -------------------------------------------

TRICKY = [
    '"' + "word " * 30 + '"',
    '"' + "a\\n" * 40 + '"',  # escapes stay whole
    '"' + "\\x41\\u00e9\\N{BULLET}\\101\\t" * 12 + '"',
    "r'" + "\\d+\\'s " * 20 + "'",  # a raw string: backslash-quote never cut apart
    'b"' + "\\x00bytes \\n" * 15 + '"',
    'f"' + "{x!r:>{w}} and {{braces}} {x=} " * 6 + '"',
    "f'" + '{d["k"]} {"".join(["a", "b"])} ' * 8 + "'",  # quotes and brackets in fields
    'rf"' + "\\w{{2}} {x} " * 15 + '"',
    '"' + "nospaceatall" * 15 + '"',
    '"' + "é中文字 " * 30 + '"',  # wide characters count two columns
]


@pytest.mark.parametrize("literal", TRICKY)
def test_split_literal_keeps_the_value_and_the_room(literal: str) -> None:
    names = {"x": 3.5, "w": 7, "d": {"k": "v"}}
    pieces = rewrap.split_literal(literal, 40)
    assert pieces is not None and len(pieces) > 1
    assert _value(" ".join(pieces), names) == _value(literal, names)
    assert all(rewrap.width(piece) <= 40 for piece in pieces)


def test_a_field_wider_than_the_room_stays_whole_with_its_short_neighbours() -> None:
    literal = 'f"(' + "{" + "x + " * 20 + "x}" + ') and then some more words after the field"'
    pieces = rewrap.split_literal(literal, 40)
    assert pieces is not None
    assert _value(" ".join(pieces), {"x": 1}) == _value(literal, {"x": 1})
    assert pieces[0].startswith('f"({x + ')  # the "(" is not a line of its own


def test_a_plain_part_of_a_split_f_string_loses_its_f_and_its_doubled_braces() -> None:
    pieces = rewrap.split_literal('f"{x} ' + "{{set}} " * 10 + '"', 30)
    assert pieces is not None and pieces[0].startswith('f"') and pieces[-1].startswith('"{set}')


def test_join_literals_refuses_parts_of_different_kinds() -> None:
    assert rewrap.join_literals(['"a"', "'b'"]) is None
    assert rewrap.join_literals(['"a"', 'b"b"']) is None
    assert rewrap.join_literals(['"a{"', 'f"{x}"']) == 'f"a{{{x}"'


# --- whole modules --------------------------------------------------------------------------

MODULE = (
    '"""A module docstring whose first line is long enough to need wrapping at one hundred '
    "columns, surely.\n\n"
    "    >>> print('a doctest line that is very long and must never, ever, ever be "
    "rewrapped by this tool at "
    "all')\n"
    '"""\n'
    "import re\n\n"
    "# a comment that is long enough to need wrapping at one hundred columns: these words go on "
    "the next line\n"
    "# and this line continues the paragraph\n"
    "X = 1  # type: ignore[misc]  # a trailing note that is far too long to stay on this line "
    "with the code\n"
    "Y = 2  #: the value of Y, a note for the documentation that is far too long to stay on "
    "this line, ever\n\n\n"
    "def f(x: 'AVeryLongForwardReference[WithArguments, ThatMustNotBeSplit, NorBeChangedInAnyWay]'"
    ") -> None:\n"
    "    raise ValueError(f'{x!r} is not a valid value for f: it must be one of the values that "
    "the documentation lists')\n\n\n"
    "def g() -> None:\n"
    '    """Do g, which is described by a docstring line that is long enough to be wrapped here '
    "once.\n\n"
    "    ```python\n"
    "    print('a fenced code line inside the docstring that is long and must "
    "always stay exactly as "
    "written')\n"
    "    ```\n"
    '    """\n'
    "    return None\n\n\n"
    "TEMPLATE = '''\n"
    "a line inside a multi-line string that is not a docstring, too long, but it cannot be "
    "changed at all, ever\n"
    "'''\n"
)
UNCHANGEABLE = [
    "    >>> print('a doctest line that is very long and must never, ever, ever be rewrapped "
    "by this tool at all')",
    "def f(x: 'AVeryLongForwardReference[WithArguments, ThatMustNotBeSplit, "
    "NorBeChangedInAnyWay]') -> None:",
    "    print('a fenced code line inside the docstring that is long and must always stay "
    "exactly as written')",
    "a line inside a multi-line string that is not a docstring, too long, but it cannot be "
    "changed at all, ever",
]


def test_a_module_is_wrapped_and_means_what_it_meant() -> None:
    out = _wrapped(MODULE)
    rewrap.check_same(MODULE, out)  # raises if any string value changed
    assert set(UNCHANGEABLE) <= set(_long_lines(out))  # ruff lays out the split string
    lines = out.splitlines()
    assert "X = 1  # type: ignore[misc]" in lines  # the pragma stays on the code
    assert any(line.startswith("# a trailing note") for line in lines)
    assert any(line.startswith("#: the value of Y") for line in lines)
    assert "# and this line continues the paragraph" not in lines  # carried over, reflowed
    assert "'''  # noqa: E501" in lines  # the only way to let a string's own line be long


def test_what_cannot_change_is_left_as_written() -> None:
    out = _wrapped(MODULE).splitlines()
    assert all(line in out for line in UNCHANGEABLE)


def test_a_second_run_changes_nothing() -> None:
    out = _wrapped(MODULE)
    assert rewrap.rewrap_pass(out, LIMIT).edits == []


def test_a_list_item_in_a_comment_wraps_under_its_text() -> None:
    src = (
        "# - an item of a list in a comment, long enough that its last words go to a line of "
        "their own, below it\n# - the next item\nx = 1\n"
    )
    out = _wrapped(src).splitlines()
    assert out[1].startswith("#   ") and out[2] == "# - the next item"


def test_a_fmt_skip_statement_too_wide_loses_its_skip_and_other_comments_stay() -> None:
    src = "X = ['" + "a " * 50 + "', 1]  # noqa: B950  # fmt: skip\nY = [1, 2]  # fmt: skip\n"
    result = rewrap.rewrap_pass(src, LIMIT)
    out = rewrap.apply(src, result.edits).splitlines()
    assert out[0].endswith("', 1]  # noqa: B950") and result.unskipped == [1]
    assert out[1] == "Y = [1, 2]  # fmt: skip"  # one that fits keeps it


def test_a_fmt_off_region_is_left_alone() -> None:
    src = "# fmt: off\nX = ['" + "a " * 50 + "', 1]\n# fmt: on\n"
    result = rewrap.rewrap_pass(src, LIMIT)
    assert result.edits == [] and "fmt: off" in result.leftovers[0].reason


def test_a_section_rule_is_shortened_not_wrapped() -> None:
    src = "# " + "-" * 100 + " what comes next\nx = 1\n"
    out = _wrapped(src).splitlines()
    assert out[0].endswith("- what comes next") and rewrap.width(out[0]) == LIMIT


# --- the self-check -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("x = 'a b'", "x = 'a' 'b'"),  # a space lost
        ("x = f'{y} a'", "x = f'{y}' ' b'"),
        ("def f():\n    '''one two'''", "def f():\n    '''one\n    three'''"),  # a word changed
        ("x = 'a'", "x = 'a'\n'"),  # no longer parses
    ],
)
def test_the_self_check_refuses_a_changed_module(before: str, after: str) -> None:
    with pytest.raises(rewrap.RefusedError):
        rewrap.check_same(before, after)


def test_the_self_check_accepts_a_split_string_and_a_reflowed_docstring() -> None:
    rewrap.check_same("x = f'{y} a b'", "x = (f'{y} a' ' b')")
    rewrap.check_same("def f():\n    '''one two'''", "def f():\n    '''one\n    two'''")


def test_a_file_whose_ast_would_change_is_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "m.py"
    original = "X = '" + "word " * 30 + "'\n"
    target.write_text(original)

    def lossy(text: str, room: int, first_room: int | None = None) -> list[str]:
        return ['"word"', '"word"']  # a split that loses words

    monkeypatch.setattr(rewrap, "split_literal", lossy)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rewrap, "ruff_format", lambda src, path, limit: src)
    assert rewrap.main([str(target)]) == 1
    assert target.read_text() == original


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_with_ruff_the_result_is_stable_and_fits(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    first = rewrap.rewrap(MODULE, LIMIT, path).text
    assert rewrap.rewrap(first, LIMIT, path).text == first
    ast.parse(first)
    # ruff dedents the module docstring and wraps the signature; the rest is as written
    assert {line.strip() for line in _long_lines(first)} == {
        line.strip() for line in UNCHANGEABLE if not line.startswith("def")
    }
    assert first.count("  # noqa: E501") == 3  # the template and the docstrings with code


def test_an_indented_comment_counts_its_indent() -> None:
    line = "        # " + "word " * 18 + "e"
    assert rewrap.width(line) == 101 and rewrap.overlong(line, LIMIT, 8)


def test_a_trailing_pragma_does_not_count() -> None:
    line = "x = call(" + "a, " * 28 + "b)  # noqa: E501"
    assert rewrap.width(line) > LIMIT and not rewrap.overlong(line, LIMIT, line.index("#"))
    line = "x = 1  # type: ignore[misc]  # a note that makes the line too long" + "!" * 40
    assert rewrap.overlong(line, LIMIT, line.index("#"))


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_a_noqa_follows_its_code_when_ruff_splits_the_statement(tmp_path: Path) -> None:
    src = (
        "import inspect\n\n\n"
        "def f(fn, agent):\n"
        "    agent.concurrent = fn is not None and (inspect.iscoroutinefunction(fn) or "
        'inspect.iscoroutinefunction(getattr(fn, "__call__", None)))  # noqa: B004 '
        "(the bound method)\n"
    )
    out = rewrap.rewrap(src, LIMIT, tmp_path / "m.py").text.splitlines()
    assert out[-2].endswith('getattr(fn, "__call__", None))  # noqa: B004 (the bound method)')
    assert out[-1] == "    )"


def test_a_crumb_at_the_end_of_a_split_string_is_balanced_away() -> None:
    text = (
        '"Submit the structured response for this turn. Call it exactly once per turn, '
        'as the final action."'
    )
    pieces = rewrap.split_literal(text, 95)
    assert pieces is not None and _value(" ".join(pieces)) == _value(text)
    assert min(rewrap.width(p) for p in pieces) > 20  # not "... the final " "action."


def test_an_unused_type_ignore_moves_to_the_line_mypy_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = "x = f(\n    a,\n    b,\n)  # type: ignore[arg-type]\ny = 1  # type: ignore[misc]\n"
    (tmp_path / "m.py").write_text(src)
    monkeypatch.chdir(tmp_path)
    mypy = (
        'm.py:3: error: Argument 2 to "f" has incompatible type "int"  [arg-type]\n'
        'm.py:4: error: Unused "type: ignore" comment  [unused-ignore]\n'
        'm.py:5: error: Unused "type: ignore" comment  [unused-ignore]\n'
    )
    assert rewrap.relocate_type_ignores(mypy) == ["m.py:4 -> 3"]
    assert (tmp_path / "m.py").read_text().splitlines() == [
        "x = f(",
        "    a,",
        "    b,  # type: ignore[arg-type]",
        ")",
        "y = 1  # type: ignore[misc]",  # no error in its statement: left for a human
    ]


def test_a_one_line_docstring_too_long_becomes_two_even_lines() -> None:
    src = (
        'def f():\n    """The call from the caller\'s arguments (its ``locals()``); it warns for '
        'the deprecated keywords."""\n'
    )
    lines = _wrapped(src).splitlines()
    assert len(lines) == 3 and len(lines[2].strip()) >= 20 and len(lines[1]) > 60
    rewrap.check_same(src, "\n".join(lines))


def test_a_line_marked_noqa_e501_is_not_long_any_more() -> None:
    line = "def test_" + "a_very_long_name_" * 6 + "(  # noqa: E501"
    assert not rewrap.overlong(line, LIMIT, line.index("#"))
    assert rewrap.overlong(line.replace("E501", "B004"), LIMIT, line.index("#"))
