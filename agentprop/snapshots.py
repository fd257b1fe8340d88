"""Behaviour snapshots: a case's approved behaviour, and a statistical check against it.

:func:`check_snapshot` (also at the top level) runs a case and compares its observed
:class:`Behaviour` (:func:`behaviour_of`) with the approved :class:`Snapshot` kept in a
:class:`SnapshotStore`; ``update=True`` approves the new behaviour with a reason.
"""

from agentprop._decide.snapshot import (
    Behaviour,
    Snapshot,
    SnapshotResult,
    SnapshotStore,
    acheck_snapshot,
    behaviour_of,
)
from agentprop._decide.snapshot_check import check_snapshot

__all__ = [
    "Behaviour",
    "Snapshot",
    "SnapshotResult",
    "SnapshotStore",
    "acheck_snapshot",
    "behaviour_of",
    "check_snapshot",
]
