"""Which checks apply to which response field: the grounding kinds and their defaults.

A bindings file may say, per response field, what must be true of what it states
(``response: {steps: [list_items]}``); fields it does not name get the defaults derived from the
spec by :func:`default_grounding`. The checks themselves are contracts
(:mod:`agentprop._judge.grounded`); :func:`agentprop._judge.properties.response_verdicts` applies
them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from typing import Any

from pydantic import BaseModel, Field

from agentprop._spec.model import Spec

GROUNDING_KINDS: dict[str, str] = {
    "node": "the value is a node the scenario is at on that turn (node_id_matches)",
    "tool_calls": "the value lists exactly the tools the turn called, in order "
    "(tool_actions_match)",
    "tool_output": "evidence: every tool, number, id and quoted value it cites comes from a tool "
    "output; it may disclaim tool output only on a turn that called no tool (evidence_grounded)",
    "numbers": "every number it states comes from a tool output or the user's turns",
    "ids": "every identifier it states (O-1001, RB-12, PLAN-BASIC) comes from a tool "
    "output or the user's turns",
    "quoted": "every quoted value it states appears in a tool output or the user's turns",
    "list_items": "every item of a list (an array, or numbered / bulleted lines) matches, fuzzily, "
    "a string, list item or line of a tool output or the user's turns",
    "value": "the whole value (each element of a list) is a value of a tool "
    "output or the user's turns",
}
"""Grounding kinds a bindings file may give a response field (``response:``), and what each
promises."""

TEXT_GROUNDINGS = ("numbers", "ids", "quoted", "list_items", "value")
"""The kinds :func:`agentprop._judge.grounded.response_grounded` checks."""


class ResponseGrounding(BaseModel):
    """Which groundings apply to which response field (resolved: defaults plus bindings)."""

    fields: dict[str, list[str]] = Field(default_factory=dict)
    context: list[str] = Field(default_factory=list)
    """Values of the bindings' ``context`` (the agent is given them, so they ground too)."""
    provenance: dict[str, list[str]] = Field(default_factory=dict)
    """Response field -> the tool output fields (``create_ticket.ticket_id``) its value must be
    one of, once such a tool was called (:func:`default_provenance`, or the bindings' ``from:``)."""
    today: date | None = None
    """The date relative dates are read against (:func:`reference_date` of the bindings'
    ``context``): a user's "a week ago" grounds the date a week before it."""


_REFERENCE_KEYS = re.compile(r"today|current_date|as_of|now", re.I)


def reference_date(context: Mapping[str, Any]) -> date | None:
    """The date a scenario's relative dates are read against: a runtime-context value named
    ``today``, ``current_date``, ``as_of`` or ``now`` holding an ISO date (``None``: relative
    dates are not written)."""
    for key, value in context.items():
        if _REFERENCE_KEYS.search(str(key)) and isinstance(value, (str, date)):
            try:
                return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])
            except ValueError:
                continue
    return None


def declared_fields(spec: Spec) -> list[str]:
    """The fields the response contract declares: required ones first, then optional ones."""
    contract = spec.response_contract
    return list(dict.fromkeys([*contract.required_json_fields, *contract.optional_json_fields]))


def _numeric(schema: dict[str, Any] | None) -> bool:
    if not schema:
        return False
    kind = schema.get("type")
    if kind == "array":
        return _numeric(schema.get("items"))
    return kind in ("number", "integer")


def default_grounding(spec: Spec) -> dict[str, list[str]]:
    """Per declared response field, the groundings that apply when the bindings say nothing:
    ``node_id`` -> node, ``tool_actions`` -> tool_calls, ``evidence`` -> tool_output,
    ``user_message`` -> numbers, ids, quoted, list_items; a field named ``*_id`` / ``*_ids`` ->
    value; a field the ``respond`` schema types as a number (or a list of numbers) -> numbers;
    any other field (``decision``, free-form fields such as ``sql``) -> nothing."""
    respond = spec.tools_by_name.get("respond")
    props: dict[str, Any] = (
        respond.input_schema.get("properties", {}) if respond is not None else {}
    )
    fixed = {
        "node_id": ["node"],
        "tool_actions": ["tool_calls"],
        "evidence": ["tool_output"],
        "user_message": ["numbers", "ids", "quoted", "list_items"],
        "decision": [],
    }
    out: dict[str, list[str]] = {}
    for name in declared_fields(spec):
        if name in fixed:
            out[name] = list(fixed[name])
        elif name.endswith(("_id", "_ids")):
            out[name] = ["value"]
        elif _numeric(props.get(name)):
            out[name] = ["numbers"]
        else:
            out[name] = []
    return out


def default_provenance(spec: Spec) -> dict[str, list[str]]:
    """Per id-like response field (``*_id``, ``*_ids``): the action tools whose output schema has
    a top-level field of the same name (``ticket_id`` -> ``create_ticket.ticket_id``). A field no
    output has at the top level has none (its ``value`` grounding still applies)."""
    out: dict[str, list[str]] = {}
    for name in declared_fields(spec):
        if not name.endswith(("_id", "_ids")):
            continue
        own = [name, name[:-1]] if name.endswith("_ids") else [name]
        sources = [
            f"{t.name}.{f}"
            for t in spec.action_tools
            for f in own
            if isinstance(t.output_schema, dict) and f in (t.output_schema.get("properties") or {})
        ]
        if sources:
            out[name] = sources
    return out
