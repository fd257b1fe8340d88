"""YAML loading that remembers where every value came from.

Errors about a spec, a bindings file or a phrase pack must name the file, the line and the
column. PyYAML's composed node tree carries those marks; this module loads the data with the
safe loader and, from the same node tree, builds a map from each value's path (a tuple of
mapping keys and sequence indices) to its 1-based line and column.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentprop.errors import InputError, SourceLocation

Loc = tuple[Hashable, ...]

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
    if isinstance(node, yaml.MappingNode):
        seen: set[Hashable] = set()
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                key = str(key)
            child = (*loc, key)
            if key in seen:
                src.duplicate_keys.append((child, (key_node.start_mark.line + 1, key_node.start_mark.column + 1)))
            seen.add(key)
            src.key_positions[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _walk(value_node, child, src, loader)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*loc, i), src, loader)


def load_yaml(source: str | Path, *, text: str | None = None, error: type[InputError] = InputError) -> YamlSource:
    """Load a YAML file (or ``text`` attributed to ``source``) with positions.

    A syntax error becomes ``error`` (an :class:`InputError` subclass) with the file, line and
    column of the problem.
    """
    path = Path(source) if source is not None else None
    if text is None:
        assert path is not None
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise error(
                f"file not found: {path}",
                location=SourceLocation(path),
                fix="check the path; relative paths are resolved from the current directory",
            ) from None
        except UnicodeDecodeError as exc:
            raise error(
                f"file is not UTF-8 text ({exc.reason} at byte {exc.start})",
                location=SourceLocation(path),
                fix="save the file as UTF-8",
            ) from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        src = YamlSource(data=None, path=path, text=text)
        if node is not None:
            _walk(node, (), src, loader)
            src.data = loader.construct_document(node)
        return src
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
    finally:
        loader.dispose()
