"""Free spans cut into clauses and words, and templates rendered with words left out.

The syntax is :mod:`agentprop._spec.free_spans`. Words are whitespace words for Latin script
and phrase-pack words for CJK, so a span never loses half a word; punctuation goes with its
clause, and what is left is tidied, so a sentence stays a sentence.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from agentprop._spec.free_spans import CJK_CHAR, FREE_SPAN, PUNCTUATION, PUNCTUATION_RUN, strip_free


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
    return bool(CJK_CHAR.search(text))


@functools.cache
def _vocabulary(lang: str) -> tuple[str, ...]:
    """CJK words of ``lang``'s phrase pack, longest first."""
    from agentprop.strategies._internal.packs import resolve_pack

    try:
        pack = resolve_pack(lang)
    except Exception:
        return ()
    words: set[str] = set(pack.words)
    for phrase in (
        *pack.greetings,
        *pack.closings,
        *pack.particles.all,
        *pack.clause_connectors,
        *pack.imperative_starts,
        *pack.question_starts,
    ):
        words.add(PUNCTUATION_RUN.sub("", phrase))
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
            for piece in re.findall(
                r"[\u3400-\u9fff\uf900-\ufaff]+|[^\u3400-\u9fff\uf900-\ufaff]+", token
            ):
                parts.extend(
                    _cjk_words(piece, _vocabulary("zh" if lang == "en" else lang))
                    if _is_cjk(piece)
                    else [piece]
                )
            out.append(space + parts[0])
            out.extend(parts[1:])
        else:
            out.append(space + token)
    return out


def segment(text: str, lang: str = "zh") -> Span:
    """The clauses and words of one free span's text (see the module doc)."""
    pieces = re.split(f"([\\s]*[{re.escape(PUNCTUATION)}]+[\\s]*)", text)
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
    return [segment(m.group(1), lang) for m in FREE_SPAN.finditer(marked)]


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
    for s, m in enumerate(FREE_SPAN.finditer(marked)):
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
