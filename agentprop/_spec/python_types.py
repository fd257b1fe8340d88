"""JSON Schema to Python types: the one reading of a schema that the ``respond`` model and the
typed tools of :mod:`agentprop.adapters` share, so a field is typed the same by both.

``Literal`` for an enum or a const, a pydantic model for an object with properties (required
ones required, the others optional), ``list[...]`` for an array, ``X | None`` where the type
admits ``null``, and ``Any`` for what the schema leaves open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, create_model

__all__ = ["model_name", "python_type"]


def model_name(*parts: str) -> str:
    return (
        "".join(
            p[:1].upper() + p[1:] for part in parts for p in part.replace("-", "_").split("_") if p
        )
        or "Value"
    )


def python_type(schema: Mapping[str, Any] | None, name: str = "Value") -> Any:
    """The Python type of a JSON Schema: ``Literal`` for enums, a pydantic model for an object
    with properties (required ones required), ``list[...]`` for arrays, ``Any`` for what JSON
    Schema leaves open."""
    if not schema:
        return Any
    if schema.get("enum"):
        return Literal[tuple(schema["enum"])]
    if "const" in schema:
        return Literal[schema["const"]]
    kind = schema.get("type")
    if isinstance(kind, list):
        options = [python_type({**schema, "type": k}, name) for k in kind if k != "null"]
        base = options[0] if len(options) == 1 else Any
        return Optional[base] if "null" in kind else base  # noqa: UP045 (a type built at run time)
    if kind == "string":
        return str
    if kind == "integer":
        return int
    if kind == "number":
        return float
    if kind == "boolean":
        return bool
    if kind == "array":
        # built at run time from the schema; mypy reads list[...] as a static type
        return list[python_type(schema.get("items"), name + "Item")]  # type: ignore[misc]
    if kind == "object" or "properties" in schema:
        props: Mapping[str, Any] = schema.get("properties") or {}
        if not props:
            return dict[str, Any]
        required = set(schema.get("required") or [])
        fields: dict[str, Any] = {}
        for prop, sub in props.items():
            annotation = python_type(sub, model_name(name, prop))
            desc = sub.get("description") if isinstance(sub, Mapping) else None
            if prop in required:
                fields[prop] = (annotation, Field(..., description=desc))
            else:
                fields[prop] = (Optional[annotation], Field(None, description=desc))  # noqa: UP045 (a type built at run time)
        extra: Literal["forbid", "allow"] = (
            "forbid" if schema.get("additionalProperties") is False else "allow"
        )
        return create_model(model_name(name), __config__=ConfigDict(extra=extra), **fields)
    return Any
