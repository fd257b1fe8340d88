"""The statistical shrinker: minimise a failing input when the test itself is noisy.

Delta debugging and Hypothesis's shrinker assume that running a test twice gives the same
answer. An agent fails *sometimes*: the conversation that broke a refund policy in 3 runs
out of 10 may pass the next 5. This package shrinks anyway, on a run budget, and says how
sure it is. It is generic: it knows units, candidates and outcomes, not conversations.

The model
---------
* **Input**: a forest of :class:`Unit` objects, e.g. turns -> clauses -> tokens. A
  candidate is the input with some units removed; ``build(kept_units)`` turns it into
  whatever the test runs on. A unit with children lives as long as one of its leaves does.
  ``protected`` units (ids, amounts and other slots the failure is about) are never removed.
* **Oracle**: ``run(candidate, trial_index) -> Outcome``: passed, or failed with a hashable
  *signature* naming the failure (contract, clause, step). A failure with another signature
  is a different bug: it counts as a pass and is reported in ``other_signatures``.
* **Calibration**: the original is run until it fails (or the caller passes the oracle's
  evidence as :class:`Calibration`), which fixes the signature and starts the estimate of
  the reproduction rate ``q``.

One query: "does this candidate still fail?"
--------------------------------------------
Each query is a truncated sequential test (:mod:`agentprop._shrink.query`).

* Specific signature (no background false failures): one matching failure proves "still
  fails" and stops the query, so a reproducing candidate costs about ``1/q`` runs. "Does
  not reproduce" needs ``n`` clean runs with ``E[(1 - q)^n] <= miss_error``, the expectation
  taken over the posterior of ``q``: 10 runs at a known ``q = 0.5`` and ``miss_error =
  0.001``, more while ``q`` is known only from a few runs. A miss (declaring a removable unit
  necessary) leaves an extra unit in the result; it can never produce a result that does
  not fail.
* Background false failures at a stated rate ``eps > 0``: one failure proves nothing, so
  every query is Wald's SPRT of ``rate = eps`` against ``rate = q1`` (``q1`` a cautious
  quantile of the rate posterior), with both error rates bounded.

``q`` is pooled from the original and every candidate known to reproduce. Care is needed:
since queries stop at their first failure, pooling only the candidates that failed quickly
overestimates ``q``, which shortens later queries and compounds. Under monotonicity (a
candidate containing a reproducer reproduces, the assumption ddmin also makes) every
candidate containing a confirmed reproducer is known to reproduce, clean streaks included;
the search resolves unlucky first looks before taking decisions that depend on ``q``; and a
cautious ``Beta(1, 3)`` prior stops a few lucky early failures from making queries short.

Monotonicity also lets the ledger answer many queries for free: a candidate containing a
confirmed reproducer reproduces, one inside a candidate ruled out is ruled out, and clean
runs of any bigger candidate lacking the same units count as evidence against a smaller one.
Verdicts are memoised per candidate and a candidate's runs always use fresh trial indices.

The search
----------
(:mod:`agentprop._shrink.search`) A query that says "no" costs the full rule-out count, one
that says "yes" about ``1/q``, so the search prefers questions likely to be answered "yes"
and defers the expensive "no"s:

1. **Explore** the levels top-down (turns, clauses, tokens). On a level larger than
   ``small_level``, first try removing halves, quarters, ... (one success removes many
   units); then try each unit on its own. On a smaller level, pairs go first once the rate
   is *settled* (three more failures would shorten a rule-out by at most half a run each):
   until then each single removal is also a failure that sharpens ``q``, worth as much as
   the runs pairs would save. Every query is a short first look.
2. **Confirm**: sweep the levels one unit at a time with looks that double in length until
   they reach the full rule-out count, then sweep to a fixed point. Earlier clean runs keep
   counting, so a necessary unit pays for its rule-out about once.

The run budget is never exceeded, and the search is anytime: it only ever moves to a
candidate a query confirmed, so stopping early returns the smallest confirmed reproducer so
far (``ShrinkResult.minimal`` says whether every remaining unit was shown necessary;
``ShrinkResult.minimality()`` states it with its confidence and the runs that decided it).
:func:`verify` re-runs the result with fresh trial indices and reports its failure rate
with a Wilson interval next to the original's.

What it costs (``python benchmarks/shrink.py``, 1,000 seeded trials per row): 8 clauses
with 2 needed at ``q = 0.5``: ~29 runs, 99% exactly minimal, with ``q`` known (DESIGN.md
section 3 item 6's setting, where one-at-a-time deletion costs 32; ddmin with 10 runs per
query needs ~128); ~51 runs, 100% exactly minimal, learning ``q`` from scratch, calibration
included; ~45 runs of its own given the runs the oracle's SPRT made to decide the case (~6
runs, ~3 failures), as ``agentprop.oracle.shrink`` does. 40 tokens searched clause-then-token: ~57
runs against ddmin's ~293; with background false failures at 5%, >99% exactly minimal where
ddmin's "one failure in 10" rule is right ~4% of the time.

The price of not knowing ``q``
------------------------------
With ``q`` known, one-at-a-time deletion of 8 units with 2 needed costs ``6 / q`` runs for
the removals plus ``2 x 10`` clean runs to show the two needed units needed: 32 at
``q = 0.5``, ~29 with pairs. A shrinker that learns ``q`` as it goes must pay more, whatever
its rule: a "does not reproduce" must be rarely wrong at *every* ``q``, and a handful of
failures cannot rule out that ``q`` is nearer 0.25 than 0.5. ``benchmarks/shrink_bound.py``
solves for the cheapest rule that is wrong at most 1 time in 1,000 at every ``q`` in
[0.1, 0.95], given ``f`` failures each seen after a geometric wait: 17.2 clean runs per
needed unit at ``f = 7``, 14.5 at ``f = 10`` (this engine's posterior-predictive rule:
18.6 and 15.8, with a worst-case miss rate of ~1.5e-3). Adding the ~2 runs each failure
costs, no shrinker that learns ``q`` does the 8-clause row in fewer than ~48 runs (~45 at
the weakest error rate that keeps 99% of results exactly minimal). Weaker priors that save a
run or two at ``q = 0.5`` were measured and rejected: they are anti-conservative at low ``q``
and in the hierarchical search (the 40-token case fell to 97.6% exactly minimal, ``q = 0.2``
to 99.0%).

The ddmin baseline the benchmark compares against lives with the benchmarks
(``benchmarks/_support/ddmin.py``), not in the package.
"""

from __future__ import annotations

from agentprop._shrink.query import (
    Outcome,
    QueryRecord,
    RateEstimate,
    RatePosterior,
    Verdict,
    wilson_interval,
)
from agentprop._shrink.search import (
    Calibration,
    ShrinkResult,
    Unit,
    UnitIndex,
    Verification,
    runs_to_see,
    shrink,
    verify,
)

__all__ = [
    "Calibration",
    "Outcome",
    "QueryRecord",
    "RateEstimate",
    "RatePosterior",
    "ShrinkResult",
    "Unit",
    "UnitIndex",
    "Verdict",
    "Verification",
    "runs_to_see",
    "shrink",
    "verify",
    "wilson_interval",
]
