"""What an agent did: the trace of one conversation.

A :class:`Trace` is a list of :class:`Turn` (one per user message). Each turn holds its own tool
calls (per-turn slices, never cumulative; every call recorded exactly once), the validated
``respond`` output, any free text, and errors. Traces round-trip through JSON.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentprop._util.text import valid_unicode, valid_unicode_value

ErrorKind = Literal[
    "agent_exception",
    "timeout",
    "no_respond",
    "invalid_respond",
    "unknown_tool",
    "invalid_arguments",
    "limit_exceeded",
    "respond_twice",
    "budget_exhausted",
    "protocol",
    "cache_miss",
    "cache_error",
    "missing_api_key",
    "auth",
    "api_unavailable",
    "infrastructure",
]

INFRASTRUCTURE_KINDS: frozenset[str] = frozenset(
    {
        "budget_exhausted",
        "cache_miss",
        "cache_error",
        "missing_api_key",
        "auth",
        "api_unavailable",
        "infrastructure",
    }
)
"""Run errors that are not the agent's (see :class:`agentprop.errors.InfrastructureError`): a
run that meets one is never judged, memoised, shrunk or saved to the corpus."""


class ToolCall(BaseModel):
    """One call of a tool: its arguments, and either a result or an error. A model agent's calls
    of one tool in a run, answered with the world's default output, share one ``result`` object
    (the output is the same each time): copy it before changing it."""

    model_config = ConfigDict(frozen=False)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: str | None = None
    error_kind: str | None = None
    turn_index: int = 0
    step: int = 0
    """Position of the call within its turn (0-based)."""

    @property
    def ok(self) -> bool:
        return self.error is None


class RunError(BaseModel):
    """Something that went wrong in a run: recorded, never raised through the runner."""

    kind: ErrorKind
    message: str
    turn_index: int | None = None
    traceback: str | None = None


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    """Dollars of the priced calls (replays cost nothing)."""
    model_calls: int = 0
    unpriced_calls: int = 0
    """Calls of a model without a price: their cost is unknown, not counted in ``cost_usd``."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            model_calls=self.model_calls + other.model_calls,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
        )


class Turn(BaseModel):
    """One user message and everything the agent did in answer to it."""

    index: int
    user_message: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    response: dict[str, Any] | None = None
    """The validated ``respond`` arguments (``None`` if the agent never responded validly)."""
    raw_response: dict[str, Any] | None = None
    """The last ``respond`` arguments as the agent sent them (valid or not)."""
    text: str = ""
    """Free text the agent produced outside ``respond`` (e.g. a model's text blocks)."""
    errors: list[RunError] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0

    @property
    def decision(self) -> str | None:
        return None if self.response is None else self.response.get("decision")

    @property
    def user_visible_text(self) -> str:
        """What the user sees: ``user_message`` of the response plus free text."""
        parts = [self.text] if self.text else []
        if self.response is not None and isinstance(self.response.get("user_message"), str):
            parts.append(self.response["user_message"])
        return "\n".join(parts)

    def tool_names(self) -> list[str]:
        return [c.name for c in self.tool_calls]

    def calls(self, name: str) -> list[ToolCall]:
        return [c for c in self.tool_calls if c.name == name]


class Trace(BaseModel):
    """The record of one run of an agent over a conversation."""

    case_id: str = ""
    trial: int = 0
    agent: str = ""
    spec_id: str = ""
    turns: list[Turn] = Field(default_factory=list)
    errors: list[RunError] = Field(default_factory=list)
    duration_s: float = 0.0
    world_seed: int | None = None
    canaries: dict[str, str] = Field(default_factory=dict)
    """Canary values planted in the world, ``{field path: value}``, for leak checks."""

    @property
    def usage(self) -> Usage:
        total = Usage()
        for t in self.turns:
            total = total + t.usage
        return total

    @property
    def errored(self) -> bool:
        """True when the run broke (agent exception, timeout, protocol violation)."""
        return bool(self.errors) or any(t.errors for t in self.turns)

    def all_errors(self) -> list[RunError]:
        return [*self.errors, *(e for t in self.turns for e in t.errors)]

    @property
    def infrastructure_error(self) -> RunError | None:
        """The first error of this run that is not the agent's (a cache miss in replay-only
        mode, no API key, a refused key, a spent budget ...), or ``None``."""
        return next((e for e in self.all_errors() if e.kind in INFRASTRUCTURE_KINDS), None)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns for c in t.tool_calls]

    def tool_names(self) -> list[str]:
        return [c.name for c in self.tool_calls]

    @property
    def decisions(self) -> list[str | None]:
        return [t.decision for t in self.turns]

    @property
    def final_decision(self) -> str | None:
        return self.turns[-1].decision if self.turns else None

    @property
    def final_response(self) -> dict[str, Any] | None:
        return self.turns[-1].response if self.turns else None

    # a trace iterates its turns, not its fields as BaseModel does
    def __iter__(self) -> Iterator[Turn]:  # type: ignore[override]
        return iter(self.turns)

    def to_json(self, **kw: Any) -> str:
        return self.model_dump_json(**kw)

    def make_valid_unicode(self) -> Trace:
        """Replace each lone surrogate in what the agent produced (replies, free text, tool
        arguments and results, error messages) by U+FFFD, in place: such text cannot be
        written as UTF-8, so a report, memo or snapshot of the run would fail. Returns self."""
        for error in self.all_errors():
            error.message = valid_unicode(error.message)
            error.traceback = None if error.traceback is None else valid_unicode(error.traceback)
        for turn in self.turns:
            turn.text = valid_unicode(turn.text)
            turn.response = valid_unicode_value(turn.response)
            turn.raw_response = valid_unicode_value(turn.raw_response)
            for call in turn.tool_calls:
                call.name = valid_unicode(call.name)
                call.args = valid_unicode_value(call.args)
                call.result = valid_unicode_value(call.result)
                call.error = None if call.error is None else valid_unicode(call.error)
        return self

    @classmethod
    def from_json(cls, text: str | bytes) -> Trace:
        return cls.model_validate_json(text)
