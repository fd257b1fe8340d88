"""What a spec implies on its own, before any bindings: the decision a leaf's name implies, the
topics its ids name and the variables its conditions read."""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentprop._spec.model import Spec
from agentprop._spec.when import variables

__all__ = ["condition_variables", "id_topics", "implied_decision"]

_NOT_A_TOPIC = frozenset("NO NOT NEVER MUST ALWAYS BEFORE AFTER ONLY END ON IF THE A N P".split())
"""Words of an id that name no topic: modal and filler words, and the letters that prefix
node and policy labels (``N_INTENT``, ``P_1``)."""
_LABEL = re.compile(r"[PN]?\d+[A-Z]?")
"""A numbering segment: ``1``, ``P1``, ``N3A``."""


def id_topics(name: str) -> frozenset[str]:
    """The topic words of a policy, node or decision id, upper case: ``P3_NO_MEDICAL_ADVICE``
    names ``MEDICAL`` and ``ADVICE``. A policy and a node share a topic when these meet, so
    what only numbers or prefixes ids (``N_1_INTENT``, ``P_1_NO_PII``, ``N3A``) is no topic."""
    return (
        frozenset(w for w in name.upper().split("_") if w and not _LABEL.fullmatch(w))
        - _NOT_A_TOPIC
    )


def implied_decision(leaf_id: str, decision_enum: Iterable[str]) -> tuple[str | None, list[str]]:
    """The decision a leaf named ``END_X`` implies: ``X`` itself if it is in the enum, else
    the single enum value that starts with ``X`` or that ``X`` starts with.

    Returns ``(decision or None, candidates)``: several candidates mean the name is ambiguous
    (``END_REJECT`` with ``REJECT_POLICY`` and ``REJECT_DISALLOWED``) and bindings must say.
    """
    enum = list(decision_enum)
    stem = leaf_id[4:] if leaf_id.startswith("END_") else leaf_id
    if stem in enum:
        return stem, [stem]
    candidates = [
        d for d in enum if d.startswith(stem + "_") or d.startswith(stem) or stem.startswith(d)
    ]
    if not candidates:
        # e.g. END_TICKET -> TICKET_CREATED, END_CANCELLED -> CANCELLED: shared first word
        first = stem.split("_")[0]
        candidates = [d for d in enum if d.split("_")[0] == first]
    if len(candidates) == 1:
        return candidates[0], candidates
    return None, candidates


def condition_variables(spec: Spec) -> list[str]:
    """Every variable path read by the spec's ``when`` expressions, in tree order."""
    seen: dict[str, None] = {}
    for node in spec.decision_tree:
        for b in node.branches:
            for v in variables(b.clause):
                seen.setdefault(v, None)
    return list(seen)
