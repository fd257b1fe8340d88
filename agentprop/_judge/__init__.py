"""Judging: one run of a case held against what the spec expects (pure functions of a trace and
a case; no agent runs, no decision over many runs)."""
