"""Hypothesis strategies derived from specs: ``from agentprop import strategies as aps``.

Every strategy draws integers and lists (never text from a model at draw time), ordered so that
Hypothesis shrinks towards the simplest input: the original sentence, the first template, the
default world. Drawn values carry their provenance and are ``note()``-d.

- :func:`paraphrases` — meaning-preserving rewrites of a message, protected slots kept.
- :func:`llm_paraphrases` — rewrites from a model, fetched once, screened and cached on disk.
- :func:`boundary_values` / :func:`boundaries` — values on both sides of every numeric edge of
  the decision tree, each with the branch the spec expects.
- :func:`directional_pairs` / :func:`directional` — (base, perturbed) pairs that flip exactly one
  condition of a branch, with the expected change.
- :func:`worlds` / :func:`conversations` — tool worlds and multi-turn scripts along a path.
"""

from __future__ import annotations

from agentprop.strategies._internal import (
    TRANSFORM_NAMES,
    Paraphrase,
    ParaphrasePool,
    ParaphrasePoolError,
    PhrasePack,
    RejectedParaphrase,
    Slot,
    Step,
    apply_transforms,
    builtin_languages,
    find_slots,
    llm_paraphrase_pool,
    llm_paraphrases,
    load_pack,
    load_pack_text,
    merge_packs,
    paraphrases,
    resolve_pack,
)
from agentprop.strategies._internal.boundary import (
    BoundaryCase,
    BoundaryCases,
    Comparison,
    MovedValue,
    Skipped,
    boundaries,
    boundary_values,
)
from agentprop.strategies._internal.directional import (
    DirectionalPair,
    DirectionalPairs,
    DirectionalSide,
    directional,
    directional_pairs,
)
from agentprop.strategies._internal.scenarios import (
    BranchChoice,
    ConversationProvenance,
    DrawnScenario,
    PathWorld,
    Route,
    choose_branch,
    conversations,
    walk,
    worlds,
)

__all__ = [
    "TRANSFORM_NAMES",
    "BoundaryCase",
    "BoundaryCases",
    "BranchChoice",
    "Comparison",
    "ConversationProvenance",
    "DirectionalPair",
    "DirectionalPairs",
    "DirectionalSide",
    "DrawnScenario",
    "MovedValue",
    "Paraphrase",
    "ParaphrasePool",
    "ParaphrasePoolError",
    "RejectedParaphrase",
    "llm_paraphrase_pool",
    "llm_paraphrases",
    "PathWorld",
    "PhrasePack",
    "Route",
    "Skipped",
    "Slot",
    "Step",
    "apply_transforms",
    "boundaries",
    "boundary_values",
    "builtin_languages",
    "choose_branch",
    "conversations",
    "directional",
    "directional_pairs",
    "find_slots",
    "load_pack",
    "load_pack_text",
    "merge_packs",
    "paraphrases",
    "resolve_pack",
    "walk",
    "worlds",
]
