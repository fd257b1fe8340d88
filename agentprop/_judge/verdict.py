"""A verdict: the result of one contract on one trace, and the helpers every
contract writes it with."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel


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


def _ok(
    contract: str, explanation: str, clause: str | None = None, turn: int | None = None
) -> Verdict:
    return Verdict(
        passed=True, contract=contract, explanation=explanation, clause=clause, turn=turn
    )


def _fail(
    contract: str,
    explanation: str,
    clause: str | None = None,
    turn: int | None = None,
    step: int | None = None,
    detail: str | None = None,
) -> Verdict:
    return Verdict(
        passed=False,
        contract=contract,
        explanation=explanation,
        clause=clause,
        turn=turn,
        step=step,
        detail=detail,
    )


def _seq(names: Sequence[str]) -> str:
    return " -> ".join(names) if names else "(no tool calls)"


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
