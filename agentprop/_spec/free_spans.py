"""Free spans: the words of a template the shrinker may remove, marked ``{~ ... ~}``.

Words outside the markers carry the intent and the slots and are never touched; rendering
normally just drops the markers. A free span may not hold a slot, an optional segment or
another free span. This module is the syntax; cutting spans into clauses and words is
:mod:`agentprop.strategies._internal.free_spans`.
"""

from __future__ import annotations

import re

FREE_OPEN = "{~"
FREE_CLOSE = "~}"

FREE_SPAN = re.compile(r"\{~(.*?)~\}", re.S)
CJK_CHAR = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
PUNCTUATION = ",;.!?:，。！？；：、…"
PUNCTUATION_RUN = re.compile(f"[{re.escape(PUNCTUATION)}]+")
_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

Drop = tuple[int, int, int, int]
"""A removed word: ``(turn, span, clause, word)``."""


def has_free(text: str) -> bool:
    return FREE_OPEN in text


def free_span_problem(template: str) -> str | None:
    """What is wrong with the free-span markers of ``template`` (``None``: nothing)."""
    depth = 0
    i = 0
    start = 0
    while i < len(template):
        two = template[i : i + 2]
        if two == FREE_OPEN:
            if depth:
                return "a free span {~ ... ~} is opened inside another one"
            depth, start, i = 1, i + 2, i + 2
            continue
        if two == FREE_CLOSE:
            if not depth:
                return "'~}' closes a free span that was never opened with '{~'"
            body = template[start:i]
            if not body.strip():
                return "an empty free span {~~}"
            slot = _SLOT.search(body)
            if slot is not None:
                return (
                    f"free span {{~{body}~}} holds the slot {slot.group(0)}: "
                    "slots are never removed"
                )
            if "[" in body or "]" in body:
                return f"free span {{~{body}~}} holds an optional [ ... ] segment"
            depth, i = 0, i + 2
            continue
        i += 1
    if depth:
        return "a free span '{~' is never closed with '~}'"
    return None


def strip_free(marked: str) -> str:
    """The text without the markers (whitespace collapsed, as templates are rendered)."""
    text = FREE_SPAN.sub(lambda m: m.group(1), marked)
    return re.sub(r"\s{2,}", " ", text).strip()


# ----------------------------------------------------------------------------- segmentation
