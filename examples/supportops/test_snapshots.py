"""Behaviour snapshots of the SupportOps reference agent (see docs/snapshots.md).

The approved baselines live in ``__snapshots__/test_snapshots/`` next to this file. Run
``pytest examples/supportops/test_snapshots.py``; with ``AGENTPROP_FAULTS=wrong_order=1`` the
agent reads the account before verifying the caller and the snapshot reports the change.
To accept a change on purpose: ``--agentprop-snapshot-update --agentprop-snapshot-reason "why"``.
"""

from __future__ import annotations

import os
from pathlib import Path

import agentprop

HERE = Path(__file__).resolve().parent
project = agentprop.load_project(HERE)


def reference_agent() -> agentprop.LoadedAgent:
    """The reference agent, with the fault knobs named in AGENTPROP_FAULTS (NAME=P,NAME=P)."""
    return agentprop.load_agent(
        "agent:SupportOpsAgent", HERE, os.environ.get("AGENTPROP_FAULTS", "")
    )


agent = reference_agent()


def test_cancel_that_fails_opens_a_ticket(agentprop_snapshot) -> None:
    agentprop_snapshot.check(project, "END_TICKET<-N7_CANCEL", agent)


def test_address_change_denied_by_the_plan(agentprop_snapshot) -> None:
    agentprop_snapshot.check(project, "END_ADDRESS_DENIED<-N8_ADDRESS_ELIGIBILITY", agent)
