"""Framework adapters: a spec's tools as typed Python callables bound to the current trial.

:func:`tool_functions` makes one typed function per tool (and ``respond``), with a docstring from
the spec; inside :func:`bind` a call acts on the running trial's world through its
:class:`~agentprop.TurnContext`, so it is recorded, validated and limited like any call. A failed
call raises :class:`~agentprop.ToolError`. Per framework: :mod:`agentprop.adapters.pydantic_ai`,
:mod:`agentprop.adapters.langgraph`, :mod:`agentprop.adapters.openai_agents`.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import keyword
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Optional

from pydantic import BaseModel, Field

from agentprop._agents.runtime import TurnContext
from agentprop._spec.model import Spec, Tool
from agentprop._spec.python_types import model_name, python_type
from agentprop._spec.response import respond_tool_schema
from agentprop.errors import InvalidArgument, ToolError

_current: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "agentprop_adapter_turn", default=None
)


@contextlib.contextmanager
def bind(ctx: TurnContext | Any) -> Iterator[None]:
    """Within this block (and tasks and threads that copy its context), the functions of
    :func:`tool_functions` act on ``ctx``: the turn the runtime is running."""
    token = _current.set(ctx)
    try:
        yield
    finally:
        _current.reset(token)


def current_turn() -> TurnContext:
    """The turn bound by :func:`bind` (an :class:`InvalidArgument` outside one)."""
    ctx: TurnContext | None = _current.get()  # bind() takes duck-typed contexts too
    if ctx is None:
        raise InvalidArgument(
            "an agentprop tool function was called outside a turn: call the framework inside "
            "`with agentprop.adapters.bind(ctx):` in your agent's turn(message, ctx)"
        )
    return ctx


def tool_output_text(value: Any) -> str:
    """A tool's output as the text a model reads: JSON (not Python's ``str()`` of a dict)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def tool_error_text(error: ToolError) -> str:
    """A tool error as the text a model reads: ``KIND: message`` (the kind tells it whether
    retrying can help; the text is never valid JSON, so it cannot pass for an output)."""
    return f"{error.kind}: {error.message}"


def _plain(value: Any) -> Any:
    """Arguments as JSON: models dumped without the optional fields left out."""
    if isinstance(value, BaseModel):
        return {k: _plain(v) for k, v in value.model_dump(exclude_unset=True).items()}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _docstring(description: str, properties: Mapping[str, Any]) -> str:
    lines = [description.strip() or "A tool of the spec."]
    described = [
        (k, v.get("description"))
        for k, v in properties.items()
        if isinstance(v, Mapping) and v.get("description")
    ]
    if described:
        lines += ["", "Args:"] + [f"    {k}: {d}" for k, d in described]
    return "\n".join(lines)


def typed_function(
    name: str,
    description: str,
    input_schema: Mapping[str, Any],
    call: Callable[[dict[str, Any]], Any],
    *,
    is_async: bool = False,
) -> Callable[..., Any]:
    """A function named ``name`` whose keyword parameters, types and docstring come from
    ``input_schema`` and ``description``; calling it calls ``call(arguments)`` with the
    arguments as JSON (optional ones left out unless given)."""
    props: Mapping[str, Any] = input_schema.get("properties") or {}
    required = set(input_schema.get("required") or [])
    params: list[inspect.Parameter] = []
    annotations: dict[str, Any] = {}
    for prop, sub in props.items():
        if not prop.isidentifier() or keyword.iskeyword(prop):
            raise InvalidArgument(
                f"tool {name}: property {prop!r} cannot be a Python parameter name; give the "
                "framework the tool's JSON Schema instead"
            )
        annotation = python_type(sub, model_name(name, prop))
        desc = sub.get("description") if isinstance(sub, Mapping) else None
        if desc:
            annotation = Annotated[annotation, Field(description=desc)]
        if prop in required:
            params.append(
                inspect.Parameter(prop, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
            )
        else:
            annotation = Optional[annotation]  # noqa: UP045 (a type built at run time)
            params.append(
                inspect.Parameter(
                    prop, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
                )
            )
        annotations[prop] = annotation
    # required parameters first, as Python requires of a signature
    params.sort(key=lambda p: p.default is not inspect.Parameter.empty)

    def arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: _plain(v) for k, v in kwargs.items() if v is not None or k in required}

    if is_async:

        async def function(**kwargs: Any) -> Any:
            return call(arguments(kwargs))

    else:
        # the sync variant of the async one above, on purpose
        def function(**kwargs: Any) -> Any:  # type: ignore[misc]
            return call(arguments(kwargs))

    function.__name__ = function.__qualname__ = name
    function.__doc__ = _docstring(description, props)
    # read by inspect; typeshed does not declare it
    function.__signature__ = inspect.Signature(params, return_annotation=Any)  # type: ignore[attr-defined]
    function.__annotations__ = {**annotations, "return": Any}
    return function


def _tool_call(tool: str) -> Callable[[dict[str, Any]], Any]:
    def call(args: dict[str, Any]) -> Any:
        return current_turn().call(tool, **args)

    return call


def _respond_call(args: dict[str, Any]) -> Any:
    return current_turn().respond(**args)


RESPOND_DESCRIPTION = (
    "End the turn with the structured response (the response contract); an invalid response "
    "raises a tool error you may correct."
)


def tool_functions(
    spec: Spec, *, include_respond: bool = True, is_async: bool = False
) -> list[Callable[..., Any]]:
    """One typed function per tool of ``spec`` (and ``respond``), acting on the turn bound
    with :func:`bind`. ``is_async``: ``async def`` functions (for frameworks that run sync
    tools on threads that do not carry the caller's context)."""
    out = [
        typed_function(t.name, t.description, t.input_schema, _tool_call(t.name), is_async=is_async)
        for t in spec.action_tools
    ]
    if include_respond:
        respond: Tool | None = spec.tools_by_name.get("respond")
        description = (
            respond.description + " " if respond is not None and respond.description else ""
        ) + RESPOND_DESCRIPTION
        out.append(
            typed_function(
                "respond", description, respond_tool_schema(spec), _respond_call, is_async=is_async
            )
        )
    return out


__all__ = [
    "RESPOND_DESCRIPTION",
    "bind",
    "current_turn",
    "python_type",
    "tool_error_text",
    "tool_functions",
    "tool_output_text",
    "typed_function",
]
