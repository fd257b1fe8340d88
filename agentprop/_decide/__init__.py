"""Deciding: contracts and properties over traces, the statistical oracle, the memo of runs,
``check``, metamorphic relations, the corpus, the shrinker and behaviour snapshots."""
