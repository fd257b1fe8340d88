"""Issue #23 item 5: field provenance.

``value`` grounding accepts a value any tool returned, so a ``respond.ticket_id`` filled with the
id of a *similar* ticket passed. By default an id-like field is grounded against the tool output
field of the same name; the bindings can name the source (``response: {ticket_id: {from:
create_ticket.ticket_id}}``); a value from the wrong tool fails with both values shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentprop._judge.grounded import field_provenance, response_grounded
from agentprop._scenario.trace import ToolCall, Trace, Turn
from agentprop._spec.bindings import load_bindings
from agentprop._spec.grounding import default_provenance
from agentprop._spec.load import load_spec
from agentprop.errors import BindingsError

SIMILAR = {"similar": [{"ticket_id": "INC-2001", "summary": "VPN drops", "state": "closed"}]}
CREATED = {"ticket_id": "INC-3005"}


def _trace(ticket_id: Any, *, created: bool = True) -> Trace:
    calls = [ToolCall(name="find_similar_tickets", result=SIMILAR)]
    if created:
        calls.append(ToolCall(name="create_ticket", result=CREATED))
    return Trace(
        turns=[
            Turn(
                index=0,
                user_message="VPN is down",
                tool_calls=calls,
                response={"decision": "TICKET_CREATED", "ticket_id": ticket_id},
            )
        ]
    )


def test_value_grounding_alone_accepts_the_wrong_tools_id() -> None:
    """The old check: INC-2001 is a value of some tool output, so it passed."""
    assert response_grounded(_trace("INC-2001"), "ticket_id", ["value"]).passed


def test_a_value_from_the_wrong_tool_fails_showing_both_values() -> None:
    verdict = field_provenance(
        _trace("INC-2001"), "ticket_id", ["create_ticket.ticket_id"], clause="policies.P3"
    )
    assert not verdict.passed
    assert verdict.detail == "ticket_id:from"
    assert verdict.explanation == (
        "turn 1: respond.ticket_id is 'INC-2001', but create_ticket.ticket_id returned 'INC-3005' "
        "('INC-2001' is find_similar_tickets's output, the wrong tool)"
    )
    assert field_provenance(_trace("inc-3005"), "ticket_id", ["create_ticket.ticket_id"]).passed
    # before the source tool answered, provenance has nothing to say (value grounding does)
    assert field_provenance(
        _trace("INC-2001", created=False), "ticket_id", ["create_ticket.ticket_id"]
    ).passed


def _spec(tmp_path: Path) -> Path:
    (tmp_path / "spec.yaml").write_text(
        """spec_id: tickets_v1
title: Tickets
tools:
- name: find_similar_tickets
  input_schema: {type: object, properties: {q: {type: string}}}
  output_schema: {type: object, properties: {similar: {type: array}}}
- name: create_ticket
  input_schema: {type: object, properties: {summary: {type: string}}}
  output_schema: {type: object, properties: {ticket_id: {type: string}}}
- name: respond
  input_schema: {type: object, properties: {decision: {type: string}, ticket_id: {type: string}}}
response_contract:
  required_json_fields: [decision]
  optional_json_fields: [ticket_id]
  decision_enum: [TICKET_CREATED]
decision_tree:
- node_id: N1
  requirements: {must_call_tools_in_order: [find_similar_tickets, create_ticket]}
  branches:
  - {when: otherwise, next: END_TICKET_CREATED}
""",
        encoding="utf-8",
    )
    return tmp_path / "spec.yaml"


def test_an_id_field_is_grounded_against_the_output_field_of_its_name_by_default(
    tmp_path: Path,
) -> None:
    spec = load_spec(_spec(tmp_path))
    assert default_provenance(spec) == {"ticket_id": ["create_ticket.ticket_id"]}


def test_bindings_name_the_source_and_a_wrong_source_is_a_bindings_error(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path))
    path = tmp_path / "agentprop.yaml"
    path.write_text(
        "version: 1\nspec: spec.yaml\nresponse:\n  ticket_id: {from: "
        "create_ticket.ticket_id, check: [value]}\n",
        encoding="utf-8",
    )
    grounding = load_bindings(path, spec).response_grounding(spec)
    assert grounding.provenance["ticket_id"] == ["create_ticket.ticket_id"] and grounding.fields[
        "ticket_id"
    ] == ["value"]
    path.write_text(
        "version: 1\nspec: spec.yaml\nresponse:\n  ticket_id: {from: create_ticket.case_id}\n",
        encoding="utf-8",
    )
    with pytest.raises(
        BindingsError,
        match=r"agentprop.yaml:4:.*`from: create_ticket.case_id`, which is no output field",
    ) as info:
        load_bindings(path, spec)
    assert "create_ticket.ticket_id" in str(info.value)
