"""Item 9 of the promises issue: retries are tested.

The SupportOps agent retries a tool call as the tool's ``retry_policy`` says (one retry on a
timeout). With ``never_retry`` it gives up on the first failure and opens a ticket. Before
loops and retries were built into scenarios no case ever made a first call fail, so this agent
passed; now ``END_CANCELLED<-N7_CANCEL/cancel_order:timeout+retry`` (and the retry cases of
verify_identity, get_account and get_plan_rules) time out on the first call and expect the
retry call (missing it is the failure, before the decision it changes).
"""

from __future__ import annotations

from benchmarks._promises_zoo import ZooFault

ENTRIES: list[ZooFault] = [
    ZooFault(
        name="never_retry",
        item=9,
        project="examples/supportops",
        faults={"never_retry": 1.0},
        cases=("+retry",),
        expect="cancel_order was called 1 time(s), 2 expected",
    ),
]
