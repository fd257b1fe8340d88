"""The pipeline's defaults, in a module that imports nothing (the command line reads them
to build its options without loading the pipeline)."""

from __future__ import annotations

KINDS: tuple[str, ...] = ("mft", "explore", "boundary", "dir", "inv")
"""Every case kind ``agentprop run --kinds`` accepts (``explore``: :mod:`agentprop._pipeline.explore`)."""

DEFAULT_PER_PATH = 8
"""Inputs explored per path by default (``--explore N``)."""
