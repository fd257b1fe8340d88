"""The structured ``respond`` output as a pydantic model built from the response contract.

Required fields come from ``response_contract.required_json_fields``, their types from the
``respond`` tool's input schema where it declares them (read as the adapters read it,
:mod:`agentprop._spec.python_types`); ``decision`` is a ``Literal`` of
``decision_enum``; optional fields may be present or absent. Extra fields are allowed (the
contract lists what must be there, not everything that may).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from agentprop._spec.model import Spec, derived
from agentprop._spec.python_types import model_name, python_type


def _respond_schema(spec: Spec) -> dict[str, Any]:
    tool = spec.tools_by_name.get("respond")
    if tool is not None and tool.input_schema.get("type") == "object":
        return tool.input_schema
    return {"type": "object", "properties": {}}


def _build_model(spec: Spec) -> type[BaseModel]:
    contract = spec.response_contract
    props: dict[str, Any] = _respond_schema(spec).get("properties", {})
    fields: dict[str, Any] = {}
    title = model_name(spec.spec_id, "response")
    for name in contract.required_json_fields:
        annotation = python_type(props.get(name), model_name(title, name))
        if name == "decision":
            annotation = Literal[tuple(contract.decision_enum)]
        fields[name] = (annotation, Field(...))
    for name in contract.optional_json_fields:
        if name in fields:
            continue
        fields[name] = (python_type(props.get(name), model_name(title, name)) | None, Field(None))
    return create_model(title, __config__=ConfigDict(extra="allow"), **fields)


def response_model(spec: Spec) -> type[BaseModel]:
    """The pydantic model of a valid ``respond`` call for ``spec``."""
    return derived(spec, "response_model", lambda: _build_model(spec))


def validate_response(
    spec: Spec, payload: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """``(validated dict, None)`` or ``(None, readable error)``."""
    return validate_with(response_model(spec), payload)


def validate_with(
    model_type: type[BaseModel], payload: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`validate_response` against a response model built once (:func:`response_model`)."""
    try:
        model = model_type.model_validate(payload)
    except ValidationError as exc:
        problems = []
        for e in exc.errors(include_url=False):
            where = ".".join(map(str, e["loc"])) or "response"
            problems.append(f"{where}: {e['msg']}")
        return None, "; ".join(problems)
    return model.model_dump(exclude_none=False, exclude_unset=True), None


def respond_tool_schema(spec: Spec) -> dict[str, Any]:
    """The JSON Schema of the ``respond`` tool as a model should see it (for API agents)."""
    schema = dict(_respond_schema(spec))
    props = dict(schema.get("properties", {}))
    contract = spec.response_contract
    props["decision"] = {
        **props.get("decision", {"type": "string"}),
        "enum": list(contract.decision_enum),
    }
    for name in contract.required_json_fields:
        props.setdefault(name, {"type": "string"})
    schema["properties"] = props
    schema["required"] = list(contract.required_json_fields)
    schema["type"] = "object"
    return schema
