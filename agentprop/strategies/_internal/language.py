"""A phrase pack compiled for rewriting: its word lists as regexes, and text split into sentences.

One :class:`Language` per pack (cached by :func:`language_for`); the transforms
(:mod:`agentprop.strategies._internal.transforms`) read text only through it.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentprop.strategies._internal.packs import Mood, PhrasePack
from agentprop.strategies._internal.slots import (
    PLACEHOLDER_CLASS,
)

# --- language context -------------------------------------------------------------------------

_PH = PLACEHOLDER_CLASS
_LATIN_WORD_CHARS = f"A-Za-z0-9'\u2019{_PH}"
_APOSTROPHES = "'\u2019"


def _phrase_regex(phrases: Iterable[str], *, latin: bool) -> re.Pattern[str] | None:
    items = sorted(set(phrases), key=lambda p: (-len(p), p))
    if not items:
        return None
    alts = "|".join(re.sub("['\u2019]", "['\u2019]", re.escape(p)) for p in items)
    if latin:
        return re.compile(
            rf"(?<![A-Za-z0-9'\u2019])(?:{alts})(?![A-Za-z0-9'\u2019])", re.IGNORECASE
        )
    return re.compile(f"(?:{alts})", re.IGNORECASE)


def _key(text: str) -> str:
    return text.lower().replace("\u2019", "'")


@dataclass(frozen=True)
class Language:
    """A resolved phrase pack with its regexes compiled."""

    pack: PhrasePack
    latin: bool
    joiner: str
    end_re: re.Pattern[str]
    clause_re: re.Pattern[str]
    terminals: str
    default_end: str
    synonyms: dict[str, tuple[str, ...]]
    synonym_re: re.Pattern[str] | None
    to_short: dict[str, str]
    to_full: dict[str, str]
    contraction_re: re.Pattern[str] | None
    imperative: tuple[str, ...]
    question_starts: tuple[str, ...]
    question_ends: tuple[str, ...]
    question_contains: tuple[str, ...]
    connectors: tuple[str, ...]
    keep_case: frozenset[str]
    typo_exempt: frozenset[str]
    widths: dict[str, str]

    @classmethod
    def build(cls, pack: PhrasePack) -> Language:
        latin = pack.resolved_script == "latin"
        if latin:
            end_re = re.compile(r"([.!?\u2026]+)(\s+|$)")
            clause_re = re.compile(r",\s+")
            terminals = ".!?\u2026"
        else:
            end_re = re.compile(r"([\u3002\uff01\uff1f!?\u2026]+|\.+(?=\s|$))(\s*)")
            clause_re = re.compile(r"[\uff0c,]\s*")
            terminals = "\u3002\uff01\uff1f!?.\u2026"
        to_short = {_key(full): short for full, short in pack.contractions.items()}
        to_full: dict[str, str] = {}
        for full, short in pack.contractions.items():
            to_full.setdefault(_key(short), full)
        synonyms = {_key(k): v for k, v in pack.synonyms.items() if v}
        widths = dict(pack.punctuation_widths)
        widths.update({v: k for k, v in pack.punctuation_widths.items()})
        return cls(
            pack=pack,
            latin=latin,
            joiner=" " if latin else "",
            end_re=end_re,
            clause_re=clause_re,
            terminals=terminals,
            default_end="." if latin else "\u3002",
            synonyms=synonyms,
            synonym_re=_phrase_regex(pack.synonyms, latin=latin) if synonyms else None,
            to_short=to_short,
            to_full=to_full,
            contraction_re=_phrase_regex(
                [*pack.contractions, *pack.contractions.values()], latin=latin
            ),
            imperative=tuple(_key(v) for v in pack.imperative_starts),
            question_starts=tuple(_key(v) for v in pack.question_starts),
            question_ends=tuple(_key(v) for v in pack.question_ends),
            question_contains=tuple(_key(v) for v in pack.question_contains),
            connectors=tuple(_key(v) for v in pack.clause_connectors),
            keep_case=frozenset(pack.keep_case),
            typo_exempt=frozenset(_key(v) for v in pack.typo_exempt),
            widths=widths,
        )

    @functools.cached_property
    def tails(self) -> frozenset[str]:
        """Normalised closings and "please" tags (clauses frames and reordering leave alone)."""
        tails = {self.norm(c) for c in self.pack.closings}
        for template in self.pack.politeness.any:
            tails.update(self.norm(f) for f in _template_fragments(template))
        tails.discard("")
        return frozenset(tails)

    # -- text helpers --------------------------------------------------------------------------

    def first_word(self, text: str) -> str:
        m = re.match(rf"\s*([{_LATIN_WORD_CHARS}]+)", text)
        return m.group(1) if m else ""

    def starts_with(self, text: str, phrases: Iterable[str]) -> bool:
        low = _key(text.lstrip())
        if self.latin:
            word = _key(self.first_word(text))
            return any(word == p or low.startswith(p + " ") for p in phrases)
        return any(low.startswith(p) for p in phrases)

    def contains(self, text: str, phrase: str) -> bool:
        if self.latin:
            pattern = rf"(?<![A-Za-z0-9'\u2019]){re.escape(phrase)}(?![A-Za-z0-9'\u2019])"
            return re.search(pattern, _key(text)) is not None
        return phrase in _key(text)

    def mood(self, body: str, punct: str) -> Mood:
        stripped = body.strip()
        low = _key(stripped)
        if "?" in punct or "\uff1f" in punct or any(low.endswith(e) for e in self.question_ends):
            return "question"
        if self.starts_with(stripped, self.question_starts):
            return "question"
        if any(self.contains(stripped, q) for q in self.question_contains):
            return "question"
        if self.starts_with(stripped, self.imperative):
            return "imperative"
        return "statement"

    def decap(self, text: str) -> str:
        """Lower-case the first letter unless the first word must keep its case."""
        if not self.latin:
            return text
        m = re.match(r"(\s*)(\S+)", text)
        if not m:
            return text
        word = m.group(2)
        core = re.match(r"[A-Za-z'\u2019]+", word)
        if core is None:
            return text
        letters = core.group()
        if letters in self.keep_case or (
            sum(c.isalpha() for c in letters) >= 2 and letters.isupper()
        ):
            return text
        i = m.start(2)
        if word[0] != letters[0]:
            return text
        return text[:i] + text[i].lower() + text[i + 1 :]

    def cap(self, text: str) -> str:
        m = re.match(r"\s*", text)
        i = m.end() if m else 0
        if i < len(text) and text[i].isalpha() and text[i].islower():
            return text[:i] + text[i].upper() + text[i + 1 :]
        return text

    def norm(self, text: str) -> str:
        """Lower-cased, punctuation replaced by spaces (for 'is this phrase already here')."""
        out = re.sub(rf"[^\w'\u2019{_PH}]+", " ", _key(text)).strip()
        return out if self.latin else out.replace(" ", "")

    def already_has(self, text: str, phrase: str) -> bool:
        needle = self.norm(phrase)
        if not needle:
            return False
        hay = self.norm(text)
        if self.latin:
            return f" {needle} " in f" {hay} "
        return needle in hay

    def match_case(self, source: str, replacement: str) -> str:
        letters = [c for c in source if c.isalpha()]
        if len(letters) >= 2 and all(c.isupper() for c in letters):
            return replacement.upper()
        if source[:1].isupper() and replacement[:1].islower():
            return replacement[0].upper() + replacement[1:]
        return replacement  # never lower-cased: alternatives may be names ("Acme Widget Pro")


LANGUAGES_COMPILED = 64
"""Compiled packs kept (the most recently used): the shipped ones and a few merged ones."""


def language_for(pack: PhrasePack) -> Language:
    """Compile a pack once. Shipped packs are cached singletons, so strategies built for many
    texts (``st.sampled_from(texts).flatmap(paraphrases)``) share one compiled language."""
    return _compiled(_SamePack(pack))


class _SamePack:
    """A pack as a cache key, by identity (a PhrasePack holds dicts: it has no hash). The key
    holds the pack, so its id is not reused while the entry lives."""

    __slots__ = ("pack",)

    def __init__(self, pack: PhrasePack) -> None:
        self.pack = pack

    def __hash__(self) -> int:
        return id(self.pack)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SamePack) and other.pack is self.pack


@functools.lru_cache(maxsize=LANGUAGES_COMPILED)
def _compiled(key: _SamePack) -> Language:
    return Language.build(key.pack)


# --- sentence structure -----------------------------------------------------------------------


@dataclass
class _Sentence:
    body: str
    punct: str
    sep: str


def _strip(text: str) -> tuple[str, str, str]:
    core = text.strip()
    if not core:
        return text, "", ""
    start = text.index(core[0])
    return text[:start], core, text[start + len(core) :]


def _sentences(lang: Language, core: str) -> list[_Sentence]:
    out: list[_Sentence] = []
    pos = 0
    for m in lang.end_re.finditer(core):
        out.append(_Sentence(core[pos : m.start()], m.group(1), m.group(2)))
        pos = m.end()
    if pos < len(core):
        out.append(_Sentence(core[pos:], "", ""))
    return out


def _join(sentences: Sequence[_Sentence]) -> str:
    return "".join(s.body + s.punct + s.sep for s in sentences)


def _has_content(text: str) -> bool:
    return any(c.isalnum() or "\ue000" <= c <= "\uf8ff" for c in text)


def _words(lang: Language, text: str) -> int:
    if lang.latin:
        return len(re.findall(rf"[{_LATIN_WORD_CHARS}]+", text))
    return sum(1 for c in text if c.isalnum() or "\ue000" <= c <= "\uf8ff")


def _template_fragments(template: str) -> list[str]:
    return [literal for literal, _, _, _ in string.Formatter().parse(template) if literal]
