"""Item 3: a binding cannot downgrade a requirement.

Binding ``incident_created`` to create_incident's output used to make page_oncall, the other
tool N2_MAJOR requires, merely allowed on the SEV1 path: an agent that never pages passed every
case. A required tool now stays required unless the branch leaves the happy path (the incident
could not be created), and lint reports that reading at the binding's line.
"""

from __future__ import annotations

from . import ZooFault

ENTRIES: list[ZooFault] = [
    ZooFault(
        name="silent_page_skip",
        item=3,
        project="tests/data/promises/incident",
        faults={"silent_page_skip": 1.0},
        expect="page_oncall",
    ),
]
