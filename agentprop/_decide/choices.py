"""The generator's choices: how one input of a scenario was written.

A scenario fixes *what* the user asks; its :class:`Choices` fix *how* (per turn: template
variant, optional segments, re-typed slot values, paraphrase steps; plus free world fields).
Every choice is valid by construction and never alters a fact the expectations depend on, so
shrinking choices always yields an instance of the same scenario. :class:`ChoiceSpace` draws
choices from a seeded random source and renders them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from agentprop._agents.project import Project
from agentprop._decide.written import PERSONAS, InputWriter, WrittenChoice, WrittenTurn
from agentprop._scenario.build import (
    Scenario,
    ScenarioTurn,
    TemplateSource,
    WorldSpec,
    build_scenario,
    optional_segments,
    render_marked,
)
from agentprop._scenario.piecemeal import continue_stop, is_piecemeal, piecemeal_pairs
from agentprop._scenario.trace import Trace
from agentprop._spec.bindings import Bindings, language_of, parse_field_path, schema_at
from agentprop._spec.free_spans import FREE_SPAN, Drop, has_free, strip_free
from agentprop._spec.model import Spec
from agentprop._spec.orders import NOT_TRIED, broken, in_order, item_at
from agentprop._spec.paths import TreePath, enumerate_loop_paths, enumerate_paths
from agentprop._spec.relations import format_field_path, resolve, world_orders, world_relations
from agentprop._util.bulk import BulkModel
from agentprop._util.hanzi import to_simplified
from agentprop._util.typos import within_one_edit
from agentprop.errors import AgentPropError, InvalidArgument
from agentprop.strategies._internal.families import (
    AUTHORITY,
    FAMILIES,
    FILLED,
    NOTATION_FORMS,
    action_phrase,
    apply_family,
    brings_assent,
    channel_allows,
    channel_allows_form,
    families_for,
    family_frames,
    injection_texts,
    names_oneself,
    notation_forms,
    notation_variant,
    reference_date,
    speaks_for_another,
    stated_counts,
    stated_days,
    stated_figures,
    turn_role,
)
from agentprop.strategies._internal.free_spans import render as render_free
from agentprop.strategies._internal.packs import resolve_pack
from agentprop.strategies._internal.paraphrase import apply_transforms, build_plan

__all__ = [
    "CASE_FORMS",
    "INJECTED",
    "is_injected",
    "CODESWITCH",
    "ChoiceSpace",
    "ChoiceUnit",
    "Choices",
    "DroppedValue",
    "EntityChoice",
    "SPELLING_FORMS",
    "TurnChoice",
    "WorldChoice",
    "TurnFacts",
    "choice_units",
    "entity_forms",
    "entity_variant",
    "fact_tokens",
    "first_turn_facts",
    "free_world_fields",
    "world_fields",
    "keep_only",
    "is_person_name",
    "language_of",
    "turn_facts",
]

StepChoice = tuple[str, tuple[tuple[str, int], ...]]
"""One paraphrase step: a transform name and its integer parameters."""

CODESWITCH = "codeswitch"
"""The step that drops a phrase of another declared language into a message."""

INJECTED = "tool_output:injected_instruction"
"""The family of an instruction injected into a free-text tool output (OWASP LLM01, indirect)."""
INJECTION_SHARE = 1 / 2
"""The share of a path's inputs whose tool output carries an injected instruction (when one of
its tools returns free text): six of a path's twelve explored inputs, so that a path meets most
of its language's forms (what an obeyed instruction breaks differs by path and by form)."""

FAMILY_STEPS = frozenset(FAMILIES)
"""Steps that write a whole turn in an input family (docs/input-families.md)."""
FAMILY_ORDER = FAMILIES
_ASKING = ("indirect_request", "direct_request")
REQUEST_FORMS = (*_ASKING, "politeness", "urgency", "formal", "hedge", "particle")
"""The transforms that write a turn as a request (please / asap / could you ... ? / if possible /
a softening particle): an answer to the agent's question is a statement of what was asked, and
framed as a request it no longer plainly says it ("请发生在 ...", "可以发生在 ...吗？", "Nov 20,
2026 asap"), so they stay off answers, as the asking ones stay off a yes or a no."""
WORDING = ("confirmation_wording", "refusal_wording")
"""The families that say a follow-up's yes or no in other words: applied before the turn's
other steps (:meth:`ChoiceSpace._say_in_other_words`)."""

CASE_FORMS = ("lower", "upper", "capitalized")
ID_SEP_FORMS = ("id_space", "id_joined")
"""An id's separator typed as a space or left out (``RCP 123``, ``RCP123``)."""
SPELLING_FORMS = ("swap", "drop", "double")


class EntityChoice(BulkModel):
    """A slot value written as a user types it: ``form`` is a letter case (``lower``,
    ``upper``, ``capitalized``) or one slip (``swap``, ``drop``, ``double`` a letter at the
    ``site``-th place it can go, counted modulo the places)."""

    model_config = ConfigDict(frozen=True)

    slot: str
    form: str
    site: int = 0

    @property
    def family(self) -> str:
        return (
            "case"
            if self.form in CASE_FORMS
            else "notation"
            if self.form in NOTATION_FORMS
            else "spelling"
        )

    def describe(self) -> str:
        return f"{self.slot} {self.form}" + (
            f"(site={self.site})" if self.form in SPELLING_FORMS else ""
        )


_ADVERB_FORMS = ("relative", "relative_month")
"""Notations that say a date as an adverb ("yesterday", "11 days ago"): the preposition the
template puts before the value ("on {date}") is left out."""
_ZH_ONLY_FORMS = (
    "fullwidth",
    "date_zh",
    "date_yearless_zh",
    "relative_zh",
    "relative_month_zh",
    "country_zh",
    "count_words_zh",
)
"""Notations only a Chinese turn writes a value in."""
_NOT_ZH_FORMS = (
    "relative",
    "relative_month",
    "date_yearless",
    "date_yearless_month_day",
    "country_code3",
    "country_dotted",
    "country_name",
    "count_words",
)
"""Notations a Chinese turn does not write a value in (it says 去年, not "last year")."""


@functools.lru_cache(maxsize=4096)
def value_forms(slot: str, value: str, lang: str, today: date | None = None) -> tuple[str, ...]:
    """The notations (:data:`NOTATION_FORMS`) ``slot``'s ``value`` may be written in, in a turn
    written in ``lang``; relative ones against the scenario's reference date ``today``."""
    forms = notation_forms(value, slot, today)
    return tuple(
        f for f in forms if (f not in _NOT_ZH_FORMS if lang == "zh" else f not in _ZH_ONLY_FORMS)
    )


class WorldChoice(BulkModel):
    """A tool-output field the path does not fix, set to another schema-valid value."""

    model_config = ConfigDict(frozen=True)

    tool: str
    field: str
    value: Any

    def describe(self) -> str:
        return f"{self.tool}.{self.field}={json.dumps(self.value)}"


class TurnChoice(BulkModel):
    """How one user turn is written: optional segments put in, slot values re-typed, then the
    paraphrase steps applied in order."""

    model_config = ConfigDict(frozen=True)

    template: int = 0
    """The template variant this turn is written in (0: the scenario's own; see
    :class:`ChoiceSpace`)."""
    steps: tuple[StepChoice, ...] = ()
    segments: tuple[int, ...] = ()
    """Indices of the template's slot-less optional segments put in (see
    :func:`agentprop._scenario.build.optional_segments`)."""
    entities: tuple[EntityChoice, ...] = ()
    written: WrittenChoice | None = None
    """The turn as a model writes it (an input model's family, or the simulated user's persona;
    :mod:`agentprop._decide.written`): it replaces the turn's text, when the space has a writer
    and the model wrote a text that passed validation. Left out of the JSON when ``None``."""

    @model_serializer(mode="wrap")
    def _omit_unwritten(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Choices of runs without an input model serialise as they did before it existed."""
        out: dict[str, Any] = handler(self)
        if self.written is None:
            out.pop("written", None)
        return out

    @property
    def plain(self) -> bool:
        return not (self.template or self.steps or self.segments or self.entities or self.written)


class Choices(BulkModel):
    """How a scenario's conversation is written: per turn its template variant and what is
    varied, and the free world fields set to other values. ``Choices(template=k, ...)`` (and
    choices saved before templates were per turn) give every turn template ``k``."""

    model_config = ConfigDict(frozen=True)

    lang: str = "en"
    """The language of the scenario's first message (each turn is paraphrased in the pack of
    the language it is written in)."""
    turns: tuple[TurnChoice, ...] = ()
    world: tuple[WorldChoice, ...] = ()
    probe: int = 0
    """PROBE cases (:mod:`agentprop._pipeline.probe`): the phrasing of the probe turn; 0 asks by the
    field's or tool's name (direct), ``k >= 1`` the k-th indirect phrasing."""
    dropped: tuple[Drop, ...] = ()
    """Words left out of the templates' free spans: ``(turn, span, clause, word)`` (what token
    shrinking removed, :mod:`agentprop._spec.free_spans`)."""

    @model_validator(mode="before")
    @classmethod
    def _one_template_for_every_turn(cls, data: Any) -> Any:
        """``template=k`` (the form of choices saved before templates were per turn): every
        turn without a template of its own is written in variant ``k``."""
        if not isinstance(data, dict) or "template" not in data:
            return data
        data = dict(data)
        k = data.pop("template")
        if k:
            turns = []
            for t in data.get("turns") or ():
                turn = TurnChoice.model_validate(t) if not isinstance(t, TurnChoice) else t
                turns.append(turn if turn.template else turn.model_copy(update={"template": k}))
            data["turns"] = tuple(turns)
        return data

    @property
    def template(self) -> int:
        """The highest template variant a turn is written in (0: every turn in the
        scenario's own words)."""
        return max((t.template for t in self.turns), default=0)

    @property
    def plain(self) -> bool:
        """No choice differs from the scenario's own messages and world."""
        return (
            all(t.plain for t in self.turns)
            and not self.world
            and self.probe == 0
            and not self.dropped
        )

    def families(self) -> list[str]:
        """What this input varies: ``template``, ``world``, ``probe:indirect`` and ``turnN:FAMILY``
        (a transform's name, ``codeswitch``, ``segment``, ``case`` or ``spelling``)."""
        out = ["template"] if self.template else []
        for i, t in enumerate(self.turns):
            out += [f"turn{i + 1}:segment" for _ in t.segments]
            out += [f"turn{i + 1}:{e.family}" for e in t.entities]
            out += [f"turn{i + 1}:{name}" for name, _ in t.steps]
            out += [f"turn{i + 1}:{t.written.family_key}"] if t.written is not None else []
        out += [INJECTED if is_injected(w.value) else "world" for w in self.world]
        if self.probe:
            out.append("probe:indirect")
        return list(dict.fromkeys(out))

    def describe(self) -> str:
        parts = []
        for i, t in enumerate(self.turns):
            bits = [f"template {t.template}"] if t.template else []
            bits += [f"segment {k}" for k in t.segments] + [e.describe() for e in t.entities]
            bits += [
                f"{name}({', '.join(f'{k}={v}' for k, v in params)})" for name, params in t.steps
            ]
            bits += [t.written.describe()] if t.written is not None else []
            if bits:
                parts.append(f"turn {i + 1}: " + " + ".join(bits))
        if self.world:
            parts.append("world: " + ", ".join(w.describe() for w in self.world))
        if self.probe:
            parts.append(f"probe phrasing {self.probe} (indirect)")
        for turn in sorted({d[0] for d in self.dropped}):
            n = sum(d[0] == turn for d in self.dropped)
            parts.append(f"turn {turn + 1}: {n} free word(s) left out")
        return "; ".join(parts) or "the scenario's own messages"


# ----------------------------------------------------------------------------- slot values

_NAME_WORD = re.compile(r"[A-Za-z]{5,}")


def _spelling_sites(value: str, form: str) -> list[int]:
    """Where one slip can go in ``value``: inside a word of five letters or more (not all
    capitals: an acronym or id), never its first letter."""
    out: list[int] = []
    for m in _NAME_WORD.finditer(value):
        word = m.group()
        if word.isupper():
            continue
        for k in range(1, len(word)):
            if form == "swap" and (k + 1 >= len(word) or word[k].lower() == word[k + 1].lower()):
                continue
            out.append(m.start() + k)
    return out


def entity_variant(
    value: str, form: str, site: int = 0, slot: str = "", today: date | None = None
) -> str | None:
    """``value`` written in ``form`` (see :class:`EntityChoice`), or ``None`` when that form
    does not change it or cannot apply (a relative date: against ``today``)."""
    if form in NOTATION_FORMS:
        return notation_variant(value, form, slot, today)
    if form == "lower":
        out = value.lower()
    elif form == "upper":
        out = value.upper()
    elif form == "capitalized":
        out = value[:1].upper() + value[1:]
    elif form in SPELLING_FORMS:
        sites = _spelling_sites(value, form)
        if not sites:
            return None
        i = sites[site % len(sites)]
        if form == "swap":
            out = value[:i] + value[i + 1] + value[i] + value[i + 2 :]
        elif form == "drop":
            out = value[:i] + value[i + 1 :]
        else:
            out = value[:i] + value[i] + value[i:]
    else:
        raise InvalidArgument(
            f"unknown entity form {form!r}; choose from "
            f"{', '.join(CASE_FORMS + SPELLING_FORMS + NOTATION_FORMS)}"
        )
    return out if out != value else None


def is_person_name(slot: str) -> bool:
    """A slot that holds a person's name (``name``, ``patient_name``, ``full_name`` ...)."""
    low = slot.lower()
    return low == "name" or low.endswith("_name") or low in ("firstname", "lastname", "fullname")


_PROPER = re.compile(r"(?<![A-Za-z])[A-Z][a-z]")


def entity_forms(slot: str, value: str) -> tuple[str, ...]:
    """The ways :class:`EntityChoice` may re-type ``slot``'s ``value`` without changing what
    it names. A person's name is an identity fact kept exactly as the bindings write it (a
    typo names someone else, and free text tells a name by its capitals); a value written with
    a capital (a proper name: a title, a town) may change letter case but takes no slip; a
    common word (``engineer``) takes both; ids and numbers take only a letter case."""
    if is_person_name(slot):
        return ()
    forms = [f for f in CASE_FORMS if entity_variant(value, f) is not None]
    if not _PROPER.search(value):
        forms += [f for f in SPELLING_FORMS if _spelling_sites(value, f)]
    return tuple(forms)


def _value_pattern(value: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")


def _replace_value(text: str, value: str, variant: str) -> str:
    return _value_pattern(value).sub(lambda _: variant, text)


# ----------------------------------------------------------------------------- world fields

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class FreeField:
    """A tool-output field no binding fixes and the spec never names, and the other
    schema-valid values it may take; or a free-text field (named by the spec or not) and the
    instructions that may be injected into it (:attr:`injection`)."""

    tool: str
    field: str
    value: Any
    candidates: tuple[Any, ...]
    tried: tuple[Any, ...] | None = None
    """What each candidate is set to when drawn (``None``: itself): a value that would break
    an order of the world stands for one in order, or for :data:`NOT_TRIED` (nothing is set).
    Drawing picks among ``candidates`` either way, so the draws that follow are the same."""

    def value_of(self, j: int) -> Any:
        return self.candidates[j] if self.tried is None else self.tried[j]

    @property
    def injection(self) -> bool:
        """Whether the candidates are the field's text with an injected instruction (OWASP
        LLM01, indirect), dealt apart from other values (:meth:`ChoiceSpace.draw`)."""
        return bool(self.candidates) and all(is_injected(c) for c in self.candidates)


@dataclass(frozen=True)
class DroppedValue:
    """A value a free field is never set to, and why: it would contradict a related field of
    the world (:mod:`agentprop._spec.relations`) or break an order of one of its lists
    (:mod:`agentprop._spec.orders`)."""

    tool: str
    field: str
    value: Any
    because: str

    def describe(self) -> str:
        return f"{self.tool}.{self.field}={json.dumps(self.value)} ({self.because})"


def _walk(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        out: list[tuple[str, Any]] = []
        for k, v in value.items():
            if "." in str(k) or "[" in str(k):
                continue  # a path a binding set (orders[0].days_since_created): fixed
            out += _walk(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _walk(v, f"{prefix}[{i}]")]
    return [(prefix, value)]


def _related(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _set_leaves(value: Any, prefix: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The paths an effect's ``set`` value gives, down to its scalars (an empty list or
    mapping is a leaf of its own)."""
    if isinstance(value, Mapping) and value:
        return [p for k, v in value.items() for p in _set_leaves(v, (*prefix, str(k)))]
    if isinstance(value, list) and value:
        return [p for i, v in enumerate(value) for p in _set_leaves(v, (*prefix, i))]
    return [prefix]


def _fixed_paths(
    bindings: Bindings,
) -> tuple[set[tuple[str, tuple[Any, ...]]], set[tuple[str, tuple[Any, ...]]]]:
    """``(fixed, set_by_effects)``: the fields a binding reads (with all around and inside
    them), and the paths a ``values`` effect writes down to their scalars (with all around
    them, nothing inside: ``option_count: {0: {set: {options: []}}}`` fixes the list, not the
    price of each option another value of the variable leaves in place)."""
    fixed: set[tuple[str, tuple[Any, ...]]] = set()
    written: set[tuple[str, tuple[Any, ...]]] = set()
    for var in bindings.variables.values():
        w = var.world
        if w is None:
            continue
        if w.field is not None:
            fixed.add((w.tool, tuple(parse_field_path(w.field))))
        for effect in (w.values or {}).values():
            for f, v in effect.set.items():
                written.update(
                    (w.tool, leaf) for leaf in _set_leaves(v, tuple(parse_field_path(f)))
                )
    for tool, fields in bindings.pii.items():
        fixed.update((tool, tuple(parse_field_path(f))) for f in fields)
    return fixed, written


def _spec_words(project: Project) -> str:
    spec = project.spec
    text = json.dumps(
        [n.model_dump(mode="json") for n in spec.decision_tree]
        + [p.model_dump(mode="json") for p in spec.policies]
        + list(spec.assumptions)
    )
    return text.lower()


def _named(words: str, name: str) -> bool:
    low = name.lower()
    return any(
        re.search(rf"(?<![a-z0-9_]){re.escape(form)}(?![a-z0-9_])", words)
        for form in {low, low.replace("_", " ")}
    )


def is_injected(value: Any) -> bool:
    """A tool output value that holds an injected instruction (:func:`_other_values`)."""
    return isinstance(value, str) and any(text in value for text in injection_texts())


def _other_values(value: Any, schema: Mapping[str, Any]) -> tuple[Any, ...]:
    """Other values the field's schema allows: other enum members; a flipped boolean; for
    numbers 0, 1, half and double; for ISO dates a day before, a month after, a year before."""
    if "enum" in schema:
        return tuple(v for v in schema["enum"] if v != value)
    kind = schema.get("type")
    if isinstance(value, bool):
        return (not value,) if kind in (None, "boolean") else ()
    if isinstance(value, (int, float)) and kind in (None, "integer", "number"):
        if kind == "integer" or (isinstance(value, int) and kind is None):
            pool: list[Any] = [0, 1, int(value) // 2, int(value) * 2]
        else:
            pool = [0.0, 1.0, round(float(value) / 2, 2), round(float(value) * 2, 2)]
        lo, hi = schema.get("minimum"), schema.get("maximum")
        pool = [v for v in pool if (lo is None or v >= lo) and (hi is None or v <= hi)]
        return tuple(dict.fromkeys(v for v in pool if v != value))
    if (
        isinstance(value, str)
        and kind in (None, "string")
        and not _DATE.match(value)
        and len(value.split()) >= 2
        and not is_injected(value)
    ):
        # free text (a note, a description): an instruction injected into it (OWASP LLM01,
        # indirect), in each of the packs' forms (a note, an "Assistant:" line, a comment, ...)
        return tuple(f"{value} {text}" for text in injection_texts())
    if isinstance(value, str) and _DATE.match(value) and kind in (None, "string"):
        try:
            d = date.fromisoformat(value)
        except ValueError:
            return ()
        return tuple((d + timedelta(days=n)).isoformat() for n in (-1, 30, -365))
    return ()


def free_world_fields(project: Project, scenario: Scenario) -> list[FreeField]:
    """The free world fields of ``scenario`` (:func:`world_fields`)."""
    return world_fields(project, scenario)[0]


def world_fields(
    project: Project, scenario: Scenario
) -> tuple[list[FreeField], list[DroppedValue]]:
    """``(free, dropped)``: the tool-output fields of ``scenario``'s world that exploration
    may set to other values: scalar fields of the bindings' world that no variable binding
    sets (nor a field around or inside them), that hold no PII, slot value or context value,
    whose tool has no handler, and whose name the spec's decision tree, policies and
    assumptions never use (a field the spec reads, like a receipt's ``total``, decides the
    path even when no binding sets it), with the values that keep the world consistent; and
    the values left out because they would not. A free-text field the spec names (a policy's
    "notes") is kept for injected instructions only: the text appended leaves its own in place."""
    b = project.bindings
    fixed, written = _fixed_paths(b)
    words = _spec_words(project)
    slot_values = {str(v) for v in b.slots.values() if str(v)}
    context = {str(v) for v in b.context.values()}
    called = {t for turn in scenario.turns for t in turn.required_tools}
    out: list[FreeField] = []
    for tool, fields in scenario.world.overrides.items():
        if tool in b.handlers or tool not in project.spec.tools_by_name:
            continue
        schema_root = project.spec.tool(tool).output_schema
        for path, value in _walk(fields):
            try:
                parts = tuple(parse_field_path(path))
            except ValueError:  # a key no field path can name (not a schema field): not explored
                continue
            if any(t == tool and _related(parts, p) for t, p in fixed):
                continue
            if any(t == tool and p[: len(parts)] == parts for t, p in written):
                continue  # an effect writes it (or inside it)
            if isinstance(value, str) and (
                value in context or any(s in value for s in slot_values) or "{" in value
            ):
                continue
            name = next((p for p in reversed(parts) if isinstance(p, str)), "")
            if not name:
                continue
            schema = schema_at(schema_root, list(parts))
            if schema is None:
                continue
            candidates = _other_values(value, schema)
            if candidates and all(is_injected(c) for c in candidates):
                if isinstance(parts[-1], int) or tool not in called:
                    # an item of a list of strings is a member of a set (a category, a tag),
                    # not text anyone writes into; a tool the path never calls shows nothing
                    continue
            elif _named(words, name):
                # a field the spec reads decides the path; text appended to a free-text one
                # (its note, its description) leaves what it says in place: still injected
                continue
            if candidates:
                out.append(FreeField(tool, path, value, candidates))
    free, dropped = _consistent(b, scenario, out)
    ordered, unordered = _in_order(project, scenario, free)
    return ordered, dropped + unordered


def _in_order(
    project: Project, scenario: Scenario, fields: list[FreeField]
) -> tuple[list[FreeField], list[DroppedValue]]:
    """``fields`` with each value that would break an order of the world
    (:func:`~agentprop._spec.relations.world_orders`) standing for the nearest value in order, or
    for none (both kept in ``dropped``, the value as drawn never being tried). The candidates
    stay as they are: which one a draw picks, and every draw after it, does not change."""
    orders = world_orders(project.bindings, project.spec)
    if not orders:
        return fields, []
    world = {t: resolve(v) for t, v in scenario.world.overrides.items()}
    out: list[FreeField] = []
    dropped: list[DroppedValue] = []
    for f in fields:
        parts = tuple(parse_field_path(f.field))
        tried = list(f.candidates)
        for o in orders:
            n = len(o.items)
            if (
                o.tool != f.tool
                or len(parts) != n + 1 + len(o.key)
                or parts[:n] != o.items
                or parts[n + 1 :] != o.key
            ):
                continue
            i = parts[n]
            items = item_at(world.get(f.tool, {}), o.items)
            if not isinstance(i, int) or not isinstance(items, list) or not 0 <= i < len(items):
                continue
            values = [item_at(x, o.key) for x in items]
            if broken(values, o.descending) is not None:
                continue  # the path's own world is out of this order: nothing to keep
            for j, c in enumerate(tried):
                if c is NOT_TRIED:
                    continue
                v = in_order(values, i, c, o.descending)
                if v is c:
                    continue
                tried[j] = v
                why = f"it would break the order {o.describe()}"
                why += "; nothing else keeps it" if v is NOT_TRIED else f"; {json.dumps(v)} instead"
                dropped.append(DroppedValue(f.tool, f.field, c, why))
        if tried != list(f.candidates):
            f = dataclasses.replace(f, tried=tuple(tried))
        out.append(f)
    return out, dropped


def _consistent(
    bindings: Bindings, scenario: Scenario, fields: list[FreeField]
) -> tuple[list[FreeField], list[DroppedValue]]:
    """``fields`` with the values that would contradict the world left out (and kept in their
    ``dropped``): a value whose related fields cannot be re-derived (one the path fixes or the
    spec reads, a count, a total set alone), or a date moved across today or past another."""
    relations = world_relations(bindings)
    if not relations.relations and not any(
        isinstance(c, str) and _DATE.match(c) for f in fields for c in f.candidates
    ):
        return fields, []
    world = scenario.world.overrides
    before = set(relations.contradictions(world))
    free = {(f.tool, tuple(parse_field_path(f.field))) for f in fields}
    resolved = {t: resolve(v) for t, v in world.items()}
    out: list[FreeField] = []
    dropped: list[DroppedValue] = []
    for f in fields:
        at = (f.tool, tuple(parse_field_path(f.field)))
        keep: list[Any] = []
        for value in f.candidates:
            varied = copy.deepcopy(world)
            varied.setdefault(f.tool, {})[f.field] = value
            derived = relations.reconcile(varied, {at})
            moved = [
                (t, p)
                for t, fields_ in derived.items()
                for p, v in _leaves_of(resolve(fields_))
                if (t, p) != at and _leaf(resolved.get(t), p) != v
            ]
            fixed = [f"{t}.{format_field_path(p)}" for t, p in moved if (t, p) not in free]
            if fixed:
                why = f"{', '.join(fixed)} follows from it and is not free"
                dropped.append(DroppedValue(f.tool, f.field, value, why))
                continue
            wrong = [c for c in relations.contradictions(derived) if c not in before]
            if wrong:
                dropped.append(DroppedValue(f.tool, f.field, value, wrong[0]))
                continue
            keep.append(value)
        if keep:
            out.append(dataclasses.replace(f, candidates=tuple(keep)))
    return out, dropped


def _leaves_of(
    value: Any, prefix: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, Mapping):
        return [x for k, v in value.items() for x in _leaves_of(v, (*prefix, str(k)))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _leaves_of(v, (*prefix, i))]
    return [(prefix, value)]


_MISSING = object()


def _leaf(value: Any, path: tuple[str | int, ...]) -> Any:
    try:
        for part in path:
            value = value[part]
    except (KeyError, IndexError, TypeError):
        return _MISSING
    return value


# ----------------------------------------------------------------------------- the space

MAX_TYPOS = 1
"""Keyboard slips per turn an explored input may have (one typo is a slip; two in one word is
a different word)."""

MAX_TEMPLATES = 8


def _same_case(a: Scenario, b: Scenario) -> bool:
    """Whether ``b`` asks the same as ``a``: same turns, expectations and world."""
    strip = {"user_message"}
    return a.world == b.world and [t.model_dump(exclude=strip) for t in a.turns] == [
        t.model_dump(exclude=strip) for t in b.turns
    ]


def _protected(scenario: Scenario, text: str) -> list[str]:
    """The scenario's slot values that occur in ``text``: never touched by a transform."""
    values = {str(v) for v in scenario.slots.values() if str(v)}
    return sorted((v for v in values if v in text), key=len, reverse=True)


def _available_steps(
    text: str, lang: str, protect: Sequence[str]
) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    """``(transform, parameter bounds)`` for the transforms that can change ``text``."""
    plan = build_plan(
        text,
        lang=lang,
        packs=None,
        protect=list(protect),
        pool=(),
        max_transforms=4,
        max_typos=MAX_TYPOS,
        transforms=None,
        filter_available=True,
    )
    return [(t.name, b) for t, b in zip(plan.candidates, plan.bounds)]


@dataclass(frozen=True)
class _TurnSpace:
    """What one turn of one template variant can vary."""

    text: str
    lang: str
    source: TemplateSource | None
    segments: int
    entities: tuple[tuple[str, str, tuple[str, ...]], ...]
    """``(slot, value, forms that change it)`` for the slot values the message writes."""
    switch_to: tuple[str, ...]
    """The other declared languages whose pack has phrases to drop in."""
    facts: TurnFacts
    """What the turn states that its expectations depend on (:func:`turn_facts`)."""
    role: str = "request"
    """The turn's role (:func:`agentprop.strategies._internal.families.turn_role`)."""
    families: tuple[str, ...] = ()
    """The input families that wrap this turn (docs/input-families.md)."""


def _code_switch(text: str, host: str, phrase: str) -> str:
    """``phrase`` appended to ``text`` before its end mark, with the host language's comma."""
    core = text.rstrip()
    trail = text[len(core) :]
    m = re.search(r"[.!?\u3002\uff01\uff1f]+$", core)
    end = m.group() if m else ""
    body = core[: len(core) - len(end)]
    sep = "\uff0c" if host == "zh" else ", "
    return f"{body}{sep}{phrase}{end}{trail}"


# ----------------------------------------------------------------------------- facts a turn states

_OPTIONAL_SEGMENT = re.compile(r"\[([^\[\]]*)\]")
_SLOT_NAME = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_LATIN_WORD = re.compile(r"[A-Za-z]+(?:['\u2019][A-Za-z]+)?")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_SPELLINGS = {
    "okay": "ok",
    "k": "ok",
    "yeah": "yes",
    "yep": "yes",
    "yup": "yes",
    "nope": "no",
    "nah": "no",
}
"""Spellings of one answer word: a follow-up's ``OK, do it.`` is said by "okay, so ..." too."""

StepCheck = Callable[[str, Sequence[str]], bool]
"""``keeps(text, step_names)``: whether ``text``, after those steps, still states
the turn's facts."""


def fact_tokens(text: str) -> Counter[str]:
    """The tokens facts are counted in: Latin words (lower case, answer words in one
    spelling) and, in Chinese text, characters (a frame may rewrite the characters next to
    it, 请告诉我 -> 麻烦尽快告诉我, so pairs of characters would read it as a change)."""
    out: Counter[str] = Counter()
    for m in _LATIN_WORD.finditer(text):
        word = m.group().lower().replace("\u2019", "'")
        out[_SPELLINGS.get(word, word)] += 1
    for m in _CJK_RUN.finditer(text):
        out.update(m.group())
    return out


def _template_words(template: str) -> Counter[str]:
    """A template's own tokens: no slot, no free span (words meant to be droppable)."""
    return fact_tokens(
        FREE_SPAN.sub(" ", re.sub(r"\{[A-Za-z_][A-Za-z0-9_]*\}", " ", template))
        .replace("[", " ")
        .replace("]", " ")
    )


def _next_token(text: str, end: int) -> str:
    """What follows position ``end`` of ``text``: the marks and spaces up to the next word,
    exactly, and that word (lower case); the end of the text reads ``""``. A sentence's end
    mark ends it: what follows the mark and a space is another sentence ("US. It's $40." reads
    "US." as "US." alone does), so it reads as the mark alone."""
    ended = _SENTENCE_END.match(text, end)
    if ended is not None:
        return ended.group()
    m = re.match(r"([^A-Za-z0-9\u3400-\u9fff]*)([A-Za-z0-9\u3400-\u9fff]*)", text[end:])
    return (m.group(1) + m.group(2).lower()) if m else ""


_SENTENCE_END = re.compile(r"[.!?]+(?=\s+\S)|[\u3002\uff01\uff1f]+(?=\S)")


def _anchored(text: str, anchor: str) -> Counter[str]:
    """What follows each occurrence of ``anchor`` (a word or a written slot value) in ``text``."""
    found = Counter(_next_token(text, m.end()) for m in _value_pattern(anchor).finditer(text))
    low = anchor.lower()
    if not found and low != anchor:  # a cue word re-cased by a transform is the same cue
        found = Counter(
            _next_token(text, m.end())
            for m in re.finditer(rf"(?<![A-Za-z0-9]){re.escape(low)}(?![A-Za-z0-9])", text.lower())
        )
    return found


_FUNCTION_WORDS = frozenset(
    (
        "about after again also anything been before being could does done each else even every "
        "from have here into just know like make more most much need never only other over please "
        "really same should since some sorry still such than thank thanks that their them then "
        "there these they thing this those through very want what when where which while will with "
        "would your yours"
    ).split()
)
"""Words too common to carry a fact of a spec (a frame adding one adds nothing it must not)."""


@functools.lru_cache(maxsize=64)
def _vocabulary(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in _FUNCTION_WORDS)


def spec_vocabulary(spec: Spec) -> frozenset[str]:
    """The content words (four letters or more) of everything ``spec`` says: its node and
    policy texts, tools, fields, decisions. What the agent must do is decided in these words."""
    return _vocabulary(spec.model_dump_json())


def brings_spec_words(before: str, after: str, vocabulary: frozenset[str]) -> bool:
    """Whether ``after`` adds a Latin word of four letters or more that ``before`` lacks and that
    is, or begins, a word of the spec's ``vocabulary`` ("skip" in a frame, "skipping" in a
    policy): a frame carrying the spec's own words may state what the scenario does not."""
    had = set(re.findall(r"[a-z]{4,}", before.lower()))
    added = {
        w
        for w in re.findall(r"[a-z]{4,}", after.lower())
        if w not in had and w not in _FUNCTION_WORDS
    }
    return any(
        w in vocabulary or any(v.startswith(w) or w.startswith(v) for v in vocabulary)
        for w in added
    )


def template_vocabulary(bindings: Bindings) -> frozenset[str]:
    """The content words (four letters or more) of the bindings' utterance and follow-up
    templates, slots and free spans left out: the words users are written as saying which value
    a turn gives ("moving" for an address change)."""
    text = " ".join(_values_of(bindings))
    return _vocabulary(FREE_SPAN.sub(" ", re.sub(r"\{[A-Za-z_][A-Za-z0-9_]*\}", " ", text)))


def _one_slip(word: str, v: str) -> bool:
    """Whether ``word`` is one slip (a swap, a wrong, dropped or doubled letter) from ``v``, a
    word of five letters or more: what a reader forgiving a slip reads as ``v``."""
    return len(v) >= 5 and abs(len(v) - len(word)) <= 1 and within_one_edit(word, v)


def slips_into_spec_words(before: str, after: str, vocabulary: frozenset[str]) -> bool:
    """Whether a rewrite turns a word into one of the spec's (or the start of one, or one slip
    from one) that no word it replaced was related to: "when you get a chance" with a slip to
    "cance" reads as "cancel" to a spec about cancelling, "at hone" as "phone" to a reader who
    forgives a slip (as the typo family says a reader does), while "orde" for "order" is still
    that word."""
    had = set(re.findall(r"[a-z]{4,}", before.lower()))
    now = set(re.findall(r"[a-z]{4,}", after.lower()))

    def related(word: str) -> set[str]:
        return {
            v
            for v in vocabulary
            if v == word or v.startswith(word) or word.startswith(v) or _one_slip(word, v)
        }

    gone: set[str] = set().union(*(related(w) for w in had - now)) if had - now else set()
    return any(related(w) - gone for w in now - had if w not in _FUNCTION_WORDS)


@dataclass(frozen=True)
class TurnFacts:
    """What one turn states that the scenario's expectations depend on, which a paraphrase
    step may not alter (:meth:`keeps`):

    - ``words``: the tokens of the templates of the turn's value that no other value of its
      variable has (``refill`` for ``intent: refill``, ``keep`` / ``longer`` for ``renew``):
      the words that say *which* value this turn gives. A typo, synonym, contraction or
      casing that changes one is not applied.
    - ``others``: for a follow-up (an answer to the agent's question), the tokens that only
      another answer has (``ok`` in ``OK, do it.``): a frame that adds one ("ok so, ...") to
      another answer is not applied.
    - ``cues``: the word right before each withheld slot (``renew`` in ``Can I renew[
      {title}]?`` without its title): no word may be put where the slot would be ("renew
      please?" reads as a title). Likewise, what follows a slot value that ends in a word
      (the marks and spaces up to the next word, and that word) is kept: such a value has no
      visible end ("Dune asap?" reads as another title, "Maria Lopez,  DOB" as no
      name-and-birth-date pair); an id, number or date ends where its characters end.
    - ``names``: person-name slots (:func:`is_person_name`): a turn that states one is never
      re-cased as a whole (the name keeps its case, and "I'M Maria Lopez, BORN ..." is not
      how anyone writes).
    """

    words: frozenset[str] = frozenset()
    others: frozenset[str] = frozenset()
    cues: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def keeps(self, before: str, values: Sequence[str], names: Sequence[str]) -> StepCheck:
        """The check for steps applied to ``before`` (the turn's text with its segments and
        re-typed values), whose slot values are written as ``values`` and whose person names
        are ``names``."""
        tokens = fact_tokens(before)
        # a value that ends in a word has no visible end (a word put after it reads as part of
        # it); an id, number or date ends where its characters end
        anchors = [
            a for a in (*values, *self.cues) if a and re.search(r"[A-Za-z\u3400-\u9fff]$", a)
        ]
        follows = {a: _anchored(before, a) for a in anchors}
        named = [n for n in names if n and n in before]

        def keeps(after: str, steps: Sequence[str]) -> bool:
            if named and "casing" in steps:
                return False
            after = to_simplified(after)  # 訂單 states what 订单 does (the ``traditional`` family)
            now = fact_tokens(after)
            if any(now[w] < tokens[w] for w in self.words):
                return False
            if any(now[w] > tokens[w] for w in self.others):
                return False
            return all(not follows[a] or _anchored(after, a) == follows[a] for a in anchors)

        return keeps


def _values_of(bindings: Bindings) -> dict[str, tuple[str, bool, list[list[str]], int]]:
    """Each template of an utterance or follow-up variable: ``(variable, is a follow-up,
    the templates of each of the variable's values, the index of the template's value)``."""
    out: dict[str, tuple[str, bool, list[list[str]], int]] = {}
    for name, var in bindings.variables.items():
        table: Mapping[Hashable, list[str] | None] | None = (
            var.utterance
            if var.utterance is not None
            else (var.followup.values if var.followup is not None else None)
        )
        if not table:
            continue
        groups = [list(ts or []) for ts in table.values()]
        for k, ts in enumerate(groups):
            for t in ts:
                out.setdefault(t, (name, var.followup is not None, groups, k))
    return out


def turn_facts(
    bindings: Bindings, source: TemplateSource | None, slots: Mapping[str, Any]
) -> TurnFacts:
    """The facts (:class:`TurnFacts`) of a turn rendered from ``source``."""
    if source is None:
        return TurnFacts()
    names = tuple(s for s in slots if is_person_name(s))
    cues: list[str] = []
    withheld = set(source.withheld)
    for m in _OPTIONAL_SEGMENT.finditer(source.template):
        if any(s in withheld for s in _SLOT_NAME.findall(m.group(1))):
            # the template up to the withheld segment, as rendered: what the user's words end on
            before = _OPTIONAL_SEGMENT.sub(
                lambda g: (
                    "" if any(s in withheld for s in _SLOT_NAME.findall(g.group(1))) else g.group(1)
                ),
                source.template[: m.start()],
            )
            last = re.findall(
                r"\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z]+(?:'[A-Za-z]+)?|[\u3400-\u9fff]",
                FREE_SPAN.sub(" ", before),
            )
            # after a written value: that value's own anchor
            if last and not last[-1].startswith("{"):
                cues.append(last[-1])
    found = _values_of(bindings).get(source.template)
    if found is None:
        return TurnFacts(cues=tuple(cues), names=names)
    _, followup, groups, k = found
    own = Counter[str]()
    for t in groups[k]:
        own.update(_template_words(t))
    rest = Counter[str]()
    for j, ts in enumerate(groups):
        if j != k:
            for t in ts:
                rest.update(_template_words(t))
    words = frozenset(w for w in own if w not in rest)
    others: frozenset[str] = frozenset()
    if followup:  # the words other answers open with ("OK, do it.", "No, ...", "Maybe, ...")
        leads = {
            next(iter(fact_tokens(FREE_SPAN.sub(" ", t))), "")
            for j, ts in enumerate(groups)
            if j != k
            for t in ts
        }
        others = frozenset(w for w in leads if w and w not in own)
    return TurnFacts(words=words, others=others, cues=tuple(cues), names=names)


def first_turn_facts(project: Project, scenario: Scenario) -> StepCheck:
    """The check (:meth:`TurnFacts.keeps`) for rewrites of ``scenario``'s first message made
    elsewhere (INV variants): whether a rewrite, after its named steps, still states the
    turn's facts."""
    space = ChoiceSpace(project, scenario)
    facts = space.turn_spaces[0][0].facts
    text = scenario.messages[0]
    return facts.keeps(
        text,
        _protected(scenario, text),
        [str(scenario.slots[n]) for n in facts.names if n in scenario.slots],
    )


_LOOKUP = re.compile(r"^(get|lookup|look_up|fetch|check|find|read|list|search|query)_", re.I)
_STATUS = re.compile(r"status|state", re.I)


def stated_statuses(spec: Spec) -> tuple[str, ...]:
    """The statuses a user may say a thing has (``stated_fact``: "It says active on my end"):
    the members of every enum a lookup tool (``get_``, ``fetch_``, ``check_`` ...) returns in a
    field named for a status or state (``get_policy.status``: active, lapsed). A claim the tool
    contradicts is the user's: the tool decides, so what the spec expects does not depend on
    it; an action tool's result (``cancel_order.status``) is no fact to claim beforehand."""
    out: list[str] = []

    def walk(schema: Any, key: str) -> None:
        if isinstance(schema, Mapping):
            enum = schema.get("enum")
            if isinstance(enum, list) and _STATUS.search(key):
                out.extend(str(v) for v in enum if isinstance(v, str) and v)
            for k, v in schema.get("properties", {}).items():
                walk(v, str(k))
            if isinstance(schema.get("items"), Mapping):
                walk(schema["items"], key)

    for tool in spec.tools:
        if _LOOKUP.match(tool.name):
            walk(tool.output_schema, "")
    return tuple(dict.fromkeys(out))


def negated_alternatives(bindings: Bindings, scenario: Scenario, lang: str) -> tuple[str, ...]:
    """What a user of ``scenario`` may say they do NOT want (``negated_alternative``): each
    other value of an utterance variable the path assigns, said as an action
    (:func:`action_phrase`) — an intent the spec defines and none of the path's turns takes, so
    what the user asks for, and what the spec expects, is unchanged."""
    taken: dict[str, set[str]] = {}
    for key, value in scenario.assignment.items():
        taken.setdefault(str(key).split("@")[0], set()).add(str(value))
    out: list[str] = []
    for name, var in bindings.variables.items():
        if var.utterance is None or name not in taken:
            continue
        own = {action_phrase(v, lang) for v in taken[name]}
        for value in var.utterance:
            phrase = action_phrase(str(value), lang)
            if str(value) not in taken[name] and phrase is not None and phrase not in own:
                out.append(phrase)
    return tuple(dict.fromkeys(out))


class ChoiceSpace:
    """The inputs one scenario can be written as, and how to render and draw them.

    Template choices are the builder's own (``build_scenario(template_index=k)`` with the
    scenario's assignment and its injected failures), kept only when they build the same case
    (expectations and world): a template variant is an instance of the scenario by
    construction, or it is not offered.
    """

    def __init__(
        self, project: Project, scenario: Scenario, writer: InputWriter | None = None
    ) -> None:
        self.project = project
        self.scenario = scenario
        self.writer = writer
        """Writes model-written turns (``None``: no input model; a written choice renders as the
        template's turn)."""
        self.languages = project.bindings.declared_languages
        self.today = reference_date(project.bindings.context)
        """The date relative dates are said against (``None``: none is written)."""
        self.channel = project.bindings.channel
        """What the input channel guarantees: families it rules out are not drawn."""
        outputs = {**project.bindings.world, **scenario.world.overrides}
        self.fill: dict[str, dict[str, tuple[str, ...]]] = {}
        statuses = stated_statuses(project.spec)
        for lang in dict.fromkeys((*self.languages, "en", "zh")):
            try:
                alt = negated_alternatives(project.bindings, scenario, lang)
            except AgentPropError:
                alt = ()  # a language with no pack: nothing to say
            self.fill[lang] = {
                "alt": alt,
                "n": stated_figures(scenario.slots, outputs, project.bindings.context, lang),
                "d": stated_days(scenario.slots, outputs, project.bindings.context, lang),
                "k": stated_counts(scenario.slots, outputs, project.bindings.context, lang),
                "st": statuses,
            }
        """What the ``negated_alternative`` / ``stated_fact`` frames fill in, per language."""
        self.variants: list[Scenario] = [scenario]
        none: list[TemplateSource | None] = [None] * len(scenario.turns)
        self.sources: list[list[TemplateSource | None]] = [none]
        path = _path_of(project, scenario)
        if path is not None:
            spec, bindings = project.spec, project.bindings
            try:
                own: list[TemplateSource | None] = []
                built = build_scenario(spec, bindings, path, assignment=scenario.assignment)
                extra = [f for f in scenario.world.failures if f not in built.world.failures]
                built = build_scenario(
                    spec,
                    bindings,
                    path,
                    assignment=scenario.assignment,
                    extra_failures=extra or None,
                    sources=own,
                )
                if built.messages == scenario.messages and len(own) == len(scenario.turns):
                    self.sources = [own]
            except AgentPropError:
                extra = []
            seen = {tuple(scenario.messages)}
            for k in range(1, MAX_TEMPLATES):
                sources: list[TemplateSource | None] = []
                try:
                    built = build_scenario(
                        spec,
                        bindings,
                        path,
                        template_index=k,
                        assignment=scenario.assignment,
                        extra_failures=extra or None,
                        sources=sources,
                    )
                except AgentPropError:
                    continue
                built = built.model_copy(update={"id": scenario.id})
                if tuple(built.messages) in seen or not _same_case(scenario, built):
                    continue
                seen.add(tuple(built.messages))
                self.variants.append(built)
                self.sources.append(sources)
        if is_piecemeal(scenario):
            # a stop continued past its question: the stop's and the complete path's own
            # template variants, continued alike (the Chinese request, then a Chinese answer)
            self.variants, self.sources = [scenario], [none]
            for variant in _piecemeal_variants(project, scenario):
                self.variants.append(variant)
                self.sources.append([None] * len(variant.turns))
        self.turn_spaces = [
            [self._turn_space(v, i, src) for i, src in enumerate(srcs)]
            for v, srcs in zip(self.variants, self.sources)
        ]
        self.fields, self.dropped_world = world_fields(project, scenario)
        self.as_drawn: tuple[WorldChoice, ...] = ()
        """The world choice of the last :meth:`draw` as drawn, before an order moved its value
        (what tells drawn inputs apart, as it did before orders were kept)."""
        self.spec_words = spec_vocabulary(project.spec)
        self.template_words = template_vocabulary(project.bindings)
        """The words the bindings' templates tell values apart by: a ``negated_alternative`` /
        ``stated_fact`` frame (spec words by design) brings none of them in beyond the intent it
        negates, so the case does not read as another value ("... under my plan" to a spec
        whose billing question asks "What plan am I on?")."""
        self.slip_words = self.spec_words | self.template_words
        """What a slip may not bring a word near (:func:`slips_into_spec_words`): the spec's
        words and the words the bindings' templates tell values apart by."""

    def _turn_space(self, variant: Scenario, i: int, source: TemplateSource | None) -> _TurnSpace:
        text = variant.turns[i].user_message
        lang = language_of(text)
        segments = len(optional_segments(source.template)) if source is not None else 0
        entities = []
        for slot, raw in variant.slots.items():
            value = str(raw)
            if not value or _value_pattern(value).search(text) is None:
                continue
            forms = tuple(
                f
                for f in (*entity_forms(slot, value), *value_forms(slot, value, lang, self.today))
                if channel_allows_form(self.channel, value, f)
            )
            if forms:
                entities.append((slot, value, forms))
        switch_to = tuple(x for x in self.languages if x != lang and _switch_phrases(x))
        role = turn_role(text, i, lang)
        fams = tuple(
            f
            for f in families_for(role, lang, _protected(variant, text), self.fill.get(lang))
            if channel_allows(self.channel, f)
        )
        facts = turn_facts(self.project.bindings, source, variant.slots)
        return _TurnSpace(
            text, lang, source, segments, tuple(entities), switch_to, facts, role, fams
        )

    def base(self, template: int) -> Scenario:
        if not 0 <= template < len(self.variants):
            raise InvalidArgument(
                f"scenario {self.scenario.id} has {len(self.variants)} template variant(s); "
                f"template={template} is out of range"
            )
        return self.variants[template]

    def base_for(self, choices: Choices) -> Scenario:
        """The scenario as ``choices`` write it before their steps: each turn from the template
        variant the turn's choice names (a PROBE space also puts in the probe's phrasing)."""
        own = self.variants[0]
        if len(choices.turns) != len(own.turns):
            raise InvalidArgument(
                f"choices describe {len(choices.turns)} turn(s) but scenario {own.id} "
                f"has {len(own.turns)}"
            )
        if not any(c.template for c in choices.turns):
            return own
        return own.model_copy(
            update={"turns": [self.base(c.template).turns[i] for i, c in enumerate(choices.turns)]}
        )

    def render(self, choices: Choices) -> Scenario:
        """The scenario with its messages (and free world fields) as ``choices`` say (same id,
        expectations and the path's own world)."""
        base = self.base_for(choices)
        if len(choices.turns) != len(base.turns):
            raise InvalidArgument(
                f"choices describe {len(choices.turns)} turn(s) but scenario {base.id} "
                f"has {len(base.turns)}"
            )
        turns = [
            t.model_copy(update={"user_message": self._turn_text(base, i, choices)})
            for i, t in enumerate(base.turns)
        ]
        update: dict[str, Any] = {"turns": turns}
        if choices.world:
            update["world"] = self._world(base, choices)
        return base.model_copy(update=update)

    def _turn_text(self, base: Scenario, i: int, choices: Choices) -> str:
        """Turn ``i`` as ``choices`` write it (``base``: :meth:`base_for` of them)."""
        c = choices.turns[i]
        space = self.turn_spaces[c.template][i]
        gone = {(sp, cl, w) for turn, sp, cl, w in choices.dropped if turn == i}
        written = self.written_text(base, i, space, c.written) if c.written is not None else None
        return (
            written
            if written is not None
            else self._render_turn(base, base.turns[i], space, c, gone)
        )

    def _world(self, base: Scenario, choices: Choices) -> WorldSpec:
        """The world ``choices`` set (``base``: :meth:`base_for` of them)."""
        overrides = copy.deepcopy(base.world.overrides)
        free = {(f.tool, f.field) for f in self.fields}
        for w in choices.world:
            if (w.tool, w.field) not in free:
                raise InvalidArgument(
                    f"{w.tool}.{w.field} is not a free world field of scenario {base.id}: the "
                    "path fixes it, or the spec names it"
                )
            overrides.setdefault(w.tool, {})[w.field] = w.value
        # the fields that follow from a varied one follow it (world_fields tried that)
        overrides = world_relations(self.project.bindings).reconcile(
            overrides, {(w.tool, tuple(parse_field_path(w.field))) for w in choices.world}
        )
        return base.world.model_copy(update={"overrides": overrides})

    def families_in(self, choices: Choices) -> list[str]:
        """The families of ``choices`` (:meth:`Choices.families`, in that order) whose effect is
        in the input they render: a choice counts when the input rendered without it differs.
        A choice a rule refused (facts no longer stated, a yes in a question), whose words a
        later step wrote over (a whole-turn yes after a code-switch), or a transform with no
        site left no trace, so the input is not labelled with it. A template choice beside a
        model-written turn counts as it is (rendering without it would ask the model anew)."""
        units = choice_units(choices)
        base = self.base_for(choices)
        texts = [self._turn_text(base, i, choices) for i in range(len(choices.turns))]
        world = self._world(base, choices).model_dump(mode="json") if choices.world else None
        asks = self.writer is not None and any(t.written is not None for t in choices.turns)
        met: set[str] = set()
        for unit in units:
            label = _unit_family(choices, unit)
            if label in met or unit.kind == "trait":
                continue  # a persona trait counts with its turn's written label
            if unit.kind == "template" and asks:
                met.add(label)
                continue
            rest = keep_only(choices, [u for u in units if u != unit])
            other = self.base_for(rest)
            if unit.kind == "world":
                changed = (
                    self._world(other, rest).model_dump(mode="json") if rest.world else None
                ) != world
            else:  # a turn's choice writes that turn only (a probe's phrasing: any turn)
                turns = range(len(texts)) if unit.kind == "probe" else (unit.turn,)
                changed = any(self._turn_text(other, i, rest) != texts[i] for i in turns)
            if changed:
                met.add(label)
        return [f for f in choices.families() if f in met]

    def written_turn(self, base: Scenario, i: int, space: _TurnSpace) -> WrittenTurn:
        """What a model needs to write turn ``i`` of ``base`` (template
        variant's text ``space``)."""
        protect = tuple(_protected(base, space.text))
        names = [str(base.slots[n]) for n in space.facts.names if n in base.slots]
        keeps = space.facts.keeps(space.text, list(protect), names)
        withheld = tuple(str(base.slots[n]) for n in base.withheld if str(base.slots.get(n, "")))
        goal = base.turns[0].user_message if i else space.text
        words = self.spec_words
        return WrittenTurn(
            space.text,
            space.lang,
            space.role,
            protect,
            goal,
            withheld=withheld,
            withheld_names=tuple(base.withheld),
            keeps=keeps,
            spec_words=lambda before, after: brings_spec_words(before, after, words),
        )

    def live_turns(self, choices: Choices) -> Callable[[int, Trace], str | None] | None:
        """The simulated user's turns of ``choices`` written live (``None``: ``choices`` have
        none): a follow-up it plays is written from the agent's last reply in the running
        conversation, as well as the path's goal, screened like any written turn; when the agent
        said nothing or no text passed, the turn as rendered before the run is sent."""
        writer = self.writer
        played = {
            i: t.written
            for i, t in enumerate(choices.turns)
            if t.written is not None and t.written.simulated
        }
        if writer is None or not played:
            return None
        base = self.base_for(choices)

        def live(index: int, trace: Trace) -> str | None:
            written = played.get(index)
            question = trace.turns[-1].user_visible_text.strip() if trace.turns else ""
            if written is None or not question:
                return None
            space = self.turn_spaces[choices.turns[index].template][index]
            turn = dataclasses.replace(self.written_turn(base, index, space), question=question)
            texts = writer.texts(turn, written)
            return texts[written.index % len(texts)] if texts else None

        return live

    def written_text(
        self, base: Scenario, i: int, space: _TurnSpace, written: WrittenChoice
    ) -> str | None:
        """Turn ``i`` as the model writes it (``None``: no writer, or no text passed validation)."""
        if self.writer is None:
            return None
        texts = self.writer.texts(self.written_turn(base, i, space), written)
        return texts[written.index % len(texts)] if texts else None

    def _render_turn(
        self,
        base: Scenario,
        turn: ScenarioTurn,
        space: _TurnSpace,
        c: TurnChoice,
        gone: set[tuple[int, int, int]],
    ) -> str:
        # A choice that does not apply to this template variant does nothing, as a transform
        # with no site does (the shrinker's candidates mix a kept choice with template 0).
        text = turn.user_message
        marked = turn.marked
        segments = {k for k in c.segments if k < space.segments}
        if segments and space.source is not None:
            rendered = render_marked(
                space.source.template, base.slots, set(space.source.withheld), segments=segments
            )
            if rendered is not None:
                marked, text = rendered, strip_free(rendered)
        if gone and marked is not None and has_free(marked):
            text = render_free(marked, gone, space.lang)
        protect = _protected(base, text)
        written: dict[str, str] = {}
        """A slot's value as an earlier entity choice wrote it: a letter case applies to an id
        typed with another separator ("rcp 123")."""
        for e in c.entities:
            own = str(base.slots.get(e.slot, ""))
            allowed = (
                entity_forms(e.slot, own) + value_forms(e.slot, own, space.lang, self.today)
                if own
                else ()
            )
            value = written.get(e.slot, own)
            variant = (
                entity_variant(value, e.form, e.site, e.slot, self.today)
                if value and e.form in allowed
                else None
            )
            if variant is None or _value_pattern(value).search(text) is None:
                continue
            if e.form in _ADVERB_FORMS and not re.match(r"the\b", variant):
                # "yesterday", "11 days ago" take no preposition: not "on 11 days ago"
                text = re.sub(rf"\b(?:[Oo]n|[Ii]n|[Aa]t)\s+(?={re.escape(value)})", "", text)
            text = _replace_value(text, value, variant)
            if variant.endswith("."):  # "country: U.S." ends the sentence once, not "U.S.."
                text = text.replace(variant + ".", variant)
            protect = [variant if p == value else p for p in protect]
            written[e.slot] = variant
        facts = space.facts
        steps = c.steps
        if space.role in ("confirmation", "refusal") and any(st[0] in WORDING for st in steps):
            # said in other words first: the yes / no opens the turn ("Yes, cancel it." ->
            # "Sure, cancel it."), then the other steps apply to it, their facts those it states
            text, said = self._say_in_other_words(
                text, next(st for st in steps if st[0] in WORDING), space, protect
            )
            # the words that now carry the yes / no keep their letters, as a value does
            protect = [*protect, *said]
            steps = tuple(st for st in steps if st[0] not in WORDING)
        return self._apply_steps(
            text,
            steps,
            space.lang,
            protect,
            facts.keeps(
                text, protect, [str(base.slots[n]) for n in facts.names if n in base.slots]
            ),
            space.role,
            # who the user is, said in any turn: "I'm helping my mum with this. ..." then "I'm
            # Maria Lopez, born ..." leaves open whose prescription it is, as within one turn
            oneself=any(
                names_oneself(t.user_message, base.slots, language_of(t.user_message))
                for t in base.turns
            ),
        )

    def _say_in_other_words(
        self, text: str, step: StepChoice, space: _TurnSpace, protect: list[str]
    ) -> tuple[str, list[str]]:
        """``text`` (a confirmation or a refusal) in the wording family's frame ``step`` names,
        or its next frame that keeps every slot value and brings no word of the spec's, with
        the frame's words as written in it ("Fine by me"). The frames of these families say
        the turn's value in other words ("Sure", "Please don't"), so the words of the
        template's value ("yes") need not stay, as other steps' must."""
        name, params = step
        choice = dict(params).get("choice", 0)
        values = [p for p in protect if p in text]
        for k in range(max(1, family_frames(name, space.role, space.lang))):
            framed = apply_family(text, name, choice + k, space.role, space.lang, values)
            if all(v in framed for v in values) and not brings_spec_words(
                text, framed, self.spec_words
            ):
                said = [
                    w
                    for w in re.findall(r"[A-Za-z][A-Za-z' ]*[A-Za-z]|[\u3400-\u9fff]+", framed)
                    if w not in text
                ]
                return framed, said
        return text, []

    def _apply_steps(
        self,
        text: str,
        steps: Sequence[StepChoice],
        lang: str,
        protect: list[str],
        keeps: StepCheck | None = None,
        role: str = "request",
        oneself: bool = False,
    ) -> str:
        """``steps`` applied in order; with ``keeps``, a step after which the text no longer
        states the turn's facts (:meth:`TurnFacts.keeps`) is not applied, as a transform with
        no site is not (so any subset of the steps still renders an instance of the scenario).
        An input family's step (:data:`FAMILY_STEPS`) writes the turn in that family's frame
        for the turn's ``role``; where the user names themselves in the conversation
        (``oneself``), never in a frame that writes for someone else
        (:func:`speaks_for_another`)."""
        typos = 0
        group: list[StepChoice] = []

        def apply(text: str, steps: Sequence[StepChoice]) -> tuple[str, int]:
            done = apply_transforms(
                text,
                [(n, dict(p)) for n, p in steps],
                lang=lang,
                protect=[p for p in protect if p in text],
                max_typos=max(0, MAX_TYPOS - typos),
            )
            return str(done), sum(s.name == "typo" for s in done.transforms)

        def fine(text: str, steps: Sequence[StepChoice]) -> bool:
            """The facts stay stated, a question gains no word that reads as a yes, and no slip
            makes a word the spec's own."""
            out, _ = apply(text, steps)
            if keeps is not None and not keeps(out, [name for name, _ in steps]):
                return False
            if role == "question" and brings_assent(text, out, lang):
                return False
            if not any(name == "typo" for name, _ in steps):
                return True
            plain, _ = apply(text, [step for step in steps if step[0] != "typo"])
            return not slips_into_spec_words(plain, out, self.slip_words)

        def flush(text: str) -> str:
            nonlocal typos
            if not group:
                return text
            out, n = apply(text, group)
            if not fine(text, group):
                accepted: list[StepChoice] = []
                # greedily, in order: each step kept only if the facts stay stated
                for step in group:
                    if fine(text, [*accepted, step]):
                        accepted.append(step)
                out, n = apply(text, accepted)
            typos += n
            group.clear()
            return out

        for name, params in steps:
            if name in FAMILY_STEPS:
                text = flush(text)
                choice = dict(params).get("choice", 0)
                fill = self.fill.get(lang, {})
                # a frame a rule refuses here (a word of the spec's, a yes in a question, a
                # fact no longer stated) gives way to the family's next frame, so a family is
                # not silently absent from a spec whose words one of its frames holds
                for k in range(max(1, family_frames(name, role, lang))):
                    here = [p for p in protect if p in text]
                    framed = apply_family(text, name, choice + k, role, lang, here, fill)
                    if name in FILLED:
                        # the frame's own words (the negated intent left out) say no other value
                        blank = {
                            **fill,
                            **{
                                k: tuple(" " for _ in fill.get(k, ()))
                                for k in ("alt", "d", "k", "st")
                            },
                        }
                        bare = apply_family(text, name, choice + k, role, lang, here, blank)
                        words_ok = not brings_spec_words(text, bare, self.template_words)
                    else:
                        words_ok = not brings_spec_words(text, framed, self.spec_words)
                    if (
                        (keeps is None or keeps(framed, [name]))
                        and words_ok
                        and not (role == "question" and brings_assent(text, framed, lang))
                        and not (
                            oneself and name == AUTHORITY and speaks_for_another(text, framed, lang)
                        )
                    ):
                        text = framed
                        break
                continue
            if name != CODESWITCH:
                group.append((name, params))
                continue
            text = flush(text)
            others = tuple(x for x in self.languages if x != lang and _switch_phrases(x))
            if not others:
                continue
            p = dict(params)
            other = others[p.get("lang", 0) % len(others)]
            phrases = _switch_phrases(other)
            switched = _code_switch(text, lang, phrases[p.get("choice", 0) % len(phrases)])
            if (keeps is None or keeps(switched, [CODESWITCH])) and not (
                role == "question" and any(brings_assent(text, switched, x) for x in (lang, other))
            ):
                text = switched
        return flush(text)

    @property
    def lang(self) -> str:
        """The language the scenario's first message is written in (``zh`` for Chinese)."""
        return language_of(" ".join(self.scenario.messages))

    def plain(self) -> Choices:
        return Choices(lang=self.lang, turns=tuple(TurnChoice() for _ in self.scenario.turns))

    def draw(
        self,
        rng: random.Random,
        *,
        weights: Mapping[str, float] | None = None,
        vary_probability: float = 1.0,
        max_steps: int = 5,
        world_probability: float = 0.25,
        decks: dict[str, list[str]] | None = None,
    ) -> Choices:
        """A random way to write the conversation: a template variant (the variants beyond
        the first weighted by the ``template`` family), a free world field set to another value
        (with probability ``world_probability``, scaled by the ``world`` family's weight), and
        for each turn (with probability ``vary_probability``; at least one thing is varied) 1
        to ``max_steps`` choices, each of a family: a transform, ``codeswitch``, ``segment``,
        ``case`` or ``spelling``.

        Families are picked with probability proportional to their weight; with ``decks``
        (kept by the caller across the draws of one scenario) they are dealt like cards instead:
        every family available on a turn comes up once (``weight`` times, rounded) before any
        comes up again, so a few draws cover the families evenly."""
        w = weights or {}
        tw = [1.0] + [max(w.get("template", 1.0), 1e-6)] * (len(self.variants) - 1)
        if decks is not None:
            # dealt: every template variant comes up once (weight times) before any again
            deck = decks.setdefault("template", [])
            if not deck:
                deck.extend(str(k) for k, wt in enumerate(tw) for _ in range(max(1, round(wt))))
                rng.shuffle(deck)
            template = int(deck.pop(0))
        else:
            template = rng.choices(range(len(self.variants)), weights=tw)[0]
        spaces = self.turn_spaces[template]
        n = len(spaces)
        world: tuple[WorldChoice, ...] = ()
        drawn: tuple[WorldChoice, ...] = ()
        values = [k for k, f in enumerate(self.fields) if not f.injection]
        if values and rng.random() < min(0.9, world_probability * w.get("world", 1.0)):
            if decks is not None:
                # dealt: every (field, value) pair comes up once before any comes up again
                deck = decks.setdefault("world", [])
                if not deck:
                    deck.extend(
                        f"{k}:{j}" for k in values for j in range(len(self.fields[k].candidates))
                    )
                    rng.shuffle(deck)
                k, j = (int(x) for x in deck.pop(0).split(":"))
            else:
                k = rng.choice(values)
                j = rng.randrange(len(self.fields[k].candidates))
            f = self.fields[k]
            drawn = (WorldChoice(tool=f.tool, field=f.field, value=f.candidates[j]),)
            value = f.value_of(j)
            world = () if value is NOT_TRIED else (drawn[0].model_copy(update={"value": value}),)
        injected = self._draw_injection(rng, w, decks, spaces[0].lang if spaces else "en")
        drawn += injected
        world += injected
        self.as_drawn = drawn
        varied = [rng.random() < vary_probability for _ in range(n)]
        if not any(varied) and template == 0 and not drawn:
            varied[rng.randrange(n)] = True
        turns = tuple(
            self._draw_turn(
                rng,
                i,
                spaces[i],
                w,
                max_steps,
                decks.setdefault(f"template{template}:turn{i + 1}", [])
                if decks is not None
                else None,
                decks.setdefault(f"families:turn{i + 1}", []) if decks is not None else None,
                decks.setdefault(f"notation:turn{i + 1}", []) if decks is not None else None,
            )
            if vary
            else TurnChoice()
            for i, vary in enumerate(varied)
        )
        if self.writer is not None:
            base = self.variants[template]
            turns = tuple(
                self._draw_written(rng, base, i, spaces[i], t, decks, w) if vary else t
                for i, (t, vary) in enumerate(zip(turns, varied))
            )
        # one index for every turn (the bindings align follow-ups with the first message);
        # each turn holds it, so the shrinker can put back one turn's own words alone
        turns = tuple(t.model_copy(update={"template": template}) for t in turns)
        return Choices(lang=self.lang, turns=turns, world=world)

    def _draw_injection(
        self,
        rng: random.Random,
        w: Mapping[str, float],
        decks: dict[str, list[str]] | None,
        lang: str,
    ) -> tuple[WorldChoice, ...]:
        """An instruction injected into one free-text tool-output field, or none: a family of
        its own, dealt apart from the world's other values so that every path whose tools
        return free text meets it (on :data:`INJECTION_SHARE` of the inputs, scaled by the
        family's weight), in the forms of the conversation's language (``lang``, the first
        turn's), each (field, form) pair once before any again."""
        fields = [k for k, f in enumerate(self.fields) if f.injection]
        if not fields:
            return ()
        pairs = [
            (k, j)
            for k in fields
            for j, c in enumerate(self.fields[k].candidates)
            if language_of(c.removeprefix(str(self.fields[k].value))) == lang
        ] or [(k, j) for k in fields for j in range(len(self.fields[k].candidates))]
        share = min(0.9, INJECTION_SHARE * w.get(INJECTED, 1.0))
        if decks is not None:
            on = decks.setdefault("tool_output", [])
            if not on:
                hits = max(1, round(share * 6))
                on.extend(["1"] * hits + ["0"] * max(0, 6 - hits))
                rng.shuffle(on)
            if on.pop(0) == "0":
                return ()
            deck = decks.setdefault(f"tool_output:{lang}", [])
            if not deck:
                deck.extend(f"{k}:{j}" for k, j in pairs)
                rng.shuffle(deck)
            k, j = (int(x) for x in deck.pop(0).split(":"))
        else:
            if rng.random() >= share:
                return ()
            k, j = rng.choice(pairs)
        f = self.fields[k]
        return (WorldChoice(tool=f.tool, field=f.field, value=f.candidates[j]),)

    def _draw_written(
        self,
        rng: random.Random,
        base: Scenario,
        i: int,
        space: _TurnSpace,
        drawn: TurnChoice,
        decks: dict[str, list[str]] | None,
        w: Mapping[str, float],
    ) -> TurnChoice:
        """With a writer: with its probability, the turn written by the model instead of
        ``drawn`` — a follow-up (an answer, a confirmation, a refusal) by the simulated user
        with a dealt persona when it is on, else in a dealt family of the turn. A family or
        persona is dealt ``weight`` times (the search's learning: ``turnN:model:hedge``). When the
        model wrote no text that passed validation, ``drawn`` stays: an input never claims a
        family it does not hold."""
        writer = self.writer
        assert writer is not None
        if writer.options.probability <= 0 or rng.random() >= writer.options.probability:
            return drawn
        if (
            writer.options.simulated_user
            and i > 0
            and space.role in ("answer", "confirmation", "refusal")
        ):
            options = [(name, None) for name in PERSONAS]
            deck = decks.setdefault(f"personas:turn{i + 1}", []) if decks is not None else []
            weights = [
                max(w.get(f"turn{i + 1}:{WrittenChoice(persona=name).family_key}", 1.0), 1e-6)
                for name in PERSONAS
            ]
            persona = _deal(deck, options, weights, rng)
            written = WrittenChoice(
                persona=persona, traits=PERSONAS[persona], index=rng.randrange(64)
            )
        else:
            families = writer.families_for(space.role, space.families)
            options = [(name, None) for name in families]
            deck = decks.setdefault(f"model:turn{i + 1}", []) if decks is not None else []
            weights = [
                max(w.get(f"turn{i + 1}:{WrittenChoice(family=name).family_key}", 1.0), 1e-6)
                for name in families
            ]
            family = _deal(deck, options, weights, rng)
            written = WrittenChoice(family=family, index=rng.randrange(64))
        return (
            TurnChoice(written=written)
            if self.written_text(base, i, space, written) is not None
            else drawn
        )

    def _draw_turn(
        self,
        rng: random.Random,
        i: int,
        space: _TurnSpace,
        w: Mapping[str, float],
        max_steps: int,
        deck: list[str] | None,
        family_deck: list[str] | None = None,
        form_deck: list[str] | None = None,
    ) -> TurnChoice:
        """One turn's choices. With decks, the input families (docs/input-families.md: a value's
        notation, the families that wrap the turn) have a deck of their own, shared by the
        template variants: each draw deals one, so a path's first draws meet every family that
        applies to the turn, whatever its template. A value's notations are dealt too
        (``form_deck``): each (slot, notation) pair comes up once before any comes up again, and
        as often as all of them together, every value as the template writes it."""
        base = self.variants[0]
        options: list[tuple[str, tuple[tuple[str, int], ...] | None]] = [
            step
            for step in _available_steps(space.text, space.lang, _protected(base, space.text))
            if channel_allows(self.channel, step[0])
            # a yes or a no asked as a question ("No, don't file it yet, can you help with
            # that?") is neither, nor is an answer said as a request: the request forms stay
            # on requests
            and not (space.role in ("confirmation", "refusal") and step[0] in _ASKING)
            and not (space.role == "answer" and step[0] in REQUEST_FORMS)
        ]
        if space.segments:
            options.append(("segment", None))
        if any(set(forms) & set(CASE_FORMS) for _, _, forms in space.entities):
            options.append(("case", None))
        if any(set(forms) & set(SPELLING_FORMS) for _, _, forms in space.entities):
            options.append(("spelling", None))
        if space.switch_to and channel_allows(self.channel, CODESWITCH):
            options.append((CODESWITCH, None))
        family_options: list[tuple[str, tuple[tuple[str, int], ...] | None]] = [
            (name, None) for name in space.families
        ]
        notations = any(set(forms) & set(NOTATION_FORMS) for _, _, forms in space.entities)
        dealt: list[str] = []
        if family_deck is not None and form_deck is not None:
            # how a value is written is independent of how the turn is framed: each input gets
            # the next card of both decks, so a path's inputs meet every (value, notation) pair
            if family_options:
                family_weights = [
                    max(w.get(f"turn{i + 1}:{name}", 1.0), 1e-6) for name, _ in family_options
                ]
                dealt.append(_deal(family_deck, family_options, family_weights, rng))
            if notations:
                dealt.append("notation")
        else:
            options += [("notation", None)] * notations + family_options
        if not options and not dealt:
            return TurnChoice()
        weights = [max(w.get(f"turn{i + 1}:{name}", 1.0), 1e-6) for name, _ in options]
        by_name = {name: k for k, (name, _) in enumerate(options)}
        steps: list[StepChoice] = []
        segments: list[int] = []
        entities: list[EntityChoice] = []
        picks = len(dealt) + (
            rng.randint(min(3, max_steps), max_steps) - len(dealt) if options else 0
        )
        for k in range(picks):
            if k < len(dealt):
                name, bounds = dealt[k], None
            elif deck is not None:
                name, bounds = options[by_name[_deal(deck, options, weights, rng)]]
            else:
                name, bounds = options[rng.choices(range(len(options)), weights=weights)[0]]
            if name == "segment":
                left = [k for k in range(space.segments) if k not in segments]
                if left:
                    segments.append(left[rng.randrange(len(left))])
            elif name in ("case", "spelling", "notation"):
                forms_of = (
                    CASE_FORMS
                    if name == "case"
                    else SPELLING_FORMS
                    if name == "spelling"
                    else NOTATION_FORMS
                )
                # a letter case also applies to an id typed with another separator ("rcp 123")
                taken = {e.slot for e in entities if name != "case" or e.form not in ID_SEP_FORMS}
                open_ = [
                    (slot, [f for f in forms if f in forms_of])
                    for slot, _, forms in space.entities
                    if slot not in taken
                ]
                open_ = [(slot, fs) for slot, fs in open_ if fs]
                if open_ and name == "notation" and form_deck is not None:
                    # the "" card writes every value as the template does: it holds as many cards
                    # as the re-writings together, so the template's own notation keeps half the
                    # draws and one notation finding does not swamp every input of a path
                    pairs = [(f"{slot}\t{f}", None) for slot, fs in open_ for f in fs]
                    card = _deal(
                        form_deck,
                        [*pairs, ("", None)],
                        [1.0] * len(pairs) + [float(len(pairs))],
                        rng,
                    )
                    if card:
                        slot, form = card.split("\t")
                        entities.append(EntityChoice(slot=slot, form=form))
                elif open_:
                    slot, fs = open_[rng.randrange(len(open_))]
                    form = rng.choices(fs, weights=[_FORM_WEIGHTS.get(f, 1.0) for f in fs])[0]
                    entities.append(
                        EntityChoice(
                            slot=slot,
                            form=form,
                            site=rng.randint(0, 63) if name == "spelling" else 0,
                        )
                    )
            elif name in FAMILY_STEPS:
                if name not in {st[0] for st in steps}:
                    steps.append((name, (("choice", rng.randrange(64)),)))
            elif name == CODESWITCH:
                other = rng.randrange(len(space.switch_to))
                steps.append(
                    (
                        CODESWITCH,
                        (
                            ("lang", other),
                            ("choice", rng.randrange(len(_switch_phrases(space.switch_to[other])))),
                        ),
                    )
                )
            else:
                assert bounds is not None
                steps.append((name, tuple((key, rng.randint(0, hi)) for key, hi in bounds)))
        steps.sort(key=lambda st: _STEP_ORDER.get(st[0], len(_STEP_ORDER)))
        return TurnChoice(
            steps=tuple(steps), segments=tuple(sorted(segments)), entities=tuple(entities)
        )


_STEP_ORDER = {
    name: k
    for k, name in enumerate(
        (
            "synonym",
            "contraction",
            "direct_request",
            "indirect_request",
            "politeness",
            "hedge",
            "urgency",
            "particle",
            "formal",
            "casual",
            "filler",
            "greeting",
            "closing",
            "reorder",
            *FAMILY_ORDER,
            CODESWITCH,
            "casing",
            "typo",
            "punctuation",
            "width",
            "whitespace",
        )
    )
}
"""The order a turn's drawn steps apply in: rewrites that read the sentence's mood (a request
asked as a question, a polite frame) before frames that put words in front of it (a greeting,
a filler), which would hide the request's first word from them; slips and spacing last."""

_FORM_WEIGHTS = {"lower": 3.0, "capitalized": 1.0, "upper": 1.0}
"""How users re-type a value: mostly all in lower case (o-1001, march 2024), sometimes with
a capital, now and then in capitals."""


def _deal(
    deck: list[str],
    options: Sequence[tuple[str, Any]],
    weights: Sequence[float],
    rng: random.Random,
) -> str:
    """The next card of ``deck`` that names an available family; an empty deck (or one with
    no available card) is refilled with every available family, ``weight`` times (rounded,
    at least once), shuffled."""
    available = {name for name, _ in options}
    for k, card in enumerate(deck):
        if card in available:
            return deck.pop(k)
    cards = [name for (name, _), wt in zip(options, weights) for _ in range(max(1, round(wt)))]
    rng.shuffle(cards)
    deck[:0] = cards
    return _deal(deck, options, weights, rng)


def _switch_phrases(lang: str) -> tuple[str, ...]:
    try:
        return resolve_pack(lang).code_switch
    except InvalidArgument:
        return ()


def _piecemeal_variants(project: Project, scenario: Scenario) -> list[Scenario]:
    """The template variants of a piecemeal scenario: its stop's and its complete path's
    variants (:class:`ChoiceSpace`) continued alike, each the same case (expectations, world)."""
    for stop, complete, built in piecemeal_pairs(project.bindings, project.scenarios()):
        if built.id != scenario.id:
            continue
        stops = ChoiceSpace(project, stop).variants
        completes = ChoiceSpace(project, complete).variants
        alike: list[Scenario] = []
        for a, b in zip(stops[1:], completes[1:]):
            if language_of(a.messages[0]) == language_of(b.messages[0]):
                variant = continue_stop(a, b)
                if variant is not None:
                    alike.append(variant.model_copy(update={"id": scenario.id}))
        # and the answer in the other language than the request ("请帮我取消订单", "O-1001"...)
        mixed = [
            v.model_copy(update={"turns": [v.turns[0], w.turns[1], *v.turns[2:]]})
            for v in alike
            for w in (scenario, *alike)
            if language_of(v.messages[0]) != language_of(w.messages[1])
        ][:2]
        out: list[Scenario] = []
        seen = {tuple(scenario.messages)}
        for variant in (*alike, *mixed):
            if tuple(variant.messages) not in seen and _same_case(scenario, variant):
                seen.add(tuple(variant.messages))
                out.append(variant)
        return out
    return []


def _path_of(project: Project, scenario: Scenario) -> TreePath | None:
    """The tree path ``scenario`` was built from (same branches, leaf and stop; loop paths
    too)."""
    key = scenario.id.split("/")[0]
    for paths in (enumerate_paths(project.spec), enumerate_loop_paths(project.spec)):
        for path in paths:
            if (
                path.id == key
                and path.leaf == scenario.leaf
                and [f"{s.node}#{s.branch}" for s in path.steps] == scenario.branches
            ):
                return path
    return None


# ----------------------------------------------------------------------------- shrinking units


class ChoiceUnit(BaseModel):
    """A removable choice, for the shrinker: removing it makes the input simpler."""

    model_config = ConfigDict(frozen=True)

    kind: str
    """``template`` (removed: the turn in template 0), ``step`` (not applied), ``segment`` (left
    out), ``entity`` (the value as the template writes it), ``world`` (the path's value), ``probe``
    (the probe asks directly, phrasing 0), ``written`` (the turn in the template's words, not the
    model's) or ``trait`` (one persona trait of a simulated user's turn dropped)."""
    turn: int = 0
    step: int = 0
    """The index within its turn's steps, segments or entities (or within ``world``)."""


def choice_units(choices: Choices) -> list[ChoiceUnit]:
    """Each non-default choice as a unit."""
    out: list[ChoiceUnit] = []
    for i, t in enumerate(choices.turns):
        out += [ChoiceUnit(kind="template", turn=i)] if t.template else []
        out += [ChoiceUnit(kind="segment", turn=i, step=j) for j in range(len(t.segments))]
        out += [ChoiceUnit(kind="entity", turn=i, step=j) for j in range(len(t.entities))]
        out += [ChoiceUnit(kind="step", turn=i, step=j) for j in range(len(t.steps))]
        if t.written is not None:
            out += [ChoiceUnit(kind="written", turn=i)]
            out += [ChoiceUnit(kind="trait", turn=i, step=j) for j in range(len(t.written.traits))]
    out += [ChoiceUnit(kind="world", step=j) for j in range(len(choices.world))]
    if choices.probe:
        out.append(ChoiceUnit(kind="probe"))
    return out


def keep_only(choices: Choices, kept: Sequence[ChoiceUnit]) -> Choices:
    """``choices`` with every unit not in ``kept`` set back to its default."""
    keep = set(kept)

    def has(kind: str, i: int, j: int) -> bool:
        return ChoiceUnit(kind=kind, turn=i, step=j) in keep

    turns = tuple(
        TurnChoice(
            template=t.template if has("template", i, 0) else 0,
            steps=tuple(s for j, s in enumerate(t.steps) if has("step", i, j)),
            segments=tuple(s for j, s in enumerate(t.segments) if has("segment", i, j)),
            entities=tuple(e for j, e in enumerate(t.entities) if has("entity", i, j)),
            written=(
                t.written.model_copy(
                    update={
                        "traits": tuple(
                            x for j, x in enumerate(t.written.traits) if has("trait", i, j)
                        )
                    }
                )
                if t.written is not None and has("written", i, 0)
                else None
            ),
        )
        for i, t in enumerate(choices.turns)
    )
    world = tuple(w for j, w in enumerate(choices.world) if has("world", 0, j))
    return Choices(
        lang=choices.lang,
        turns=turns,
        world=world,
        probe=choices.probe if ChoiceUnit(kind="probe") in keep else 0,
        dropped=choices.dropped,
    )


def _unit_family(choices: Choices, unit: ChoiceUnit) -> str:
    """The family (:meth:`Choices.families`) a unit's choice is labelled with."""
    if unit.kind == "template":
        return "template"
    if unit.kind == "probe":
        return "probe:indirect"
    if unit.kind == "world":
        return INJECTED if is_injected(choices.world[unit.step].value) else "world"
    t = choices.turns[unit.turn]
    turn = f"turn{unit.turn + 1}:"
    if unit.kind in ("written", "trait") and t.written is not None:
        return turn + t.written.family_key
    if unit.kind == "segment":
        return turn + "segment"
    if unit.kind == "entity":
        return turn + t.entities[unit.step].family
    return turn + t.steps[unit.step][0]


def unit_label(choices: Choices, unit: ChoiceUnit) -> str:
    """A unit in words (``turn 1: urgency(choice=1)``, ``world: get_policy.x=0``)."""
    if unit.kind == "template":
        return f"turn {unit.turn + 1}: template {choices.turns[unit.turn].template}"
    if unit.kind == "probe":
        return f"probe phrasing {choices.probe} (indirect)"
    if unit.kind == "world":
        return f"world: {choices.world[unit.step].describe()}"
    t = choices.turns[unit.turn]
    if unit.kind == "written" and t.written is not None:
        return f"turn {unit.turn + 1}: written by the model ({t.written.describe()})"
    if unit.kind == "trait" and t.written is not None:
        return f"turn {unit.turn + 1}: persona trait {t.written.traits[unit.step]!r}"
    if unit.kind == "segment":
        return f"turn {unit.turn + 1}: segment {t.segments[unit.step]}"
    if unit.kind == "entity":
        return f"turn {unit.turn + 1}: {t.entities[unit.step].describe()}"
    name, params = t.steps[unit.step]
    return f"turn {unit.turn + 1}: {name}({', '.join(f'{k}={v}' for k, v in params)})"
