"""Free spans: the words of a template the shrinker may remove.

A template in the bindings marks a span as free with ``{~ ... ~}``::

    "Please cancel my order[ {order_id}]{~, I really need this done today~}"
    "{~您好，~}为我妈妈续配处方 {rx}{~，麻烦尽快处理一下，谢谢~}"

Outside the markers are the words that carry the intent and the slots: the shrinker never
touches them. Inside, after the generator's choices are simplified, it may remove words
(:mod:`agentprop._decide.shrink`), so a reproducer keeps only the free words the failure
needs. Rendering a template normally just drops the markers.

A span is cut into **clauses** at punctuation and each clause into **words**: for Latin script
the whitespace-separated words; for CJK the words of the language's phrase pack (its
``words``, greetings, closings, particles, connectors and synonyms, longest first), with every
other run of characters kept whole, so a Chinese span never loses half a word. Punctuation
belongs to the clause it opens (``，谢谢``) or, at the end of a span, closes: it goes when the
clause's last word goes. The shrinker removes spans, then clauses, then words; what is left is
tidied (no doubled or leading punctuation, single spaces), so a Chinese sentence stays a
Chinese sentence.

This module is the syntax (what the bindings loader and the scenario builder need); cutting a
span into words and rendering a template with words left out is
:mod:`agentprop.strategies._internal.free_spans`, which reads the phrase packs.

A free span may not hold a slot, an optional ``[...]`` segment or another free span (the
bindings loader rejects such a template with its file and line).
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
                return f"free span {{~{body}~}} holds the slot {slot.group(0)}: slots are never removed"
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
