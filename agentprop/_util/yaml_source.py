"""YAML loading that remembers where every value came from, within bounds.

Loads with the safe loader and maps each value's path to its 1-based line and column, so errors
name file, line and column. Hostile YAML (too big, too deep, recursive or exploding aliases,
huge integers, control characters) is refused before it costs time or memory, naming the limit
it hit (:data:`LIMITS`).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentprop._util.files import read_regular
from agentprop._util.text import SURROGATE_FIX, find_lone_surrogate
from agentprop.errors import InputError, SourceLocation

Loc = tuple[Hashable, ...]

MAX_BYTES = 4 * 1024 * 1024
"""Largest YAML file read (4 MiB; the shipped specs are about 20 KB)."""
MAX_DEPTH = 64
"""Deepest nesting of lists and mappings (the shipped specs nest 9 deep)."""
MAX_VALUES = 100_000
"""Most values (scalars, lists and mappings) in one document once aliases are expanded (the
shipped specs hold about 2,000)."""
MAX_INT_DIGITS = 4_300
"""Longest integer (Python's own limit for turning text into an int)."""
LIMITS = {
    "bytes": MAX_BYTES,
    "depth": MAX_DEPTH,
    "values": MAX_VALUES,
    "integer digits": MAX_INT_DIGITS,
}


class _YamlLimitError(yaml.MarkedYAMLError):
    """The YAML is well-formed but over one of agentprop's limits (:data:`LIMITS`)."""

    def __init__(self, problem: str, mark: yaml.Mark | None, fix: str) -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.fix = fix


class _YamlTextError(_YamlLimitError):
    """A scalar that is well-formed YAML but not text agentprop can keep (a lone surrogate)."""


def _check_text(node: yaml.Node) -> None:
    if (
        isinstance(node, yaml.ScalarNode)
        and isinstance(node.value, str)
        and not node.value.isascii()
    ):
        hit = find_lone_surrogate(node.value)
        if hit is not None:
            raise _YamlTextError(
                f"a lone surrogate U+{ord(hit[1]):04X} (half of a UTF-16 pair, not a character): "
                "no file or report can hold it",
                node.start_mark,
                SURROGATE_FIX,
            )


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader with the limits of this module enforced while the node tree is composed
    (before anything is expanded or constructed)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._open: set[str] = set()
        """Anchors whose node is being composed: an alias to one of them is recursive."""
        self._sizes: dict[int, int] = {}
        """``id(node)`` -> how many values the node stands for with its aliases expanded."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        # types-PyYAML leaves Parser.peek_event unannotated
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                raise _YamlLimitError(
                    f"recursive alias *{event.anchor}: the alias is inside the value "
                    f"&{event.anchor} names, so that value would contain itself",
                    # types-PyYAML also allows the C parser's Mark here; this pure-Python
                    # loader makes yaml.Mark
                    event.start_mark,  # type: ignore[arg-type]
                    f"write the value out instead of *{event.anchor}, or move the alias out "
                    "of the value it names",
                )
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _YamlLimitError(
                f"nested too deep: more than {MAX_DEPTH} levels of lists and mappings "
                f"(agentprop's limit is {MAX_DEPTH})",
                event.start_mark,
                "flatten the structure; specs, bindings and phrase packs need only a few levels",
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open.add(anchor)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)
        if node is not None:  # types-PyYAML allows None; a composed value is always a node
            self._count(node)
        return node

    def _count(self, node: yaml.Node) -> None:
        """Record how many values ``node`` expands to; refuse it past :data:`MAX_VALUES`."""
        size = 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                size += self._sizes.get(id(key), 1) + self._sizes.get(id(value), 1)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                size += self._sizes.get(id(item), 1)
        self._sizes[id(node)] = size
        if size > MAX_VALUES:
            raise _YamlLimitError(
                f"this value expands to more than {MAX_VALUES:,} values once its aliases (*name) "
                f"are expanded (agentprop's limit is {MAX_VALUES:,}; aliases repeating "
                "aliases grow exponentially)",
                node.start_mark,
                "write the repeated values out, or use fewer aliases (*name) of large "
                "anchored values (&name)",
            )


_MAX_INT_BITS = (10**MAX_INT_DIGITS - 1).bit_length()
"""Bits of the largest integer of :data:`MAX_INT_DIGITS` decimal digits."""


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    # every form counts: decimal, hex (0x), octal (0...), binary (0b) and sexagesimal (1:59:59),
    # whose digits are not all decimal and whose value can grow faster than its text
    text = str(node.value).replace("_", "").lstrip("+-")
    digits = sum(ch.isalnum() for ch in (text[2:] if text[:2].lower() in ("0x", "0b") else text))
    too_big = (
        "write a smaller number; quote it if it is meant as text (agentprop's limit is "
        f"{MAX_INT_DIGITS:,} decimal digits)"
    )
    if digits > MAX_INT_DIGITS:
        raise _YamlLimitError(
            f"an integer of {digits:,} digits (agentprop's limit is "
            f"{MAX_INT_DIGITS:,} integer digits)",
            node.start_mark,
            too_big,
        )
    try:
        value = loader.construct_yaml_int(node)
    except ValueError as exc:
        raise _YamlLimitError(
            f"an integer YAML cannot read ({exc})", node.start_mark, "write a plain decimal integer"
        ) from None
    if value.bit_length() > _MAX_INT_BITS:
        raise _YamlLimitError(
            f"an integer of more than {MAX_INT_DIGITS:,} decimal digits "
            f"({value.bit_length():,} bits)",
            node.start_mark,
            too_big,
        )
    return value


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)

TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list (`- item` lines or `[a, b]`)",
    "tuple_type": "a list (`- item` lines or `[a, b]`)",
    "dict_type": "a mapping (`key: value` lines)",
    "model_type": "a mapping (`key: value` lines)",
    "model_attributes_type": "a mapping (`key: value` lines)",
}
"""How pydantic's type-error kinds read to someone editing YAML."""


def describe_loc(loc: Iterable[Hashable]) -> str:
    """``("tools", 2, "name")`` -> ``tools[2].name``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "the top level"


@dataclass
class YamlSource:
    """Loaded YAML data plus the position of every value (and every mapping key)."""

    data: Any
    path: Path | None
    text: str = ""
    positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    duplicate_keys: list[tuple[Loc, tuple[int, int]]] = field(default_factory=list)

    def location(self, loc: Loc, *, key: bool = False) -> SourceLocation:
        """The location of the value at ``loc``, or of the nearest enclosing value that has
        one (a missing key is reported at the mapping that should hold it)."""
        table = self.key_positions if key else self.positions
        probe: Loc = tuple(loc)
        while True:
            if probe in table:
                line, col = table[probe]
                return SourceLocation(self.path, line, col)
            if key and probe in self.positions:
                line, col = self.positions[probe]
                return SourceLocation(self.path, line, col)
            if not probe:
                return SourceLocation(self.path, 1, 1)
            probe = probe[:-1]


def _walk(node: yaml.Node, loc: Loc, src: YamlSource, loader: yaml.SafeLoader) -> None:
    src.positions[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
    _check_text(node)
    if isinstance(node, yaml.MappingNode):
        seen: set[Hashable] = set()
        for key_node, value_node in node.value:
            _check_text(key_node)
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                key = str(key)
            child = (*loc, key)
            if key in seen:
                src.duplicate_keys.append(
                    (child, (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
                )
            seen.add(key)
            src.key_positions[child] = (
                key_node.start_mark.line + 1,
                key_node.start_mark.column + 1,
            )
            _walk(value_node, child, src, loader)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*loc, i), src, loader)


def _line_col(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of character ``position`` of ``text``."""
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _too_big(path: Path | None, size: int, error: type[InputError]) -> InputError:
    return error(
        f"the file is {size:,} bytes, over agentprop's limit of {MAX_BYTES:,} "
        "bytes for a YAML file",
        location=SourceLocation(path, 1, 1),
        expected="a spec, bindings file or phrase pack of a few hundred KB at most",
        fix="split the file, or check that this is the file you meant",
    )


def load_yaml(
    source: str | Path, *, text: str | None = None, error: type[InputError] = InputError
) -> YamlSource:
    """Load a YAML file (or ``text`` attributed to ``source``) with positions.

    A syntax error, or input over one of the limits (:data:`LIMITS`), becomes ``error`` (an
    :class:`InputError` subclass) with the file, line and column of the problem.
    """
    path = Path(source) if source is not None else None
    if text is None:
        assert path is not None
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            raise error(
                f"file not found: {path}",
                location=SourceLocation(path),
                fix="check the path; relative paths are resolved from the current directory",
            ) from None
        except OSError:
            size = 0  # read_regular names the problem
        if size > MAX_BYTES:
            raise _too_big(path, size, error)
        data = read_regular(
            path,
            what="a YAML file",
            fix="give the path of the file itself",
            limit=MAX_BYTES,
            error=error,
        )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            data = exc.object if isinstance(exc.object, bytes) else b""
            bad_line = data.count(b"\n", 0, exc.start) + 1
            bad_col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
            raise error(
                f"file is not UTF-8 text ({exc.reason} at byte {exc.start})",
                location=SourceLocation(path, bad_line, bad_col),
                fix="save the file as UTF-8",
            ) from None
    if len(text) > MAX_BYTES:
        raise _too_big(path, len(text.encode("utf-8", "surrogatepass")), error)
    try:
        loader = _BoundedLoader(text)
    except yaml.reader.ReaderError as exc:  # the reader checks every character up front
        raise _reader_error(exc, text, path, error) from None
    try:
        node = loader.get_single_node()
        src = YamlSource(data=None, path=path, text=text)
        if node is not None:
            _walk(node, (), src, loader)
            src.data = loader.construct_document(node)
        return src
    except yaml.reader.ReaderError as exc:
        raise _reader_error(exc, text, path, error) from None
    except _YamlLimitError as exc:
        mark = exc.problem_mark
        raise error(
            str(exc.problem)
            if isinstance(exc, _YamlTextError)
            else f"YAML over a limit: {exc.problem}",
            location=SourceLocation(
                path, mark.line + 1 if mark else None, mark.column + 1 if mark else None
            ),
            fix=exc.fix,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        raise error(
            f"YAML syntax error: {problem}{context}",
            location=SourceLocation(path, line, col),
            expected="valid YAML (indentation with spaces, `key: value` pairs, `- item` lists)",
            fix="fix the YAML at that line; a common cause is a missing space after ':' or a tab "
            "used for indentation, or an unquoted value containing ': ' or '#'",
        ) from None
    except yaml.YAMLError as exc:  # no position: the start of the file
        raise error(
            f"YAML error: {exc}",
            location=SourceLocation(path, 1, 1),
            expected="valid YAML",
            fix="fix the YAML (indentation with spaces, `key: value` pairs, `- item` lists)",
        ) from None
    finally:
        loader.dispose()


def _reader_error(
    exc: yaml.reader.ReaderError, text: str, path: Path | None, error: type[InputError]
) -> InputError:
    """A character YAML does not allow (a control character, a lone surrogate), at its place."""
    position = min(max(int(exc.position), 0), len(text))
    line, col = _line_col(text, position)
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    kind = "control character" if code < 0x20 or 0x7F <= code < 0xA0 else "character"
    return error(
        f"{kind} U+{code:04X} is not allowed in YAML (only tab, line feed and carriage return "
        "are, of the control characters)",
        location=SourceLocation(path, line, col),
        expected="printable text",
        fix="delete the character; to mean it, write it as an escape in a double-quoted "
        f'string ("\\x{code:02x}")'
        if code <= 0xFF
        else "delete the character",
    )
