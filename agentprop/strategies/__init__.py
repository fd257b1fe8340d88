"""Hypothesis strategies for agent inputs: ``from agentprop import strategies as aps``.

Strategies only: :func:`paraphrases`, :func:`llm_paraphrases`, :func:`boundaries`,
:func:`directional`, :func:`worlds`, :func:`conversations`. Every strategy draws integers and
lists, never model text at draw time, ordered so that Hypothesis shrinks towards the simplest
input; drawn values carry their provenance. Each strategy's module is imported on first use
(PEP 562), so ``aps.paraphrases`` does not load the spec solver that ``aps.worlds`` needs. Old
helper names here still work, with a ``DeprecationWarning`` naming their new module.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from agentprop.strategies._internal.boundary import boundaries
    from agentprop.strategies._internal.directional import directional
    from agentprop.strategies._internal.llm_pool import llm_paraphrases
    from agentprop.strategies._internal.paraphrase import paraphrases
    from agentprop.strategies._internal.scenarios import conversations, worlds

__all__ = ["boundaries", "conversations", "directional", "llm_paraphrases", "paraphrases", "worlds"]

_WHERE = {
    "boundaries": "agentprop.strategies._internal.boundary",
    "conversations": "agentprop.strategies._internal.scenarios",
    "directional": "agentprop.strategies._internal.directional",
    "llm_paraphrases": "agentprop.strategies._internal.llm_pool",
    "paraphrases": "agentprop.strategies._internal.paraphrase",
    "worlds": "agentprop.strategies._internal.scenarios",
}
"""Strategy -> the module that defines it, imported on first use (a test checks it against
``__all__``)."""

_MOVED: dict[str, tuple[str, ...]] = {
    "agentprop.phrases": (
        "TRANSFORM_NAMES",
        "Paraphrase",
        "ParaphrasePool",
        "ParaphrasePoolError",
        "PhrasePack",
        "RejectedParaphrase",
        "Slot",
        "Step",
        "apply_transforms",
        "builtin_languages",
        "find_slots",
        "llm_paraphrase_pool",
        "load_pack",
        "load_pack_text",
        "merge_packs",
        "resolve_pack",
    ),
    "agentprop.spec": (
        "BoundaryCase",
        "BoundaryCases",
        "BranchChoice",
        "Comparison",
        "DirectionalPair",
        "DirectionalPairs",
        "DirectionalSide",
        "MovedValue",
        "Route",
        "boundary_values",
        "choose_branch",
        "directional_pairs",
        "walk",
    ),
    "agentprop.scenarios": ("ConversationProvenance", "DrawnScenario", "PathWorld", "Skipped"),
}
"""Names that are not strategies -> the public module that holds them now (deprecated here)."""

_MOVED_TO = {name: module for module, names in _MOVED.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    new = _MOVED_TO.get(name)
    if new is None:
        raise AttributeError(f"module 'agentprop.strategies' has no attribute {name!r}")
    warnings.warn(
        f"agentprop.strategies.{name} is deprecated (not a strategy): import it from {new} "
        f"instead (from {new} import {name})",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(new), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
