"""The contracts zoo of ``benchmarks/promises.py``: one fault per promise agentprop keeps.

Each module in this package defines ``ENTRIES: list[ZooFault]``. A fault is *found* when the
faulty agent's run of the named project has at least one case that is not PASS (FAIL or
UNSTABLE; NOT APPLICABLE and INCONCLUSIVE do not count) whose failure text contains ``expect``
(when given). Entries whose promise is not a case verdict (the mutation score's control run,
for instance) give a ``check`` function instead, called with the seed and returning a
:class:`ZooOutcome`.

Projects are directories with ``spec.yaml`` and ``agentprop.yaml``, relative to the
repository root; the three bundled examples live under ``examples/``, specs written for a
single promise under ``tests/data/promises/``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ZooOutcome:
    found: bool
    runs: int
    note: str = ""


@dataclass(frozen=True)
class ZooFault:
    name: str
    """Short id of the fault, e.g. ``silent_page_skip``."""
    item: int
    """The item of the promises issue (#11) this fault stands for."""
    project: str
    """Directory of the spec and bindings, relative to the repository root."""
    faults: dict[str, float] = field(default_factory=dict)
    """Fault knobs of the project's agent that inject the bug."""
    agent: str | None = None
    """``MODULE:ATTR`` of the agent (default: the bindings' ``agent:``)."""
    kinds: tuple[str, ...] = ("mft", "explore", "boundary", "dir", "inv")
    cases: tuple[str, ...] = ()
    """``--case`` filters (substrings of case ids) that keep the run small; empty runs all."""
    expect: str = ""
    """A substring the finding case's failure explanation or signature must contain."""
    check: Callable[[int], ZooOutcome] | None = None
    """A custom check for promises that are not a case verdict of ``agentprop run``."""


def all_entries() -> list[ZooFault]:
    """Every ``ENTRIES`` of every module of this package, sorted by item then name."""
    out: list[ZooFault] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        out.extend(getattr(module, "ENTRIES", []))
    return sorted(out, key=lambda e: (e.item, e.name))
