"""Semantic mutation testing: does the test suite catch a plausibly wrong agent?

A mutant carries a pack's mutation intent; an activation probe with a clean-agent control shows
whether it really does it. A mutant is killed when a case the clean agent passes fails on it;
the score is killed / activated, with non-activating and vacuous probes reported and left out.
"""
