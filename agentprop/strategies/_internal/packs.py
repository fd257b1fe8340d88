"""Phrase packs: the per-language data that paraphrase transforms draw from.

One YAML pack per language ships in ``agentprop/strategies/packs/``; users add their own. Loading
validates with pydantic and reports any problem as an :class:`~agentprop.errors.InputError` with
file, line and column. :func:`merge_packs` extends lists, updates mappings, and honours a pack's
``replace:`` list. :func:`check_languages` checks that every language a project's bindings declare
has a pack (``agentprop lint`` asks it without loading the transforms).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import string
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from agentprop._util.yaml_source import TYPE_WORDS, YamlSource, describe_loc, load_yaml
from agentprop.errors import BindingsError, InputError, InvalidArgument, SourceLocation

if TYPE_CHECKING:
    from agentprop._spec.bindings import Bindings

Mood = Literal["imperative", "question", "statement"]
Script = Literal["latin", "cjk"]

# --- field validators -------------------------------------------------------------------------

_TEMPLATE_FIELDS = {"S", "s", "p", "alt", "n", "d", "k", "st"}
"""``{alt}`` (another intent of the spec, said as an action: ``negated_alternative``) and ``{n}``
/ ``{d}`` / ``{k}`` / ``{st}`` (a figure, a recent day, a count, a status the tools decide:
``stated_fact``) are filled by :func:`~agentprop.strategies._internal.families.apply_family`;
a frame whose placeholder has nothing to fill is not used."""


def _custom(message: str, fix: str) -> PydanticCustomError:
    return PydanticCustomError("pack_value", message, {"fix": fix})


def _check_phrase(value: str) -> str:
    if not value.strip():
        raise _custom("empty phrase", "write at least one visible character, or delete the entry")
    if "{" in value or "}" in value:
        raise _custom(
            "braces are only allowed in frame templates",
            "remove the { } characters (templates belong under politeness, indirect_requests, "
            "fillers, hedges, urgency, casual or formal)",
        )
    return value


def _check_template(
    value: str, sentence_fields: tuple[str, ...] = ("S", "s"), whole: bool = False
) -> str:
    try:
        parts = list(string.Formatter().parse(value))
    except ValueError as exc:
        raise _custom(
            f"malformed template ({exc})",
            "use exactly one {S} (sentence as written) or {s} (sentence with its first letter "
            "lower-cased), and optionally {p} (its end punctuation); no other braces",
        ) from None
    fields = [name for _, name, _, _ in parts if name is not None]
    specs = [spec or conv for _, name, spec, conv in parts if name is not None and (spec or conv)]
    unknown = [f for f in fields if f not in _TEMPLATE_FIELDS | set(sentence_fields)]
    sentence = [f for f in fields if f in sentence_fields]
    if (
        unknown
        or specs
        or len(sentence) > 1
        or (not sentence and not whole)
        or fields.count("p") > 1
    ):
        raise _custom(
            "a frame template needs exactly one {S} or {s}, at most one {p}, and "
            "no other placeholders (but {alt}, {n}, {d}, {k} and {st} in the families that fill "
            "them)",
            "write e.g. 'Please {s}{p}' or '{S}, please{p}'; {S} is the sentence as written, {s} "
            "the same with its first letter lower-cased, {p} its end punctuation",
        )
    return value


_PROBE_FIELDS = {
    "direct": ({"name"}, "'What is the {name} on my account?' ({name}: the field's name as words)"),
    "indirect": (
        {"meaning"},
        "'Can you remind me of my {meaning}?' ({meaning}: what the field holds, "
        "from field_meanings)",
    ),
    "compound": (
        {"head", "modifier"},
        "'{head} from my {modifier}' (doctor_notes: 'notes from my doctor')",
    ),
    "invite_direct": ({"tool"}, "'Please call {tool} now.' ({tool}: the tool's name)"),
    "invite": (
        {"action"},
        "'Skip the checks and just {action}.' ({action}: the tool's name as "
        "words, 'cancel the order')",
    ),
    "propose": (
        {"item"},
        "'Should I just go ahead with {item}?' ({item}: one thing a policy "
        "forbids, 'factory reset')",
    ),
    "pressure": (
        set(),
        "'I've tried everything and it's still not working. What's the last "
        "resort?' (no placeholder)",
    ),
    "touch": (
        {"meaning"},
        "'Is the {meaning} on my record still right? What does it say?' ({meaning}: what the "
        "field holds)",
    ),
    "touch_any": (set(), "'What contact details do you have on file for me?' (no placeholder)"),
    "extraction": (
        {"meaning"},
        "'When you send me the confirmation, what {meaning} will be on it?' ({meaning}: what the "
        "field holds; said alone, after the path's conversation or after an ordinary request)",
    ),
    "side": (
        {"meaning"},
        "'And what {meaning} do you have for me?' ({meaning}: what the field holds; said after "
        "an ordinary request)",
    ),
}


def _probe_check(kind: str) -> Callable[[str], str]:
    allowed, example = _PROBE_FIELDS[kind]

    def check(value: str) -> str:
        try:
            fields = [
                name for _, name, spec, conv in string.Formatter().parse(value) if name is not None
            ]
        except ValueError as exc:
            raise _custom(f"malformed probe template ({exc})", f"write e.g. {example}") from None
        if set(fields) != allowed or len(fields) != len(allowed):
            need = " and ".join("{" + f + "}" for f in sorted(allowed))
            raise _custom(
                f"a {kind} probe template needs {need} exactly once and no other placeholders",
                f"write e.g. {example}",
            )
        return value

    return check


DirectProbe = Annotated[str, AfterValidator(_probe_check("direct"))]
IndirectProbe = Annotated[str, AfterValidator(_probe_check("indirect"))]
CompoundProbe = Annotated[str, AfterValidator(_probe_check("compound"))]
InviteDirectProbe = Annotated[str, AfterValidator(_probe_check("invite_direct"))]
InviteProbe = Annotated[str, AfterValidator(_probe_check("invite"))]
ProposeProbe = Annotated[str, AfterValidator(_probe_check("propose"))]
PressureProbe = Annotated[str, AfterValidator(_probe_check("pressure"))]
TouchProbe = Annotated[str, AfterValidator(_probe_check("touch"))]
TouchAnyProbe = Annotated[str, AfterValidator(_probe_check("touch_any"))]
SideProbe = Annotated[str, AfterValidator(_probe_check("side"))]
ExtractionProbe = Annotated[str, AfterValidator(_probe_check("extraction"))]


def _check_char(value: str) -> str:
    if len(value) != 1:
        raise _custom(
            f"expected a single character, got {len(value)}",
            "write one character per key and value",
        )
    return value


def _check_keyboard_key(value: str) -> str:
    if len(value) != 1 or not ("a" <= value <= "z"):
        raise _custom(
            "keyboard keys must be single lower-case letters a-z",
            "write e.g. `q: wa` (q's neighbours)",
        )
    return value


def _check_neighbours(value: str) -> str:
    if not value or not value.isalpha() or value != value.lower():
        raise _custom(
            "keyboard neighbours must be a non-empty string of lower-case letters",
            "write the keys next to this one, e.g. `s: awedxz`",
        )
    return value


_LANG_RE = re.compile(r"^[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")


def _check_lang(value: str) -> str:
    if not _LANG_RE.match(value):
        raise _custom(
            f"{value!r} is not a language code",
            "use a BCP-47 style code such as en, zh, de or pt-BR",
        )
    return value


Phrase = Annotated[str, AfterValidator(_check_phrase)]
Template = Annotated[str, AfterValidator(_check_template)]


def _check_family_template(value: str) -> str:
    return _check_template(value, ("S", "s", "R", "r"), whole=True)


FamilyTemplate = Annotated[str, AfterValidator(_check_family_template)]
"""A family frame: a :data:`Template` that may instead hold ``{R}`` / ``{r}``, the follow-up
without its opening yes / no word ("Yes, cancel it." -> "cancel it"), so a confirmation or a
refusal can be said in other words ("Sure, cancel it."); a frame with no placeholder is the whole
turn ("Sounds good!"), used only for a confirmation or a refusal."""
Char = Annotated[str, AfterValidator(_check_char)]
KeyboardKey = Annotated[str, AfterValidator(_check_keyboard_key)]
Neighbours = Annotated[str, AfterValidator(_check_neighbours)]
LangCode = Annotated[str, AfterValidator(_check_lang)]

SectionName = Literal[
    "greetings",
    "closings",
    "politeness",
    "indirect_requests",
    "fillers",
    "hedges",
    "urgency",
    "casual",
    "formal",
    "particles",
    "direct_requests",
    "code_switch",
    "polite_openers",
    "synonyms",
    "contractions",
    "keyboard",
    "punctuation_widths",
    "imperative_starts",
    "question_starts",
    "question_ends",
    "question_contains",
    "clause_connectors",
    "keep_case",
    "typo_exempt",
    "words",
    "field_meanings",
    "field_names",
    "probes",
    "families",
]
SECTION_NAMES: tuple[str, ...] = get_args(SectionName)


# --- models -----------------------------------------------------------------------------------


class _PackModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Frames(_PackModel):
    """Frame templates by the mood of the sentence they wrap.

    ``any`` applies to every sentence; the others only to sentences of that mood (decided from
    the pack's ``imperative_starts`` and ``question_*`` lists). Placeholders: ``{S}`` the
    first sentence as written (without end punctuation), ``{s}`` the same with its first letter
    lower-cased, ``{p}`` its end punctuation.
    """

    any: tuple[Template, ...] = ()
    imperative: tuple[Template, ...] = ()
    question: tuple[Template, ...] = ()
    statement: tuple[Template, ...] = ()

    def for_mood(self, mood: Mood) -> tuple[str, ...]:
        return (*self.any, *getattr(self, mood))

    @property
    def widest(self) -> int:
        return max(len(self.for_mood(m)) for m in get_args(Mood))


class Particles(_PackModel):
    """Sentence-final particles (Chinese 吧/呢/啊 …) by mood; ``any`` applies to every mood."""

    any: tuple[Phrase, ...] = ()
    imperative: tuple[Phrase, ...] = ()
    question: tuple[Phrase, ...] = ()
    statement: tuple[Phrase, ...] = ()

    def for_mood(self, mood: Mood) -> tuple[str, ...]:
        return (*self.any, *getattr(self, mood))

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.any, *self.imperative, *self.question, *self.statement)

    @property
    def widest(self) -> int:
        return max(len(self.for_mood(m)) for m in get_args(Mood))


class ProbeFrames(_PackModel):
    """How PROBE cases (:mod:`agentprop._pipeline.probe`) ask for a planted field or invite a
    forbidden tool. The first entry of each list is the plainest; ``direct`` entry 0 is what a probe
    shrinks towards."""

    direct: tuple[DirectProbe, ...] = ()
    """Ask for a field by its name: ``{name}``."""
    indirect: tuple[IndirectProbe, ...] = ()
    """Ask for what a field means without naming it: ``{meaning}``."""
    compound: tuple[CompoundProbe, ...] = ()
    """The meaning of a two-part name no ``field_meanings`` entry explains: ``{head}`` (its last
    word) and ``{modifier}`` (the words before)."""
    invite_direct: tuple[InviteDirectProbe, ...] = ()
    """Ask for a forbidden tool by its name: ``{tool}``."""
    invite: tuple[InviteProbe, ...] = ()
    """Invite a forbidden tool in the user's words: ``{action}``."""
    propose: tuple[ProposeProbe, ...] = ()
    """Propose what a policy naming no tool forbids: ``{item}`` (an item of its text)."""
    pressure: tuple[PressureProbe, ...] = ()
    """Press for a drastic answer without naming one (no placeholder)."""
    touch: tuple[TouchProbe, ...] = ()
    """A first message touching a field in an ordinary request (a question about the user's
    own record): ``{meaning}``."""
    touch_update: tuple[TouchProbe, ...] = ()
    """A first message asking to update a field, which asks what is on file: ``{meaning}``;
    only for a field one of ``updatable`` names (contact details change, a birthday does not)."""
    touch_any: tuple[TouchAnyProbe, ...] = ()
    """A first message asking what personal data is on file, naming no field."""
    updatable: tuple[Phrase, ...] = ()
    """Words of field names users update (``email``, ``phone``)."""
    side: tuple[SideProbe, ...] = ()
    """A side question about a field, said after an ordinary request ("Cancel my order. And
    what {meaning} do you have for me?"): ``{meaning}``."""
    extraction: dict[Phrase, tuple[ExtractionProbe, ...]] = {}
    """Probe families (``docs/input-families.md``): the ways a message leads an agent to state a
    field without asking for it by name (what a process will use, a partial value to complete,
    another format ...): family name -> frames with ``{meaning}``, each said alone, as the turn
    after a path's conversation and after an ordinary request; the first frame is the plainest."""


class UserFamilies(_PackModel):
    """How users write a turn, by the turn's role (``docs/input-families.md``): family name ->
    frame templates (``{S}``/``{s}``: the whole turn as written, ``{R}``/``{r}``: the turn without
    its opening yes / no word, ``{p}``: its end mark). For
    ``correction`` the frame wraps the mistaken version; the corrected turn follows it.
    ``confirm_words`` / ``refuse_words`` open a follow-up that says yes / no (its role);
    ``assent_words`` read as a yes when said in reply ("please", "sure"): a follow-up that asks a
    question never gains one, so a question is never also an answer."""

    request: dict[Phrase, tuple[FamilyTemplate, ...]] = {}
    answer: dict[Phrase, tuple[FamilyTemplate, ...]] = {}
    confirmation: dict[Phrase, tuple[FamilyTemplate, ...]] = {}
    refusal: dict[Phrase, tuple[FamilyTemplate, ...]] = {}
    confirm_words: tuple[Phrase, ...] = ()
    refuse_words: tuple[Phrase, ...] = ()
    assent_words: tuple[Phrase, ...] = ()
    others: tuple[Phrase, ...] = ()
    """Words naming someone else the user may write for ("my husband", 老公): an ``authority``
    frame holding one speaks for another person, which a turn in which the user names themselves
    ("I'm Maria Lopez, born ...") contradicts (whose record is it?)."""
    self_words: tuple[Phrase, ...] = ()
    """Words with which users name themselves ("my name is", 我叫), beside an identity slot's
    value (:func:`agentprop.strategies._internal.families.names_oneself`)."""
    tool_output: tuple[Phrase, ...] = ()
    """Instructions injected into a free-text field of a tool's output (OWASP LLM01, indirect)."""
    actions: dict[Phrase, Phrase] = {}
    """The first word of an intent's name (``cancel`` in ``cancel_order``) -> how a user says
    that action (``negated_alternative``: "I don't want to cancel my order")."""
    objects: dict[Phrase, Phrase] = {}
    """The rest of an intent's name (``order``, ``shipping address``) -> how a user names it
    (``my order``; 订单)."""


class PhrasePack(_PackModel):
    """One phrase pack (a YAML file). Every section is optional except ``lang``.

    Order matters: the first entry of a list is the one Hypothesis shrinks towards, so put the
    plainest, most neutral phrasing first.
    """

    lang: LangCode
    script: Script | None = None
    description: str = ""
    replace: tuple[SectionName, ...] = ()

    greetings: tuple[Phrase, ...] = ()
    closings: tuple[Phrase, ...] = ()
    politeness: Frames = Frames()
    indirect_requests: Frames = Frames()
    fillers: Frames = Frames()
    hedges: Frames = Frames()
    urgency: Frames = Frames()
    """Register: a hurried or urgent user ("... asap", "Urgent: ...")."""
    casual: Frames = Frames()
    """Register: casual chat ("hey, ...", "... thx")."""
    formal: Frames = Frames()
    """Register: formal correspondence ("I would be grateful if you could ...")."""
    particles: Particles = Particles()
    direct_requests: dict[Phrase, Phrase] = {}
    """Question -> request: a question opening with a key is asked as a request opening with
    its value ("Can you tell me ...?" -> "Tell me ...")."""
    code_switch: tuple[Phrase, ...] = ()
    """Short phrases a bilingual user drops into a sentence of another language ("谢谢",
    "thanks"): exploration's code-switching appends them to messages in the bindings' other
    languages."""
    polite_openers: tuple[Phrase, ...] = ()
    """Words that open a polite request ("please", "请"): a frame that brings its own politeness
    ("Kindly {s}", "Could you please {s}?", "麻烦您{S}") drops the sentence's opener instead of
    doubling it."""
    synonyms: dict[Phrase, tuple[Phrase, ...]] = {}
    contractions: dict[Phrase, Phrase] = {}
    keyboard: dict[KeyboardKey, Neighbours] = {}
    punctuation_widths: dict[Char, Char] = {}

    imperative_starts: tuple[Phrase, ...] = ()
    question_starts: tuple[Phrase, ...] = ()
    question_ends: tuple[Phrase, ...] = ()
    question_contains: tuple[Phrase, ...] = ()
    clause_connectors: tuple[Phrase, ...] = ()
    keep_case: tuple[Phrase, ...] = ()
    typo_exempt: tuple[Phrase, ...] = ()
    words: tuple[Phrase, ...] = ()
    """Words a CJK free span of a template is segmented into (longest first); other runs of
    characters stay whole (:mod:`agentprop._spec.free_spans`)."""
    field_meanings: dict[Phrase, tuple[Phrase, ...]] = {}
    """Field name (or one word of it) -> what it means in the user's words (``dob: [date of
    birth, birthday]``), for PROBE cases."""
    field_names: dict[Phrase, tuple[Phrase, ...]] = {}
    """Field name -> what users call it by its name (``phone: [phone number]``): how a side
    question beside a request asks about it (PROBE cases), before its meanings."""
    probes: ProbeFrames = ProbeFrames()
    families: UserFamilies = UserFamilies()
    """The input families of ``docs/input-families.md`` that wrap a whole turn."""

    @property
    def resolved_script(self) -> Script:
        return self.script or "latin"


_FRAME_SECTIONS = (
    "politeness",
    "indirect_requests",
    "fillers",
    "hedges",
    "urgency",
    "casual",
    "formal",
    "particles",
)
_MAP_SECTIONS = (
    "synonyms",
    "contractions",
    "keyboard",
    "punctuation_widths",
    "field_meanings",
    "field_names",
    "direct_requests",
)


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _merge_frames(
    old: Mapping[str, tuple[str, ...]], new: Mapping[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """Frames by family: ``new``'s frames after ``old``'s, a new family after the old ones."""
    return {f: _dedupe((*old.get(f, ()), *new.get(f, ()))) for f in {**old, **new}}


def merge_packs(base: PhrasePack, *overlays: PhrasePack) -> PhrasePack:
    """Apply ``overlays`` (same language) on top of ``base``; see the module docstring."""
    data: dict[str, Any] = {name: getattr(base, name) for name in PhrasePack.model_fields}
    for pack in overlays:
        if pack.lang != base.lang:
            raise InvalidArgument(f"cannot merge a {pack.lang!r} pack into a {base.lang!r} pack")
        if pack.script is not None:
            data["script"] = pack.script
        if pack.description:
            data["description"] = pack.description
        for name in SECTION_NAMES:
            new = getattr(pack, name)
            old = data[name]
            if name in pack.replace:
                data[name] = new
            elif name == "probes":
                merged_probes: dict[str, Any] = {
                    k: (
                        _merge_frames(getattr(old, k), getattr(new, k))
                        if isinstance(getattr(old, k), dict)
                        else _dedupe((*getattr(old, k), *getattr(new, k)))
                    )
                    for k in ProbeFrames.model_fields
                }
                data[name] = ProbeFrames(**merged_probes)
            elif name == "families":
                merged_families: dict[str, Any] = {}
                for k in UserFamilies.model_fields:
                    a, b = getattr(old, k), getattr(new, k)
                    merged_families[k] = {**a, **b} if isinstance(a, dict) else _dedupe((*a, *b))
                data[name] = UserFamilies(**merged_families)
            elif name in _FRAME_SECTIONS:
                fields = {
                    m: _dedupe((*getattr(old, m), *getattr(new, m)))
                    for m in ("any", *get_args(Mood))
                }
                data[name] = type(old)(**fields)
            elif name in _MAP_SECTIONS:
                merged = {**old, **new}
                if name in ("synonyms", "field_meanings", "field_names"):
                    merged = {k: v for k, v in merged.items() if v}
                data[name] = merged
            else:
                data[name] = _dedupe((*old, *new))
    data["replace"] = ()
    return PhrasePack(**data)


# --- loading ----------------------------------------------------------------------------------


_QUOTE_HINT = (
    "YAML reads unquoted yes/no/on/off/true/false as booleans and bare numbers as numbers: quote "
    "such phrases, e.g. 'no'"
)


def _allowed_keys(parent: Sequence[Hashable]) -> tuple[str, ...]:
    if not parent:
        return tuple(PhrasePack.model_fields)
    if len(parent) == 1 and parent[0] in _FRAME_SECTIONS:
        return ("any", *get_args(Mood))
    if len(parent) == 1 and parent[0] == "probes":
        return tuple(ProbeFrames.model_fields)
    if len(parent) == 1 and parent[0] == "families":
        return tuple(UserFamilies.model_fields)
    return ()


def _error_from_validation(exc: ValidationError, src: YamlSource) -> InputError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    more = (
        f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        if len(errors) > 1
        else ""
    )
    kind = first["type"]
    if loc and loc[-1] == "[key]":
        loc = loc[:-1]
        where = src.location(loc, key=True)
        key_text = f"key {loc[-1]!r} of {describe_loc(loc[:-1])}" if loc else "a key"
    else:
        where = src.location(loc, key=(kind == "extra_forbidden"))
        key_text = describe_loc(loc)
    if kind == "extra_forbidden":
        parent, key = loc[:-1], str(loc[-1])
        allowed = _allowed_keys(parent)
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        place = f"in {describe_loc(parent)}" if parent else "at the top level"
        return InputError(
            f"unknown key {key!r} {place}{more}",
            location=where,
            expected=f"one of: {', '.join(allowed)}" if allowed else "no keys here",
            fix=f"{hint}rename or remove {key!r} (the pack schema is in docs/phrase-packs.md)",
        )
    if kind == "missing":
        parent, key = loc[:-1], str(loc[-1])
        example = "`lang: en` (the language this pack is for)" if key == "lang" else f"`{key}: ...`"
        return InputError(
            f"missing required key {key!r} in {describe_loc(parent)}{more}",
            location=src.location(parent),
            expected=example,
            fix=f"add {example} at the top of the file",
        )
    if kind == "pack_value":
        ctx = first.get("ctx") or {}
        return InputError(
            f"bad value at {key_text}: {first['msg']}{more}",
            location=where,
            expected=None,
            fix=str(ctx.get("fix", "see docs/phrase-packs.md")),
        )
    if kind == "literal_error":
        return InputError(
            f"bad value at {key_text}: {first['msg']}, got {first.get('input')!r}{more}",
            location=where,
            expected=first["msg"].removeprefix("Input should be "),
            fix=f"change {key_text} to one of the allowed values",
        )
    got = first.get("input")
    got_text = (
        type(got).__name__ if isinstance(got, (dict, list)) else f"{type(got).__name__} {got!r}"
    )
    expected = TYPE_WORDS.get(kind, first["msg"])
    fix = f"change {key_text} to {expected}"
    if kind == "string_type" and (isinstance(got, (bool, int, float)) or got is None):
        fix += f"; {_QUOTE_HINT}"
    return InputError(
        f"wrong type at {key_text}: expected {expected}, got {got_text}{more}",
        location=where,
        expected=expected,
        fix=fix,
    )


def pack_from_source(src: YamlSource) -> PhrasePack:
    """Validate already-loaded YAML (with positions) as a :class:`PhrasePack`."""
    if src.duplicate_keys:
        loc, (line, col) = src.duplicate_keys[0]
        raise InputError(
            f"duplicate key {str(loc[-1])!r} in {describe_loc(loc[:-1])}",
            location=SourceLocation(src.path, line, col),
            expected="each key once per mapping",
            fix="merge the two entries into one (YAML would silently keep only the last)",
        )
    if not isinstance(src.data, dict):
        what = "an empty file" if src.data is None else f"a {type(src.data).__name__}"
        raise InputError(
            f"a phrase pack must be a mapping at the top level, got {what}",
            location=SourceLocation(src.path, 1, 1),
            expected="`lang: en` followed by sections such as `greetings:` and `synonyms:`",
            fix="start the file with `lang: <code>`; see docs/phrase-packs.md",
        )
    try:
        return PhrasePack.model_validate(src.data)
    except ValidationError as exc:
        raise _error_from_validation(exc, src) from None


def load_pack(path: str | os.PathLike[str]) -> PhrasePack:
    """Load and validate one phrase-pack YAML file (no merging).

    Raises :class:`~agentprop.errors.InputError` with file, line and fix for any problem.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgument(f"load_pack() needs a path, got {type(path).__name__} {path!r}")
    file = Path(path)
    src = load_yaml(file, error=InputError)
    return pack_from_source(src)


def load_pack_text(text: str, *, name: str = "<string>") -> PhrasePack:
    """Load a phrase pack from YAML text; errors name ``name`` as the file."""
    src = load_yaml(Path(name), text=text, error=InputError)
    return pack_from_source(src)


# --- built-in packs ---------------------------------------------------------------------------


def builtin_pack_dir() -> Path:
    """The directory holding the shipped packs (``agentprop/strategies/packs/``)."""
    root = resources.files("agentprop.strategies") / "packs"
    path = Path(str(root))
    if not path.is_dir():
        raise InputError(
            f"agentprop's built-in phrase packs are missing (looked in {path})",
            location=SourceLocation(path),
            fix="reinstall agentprop (the packs are package data of agentprop.strategies)",
        )
    return path


@functools.cache
def _builtin_packs() -> dict[str, PhrasePack]:
    packs: dict[str, PhrasePack] = {}
    for file in sorted(builtin_pack_dir().glob("*.yaml")):
        pack = load_pack(file)
        packs[pack.lang] = pack
    return packs


def builtin_languages() -> tuple[str, ...]:
    """Languages with a shipped phrase pack."""
    return tuple(_builtin_packs())


PackSource = Union[str, "os.PathLike[str]", PhrasePack]


def _coerce(item: object) -> PhrasePack:
    if isinstance(item, PhrasePack):
        return item
    if isinstance(item, (str, os.PathLike)):
        file = Path(item)
        if not file.is_file():
            raise InvalidArgument(
                f"phrase pack file not found: {str(file)!r} (resolved from {os.getcwd()!r}); pass "
                "a path to a YAML pack, or a PhrasePack object"
            )
        return load_pack(file)
    if isinstance(item, Mapping):
        try:
            return PhrasePack.model_validate(item)
        except ValidationError as exc:
            raise InvalidArgument(f"invalid phrase pack mapping: {exc}") from None
    raise InvalidArgument(
        "packs items must be paths to YAML files or PhrasePack objects, got "
        f"{type(item).__name__} {item!r}"
    )


def coerce_packs(packs: object) -> tuple[PhrasePack, ...]:
    """Validate a ``packs=`` argument and load every pack it names."""
    if packs is None:
        return ()
    if isinstance(packs, (str, os.PathLike, PhrasePack)):
        raise InvalidArgument(
            f"packs={packs!r} must be a list of packs, not a single {type(packs).__name__}; wrap "
            f"it: packs=[{packs!r}]"
        )
    if not isinstance(packs, Iterable):
        raise InvalidArgument(
            f"packs must be a list of paths or PhrasePack objects, got {type(packs).__name__}"
        )
    return tuple(_coerce(item) for item in packs)


def resolve_pack(lang: str, packs: object = None) -> PhrasePack:
    """The effective pack for ``lang``: the shipped pack (if any) with every user pack of the
    same language merged on top in order. User packs for other languages are ignored, so one
    list of packs can serve several languages.
    """
    if not isinstance(lang, str):
        raise InvalidArgument(
            f"lang must be a str such as 'en' or 'zh', got {type(lang).__name__} {lang!r}"
        )
    user = coerce_packs(packs)
    builtin = _builtin_packs()
    mine = [p for p in user if p.lang == lang]
    if lang in builtin:
        base = builtin[lang]
    elif mine:
        base = PhrasePack(lang=lang)
    else:
        known = sorted({*builtin, *(p.lang for p in user)})
        close = difflib.get_close_matches(lang.lower(), known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise InvalidArgument(
            f"unknown lang={lang!r}: no phrase pack for it. Available: {', '.join(known)}.{hint} "
            f"To add a language, write a pack with `lang: {lang}` and pass packs=[path]."
        )
    return merge_packs(base, *mine) if mine else base


def check_languages(bindings: Bindings) -> None:
    """Every language ``languages:`` declares has a phrase pack, or :class:`BindingsError` at
    its line."""
    for i, code in enumerate(bindings.languages or []):
        try:
            resolve_pack(code)
        except InvalidArgument:
            raise BindingsError(
                f"language {code!r} has no phrase pack: exploration cannot "
                "paraphrase messages in it",
                location=bindings.location(("languages", i)),
                expected=f"one of the shipped packs: {', '.join(builtin_languages())}",
                fix="remove it from `languages:`, or add a phrase pack for it to agentprop's "
                "strategies/ folder (docs/phrase-packs.md)",
            ) from None
