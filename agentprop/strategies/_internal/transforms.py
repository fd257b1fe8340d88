"""The transforms a paraphrase is built from: named, deterministic rewrites of masked text.

Each is a pure function of the text, the language and its integer parameters (a parameter that
picks a site is taken modulo the sites the text has). :data:`TRANSFORMS` is ordered simplest
first, the order Hypothesis shrinks towards.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentprop.strategies._internal.language import (
    _PH,
    Language,
    _has_content,
    _join,
    _key,
    _Sentence,
    _sentences,
    _strip,
    _template_fragments,
    _words,
)
from agentprop.strategies._internal.packs import Frames

# --- transforms -------------------------------------------------------------------------------

Params = Mapping[str, int]
ApplyFn = Callable[[Language, str, Params], str]


@dataclass(frozen=True)
class Transform:
    """A named, deterministic rewrite of masked text driven by integer parameters."""

    name: str
    params: Callable[[Language, int], tuple[tuple[str, int], ...]]  # (param name, max value)
    apply: ApplyFn
    available: Callable[[Language, str], bool]
    doc: str = ""


def _sites(site: int, count: int) -> int:
    return site % count


# whitespace --------------------------------------------------------------------------------------


def _whitespace(lang: Language, text: str, p: Params) -> str:
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
        ends = [
            m.start()
            for m in re.finditer(rf"(?<=[^\s.!?,])[{re.escape(lang.terminals)}]+\s*$", text)
        ]
        if not ends:
            return text
        i = ends[0]
        return text[:i] + " " + text[i:]
    gaps = [
        i
        for i in range(1, len(text))
        if not text[i - 1].isspace()
        and not text[i].isspace()
        and (_is_cjk(text[i - 1]) or _is_cjk(text[i]))
    ]
    if not gaps:
        return text
    i = gaps[_sites(site, len(gaps))]
    return text[:i] + " " + text[i:]


_CJK_RANGES = (
    ("\u3400", "\u9fff"),
    ("\uf900", "\ufaff"),
    ("\u3000", "\u303f"),
    ("\uff00", "\uffef"),
)


def _is_cjk(c: str) -> bool:
    return any(lo <= c <= hi for lo, hi in _CJK_RANGES)


# punctuation -------------------------------------------------------------------------------------


def _punctuation(lang: Language, text: str, p: Params) -> str:
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
        # a space that stood before the mark ("done ." from whitespace) goes with it: left
        # behind, it would end the message with a space no family chose
        return lead + core[: end.start()].rstrip() + trail
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


def _width(lang: Language, text: str, p: Params) -> str:
    positions = [i for i, c in enumerate(text) if c in lang.widths]
    if not positions:
        return text
    i = positions[_sites(p["site"], len(positions))]
    return text[:i] + lang.widths[text[i]] + text[i + 1 :]


# casing ------------------------------------------------------------------------------------------


def _casing(lang: Language, text: str, p: Params) -> str:
    kind = p["kind"]
    if kind == 0:
        return lang.decap(text) if lang.latin else text
    if kind == 1:
        return lang.cap(text)
    if kind == 2:
        return text.lower()
    return text.upper()


def _has_cased(lang: Language, text: str) -> bool:
    return any(c.lower() != c.upper() for c in text)


# contractions and synonyms -----------------------------------------------------------------------


def _contraction(lang: Language, text: str, p: Params) -> str:
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
        if found.endswith("'s") and re.match(
            r"\s+(?:been|got|gotten|had)\b", text[m.end() :], re.IGNORECASE
        ):
            return text  # "it's been" is "it has been": do not expand to "it is"
        repl = lang.to_full.get(found, m.group())
    repl = lang.match_case(m.group(), repl)
    if "\u2019" in m.group():
        repl = repl.replace("'", "\u2019")
    return text[: m.start()] + repl + text[m.end() :]


def _synonym_sites(lang: Language, text: str) -> list[re.Match[str]]:
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


def _synonym(lang: Language, text: str, p: Params) -> str:
    sites = _synonym_sites(lang, text)
    if not sites:
        return text
    m = sites[_sites(p["site"], len(sites))]
    alts = lang.synonyms.get(_key(m.group()))
    if not alts:
        return text
    repl = lang.match_case(m.group(), alts[p["alt"] % len(alts)])
    return text[: m.start()] + repl + text[m.end() :]


def _regex_available(attr: str) -> Callable[[Language, str], bool]:
    def available(lang: Language, text: str) -> bool:
        pattern = getattr(lang, attr)
        return pattern is not None and pattern.search(text) is not None

    return available


# greetings, closings and frames ------------------------------------------------------------------


def _greeting(lang: Language, text: str, p: Params) -> str:
    lead, core, trail = _strip(text)
    greetings = lang.pack.greetings
    if (
        not core
        or not greetings
        or any(lang.norm(core + " ").startswith(lang.norm(g)) for g in greetings)
    ):
        return text
    g = greetings[p["choice"] % len(greetings)]
    if lang.latin:
        body = lang.decap(core) if g.rstrip().endswith(",") else lang.cap(core)
        return f"{lead}{g} {body}{trail}"
    return f"{lead}{g}{core}{trail}"


def _closing(lang: Language, text: str, p: Params) -> str:
    lead, core, trail = _strip(text)
    closings = lang.pack.closings
    if (
        not core
        or not closings
        or any(lang.already_has(core, other) for other in closings if lang.norm(other))
    ):
        return text
    c = closings[p["choice"] % len(closings)]
    if core[-1] not in lang.terminals + "\u3002\uff01\uff1f":
        core += lang.default_end
    return f"{lead}{core}{lang.joiner}{c}{trail}"


def _first_sentence(lang: Language, text: str) -> tuple[str, str, list[_Sentence]] | None:
    lead, core, trail = _strip(text)
    sentences = _sentences(lang, core)
    if not sentences or not _has_content(sentences[0].body):
        return None
    return lead, trail, sentences


def _is_tail(lang: Language, clause: str) -> bool:
    """Whether a clause is just a closing ("thanks", "谢谢") or a "please" tag."""
    return lang.norm(clause) in lang.tails


def _split_tail(lang: Language, body: str) -> tuple[str, str]:
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


def _frame_options(lang: Language, frames: Frames, body: str, punct: str) -> list[str]:
    mood = lang.mood(body, punct)
    return [
        t
        for t in frames.for_mood(mood)
        if not any(lang.already_has(body, frag) for frag in _template_fragments(t))
    ]


def _hard_end(lang: Language, template: str) -> bool:
    """Whether the template writes its own end mark after the sentence ("Could you {s}?")."""
    after = False
    for literal, name, _, _ in string.Formatter().parse(template):
        if after and any(c in lang.terminals + "\u3002\uff01\uff1f" for c in literal):
            return True
        if name in ("S", "s"):
            after = True
    return False


def _frame(section: str) -> ApplyFn:
    def apply(lang: Language, text: str, p: Params) -> str:
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


def _drop_polite_opener(lang: Language, template: str, core: str) -> str:
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


def _frame_available(section: str) -> Callable[[Language, str], bool]:
    def available(lang: Language, text: str) -> bool:
        parts = _first_sentence(lang, text)
        if parts is None:
            return False
        first = parts[2][0]
        return bool(_frame_options(lang, getattr(lang.pack, section), first.body, first.punct))

    return available


def _particle(lang: Language, text: str, p: Params) -> str:
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
    sentences[0] = _Sentence(
        core + particle + tail + first.body[len(body) :], first.punct, first.sep
    )
    return lead + _join(sentences) + trail


def _particle_available(lang: Language, text: str) -> bool:
    parts = _first_sentence(lang, text)
    if parts is None:
        return False
    first = parts[2][0]
    return bool(lang.pack.particles.for_mood(lang.mood(first.body, first.punct)))


# question -> request ----------------------------------------------------------------------------


def _direct_opener(lang: Language, text: str) -> tuple[list[_Sentence], str, str, str, str] | None:
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
    for key, value in sorted(
        lang.pack.direct_requests.items(), key=lambda kv: (-len(kv[0]), kv[0])
    ):
        k = _key(key)
        if not low.startswith(k):
            continue
        if lang.latin and len(low) > len(k) and re.match(r"[A-Za-z0-9'\u2019]", low[len(k)]):
            continue  # "Canyon ..." does not open with "Can"
        if not _has_content(core[len(key) :]):
            continue
        return sentences, lead, trail, key, value
    return None


def _direct_request(lang: Language, text: str, p: Params) -> str:
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


def _reorder_sites(lang: Language, sentences: list[_Sentence]) -> list[tuple[int, int]]:
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


def _reorder(lang: Language, text: str, p: Params) -> str:
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


def _reorder_available(lang: Language, text: str) -> bool:
    return bool(_reorder_sites(lang, _sentences(lang, _strip(text)[1])))


# typos -------------------------------------------------------------------------------------------

_TYPO_WORD = re.compile(rf"(?<![A-Za-z'\u2019{_PH}])[A-Za-z]{{4,}}(?![A-Za-z'\u2019{_PH}])")


def _typo_positions(lang: Language, text: str, kind: int) -> list[int]:
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


def _typo(lang: Language, text: str, p: Params) -> str:
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


def _typo_available(lang: Language, text: str) -> bool:
    return bool(lang.pack.keyboard) and bool(_typo_positions(lang, text, 2))


# registry ----------------------------------------------------------------------------------------


def _always(lang: Language, text: str) -> bool:
    return True


def _fixed(*names: tuple[str, int]) -> Callable[[Language, int], tuple[tuple[str, int], ...]]:
    def params(lang: Language, site_max: int) -> tuple[tuple[str, int], ...]:
        return tuple((n, site_max if hi < 0 else hi) for n, hi in names)

    return params


def _choice_of(section: str) -> Callable[[Language, int], tuple[tuple[str, int], ...]]:
    def params(lang: Language, site_max: int) -> tuple[tuple[str, int], ...]:
        value = getattr(lang.pack, section)
        width = value.widest if hasattr(value, "widest") else len(value)
        return (("choice", max(0, width - 1)),)

    return params


def _synonym_params(lang: Language, site_max: int) -> tuple[tuple[str, int], ...]:
    widest = max((len(v) for v in lang.synonyms.values()), default=1)
    return (("site", site_max), ("alt", max(0, widest - 1)))


def _typo_params(lang: Language, site_max: int) -> tuple[tuple[str, int], ...]:
    widest = max((len(v) for v in lang.pack.keyboard.values()), default=1)
    return (("kind", 3), ("site", site_max), ("key", max(0, widest - 1)))


_SITE = -1  # placeholder for "the site bound of this text"

#: All transforms, simplest first. Shrinking moves towards lower indices.
TRANSFORMS: tuple[Transform, ...] = (
    Transform(
        "whitespace",
        _fixed(("kind", 3), ("site", _SITE)),
        _whitespace,
        _always,
        "trailing/leading space, a doubled space, a space before the end mark "
        "(zh: between characters)",
    ),
    Transform(
        "punctuation",
        _fixed(("kind", 3), ("site", _SITE)),
        _punctuation,
        _always,
        "drop or add the end mark, repeat ! or ?, drop a comma",
    ),
    Transform(
        "width",
        _fixed(("site", _SITE)),
        _width,
        lambda lang, text: bool(lang.widths) and any(c in lang.widths for c in text),
        "full-width <-> half-width punctuation (zh)",
    ),
    Transform(
        "casing",
        _fixed(("kind", 3)),
        _casing,
        _has_cased,
        "first letter lower/upper, all lower, ALL UPPER",
    ),
    Transform(
        "contraction",
        _fixed(("site", _SITE)),
        _contraction,
        _regex_available("contraction_re"),
        "I am <-> I'm, do not <-> don't ...",
    ),
    Transform(
        "greeting",
        _choice_of("greetings"),
        _greeting,
        lambda lang, text: bool(lang.pack.greetings),
        "prepend a greeting",
    ),
    Transform(
        "closing",
        _choice_of("closings"),
        _closing,
        lambda lang, text: bool(lang.pack.closings),
        "append a closing (thanks)",
    ),
    Transform(
        "politeness",
        _choice_of("politeness"),
        _frame("politeness"),
        _frame_available("politeness"),
        "please / kindly / 请 / 麻烦您",
    ),
    Transform(
        "particle",
        _choice_of("particles"),
        _particle,
        _particle_available,
        "sentence-final particle (zh 吧/呢/啊)",
    ),
    Transform(
        "filler",
        _choice_of("fillers"),
        _frame("fillers"),
        _frame_available("fillers"),
        "um, / so, / 那个，",
    ),
    Transform(
        "hedge",
        _choice_of("hedges"),
        _frame("hedges"),
        _frame_available("hedges"),
        "if possible / 如果可以的话",
    ),
    Transform(
        "urgency",
        _choice_of("urgency"),
        _frame("urgency"),
        _frame_available("urgency"),
        "register: hurried or urgent (... asap / Urgent: ... / 急)",
    ),
    Transform(
        "casual",
        _choice_of("casual"),
        _frame("casual"),
        _frame_available("casual"),
        "register: casual (hey, ... / ... thx)",
    ),
    Transform(
        "formal",
        _choice_of("formal"),
        _frame("formal"),
        _frame_available("formal"),
        "register: formal (I would be grateful if you could ...)",
    ),
    Transform(
        "synonym",
        _synonym_params,
        _synonym,
        lambda lang, text: bool(_synonym_sites(lang, text)),
        "phrase substitution from the pack's synonyms",
    ),
    Transform(
        "indirect_request",
        _choice_of("indirect_requests"),
        _frame("indirect_requests"),
        _frame_available("indirect_requests"),
        "Could you ...? / I was wondering if you could ... / 能不能…？",
    ),
    Transform(
        "direct_request",
        _fixed(),
        _direct_request,
        lambda lang, text: _direct_opener(lang, text) is not None,
        "question -> request: Can you tell me ...? -> Tell me ... / 能不能帮我…？ -> 请帮我…。",
    ),
    Transform(
        "reorder",
        _fixed(("site", _SITE)),
        _reorder,
        _reorder_available,
        "swap two adjacent clauses or sentences",
    ),
    Transform(
        "typo",
        _typo_params,
        _typo,
        _typo_available,
        "one keyboard typo (swap, adjacent key, drop, double) outside protected slots",
    ),
)

#: Names of all transforms, in the order Hypothesis shrinks towards (simplest first).
TRANSFORM_NAMES: tuple[str, ...] = tuple(t.name for t in TRANSFORMS)
BY_NAME: dict[str, Transform] = {t.name: t for t in TRANSFORMS}
