"""Text that can leave the process: valid Unicode, and harmless on a terminal.

Input files holding a lone surrogate are refused where read (:func:`find_lone_surrogate`); an
agent's output has them replaced by U+FFFD (:func:`valid_unicode`), so the run is still judged;
text for a terminal has control characters escaped (:func:`printable`).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
REPLACEMENT = "\ufffd"


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (``text`` itself when it has none)."""
    return text if text.isascii() or _encodes(text) else _SURROGATE.sub(REPLACEMENT, text)


def valid_unicode_value(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, scalars) with every string made
    :func:`valid_unicode`, keys included; ``value`` itself when nothing needs replacing."""
    return value if find_lone_surrogate(value) is None else _rebuild(value)


def _rebuild(value: Any) -> Any:
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        return {_rebuild(k): _rebuild(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_rebuild(v) for v in value)
    return value


def find_lone_surrogate(
    value: Any, loc: tuple[Hashable, ...] = ()
) -> tuple[tuple[Hashable, ...], str] | None:
    """The path (keys and indices) of the first string in ``value`` holding a lone surrogate,
    and that surrogate; ``None`` when every string is valid Unicode."""
    if isinstance(value, str):
        if value.isascii() or _encodes(value):
            return None
        found = _SURROGATE.search(value)
        return (loc, found.group()) if found else None
    if isinstance(value, dict):
        for key, item in value.items():
            hit = find_lone_surrogate(key, loc) or find_lone_surrogate(item, (*loc, key))
            if hit:
                return hit
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            hit = find_lone_surrogate(item, (*loc, i))
            if hit:
                return hit
    return None


SURROGATE_FIX = (
    'write the whole character, not half of a UTF-16 pair: "\\U0001F600" (or the character '
    'itself) instead of "\\ud83d\\ude00"; or delete the escape'
)


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: control characters (escape sequences, NUL, bell,
    backspace ...) other than tab and line feed written as ``\\x1b``-style escapes, lone
    surrogates as U+FFFD."""
    text = valid_unicode(text)
    return (
        _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text) if _CONTROL.search(text) else text
    )
