"""Deciding: the statistical oracle over many runs of a case, the memo of runs, sessions and
settings, ``check``, metamorphic relations, the corpus, the shrinker and behaviour snapshots."""
