"""Hypothesis strategies for agent inputs: ``from agentprop import strategies as aps``.

Strategies only: :func:`paraphrases`, :func:`llm_paraphrases`, :func:`boundaries`,
:func:`directional`, :func:`worlds`, :func:`conversations`. Every strategy draws integers and
lists, never model text at draw time, ordered so that Hypothesis shrinks towards the simplest
input; drawn values carry their provenance. Old helper names here still work, with a
``DeprecationWarning`` naming their new module.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from agentprop.strategies._internal.boundary import boundaries
from agentprop.strategies._internal.directional import directional
from agentprop.strategies._internal.llm_pool import llm_paraphrases
from agentprop.strategies._internal.paraphrase import paraphrases
from agentprop.strategies._internal.scenarios import conversations, worlds

__all__ = ["boundaries", "conversations", "directional", "llm_paraphrases", "paraphrases", "worlds"]

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
