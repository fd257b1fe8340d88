"""Implementation of agentprop's Hypothesis strategies (public API: ``agentprop.strategies``).

* :mod:`.slots` -- protected-slot detection and masking
* :mod:`.packs` -- phrase packs (YAML in ``agentprop/strategies/packs/``), validation and merging
* :mod:`.paraphrase` -- paraphrase transforms and the :func:`paraphrases` strategy
"""

from __future__ import annotations

from agentprop.strategies._internal.llm_pool import (
    ParaphrasePool,
    ParaphrasePoolError,
    RejectedParaphrase,
    llm_paraphrase_pool,
    llm_paraphrases,
)
from agentprop.strategies._internal.packs import (
    Frames,
    Particles,
    PhrasePack,
    builtin_languages,
    load_pack,
    load_pack_text,
    merge_packs,
    resolve_pack,
)
from agentprop.strategies._internal.paraphrase import (
    Paraphrase,
    Step,
    apply_transforms,
    paraphrases,
)
from agentprop.strategies._internal.slots import Slot, find_slots
from agentprop.strategies._internal.transforms import TRANSFORM_NAMES

__all__ = [
    "ParaphrasePool",
    "ParaphrasePoolError",
    "RejectedParaphrase",
    "llm_paraphrase_pool",
    "llm_paraphrases",
    "TRANSFORM_NAMES",
    "Frames",
    "Paraphrase",
    "Particles",
    "PhrasePack",
    "Slot",
    "Step",
    "apply_transforms",
    "builtin_languages",
    "find_slots",
    "load_pack",
    "load_pack_text",
    "merge_packs",
    "paraphrases",
    "resolve_pack",
]
