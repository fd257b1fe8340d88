"""Helpers of benchmarks/robustness.py (and of the fuzz test in the suite): hostile inputs
(:mod:`.inputs`) and the budget-overrun measurement (:mod:`.budget`)."""
