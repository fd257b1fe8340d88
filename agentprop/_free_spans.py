"""Free spans: the words of a template the shrinker may remove.

A template in the bindings marks a span as free with ``{~ ... ~}``::

    "Please cancel my order[ {order_id}]{~, I really need this done today~}"
    "{~您好，~}为我妈妈续配处方 {rx}{~，麻烦尽快处理一下，谢谢~}"

Outside the markers are the words that carry the intent and the slots: the shrinker never
touches them. Inside, after the generator's choices are simplified, it may remove words
(:mod:`agentprop._conversation_shrink`), so a reproducer keeps only the free words the failure
needs. Rendering a template normally just drops the markers.

A span is cut into **clauses** at punctuation and each clause into **words**: for Latin script
the whitespace-separated words; for CJK the words of the language's phrase pack (its
``words``, greetings, closings, particles, connectors and synonyms, longest first), with every
other run of characters kept whole, so a Chinese span never loses half a word. Punctuation
belongs to the clause it opens (``，谢谢``) or, at the end of a span, closes: it goes when the
clause's last word goes. The shrinker removes spans, then clauses, then words; what is left is
tidied (no doubled or leading punctuation, single spaces), so a Chinese sentence stays a
Chinese sentence.

A free span may not hold a slot, an optional ``[...]`` segment or another free span (the
bindings loader rejects such a template with its file and line).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

FREE_OPEN = "{~"
FREE_CLOSE = "~}"

_FREE = re.compile(r"\{~(.*?)~\}", re.S)
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_PUNCT = ",;.!?:，。！？；：、…"
_PUNCT_RUN = re.compile(f"[{re.escape(_PUNCT)}]+")
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
            if _SLOT.search(body):
                return f"free span {{~{body}~}} holds the slot {_SLOT.search(body).group(0)}: slots are never removed"  # type: ignore[union-attr]
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
    text = _FREE.sub(lambda m: m.group(1), marked)
    return re.sub(r"\s{2,}", " ", text).strip()


# ----------------------------------------------------------------------------- segmentation


@dataclass(frozen=True)
class Clause:
    prefix: str
    """Whitespace and punctuation before the first word (``，``)."""
    words: tuple[str, ...]
    """Each word with the whitespace before it."""
    tail: str = ""
    """Punctuation and whitespace after the last word, at the end of the span."""


@dataclass(frozen=True)
class Span:
    clauses: tuple[Clause, ...]
    text: str


def _is_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@functools.cache
def _vocabulary(lang: str) -> tuple[str, ...]:
    """CJK words of ``lang``'s phrase pack, longest first."""
    from agentprop._strategies.packs import resolve_pack

    try:
        pack = resolve_pack(lang)
    except Exception:
        return ()
    words: set[str] = set(pack.words)
    for phrase in (*pack.greetings, *pack.closings, *pack.particles.all, *pack.clause_connectors, *pack.imperative_starts, *pack.question_starts):
        words.add(_PUNCT_RUN.sub("", phrase))
    for key, alternatives in pack.synonyms.items():
        words.add(key)
        words.update(alternatives)
    return tuple(sorted((w for w in words if w and _is_cjk(w)), key=lambda w: (-len(w), w)))


def _cjk_words(run: str, vocabulary: Sequence[str]) -> list[str]:
    """``run`` (CJK, no whitespace or punctuation) as known words and whole unknown runs."""
    out: list[str] = []
    unknown = ""
    i = 0
    while i < len(run):
        found = next((w for w in vocabulary if run.startswith(w, i)), None)
        if found is None:
            unknown += run[i]
            i += 1
            continue
        if unknown:
            out.append(unknown)
            unknown = ""
        out.append(found)
        i += len(found)
    if unknown:
        out.append(unknown)
    return out


def _words(chunk: str, lang: str) -> list[str]:
    """The words of a chunk without punctuation, each with the whitespace before it."""
    out: list[str] = []
    for m in re.finditer(r"(\s*)(\S+)", chunk):
        space, token = m.group(1), m.group(2)
        if _is_cjk(token):
            parts: list[str] = []
            for piece in re.findall(r"[\u3400-\u9fff\uf900-\ufaff]+|[^\u3400-\u9fff\uf900-\ufaff]+", token):
                parts.extend(_cjk_words(piece, _vocabulary("zh" if lang == "en" else lang)) if _is_cjk(piece) else [piece])
            out.append(space + parts[0])
            out.extend(parts[1:])
        else:
            out.append(space + token)
    return out


def segment(text: str, lang: str = "zh") -> Span:
    """The clauses and words of one free span's text (see the module doc)."""
    pieces = re.split(f"([\\s]*[{re.escape(_PUNCT)}]+[\\s]*)", text)
    # pieces alternate: words chunk, punctuation run, words chunk, ...
    clauses: list[Clause] = []
    prefix = ""
    for k, piece in enumerate(pieces):
        if k % 2 == 1:
            prefix += piece
            continue
        words = _words(piece, lang)
        trailing = piece[len(piece.rstrip()) :] if piece.strip() else piece
        if words:
            clauses.append(Clause(prefix=prefix, words=tuple(words), tail=""))
            prefix = trailing
        else:
            prefix += piece
    if prefix:
        if clauses:
            last = clauses[-1]
            clauses[-1] = Clause(last.prefix, last.words, last.tail + prefix)
        else:
            clauses.append(Clause(prefix=prefix, words=()))
    return Span(clauses=tuple(clauses), text=text)


def spans_of(marked: str, lang: str = "zh") -> list[Span]:
    return [segment(m.group(1), lang) for m in _FREE.finditer(marked)]


# ----------------------------------------------------------------------------- rendering


def _tidy(text: str) -> str:
    text = re.sub(r"\s{2,}", " ", text).strip()
    text = re.sub(r"\s+([,;.!?:])", r"\1", text)
    text = re.sub(r"\s*([，。！？；：、])\s*", r"\1", text)
    # a comma-like mark followed by another mark: keep the second (", ." -> ".", "，，" -> "，")
    text = re.sub(r"([,，;；:：、])\s*([,，;；:：、。.!！?？])", r"\2", text)
    text = re.sub(r"^[\s,，;；:：、.。]+", "", text)
    return text


def render(marked: str, dropped: Collection[tuple[int, int, int]] = (), lang: str = "zh") -> str:
    """The text of ``marked`` with the words in ``dropped`` (``(span, clause, word)``) left
    out; a clause without words loses its punctuation too. Without drops this is
    :func:`strip_free`."""
    if not dropped:
        return strip_free(marked)
    gone = set(dropped)
    out: list[str] = []
    last = 0
    for s, m in enumerate(_FREE.finditer(marked)):
        out.append(marked[last : m.start()])
        span = segment(m.group(1), lang)
        for c, clause in enumerate(span.clauses):
            kept = [w for k, w in enumerate(clause.words) if (s, c, k) not in gone]
            if kept or not clause.words:
                out.append(clause.prefix + "".join(kept) + clause.tail)
            elif clause.tail.strip() == "" and clause.tail:
                out.append(clause.tail)
        last = m.end()
    out.append(marked[last:])
    return _tidy("".join(out))
