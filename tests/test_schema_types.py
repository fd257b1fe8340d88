"""One reading of JSON Schema types: the ``respond`` model and the adapters' typed ``respond``
tool type a nullable field and a nested object the same way (agentprop._spec.python_types)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agentprop._spec.load import load_spec_text
from agentprop._spec.response import response_model
from agentprop.adapters import tool_functions

RUNBOOK = Path(__file__).parent / "data" / "promises" / "runbook" / "spec.yaml"

EXTRA_FIELDS = """      note:
        type: [string, "null"]
      refund:
        type: object
        properties:
          amount: {type: number}
          currency: {type: string}
        required: [amount]
"""


def _spec() -> Any:
    text = RUNBOOK.read_text(encoding="utf-8")
    text = text.replace(
        "    properties:\n      node_id:\n",
        "    properties:\n" + EXTRA_FIELDS + "      node_id:\n",
        1,
    )
    text = text.replace(
        "  optional_json_fields:\n", "  optional_json_fields:\n  - note\n  - refund\n", 1
    )
    return load_spec_text(text, name=str(RUNBOOK))


def _accepts(annotation: Any, value: Any) -> bool:
    try:
        TypeAdapter(annotation).validate_python(value)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(
    ("field", "value", "valid"),
    [
        ("note", None, True),
        ("note", "called the on-call engineer", True),
        ("note", 5, False),
        ("refund", {"amount": 2.5}, True),
        ("refund", {"amount": 2.5, "currency": "EUR"}, True),
        ("refund", {"amount": "a lot"}, False),
        ("refund", {"currency": "EUR"}, False),
    ],
)
def test_the_respond_model_and_the_adapter_type_a_field_alike(
    field: str, value: Any, valid: bool
) -> None:
    spec = _spec()
    respond = next(f for f in tool_functions(spec) if f.__name__ == "respond")
    from_adapter = inspect.signature(respond).parameters[field].annotation
    from_model = response_model(spec).model_fields[field].annotation
    assert _accepts(from_adapter, value) is valid
    assert _accepts(from_model, value) is valid
