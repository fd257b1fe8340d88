"""The pipeline's defaults, in a module that imports nothing (the command line reads them
to build its options without loading the pipeline)."""

from __future__ import annotations

KINDS: tuple[str, ...] = ("mft", "explore", "probe", "boundary", "dir", "inv")
"""Every case kind ``agentprop run --kinds`` accepts (``explore``:
:mod:`agentprop._pipeline.explore`; ``probe``: :mod:`agentprop._pipeline.probe`)."""

DEFAULT_PER_PATH = 12
"""Inputs explored per path by default (``--explore N``)."""
