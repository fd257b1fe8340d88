"""Exceptions raised by agentprop.

Every error names the cause and the fix. Errors about user input carry the file, line and
column they refer to, so an editor can jump there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class AgentPropError(Exception):
    """Base class of every exception agentprop raises on purpose."""


@dataclass(frozen=True)
class SourceLocation:
    """A position in a user-supplied file (1-based line and column)."""

    path: Path | None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else "<string>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where


MESSAGE_PART_LIMIT = 1_000
"""Characters kept of each part (problem, expected, fix) of an :class:`InputError`'s message;
a longer part is cut in the middle (:func:`clip`), so a 120 KB value never comes back whole."""


def clip(text: str, limit: int = 80) -> str:
    """``text`` itself when it has at most ``limit`` characters; else its head and tail with
    ``… (N characters cut) …`` between them, ``limit`` characters or so in all."""
    if len(text) <= limit:
        return text
    keep = max(limit - 30, 2)
    head, tail = text[: keep - keep // 3], text[len(text) - keep // 3 :] if keep // 3 else ""
    return f"{head}… ({len(text) - len(head) - len(tail)} characters cut) …{tail}"


def clip_repr(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to about ``limit`` characters (see :func:`clip`); values whose repr
    cannot be made (integers over Python's digit limit) are described instead."""
    try:
        text = repr(value)
    except ValueError:  # int too large to convert
        return f"<{type(value).__name__} too large to show>"
    return clip(text, limit)


class InputError(AgentPropError):
    """A user-supplied file or value is wrong.

    The message has the shape ``FILE:LINE:COL: what is wrong`` followed by what was expected
    and how to fix it.
    """

    def __init__(
        self,
        problem: str,
        *,
        location: SourceLocation | None = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.location = location
        self.expected = expected
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        problem = clip(self.problem, MESSAGE_PART_LIMIT)
        head = f"{clip(str(self.location), MESSAGE_PART_LIMIT)}: {problem}" if self.location else problem
        lines = [head]
        if self.expected:
            lines.append(f"  expected: {clip(self.expected, MESSAGE_PART_LIMIT)}")
        if self.fix:
            lines.append(f"  fix: {clip(self.fix, MESSAGE_PART_LIMIT)}")
        return "\n".join(lines)


class SpecError(InputError):
    """A spec file cannot be loaded: bad YAML, a missing key, a wrong type, an invalid JSON
    Schema or an unparseable ``when`` expression."""


class BindingsError(InputError):
    """A bindings file (``agentprop.yaml``) does not fit its spec."""


class InfrastructureError(AgentPropError):
    """A run could not be made, for a reason that is not the agent's: a cache miss in
    replay-only mode, a damaged cache, no API key, an API that refuses the key or stays
    unreachable, a spent budget.

    ``kind`` (one of :data:`agentprop._trace.INFRASTRUCTURE_KINDS`) is recorded in the trace.
    Such a run is never judged, memoised, shrunk or saved to the corpus: the case is
    INCONCLUSIVE with the error as its reason, and ``agentprop run`` exits 2.
    """

    kind: str = "infrastructure"

    def __init__(self, *args: object, kind: str | None = None) -> None:
        if kind is not None:
            self.kind = kind
        super().__init__(*args)


class InvalidArgument(AgentPropError, TypeError):
    """A function was called with arguments it cannot use (as in Hypothesis)."""


class ToolError(AgentPropError):
    """A tool call failed inside a world: the agent sees it as a tool error result.

    ``kind`` is one of the spec's ``failure_modes`` (``timeout``, ``not_found``,
    ``rate_limited``, ``invalid_query`` ...) or ``invalid_arguments`` / ``unknown_tool`` /
    ``limit_exceeded`` for errors the runtime itself raises.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.message = message
        super().__init__(f"{kind}: {message}")


class AgentRunError(AgentPropError):
    """The agent under test raised, timed out or broke the protocol. The runner records it
    in the trace as an errored run; it is raised only where a caller asked for it."""


class MemoFileError(InputError):
    """A trial memo file (``TrialMemo(path)``, ``--agentprop-memo``) cannot be used: it is not
    a SQLite database, not an agentprop memo, or written by a newer agentprop."""


class AgentPropWarning(UserWarning):
    """Something agentprop did that the user should know about, though nothing failed (an
    old-format memo file converted, for one)."""
