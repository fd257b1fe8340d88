"""Item 4 of issue #11: ``respond`` was trusted. The runbook agent lies in its structured
response: it lists a tool it never called in ``tool_actions``, names a node the spec does not
have as ``node_id``, or cites in ``evidence`` a runbook id no tool returned. Each used to pass
every case; the MFT's ``tool_actions_match``, ``node_id_matches`` and ``evidence_grounded``
find them."""

from __future__ import annotations

from . import ZooFault

PROJECT = "tests/data/promises/runbook"

ENTRIES: list[ZooFault] = [
    ZooFault(
        name="lying_tool_actions",
        item=4,
        project=PROJECT,
        faults={"lie_tool_actions": 1.0},
        expect="tool_actions_match",
    ),
    ZooFault(
        name="invented_node_id",
        item=4,
        project=PROJECT,
        faults={"invent_node_id": 1.0},
        expect="node_id_matches",
    ),
    ZooFault(
        name="invented_evidence",
        item=4,
        project=PROJECT,
        faults={"invent_evidence": 1.0},
        expect="evidence_grounded",
    ),
]
