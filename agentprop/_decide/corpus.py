"""The failure corpus: shrunk reproducers kept on disk and replayed first on the next run.

An entry is a scenario with its failure's signature, in ``<corpus>/<spec_id>/<id>.json``; its id
hashes spec, agent, signature and scenario, so the same bug found again updates its entry. A
replay that fails with the signature is a regression; one that passes with confidence retires
the entry to ``retired/``. Only the agent an entry was found with can retire it. Stores: the
directory (:class:`Corpus`) or a Redis server (:class:`RedisCorpus`, over a directory read-only);
on both, :meth:`Corpus.record` is atomic across processes, so the corpus is the union of what
every process found, one entry per bug (the id: spec, agent, signature, case).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from agentprop._modelapi.stores import redis_client, redis_url, safe_url
from agentprop._scenario.build import Scenario
from agentprop._util.files import describe_validation, path_component, read_json, write_atomic

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]  # no inter-process locking there

if TYPE_CHECKING:
    import redis

    from agentprop._agents.loading import LoadedAgent
    from agentprop._agents.project import Project
    from agentprop._decide.oracle import CheckResult
    from agentprop._decide.shrunk import ShrinkReport
from agentprop.errors import InputError, SourceLocation

DEFAULT_DIR = Path(".agentprop") / "corpus"
"""The corpus directory relative to the bindings' directory (see :func:`default_corpus_dir`)."""
PLAIN_SPEC_ID = "plain"
"""The spec id (folder) of the entries of spec-free checks (``agentprop.check(agent, messages,
prop)``), which have no spec: keyed by the case, replayed and retired by the check itself."""
RETIRED = "retired"
"""The folder (inside the corpus) retired entries are moved to; not a spec id."""


def default_corpus_dir(project: Project) -> Path:
    """``<bindings dir>/.agentprop/corpus`` (the spec's directory when there are no bindings):
    the same corpus whatever the current directory."""
    return project.base_dir / DEFAULT_DIR


class CorpusEntry(BaseModel):
    """One shrunk reproducer."""

    id: str
    spec_id: str
    spec_path: str | None = None
    """The spec's directory: relative to the corpus folder when ``spec_path_base`` is
    ``"corpus"`` (what :meth:`Corpus.save` writes), else as typed on the run's command line."""
    spec_path_base: Literal["corpus"] | None = None
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
    original_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    reproducer_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    """The reproducer's failure rate on fresh runs; ``None`` when none were made. Rates are in
    [0, 1]: anything else (NaN, 2.0) makes the entry damaged, not a run's crash."""
    confirmed: bool = True
    """``False``: the run saw the failure in its cases, but the reproducer's fresh runs stayed
    clean or were not made (budget spent). Saved all the same; retiring it needs the runs that
    would show ``original_rate``."""
    created: str
    last_seen: str | None = None
    """When a run last met this failure (a regression, or the same bug found again)."""
    seen: int = 1
    """How many runs have met it (the one that created it included)."""
    choices: dict[str, Any] | None = None
    """The reproducer's generator choices (template variant, transforms per turn) when it
    came from an explored input (``ShrinkReport.reproducer_choices``); null otherwise. The
    entry replays from ``scenario`` (messages and world as values) either way."""
    cause: list[str] = Field(default_factory=list)
    """The choice families its reproducer needs when its signature had more than one cause
    in the run that saved it (``BugReport.cause``): each cause is its own entry. Empty
    otherwise."""
    retired: str | None = None
    """When it was retired (its fault gone); such entries live under ``retired/``."""
    retired_reason: str | None = None


def entry_id(
    spec_id: str,
    agent_ref: str,
    signature: str,
    scenario_id: str,
    faults: Mapping[str, float] | None = None,
    cause: Sequence[str] = (),
) -> str:
    """Same spec, agent (reference and fault knobs), signature, case and cause -> same entry
    (found again, it is updated). Without knobs and cause the id is what it always was; two
    causes behind one signature (:func:`agentprop._pipeline.bugs.distinct_causes`) are two
    entries."""
    parts: list[Any] = [spec_id, agent_ref, signature, scenario_id]
    if faults:
        parts.append(sorted(faults.items()))
    if cause:
        parts.append(["cause", *sorted(cause)])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]


def agent_label(ref: str, faults: Mapping[str, float]) -> str:
    """``agent:SupportOpsAgent --fault skip_auth=0.3``: the agent an entry was found with."""
    return ref + "".join(f" --fault {k}={v:g}" for k, v in sorted(faults.items()))


def found_with(entry: CorpusEntry, agent: LoadedAgent) -> bool:
    """Whether ``agent`` is the one ``entry`` was found with: the same reference and the same
    fault knobs (its code may have changed: that is what a replay checks)."""
    return entry.agent_ref == agent.ref and dict(entry.agent_faults) == dict(agent.faults)


def runs_to_rule_out(rate: float | None, confidence: float) -> int:
    """Clean runs after which a failure that reproduced at ``rate`` would have shown up with
    probability ``confidence``: the least n with (1 - rate)^n <= 1 - confidence (0 when the
    rate is unknown)."""
    if rate is None or rate <= 0.0:
        return 0
    if rate >= 1.0:
        return 1
    return math.ceil(math.log(1.0 - confidence) / math.log(1.0 - rate))


def clause_of(signature: str) -> str | None:
    """``calls_in_order:decision_tree.N2_AUTH…@turn0:missing=x`` -> the clause part."""
    _, _, rest = signature.partition(":")
    clause = rest.split("@", 1)[0]
    return clause or None


class Corpus:
    """A directory of :class:`CorpusEntry` files."""

    def __init__(self, root: str | Path = DEFAULT_DIR) -> None:
        self.root = Path(root)
        self.damaged: list[InputError] = []
        """Entry files that could not be read, each an error naming the file, what is wrong and
        the fix. :meth:`entries` skips them (one damaged entry must not block every run of its
        spec) and lists them here; callers report them."""

    def for_project(self, project: Project) -> Corpus:
        """This corpus (an explicit directory serves every project)."""
        return self

    def describe(self) -> str:
        """The corpus as messages name it."""
        return str(self.root)

    @contextlib.contextmanager
    def _recording(self) -> Iterator[None]:
        """Within the block, no other process records into this corpus (a lock on its
        directory; none where ``fcntl`` is missing)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover - Windows
            yield
            return
        fd = os.open(self.root, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def folder(self, spec_id: str, *, retired: bool = False) -> Path:
        """The folder of ``spec_id``'s entries: always inside the corpus, whatever the id
        (``../../X`` or an absolute path is made a safe name, see :func:`path_component`)."""
        base = self.root / RETIRED if retired else self.root
        return base / path_component(spec_id, reserved=(RETIRED,))

    def path(self, entry: CorpusEntry) -> Path:
        return (
            self.folder(entry.spec_id, retired=bool(entry.retired))
            / f"{path_component(entry.id)}.json"
        )

    def save(self, entry: CorpusEntry) -> Path:
        # atomic: a kill never leaves half an entry
        return write_atomic(self.path(entry), self._anchored(entry).model_dump_json(indent=2))

    def spec_location(self, entry: CorpusEntry) -> Path | None:
        """Where ``entry``'s spec is (absolute), or ``None`` when no path was recorded."""
        if not entry.spec_path:
            return None
        path = Path(entry.spec_path)
        if path.is_absolute():
            return path
        base = self.root.resolve() if entry.spec_path_base == "corpus" else Path.cwd()
        return Path(os.path.normpath(base / path))

    def _anchored(self, entry: CorpusEntry) -> CorpusEntry:
        """``entry`` with its spec path relative to this corpus folder (absolute when there
        is no relative path, e.g. another drive). A legacy path that does not exist from here
        is kept as it is: it may be relative to a directory this process does not know."""
        if not entry.spec_path or entry.spec_path_base == "corpus":
            return entry
        where = self.spec_location(entry)
        if where is None or not where.exists():
            return entry
        try:
            rel = os.path.relpath(where.resolve(), self.root.resolve())
        except ValueError:
            rel = str(where.resolve())
        return entry.model_copy(update={"spec_path": rel, "spec_path_base": "corpus"})

    def find(self, entry_id_: str, spec_id: str) -> CorpusEntry | None:
        """The live entry ``entry_id_`` of ``spec_id``; a damaged file there counts as absent
        (it is noted in :attr:`damaged`, and the entry saved in its place replaces it)."""
        path = self.folder(spec_id) / f"{path_component(entry_id_)}.json"
        return self._read_or_note(path) if path.exists() else None

    def record(self, entry: CorpusEntry) -> tuple[CorpusEntry, bool]:
        """Save a newly shrunk reproducer, or update the entry that already holds the same bug
        on the same case (``seen``, ``last_seen``, the smaller reproducer). Returns the stored
        entry and whether it is new. Atomic across processes: two that record the same bug
        keep one entry, seen by both."""
        with self._recording():
            old = self.find(entry.id, entry.spec_id)
            if old is None:
                self.save(entry)
                # a bug that comes back after its entry was retired: the live entry supersedes the
                # retired one (two files with one id could be neither shown nor removed)
                (
                    self.folder(entry.spec_id, retired=True) / f"{path_component(entry.id)}.json"
                ).unlink(missing_ok=True)
                return entry, True
            merged = merge_found(old, entry)
            self.save(merged)
            return merged, False

    def seen_again(
        self, entry: CorpusEntry, *, fingerprint: str | None = None, rate: float | None = None
    ) -> CorpusEntry:
        """A replay reproduced the entry's failure: bump ``seen`` and ``last_seen``."""
        update: dict[str, Any] = {"seen": entry.seen + 1, "last_seen": now()}
        if fingerprint:
            update["agent_fingerprint"] = fingerprint
        if rate is not None:
            update["reproducer_rate"] = rate
        updated = entry.model_copy(update=update)
        self.save(updated)
        return updated

    def retire(self, entry: CorpusEntry, reason: str) -> Path:
        """Move ``entry`` to ``retired/<spec_id>/`` with the reason (its fault is gone)."""
        retired = entry.model_copy(update={"retired": now(), "retired_reason": reason})
        path = self.save(retired)
        self.path(entry.model_copy(update={"retired": None})).unlink(missing_ok=True)
        return path

    def clear(self) -> int:
        """Delete every entry, retired ones included, and the folders left empty (nothing
        else in the directory is touched); returns how many entries there were."""
        entries = self.entries() + self.entries(retired=True)
        for entry in entries:
            self.remove(entry)
        folders = [self.folder(e.spec_id, retired=True) for e in entries if e.retired] + [
            self.folder(e.spec_id) for e in entries
        ]
        for folder in [*dict.fromkeys(folders), self.root / RETIRED, self.root]:
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        return len(entries)

    def entries(
        self,
        *,
        spec_id: str | None = None,
        agent_ref: str | None = None,
        scenario_id: str | None = None,
        retired: bool = False,
    ) -> list[CorpusEntry]:
        root = self.root / RETIRED if retired else self.root
        if not root.is_dir():
            return []
        folders = (
            [self.folder(spec_id, retired=retired)]
            if spec_id
            else sorted(p for p in root.iterdir() if p.is_dir() and (retired or p.name != RETIRED))
        )
        out: list[CorpusEntry] = []
        for folder in folders:
            for path in sorted(folder.glob("*.json")):
                entry = self._read_or_note(path)
                if entry is None:
                    continue
                if agent_ref is not None and entry.agent_ref != agent_ref:
                    continue
                if scenario_id is not None and entry.scenario_id != scenario_id:
                    continue
                out.append(entry)
        return sorted(out, key=lambda e: e.created)

    def get(self, entry_id_prefix: str, *, retired: bool = True) -> CorpusEntry:
        """The entry whose id starts with ``entry_id_prefix`` (retired ones too, unless
        ``retired=False``)."""
        every = self.entries() + (self.entries(retired=True) if retired else [])
        matches = [e for e in every if e.id.startswith(entry_id_prefix)]
        matches = [e for e in matches if e.id == entry_id_prefix] or matches
        if matches and len({(e.spec_id, e.id) for e in matches}) == 1:
            return matches[0]  # one entry; live and retired copies of it: the live one first
        known = ", ".join(dict.fromkeys(e.id for e in every)) or "(the corpus is empty)"
        problem = "no corpus entry" if not matches else "several corpus entries"
        raise InputError(
            f"{problem} with id {entry_id_prefix!r} in {self.root}", fix=f"use one of: {known}"
        )

    def remove(self, entry: CorpusEntry) -> None:
        """Delete ``entry``: its live and its retired file, whichever exist."""
        for retired in (False, True):
            (
                self.folder(entry.spec_id, retired=retired) / f"{path_component(entry.id)}.json"
            ).unlink(missing_ok=True)

    def _read_or_note(self, path: Path) -> CorpusEntry | None:
        """The entry in ``path``, or ``None`` with the problem added to :attr:`damaged`."""
        try:
            return self._read(path)
        except InputError as exc:
            if all(d.location != exc.location for d in self.damaged):
                self.damaged.append(exc)
            return None

    @staticmethod
    def _read(path: Path) -> CorpusEntry:
        fix = f"delete {path} (the failure it held is found and shrunk again if it still occurs)"
        raw = read_json(path, what="a corpus entry", fix=fix)
        try:
            return CorpusEntry.model_validate(raw)
        except (ValidationError, ValueError, RecursionError) as exc:
            raise InputError(
                f"damaged corpus entry: {describe_validation(exc)}",
                location=SourceLocation(path),
                expected="a corpus entry as agentprop writes it",
                fix=fix,
            ) from None


def merge_found(old: CorpusEntry, entry: CorpusEntry) -> CorpusEntry:
    """``old`` found again as ``entry``: seen once more, and the smaller reproducer kept."""
    smaller = sum(map(len, entry.scenario.messages)) < sum(map(len, old.scenario.messages))
    update: dict[str, Any] = {
        "seen": old.seen + 1,
        "last_seen": now(),
        "agent_fingerprint": entry.agent_fingerprint,
    }
    if smaller:
        update.update(scenario=entry.scenario, reproducer_rate=entry.reproducer_rate)
    return old.model_copy(update=update)


_REDIS_TTL_S = 90 * 24 * 3600
"""How long a Redis corpus stays after its last write."""


class RedisCorpus(Corpus):
    """A corpus on a Redis server, shared by every process and machine that opens it, over
    ``base`` (a directory corpus, read-only: a committed corpus): entries are JSON in the hashes
    ``PREFIX:corpus:live`` and ``PREFIX:corpus:retired`` by ``[spec id, entry id]``; the set
    ``PREFIX:corpus:hidden`` names the base's entries retired, removed or superseded here.
    Reads show the union (this store's entry first); writes go to Redis only. :meth:`record`
    is one ``WATCH``/``MULTI`` transaction (retried on a conflict), so two processes recording
    the same bug keep one entry, seen twice. Kept 90 days after the last write."""

    def __init__(self, url: str, *, prefix: str = "agentprop", base: Corpus | None = None) -> None:
        super().__init__(base.root if base is not None else DEFAULT_DIR)
        self.url = url
        self.base = base
        self._live = f"{prefix}:corpus:live"
        self._retired = f"{prefix}:corpus:retired"
        self._hidden = f"{prefix}:corpus:hidden"
        self._client: redis.Redis = redis_client(url, "the Redis failure corpus")

    def describe(self) -> str:
        over = f" over {self.base.describe()} (read-only)" if self.base is not None else ""
        return f"{safe_url(self.url)}{over}"

    @staticmethod
    def _field(spec_id: str, entry_id_: str) -> str:
        return json.dumps([spec_id, entry_id_])

    def _parse(self, name: str, raw: bytes | str) -> CorpusEntry | None:
        try:
            return CorpusEntry.model_validate_json(raw)
        except (ValidationError, ValueError, RecursionError) as exc:
            error = InputError(
                f"damaged corpus entry {name} in {self.describe()}: {describe_validation(exc)}",
                expected="a corpus entry as agentprop writes it",
                fix="remove it (agentprop corpus rm ID); the failure it held is found and shrunk "
                "again if it still occurs",
            )
            if all(str(d) != str(error) for d in self.damaged):
                self.damaged.append(error)
            return None

    def _hidden_set(self) -> set[str]:
        return {
            m.decode() if isinstance(m, bytes) else str(m)
            for m in self._client.smembers(self._hidden)
        }

    def _anchored(self, entry: CorpusEntry) -> CorpusEntry:
        """``entry`` with its spec path absolute (no directory anchors an entry on a server)."""
        if not entry.spec_path or entry.spec_path_base == "corpus":
            return entry
        where = self.spec_location(entry)
        if where is None or not where.exists():
            return entry
        return entry.model_copy(update={"spec_path": str(where.resolve())})

    def spec_location(self, entry: CorpusEntry) -> Path | None:
        if entry.spec_path_base == "corpus" and self.base is not None:
            return self.base.spec_location(entry)
        return super().spec_location(entry)

    def path(self, entry: CorpusEntry) -> Path:
        """The entry's name in the store (``[retired/]SPEC/ID.json``), not a file."""
        return (
            Path(RETIRED if entry.retired else "")
            / path_component(entry.spec_id, reserved=(RETIRED,))
            / f"{path_component(entry.id)}.json"
        )

    def _write(self, change: Callable[[Any], None]) -> None:
        with self._client.pipeline(transaction=True) as pipe:
            change(pipe)
            for key in (self._live, self._retired, self._hidden):
                pipe.expire(key, _REDIS_TTL_S)
            pipe.execute()

    def save(self, entry: CorpusEntry) -> Path:
        text = self._anchored(entry).model_dump_json()
        self._write(
            lambda pipe: pipe.hset(
                self._retired if entry.retired else self._live,
                self._field(entry.spec_id, entry.id),
                text,
            )
        )
        return self.path(entry)

    def find(self, entry_id_: str, spec_id: str) -> CorpusEntry | None:
        name = self._field(spec_id, entry_id_)
        raw = self._client.hget(self._live, name)
        if raw is not None:
            return self._parse(name, raw)
        if self.base is not None and not self._client.sismember(self._hidden, name):
            return self.base.find(entry_id_, spec_id)
        return None

    def record(self, entry: CorpusEntry) -> tuple[CorpusEntry, bool]:
        import redis as redis_module  # redis_client imported it: a lookup

        name = self._field(entry.spec_id, entry.id)
        with self._client.pipeline() as pipe:
            while True:
                try:
                    # redis-py leaves watch() untyped
                    pipe.watch(self._live, self._hidden)  # type: ignore[no-untyped-call]
                    raw = pipe.hget(self._live, name)
                    old = self._parse(name, raw) if raw is not None else None
                    if (
                        raw is None
                        and self.base is not None
                        and not pipe.sismember(self._hidden, name)
                    ):
                        old = self.base.find(entry.id, entry.spec_id)
                    stored = entry if old is None else merge_found(old, entry)
                    pipe.multi()
                    pipe.hset(self._live, name, self._anchored(stored).model_dump_json())
                    pipe.hdel(self._retired, name)  # the live entry supersedes a retired one
                    pipe.sadd(self._hidden, name)
                    for key in (self._live, self._retired, self._hidden):
                        pipe.expire(key, _REDIS_TTL_S)
                    pipe.execute()
                    return stored, old is None
                except redis_module.WatchError:
                    continue

    def retire(self, entry: CorpusEntry, reason: str) -> Path:
        retired = entry.model_copy(update={"retired": now(), "retired_reason": reason})
        name = self._field(entry.spec_id, entry.id)
        text = self._anchored(retired).model_dump_json()

        def change(pipe: Any) -> None:
            pipe.hset(self._retired, name, text)
            pipe.hdel(self._live, name)
            pipe.sadd(self._hidden, name)

        self._write(change)
        return self.path(retired)

    def remove(self, entry: CorpusEntry) -> None:
        name = self._field(entry.spec_id, entry.id)

        def change(pipe: Any) -> None:
            pipe.hdel(self._live, name)
            pipe.hdel(self._retired, name)
            pipe.sadd(self._hidden, name)

        self._write(change)

    def clear(self) -> int:
        entries = self.entries() + self.entries(retired=True)
        hidden = [self._field(e.spec_id, e.id) for e in entries]

        def change(pipe: Any) -> None:
            pipe.delete(self._live, self._retired)
            if hidden:
                pipe.sadd(self._hidden, *hidden)

        self._write(change)
        return len(entries)

    def entries(
        self,
        *,
        spec_id: str | None = None,
        agent_ref: str | None = None,
        scenario_id: str | None = None,
        retired: bool = False,
    ) -> list[CorpusEntry]:
        found: dict[str, CorpusEntry] = {}
        for raw_name, raw in self._client.hgetall(self._retired if retired else self._live).items():
            name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
            entry = self._parse(name, raw)
            if entry is not None:
                found[name] = entry
        if self.base is not None:
            hidden = self._hidden_set()
            for entry in self.base.entries(spec_id=spec_id, retired=retired):
                name = self._field(entry.spec_id, entry.id)
                if name not in hidden and name not in found:
                    found[name] = entry
            self.damaged.extend(d for d in self.base.damaged if d not in self.damaged)
        out = [
            e
            for e in found.values()
            if (spec_id is None or e.spec_id == spec_id)
            and (agent_ref is None or e.agent_ref == agent_ref)
            and (scenario_id is None or e.scenario_id == scenario_id)
        ]
        return sorted(out, key=lambda e: (e.created, e.id))


def open_store_corpus(store: str, base: Corpus | None) -> RedisCorpus:
    """The corpus of a shared store URL (``redis://host:port/db[?prefix=P]``) over ``base``."""
    url, ours = redis_url(store)
    return RedisCorpus(url, prefix=ours.get("prefix", "agentprop"), base=base)


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def pytest_regression(
    entry: CorpusEntry, *, spec_path: str | Path | None = None, test_file: str | Path | None = None
) -> str:
    """A self-contained pytest test that decides ``entry`` with the oracle.

    ``spec_path`` is where the spec is (resolve it with :meth:`Corpus.spec_location`). With
    ``test_file`` (where the test will be written) the test finds the spec relative to its own
    file, so it works from any working directory and moves with its project; without it the
    path is absolute.

    Everything taken from the entry (messages, signature, ids, paths, the scenario) appears in
    the code only as a ``repr()``-quoted literal, and names are made of letters, digits and
    ``_`` only: an entry whose text holds quotes, triple quotes or newlines (a corpus file
    someone edited, or a model's message) cannot inject code into the generated test.
    """
    where = (
        Path(spec_path)
        if spec_path is not None
        else (Path(entry.spec_path) if entry.spec_path else None)
    )
    if where is None:
        spec_expr = f"Path({'path/to/spec'!r})"
    elif test_file is not None:
        try:
            rel = os.path.relpath(where.resolve(), Path(test_file).resolve().parent)
            spec_expr = f"Path(__file__).resolve().parent / {Path(rel).as_posix()!r}"
        except ValueError:
            spec_expr = f"Path({str(where.resolve())!r})"
    else:
        spec_expr = f"Path({str(where.resolve())!r})"
    name = _identifier(entry.scenario_id.lower())
    test_name = f"test_regression_{name}_{_identifier(entry.id)}"
    prop = (
        ", prop=lambda trace: agentprop.contracts.probe_verdicts(project.spec, SCENARIO, trace)"
        if entry.prop == "probe"
        else ""
    )
    return f'''"""Regression test for a shrunk agentprop failure (a corpus entry).

The failure, the original message and the reproducer are the constants below.
"""

from pathlib import Path

import agentprop
import agentprop.contracts
import agentprop.scenarios

ENTRY = {entry.id!r}
FAILURE = {entry.signature!r}
ORIGINAL_FIRST_MESSAGE = {entry.original_messages[0] if entry.original_messages else ""!r}
REPRODUCER_MESSAGES = {list(entry.scenario.messages)!r}
SPEC = {spec_expr}
SCENARIO = agentprop.scenarios.Scenario.model_validate_json(
    {entry.scenario.model_dump_json()!r}
)


def {test_name}() -> None:
    project = agentprop.load_project(SPEC)
    agent = agentprop.load_agent({entry.agent_ref!r}, SPEC if SPEC.is_dir() else SPEC.parent, {dict(entry.agent_faults)!r})
    agentprop.check(project, SCENARIO, agent{prop})
'''  # noqa: E501


def _identifier(text: str) -> str:
    """``text`` as the tail of a Python identifier: letters and digits kept, the rest ``_``."""
    out = "".join(c if c.isascii() and c.isalnum() else "_" for c in text).strip("_")
    return out[:60] or "case"


@dataclass(frozen=True)
class AgentIdentity:
    """What names the agent an entry was found with, for one that is no :class:`LoadedAgent`
    (a plain function's run)."""

    ref: str
    fingerprint: str
    faults: Mapping[str, float] = field(default_factory=dict)


def entry_from_shrink(
    report: ShrinkReport,
    *,
    spec_id: str,
    spec_path: str | None,
    agent: LoadedAgent | AgentIdentity,
    prop: str = "mft",
    cause: Sequence[str] = (),
) -> CorpusEntry:
    """A corpus entry for a shrink result (the reproducer scenario, as values); ``cause``: the
    bug's cause when its signature had more than one."""
    return CorpusEntry(
        id=entry_id(
            spec_id, agent.ref, report.signature, report.scenario, agent.faults, sorted(cause)
        ),
        cause=sorted(cause),
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
        reproducer_rate=report.reproducer_rate.rate
        if report.reproducer_rate and report.reproducer_rate.runs
        else None,
        confirmed=report.confirmed,
        created=now(),
        last_seen=now(),
        choices=report.reproducer_choices,
    )


ReplayAction = Literal["regression", "fails-differently", "retired", "kept"]


def judge_replay(
    entry: CorpusEntry, result: CheckResult, *, confidence: float, own: bool = True
) -> tuple[ReplayAction, str]:
    """What a replay of ``entry`` means: ``(action, message)``.

    - ``regression``: it did not pass and failed with the entry's own signature;
    - ``fails-differently``: it did not pass, but never with the entry's signature (a
      different bug, reported as one; the entry is kept);
    - ``retired``: it passed, the signature never occurred, and the runs are enough to rule
      out the entry's recorded failure rate at ``confidence`` (:func:`runs_to_rule_out`);
    - ``kept``: anything else (passed with the failure still occurring now and then, too few
      runs, or undecided).

    ``own=False``: the replay ran another agent than the one that found the entry (asked
    for); a pass then never retires the entry, it is ``kept``.
    """
    matching = sum(f.count for f in result.failures if f.signature == entry.signature)
    runs = result.runs
    if result.verdict in ("FAIL", "UNSTABLE"):
        if matching:
            return (
                "regression",
                f"regression: corpus entry {entry.id} failed {matching}/{runs} runs with its "
                f"signature {entry.signature}",
            )
        other = result.failures[0].signature if result.failures else "(no signature)"
        return "fails-differently", (
            f"not a regression: corpus entry {entry.id} ({entry.signature}) failed with another "
            f"signature, {other}; reported as a different bug, the entry is kept"
        )
    if result.verdict == "PASS":
        if matching:
            return (
                "kept",
                f"corpus entry {entry.id} passed, but its failure still occurred "
                f"{matching}/{runs} runs: kept",
            )
        known_rate = entry.reproducer_rate if entry.confirmed else entry.original_rate
        need = runs_to_rule_out(known_rate, confidence)
        if not own:
            return "kept", (
                f"corpus entry {entry.id} passed {runs} runs of this agent; kept: it was found "
                f"with {agent_label(entry.agent_ref, entry.agent_faults)}, whose "
                "replays alone retire it"
            )
        if runs >= need:
            recorded = (
                f"; its recorded rate {known_rate:.0%} would have shown with "
                f"{confidence:.0%} confidence"
                if known_rate
                else ""
            )
            return (
                "retired",
                f"retired corpus entry {entry.id} ({entry.signature}): passed {runs}/{runs} fresh "
                f"runs ({result.decided_by}){recorded}",
            )
        return "kept", (
            f"corpus entry {entry.id} passed {runs} runs without its failure, but {need} are "
            f"needed to rule out its recorded rate {known_rate or 0.0:.0%} at "
            f"{confidence:.0%}: kept"
        )
    return "kept", f"corpus entry {entry.id}: {result.verdict} (undecided): kept"


class ProjectCorpora:
    """The default corpus of each project: :func:`default_corpus_dir` (beside its bindings);
    ``plain`` (when given a directory) holds the entries of spec-free checks, which have no
    project to sit beside. With a shared ``store`` URL each is a :class:`RedisCorpus` over
    that directory."""

    def __init__(self, plain: str | Path | None = None, *, store: str | None = None) -> None:
        self.store = store
        self.plain = self._over(Corpus(plain)) if plain is not None else None

    def _over(self, corpus: Corpus) -> Corpus:
        return open_store_corpus(self.store, corpus) if self.store else corpus

    def for_project(self, project: Project) -> Corpus:
        return self._over(Corpus(default_corpus_dir(project)))
