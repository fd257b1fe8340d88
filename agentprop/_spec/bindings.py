"""Bindings: how the abstract condition variables of a spec are realised.

A bindings file (``agentprop.yaml`` beside the spec) says, per variable, how a test makes it
true or false: ``utterance``, ``withhold``, ``followup``, ``world`` or ``internal`` (the agent's own
state, not controlled). It also holds slot defaults, base world overrides, PII fields, tool
handlers, languages, the default agent and the terminal nodes' outcomes.
:func:`load_bindings` validates all of it against the spec, with file and line on error.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from agentprop._spec.free_spans import free_span_problem
from agentprop._spec.grounding import (
    GROUNDING_KINDS,
    ResponseGrounding,
    declared_fields,
    default_grounding,
    default_provenance,
    reference_date,
)
from agentprop._spec.implied import condition_variables, implied_decision
from agentprop._spec.model import Spec
from agentprop._spec.when import Compare, Symbol, atoms
from agentprop._spec.when import Literal as WhenLiteral
from agentprop._spec.when import Path as WhenPath
from agentprop._util.refs import is_project_ref
from agentprop._util.yaml_source import YamlSource, describe_loc, load_yaml
from agentprop.errors import BindingsError, SourceLocation, clip, clip_repr

if TYPE_CHECKING:
    from agentprop._spec.orders import Order

BINDINGS_FILE_NAMES = ("agentprop.yaml", "agentprop.yml")

_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")


def language_of(text: str) -> str:
    """The language a message or template is written in: ``zh`` for text with CJK ideographs,
    ``en`` otherwise (the languages agentprop ships phrase packs for)."""
    return "zh" if _CJK.search(text) else "en"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


MAX_MAGNITUDE = 2.0**53
"""Largest ``min``/``max`` of a world binding in absolute value (past 2^53 a float cannot step
from one number to the next, so no boundary case can be built)."""


def is_object_ref(ref: str) -> bool:
    """Whether ``ref`` may name an object in a bindings file: ``MODULE:ATTR`` with dotted Python
    names, or ``FILE:ATTR`` with a relative path inside the project (``agent.py:MyAgent``)."""
    return is_project_ref(ref)


def _object_ref(ref: str, what: str) -> str:
    if not is_object_ref(ref):
        raise ValueError(
            f"{what} {clip_repr(ref)} is not MODULE:ATTR (dotted Python names, e.g. "
            "`agent:SupportOpsAgent` or `agent.py:SupportOpsAgent` for SupportOpsAgent in "
            "agent.py next to the bindings); a path must stay inside the project "
            "(no `..`, not absolute)"
        )
    return ref


class Effect(_Strict):
    """What a world-bound value does to a tool."""

    set: dict[str, Any] = Field(default_factory=dict)
    failure: str | None = None
    calls: list[int] | None = None
    """1-based indices of the calls the failure applies to (``None``: every call)."""


class WorldBinding(_Strict):
    tool: str
    field: str | None = None
    values: dict[Hashable, Effect] | None = None
    type: str | None = None
    """``integer`` or ``number`` for fields boundary strategies may move (default: from the
    tool's output schema)."""
    min: float | None = None
    max: float | None = None
    precision: float | None = None

    @field_validator("min", "max", "precision")
    @classmethod
    def _finite(cls, value: float | None, info: Any) -> float | None:
        if value is None:
            return value
        if not math.isfinite(value):
            raise ValueError(
                f"`{info.field_name}: {value}` is not a finite number; give a "
                "number, or leave it out"
            )
        if abs(value) > MAX_MAGNITUDE:
            raise ValueError(
                f"`{info.field_name}: {value:g}` is over agentprop's limit of 2^53 in absolute "
                "value (past it a float cannot step from one number to the next)"
            )
        if info.field_name == "precision" and value <= 0:
            raise ValueError(
                f"`precision: {value:g}` must be greater than 0 (the smallest step of the field)"
            )
        return value

    @model_validator(mode="after")
    def _one_of(self) -> WorldBinding:
        if self.field is None and self.values is None:
            raise ValueError(
                "a world binding needs `field:` (the value is written there) or `values:`"
            )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(
                f"`min: {self.min:g}` is greater than `max: {self.max:g}`: no value fits; "
                "make min at most max"
            )
        return self


class FollowupBinding(_Strict):
    after_decision: str
    values: dict[Hashable, list[str] | None]


class VariableBinding(_Strict):
    utterance: dict[Hashable, list[str]] | None = None
    withhold: dict[Hashable, list[str]] | None = None
    followup: FollowupBinding | None = None
    world: WorldBinding | None = None
    internal: bool = False
    pii_request: bool = False
    description: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> VariableBinding:
        kinds = [
            k
            for k in ("utterance", "withhold", "followup", "world")
            if getattr(self, k) is not None
        ]
        if self.internal:
            kinds.append("internal")
        if len(kinds) != 1:
            raise ValueError(
                "a variable needs exactly one of utterance, withhold, followup, world, internal"
                + (f" (found {', '.join(kinds)})" if kinds else "")
            )
        return self

    @property
    def kind(self) -> str:
        for k in ("utterance", "withhold", "followup", "world"):
            if getattr(self, k) is not None:
                return k
        return "internal"

    def finite_values(self) -> list[Hashable] | None:
        """The values this binding can realise, when it is a finite set."""
        if self.utterance is not None:
            return list(self.utterance)
        if self.withhold is not None:
            return list(self.withhold)
        if self.followup is not None:
            return list(self.followup.values)
        if self.world is not None and self.world.values is not None:
            return list(self.world.values)
        return None


class NodeExtra(_Strict):
    """Requirements the bindings add to a node (e.g. END_TICKET must call create_ticket)."""

    must_call_tools_in_order: list[str] = Field(default_factory=list)
    must_not_call: list[str] = Field(default_factory=list)
    repeat_calls: list[str] = Field(default_factory=list)
    """Tools this node's ``must_call_tools_in_order`` repeats from the node before it that are
    second calls, not ordering anchors (see docs/reference.md, ordering anchors)."""


class ProbeBinding(_Strict):
    """Where a mutation's activation probe runs in this project."""

    scenario: str | None = None
    """Run the probe in this scenario's world (default: the happy-path ``world:``)."""
    user_turns: list[str] | None = None
    """Replace the pack's probe messages (e.g. with this world's ids)."""


class MutantBinding(_Strict):
    """A mutant of a Python agent: the fault knobs that realise one mutation intent."""

    faults: dict[str, float] = Field(default_factory=dict)
    probe: ProbeBinding = Field(default_factory=ProbeBinding)


class ResponseFieldBinding(_Strict):
    """``response: {FIELD: {from: TOOL.FIELD, check: [KINDS]}}``: the value of a response field
    must be one of those tool output fields' values (once such a tool was called); ``check``
    replaces the field's default groundings (default: kept)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: list[str] = Field(alias="from")
    check: list[str] | None = None

    @field_validator("from_", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


class PolicyBinding(_Strict):
    """How the cases that exercise one policy of the spec are decided (the ``policies:``
    section; see :mod:`agentprop._decide.safety` for the rule and docs/reference.md)."""

    safety: bool | None = None
    """``true``/``false`` overrides whether the policy is a safety clause (default: inferred)."""
    mode: Literal["sprt", "zero-failure", "fixed"] | None = None
    tau: float | None = Field(None, gt=0.0, le=1.0)
    """Required pass rate; for zero-failure the rate the clean runs certify (0.99: 299 runs)."""
    runs: int | None = Field(None, ge=1)
    """Clean runs of zero-failure mode, or runs of fixed mode."""
    nodes: list[str] | None = None
    """The nodes whose cases exercise the policy (default: inferred from the policy's text)."""


class JudgeBinding(_Strict):
    """The model that judges the spec's rubrics (``test_guidance: {rubric: ...}`` of a policy or
    a node); the ``judge:`` section. Without it, rubrics are not judged."""

    model: str
    provider: Literal["anthropic", "openai", "openai-responses"] = "anthropic"
    base_url: str | None = None
    samples: int = Field(1, ge=1)
    """Answers asked per transcript; the majority decides."""
    min_labels: int = Field(50, ge=1)
    """Labels a calibration needs before the judge may gate."""
    calibrations: str | None = None
    """Directory of the calibrations, relative to the bindings file (default
    ``.agentprop/judges``)."""


class ChannelBinding(_Strict):
    """What the input channel guarantees about what users send (the ``channel:`` section): a
    front end that normalises input (a date picker, a form, an id field) says so, and
    exploration deals no input family the guarantee rules out (docs/input-families.md). Every
    field's default guarantees nothing. A tool schema's format is no channel guarantee: it says
    what the agent must send the tool, not what users type."""

    dates: Literal["any", "iso", "as_written"] = "any"
    """``iso``: dates arrive as YYYY-MM-DD (no other notation, no relative dates; a date a
    template writes otherwise is also written ISO); ``as_written``: as the templates write them."""
    numbers: Literal["any", "as_written"] = "any"
    """``as_written``: amounts and numbers arrive as the templates write them (no separators
    added or taken out, no ``2.4k``, no full-width digits)."""
    ids: Literal["any", "any_case", "as_written"] = "any"
    """``any_case``: ids (a value with letters and digits) arrive with the templates'
    separators (``RCP-123``, never ``RCP 123`` or ``RCP123``; an id box); ``as_written``: also
    in the templates' letter case."""
    places: Literal["any", "as_written"] = "any"
    """``as_written``: a country arrives as the templates write it (a drop-down: no ``U.S.``,
    ``USA`` or ``United States`` for ``US``)."""
    corrections: bool = True
    """``false``: a message never takes back a value it stated (a form, not free text)."""
    typos: bool = True
    """``false``: no keyboard slips, in the words or in a value."""
    code_switching: bool = True
    """``false``: a message is in one language (no phrase of another declared language)."""
    chinese_script: Literal["any", "simplified"] = "any"
    """``simplified``: Chinese arrives in simplified characters (no traditional ones)."""

    def declared(self) -> dict[str, Any]:
        """The fields the file sets to a guarantee (not their default)."""
        return {
            k: v
            for k, v in self.model_dump().items()
            if v != ChannelBinding.model_fields[k].default
        }


class RelationBinding(_Strict):
    """How one tool-output field relates to the others (the ``relations:`` section, tool ->
    field -> this): it follows from a date (``days_since``/``days_until: FIELD``), a list
    (``total_of: LIST[].FIELD``, ``count_of: LIST``), is ``independent`` of every field (no
    relation is detected for it), or is a date that may move to either side of today
    (``crosses_today``), or is a list whose items keep an order (``order: ascending FIELD``,
    ``descending FIELD``; :mod:`agentprop._spec.orders`). Relations that hold on the bound world
    are found without this (:mod:`agentprop._spec.relations`); declare one that detection cannot
    see, or rule one out."""

    days_since: str | None = None
    days_until: str | None = None
    total_of: str | None = None
    count_of: str | None = None
    independent: bool = False
    crosses_today: bool = False
    order: str | None = None

    @model_validator(mode="after")
    def _one_relation(self) -> RelationBinding:
        kinds = [
            k for k in ("days_since", "days_until", "total_of", "count_of") if getattr(self, k)
        ]
        if len(kinds) > 1 or (kinds and self.independent):
            raise ValueError(
                f"a field follows from one relation at most, and an independent field from "
                f"none; got {', '.join(kinds + ['independent'] * self.independent)}: keep one"
            )
        return self


class Bindings(_Strict):
    """A validated bindings file. Load one with :func:`load_bindings`."""

    version: int = 1
    spec: str | None = None
    agent: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    slots: dict[str, Any] = Field(default_factory=dict)
    utterances: list[str] = Field(default_factory=list)
    """Default first messages, for paths on which no utterance variable is set."""
    world: dict[str, dict[str, Any]] = Field(default_factory=dict)
    pii: dict[str, list[str]] = Field(default_factory=dict)
    handlers: dict[str, str] = Field(default_factory=dict)
    variables: dict[str, VariableBinding] = Field(default_factory=dict)
    outcomes: dict[str, str | list[str] | dict[str, str | list[str]]] = Field(default_factory=dict)
    """Terminal node (``LEAF`` or ``LEAF<-VIA``) -> its decision, or the list of decisions the
    spec allows there (the first is the one a case expects; any of them passes)."""
    nodes: dict[str, NodeExtra] = Field(default_factory=dict)
    capabilities: dict[str, list[str]] = Field(default_factory=dict)
    """Capability name -> node ids (the seed article's capability matrix)."""
    mutations: dict[str, MutantBinding] = Field(default_factory=dict)
    """Mutation id (of the spec's mutation pack) -> the fault knobs that realise it."""
    response: dict[str, list[str] | ResponseFieldBinding] = Field(default_factory=dict)
    """Response field -> the groundings that apply to it (replacing that field's default; see
    :func:`agentprop._spec.grounding.default_grounding` and :data:`GROUNDING_KINDS`), or
    ``{from: TOOL.FIELD, check: [...]}``: the tool output field(s) its value must come from."""
    policies: dict[str, PolicyBinding] = Field(default_factory=dict)
    """Policy id -> how its cases are decided (safety override, mode, tau, runs, nodes)."""
    languages: list[str] | None = None
    """The languages users write in (``[en, zh]``); default: those of the templates."""
    judge: JudgeBinding | None = None
    """The judge model of the spec's rubrics (:class:`JudgeBinding`)."""
    channel: ChannelBinding = Field(default_factory=ChannelBinding)
    """What the input channel guarantees (:class:`ChannelBinding`; default: nothing)."""
    relations: dict[str, dict[str, RelationBinding]] = Field(default_factory=dict)
    """Tool -> output field -> how it relates to the other fields (:class:`RelationBinding`):
    a world variation keeps related fields consistent (:mod:`agentprop._spec.relations`)."""

    @field_validator("agent")
    @classmethod
    def _agent_ref(cls, value: str | None) -> str | None:
        return value if value is None or value == "anthropic" else _object_ref(value, "agent")

    @field_validator("handlers")
    @classmethod
    def _handler_refs(cls, value: dict[str, str]) -> dict[str, str]:
        for ref in value.values():
            _object_ref(ref, "handler")
        return value

    _path: Path | None = PrivateAttr(default=None)
    _src: YamlSource | None = PrivateAttr(default=None)
    _warnings: list[str] = PrivateAttr(default_factory=list)
    _base_outputs: dict[str, Any] = PrivateAttr(default_factory=dict)
    _orders: Any = PrivateAttr(default=None)
    _relations: Any = PrivateAttr(default=None)
    """Each tool's output in the base world (``world:``), computed once (the happy path)."""

    @property
    def warnings(self) -> list[str]:
        """Gaps that do not stop loading (a variable without a binding, an ambiguous leaf)."""
        return list(self._warnings)

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def declared_languages(self) -> list[str]:
        """``languages:``, or the languages the templates are written in (first-seen order)."""
        if self.languages is not None:
            return list(self.languages)
        found = list(dict.fromkeys(language_of(t) for _, t in self.templates()))
        return found or ["en"]

    def templates(self) -> list[tuple[tuple[Hashable, ...], str]]:
        """Every utterance template with its place in the file: ``utterances:``, the
        ``utterance`` and ``followup`` values of the variables."""
        out: list[tuple[tuple[Hashable, ...], str]] = [
            (("utterances", i), t) for i, t in enumerate(self.utterances)
        ]
        for name, var in self.variables.items():
            if var.utterance is not None:
                out += [
                    (("variables", name, "utterance", value, i), t)
                    for value, ts in var.utterance.items()
                    for i, t in enumerate(ts)
                ]
            if var.followup is not None:
                out += [
                    (("variables", name, "followup", "values", value, i), t)
                    for value, ts in var.followup.values.items()
                    for i, t in enumerate(ts or [])
                ]
        return out

    def location(self, loc: tuple[Hashable, ...], *, key: bool = False) -> SourceLocation:
        """Where ``loc`` (a key path such as ``("languages", 1)``) is in the file."""
        if self._src is not None:
            return self._src.location(loc, key=key)
        return SourceLocation(self._path)

    @property
    def base_dir(self) -> Path:
        return self._path.parent if self._path is not None else Path.cwd()

    def outcome(self, leaf: str, via: str | None, decision_enum: list[str]) -> str | None:
        """The decision a terminal node stands for, reached from node ``via`` (the first of
        :meth:`outcome_options`), else ``None``."""
        options = self.outcome_options(leaf, via, decision_enum)
        return options[0] if options else None

    def outcome_options(self, leaf: str, via: str | None, decision_enum: list[str]) -> list[str]:
        """The decisions a terminal node allows, reached from node ``via``, the expected one first.

        ``outcomes:`` keys, most specific first: ``LEAF<-VIA: DECISION`` (or a list of them),
        then ``LEAF:`` with a ``{VIA: DECISION}`` map, then ``LEAF: DECISION``; else the
        decision the leaf's name implies (``END_CANCELLED`` -> ``CANCELLED``), else none."""

        def listed(value: str | list[str]) -> list[str]:
            return [value] if isinstance(value, str) else list(value)

        if via is not None:
            keyed = self.outcomes.get(f"{leaf}<-{via}")
            if isinstance(keyed, (str, list)):
                return listed(keyed)
        mapped = self.outcomes.get(leaf)
        if isinstance(mapped, (str, list)):
            return listed(mapped)
        if isinstance(mapped, dict) and via is not None and via in mapped:
            return listed(mapped[via])
        decision, _ = implied_decision(leaf, decision_enum)
        return [decision] if decision is not None else []

    def response_grounding(self, spec: Spec) -> ResponseGrounding:
        """Which checks apply to which response field: the defaults derived from ``spec``,
        with each field named under ``response:`` replaced by what it lists; the ``context``
        values ground statements too (the agent was given them)."""
        fields = default_grounding(spec)
        provenance = default_provenance(spec)
        for name, entry in self.response.items():
            if isinstance(entry, ResponseFieldBinding):
                provenance[name] = list(entry.from_)
                if entry.check is not None:
                    fields[name] = list(entry.check)
            else:
                fields[name] = list(entry)
        context = [str(v) for v in _scalars(self.context)]
        return ResponseGrounding(
            fields=fields,
            context=context,
            provenance=provenance,
            today=reference_date(self.context),
        )

    def outcome_location(self, leaf: str) -> SourceLocation:
        """Where a leaf's decision is (or would be) mapped: its ``outcomes:`` entry, else the
        ``outcomes:`` section, else the file."""
        if self._src is not None:
            return self._src.location(("outcomes", leaf), key=True)
        return SourceLocation(self._path)


MAX_TEXT_CHARS = 65_536
"""Longest template or slot value (64 Ki characters): each run renders, stores and judges every
message, so a megabyte template made one ``agentprop run`` take minutes."""


def fill_slots(value: Any, slots: Mapping[str, Any]) -> Any:
    """Replace ``{slot}`` in every string inside ``value`` (a whole-string placeholder keeps the
    slot's own type)."""
    if isinstance(value, str):
        whole = _SLOT.fullmatch(value)
        if whole and whole.group(1) in slots:
            return slots[whole.group(1)]
        return _SLOT.sub(lambda m: str(slots.get(m.group(1), m.group(0))), value)
    if isinstance(value, dict):
        return {k: fill_slots(v, slots) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_slots(v, slots) for v in value]
    return value


# ----------------------------------------------------------------------------- field paths

MAX_LIST_INDEX = 999
"""Largest list index in a field path (``orders[999]``): setting ``orders[N]`` builds a list of
N + 1 items, and generated lists hold at most
:data:`agentprop._spec.schemas.MAX_GENERATED_ITEMS`."""

_FIELD_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def parse_field_path(path: str) -> list[str | int]:
    """``orders[0].days_since_created`` -> ``["orders", 0, "days_since_created"]``."""
    out: list[str | int] = []
    for part in path.split("."):
        m = _FIELD_PART.fullmatch(part)
        if m is None:
            raise ValueError(
                f"bad field path {clip_repr(path)}: {clip_repr(part)} is not "
                "`name` or `name[index]`"
            )
        out.append(m.group(1))
        for digits in re.findall(r"\[(\d+)\]", m.group(2)):
            if len(digits) > 3 or int(digits) > MAX_LIST_INDEX:
                raise ValueError(
                    f"list index {clip(digits, 20)} in field path {clip_repr(path)} is over "
                    f"agentprop's limit of {MAX_LIST_INDEX}"
                )
            out.append(int(digits))
    return out


def schema_at(schema: Mapping[str, Any] | None, path: list[str | int]) -> Mapping[str, Any] | None:
    """The sub-schema of a JSON Schema at a parsed field path (``None`` if not declared).

    Object schemas without ``properties`` (``type: object`` alone, e.g. ``limits``) accept any
    field below them: the result is an empty schema. So does the boolean schema ``true``; the
    boolean schema ``false`` accepts nothing (``None``).
    """
    node: Any = schema
    for part in path:
        if node is True:  # the boolean schema `true`: anything, fields included
            return {}
        if not isinstance(node, Mapping):  # `false` (nothing), or not a schema at all
            return None
        if isinstance(part, int):
            if node.get("type") != "array":
                return None
            node = node.get("items", {})
        else:
            if node.get("type") not in (None, "object"):
                return None
            props = node.get("properties")
            if props is None:
                return {}
            node = props.get(part) if isinstance(props, Mapping) else None
    if node is True:
        return {}
    return node if isinstance(node, Mapping) else None


def resolve_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """One tool's overrides as the output they give: nested values, then ``a[0].b`` path keys
    set inside them (in order, as the world merges them)."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if "." in key or "[" in key:
            try:
                _put_in(out, tuple(parse_field_path(key)), copy.deepcopy(value))
            except (ValueError, KeyError, IndexError, TypeError):
                continue  # inside a generated default, not the bound world: no relation there
        else:
            out[key] = copy.deepcopy(value)
    return out


def _put_in(target: Any, path: tuple[str | int, ...], value: Any) -> None:
    node = target
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


# ----------------------------------------------------------------------------- validation


class _Validator:
    def __init__(self, b: Bindings, spec: Spec, src: YamlSource | None) -> None:
        self.b = b
        self.spec = spec
        self.src = src
        self._compared: dict[str, tuple[set[str], bool]] | None = None

    def fail(
        self,
        problem: str,
        loc: tuple[Hashable, ...],
        fix: str,
        expected: str | None = None,
        *,
        key: bool = False,
    ) -> BindingsError:
        location = (
            self.src.location(loc, key=key) if self.src is not None else SourceLocation(self.b.path)
        )
        return BindingsError(problem, location=location, expected=expected, fix=fix)

    def orders(self) -> None:
        """Every order the tool descriptions state, or ``relations:`` declares, holds on the
        bindings' world and on the world each variable's value sets
        (:mod:`agentprop._spec.orders`)."""
        from agentprop._spec.orders import item_at, parse_declared, stated_orders

        b, spec = self.b, self.spec
        declared: list[Order] = []
        for tool, related in b.relations.items():
            for f, rb in related.items():
                if rb.order is None:
                    continue
                loc: tuple[Hashable, ...] = ("relations", tool, f, "order")
                o = parse_declared(tool, tuple(parse_field_path(f)), rb.order)
                if o is None:
                    raise self.fail(
                        f"relations.{tool}.{f}.order is {rb.order!r}, not an order",
                        loc,
                        "write `order: ascending FIELD` or `order: descending FIELD` (FIELD: the "
                        "items' field; leave it out for a list of numbers or dates)",
                        expected="ascending FIELD or descending FIELD",
                    )
                items = item_at(resolve_fields(b.world.get(tool, {})), o.items)
                if not isinstance(items, list):
                    raise self.fail(
                        f"relations.{tool}.{f} declares an order, but world.{tool}.{f} is not a "
                        "list",
                        loc,
                        f"declare the order on a list of world.{tool}",
                        expected="a list field of the bindings' world",
                    )
                declared.append(o)
        # the bound world, and the world each variable's value gives its tool
        worlds: list[tuple[str, dict[str, Any], tuple[Hashable, ...]]] = [
            (tool, resolve_fields(fields), ("world", tool)) for tool, fields in b.world.items()
        ]
        for name, var in b.variables.items():
            w = var.world
            for value, effect in ((w.values or {}) if w is not None else {}).items():
                if w is not None and effect.set:
                    merged = resolve_fields({**b.world.get(w.tool, {}), **effect.set})
                    loc = ("variables", name, "world", "values", value, "set")
                    worlds.append((w.tool, merged, loc))
        for tool, output, at in worlds:
            tool_def = spec.tools_by_name.get(tool)
            if tool_def is None:
                continue
            kept = [o for o in declared if o.tool == tool]
            kept += stated_orders(tool, tool_def.description, tool_def.output_schema, output)
            for o in kept:
                items = item_at(output, o.items)
                if isinstance(items, list):
                    self.order_holds(o, items, (*at, *o.items) if at[0] == "world" else at)

    def order_holds(self, o: Order, items: list[Any], loc: tuple[Hashable, ...]) -> None:
        from agentprop._spec.orders import broken, format_path, item_at

        values = [item_at(x, o.key) for x in items]
        i = broken(values, o.descending)
        if i is None:
            return
        if loc[0] == "world":
            loc = (*loc, i, *o.key)  # the offending item (or the nearest value enclosing it)
        at = f"{o.tool}." + format_path(o.items)
        key = "." + format_path(o.key) if o.key else ""
        raise self.fail(
            f"world.{at}[{i}]{key} = {values[i]!r} breaks the order {o.describe()}: "
            f"{at}[{i - 1}]{key} is {values[i - 1]!r}",
            loc,
            "put the world's items in that order, or fix the order the tool's description or "
            "relations: states",
            expected=f"{at}[]{key} {'descending' if o.descending else 'ascending'}",
        )

    def tool(self, name: str, loc: tuple[Hashable, ...]) -> None:
        if name not in self.spec.tools_by_name:
            known = ", ".join(t.name for t in self.spec.action_tools)
            raise self.fail(
                f"unknown tool {name!r}: spec {self.spec.spec_id} declares no such tool",
                loc,
                f"use one of: {known}",
            )

    def field(self, tool: str, path: str, loc: tuple[Hashable, ...]) -> None:
        try:
            parts = parse_field_path(path)
        except ValueError as exc:
            raise self.fail(
                str(exc), loc, "write fields as dotted paths, e.g. `pii.ssn` or `orders[0].status`"
            ) from None
        if schema_at(self.spec.tool(tool).output_schema, parts) is None:
            props = sorted((self.spec.tool(tool).output_schema or {}).get("properties", {}))
            raise self.fail(
                f"tool {tool!r} has no output field {path!r}",
                loc,
                f"use a field of its output_schema (top level: {', '.join(props)})",
            )

    def value_type(self, tool: str, path: str, value: Any, loc: tuple[Hashable, ...]) -> None:
        """A world value has the type the tool's output schema gives its field (after its
        ``{slot}`` placeholders are filled in). Only types are checked: a partial object is
        merged into the generated output, and a value outside an enum may be the point."""
        schema = schema_at(self.spec.tool(tool).output_schema, parse_field_path(path))
        if not schema:
            return
        filled = fill_slots(value, self.b.slots)
        try:
            import jsonschema

            errors = [
                e
                for e in jsonschema.validators.validator_for(schema)(schema).iter_errors(filled)
                if e.validator == "type"
            ]
        # a sub-schema that cannot stand alone (a $ref to its root): not checked here
        except Exception:
            return
        if not errors:
            return
        e = min(errors, key=lambda e: len(e.absolute_path))
        inner = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path)
        # types-jsonschema allows validator_value to be unset; a "type" error always
        # carries the schema's types
        wanted = (
            e.validator_value
            if isinstance(e.validator_value, str)
            else " or ".join(map(str, e.validator_value))  # type: ignore[arg-type]
        )
        got = type(e.instance).__name__
        raise self.fail(
            f"world value of {tool}.{path}{inner} is {got} {clip_repr(e.instance, 60)}, but "
            f"{tool}'s output_schema says {wanted}",
            (*loc, *e.absolute_path),
            f"give a value of type {wanted} (quote text, write true/false for booleans), or "
            "change the output_schema",
            expected=f"a {wanted}",
        )

    def free_spans(self, template: str, loc: tuple[Hashable, ...]) -> None:
        """The ``{~ ... ~}`` free spans of a template (:mod:`agentprop._spec.free_spans`)."""
        problem = free_span_problem(template)
        if problem is not None:
            raise self.fail(
                f"template {template!r}: {problem}",
                loc,
                "mark only removable words as free: `{~ words ~}`, balanced, not nested, with no "
                "{slot} or [ ... ] inside (docs/reference.md#free-spans)",
                expected="free spans written as {~ words ~}",
            )

    def decision(self, decision: str, loc: tuple[Hashable, ...]) -> None:
        enum = self.spec.response_contract.decision_enum
        if decision not in enum:
            raise self.fail(
                f"unknown decision {decision!r}",
                loc,
                f"use one of decision_enum: {', '.join(enum)}",
            )

    def _comparisons(self) -> dict[str, tuple[set[str], bool]]:
        """``{variable: (the symbols the tree compares it with, whether it is compared with a
        boolean literal)}``, from one pass over the tree (asked once per variable: a scan per
        variable made a large tree's lint quadratic)."""
        if self._compared is None:
            compared: dict[str, tuple[set[str], bool]] = {}
            for node in self.spec.decision_tree:
                for b in node.branches:
                    for atom in atoms(b.clause):
                        if isinstance(atom, Compare) and isinstance(atom.left, WhenPath):
                            symbols, literal_bools = compared.setdefault(
                                atom.left.dotted, (set(), False)
                            )
                            if isinstance(atom.right, Symbol):
                                symbols.add(atom.right.name)
                            elif (
                                isinstance(atom.right, WhenLiteral)
                                and isinstance(atom.right.value, bool)
                                and not literal_bools
                            ):
                                compared[atom.left.dotted] = (symbols, True)
            self._compared = compared
        return self._compared

    def yaml_booleans(self, name: str, var: VariableBinding, loc: tuple[Hashable, ...]) -> None:
        """YAML 1.1 reads unquoted yes/no/on/off as booleans. When the spec compares this
        variable with symbols (``user_confirmation == yes``) but a binding value is a boolean,
        the user almost certainly meant the word."""
        symbols, literal_bools = self._comparisons().get(name, (set(), False))
        if not symbols or literal_bools:
            return
        tables: list[tuple[tuple[Hashable, ...], Mapping[Hashable, Any]]] = []
        if var.utterance is not None:
            tables.append(((*loc, "utterance"), var.utterance))
        if var.withhold is not None:
            tables.append(((*loc, "withhold"), var.withhold))
        if var.followup is not None:
            tables.append(((*loc, "followup", "values"), var.followup.values))
        if var.world is not None and var.world.values is not None:
            tables.append(((*loc, "world", "values"), var.world.values))
        for where, table in tables:
            for value in table:
                if isinstance(value, bool):
                    words = {True: "yes/on/true", False: "no/off/false"}[value]
                    raise self.fail(
                        f"value {value!r} of variable {name!r} is a YAML boolean, but the spec "
                        f"compares {name} with the words {', '.join(sorted(symbols))}",
                        (*where, value),
                        'quote the key: write "yes": / "no": (YAML reads unquoted '
                        f"{words} as a boolean)",
                        key=True,
                    )

    def policies(self) -> None:
        """The ``policies:`` section: known policy ids and nodes, a mode/tau the oracle accepts."""
        known = [p.id for p in self.spec.policies]
        leaves = set(self.spec.leaf_ids())
        for pid, entry in self.b.policies.items():
            loc: tuple[Hashable, ...] = ("policies", pid)
            if pid not in known:
                import difflib

                close = difflib.get_close_matches(pid, known, n=1)
                raise self.fail(
                    f"unknown policy {pid!r}: spec {self.spec.spec_id} declares no such policy",
                    loc,
                    (f"did you mean {close[0]!r}? " if close else "")
                    + f"policies of the spec: {', '.join(known) or '(none)'}",
                    key=True,
                )
            for i, n in enumerate(entry.nodes or []):
                if n not in self.spec.nodes_by_id and n not in leaves:
                    raise self.fail(
                        f"policies.{pid}.nodes names unknown node {n!r}",
                        (*loc, "nodes", i),
                        "use node ids of the decision tree",
                    )
            if entry.mode == "sprt" and entry.tau is not None and not 0.5 < entry.tau < 1.0:
                raise self.fail(
                    f"policies.{pid}: mode sprt needs 0.5 < tau < 1, got tau {entry.tau}",
                    (*loc, "tau"),
                    "for tau 1.0 use `mode: zero-failure` (certification by clean runs), "
                    "or give a tau below 1",
                )
            if entry.mode == "sprt" and entry.runs is not None:
                raise self.fail(
                    f"policies.{pid}: `runs` is not used by mode sprt (it stops when "
                    "the evidence suffices)",
                    (*loc, "runs"),
                    "remove `runs`, or use `mode: zero-failure` / `mode: fixed`",
                )
            if (
                entry.mode is None
                and entry.tau is not None
                and entry.tau <= 0.5
                and entry.safety is not True
            ):
                raise self.fail(
                    f"policies.{pid}: tau {entry.tau} is too low for the sequential test "
                    "(it needs tau > 0.5)",
                    (*loc, "tau"),
                    "give `mode: fixed` with `runs:` for a low bar, or a tau above 0.5",
                )

    def languages(self) -> None:
        """``languages:``: language codes, each once, and every template written in one of them
        (whether each has a phrase pack is checked where packs are known: ``check_languages``
        in :mod:`agentprop._decide.choices`)."""
        declared = self.b.languages
        if declared is None:
            return
        if not declared:
            raise self.fail(
                "`languages:` is empty",
                ("languages",),
                "list the languages users write in, e.g. `languages: [en, zh]`, or remove the key",
            )
        for i, code in enumerate(declared):
            if not _LANGUAGE_CODE.match(code):
                raise self.fail(
                    f"languages[{i}] {code!r} is not a language code",
                    ("languages", i),
                    "write codes such as en or zh",
                    expected="a language code (en, zh, de, pt-BR)",
                )
            if code in declared[:i]:
                raise self.fail(
                    f"language {code!r} is listed twice",
                    ("languages", i),
                    "list each language once",
                )
        for loc, template in self.b.templates():
            lang = language_of(template)
            if lang not in declared:
                raise self.fail(
                    f"template {template!r} is written in {lang}, which `languages:` "
                    f"({', '.join(declared)}) does not declare",
                    loc,
                    f"add {lang} to `languages:`, or write the template in {' or '.join(declared)}",
                )

    def outcome_key(
        self, key: str, mapped: str | list[str] | dict[str, str | list[str]], leaves: set[str]
    ) -> None:
        """An ``outcomes:`` key of the form ``LEAF<-VIA``: a terminal node, a node with a branch
        to it, and one decision or a list of the decisions allowed there."""
        leaf, via = key.split("<-", 1)
        if leaf not in leaves:
            raise self.fail(
                f"outcomes key {key!r} names {leaf!r}, which is not a terminal node of the tree",
                ("outcomes", key),
                f"write LEAF<-VIA with a terminal node: {', '.join(sorted(leaves))}",
                key=True,
            )
        node = self.spec.nodes_by_id.get(via)
        if node is None or not any(br.next == leaf for br in node.branches):
            entering = sorted(
                n.node_id
                for n in self.spec.decision_tree
                if any(br.next == leaf for br in n.branches)
            )
            raise self.fail(
                f"outcomes key {key!r}: {via!r} has no branch to {leaf}",
                ("outcomes", key),
                f"nodes entering {leaf}: {', '.join(entering) or '(none)'}",
                key=True,
            )
        if isinstance(mapped, dict):
            raise self.fail(
                f"outcomes.{key} must be one decision (or a list of the decisions "
                "allowed), not a mapping",
                ("outcomes", key),
                "write `LEAF<-VIA: DECISION` or `LEAF<-VIA: [DECISION, OTHER]`",
            )
        self.decisions(mapped, ("outcomes", key))

    def decisions(self, mapped: str | list[str], loc: tuple[Hashable, ...]) -> None:
        """One decision, or a non-empty list of distinct ones, each in the enum."""
        if isinstance(mapped, str):
            self.decision(mapped, loc)
            return
        if not mapped:
            raise self.fail(
                "an empty list of decisions allows nothing",
                loc,
                "list the decisions allowed there, the expected one first",
            )
        for i, d in enumerate(mapped):
            if d in mapped[:i]:
                raise self.fail(
                    f"decision {d!r} is listed twice", (*loc, i), "list each decision once"
                )
            self.decision(d, (*loc, i))

    def texts(self) -> None:
        """Every template and slot value: within :data:`MAX_TEXT_CHARS`; every template's
        ``{slot}`` defined and its optional parts ``[ ... ]`` not nested; no empty list of
        templates (nothing could be said)."""
        b = self.b
        for name, value in b.slots.items():
            if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
                raise self.fail(
                    f"slot {name!r} is {len(value):,} characters long (agentprop's limit "
                    f"is {MAX_TEXT_CHARS:,})",
                    ("slots", name),
                    "use a shorter value; a long message is tested as well by a "
                    "few hundred characters",
                )
        for loc, template in b.templates():
            if len(template) > MAX_TEXT_CHARS:
                raise self.fail(
                    f"a template of {len(template):,} characters (agentprop's limit "
                    f"is {MAX_TEXT_CHARS:,})",
                    loc,
                    "use a shorter template; a long message is tested as well by a "
                    "few hundred characters",
                )
            depth = 0
            for ch in template:
                depth += {"[": 1, "]": -1}.get(ch, 0)
                if depth > 1:
                    raise self.fail(
                        f"template {clip(template, 120)!r}: optional parts [ ... ] are nested",
                        loc,
                        "write optional parts side by side: `Cancel[ my order][ now]`, not "
                        "`Cancel[ my[ order]]`",
                    )
            for slot in _SLOT.findall(template):
                if slot not in b.slots:
                    raise self.fail(
                        f"template {clip(template, 120)!r} uses slot {{{slot}}}, which "
                        "`slots:` does not define",
                        loc,
                        f"add `{slot}: <default value>` under `slots:`",
                    )
        for name, var in b.variables.items():
            tables = [("utterance", var.utterance or {})] + (
                [("followup", var.followup.values)] if var.followup is not None else []
            )
            for key, table in tables:
                for value, templates in table.items():
                    if templates is not None and not templates:
                        loc = (
                            "variables",
                            name,
                            key,
                            *(("values",) if key == "followup" else ()),
                            value,
                        )
                        raise self.fail(
                            f"variable {name!r}: {key} for value {value!r} is an empty list: "
                            "there is nothing to say",
                            loc,
                            "give at least one template, or remove the value"
                            + (" (null ends the conversation there)" if key == "followup" else ""),
                        )

    def run(self) -> list[str]:
        warnings: list[str] = []
        b, spec = self.b, self.spec
        used = condition_variables(spec)
        self.texts()
        for name, var in b.variables.items():
            loc: tuple[Hashable, ...] = ("variables", name)
            if name not in used:
                import difflib

                close = difflib.get_close_matches(name, used, n=1)
                raise self.fail(
                    f"unknown variable {name!r}: no `when` expression of spec "
                    f"{spec.spec_id} reads it",
                    loc,
                    (f"did you mean {close[0]!r}? " if close else "")
                    + f"variables the spec reads: {', '.join(used)}",
                    key=True,
                )
            self.yaml_booleans(name, var, loc)
            if var.world is not None:
                self.tool(var.world.tool, (*loc, "world", "tool"))
                if var.world.field is not None:
                    self.field(var.world.tool, var.world.field, (*loc, "world", "field"))
                for value, effect in (var.world.values or {}).items():
                    eloc = (*loc, "world", "values", value)
                    modes = spec.tool(var.world.tool).failure_modes
                    if effect.failure is not None and effect.failure not in modes:
                        raise self.fail(
                            f"tool {var.world.tool!r} has no failure mode {effect.failure!r}",
                            (*eloc, "failure"),
                            "use one of its failure_modes: "
                            f"{', '.join(modes) or '(none declared)'}",
                        )
                    for f, value in effect.set.items():
                        self.field(var.world.tool, f, (*eloc, "set"))
                        self.value_type(var.world.tool, f, value, (*eloc, "set", f))
            if var.followup is not None:
                self.decision(var.followup.after_decision, (*loc, "followup", "after_decision"))
            for key in ("utterance", "followup"):
                table = getattr(var, key)
                if table is None:
                    continue
                values = table.values if key == "followup" else table
                for value, templates in values.items():
                    for i, t in enumerate(templates or []):
                        self.free_spans(
                            t, (*loc, key, *(("values",) if key == "followup" else ()), value, i)
                        )
                        for slot in _SLOT.findall(t):
                            if slot not in b.slots:
                                tloc = (
                                    *loc,
                                    key,
                                    *(("values",) if key == "followup" else ()),
                                    value,
                                    i,
                                )
                                raise self.fail(
                                    f"template {t!r} uses slot {{{slot}}}, which "
                                    "`slots:` does not define",
                                    tloc,
                                    f"add `{slot}: <default value>` under `slots:`",
                                )
            if var.withhold is not None:
                for value, slots in var.withhold.items():
                    for s in slots:
                        if s not in b.slots:
                            raise self.fail(
                                f"withheld slot {s!r} is not defined under `slots:`",
                                (*loc, "withhold", value),
                                f"add `{s}: <default value>` under `slots:`",
                            )
        for name in used:
            if name not in b.variables:
                warnings.append(
                    f"variable {name!r} has no binding: paths that need a value "
                    "for it cannot be built"
                )
        for i, t in enumerate(b.utterances):
            self.free_spans(t, ("utterances", i))
        for tool, fields in b.world.items():
            self.tool(tool, ("world", tool))
            for f, value in fields.items():
                self.field(tool, f, ("world", tool, f))
                self.value_type(tool, f, value, ("world", tool, f))
        for tool, pii_fields in b.pii.items():
            self.tool(tool, ("pii", tool))
            for i, f in enumerate(pii_fields):
                self.field(tool, f, ("pii", tool, i))
        for tool in b.handlers:
            self.tool(tool, ("handlers", tool))
        for tool, related in b.relations.items():
            self.tool(tool, ("relations", tool))
            for f in related:
                self.field(tool, f, ("relations", tool, f))
        self.orders()
        leaves = set(spec.leaf_ids())
        for key, mapped in b.outcomes.items():
            if "<-" in key:
                self.outcome_key(key, mapped, leaves)
                continue
            leaf = key
            if leaf not in leaves:
                raise self.fail(
                    f"outcomes names {leaf!r}, which is not a terminal node of the tree",
                    ("outcomes", leaf),
                    f"terminal nodes: {', '.join(sorted(leaves))}",
                )
            if not isinstance(mapped, dict):
                self.decisions(mapped, ("outcomes", leaf))
            else:
                for via, decision in mapped.items():
                    if via not in spec.nodes_by_id:
                        raise self.fail(
                            f"outcomes.{leaf} names unknown node {via!r}",
                            ("outcomes", leaf, via),
                            "use a node id of the decision tree",
                        )
                    self.decisions(decision, ("outcomes", leaf, via))
        for node_id, extra in b.nodes.items():
            if node_id not in spec.nodes_by_id and node_id not in leaves:
                raise self.fail(
                    f"nodes names unknown node {node_id!r}",
                    ("nodes", node_id),
                    "use a node id of the decision tree",
                )
            for t in [*extra.must_call_tools_in_order, *extra.must_not_call]:
                self.tool(t, ("nodes", node_id))
            listed = (
                spec.nodes_by_id[node_id].requirements.must_call_tools_in_order
                if node_id in spec.nodes_by_id
                else []
            )
            for i, t in enumerate(extra.repeat_calls):
                if t not in listed:
                    raise self.fail(
                        f"nodes.{node_id}.repeat_calls names {t!r}, which {node_id}'s "
                        f"must_call_tools_in_order does not list ({', '.join(listed) or 'empty'})",
                        ("nodes", node_id, "repeat_calls", i),
                        "name a tool the node repeats from the node before it, or remove the entry",
                    )
        for cap, node_ids in b.capabilities.items():
            for n in node_ids:
                if n not in spec.nodes_by_id and n not in leaves:
                    raise self.fail(
                        f"capability {cap!r} names unknown node {n!r}",
                        ("capabilities", cap),
                        "use node ids of the decision tree",
                    )
        self.policies()
        self.languages()
        for leaf in spec.leaf_ids():
            if leaf in b.outcomes or any(k.startswith(f"{leaf}<-") for k in b.outcomes):
                continue
            implied, candidates = implied_decision(leaf, spec.response_contract.decision_enum)
            if implied is None:
                warnings.append(
                    f"terminal node {leaf} stands for no single decision "
                    f"({', '.join(candidates) or 'none'}); map it under `outcomes:`"
                )
        return warnings


# ----------------------------------------------------------------------------- response groundings


def _scalars(value: Any) -> list[Any]:
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in _scalars(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _scalars(v)]
    return [] if value is None or isinstance(value, bool) else [value]


def validate_response_section(b: Bindings, spec: Spec, src: YamlSource | None) -> None:
    """The ``response:`` section names fields the response contract declares and grounding
    kinds agentprop knows; raises :class:`BindingsError` at the offending line otherwise."""
    import difflib

    v = _Validator(b, spec, src)
    fields = declared_fields(spec)
    for name, entry in b.response.items():
        kinds = entry if isinstance(entry, list) else (entry.check or [])
        if isinstance(entry, ResponseFieldBinding):
            for source in entry.from_:
                tool, _, out_field = source.partition(".")
                declared = spec.tools_by_name.get(tool)
                props = (
                    (declared.output_schema or {}).get("properties")
                    if declared is not None
                    else None
                )
                if (
                    declared is None
                    or tool == "respond"
                    or not out_field
                    or (isinstance(props, dict) and props and out_field.split(".")[0] not in props)
                ):
                    outputs = [
                        f"{t.name}.{f}"
                        for t in spec.action_tools
                        for f in ((t.output_schema or {}).get("properties") or {})
                    ]
                    raise v.fail(
                        f"response field {name!r} comes `from: {source}`, which is no output "
                        f"field of a tool of {spec.spec_id}",
                        ("response", name, "from"),
                        "write TOOL.FIELD of a tool's output_schema, e.g. "
                        + (", ".join(outputs[:6]) if outputs else "create_ticket.ticket_id"),
                    )
        if name not in fields:
            close = difflib.get_close_matches(name, fields, n=1)
            raise v.fail(
                f"response names field {name!r}, which the response contract of "
                f"{spec.spec_id} does not declare",
                ("response", name),
                (f"did you mean {close[0]!r}? " if close else "")
                + f"declared fields: {', '.join(fields)}",
                key=True,
            )
        for i, kind in enumerate(kinds):
            if kind not in GROUNDING_KINDS:
                close = difflib.get_close_matches(kind, list(GROUNDING_KINDS), n=1)
                raise v.fail(
                    f"unknown grounding {kind!r} for response field {name!r}",
                    ("response", name, i),
                    (f"did you mean {close[0]!r}? " if close else "")
                    + f"groundings: {', '.join(GROUNDING_KINDS)}",
                )


def find_bindings(spec_path: Path) -> Path | None:
    """The bindings file next to a spec (or in its directory), if any."""
    base = spec_path if spec_path.is_dir() else spec_path.parent
    for d in (base, base.parent):
        for name in BINDINGS_FILE_NAMES:
            if (d / name).is_file():
                return d / name
    return None


def load_bindings(path: str | Path, spec: Spec) -> Bindings:
    """Load a bindings file and validate it against ``spec``.

    Raises :class:`~agentprop.errors.BindingsError` naming the file, line, what is wrong and
    the fix (unknown variable, tool, field, failure mode, decision or slot).
    """
    p = Path(path)
    src = load_yaml(p, error=BindingsError)
    if src.duplicate_keys:
        loc, (line, col) = src.duplicate_keys[0]
        raise BindingsError(
            f"duplicate key {clip_repr(loc[-1])} in {describe_loc(loc[:-1])}",
            location=SourceLocation(p, line, col),
            expected="each key once per mapping",
            fix="merge the two entries into one, or remove one (YAML would "
            "silently keep only the last)",
        )
    data = src.data if src.data is not None else {}
    if not isinstance(data, dict):
        raise BindingsError(
            "a bindings file must be a mapping at the top level",
            location=SourceLocation(p, 1, 1),
            fix="start with keys such as `variables:`, `slots:`, `world:`",
        )
    try:
        b = Bindings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        loc = tuple(
            x
            for x in err["loc"]
            if not (isinstance(x, str) and x.startswith(("function-", "list[", "str")))
        )
        where = ".".join(clip(str(x), 60) for x in loc) or "the top level"
        fix = "see docs/reference.md#bindings for the format"
        if err["type"] == "extra_forbidden":
            fix = f"remove or rename {loc[-1]!r}; " + fix
        raise BindingsError(
            f"invalid bindings at {clip(where, 200)}: {clip(err['msg'], 300)}",
            location=src.location(loc, key=err["type"] == "extra_forbidden"),
            fix=fix,
        ) from None
    b._path = p
    b._src = src
    b._warnings = _Validator(b, spec, src).run()
    validate_response_section(b, spec, src)
    return b


def empty_bindings(spec: Spec) -> Bindings:
    b = Bindings()
    b._warnings = _Validator(b, spec, None).run()
    return b


def node_tools(spec: Spec, bindings: Bindings | None, node_id: str) -> list[str]:
    """The tools node ``node_id`` must call in order: the spec's, then those the bindings add."""
    node = spec.nodes_by_id.get(node_id)
    tools = list(node.requirements.must_call_tools_in_order) if node is not None else []
    extra = bindings.nodes.get(node_id) if bindings is not None else None
    if extra is not None:
        tools += [t for t in extra.must_call_tools_in_order if t not in tools]
    return tools
