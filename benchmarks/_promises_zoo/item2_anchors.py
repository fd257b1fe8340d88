"""Item 2: ordering anchors read as one call.

The pharmacy spec's nodes each repeat the tool the previous node ended on
(``N2 [verify_patient, get_prescription]``, ``N3 [get_prescription, check_interactions]``,
``N4 [check_interactions, submit_refill]``). Read as second calls, the correct agent failed and
the three deepest paths were unrealisable (7 calls against max_tool_calls_per_turn 4), so an
agent that submits a refill without checking interactions went unnoticed. Read as anchors, the
deep paths expect each tool once and the skipped check fails them.
"""

from __future__ import annotations

from . import ZooFault

ENTRIES: list[ZooFault] = [
    ZooFault(
        name="skip_interactions",
        item=2,
        project="tests/data/promises/pharmacy",
        faults={"skip_interactions": 1.0},
        expect="check_interactions",
    ),
]
