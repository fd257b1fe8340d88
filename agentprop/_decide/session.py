"""The session: what every check of one testing session shares, in one object.

A :class:`Session` holds the memo, the one budget, the corpus, the cache mode, the profile and
seed, and what was recorded. There is no module-level session state: pytest keeps one in
``config.stash``; elsewhere :func:`current_session` is a context variable, so two sessions never
share a memo, a budget or results. Activating one also sets the model-call context.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentprop._decide.memo import TrialMemo
from agentprop._judge.signature import bug_id
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.cache import CacheMode
from agentprop._modelapi.context import (
    ModelCallContext,
    model_call_context,
    restore,
    set_current_model_context,
)
from agentprop._util.scope import (
    current_test,
    scoped_overrides,
    session_provider,
    session_var,
    settings_scope,
)

__all__ = [
    "CheckRecord",
    "CorpusNote",
    "Session",
    "SessionBug",
    "current_session",
    "current_test",
    "scoped_overrides",
    "settings_scope",
]

if TYPE_CHECKING:
    from agentprop._decide.corpus import Corpus, ProjectCorpora
    from agentprop._decide.oracle import CheckResult
    from agentprop._decide.shrunk import ShrinkReport
    from agentprop._decide.snapshot import SnapshotResult


@dataclass
class CheckRecord:
    """A decided check, kept for the pytest terminal summary."""

    test: str
    result: CheckResult


@dataclass
class CorpusNote:
    """What a corpus replay inside :func:`agentprop.check` meant (for the pytest summary)."""

    test: str
    entry: str
    action: str
    message: str


@dataclass
class SessionBug:
    """A bug shrunk in this session, and the tests that failed with it."""

    key: str
    test: str
    shrunk: ShrinkReport
    corpus_entry: str | None = None
    tests: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return bug_id(self.key)


@dataclass(eq=False)
class Session:
    """The state one testing session shares (see the module docstring)."""

    memo: TrialMemo = field(default_factory=TrialMemo)
    budget: Budget = field(default_factory=Budget)
    corpus: Corpus | ProjectCorpora | None = None
    """Replayed first by :func:`agentprop.check` for each scenario (``None``: no replay)."""
    cache_mode: CacheMode | None = None
    """The API cache mode of model agents that choose none (``None``: the default)."""
    profile: str = "ci"
    seed: int = 0
    store: str | None = None
    """The shared store URL (``redis://...``) of the API caches (``None``: ``$AGENTPROP_STORE``)."""
    results: list[CheckRecord] = field(default_factory=list)
    corpus_notes: list[CorpusNote] = field(default_factory=list)
    replayed: set[str] = field(default_factory=set)
    """Corpus entries already replayed in this session (each is replayed once)."""
    bugs: dict[str, SessionBug] = field(default_factory=dict)
    """Shrunk bugs by :func:`~agentprop._judge.signature.bug_key`: one bug, one shrink."""
    snapshots: list[tuple[str, SnapshotResult]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    model_context: ModelCallContext = field(init=False, repr=False)
    merged_memo_hits: int = 0
    """Memo hits of other processes merged into this session (pytest-xdist workers)."""

    def __post_init__(self) -> None:
        self.model_context = ModelCallContext(
            budget=self.budget, cache_mode=self.cache_mode, store=self.store
        )

    @contextlib.contextmanager
    def activate(self) -> Iterator[Session]:
        """Make this the current session (and its budget and cache mode the model agents')
        within the block."""
        previous, token = _current.get(), _current.set(self)
        try:
            with model_call_context(self.model_context):
                yield self
        finally:
            restore(_current, token, previous)

    def record(self, test: str, result: CheckResult) -> None:
        """Keep ``result`` as a check of ``test``; with a recorder in force (``pytest
        --agentprop-records``), also record which decision it is."""
        from agentprop._decide.records import CheckLine, current_recorder

        with self.lock:
            self.results.append(CheckRecord(test, result))
            recorder = current_recorder()
            if recorder is not None:
                recorder.write(CheckLine(test=test, case=result.name, decision=result._decision))

    def recorded_results(self) -> list[CheckRecord]:
        with self.lock:
            return list(self.results)

    def note_replay(self, note: CorpusNote) -> None:
        with self.lock:
            self.corpus_notes.append(note)

    def recorded_corpus_notes(self) -> list[CorpusNote]:
        with self.lock:
            return list(self.corpus_notes)

    def first_replay(self, entry_id: str) -> bool:
        """Whether ``entry_id`` is replayed for the first time in this session (and mark it)."""
        with self.lock:
            if entry_id in self.replayed:
                return False
            self.replayed.add(entry_id)
            return True

    def shrunk_bugs(self) -> dict[str, SessionBug]:
        with self.lock:
            return dict(self.bugs)

    @property
    def memo_hits(self) -> int:
        """Memo hits in this process and in the workers merged into it."""
        return self.memo.hits + self.merged_memo_hits

    # -- across processes (pytest-xdist) ---------------------------------------------------------

    def export(self) -> dict[str, Any]:
        """What this session recorded, as JSON-able data (a worker sends it to the controller)."""
        with self.lock:
            return {
                "results": [
                    {"test": r.test, "result": r.result.model_dump(mode="json")}
                    for r in self.results
                ],
                "corpus_notes": [vars(n) for n in self.corpus_notes],
                "bugs": [
                    {
                        "key": b.key,
                        "test": b.test,
                        "shrunk": b.shrunk.model_dump(mode="json"),
                        "corpus_entry": b.corpus_entry,
                        "tests": b.tests,
                    }
                    for b in self.bugs.values()
                ],
                "snapshots": [[nodeid, r.model_dump(mode="json")] for nodeid, r in self.snapshots],
                "memo_hits": self.memo.hits,
            }

    def merge(self, data: dict[str, Any], rank: Callable[[str], int] | None = None) -> None:
        """Add what another process's session recorded (:meth:`export`) to this one: its
        checks, corpus replays, shrunk bugs and snapshots. Of two shrinks of one bug, the first
        merged is kept; with ``rank`` (a test's place in the collection), the shrink of the test
        that comes first, as one process running the tests in order would have made it, and the
        bug's tests in that order."""
        from agentprop._decide.oracle import CheckResult
        from agentprop._decide.shrunk import ShrinkReport
        from agentprop._decide.snapshot import SnapshotResult

        with self.lock:
            self.results.extend(
                CheckRecord(r["test"], CheckResult.model_validate(r["result"]))
                for r in data.get("results", [])
            )
            self.corpus_notes.extend(CorpusNote(**n) for n in data.get("corpus_notes", []))
            for b in data.get("bugs", []):
                known = self.bugs.get(b["key"])
                if known is None:
                    self.bugs[b["key"]] = SessionBug(
                        b["key"],
                        b["test"],
                        ShrinkReport.model_validate(b["shrunk"]),
                        b["corpus_entry"],
                        list(b["tests"]),
                    )
                else:
                    known.tests.extend(t for t in b["tests"] if t not in known.tests)
                    if rank is not None:
                        if rank(b["test"]) < rank(known.test):
                            known.test, known.corpus_entry = b["test"], b["corpus_entry"]
                            known.shrunk = ShrinkReport.model_validate(b["shrunk"])
                        known.tests.sort(key=rank)
            self.snapshots.extend(
                (nodeid, SnapshotResult.model_validate(r))
                for nodeid, r in data.get("snapshots", [])
            )
            self.merged_memo_hits += int(data.get("memo_hits", 0))

    def describe(self) -> dict[str, Any]:
        """A summary for reports: profile, seed, memo and budget figures."""
        return {
            "profile": self.profile,
            "seed": self.seed,
            "memo_hits": self.memo.hits,
            "budget": self.budget.snapshot().model_dump(),
        }


_current: contextvars.ContextVar[Any] = session_var
"""The session in force (kept in :mod:`agentprop._util.scope`, so the pytest plugin can hide an
outer one without importing this module)."""


def current_session() -> Session:
    """The session in force; if there is none in this context, the pytest run's (made on first
    use), else a fresh one made current for the rest of the context."""
    session: Session | None = _current.get()
    provider = session_provider() if session is None else None
    if provider is not None:  # the pytest run's session, made and activated on first use
        session = provider()
        if _current.get() is None:  # activated in another context (an async test's task): here too
            _current.set(session)
            set_current_model_context(session.model_context)
    if session is None:
        session = Session()
        _current.set(session)
        # its model context too, so a model agent outside any `activate` block shares its budget
        set_current_model_context(session.model_context)
    return session
