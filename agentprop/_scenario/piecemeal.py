"""Scenarios in which the user gives a required detail piecemeal: asked for it, they answer.

A spec that asks for missing information (a node's ``if_missing_fields`` stop, or a branch on a
``withhold`` variable to a request for information) has two paths from the same first request:
the stop, where the agent asks, and the complete path, where the detail was given. A piecemeal
scenario continues past the question: turn 1 is the stop's (the detail withheld, the agent
asks), turn 2 gives what was withheld, written as the complete request wrote it, and from there
the complete path's expectations hold. Invariants: built only where both paths exist in the
spec and share their first request's intent; the answer holds every withheld value; the world
is the complete path's.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from agentprop._scenario.build import Scenario, ScenarioTurn
from agentprop._spec.bindings import Bindings

__all__ = [
    "ANSWERED",
    "answer_text",
    "continue_stop",
    "is_piecemeal",
    "piecemeal_pairs",
    "piecemeal_scenarios",
]

ANSWERED = "/answered "
"""What a piecemeal scenario's id holds between the complete path's id and the withheld slots
(``END_CANCELLED<-N7_CANCEL/answered order_id``)."""

_TOKEN = re.compile(r"\s+|[\u3400-\u9fff]|\w+|[^\w\s]")
"""Words, spaces and single CJK characters or marks: what an answer's spans are cut at."""
_LEAD = re.compile(
    r"^[\s,.;:\-\u2014\uff0c\u3002\uff1b\uff1a\u3001]+|[\s,;:\-\uff0c\uff1b\u3001]+$"
)


def is_piecemeal(scenario: Scenario) -> bool:
    """Whether ``scenario`` is a piecemeal one (:func:`piecemeal_scenarios`)."""
    return ANSWERED in scenario.id


def answer_text(complete: str, stopped: str, values: Sequence[str]) -> str | None:
    """What the complete request says that the stopped one leaves out, as an answer: the
    spans ``complete`` has beyond ``stopped``, joined (``"card last4 4242, zip 94107"``);
    ``None`` when they do not hold every one of ``values``."""
    a, b = _TOKEN.findall(stopped), _TOKEN.findall(complete)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    spans = [
        "".join(b[j1:j2])
        for op, _, _, j1, j2 in matcher.get_opcodes()
        if op in ("insert", "replace") and "".join(b[j1:j2]).strip()
    ]
    zh = re.search(r"[\u3400-\u9fff]", complete) is not None
    parts = [p for p in (_LEAD.sub("", s) for s in spans) if p]
    text = ("\uff0c" if zh else ", ").join(parts)
    if not zh:
        text = re.sub(r"^(?:and|or|also)\s+", "", text, flags=re.I)  # "... and the damage ..."
    if not text or not all(v in text for v in values):
        return None
    return text if zh else text[:1].upper() + text[1:]


def _prefix(stop: Scenario, complete: Scenario) -> bool:
    """Whether ``stop`` is where ``complete`` would have stopped had its first request left
    out the stop's withheld details: the same nodes up to the stop."""
    before = stop.path[:-1]
    if complete.path[: len(before)] != before:
        return False
    node = stop.path[-1]
    # a missing-field stop is a node of the complete path; a branch to a request for the
    # details is not (the complete path took the other branch there)
    return node in complete.path or node == stop.leaf


def _agrees(stop: Scenario, complete: Scenario, bindings: Bindings) -> bool:
    """The two take the same values, but a ``withhold`` variable's (what was left out)."""
    for key, value in stop.assignment.items():
        var = bindings.variables.get(str(key).split("@")[0])
        if var is not None and var.withhold is not None:
            continue
        if key in complete.assignment and complete.assignment[key] != value:
            return False
    return True


def _continue(stop: Scenario, complete: Scenario) -> Scenario | None:
    asked, first = stop.turns[0], complete.turns[0]
    values = [str(complete.slots[s]) for s in stop.withheld if s in complete.slots]
    if not values or not all(v in first.user_message for v in values):
        return None
    text = answer_text(first.user_message, asked.user_message, values)
    if text is None:
        return None
    done = list(asked.required_tools)
    required = list(first.required_tools)
    if required[: len(done)] == done:
        required = required[len(done) :]  # called before the agent asked: not again
    answer = first.model_copy(
        update={
            "user_message": text,
            "marked": None,
            "required_tools": required,
            "allowed_tools": list(dict.fromkeys([*first.allowed_tools, *done])),
        }
    )
    node = stop.leaf
    if node not in asked.nodes:
        # a missing-field stop: the turn ends at the stopping node, where the answer is read
        asked = asked.model_copy(update={"nodes": [*asked.nodes, node]})
    if node in first.nodes:
        answer = answer.model_copy(update={"nodes": first.nodes[first.nodes.index(node) :]})
    turns: list[ScenarioTurn] = [asked, answer, *complete.turns[1:]]
    return complete.model_copy(
        update={
            "id": f"{complete.id}{ANSWERED}{'+'.join(stop.withheld)}",
            "turns": turns,
            "path_text": f"{stop.path_text} -> (answered) {complete.path_text}".strip(),
            "clauses": list(dict.fromkeys([*stop.clauses, *complete.clauses])),
        }
    )


def piecemeal_scenarios(bindings: Bindings, scenarios: Sequence[Scenario]) -> list[Scenario]:
    """The piecemeal scenarios of ``scenarios`` (:func:`piecemeal_pairs`)."""
    return [built for _, _, built in piecemeal_pairs(bindings, scenarios)]


def continue_stop(stop: Scenario, complete: Scenario) -> Scenario | None:
    """``stop`` continued into ``complete`` (one of :func:`piecemeal_pairs`, or a template
    variant of each), or ``None`` when the complete request does not give what was withheld."""
    return _continue(stop, complete)


def piecemeal_pairs(
    bindings: Bindings, scenarios: Sequence[Scenario]
) -> list[tuple[Scenario, Scenario, Scenario]]:
    """For each stop of ``scenarios`` that asks for withheld details (one turn, some slots
    withheld) and each decision a complete scenario that goes on from the same first request
    with those details given takes after them (the simplest such scenario; no tool failure
    injected in either), the piecemeal scenario: the stop's turn, the withheld details as an
    answer, then the complete scenario's turns and expectations; each as ``(stop, complete,
    piecemeal)``."""
    out: list[tuple[Scenario, Scenario, Scenario]] = []
    stops = [
        s
        for s in scenarios
        if len(s.turns) == 1
        and s.withheld
        and s.turns[0].expect_decision is not None
        and not s.world.failures
        and not is_piecemeal(s)
    ]
    # the simplest complete scenarios first: fewer turns, no unrolled loop or MC/DC variant
    ordered = sorted(
        scenarios, key=lambda s: (len(s.turns), ">" in s.id or "MCDC" in s.id, len(s.id), s.id)
    )
    for stop in stops:
        after: set[str | None] = set()
        for complete in ordered:
            if (
                complete.world.failures
                or is_piecemeal(complete)
                or complete.withheld  # the complete request leaves nothing out
                or not complete.turns
                or complete.id == stop.id
                or not _prefix(stop, complete)
                or not _agrees(stop, complete, bindings)
            ):
                continue
            decided = complete.turns[0].expect_decision
            if decided in after:
                continue  # one per decision the answer leads to: the simplest path to it
            built = _continue(stop, complete)
            if built is not None:
                after.add(decided)
                out.append((stop, complete, built))
    return out
