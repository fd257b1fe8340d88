"""Phrasing: the values :func:`agentprop.strategies.paraphrases` draws and the helpers behind them.

A :class:`Paraphrase` is an original message with the :class:`Step` s that rewrote it
(:data:`TRANSFORM_NAMES`); :func:`apply_transforms` replays steps on a text, and
:func:`find_slots` shows the :class:`Slot` s a rewrite never touches. :class:`PhrasePack` s hold
a language's phrasings (:func:`load_pack`, :func:`load_pack_text`, :func:`merge_packs`,
:func:`resolve_pack`, :func:`builtin_languages`). :func:`llm_paraphrase_pool` fetches and
screens a model's rewrites into a :class:`ParaphrasePool` (:class:`RejectedParaphrase` s say why
one was dropped).
"""

from agentprop.errors import ParaphrasePoolError
from agentprop.strategies._internal.llm_pool import (
    ParaphrasePool,
    RejectedParaphrase,
    llm_paraphrase_pool,
)
from agentprop.strategies._internal.packs import (
    PhrasePack,
    builtin_languages,
    load_pack,
    load_pack_text,
    merge_packs,
    resolve_pack,
)
from agentprop.strategies._internal.paraphrase import Paraphrase, Step, apply_transforms
from agentprop.strategies._internal.slots import Slot, find_slots
from agentprop.strategies._internal.transforms import TRANSFORM_NAMES

__all__ = [
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
]
