"""Hypothesis strategies for agent inputs: ``from agentprop import strategies as aps``.

This module holds strategies only. Every strategy draws integers and lists (never text from a
model at draw time), ordered so that Hypothesis shrinks towards the simplest input: the original
sentence, the first template, the default world. Drawn values carry their provenance and are
``note()``-d.

- :func:`paraphrases` — meaning-preserving rewrites of a message, protected slots kept
  (draws :class:`agentprop.phrases.Paraphrase`).
- :func:`llm_paraphrases` — rewrites from a model, fetched once, screened and cached on disk.
- :func:`boundaries` — values on both sides of every numeric edge of the decision tree, each
  with the branch the spec expects (the list: :func:`agentprop.spec.boundary_values`).
- :func:`directional` — (base, perturbed) pairs that flip exactly one condition of a branch,
  with the expected change (the list: :func:`agentprop.spec.directional_pairs`).
- :func:`worlds` / :func:`conversations` — tool worlds and multi-turn scripts along a path.

The helpers and value types that used to live here (packs, slots, transforms, the listed
boundary and directional cases) are in :mod:`agentprop.phrases`, :mod:`agentprop.spec` and
:mod:`agentprop.scenarios`; their old names here still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from agentprop.strategies._internal import llm_paraphrases, paraphrases
from agentprop.strategies._internal.boundary import boundaries
from agentprop.strategies._internal.directional import directional
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
        f"agentprop.strategies.{name} is deprecated (not a strategy): import it from {new} instead (from {new} import {name})",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(new), name)
