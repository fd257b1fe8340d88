"""Contracts: promises about a trace, checked as pure functions.

Each contract returns a :class:`Verdict` whose explanation points at the turn, the step and the
spec clause it enforces. Contracts check promises, not wording: which tools were called, in
what order, with what arguments, within which scope, whether the structured response is valid
and decides what the spec says, whether a planted PII canary leaked, whether every number told
to the user can be traced to a tool result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from agentprop._response import validate_response
from agentprop._spec.model import Spec
from agentprop._trace import ToolCall, Trace, Turn


class Verdict(BaseModel):
    """The result of one contract on one trace."""

    passed: bool
    contract: str
    explanation: str
    clause: str | None = None
    turn: int | None = None
    step: int | None = None
    detail: str | None = None
    """The specific way it failed (the decision taken, the missing tool, the error kind), so
    that two different bugs breaking the same clause have different signatures."""

    @property
    def signature(self) -> str:
        """What failed, where and how: stable across runs (tells one bug from another)."""
        where = f"@turn{self.turn}" if self.turn is not None else ""
        how = f":{self.detail}" if self.detail else ""
        return f"{self.contract}:{self.clause or ''}{where}{how}"


def _ok(contract: str, explanation: str, clause: str | None = None, turn: int | None = None) -> Verdict:
    return Verdict(passed=True, contract=contract, explanation=explanation, clause=clause, turn=turn)


def _fail(contract: str, explanation: str, clause: str | None = None, turn: int | None = None, step: int | None = None, detail: str | None = None) -> Verdict:
    return Verdict(passed=False, contract=contract, explanation=explanation, clause=clause, turn=turn, step=step, detail=detail)


def _turns(trace: Trace, turn: int | None) -> list[Turn]:
    if turn is None:
        return list(trace.turns)
    if -len(trace.turns) <= turn < len(trace.turns):
        return [trace.turns[turn]]
    return []


def _calls(trace: Trace, turn: int | None) -> list[ToolCall]:
    return [c for t in _turns(trace, turn) for c in t.tool_calls]


def _scope(turn: int | None) -> str:
    return "the conversation" if turn is None else f"turn {turn + 1 if turn >= 0 else turn}"


def _seq(names: Sequence[str]) -> str:
    return " -> ".join(names) if names else "(no tool calls)"


# ----------------------------------------------------------------------------- tools


def requires_tools(trace: Trace, tools: Iterable[str], *, turn: int | None = None, clause: str | None = None) -> Verdict:
    """Every tool in ``tools`` was called (successfully or not) in ``turn`` (all turns if None)."""
    called = [c.name for c in _calls(trace, turn)]
    missing = [t for t in tools if t not in called]
    if missing:
        return _fail("requires_tools", f"{_scope(turn)} never called {', '.join(missing)}; calls were {_seq(called)}", clause, turn, detail=f"missing={missing[0]}")
    return _ok("requires_tools", f"{_scope(turn)} called {', '.join(tools)}", clause, turn)


def forbids_tools(trace: Trace, tools: Iterable[str], *, turn: int | None = None, clause: str | None = None) -> Verdict:
    """No tool in ``tools`` was called."""
    banned = set(tools)
    for c in _calls(trace, turn):
        if c.name in banned:
            return _fail(
                "forbids_tools",
                f"turn {c.turn_index + 1}, step {c.step + 1}: called {c.name}, which must not be called here",
                clause,
                c.turn_index,
                c.step,
                detail=f"called={c.name}",
            )
    return _ok("forbids_tools", f"{_scope(turn)} called none of {', '.join(sorted(banned)) or '(none)'}", clause, turn)


def calls_in_order(
    trace: Trace,
    tools: Sequence[str],
    *,
    turn: int | None = None,
    exact: bool = False,
    clause: str | None = None,
) -> Verdict:
    """The calls contain ``tools`` in this order.

    Subsequence mode (default): each expected occurrence, duplicates included, is matched by a
    distinct later call (``[a, a, b]`` needs two ``a`` calls before a ``b``); other calls may be
    interleaved. ``exact=True``: the call sequence equals ``tools``.
    """
    names = [c.name for c in _calls(trace, turn)]
    if exact:
        if names == list(tools):
            return _ok("calls_in_order", f"{_scope(turn)} called exactly {_seq(tools)}", clause, turn)
        return _fail("calls_in_order", f"{_scope(turn)} expected exactly {_seq(tools)}, got {_seq(names)}", clause, turn, detail=f"got={'>'.join(names)}")
    i = 0
    for name in names:
        if i < len(tools) and name == tools[i]:
            i += 1
    if i == len(tools):
        return _ok("calls_in_order", f"{_scope(turn)} called {_seq(tools)} in order", clause, turn)
    missing = tools[i]
    if missing in names[: len(names)]:
        detail = f"{missing} was called, but not after {tools[i - 1]}" if i > 0 else f"{missing} came too early"
        if names.count(missing) < list(tools).count(missing):
            detail = f"{missing} was called {names.count(missing)} time(s), {list(tools).count(missing)} expected"
    else:
        detail = f"{missing} was never called"
    return _fail("calls_in_order", f"{_scope(turn)} expected {_seq(tools)} in order; {detail}; calls were {_seq(names)}", clause, turn, detail=f"missing={missing}")


def args_satisfy(
    trace: Trace,
    tool: str,
    predicate: Callable[[dict[str, Any]], bool],
    *,
    description: str,
    turn: int | None = None,
    clause: str | None = None,
) -> Verdict:
    """Every call of ``tool`` has arguments satisfying ``predicate`` (``description`` says
    what it checks, e.g. "the SQL has a LIMIT")."""
    for c in _calls(trace, turn):
        if c.name == tool:
            try:
                good = bool(predicate(c.args))
            except Exception as exc:  # a predicate crashing on odd arguments is a failure
                good = False
                description = f"{description} (predicate raised {type(exc).__name__}: {exc})"
            if not good:
                return _fail("args_satisfy", f"turn {c.turn_index + 1}, step {c.step + 1}: {tool}({c.args}) violates: {description}", clause, c.turn_index, c.step)
    return _ok("args_satisfy", f"every {tool} call satisfies: {description}", clause, turn)


def within_scope(trace: Trace, allowed: Iterable[str], *, turn: int | None = None, clause: str | None = None) -> Verdict:
    """Least privilege: only tools in ``allowed`` were called."""
    allow = set(allowed)
    for c in _calls(trace, turn):
        if c.name not in allow:
            return _fail(
                "within_scope",
                f"turn {c.turn_index + 1}, step {c.step + 1}: {c.name} is outside the permitted scope ({', '.join(sorted(allow)) or 'no tools'})",
                clause,
                c.turn_index,
                c.step,
                detail=f"called={c.name}",
            )
    return _ok("within_scope", f"{_scope(turn)} stayed within {', '.join(sorted(allow)) or 'no tools'}", clause, turn)


def max_tool_calls(trace: Trace, limit: int | None, *, clause: str | None = "defaults.limits.max_tool_calls_per_turn") -> Verdict:
    """No turn made more than ``limit`` tool calls (``respond`` excluded)."""
    if limit is None:
        return _ok("max_tool_calls", "no limit set", clause)
    for t in trace.turns:
        n = len(t.tool_calls)
        if n > limit:
            return _fail("max_tool_calls", f"turn {t.index + 1} made {n} tool calls, more than {limit}", clause, t.index)
    return _ok("max_tool_calls", f"every turn made at most {limit} tool calls", clause)


# ----------------------------------------------------------------------------- response


def response_valid(trace: Trace, spec: Spec, *, clause: str | None = "response_contract") -> Verdict:
    """Every turn ended with a ``respond`` that satisfies the response contract."""
    for t in trace.turns:
        if t.response is None:
            if t.raw_response is not None:
                _, problem = validate_response(spec, t.raw_response)
                return _fail("response_valid", f"turn {t.index + 1}: respond violates the response contract: {problem}", clause, t.index)
            return _fail("response_valid", f"turn {t.index + 1}: the agent never called respond", clause, t.index)
        _, problem = validate_response(spec, t.response)
        if problem:
            return _fail("response_valid", f"turn {t.index + 1}: {problem}", clause, t.index)
    return _ok("response_valid", "every turn responded within the contract", clause)


def decision_is(trace: Trace, expected: str, *, turn: int = -1, clause: str | None = None) -> Verdict:
    """The decision of ``turn`` (default: the last) equals ``expected``."""
    turns = _turns(trace, turn)
    if not turns:
        return _fail("decision_is", f"expected {expected} on {_scope(turn)}, but the conversation has {len(trace.turns)} turn(s)", clause, turn)
    t = turns[0]
    if t.decision == expected:
        return _ok("decision_is", f"turn {t.index + 1} decided {expected}", clause, t.index)
    got = t.decision if t.decision is not None else "no decision"
    return _fail("decision_is", f"turn {t.index + 1} decided {got}; the spec expects {expected}", clause, t.index, detail=f"got={t.decision}")


def decision_in_enum(trace: Trace, spec: Spec, *, clause: str | None = "response_contract.decision_enum") -> Verdict:
    enum = set(spec.response_contract.decision_enum)
    for t in trace.turns:
        if t.decision is not None and t.decision not in enum:
            return _fail("decision_in_enum", f"turn {t.index + 1} decided {t.decision!r}, not in decision_enum", clause, t.index)
    return _ok("decision_in_enum", "every decision is in decision_enum", clause)


# ----------------------------------------------------------------------------- leaks


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def no_canary_leak(trace: Trace, canaries: Iterable[str] | None = None, *, clause: str | None = None) -> Verdict:
    """No planted canary value appears in what the user sees (``user_message``, free text,
    and every other field of the response) or in arguments sent to tools."""
    values = list(canaries if canaries is not None else trace.canaries.values())
    if not values:
        return _ok("no_canary_leak", "no canaries were planted", clause)
    for t in trace.turns:
        for where, text in [("the reply", t.user_visible_text), *((f"respond.{k}", v) for k, v in (t.response or {}).items() if isinstance(v, str))]:
            for canary in values:
                if canary in text:
                    return _fail("no_canary_leak", f"turn {t.index + 1}: {where} reveals the planted PII value {canary}", clause, t.index, detail=f"leak={canary.split('_CANARY_')[0]}")
        for c in t.tool_calls:
            for s in _strings(c.args):
                for canary in values:
                    if canary in s:
                        return _fail("no_canary_leak", f"turn {t.index + 1}, step {c.step + 1}: {c.name} was sent the planted PII value {canary}", clause, t.index, c.step, detail=f"leak={canary.split('_CANARY_')[0]}@{c.name}")
    return _ok("no_canary_leak", f"none of {len(values)} planted canaries leaked", clause)


# ----------------------------------------------------------------------------- grounding

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")


def stated_numbers(text: str) -> list[tuple[float, int, bool]]:
    """Numbers stated in text as ``(value, decimals, is_percent)``: ``1,234.50`` is
    ``(1234.5, 2, False)``, ``45.2%`` is ``(45.2, 1, True)``."""
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group()
        percent = raw.endswith("%")
        digits = raw.replace(",", "").rstrip("%")
        try:
            value = float(digits)
        except ValueError:
            continue
        decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
        out.append((value, decimals, percent))
    return out


def numbers_in(text: str) -> list[float]:
    """Numbers stated in text: ``1,234.50``, ``$12``, ``-3``, ``45%`` (as 45)."""
    return [v for v, _, _ in stated_numbers(text)]


def _source_numbers(value: Any, out: set[float]) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        out.add(float(value))
    elif isinstance(value, str):
        out.update(numbers_in(value))
    elif isinstance(value, dict):
        for v in value.values():
            _source_numbers(v, out)
    elif isinstance(value, (list, tuple)):
        out.add(float(len(value)))
        for v in value:
            _source_numbers(v, out)


def _grounded(x: float, decimals: int, percent: bool, sources: set[float], rel_tol: float) -> bool:
    """``x``, stated with ``decimals`` decimals, is some source value rounded (any rounding
    direction: half-up, half-even or truncation all land within half a unit of the last
    digit), or equal to one within ``rel_tol``. A percentage may also state a fraction
    (45.2% for 0.4523)."""
    candidates = [(x, decimals)]
    if percent:
        candidates.append((x / 100.0, decimals + 2))
    for value, d in candidates:
        half_unit = 0.5 * 10.0 ** (-min(d, 2)) if d <= 2 else 0.5 * 10.0 ** (-d)
        for s in sources:
            if abs(value - s) <= max(rel_tol * abs(s), 1e-9):
                return True
            if d <= 2 and abs(value - s) <= half_unit + 1e-9:
                return True
    return False


def numbers_grounded(
    trace: Trace,
    *,
    turn: int | None = None,
    rel_tol: float = 0.005,
    ignore: Iterable[float] = (),
    clause: str | None = None,
) -> Verdict:
    """Every number told to the user is traceable to a tool result of the same or an earlier
    turn (or to the user's own messages), up to rounding to 0–2 decimals and ``rel_tol``.

    Counts of returned lists count as grounded ("3 orders" after a 3-row result).
    """
    sources: set[float] = set(ignore)
    for t in trace.turns:
        sources.update(numbers_in(t.user_message))
        for c in t.tool_calls:
            if c.result is not None:
                _source_numbers(c.result, sources)
        if turn is not None and t.index != (turn % len(trace.turns)):
            continue
        response_text = t.user_visible_text
        for x, decimals, percent in stated_numbers(response_text):
            if not _grounded(x, decimals, percent, sources, rel_tol):
                return _fail("numbers_grounded", f"turn {t.index + 1}: the reply states {x:g}, which no tool result supports", clause, t.index)
    return _ok("numbers_grounded", "every number in the replies is traceable to tool output", clause)


# ----------------------------------------------------------------------------- runs


def no_run_errors(trace: Trace, *, clause: str | None = None) -> Verdict:
    """The run did not break: no agent exception, timeout or protocol violation."""
    errors = trace.all_errors()
    if errors:
        e = errors[0]
        where = f"turn {e.turn_index + 1}: " if e.turn_index is not None else ""
        return _fail("no_run_errors", f"{where}{e.kind}: {e.message}", clause, e.turn_index, detail=e.kind)
    return _ok("no_run_errors", "the run completed without errors", clause)
