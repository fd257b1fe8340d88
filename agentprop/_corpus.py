"""The failure corpus: shrunk reproducers kept on disk and replayed first on the next run.

Hypothesis's example database keeps failing examples, but drops one as soon as it passes
once — and a flaky agent's failure passes often. agentprop keeps every shrunk reproducer as a
value (the scenario itself: messages, world, expectations), keyed by spec, violated clause and
the agent's fingerprint, in ``.agentprop/corpus/<spec_id>/<id>.json``. ``agentprop run`` (and
``agentprop.check`` when a corpus is configured) decides them before anything else, so a
known bug is re-checked statistically every time until it is really gone.
``agentprop corpus show ID --pytest`` prints one as a ready pytest regression test.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from agentprop._files import write_atomic
from agentprop._scenario import Scenario

if TYPE_CHECKING:
    from agentprop._agents import LoadedAgent
    from agentprop._conversation_shrink import ShrinkReport
from agentprop.errors import InputError, SourceLocation

DEFAULT_DIR = Path(".agentprop") / "corpus"


class CorpusEntry(BaseModel):
    """One shrunk reproducer."""

    id: str
    spec_id: str
    spec_path: str | None = None
    scenario_id: str
    signature: str
    clause: str | None = None
    agent_ref: str
    agent_faults: dict[str, float] = {}
    agent_fingerprint: str
    prop: str = "mft"
    scenario: Scenario
    """The reproducer: replaying it is ``agentprop.check(project, entry.scenario, agent)``."""
    original_messages: list[str]
    original_rate: float | None = None
    reproducer_rate: float | None = None
    created: str


def entry_id(spec_id: str, signature: str, fingerprint: str, scenario: Scenario) -> str:
    text = json.dumps([spec_id, signature, fingerprint, scenario.model_dump(mode="json")], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def clause_of(signature: str) -> str | None:
    """``calls_in_order:decision_tree.N2_AUTH…@turn0:missing=x`` -> the clause part."""
    _, _, rest = signature.partition(":")
    clause = rest.split("@", 1)[0]
    return clause or None


class Corpus:
    """A directory of :class:`CorpusEntry` files."""

    def __init__(self, root: str | Path = DEFAULT_DIR) -> None:
        self.root = Path(root)

    def save(self, entry: CorpusEntry) -> Path:
        # atomic: a kill never leaves half an entry
        return write_atomic(self.root / entry.spec_id / f"{entry.id}.json", entry.model_dump_json(indent=2))

    def entries(self, *, spec_id: str | None = None, agent_ref: str | None = None, scenario_id: str | None = None) -> list[CorpusEntry]:
        if not self.root.is_dir():
            return []
        folders = [self.root / spec_id] if spec_id else sorted(p for p in self.root.iterdir() if p.is_dir())
        out: list[CorpusEntry] = []
        for folder in folders:
            for path in sorted(folder.glob("*.json")):
                entry = self._read(path)
                if agent_ref is not None and entry.agent_ref != agent_ref:
                    continue
                if scenario_id is not None and entry.scenario_id != scenario_id:
                    continue
                out.append(entry)
        return sorted(out, key=lambda e: e.created)

    def get(self, entry_id_prefix: str) -> CorpusEntry:
        matches = [e for e in self.entries() if e.id.startswith(entry_id_prefix)]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(e.id for e in self.entries()) or "(the corpus is empty)"
        problem = "no corpus entry" if not matches else "several corpus entries"
        raise InputError(f"{problem} with id {entry_id_prefix!r} in {self.root}", fix=f"use one of: {known}")

    def remove(self, entry: CorpusEntry) -> None:
        (self.root / entry.spec_id / f"{entry.id}.json").unlink(missing_ok=True)

    @staticmethod
    def _read(path: Path) -> CorpusEntry:
        try:
            return CorpusEntry.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, ValueError) as exc:
            raise InputError(
                f"corrupt corpus entry: {exc.__class__.__name__}",
                location=SourceLocation(path),
                fix="delete the file (it will be recreated the next time the failure is shrunk)",
            ) from None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def pytest_regression(entry: CorpusEntry, *, spec_path: str | None = None) -> str:
    """A self-contained pytest test that decides ``entry`` with the oracle."""
    spec = spec_path or entry.spec_path or "path/to/spec"
    name = "".join(c if c.isalnum() else "_" for c in entry.scenario_id.lower()).strip("_")
    scenario_json = entry.scenario.model_dump_json(indent=4)
    return f'''"""Regression test for a shrunk agentprop failure (corpus entry {entry.id}).

Failure: {entry.signature}
Original first message: {entry.original_messages[0]!r}
Reproducer messages:    {entry.scenario.messages!r}
"""

from pathlib import Path

import agentprop

SPEC = Path({spec!r})
SCENARIO = agentprop.Scenario.model_validate_json(
    r"""{scenario_json}"""
)


def test_regression_{name}_{entry.id}() -> None:
    project = agentprop.load_project(SPEC)
    agent = agentprop.load_agent({entry.agent_ref!r}, SPEC if SPEC.is_dir() else SPEC.parent, {entry.agent_faults!r})
    agentprop.check(project, SCENARIO, agent)
'''


def entry_from_shrink(report: ShrinkReport, *, spec_id: str, spec_path: str | None, agent: LoadedAgent, prop: str = "mft") -> CorpusEntry:
    """A corpus entry for a shrink result (the reproducer scenario, as values)."""
    return CorpusEntry(
        id=entry_id(spec_id, report.signature, agent.fingerprint, report.reproducer),
        spec_id=spec_id,
        spec_path=spec_path,
        scenario_id=report.scenario,
        signature=report.signature,
        clause=clause_of(report.signature),
        agent_ref=agent.ref,
        agent_faults=dict(agent.faults),
        agent_fingerprint=agent.fingerprint,
        prop=prop,
        scenario=report.reproducer,
        original_messages=report.original_messages,
        original_rate=report.original_rate.rate,
        reproducer_rate=report.reproducer_rate.rate if report.reproducer_rate else None,
        created=now(),
    )
