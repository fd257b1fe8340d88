"""Item 5 of issue #11: only numbers were grounded. The runbook agent reads the runbook and
adds a step of its own; the MFT's ``response_grounded`` finds the list item that matches no
step of get_runbook's output."""

from __future__ import annotations

from . import ZooFault

ENTRIES: list[ZooFault] = [
    ZooFault(
        name="invented_step",
        item=5,
        project="tests/data/promises/runbook",
        faults={"invented_step": 1.0},
        expect="list item",
    ),
]
