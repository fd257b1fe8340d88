"""Semantic mutation testing: does the test suite catch a plausibly wrong agent?

A mutant carries a pack's mutation intent (``skip the authentication gate``): a fault knob of a
Python agent, or a model agent's prompt rewritten by MutationSmith. An activation probe, with a
control run on the clean agent, shows whether the mutant really does it; the visible suite then
runs against every activated mutant, each case decided by the oracle. A mutant is **killed**
when a case the clean agent passes fails on it, and **survives** otherwise; the mutation score
is killed / activated. Non-activating and vacuous probes (the clean agent fires them too) are
reported and left out of the score.
"""
