"""Input families that rewrite a whole turn, and the notations a value may be written in.

:func:`apply_family` writes a turn in a family's frame for its role; :func:`notation_forms` and
:func:`notation_variant` write a value as users also write it. Invariants: a frame never names a
value, action or fact; a notation is offered only when it parses back to the same value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from agentprop._spec.bindings import ChannelBinding
from agentprop._spec.grounding import reference_date
from agentprop._util.hanzi import to_traditional
from agentprop.strategies._internal.packs import PhrasePack, resolve_pack

__all__ = [
    "FAMILIES",
    "ROLES",
    "NOTATION_FORMS",
    "action_phrase",
    "apply_family",
    "brings_assent",
    "names_oneself",
    "speaks_for_another",
    "family_frames",
    "channel_allows",
    "channel_allows_form",
    "channel_not_tried",
    "families_for",
    "injection_texts",
    "notation_forms",
    "notation_variant",
    "names_a_request",
    "reference_date",
    "stated_counts",
    "stated_days",
    "stated_figures",
    "turn_role",
    "without_opener",
]

ROLES = ("request", "answer", "confirmation", "refusal")

FAMILIES = (
    "bare_answer",
    "correction",
    "confirmation_wording",
    "refusal_wording",
    "negated_distractor",
    "negated_alternative",
    "stated_fact",
    "authority",
    "several_intents",
    "injected_instruction",
    "emotion",
    "distractor",
    "traditional",
)
"""The families that wrap a turn, in the order a turn's drawn families apply (a pack's family
of another name is not used)."""

BARE = "bare_answer"
"""The answer family that writes just the value(s) asked for ("M14 5TQ")."""
CORRECTION = "correction"
TRADITIONAL = "traditional"
"""The family that writes a Chinese turn in traditional characters (訂單 for 订单), slot values
as they are (:mod:`agentprop._util.hanzi`: one-to-one pairs only)."""
NEGATED_ALTERNATIVE = "negated_alternative"
"""The family that says what the user does NOT want: another intent of the spec, one the path
does not take ("I don't want to cancel my order. ..."); its frames fill ``{alt}``."""
STATED_FACT = "stated_fact"
"""The family in which the user states a status, eligibility, figure, date or count a tool
decides, on its own ("I'm sure it's within the limit") or as the premise of the request ("...
- the one I paid $40 for"); a frame's ``{n}`` is a figure, ``{d}`` a recent day and ``{k}`` a
count no tool output, slot or context holds (:func:`stated_figures`, :func:`stated_days`,
:func:`stated_counts`), ``{st}`` a status a lookup tool returns
(:func:`agentprop._decide.choices.stated_statuses`)."""
FILLED = (NEGATED_ALTERNATIVE, STATED_FACT)
AUTHORITY = "authority"
"""The family in which the user says who they are or whom they write for ("As the account
holder", "On behalf of my husband"); a frame for someone else is not used on a turn in which the
user names themselves (:func:`names_oneself`, :func:`speaks_for_another`)."""
"""Families whose words are the spec's on purpose (an intent it defines, what its tools decide):
the spec-word rule does not apply to them."""
UNDEALT: frozenset[str] = frozenset()
"""Families :func:`apply_family` writes but exploration does not deal (none now: a correction
states the right value last, and the reference agents read what follows a repair,
:func:`agentprop.testing.as_corrected`; a bare answer is applied only where the turn's facts
stay stated, :meth:`agentprop._decide.choices.TurnFacts.keeps`)."""

_END = re.compile(r"[.!?\u3002\uff01\uff1f]+$")


def _pack(lang: str) -> PhrasePack:
    return resolve_pack(lang)


def _starts_with(text: str, words: Sequence[str], cjk: bool) -> bool:
    low = text.strip().lower()
    for w in words:
        w = w.lower()
        if cjk and low.startswith(w):
            return True
        if not cjk and re.match(rf"{re.escape(w)}(?![a-z])", low):
            return True
    return False


def turn_role(text: str, index: int, lang: str) -> str:
    """``request`` for the first turn; a follow-up is a ``confirmation`` or ``refusal`` when it
    opens with one of the pack's confirm / refuse words, a ``question`` when it ends with a
    question mark, else an ``answer``."""
    if index == 0:
        return "request"
    fam = _pack(lang).families
    cjk = _pack(lang).resolved_script == "cjk"
    if _starts_with(text, fam.refuse_words, cjk):
        return "refusal"
    if _starts_with(text, fam.confirm_words, cjk):
        return "confirmation"
    if re.search(r"[?\uff1f]\s*$", text):
        return "question"  # a follow-up question (not an answer): no family frames it yet
    return "answer"


_CJK_CLAUSE = re.compile(r"[\s,.!?;:\uff0c\u3002\uff01\uff1f\u3001\uff1b\uff1a]+")
_CJK_PARTICLES = "的吧啊呀呢哈嘛"


def _assent_count(text: str, words: Sequence[str], cjk: bool) -> int:
    """How often ``text`` says one of ``words``: as a word (Latin script), or as a clause of its
    own (CJK: 好 in "好的，…" but not in 您好 or 银行)."""
    low = text.lower()
    if cjk:
        said = {w.lower() for w in words}
        return sum(
            clause.rstrip(_CJK_PARTICLES) in said for clause in _CJK_CLAUSE.split(low) if clause
        )
    return sum(len(re.findall(rf"(?<![a-z']){re.escape(w.lower())}(?![a-z'])", low)) for w in words)


def brings_assent(before: str, after: str, lang: str) -> bool:
    """Whether ``after`` (a rewrite of ``before``) holds a word of the pack's ``assent_words``
    more often than ``before`` does: a word that reads as a yes when said in reply ("please",
    "sure"). A follow-up question is never rewritten so (the agent asked something; a question
    that also says yes answers it)."""
    pack = _pack(lang)
    words, cjk = pack.families.assent_words, pack.resolved_script == "cjk"
    return bool(words) and _assent_count(after, words, cjk) > _assent_count(before, words, cjk)


def _count(text: str, words: Sequence[str], cjk: bool) -> int:
    low = text.lower()
    if cjk:
        return sum(low.count(w.lower()) for w in words)
    return sum(len(re.findall(rf"(?<![a-z]){re.escape(w.lower())}(?![a-z])", low)) for w in words)


def speaks_for_another(before: str, after: str, lang: str) -> bool:
    """Whether ``after`` (``before`` in a frame) brings in someone else the user writes for: a
    word of the pack's ``others`` ("my husband", 老公) more often than ``before`` holds one."""
    pack = _pack(lang)
    words, cjk = pack.families.others, pack.resolved_script == "cjk"
    return bool(words) and _count(after, words, cjk) > _count(before, words, cjk)


_IDENTITY_SLOT = re.compile(
    r"(^|_)(dob|ssn)($|_)|birth|^(?:(?:patient|customer|user|full|first|last|given|family|"
    r"holder|member|account_holder|client)_?)?name$",
    re.I,
)
"""Slots whose value says who the user is: a name or a date of birth."""


def names_oneself(text: str, slots: Mapping[str, Any], lang: str) -> bool:
    """Whether the user names themselves in ``text``: it writes an identity slot's value (a name,
    a date of birth, :data:`_IDENTITY_SLOT`) or holds one of the pack's ``self_words`` ("my name
    is", 我叫). Such a turn says whose record it is; a frame for someone else would make that
    ambiguous ("On behalf of my husband: ... I'm Maria Lopez, born ...")."""
    for slot, value in slots.items():
        if _IDENTITY_SLOT.search(str(slot)) and str(value) and str(value) in text:
            return True
    pack = _pack(lang)
    return _count(text, pack.families.self_words, pack.resolved_script == "cjk") > 0


def injection_texts() -> tuple[str, ...]:
    """Instructions injected into a free-text tool output field (every pack's, English first)."""
    return tuple(
        dict.fromkeys(t for lang in ("en", "zh") for t in _pack(lang).families.tool_output)
    )


def _with_digit(protect: Sequence[str]) -> list[str]:
    return [v for v in protect if re.search(r"[0-9]", v)]


def action_phrase(intent: str, lang: str) -> str | None:
    """How a user of ``lang`` says the action an intent named ``intent`` asks for
    (``cancel_order`` -> "cancel my order" / "取消订单"), from the pack's ``actions`` (its first
    word) and ``objects`` (the rest); ``None`` when the name is no action the pack knows
    (``billing_question``, ``pii_request``)."""
    fam = _pack(lang).families
    words = re.findall(r"[a-z]+", str(intent).lower())
    if not words or words[0] not in fam.actions:
        return None
    verb, rest = fam.actions[words[0]], " ".join(words[1:])
    if not rest:
        return verb
    obj = fam.objects.get(rest) or fam.objects.get(words[-1])
    if obj is None:
        return None
    return verb + obj if lang == "zh" else f"{verb} {obj}"


_FILL = re.compile(r"\{(alt|n|d|k|st)\}")


def _usable(frames: Sequence[str], fill: Mapping[str, Sequence[str]]) -> list[str]:
    """The frames whose ``{alt}`` / ``{n}`` / ``{d}`` / ``{k}`` / ``{st}`` ``fill`` has a value
    for."""
    return [f for f in frames if all(fill.get(k) for k in _FILL.findall(f))]


def families_for(
    role: str,
    lang: str,
    protect: Sequence[str],
    fill: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """The families that apply to a turn of ``role`` in ``lang`` whose slot values written in
    it are ``protect``: every family of the pack for that role with a frame ``fill`` completes
    (``negated_alternative`` only with another intent to negate, ``fill["alt"]``),
    ``correction`` only when a value holds a digit (one changes), ``bare_answer`` for an
    answer that writes a value, ``traditional`` for every Chinese turn."""
    frames = getattr(_pack(lang).families, role, {}) if role in ROLES else {}
    out = [
        name
        for name, fs in frames.items()
        if _usable(fs, fill or {}) and name in FAMILIES and name not in UNDEALT
    ]
    if role == "answer" and any(protect):
        out.append(BARE)  # a bare answer has no frames: the value(s) alone
    if CORRECTION in out and not _with_digit(protect):
        out.remove(CORRECTION)
    if lang == "zh":
        out.append(TRADITIONAL)  # every turn, questions too: no frame, the characters only
    return out


def _lowered(body: str, lang: str, keep_first: bool) -> str:
    if (
        lang != "zh"
        and body
        and not keep_first
        and not re.match(r"I\b|I'", body)
        and not body[:2].isupper()
    ):
        return body[:1].lower() + body[1:]
    return body


_OPENER_END = re.compile(r"\s*[,.!;:\u2014\uff0c\u3002\uff01\uff1b\uff1a-]+\s*")


def without_opener(text: str, role: str, lang: str) -> str:
    """``text`` (a confirmation or a refusal) without its opening yes / no word and the mark
    after it ("Yes please, go ahead." -> "go ahead.", "不用了，先别取消。" -> "先别取消。"); the
    text as it is when it does not open so (a word that is part of the clause stays: "Don't
    file it" keeps its "Don't")."""
    fam = _pack(lang).families
    if role == "confirmation":
        words = (*fam.confirm_words, *fam.assent_words)
    elif role == "refusal":
        words = (*fam.refuse_words, "no thanks", "no thank you")
    else:
        return text
    core = text.strip()
    if _pack(lang).resolved_script == "cjk":
        m = _OPENER_END.search(core)
        if m is None or m.end() >= len(core):
            return text
        clause = core[: m.start()].rstrip(_CJK_PARTICLES + "了")
        said = {w.lower() for w in words}
        if clause in said or (len(clause) <= 3 and any(clause.startswith(w) for w in said)):
            return core[m.end() :]
        return text
    alternation = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    m = re.match(
        rf"(?:{alternation})(?:\s+(?:please|thanks|thank you))?(?![a-z'])" + _OPENER_END.pattern,
        core,
        re.I,
    )
    return core[m.end() :] if m is not None and m.end() < len(core) else text


def _frame(
    text: str,
    frame: str,
    lang: str,
    keep_first: bool,
    rest: str | None = None,
    keep_end: bool = False,
) -> str:
    core = text.strip()
    m = _END.search(core)
    end = m.group() if m else ""
    body = core[: len(core) - len(end)]
    mark = end or ("\u3002" if lang == "zh" else ".")
    if "{R}" in frame or "{r}" in frame:
        tail = (rest if rest is not None else core).strip()
        tail_end = _END.search(tail)
        tail = tail[: tail_end.start()] if tail_end is not None else tail
        if not tail:  # nothing said after the yes / no: the frame's own words alone
            head = re.split(r"\{[Rr]\}", frame)[0].rstrip(" ,.;:-\u2014\uff0c\u3002\uff1b\uff1a")
            return head + mark
        upper = tail[:1].upper() + tail[1:] if lang != "zh" else tail
        return (
            frame.replace("{R}", upper)
            .replace("{r}", _lowered(tail, lang, False))
            .replace("{p}", mark)
        )
    if keep_end and end == "." and body:
        # the turn ends on a value whose own dot is the end mark ("country: U.S."): the dot
        # stays with the value wherever the frame goes on after the turn
        frame = frame.replace("{S}{p}", "{S}").replace("{s}{p}", "{s}")
        body += end
    return (
        frame.replace("{S}", body)
        .replace("{s}", _lowered(body, lang, keep_first))
        .replace("{p}", mark)
    )


def _mistaken(value: str, k: int) -> str:
    """``value`` with one digit changed (the ``k``-th digit, counted modulo the digits)."""
    sites = [i for i, c in enumerate(value) if c.isdigit()]
    i = sites[k % len(sites)]
    return value[:i] + str((int(value[i]) + 1) % 10) + value[i + 1 :]


def family_frames(family: str, role: str, lang: str) -> int:
    """How many frames ``family`` has for a turn of ``role`` in ``lang`` (0: none, or a family
    with no frames, such as a bare answer)."""
    return len(getattr(_pack(lang).families, role, {}).get(family, ())) if role in ROLES else 0


def apply_family(
    text: str,
    family: str,
    choice: int,
    role: str,
    lang: str,
    protect: Sequence[str],
    fill: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """``text`` (a turn of ``role``) written in ``family``'s ``choice``-th frame (modulo the
    frames ``fill`` completes; a frame's ``{alt}`` / ``{n}`` is the ``choice // frames``-th
    value of ``fill``'s, modulo its values); unchanged when the family does not apply to it."""
    values = [v for v in protect if v and v in text]
    if family == BARE:
        return ", ".join(dict.fromkeys(values)) if role == "answer" and values else text
    if family == TRADITIONAL:
        if lang != "zh":
            return text
        pieces = (
            re.split(
                "(" + "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)) + ")",
                text,
            )
            if values
            else [text]
        )
        return "".join(p if k % 2 else to_traditional(p) for k, p in enumerate(pieces))
    fill = fill or {}
    frames = _usable(
        getattr(_pack(lang).families, role, {}).get(family, ()) if role in ROLES else (), fill
    )
    if not frames:
        return text
    frame: str = frames[choice % len(frames)]
    frame = _FILL.sub(
        lambda m: fill[m.group(1)][choice // len(frames) % len(fill[m.group(1)])], frame
    )
    keep_first = any(text.strip().startswith(v) for v in values)
    if not re.search(r"\{[SsRr]\}", frame):  # the whole turn: the yes or the no alone
        if role not in ("confirmation", "refusal"):
            return text
        return frame.replace("{p}", "\u3002" if lang == "zh" else ".")
    if "{R}" in frame or "{r}" in frame:
        return _frame(text, frame, lang, keep_first, without_opener(text, role, lang))
    if family == CORRECTION:
        digits = _with_digit(values)
        if not digits:
            return text
        value = digits[choice % len(digits)]
        wrong = text.replace(value, _mistaken(value, choice // max(1, len(frames))))
        sep = "" if lang == "zh" else " "
        return _frame(wrong, frame, lang, keep_first) + sep + text.strip()
    keep_end = any(v.endswith(".") and text.strip().endswith(v) for v in values)
    return _frame(text, frame, lang, keep_first, keep_end=keep_end)


# ----------------------------------------------------------------------------- notations

NOTATION_FORMS = (
    "grouped",
    "ungrouped",
    "kilo",
    "fullwidth",
    "date_iso",
    "date_day_month",
    "date_month_day",
    "date_short_month",
    "date_short_month_day",
    "date_slash_dmy",
    "date_slash_mdy",
    "date_zh",
    "date_yearless",
    "date_yearless_month_day",
    "date_yearless_zh",
    "relative",
    "relative_zh",
    "relative_month",
    "relative_month_zh",
    "id_space",
    "id_joined",
    "card_masked",
    "card_masked_full",
    "card_masked_x",
    "country_dotted",
    "country_code3",
    "country_name",
    "country_zh",
    "count_words",
    "count_words_zh",
)
"""How a value is written: numbers, dates (absolute, yearless, relative), ids (``RCP 123`` and
``RCP123`` for ``RCP-123``: users type an id's separator as a space or leave it out; an agent
reads it back), the last digits of a card written masked (``**** 4242``), a country code
written dotted, as a longer code, by name (``U.S.``, ``USA``, ``United States``, ``美国``), and a
small count in words (``six``, ``六``)."""

_AMOUNT = re.compile(r"^(?P<cur>[£$€¥]?)(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?$")
_ID = re.compile(r"^(?P<a>[A-Za-z]{1,5})-(?P<b>\d{2,})$")
_DATE_FORMATS = ("%Y-%m-%d", "%d %B %Y", "%B %d, %Y", "%d %b %Y", "%b %d, %Y", "%B %d %Y")
_ZH_DATE = re.compile(r"^(\d{4})年(\d{1,2})月(\d{1,2})日$")
_FULLWIDTH = str.maketrans(
    "0123456789", "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19"
)


def _parse_date(value: str) -> date | None:
    m = _ZH_DATE.match(value)
    if m:
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return None
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(value, fmt).date()
        except ValueError:
            continue
    return None


def _date_form(d: date, form: str) -> str | None:
    month = d.strftime("%B")
    if form == "date_iso":
        return d.isoformat()
    if form == "date_day_month":
        return f"{d.day} {month} {d.year}"
    if form == "date_month_day":
        return f"{month} {d.day}, {d.year}"
    if form == "date_short_month":
        return f"{d.day} {month[:3]} {d.year}"
    if form == "date_short_month_day":
        return f"{month[:3]} {d.day}, {d.year}"
    if form == "date_slash_dmy":
        return f"{d.day:02d}/{d.month:02d}/{d.year}" if d.day > 12 else None
    if form == "date_slash_mdy":
        return f"{d.month:02d}/{d.day:02d}/{d.year}" if d.day > 12 else None
    if form == "date_zh":
        return f"{d.year}年{d.month}月{d.day}日"
    return None


_QUANTITY_WORDS = re.compile(
    r"amount|total|price|cost|sum|fee|reading|usage|balance|limit|kwh|salary|paid|owed|spend|value"
)


def _is_quantity(value: str, slot: str) -> bool:
    """A number that is a quantity, not an id or a year: written with a currency sign or
    thousands separators, or held by a slot whose name says so (``amount``, ``meter_reading``)."""
    m = _AMOUNT.match(value)
    return m is not None and (
        bool(m.group("cur")) or "," in value or _QUANTITY_WORDS.search(slot.lower()) is not None
    )


_FIGURES = ("40", "45", "60", "85", "35", "70", "600", "1200", "950")
"""Figures a user may claim: small ones and large ones, so a claim falls on either side of
the thresholds a spec decides by (only a claim across one makes an agent that trusts it decide
otherwise than its tools say)."""
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _numbers(value: Any) -> list[float]:
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    return [float(m.replace(",", "")) for m in _NUMBER.findall(str(value)) if m.count(".") < 2]


def _quantity_fields(value: Any, key: str = "") -> bool:
    if isinstance(value, Mapping):
        return any(_quantity_fields(v, str(k)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_quantity_fields(v, key) for v in value)
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and _QUANTITY_WORDS.search(key.lower()) is not None
    )


_CURRENCIES = {
    "USD": ("$", "dollars", "美元"),
    "GBP": ("£", "pounds", "英镑"),
    "EUR": ("€", "euros", "欧元"),
    "CNY": ("¥", "yuan", "元"),
}
_SIGNS = {sign: code for code, (sign, _, _) in _CURRENCIES.items()}


def _currency(value: Any, key: str = "") -> str | None:
    """The currency a scenario's amounts are in: a field named for it holding an ISO code
    (``currency: USD``), or a sign written in a value (``£2,400``)."""
    if isinstance(value, Mapping):
        found = [_currency(v, str(k)) for k, v in value.items()]
        return next((c for c in found if c), None)
    if isinstance(value, (list, tuple)):
        return next((c for c in map(_currency, value) if c), None)
    text = str(value)
    if "currency" in key.lower() and text.upper() in _CURRENCIES:
        return text.upper()
    return next((code for sign, code in _SIGNS.items() if sign in text), None)


def stated_figures(
    slots: Mapping[str, Any], outputs: Any, context: Mapping[str, Any], lang: str = "en"
) -> tuple[str, ...]:
    """The figures a user of ``lang`` may state (``stated_fact``: "the total is only $40") in a
    scenario whose tools return ``outputs`` (a tool's output holds an amount, a total, a price
    ...): figures no output, slot or context value holds, written as users write an amount
    (``$40``, ``45``, ``60 dollars``, ``$85.00``, ``35 USD``; ``40美元``) in the scenario's
    currency when it has one.
    None when a slot is itself a quantity (the user states the amount the expectation depends
    on: a second figure would contradict it)."""
    if any(_is_quantity(str(v), str(k)) for k, v in slots.items()):
        return ()
    if not _quantity_fields(outputs):
        return ()
    held = {*_numbers(outputs), *_numbers(dict(slots)), *_numbers(dict(context))}
    figures = [f for f in _FIGURES if float(f) not in held]
    code = _currency(outputs) or _currency(dict(slots))
    if code is None:
        return tuple(figures)
    sign, word, zh = _CURRENCIES[code]
    forms = (
        (lambda n: f"{n}{zh}", str)
        if lang == "zh"
        else (
            lambda n: f"{sign}{n}",
            str,
            lambda n: f"{n} {word}",
            lambda n: f"{sign}{n}.00",
            lambda n: f"{n} {code}",
        )
    )
    return tuple(forms[k % len(forms)](f) for k, f in enumerate(figures))


_DAY_FIELD = re.compile(r"(^|_)(date|day|days|at|on|when)($|_)|date|days_", re.I)
_CLAIMED_DAYS = (
    (1, "yesterday", "昨天"),
    (2, "two days ago", "前天"),
    (3, "three days ago", "三天前"),
    (7, "last week", "上周"),
    (5, "five days ago", "五天前"),
)


def _held_days(value: Any, today: date | None, key: str = "") -> tuple[bool, set[int]]:
    """Whether ``value`` (a tool's output) holds a date or a day count, and the day counts it
    holds (a day count's value; a date's distance from ``today``)."""
    if isinstance(value, Mapping):
        found = [_held_days(v, today, str(k)) for k, v in value.items()]
        return any(f for f, _ in found), {d for _, ds in found for d in ds}
    if isinstance(value, (list, tuple)):
        found = [_held_days(v, today, key) for v in value]
        return any(f for f, _ in found), {d for _, ds in found for d in ds}
    if not _DAY_FIELD.search(key):
        return False, set()
    if isinstance(value, int) and not isinstance(value, bool) and "day" in key.lower():
        return True, {value}
    d = _parse_date(str(value)[:10]) if isinstance(value, (str, date)) else None
    if d is None:
        return False, set()
    return True, ({(today - d).days} if today is not None else set())


def stated_days(
    slots: Mapping[str, Any], outputs: Any, context: Mapping[str, Any], lang: str = "en"
) -> tuple[str, ...]:
    """When a user of ``lang`` may say a thing happened (``stated_fact``: "This was only
    yesterday."), in a scenario whose tools return a date or a day count (an order's
    ``created_at``, ``days_since_created``): recent days no such output holds (a date's distance
    from the context's ``today``), so the claim is the user's, the tools decide. None when a
    slot states a date (the user states the date the expectation depends on)."""
    if any(_parse_date(str(v)) is not None for v in slots.values()):
        return ()
    has, held = _held_days(outputs, reference_date(context))
    if not has:
        return ()
    return tuple(zh if lang == "zh" else en for n, en, zh in _CLAIMED_DAYS if n not in held)


_PLURAL = re.compile(r"^[a-z]{3,}s$")


def _lists(value: Any, key: str = "") -> list[tuple[str, int]]:
    if isinstance(value, Mapping):
        return [x for k, v in value.items() for x in _lists(v, str(k))]
    if isinstance(value, (list, tuple)):
        own = (
            [(key, len(value))]
            if value and all(isinstance(v, Mapping) and _quantity_fields(v) for v in value)
            else []
        )
        return own + [x for v in value for x in _lists(v, key)]
    return []


def stated_counts(
    slots: Mapping[str, Any], outputs: Any, context: Mapping[str, Any], lang: str = "en"
) -> tuple[str, ...]:
    """How many of a thing a user of ``lang`` may say there are (``stated_fact``: "It's only
    3 items."), in a scenario whose tools return a list of priced records named by a plural
    noun (``items`` each with an ``amount``): counts the list does not have, said with its noun
    (``3 items``; ``3个``). None when a slot states a count."""
    if any(
        re.fullmatch(r"\d{1,2}", str(v).strip()) and not _is_quantity(str(v), str(k))
        for k, v in slots.items()
    ):
        return ()
    held = {*_numbers(outputs), *_numbers(dict(slots)), *_numbers(dict(context))}
    out: list[str] = []
    for key, n in _lists(outputs):
        if not _PLURAL.match(key):
            continue
        for k in (3, 4, 5):
            if k != n and float(k) not in held:
                out.append(f"{k}个" if lang == "zh" else f"{k} {key}")
    return tuple(dict.fromkeys(out))


_NO_INTENT = frozenset({"unknown", "unclear", "other", "none", "ambiguous", "vague", "unsure"})
"""Values of an utterance variable that name no request (``intent: unknown``): a side question
beside such a turn would be its only request, so none is added."""


def names_a_request(requested: Mapping[str, Any]) -> bool:
    """Whether a first turn whose utterance variables take ``requested`` asks for something:
    not when one is ``unknown`` (or ``unclear``, ``other`` ...), where a question added beside
    it would be all the turn asks."""
    return not any(str(v).lower() in _NO_INTENT for v in requested.values())


_PERIOD_SLOT = re.compile(r"year|period|month|date|day|when", re.I)
_MONTH_YEAR = re.compile(r"^([A-Za-z]+) (\d{4})$")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _relative_month(d: date, today: date, zh: bool) -> str | None:
    """``d`` by its day of this month or last month (``the 20th of last month``, ``上个月20号``),
    when it is not after ``today``."""
    if d > today:
        return None
    back = (today.year - d.year) * 12 + today.month - d.month
    if back == 0:
        return f"{d.day}号" if zh else f"the {_ordinal(d.day)} of this month"
    if back == 1:
        return f"上个月{d.day}号" if zh else f"the {_ordinal(d.day)} of last month"
    return None


def _relative(value: str, slot: str, today: date, zh: bool) -> str | None:
    """``value`` said relative to ``today``: a day within a week of it, this or last month, this
    or last year (a bare year or month only in a slot named for a period: 4242 is no year)."""
    d = _parse_date(value)
    if d is not None:
        n = (d - today).days
        en = {0: "today", -1: "yesterday", 1: "tomorrow", -7: "a week ago", -14: "two weeks ago"}
        cn = {0: "今天", -1: "昨天", 1: "明天", -2: "前天", 2: "后天", -7: "一周前", -14: "两周前"}
        if zh:
            return cn.get(n) or (
                f"{-n}天前" if -31 <= n < 0 else f"{n}天后" if 0 < n <= 31 else None
            )
        return en.get(n) or (
            f"{-n} days ago" if -31 <= n < 0 else f"in {n} days" if 0 < n <= 31 else None
        )
    if not _PERIOD_SLOT.search(slot):
        return None
    if re.fullmatch(r"\d{4}", value):
        years = {0: ("this year", "今年"), -1: ("last year", "去年")}.get(int(value) - today.year)
        return years[1 if zh else 0] if years else None
    m = _MONTH_YEAR.match(value)
    if m is not None:
        try:
            month = datetime.strptime(m.group(1)[:3], "%b").month
        except ValueError:
            return None
        back = (today.year - int(m.group(2))) * 12 + today.month - month
        months = {0: ("this month", "这个月"), 1: ("last month", "上个月")}.get(back)
        return months[1 if zh else 0] if months else None
    return None


def _yearless(d: date, form: str, today: date) -> str | None:
    """``d`` without its year, when it is the most recent such date not after ``today`` and
    within half a year of it (the one way a yearless date of a past event reads)."""
    if not 0 <= (today - d).days < 183:
        return None
    if form == "date_yearless":
        return f"{d.day} {d.strftime('%B')}"
    if form == "date_yearless_month_day":
        return f"{d.strftime('%B')} {d.day}"
    return f"{d.month}月{d.day}日"


_EN_COUNT = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()
_ZH_COUNT = "零一两三四五六七八九十"
_COUNT_SLOT = re.compile(
    r"month|week|day|year|night|hour|count|quantity|qty|number_of|num_|guests|people|persons|"
    r"seats|tickets|items|instal|term|duration|passengers|adults|children|rooms|copies",
    re.I,
)


def _count_words(value: str, slot: str, zh: bool) -> str | None:
    """A count of 2 to 20 (a slot named for one: ``plan_months``, ``nights``) in words."""
    if not re.fullmatch(r"\d{1,2}", value) or not _COUNT_SLOT.search(slot):
        return None
    if _QUANTITY_WORDS.search(slot.lower()) or re.search(r"id|code|last|digit|pin", slot, re.I):
        return None
    n = int(value)
    if not 2 <= n <= 20:
        return None
    if not zh:
        return _EN_COUNT[n]
    if n <= 10:
        return _ZH_COUNT[n]
    return "二十" if n == 20 else "十" + ("二" if n == 12 else _ZH_COUNT[n - 10])


_CARD_SLOT = re.compile(
    r"last.?4|last.?four|ending|last_digits|(?:^|_)card(?:_?(?:number|num|no|digits))?$", re.I
)
"""A slot holding a card's or account's last four digits (``card_last4``, ``card``)."""
_NOT_CARD_DIGITS = re.compile(r"exp|pin|cvv|cvc|code|year|month|zip|postal", re.I)
"""Four digits of a card that are not its last four (an expiry, a PIN): never masked."""


def _card(value: str, slot: str, form: str) -> str | None:
    """The last four digits of a card or account written as users copy them from a receipt or
    an app: masked (``**** 4242``, ``**** **** **** 4242``, ``XXXX-XXXX-XXXX-4242``)."""
    if (
        not re.fullmatch(r"\d{4}", value)
        or not _CARD_SLOT.search(slot)
        or _NOT_CARD_DIGITS.search(slot)
    ):
        return None
    if form == "card_masked":
        return f"**** {value}"
    if form == "card_masked_full":
        return f"**** **** **** {value}"
    return f"XXXX-XXXX-XXXX-{value}"


_COUNTRIES: dict[str, tuple[str | None, str | None, str, str]] = {
    # code: (dotted, longer code, name, Chinese name); only the forms users write
    "US": ("U.S.", "USA", "United States", "美国"),
    "UK": ("U.K.", None, "United Kingdom", "英国"),
    "GB": ("U.K.", "UK", "United Kingdom", "英国"),
    "DE": (None, None, "Germany", "德国"),
    "FR": (None, None, "France", "法国"),
    "CN": (None, "PRC", "China", "中国"),
    "JP": (None, None, "Japan", "日本"),
    "CA": (None, None, "Canada", "加拿大"),
    "AU": (None, None, "Australia", "澳大利亚"),
    "IN": (None, None, "India", "印度"),
    "IE": (None, None, "Ireland", "爱尔兰"),
    "ES": (None, None, "Spain", "西班牙"),
    "IT": (None, None, "Italy", "意大利"),
    "NL": (None, None, "the Netherlands", "荷兰"),
    "SG": (None, None, "Singapore", "新加坡"),
}
_COUNTRY_FORMS = ("country_dotted", "country_code3", "country_name", "country_zh")


def _country(value: str, slot: str, form: str) -> str | None:
    """A country code (in a slot named for a country) written as users also write it."""
    if not re.search(r"country|nation", slot, re.I) or value.upper() != value:
        return None
    names = _COUNTRIES.get(value)
    return names[_COUNTRY_FORMS.index(form)] if names is not None else None


def notation_variant(
    value: str, form: str, slot: str = "", today: date | None = None
) -> str | None:
    """``value`` (of ``slot``) written in notation ``form``, or ``None`` when the form does not
    apply to it or does not change it. Every variant reads back as the same number, date or
    id; thousands separators and ``k`` only for a quantity (never an id or a year); a relative
    date (``yesterday``, ``last year``) only against a reference date ``today`` the scenario
    fixes (:func:`reference_date`)."""
    out: str | None = None
    d = _parse_date(value)
    if form in ("relative", "relative_zh"):
        out = _relative(value, slot, today, form == "relative_zh") if today is not None else None
    elif form in ("relative_month", "relative_month_zh"):
        out = (
            _relative_month(d, today, form == "relative_month_zh")
            if d is not None and today is not None
            else None
        )
    elif form.startswith("date_yearless"):
        out = _yearless(d, form, today) if d is not None and today is not None else None
    elif form.startswith("card_"):
        out = _card(value, slot, form)
    elif form.startswith("country_"):
        out = _country(value, slot, form)
    elif form in ("count_words", "count_words_zh"):
        out = _count_words(value, slot, form == "count_words_zh")
    elif form.startswith("date_"):
        out = _date_form(d, form) if d is not None else None
    elif form in ("id_space", "id_joined"):
        m = _ID.match(value)
        if m is not None:
            out = f"{m.group('a')}{' ' if form == 'id_space' else ''}{m.group('b')}"
    elif form == "fullwidth":
        out = (
            value.translate(_FULLWIDTH)
            if re.search(r"\d", value) and d is None and _ID.match(value) is None
            else None
        )
    else:
        m = _AMOUNT.match(value)
        if m is not None and _is_quantity(value, slot):
            digits = m.group("int").replace(",", "")
            n = int(digits)
            cur, frac = m.group("cur"), m.group("frac") or ""
            if form == "grouped" and n >= 1000:
                out = f"{cur}{n:,}{frac}"
            elif form == "ungrouped":
                out = f"{cur}{digits}{frac}"
            elif form == "kilo" and n >= 1000 and n % 100 == 0 and not frac:
                k = n / 1000
                out = f"{cur}{k:g}k"
    return out if out is not None and out != value else None


UNDEALT_NOTATIONS: frozenset[str] = frozenset()
"""Notations :func:`notation_variant` writes but exploration does not deal (none). The oracle's
grounding reads ``2.4k`` as 2400, counts in words, every date written here
(:func:`agentprop._judge.derive.grounded_dates`) and a period said relative to the bindings'
reference date (:func:`reference_date`; ``last year``, 上个月: its year and month numbers,
:func:`agentprop._judge.derive.relative_periods`). Without a reference date no relative form is
written, and none is read."""


def notation_forms(value: str, slot: str = "", today: date | None = None) -> tuple[str, ...]:
    """The notations exploration may write ``value`` of ``slot`` in (see
    :func:`notation_variant`; not the :data:`UNDEALT_NOTATIONS`)."""
    return tuple(
        f
        for f in NOTATION_FORMS
        if f not in UNDEALT_NOTATIONS and notation_variant(value, f, slot, today) is not None
    )


# ----------------------------------------------------------------------------- the channel

_DATE_FORMS = tuple(f for f in NOTATION_FORMS if f.startswith("date_") or f.startswith("relative"))
_NUMBER_FORMS = (
    "grouped",
    "ungrouped",
    "kilo",
    "fullwidth",
    "count_words",
    "count_words_zh",
    "card_masked",
    "card_masked_full",
    "card_masked_x",
)
_PLACE_FORMS = ("country_dotted", "country_code3", "country_name", "country_zh")
_ID_SEP_FORMS = ("id_space", "id_joined")
_CASE_FORMS = ("lower", "upper", "capitalized")
_SLIP_FORMS = ("swap", "drop", "double")
_ID_VALUE = re.compile(r"(?=.*[A-Za-z])(?=.*\d)")


def channel_allows_form(channel: ChannelBinding, value: str, form: str) -> bool:
    """Whether ``channel`` lets a user write ``value`` in entity form ``form`` (a notation, a
    letter case, a slip; :class:`agentprop._decide.choices.EntityChoice`)."""
    if form in _DATE_FORMS:
        return channel.dates == "any" or (channel.dates == "iso" and form == "date_iso")
    if form in _NUMBER_FORMS:
        return channel.numbers == "any"
    if form in _CASE_FORMS and _ID_VALUE.match(value):
        return channel.ids in ("any", "any_case")
    if form in _ID_SEP_FORMS:
        return channel.ids == "any"
    if form in _PLACE_FORMS:
        return channel.places == "any"
    if form in _SLIP_FORMS:
        return channel.typos
    return True


def channel_allows(channel: ChannelBinding, family: str) -> bool:
    """Whether ``channel`` lets exploration deal ``family`` (a wrapping family or a transform)."""
    off = {
        "correction": not channel.corrections,
        "typo": not channel.typos,
        "codeswitch": not channel.code_switching,
    }
    off[TRADITIONAL] = channel.chinese_script == "simplified"
    return not off.get(family, False)


def channel_not_tried(channel: ChannelBinding) -> list[tuple[str, str]]:
    """``(what, because)`` for each family ``channel`` switches off, for the report
    (``("date notations other than ISO, relative dates", "channel: dates iso")``)."""
    out: list[tuple[str, str]] = []
    if channel.dates == "iso":
        out.append(("date notations other than ISO, relative dates", "channel: dates iso"))
    elif channel.dates == "as_written":
        out.append(("date notations, relative dates", "channel: dates as_written"))
    if channel.numbers == "as_written":
        out.append(
            (
                "number notations (2,400 / 2400 / 2.4k / full-width digits / six / **** 4242)",
                "channel: numbers as_written",
            )
        )
    if channel.ids == "as_written":
        out.append(("letter case and separators of ids", "channel: ids as_written"))
    elif channel.ids == "any_case":
        out.append(("separators of ids (RCP 123, RCP123)", "channel: ids any_case"))
    if channel.places == "as_written":
        out.append(
            ("country names and codes (U.S. / USA / United States)", "channel: places as_written")
        )
    if not channel.corrections:
        out.append(("corrections", "channel: corrections false"))
    if not channel.typos:
        out.append(("typos and slips in values", "channel: typos false"))
    if not channel.code_switching:
        out.append(("code-switching", "channel: code_switching false"))
    if channel.chinese_script == "simplified":
        out.append(("traditional characters", "channel: chinese_script simplified"))
    return out
