"""Every exception agentprop raises, and its one warning.

Every error names the cause and the fix; errors about user input carry file, line and column.
``except AgentPropError`` catches every agentprop error. A property that does not hold is not an
error but :class:`AgentPropertyViolation`, an :class:`AssertionError`. The exception tree is
drawn in docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class AgentPropError(Exception):
    """Base class of every exception agentprop raises on purpose (catch this to catch them all)."""


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


# --------------------------------------------------------------------------- user input


class InputError(AgentPropError):
    """A user-supplied file or value is wrong.

    Raised while loading specs, bindings, phrase packs, mutation packs and command-line
    arguments. The message has the shape ``FILE:LINE:COL: what is wrong`` followed by what was
    expected and how to fix it; the command line prints it and exits 2. What to do: what the
    ``fix:`` line says.
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
        head = (
            f"{clip(str(self.location), MESSAGE_PART_LIMIT)}: {problem}"
            if self.location
            else problem
        )
        lines = [head]
        if self.expected:
            lines.append(f"  expected: {clip(self.expected, MESSAGE_PART_LIMIT)}")
        if self.fix:
            lines.append(f"  fix: {clip(self.fix, MESSAGE_PART_LIMIT)}")
        return "\n".join(lines)


class LimitExceeded(InputError):
    """A spec asks for more work than agentprop's bound on it allows (paths to enumerate,
    conditions to evaluate): the work stops at the bound, and the message names the limit and
    the ``AGENTPROP_*`` variable that raises it. ``limit`` is the bound that was hit."""

    def __init__(
        self,
        problem: str,
        *,
        limit: int,
        location: SourceLocation | None = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.limit = limit
        super().__init__(problem, location=location, expected=expected, fix=fix)


class PathLimitExceeded(LimitExceeded):
    """A decision tree has more paths, or more branch conditions over its paths, than agentprop
    enumerates. What to do: merge branches or split the spec, or raise the limit it names."""


class ConditionBudgetExceeded(LimitExceeded):
    """Building a spec's cases needed more condition evaluations than agentprop's limit. What to
    do: merge branches or split the spec, or raise ``AGENTPROP_MAX_CONDITION_CHECKS``."""


class SpecError(InputError):
    """A spec file cannot be loaded: bad YAML, a missing key, a wrong type, an invalid JSON
    Schema or an unparseable ``when`` expression. Fix the spec at the location given
    (``agentprop lint SPEC`` lists every problem at once)."""


class BindingsError(InputError):
    """A bindings file (``agentprop.yaml``) does not fit its spec: an unknown variable, tool or
    field, a value of the wrong type, a leaf with no decision. Fix the bindings at the location
    given (docs/reference.md#bindings)."""


class MemoFileError(InputError):
    """A trial memo file (``TrialMemo(path)``, ``--agentprop-memo``) cannot be used: it is not
    a SQLite database, not an agentprop memo, or written by a newer agentprop. Point at another
    file, or delete this one (it only holds runs that can be made again)."""


class InfrastructureError(AgentPropError):
    """A run could not be made, for a reason that is not the agent's: a cache miss in
    replay-only mode, a damaged cache, no API key, an API that refuses the key or stays
    unreachable, a spent budget.

    ``kind`` (one of :data:`agentprop._scenario.trace.INFRASTRUCTURE_KINDS`) is recorded in the
    trace. Such a run is never judged, memoised, shrunk or saved to the corpus: the case is
    INCONCLUSIVE with the error as its reason, and ``agentprop run`` exits 2. What to do: what the
    message says (record the cache, set the key, raise the budget ...), then run again.
    """

    kind: str = "infrastructure"

    def __init__(self, *args: object, kind: str | None = None) -> None:
        if kind is not None:
            self.kind = kind
        super().__init__(*args)


class MissingApiKey(InputError, InfrastructureError):
    """A model call had to reach the real API and no API key is configured (for Anthropic,
    ``ANTHROPIC_API_KEY``; for OpenAI, ``OPENAI_API_KEY``). Set the key, point ``base_url`` at a
    local server (which needs none), or run replay-only from a recorded API cache."""

    kind = "missing_api_key"


class MissingDependency(InputError):
    """A model provider's official SDK is not installed: the model agents, PromptSmith and
    paraphrase pools need it, the rest of agentprop does not. Install the extra the message
    names (``pip install 'agentprop[anthropic]'`` or ``'agentprop[openai]'``)."""


class UnpricedModel(InputError):
    """A dollar limit (``--max-usd``, ``Budget(max_usd=...)``) is set and a model without a price
    was about to be called: its cost is unknown, so the limit cannot be enforced. Give the
    model's price (``--prices FILE``, ``Budget(prices=...)``) or cap runs or tokens instead."""


class ParaphrasePoolError(InputError):
    """A paraphrase pool cannot be obtained: no key and no cache, a reply that is not a list of
    paraphrases, a failed API call, no candidate surviving the screen, or a bad pool file. The
    message says which; record the pool once with a key, or fix the pool file."""


class InputModelUnavailable(InputError):
    """The input model (``--input-model``, ``--agentprop-input-model``) could not write a text:
    its endpoint cannot be reached, its key is missing, or a replayed request was never
    recorded. A usage error naming the option."""


class InvalidArgument(AgentPropError, TypeError):
    """A function was called with arguments it cannot use (as in Hypothesis). Raised at the
    call, before any agent runs; the message names the argument and what it accepts."""


class WhenSyntaxError(AgentPropError, ValueError):
    """A ``when`` expression could not be parsed. ``offset`` is the 0-based column in the
    expression where the problem is, ``expected`` what would have been valid there. Loading a
    spec turns it into a :class:`SpecError` at the expression's line."""

    def __init__(self, message: str, text: str, offset: int, expected: str) -> None:
        self.message = message
        self.text = text
        self.offset = offset
        self.expected = expected
        super().__init__(f"{message} at column {offset + 1} of {text!r}")


class UnboundVariable(AgentPropError, KeyError):
    """A variable that a ``when`` expression reads has no value in the environment it is
    evaluated in. Give the variable a value (a binding, or the ``env`` passed to
    :func:`agentprop.spec.evaluate`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(path)

    def __str__(self) -> str:
        return f"variable {self.path!r} has no value"


class Unsatisfiable(AgentPropError):
    """No values of the bound variables make a path's conditions hold, so the path has no
    scenario. ``agentprop lint`` reports such paths (P001) with the spec line and a fix; bind the
    variables so the conditions can hold, or accept that the path cannot be reached."""


# --------------------------------------------------------------------------- running agents


class ToolError(AgentPropError):
    """A tool call failed inside a world: the agent sees it as a tool error result.

    ``kind`` is one of the spec's ``failure_modes`` (``timeout``, ``not_found``,
    ``rate_limited``, ``invalid_query`` ...) or ``invalid_arguments`` / ``unknown_tool`` /
    ``limit_exceeded`` for errors the runtime itself raises. Not a bug of agentprop: a correct
    agent handles it as the spec says.
    """

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        self.message = message
        super().__init__(f"{kind}: {message}")


class AgentRunError(AgentPropError):
    """The agent under test raised, timed out or broke the protocol. The runner records it
    in the trace as an errored run (the ``no_run_errors`` contract fails it); it is raised only
    where a caller asked for it. Look at the traceback kept in the trace."""


class McpSessionEnded(AgentPropError):
    """An MCP client went away (or its agent code stopped) before the conversation was over.

    Raised inside the trial of an MCP session (:mod:`agentprop.mcp`) and recorded as the run's
    ``agent_exception``, naming the turn it ended in; it never reaches the runner. Make the
    agent answer every turn with ``respond`` before it closes its session.
    """


class ModelCallError(AgentPropError):
    """A model API call failed for good (after the retries the policy allows).

    The runtime records it as an errored run; ``__cause__`` is the SDK's exception. Check the
    endpoint, the key and the model name; raise the retry policy for a flaky endpoint.
    """


class DeadlineExceeded(AgentPropError, TimeoutError):
    """A model call's retry would have waited past the deadline of the turn making it (the
    server's ``retry-after`` was longer than what was left of the turn's timeout), so agentprop
    did not wait: the turn timeout won, and the trace records the turn as a ``timeout`` saying
    so. Raise the turn timeout, or lower the load on the endpoint."""


class ApiUnavailable(ModelCallError, InfrastructureError):
    """A model API call failed for a reason that is not the agent's: the API refused the key
    (``kind`` ``auth``: 401, 403) or could not be reached or answer after every retry
    (``api_unavailable``: connection errors, timeouts, 429, 5xx). The run is recorded with that
    kind, never judged as the agent's failure. Check the key and the endpoint."""


class BudgetExhausted(InfrastructureError):
    """A run, or a model call, was asked to start after the session budget ran out.

    ``reason`` names the limit that was reached; ``snapshot`` is the budget at that moment (a
    ``BudgetSnapshot``: runs, tokens, dollars). A model call refused mid-run ends the run as a
    ``budget_exhausted`` error: not the agent's fault, never judged, and the oracle treats that
    run as not run. Undecided checks are then INCONCLUSIVE, never a pass. Raise the limit if
    more runs are worth it.
    """

    kind = "budget_exhausted"

    def __init__(self, reason: str, snapshot: Any, *, call: str | None = None) -> None:
        self.reason = reason
        self.snapshot = snapshot
        what = f"the model call {call} was not sent" if call else "No new agent runs will start"
        super().__init__(
            f"The agentprop budget is exhausted: {reason}. {what} "
            f"(runs={snapshot.runs}, tokens={snapshot.tokens}, usd={snapshot.usd:.4f}). "
            "Raise the limit (max_runs / max_tokens / max_usd) if more runs are worth it; "
            "results so far are reported as 'not shown to fail' where runs were cut short."
        )


class CacheError(InfrastructureError):
    """The API cache file cannot be used (damaged, wrong schema version, corrupt entry, refused
    write). The message names the file; delete it to record afresh, or point ``--cache``
    elsewhere. Not the agent's fault: a run that meets it is reported as such,
    never as a failure."""

    kind = "cache_error"


class CacheMiss(CacheError):
    """A request has no recorded response and the cache is in replay-only mode (the default
    when ``CI`` is set).

    ``key``, ``model`` and ``trial`` identify the request; ``nearest_key`` and ``diff`` (a unified
    diff, recorded -> requested) describe the closest recorded request, if any: the diff shows
    what changed (a prompt edit, a new tool description). Record again with a key
    (``--cache-mode read-write``), or undo the change.
    """

    kind = "cache_miss"

    def __init__(
        self,
        message: str,
        *,
        key: str,
        model: str,
        trial: int,
        nearest_key: str | None,
        diff: str | None,
    ) -> None:
        self.key = key
        self.model = model
        self.trial = trial
        self.nearest_key = nearest_key
        self.diff = diff
        super().__init__(message)


# --------------------------------------------------------------------------- test failures


class AgentPropertyViolation(AssertionError):
    """A property of the agent did not hold with the required pass rate.

    Raised by :func:`agentprop.check` and the other checks unless the verdict is PASS. Carries
    the result (a ``CheckResult``, or an invariance / direction / snapshot result): the rate,
    its interval, the violated clause and sample failing traces. Every statistical failure in
    agentprop is raised as this exception; under pytest the plugin shrinks it to a minimal
    reproducer. What to do: read the clause and the failing trace, and fix the agent (or the
    spec, if the spec is what is wrong).
    """

    def __init__(self, result: Any) -> None:
        self.result = result
        self.context: Any = None
        """What was checked (a ``ViolationContext``) when :func:`agentprop.check` raised it: the
        pytest plugin shrinks from it; ``None`` otherwise."""
        super().__init__(verdict_first(result.summary(), getattr(result, "verdict", None)))


def verdict_first(summary: str, verdict: object) -> str:
    """``"X: FAIL — pass rate …"`` -> ``"FAIL X — pass rate …"``: a failure's first word is its
    verdict (what a pytest report shows first)."""
    if not isinstance(verdict, str) or not verdict:
        return summary
    head, sep, rest = summary.partition("\n")
    if head.startswith(verdict):
        return summary
    marker = f": {verdict}"
    at = head.find(marker)
    if at >= 0 and (at + len(marker) == len(head) or head[at + len(marker)] in " (—"):
        head = head[:at] + head[at + len(marker) :]
    return f"{verdict} {head.strip()}{sep}{rest}"


class AgentPropWarning(UserWarning):
    """Something agentprop did that the user should know about, though nothing failed (an
    old-format memo file converted, for one)."""
