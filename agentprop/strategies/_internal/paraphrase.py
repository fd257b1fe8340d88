"""Meaning-preserving paraphrases as a Hypothesis strategy.

Design: a paraphrase is never drawn as text. It is drawn as integers
and lists -- an index into a pool of rewrites (index 0 is the original) and a list of
transforms, each a (transform index, integer parameters) pair -- and the text is *built* from
them. Consequences, all deliberate:

* Shrinking goes towards the original. The empty transform list is the original sentence;
  Hypothesis shrinks lists by deleting elements and integers towards 0, and transforms are
  ordered simplest first (whitespace noise before synonyms before typos), as are the entries
  of every phrase-pack list. A failure caused by one transform shrinks to the original plus
  that transform, with its simplest parameters.
* Every shrunk value is well formed: any list of steps renders to a sensible sentence.
* Replays are exact: the same choice sequence gives the same text (transforms are pure
  functions of the text and their integer parameters; nothing reads a global random source).
* Parameters that pick a *site* (which synonym, which letter) are taken modulo the number of
  sites the current text has, so every integer is meaningful and 0 is always "the first".

Protected slots (ids, amounts, dates, e-mails, numbers, ``{placeholders}``, ``protect=[...]``)
are masked to single private-use characters before any transform runs (see
:mod:`agentprop.strategies._internal.slots`), so no transform can alter them; the engine re-checks that
after every step.

A step that leaves the text unchanged (a contraction where there is none, a greeting on a text
that already has one) is dropped from the provenance, so ``Paraphrase.transforms`` lists only
what was actually applied and re-applying it reproduces the text exactly.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from agentprop.errors import AgentPropError, InvalidArgument
from agentprop.strategies._internal.packs import Frames, Mood, PhrasePack, resolve_pack
from agentprop.strategies._internal.slots import (
    PLACEHOLDER_CLASS,
    Slot,
    find_slots,
    has_placeholder_chars,
    mask,
    unmask,
    validate_protect,
)

__all__ = [
    "TRANSFORM_NAMES",
    "Paraphrase",
    "Step",
    "apply_transforms",
    "paraphrases",
    "rerender",
]


# --- values -----------------------------------------------------------------------------------


class Step(NamedTuple):
    """One applied transform: its name and its integer parameters (provenance)."""

    name: str
    params: tuple[tuple[str, int], ...] = ()

    @property
    def kwargs(self) -> dict[str, int]:
        return dict(self.params)

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.name}({args})"


class Paraphrase(str):
    """A paraphrased text: a ``str`` (use it anywhere a string goes) that also remembers where
    it came from.

    * ``p.text`` -- the text as a plain ``str`` (same as ``str(p)``)
    * ``p.original`` -- the sentence it was derived from
    * ``p.transforms`` -- tuple of :class:`Step` ``(name, params)``, in the order applied;
      empty means ``p == p.original`` (unless a pool rewrite was chosen, which is then the
      first step, ``pool(index=i)``)
    * ``p.lang`` -- the phrase-pack language used

    Equality and hashing are those of the text. Instances are immutable.
    """

    original: str
    transforms: tuple[Step, ...]
    lang: str

    def __new__(cls, text: str, *, original: str, transforms: Iterable[Step] = (), lang: str = "en") -> Paraphrase:
        self = super().__new__(cls, text)
        object.__setattr__(self, "original", str(original))
        object.__setattr__(self, "transforms", tuple(Step(*s) for s in transforms))
        object.__setattr__(self, "lang", lang)
        return self

    @property
    def text(self) -> str:
        return str.__str__(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        steps = ", ".join(str(s) for s in self.transforms)
        return f"Paraphrase({self.text!r}, original={self.original!r}, transforms=[{steps}])"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Paraphrase is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Paraphrase is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_paraphrase, (self.text, self.original, self.transforms, self.lang))

    def describe(self) -> str:
        """One line: the text and how it was made."""
        how = " + ".join(str(s) for s in self.transforms) or "unchanged"
        return f"{self.text!r} = original + {how}" if self.transforms else f"{self.text!r} (original, unchanged)"


def _rebuild_paraphrase(text: str, original: str, transforms: tuple[Step, ...], lang: str) -> Paraphrase:
    return Paraphrase(text, original=original, transforms=transforms, lang=lang)


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
        return re.compile(rf"(?<![A-Za-z0-9'\u2019])(?:{alts})(?![A-Za-z0-9'\u2019])", re.IGNORECASE)
    return re.compile(f"(?:{alts})", re.IGNORECASE)


def _key(text: str) -> str:
    return text.lower().replace("\u2019", "'")


@dataclass(frozen=True)
class _Language:
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
    def build(cls, pack: PhrasePack) -> _Language:
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
            contraction_re=_phrase_regex([*pack.contractions, *pack.contractions.values()], latin=latin),
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
        if letters in self.keep_case or (sum(c.isalpha() for c in letters) >= 2 and letters.isupper()):
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


_LANGUAGE_CACHE: dict[int, tuple[PhrasePack, _Language]] = {}


def _language_for(pack: PhrasePack) -> _Language:
    """Compile a pack once. Shipped packs are cached singletons, so strategies built for many
    texts (``st.sampled_from(texts).flatmap(paraphrases)``) share one compiled language."""
    hit = _LANGUAGE_CACHE.get(id(pack))
    if hit is not None and hit[0] is pack:
        return hit[1]
    language = _Language.build(pack)
    if len(_LANGUAGE_CACHE) > 64:
        _LANGUAGE_CACHE.clear()
    _LANGUAGE_CACHE[id(pack)] = (pack, language)
    return language


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


def _sentences(lang: _Language, core: str) -> list[_Sentence]:
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


def _words(lang: _Language, text: str) -> int:
    if lang.latin:
        return len(re.findall(rf"[{_LATIN_WORD_CHARS}]+", text))
    return sum(1 for c in text if c.isalnum() or "\ue000" <= c <= "\uf8ff")


def _template_fragments(template: str) -> list[str]:
    return [literal for literal, _, _, _ in string.Formatter().parse(template) if literal]


# --- transforms -------------------------------------------------------------------------------

Params = Mapping[str, int]
ApplyFn = Callable[[_Language, str, Params], str]


@dataclass(frozen=True)
class _Transform:
    """A named, deterministic rewrite of masked text driven by integer parameters."""

    name: str
    params: Callable[[_Language, int], tuple[tuple[str, int], ...]]  # (param name, max value)
    apply: ApplyFn
    available: Callable[[_Language, str], bool]
    doc: str = ""


def _sites(site: int, count: int) -> int:
    return site % count


# whitespace --------------------------------------------------------------------------------------


def _whitespace(lang: _Language, text: str, p: Params) -> str:
    kind, site = p["kind"], p["site"]
    if kind == 0:
        return text + " "
    if kind == 1:
        return " " + text
    if kind == 2:
        spaces = [m.start() for m in re.finditer(r"(?<=\S) (?=\S)", text)]
        if not spaces:
            return text
        i = spaces[_sites(site, len(spaces))]
        return text[:i] + " " + text[i:]
    if lang.latin:
        ends = [m.start() for m in re.finditer(rf"(?<=[^\s.!?,])[{re.escape(lang.terminals)}]+\s*$", text)]
        if not ends:
            return text
        i = ends[0]
        return text[:i] + " " + text[i:]
    gaps = [i for i in range(1, len(text)) if not text[i - 1].isspace() and not text[i].isspace() and (_is_cjk(text[i - 1]) or _is_cjk(text[i]))]
    if not gaps:
        return text
    i = gaps[_sites(site, len(gaps))]
    return text[:i] + " " + text[i:]


_CJK_RANGES = (("\u3400", "\u9fff"), ("\uf900", "\ufaff"), ("\u3000", "\u303f"), ("\uff00", "\uffef"))


def _is_cjk(c: str) -> bool:
    return any(lo <= c <= hi for lo, hi in _CJK_RANGES)


# punctuation -------------------------------------------------------------------------------------


def _punctuation(lang: _Language, text: str, p: Params) -> str:
    kind, site = p["kind"], p["site"]
    lead, core, trail = _strip(text)
    if not core:
        return text
    end = re.search(rf"[{re.escape(lang.terminals)}]+$", core)
    if kind == 0:
        if end is None:
            return text
        if not _has_content(core[: end.start()]):
            return text
        return lead + core[: end.start()] + trail
    if kind == 1:
        if end is not None:
            return text
        return lead + core + lang.default_end + trail
    if kind == 2:
        if end is None or end.group()[-1] not in "!?\uff01\uff1f":
            return text
        return lead + core + end.group()[-1] + trail
    commas = [m for m in re.finditer(r", (?=\S)" if lang.latin else r"[\uff0c,](?=\S)", core)]
    if not commas:
        return text
    m = commas[_sites(site, len(commas))]
    repl = " " if lang.latin else ""
    return lead + core[: m.start()] + repl + core[m.end() :] + trail


def _width(lang: _Language, text: str, p: Params) -> str:
    positions = [i for i, c in enumerate(text) if c in lang.widths]
    if not positions:
        return text
    i = positions[_sites(p["site"], len(positions))]
    return text[:i] + lang.widths[text[i]] + text[i + 1 :]


# casing ------------------------------------------------------------------------------------------


def _casing(lang: _Language, text: str, p: Params) -> str:
    kind = p["kind"]
    if kind == 0:
        return lang.decap(text) if lang.latin else text
    if kind == 1:
        return lang.cap(text)
    if kind == 2:
        return text.lower()
    return text.upper()


def _has_cased(lang: _Language, text: str) -> bool:
    return any(c.lower() != c.upper() for c in text)


# contractions and synonyms -----------------------------------------------------------------------


def _contraction(lang: _Language, text: str, p: Params) -> str:
    if lang.contraction_re is None:
        return text
    sites = list(lang.contraction_re.finditer(text))
    if not sites:
        return text
    m = sites[_sites(p["site"], len(sites))]
    found = _key(m.group())
    if found in lang.to_short:
        repl = lang.to_short[found]
    else:
        if found.endswith("'s") and re.match(r"\s+(?:been|got|gotten|had)\b", text[m.end() :], re.IGNORECASE):
            return text  # "it's been" is "it has been": do not expand to "it is"
        repl = lang.to_full.get(found, m.group())
    repl = lang.match_case(m.group(), repl)
    if "\u2019" in m.group():
        repl = repl.replace("'", "\u2019")
    return text[: m.start()] + repl + text[m.end() :]


def _synonym_sites(lang: _Language, text: str) -> list[re.Match[str]]:
    """Matches of synonym keys, except those inside an already substituted alternative (the
    "widget" in "Acme Widget Pro" after widget -> Acme Widget Pro), so rewrites never nest."""
    if lang.synonym_re is None:
        return []
    low = _key(text)
    sites = []
    for m in lang.synonym_re.finditer(text):
        inside = False
        for alt in lang.synonyms.get(_key(m.group()), ()):
            needle = _key(alt)
            start = low.find(needle, max(0, m.end() - len(needle)))
            while start != -1 and start <= m.start():
                if start + len(needle) >= m.end():
                    inside = True
                    break
                start = low.find(needle, start + 1)
            if inside:
                break
        if not inside:
            sites.append(m)
    return sites


def _synonym(lang: _Language, text: str, p: Params) -> str:
    sites = _synonym_sites(lang, text)
    if not sites:
        return text
    m = sites[_sites(p["site"], len(sites))]
    alts = lang.synonyms.get(_key(m.group()))
    if not alts:
        return text
    repl = lang.match_case(m.group(), alts[p["alt"] % len(alts)])
    return text[: m.start()] + repl + text[m.end() :]


def _regex_available(attr: str) -> Callable[[_Language, str], bool]:
    def available(lang: _Language, text: str) -> bool:
        pattern = getattr(lang, attr)
        return pattern is not None and pattern.search(text) is not None

    return available


# greetings, closings and frames ------------------------------------------------------------------


def _greeting(lang: _Language, text: str, p: Params) -> str:
    lead, core, trail = _strip(text)
    greetings = lang.pack.greetings
    if not core or not greetings or any(lang.norm(core + " ").startswith(lang.norm(g)) for g in greetings):
        return text
    g = greetings[p["choice"] % len(greetings)]
    if lang.latin:
        body = lang.decap(core) if g.rstrip().endswith(",") else lang.cap(core)
        return f"{lead}{g} {body}{trail}"
    return f"{lead}{g}{core}{trail}"


def _closing(lang: _Language, text: str, p: Params) -> str:
    lead, core, trail = _strip(text)
    closings = lang.pack.closings
    if not core or not closings or any(lang.already_has(core, other) for other in closings if lang.norm(other)):
        return text
    c = closings[p["choice"] % len(closings)]
    if core[-1] not in lang.terminals + "\u3002\uff01\uff1f":
        core += lang.default_end
    return f"{lead}{core}{lang.joiner}{c}{trail}"


def _first_sentence(lang: _Language, text: str) -> tuple[str, str, list[_Sentence]] | None:
    lead, core, trail = _strip(text)
    sentences = _sentences(lang, core)
    if not sentences or not _has_content(sentences[0].body):
        return None
    return lead, trail, sentences


def _is_tail(lang: _Language, clause: str) -> bool:
    """Whether a clause is just a closing ("thanks", "谢谢") or a "please" tag."""
    return lang.norm(clause) in lang.tails


def _split_tail(lang: _Language, body: str) -> tuple[str, str]:
    """Split a trailing "thanks" / "please" clause off a sentence body.

    Frames and particles attach to the request, not to a closing clause: "Cancel my order,
    thanks" + hedge is "Cancel my order if possible, thanks", and 帮我取消订单，谢谢 + 吧 is
    帮我取消订单吧，谢谢.
    """
    seps = list(lang.clause_re.finditer(body))
    if not seps:
        return body, ""
    m = seps[-1]
    head, last = body[: m.start()], body[m.end() :]
    if _is_tail(lang, last) and _has_content(head):
        return head, body[m.start() :]
    return body, ""


def _frame_options(lang: _Language, frames: Frames, body: str, punct: str) -> list[str]:
    mood = lang.mood(body, punct)
    return [t for t in frames.for_mood(mood) if not any(lang.already_has(body, frag) for frag in _template_fragments(t))]


def _hard_end(lang: _Language, template: str) -> bool:
    """Whether the template writes its own end mark after the sentence ("Could you {s}?")."""
    after = False
    for literal, name, _, _ in string.Formatter().parse(template):
        if after and any(c in lang.terminals + "\u3002\uff01\uff1f" for c in literal):
            return True
        if name in ("S", "s"):
            after = True
    return False


def _frame(section: str) -> ApplyFn:
    def apply(lang: _Language, text: str, p: Params) -> str:
        parts = _first_sentence(lang, text)
        if parts is None:
            return text
        lead, trail, sentences = parts
        first = sentences[0]
        frames: Frames = getattr(lang.pack, section)
        options = _frame_options(lang, frames, first.body, first.punct)
        if not options:
            return text
        template = options[p["choice"] % len(options)]
        body = first.body.rstrip()
        end = first.body[len(body) :] + first.punct
        core, tail = _split_tail(lang, body)
        core = _drop_polite_opener(lang, template, core)
        uses_p = "{p}" in template
        if not tail:
            new = template.format(S=core, s=lang.decap(core), p=end if uses_p else "")
            sentences[0] = _Sentence(new, "", first.sep)
        elif _hard_end(lang, template):
            rest = lang.clause_re.sub("", tail, count=1)
            new = template.format(S=core, s=lang.decap(core), p="") + lang.joiner + lang.cap(rest)
            sentences[0] = _Sentence(new, first.punct, first.sep)
        else:
            new = template.format(S=core, s=lang.decap(core), p="") + tail
            sentences[0] = _Sentence(new, end if uses_p else "", first.sep)
        return lead + _join(sentences) + trail

    return apply


def _drop_polite_opener(lang: _Language, template: str, core: str) -> str:
    """``core`` without its polite opener ("Please", "请") when ``template`` brings one."""
    openers = lang.pack.polite_openers
    if not openers:
        return core
    frame = _key("".join(_template_fragments(template)))
    if not any(lang.contains(frame, _key(o)) for o in openers):
        return core
    lead = core[: len(core) - len(core.lstrip())]
    body = core.lstrip()
    for opener in sorted(openers, key=len, reverse=True):
        if lang.latin:
            m = re.match(rf"{re.escape(opener)}(?:,\s*|\s+)(?=\S)", body, re.IGNORECASE)
            if m:
                rest = body[m.end() :]
                return lead + (lang.cap(rest) if body[:1].isupper() else rest)
        elif body.startswith(opener) and _has_content(body[len(opener) :]):
            return lead + body[len(opener) :]
    return core


def _frame_available(section: str) -> Callable[[_Language, str], bool]:
    def available(lang: _Language, text: str) -> bool:
        parts = _first_sentence(lang, text)
        if parts is None:
            return False
        first = parts[2][0]
        return bool(_frame_options(lang, getattr(lang.pack, section), first.body, first.punct))

    return available


def _particle(lang: _Language, text: str, p: Params) -> str:
    parts = _first_sentence(lang, text)
    if parts is None:
        return text
    lead, trail, sentences = parts
    first = sentences[0]
    options = lang.pack.particles.for_mood(lang.mood(first.body, first.punct))
    body = first.body.rstrip()
    core, tail = _split_tail(lang, body)
    finals = (*lang.pack.particles.all, *lang.pack.question_ends)
    if not options or any(core.endswith(f) for f in finals) or not _has_content(core[-1:]):
        return text
    particle = options[p["choice"] % len(options)]
    sentences[0] = _Sentence(core + particle + tail + first.body[len(body) :], first.punct, first.sep)
    return lead + _join(sentences) + trail


def _particle_available(lang: _Language, text: str) -> bool:
    parts = _first_sentence(lang, text)
    if parts is None:
        return False
    first = parts[2][0]
    return bool(lang.pack.particles.for_mood(lang.mood(first.body, first.punct)))


# question -> request ----------------------------------------------------------------------------


def _direct_opener(lang: _Language, text: str) -> tuple[list[_Sentence], str, str, str, str] | None:
    """``(sentences, lead, trail, key, value)`` when the first sentence is a question opening
    with a key of the pack's ``direct_requests`` (the longest that matches)."""
    parts = _first_sentence(lang, text)
    if parts is None or not lang.pack.direct_requests:
        return None
    lead, trail, sentences = parts
    first = sentences[0]
    core = first.body.strip()
    asked = any(c in first.punct for c in "?\uff1f") or (not lang.latin and core.endswith("吗"))
    if not asked or lang.mood(first.body, first.punct) != "question":
        return None
    low = _key(core)
    for key, value in sorted(lang.pack.direct_requests.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        k = _key(key)
        if not low.startswith(k):
            continue
        if lang.latin and len(low) > len(k) and re.match(r"[A-Za-z0-9'\u2019]", low[len(k)]):
            continue  # "Canyon ..." does not open with "Can"
        if not _has_content(core[len(key) :]):
            continue
        return sentences, lead, trail, key, value
    return None


def _direct_request(lang: _Language, text: str, p: Params) -> str:
    found = _direct_opener(lang, text)
    if found is None:
        return text
    sentences, lead, trail, key, value = found
    first = sentences[0]
    ws = first.body[: len(first.body) - len(first.body.lstrip())]
    rest = first.body.strip()[len(key) :]
    if lang.latin:
        rest = rest.lstrip(" ,")
        body = f"{ws}{value} {rest}"
        punct = re.sub(r"[?\uff1f]+", ".", first.punct)
    else:
        rest = rest[:-1] if rest.endswith("吗") else rest
        body = f"{ws}{value}{rest}"
        punct = re.sub(r"[?\uff1f]+", "\u3002", first.punct)
    sentences[0] = _Sentence(body, punct, first.sep)
    return lead + _join(sentences) + trail


# clause and sentence reordering ------------------------------------------------------------------


def _reorder_sites(lang: _Language, sentences: list[_Sentence]) -> list[tuple[int, int]]:
    """(sentence index, -1) swaps sentence i and i+1; (sentence index, j) swaps clauses j, j+1."""
    sites: list[tuple[int, int]] = []
    for i in range(len(sentences) - 1):
        if _has_content(sentences[i].body) and _has_content(sentences[i + 1].body):
            sites.append((i, -1))
    for i, sentence in enumerate(sentences):
        clauses = lang.clause_re.split(sentence.body)
        for j in range(len(clauses) - 1):
            a, b = clauses[j], clauses[j + 1]
            if _words(lang, a) < 2 or _words(lang, b) < 2:
                continue
            if lang.starts_with(a, lang.connectors) or lang.starts_with(b, lang.connectors):
                continue
            if _is_tail(lang, a) or _is_tail(lang, b):
                continue  # "thanks" stays where it is
            sites.append((i, j))
    return sites


def _reorder(lang: _Language, text: str, p: Params) -> str:
    lead, core, trail = _strip(text)
    sentences = _sentences(lang, core)
    sites = _reorder_sites(lang, sentences)
    if not sites:
        return text
    i, j = sites[_sites(p["site"], len(sites))]
    if j < 0:
        a, b = sentences[i], sentences[i + 1]
        a_punct = a.punct or lang.default_end
        b_punct = b.punct or lang.default_end
        if i + 1 == len(sentences) - 1 and not b.punct:
            a_punct = ""  # the unpunctuated last sentence stays unpunctuated at the end
        sentences[i] = _Sentence(b.body, b_punct, a.sep or lang.joiner)
        sentences[i + 1] = _Sentence(a.body, a_punct, b.sep)
        return lead + _join(sentences) + trail
    sentence = sentences[i]
    clauses = lang.clause_re.split(sentence.body)
    seps = lang.clause_re.findall(sentence.body)
    first, second = clauses[j], clauses[j + 1]
    if j == 0 and lang.latin and first[:1].isupper():
        second, first = lang.cap(second), lang.decap(first)
    clauses[j], clauses[j + 1] = second, first
    body = clauses[0] + "".join(s + c for s, c in zip(seps, clauses[1:]))
    sentences[i] = _Sentence(body, sentence.punct, sentence.sep)
    return lead + _join(sentences) + trail


def _reorder_available(lang: _Language, text: str) -> bool:
    return bool(_reorder_sites(lang, _sentences(lang, _strip(text)[1])))


# typos -------------------------------------------------------------------------------------------

_TYPO_WORD = re.compile(rf"(?<![A-Za-z'\u2019{_PH}])[A-Za-z]{{4,}}(?![A-Za-z'\u2019{_PH}])")


def _typo_positions(lang: _Language, text: str, kind: int) -> list[int]:
    out: list[int] = []
    for m in _TYPO_WORD.finditer(text):
        word = m.group()
        if word.lower() in lang.typo_exempt or word.isupper():
            continue
        for k in range(1, len(word)):
            c = word[k]
            if kind == 0 and (k + 1 >= len(word) or word[k].lower() == word[k + 1].lower()):
                continue
            if kind == 1 and c.lower() not in lang.pack.keyboard:
                continue
            out.append(m.start() + k)
    return out


def _anchored_site(text: str, positions: list[int], site: int) -> int:
    """The typo's position, anchored to a word rather than an offset: each candidate word (by
    its text and which occurrence of that text it is) gets a score from ``site``, the best
    word wins, and ``site`` picks the letter inside it. Words other transforms add or remove
    elsewhere change the pick only when they win themselves, so dropping another transform
    while shrinking leaves the typo on the same word (an offset would move it)."""
    words: dict[tuple[str, int], list[int]] = {}
    seen: Counter[str] = Counter()
    by_start: dict[int, tuple[str, int]] = {}
    for m in _TYPO_WORD.finditer(text):
        w = m.group().lower()
        by_start[m.start()] = (w, seen[w])
        seen[w] += 1
    starts = sorted(by_start)
    for i in positions:
        start = max(st for st in starts if st <= i)
        words.setdefault(by_start[start], []).append(i)

    def score(word: tuple[str, int]) -> bytes:
        return hashlib.sha256(f"{site}|{word[0]}|{word[1]}".encode()).digest()

    chosen = max(words, key=score)
    letters = words[chosen]
    return letters[_sites(site, len(letters))]


def _typo(lang: _Language, text: str, p: Params) -> str:
    kind = p["kind"]
    positions = _typo_positions(lang, text, kind)
    if not positions:
        return text
    i = _anchored_site(text, positions, p["site"])
    c = text[i]
    if kind == 0:
        return text[:i] + text[i + 1] + c + text[i + 2 :]
    if kind == 1:
        neighbours = lang.pack.keyboard[c.lower()]
        n = neighbours[p["key"] % len(neighbours)]
        return text[:i] + (n.upper() if c.isupper() else n) + text[i + 1 :]
    if kind == 2:
        return text[:i] + text[i + 1 :]
    return text[:i] + c + text[i:]


def _typo_available(lang: _Language, text: str) -> bool:
    return bool(lang.pack.keyboard) and bool(_typo_positions(lang, text, 2))


# registry ----------------------------------------------------------------------------------------


def _always(lang: _Language, text: str) -> bool:
    return True


def _fixed(*names: tuple[str, int]) -> Callable[[_Language, int], tuple[tuple[str, int], ...]]:
    def params(lang: _Language, site_max: int) -> tuple[tuple[str, int], ...]:
        return tuple((n, site_max if hi < 0 else hi) for n, hi in names)

    return params


def _choice_of(section: str) -> Callable[[_Language, int], tuple[tuple[str, int], ...]]:
    def params(lang: _Language, site_max: int) -> tuple[tuple[str, int], ...]:
        value = getattr(lang.pack, section)
        width = value.widest if hasattr(value, "widest") else len(value)
        return (("choice", max(0, width - 1)),)

    return params


def _synonym_params(lang: _Language, site_max: int) -> tuple[tuple[str, int], ...]:
    widest = max((len(v) for v in lang.synonyms.values()), default=1)
    return (("site", site_max), ("alt", max(0, widest - 1)))


def _typo_params(lang: _Language, site_max: int) -> tuple[tuple[str, int], ...]:
    widest = max((len(v) for v in lang.pack.keyboard.values()), default=1)
    return (("kind", 3), ("site", site_max), ("key", max(0, widest - 1)))


_SITE = -1  # placeholder for "the site bound of this text"

#: All transforms, simplest first. Shrinking moves towards lower indices.
_TRANSFORMS: tuple[_Transform, ...] = (
    _Transform(
        "whitespace",
        _fixed(("kind", 3), ("site", _SITE)),
        _whitespace,
        _always,
        "trailing/leading space, a doubled space, a space before the end mark (zh: between characters)",
    ),
    _Transform(
        "punctuation",
        _fixed(("kind", 3), ("site", _SITE)),
        _punctuation,
        _always,
        "drop or add the end mark, repeat ! or ?, drop a comma",
    ),
    _Transform(
        "width",
        _fixed(("site", _SITE)),
        _width,
        lambda lang, text: bool(lang.widths) and any(c in lang.widths for c in text),
        "full-width <-> half-width punctuation (zh)",
    ),
    _Transform("casing", _fixed(("kind", 3)), _casing, _has_cased, "first letter lower/upper, all lower, ALL UPPER"),
    _Transform(
        "contraction",
        _fixed(("site", _SITE)),
        _contraction,
        _regex_available("contraction_re"),
        "I am <-> I'm, do not <-> don't ...",
    ),
    _Transform(
        "greeting",
        _choice_of("greetings"),
        _greeting,
        lambda lang, text: bool(lang.pack.greetings),
        "prepend a greeting",
    ),
    _Transform(
        "closing",
        _choice_of("closings"),
        _closing,
        lambda lang, text: bool(lang.pack.closings),
        "append a closing (thanks)",
    ),
    _Transform(
        "politeness",
        _choice_of("politeness"),
        _frame("politeness"),
        _frame_available("politeness"),
        "please / kindly / 请 / 麻烦您",
    ),
    _Transform(
        "particle",
        _choice_of("particles"),
        _particle,
        _particle_available,
        "sentence-final particle (zh 吧/呢/啊)",
    ),
    _Transform(
        "filler",
        _choice_of("fillers"),
        _frame("fillers"),
        _frame_available("fillers"),
        "um, / so, / 那个，",
    ),
    _Transform(
        "hedge",
        _choice_of("hedges"),
        _frame("hedges"),
        _frame_available("hedges"),
        "if possible / 如果可以的话",
    ),
    _Transform(
        "urgency",
        _choice_of("urgency"),
        _frame("urgency"),
        _frame_available("urgency"),
        "register: hurried or urgent (... asap / Urgent: ... / 急)",
    ),
    _Transform(
        "casual",
        _choice_of("casual"),
        _frame("casual"),
        _frame_available("casual"),
        "register: casual (hey, ... / ... thx)",
    ),
    _Transform(
        "formal",
        _choice_of("formal"),
        _frame("formal"),
        _frame_available("formal"),
        "register: formal (I would be grateful if you could ...)",
    ),
    _Transform(
        "synonym",
        _synonym_params,
        _synonym,
        lambda lang, text: bool(_synonym_sites(lang, text)),
        "phrase substitution from the pack's synonyms",
    ),
    _Transform(
        "indirect_request",
        _choice_of("indirect_requests"),
        _frame("indirect_requests"),
        _frame_available("indirect_requests"),
        "Could you ...? / I was wondering if you could ... / 能不能…？",
    ),
    _Transform(
        "direct_request",
        _fixed(),
        _direct_request,
        lambda lang, text: _direct_opener(lang, text) is not None,
        "question -> request: Can you tell me ...? -> Tell me ... / 能不能帮我…？ -> 请帮我…。",
    ),
    _Transform(
        "reorder",
        _fixed(("site", _SITE)),
        _reorder,
        _reorder_available,
        "swap two adjacent clauses or sentences",
    ),
    _Transform(
        "typo",
        _typo_params,
        _typo,
        _typo_available,
        "one keyboard typo (swap, adjacent key, drop, double) outside protected slots",
    ),
)

#: Names of all transforms, in the order Hypothesis shrinks towards (simplest first).
TRANSFORM_NAMES: tuple[str, ...] = tuple(t.name for t in _TRANSFORMS)
_BY_NAME: dict[str, _Transform] = {t.name: t for t in _TRANSFORMS}


# --- plan and rendering -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    text: str
    masked: str
    mapping: dict[str, str]


@dataclass(frozen=True)
class _Plan:
    """Everything a draw needs, validated once when the strategy is created."""

    lang_code: str
    lang: _Language
    sources: tuple[_Source, ...]
    candidates: tuple[_Transform, ...]
    bounds: tuple[tuple[tuple[str, int], ...], ...]
    max_transforms: int
    max_typos: int
    description: str = field(default="")
    steps_strategy: SearchStrategy[list[tuple[str, dict[str, int]]]] | None = field(default=None, compare=False)
    pool_strategy: SearchStrategy[int] | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return self.description

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.description)

    @property
    def original(self) -> str:
        return self.sources[0].text

    def render(self, pool_index: int, steps: Sequence[tuple[str, Mapping[str, int]]]) -> Paraphrase:
        source = self.sources[pool_index]
        text = source.masked
        applied: list[Step] = [Step("pool", (("index", pool_index),))] if pool_index else []
        typos = 0
        placeholders = Counter(c for c in text if "\ue000" <= c <= "\uf8ff")
        for name, params in steps:
            if name == "typo" and typos >= self.max_typos:
                continue
            transform = _BY_NAME[name]
            new = transform.apply(self.lang, text, params)
            if new == text:
                continue
            if Counter(c for c in new if "\ue000" <= c <= "\uf8ff") != placeholders:
                raise AgentPropError(
                    f"internal error: transform {name!r} with {dict(params)} altered a protected slot of "
                    f"{self.original!r}; please report this bug to agentprop"
                )
            text = new
            typos += name == "typo"
            applied.append(Step(name, tuple(params.items())))
        result = Paraphrase(unmask(text, source.mapping), original=self.original, transforms=applied, lang=self.lang_code)
        object.__setattr__(result, "_plan", self)  # what re-renders a subset of its steps (rerender)
        return result


def rerender(paraphrase: Paraphrase, steps: Iterable[Step]) -> Paraphrase | None:
    """``paraphrase``'s original with only ``steps`` (some of its ``transforms``, in order)
    applied, under the plan that drew it (its packs, protected slots and pool): what a shrinker
    of the drawn choices builds its candidates from. A ``pool`` step left out means the
    original text. ``None`` when the plan is unknown (a Paraphrase built by hand or unpickled),
    or does not re-render the paraphrase itself exactly."""
    plan = paraphrase.__dict__.get("_plan")
    if not isinstance(plan, _Plan):
        return None
    if plan.render(*_plan_steps(paraphrase.transforms)).text != paraphrase.text:
        return None
    return plan.render(*_plan_steps(steps))


def _plan_steps(steps: Iterable[Step]) -> tuple[int, list[tuple[str, Mapping[str, int]]]]:
    pool_index = 0
    out: list[tuple[str, Mapping[str, int]]] = []
    for step in steps:
        if step.name == "pool":
            pool_index = step.kwargs.get("index", 0)
        else:
            out.append((step.name, step.kwargs))
    return pool_index, out


def _validate_int(name: str, value: object, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgument(f"{name}={value!r} must be at least {minimum}")
    return value


def _validate_text(value: object, argument: str = "text") -> str:
    if not isinstance(value, str):
        raise InvalidArgument(
            f"{argument} must be a str, got {type(value).__name__} {value!r}" + (" (decode bytes first)" if isinstance(value, bytes) else "")
        )
    if not value.strip():
        raise InvalidArgument(f"{argument}={value!r} must contain at least one non-whitespace character")
    if has_placeholder_chars(value):
        raise InvalidArgument(
            f"{argument} contains private-use characters (U+E000-U+F8FF), which agentprop reserves to mask protected slots; remove them"
        )
    return value


def _make_source(text: str, protect: Sequence[str | re.Pattern[str]]) -> tuple[_Source, list[Slot]]:
    slots = find_slots(text, protect=protect)
    masked, mapping = mask(text, slots)
    return _Source(text, masked, mapping), slots


def build_plan(
    text: object,
    *,
    lang: object,
    packs: object,
    protect: object,
    pool: object,
    max_transforms: object,
    max_typos: object,
    transforms: object,
    filter_available: bool,
) -> _Plan:
    original = _validate_text(text)
    n_max = _validate_int("max_transforms", max_transforms)
    typo_max = _validate_int("max_typos", max_typos)
    protect_items = validate_protect(protect)
    for item in protect_items:
        if isinstance(item, str) and item not in original:
            raise InvalidArgument(
                f"protect=[{item!r}] does not occur in text {original!r}; protected strings must be exact substrings (case-sensitive)"
            )
        if isinstance(item, re.Pattern) and not item.search(original):
            raise InvalidArgument(f"protect pattern {item.pattern!r} matches nothing in text {original!r}")
    if isinstance(pool, str) or not isinstance(pool, Iterable):
        raise InvalidArgument(f"pool must be a list of alternative texts, got {type(pool).__name__} {pool!r}")
    pool_texts = [_validate_text(p, "pool entry") for p in pool]
    if transforms is None:
        wanted = TRANSFORM_NAMES
    else:
        if isinstance(transforms, str) or not isinstance(transforms, Iterable):
            raise InvalidArgument(f"transforms must be a list of transform names, got {transforms!r}")
        wanted = tuple(transforms)
        unknown = [t for t in wanted if t not in _BY_NAME]
        if unknown:
            raise InvalidArgument(f"unknown transform names {unknown}; choose from {list(TRANSFORM_NAMES)}")
    if not isinstance(lang, str):
        raise InvalidArgument(f"lang must be a str such as 'en' or 'zh', got {type(lang).__name__} {lang!r}")
    language = _language_for(resolve_pack(lang, packs))

    first, slots = _make_source(original, protect_items)
    sources = [first]
    needed = Counter(s.text for s in slots)
    for entry in pool_texts:
        missing = [s for s, n in needed.items() if entry.count(s) < n]
        if missing:
            raise InvalidArgument(
                f"pool entry {entry!r} drops or changes protected slots {missing} of {original!r}; every "
                "rewrite in a pool must keep each id, amount, date and number of the original verbatim"
            )
        sources.append(_make_source(entry, protect_items)[0])

    site_max = max(15, min(1023, 2 * max(len(s.masked) for s in sources)))
    candidates = tuple(t for t in _TRANSFORMS if t.name in wanted and (not filter_available or any(t.available(language, s.masked) for s in sources)))
    bounds = tuple(t.params(language, site_max) for t in candidates)
    options = [f"lang={lang!r}"]
    if packs is not None:
        options.append(f"packs={packs!r}")
    if protect_items:
        options.append(f"protect={list(protect_items)!r}")
    if pool_texts:
        options.append(f"pool={pool_texts!r}")
    if n_max != 4:
        options.append(f"max_transforms={n_max}")
    if transforms is not None:
        options.append(f"transforms={list(wanted)!r}")
    description = f"paraphrases({original!r}, {', '.join(options)})"
    step = _step_strategy(candidates, bounds)
    return _Plan(
        lang,
        language,
        tuple(sources),
        candidates,
        bounds,
        n_max,
        typo_max,
        description,
        _steps_strategy(step, n_max) if step is not None and n_max else None,
        st.integers(0, len(sources) - 1) if len(sources) > 1 else None,
    )


@functools.lru_cache(maxsize=256)
def _step_strategy_for(
    spec: tuple[tuple[str, tuple[tuple[str, int], ...]], ...],
) -> SearchStrategy[tuple[str, dict[str, int]]] | None:
    """One step: a transform (lower index = simpler, what one_of shrinks towards) and its
    integer parameters (shrinking towards 0 = the first site / the first pack entry).

    Cached by shape, so building strategies for many texts (``flatmap``) reuses one object."""
    if not spec:
        return None

    def branch(name: str, spec: tuple[tuple[str, int], ...]) -> SearchStrategy[tuple[str, dict[str, int]]]:
        keys = tuple(n for n, _ in spec)
        values = st.tuples(*(st.integers(0, hi) for _, hi in spec))
        return values.map(lambda vs: (name, dict(zip(keys, vs))))

    return st.one_of([branch(name, b) for name, b in spec])


@functools.lru_cache(maxsize=256)
def _steps_strategy(step: SearchStrategy[tuple[str, dict[str, int]]], max_size: int) -> SearchStrategy[list[tuple[str, dict[str, int]]]]:
    return st.lists(step, max_size=max_size)


def _step_strategy(
    candidates: Sequence[_Transform], bounds: Sequence[tuple[tuple[str, int], ...]]
) -> SearchStrategy[tuple[str, dict[str, int]]] | None:
    return _step_strategy_for(tuple((t.name, b) for t, b in zip(candidates, bounds)))


@st.composite
def _paraphrase_strategy(draw: st.DrawFn, plan: _Plan) -> Paraphrase:
    index = draw(plan.pool_strategy) if plan.pool_strategy is not None else 0
    steps = draw(plan.steps_strategy) if plan.steps_strategy is not None else []
    result = plan.render(index, steps)
    note(f"Paraphrase: {result.describe()}")
    return result


def paraphrases(
    text: str,
    *,
    lang: str = "en",
    packs: Sequence[str | os.PathLike[str] | PhrasePack] | None = None,
    protect: Sequence[str | re.Pattern[str]] = (),
    pool: Sequence[str] = (),
    max_transforms: int = 4,
    max_typos: int = 2,
    transforms: Sequence[str] | None = None,
) -> SearchStrategy[Paraphrase]:
    """A strategy for meaning-preserving rewrites of ``text``, as :class:`Paraphrase` values.

    Each example is the original (or a ``pool`` entry) with up to ``max_transforms`` transforms
    applied in order, drawn from :data:`TRANSFORM_NAMES` (restrict with ``transforms=``). It
    shrinks towards the unchanged ``text``. Protected slots -- ids, money, dates, times,
    e-mails, URLs, numbers, ``{placeholders}`` and every string or regex in ``protect`` -- are
    never altered. At most ``max_typos`` typo steps take effect per example.

    ``lang`` picks the shipped phrase pack (``"en"``, ``"zh"``); ``packs`` adds user packs
    (paths or :class:`PhrasePack` objects; packs for other languages are ignored). ``pool`` is a
    list of ready-made rewrites of ``text`` (for instance LLM paraphrases cached on disk);
    index 0 is always the original and every entry must keep all protected slots.

    Arguments are validated when the strategy is created; bad ones raise
    :class:`~agentprop.errors.InvalidArgument`, bad pack files
    :class:`~agentprop.errors.InputError`.
    """
    plan = build_plan(
        text,
        lang=lang,
        packs=packs,
        protect=protect,
        pool=pool,
        max_transforms=max_transforms,
        max_typos=max_typos,
        transforms=transforms,
        filter_available=True,
    )
    return _paraphrase_strategy(plan)


def apply_transforms(
    text: str,
    steps: Iterable[Step | tuple[str, Any]],
    *,
    lang: str = "en",
    packs: Sequence[str | os.PathLike[str] | PhrasePack] | None = None,
    protect: Sequence[str | re.Pattern[str]] = (),
    pool: Sequence[str] = (),
    max_typos: int = 2,
) -> Paraphrase:
    """Re-apply recorded steps (e.g. ``p.transforms``) to ``text``; deterministic.

    ``apply_transforms(p.original, p.transforms, lang=p.lang, ...)`` returns ``p`` again (with
    the same packs, protect and pool). A step is a :class:`Step` or ``(name, params)`` with
    params a mapping or ``(name, value)`` pairs; a ``pool(index=i)`` step selects a pool entry.
    """
    plan = build_plan(
        text,
        lang=lang,
        packs=packs,
        protect=protect,
        pool=pool,
        max_transforms=0,
        max_typos=max_typos,
        transforms=None,
        filter_available=False,
    )
    bounds = {t.name: dict(b) for t, b in zip(plan.candidates, plan.bounds)}
    pool_index = 0
    normalized: list[tuple[str, Mapping[str, int]]] = []
    for raw in steps:
        try:
            name, params = raw
        except (TypeError, ValueError):
            raise InvalidArgument(f"a step must be (name, params), got {raw!r}") from None
        values = dict(params.items() if isinstance(params, Mapping) else params)
        if name == "pool":
            pool_index = _validate_int("pool index", values.get("index", 0))
            if pool_index >= len(plan.sources):
                raise InvalidArgument(f"pool index {pool_index} is out of range: the pool has {len(plan.sources) - 1} entries")
            continue
        if name not in bounds:
            raise InvalidArgument(f"unknown transform {name!r}; choose from {list(TRANSFORM_NAMES)}")
        expected = bounds[name]
        if set(values) != set(expected):
            raise InvalidArgument(f"transform {name!r} takes parameters {sorted(expected)}, got {sorted(values)}")
        for key, value in values.items():
            _validate_int(f"{name}.{key}", value)
        normalized.append((name, {k: values[k] for k in expected}))
    return plan.render(pool_index, normalized)
