"""Per-trial records: every trial of every decision, one JSON line, written as the trial ends.

Invariants: each line is flushed when written, so a killed run loses nothing recorded, and
:func:`read_records` skips a torn last line; the records suffice to decide again
(:func:`recompute` gives the oracle's verdict). Processes sharing a directory (pytest-xdist
workers) write a file each, read together. Schema ``agentprop.trials/1``: fields and line types
are only added within it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Annotated, Literal, Protocol

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from agentprop._decide.rule import OracleSettings, TrialRecord, decision_of
from agentprop._judge.judges import JudgeCorrection
from agentprop._scenario.trace import Trace
from agentprop._stats.judged import JudgeAgreement
from agentprop.errors import InputError

__all__ = [
    "CHECKS_FILE",
    "AnyRecord",
    "CheckLine",
    "RECORDS_FILE",
    "REPORT_FILE",
    "SCHEMA",
    "SHARD_FILE",
    "TRACES_FILE",
    "DecisionEnd",
    "DecisionLog",
    "DecisionSettings",
    "DecisionStart",
    "Recomputed",
    "Record",
    "Recorder",
    "ShardInfo",
    "TrialLine",
    "current_recorder",
    "earlier_records",
    "read_records",
    "recompute",
    "records_files",
    "record_scope",
    "recording",
]

SCHEMA = "agentprop.trials/1"
RECORDS_FILE = "trials.jsonl"
TRACES_FILE = "traces.jsonl"
SHARD_FILE = "shard.json"
"""A sharded run's :class:`ShardInfo`, written before any decision (a shard with no
case has it too)."""
REPORT_FILE = "report.json"
"""A sharded run's own report (``agentprop.run/1``), written when the shard ends: what the
records do not hold (case descriptions, kept traces, shrunk reproducers, corpus events)."""
CHECKS_FILE = "checks.jsonl"
"""A sharded run's decided inputs, one ``{"case", "scenario", "result"}`` line per case: what
bug grouping and policy claims need of each case (written with :data:`REPORT_FILE`)."""

TrialStatus = Literal["started", "reused", "refused", "cut", "infrastructure", "beyond"]
"""What happened to a trial: ``started`` (run here and judged), ``reused`` (a run of the memo,
or of another decision in flight, judged), ``refused`` (the budget refused the run the test
needed: the decision stops), ``cut`` (a model call was refused mid-run: not a run of the agent,
not judged; made again while the budget has room), ``infrastructure`` (an error that is not the
agent's: not judged, the decision stops), ``beyond`` (made ahead of the decision, not needed:
not judged)."""


class JudgeSettings(BaseModel):
    """A model judge's calibration, as the oracle's settings carry it (``agreement`` is the 2x2
    table against human labels: ``true_pass``, ``false_fail``, ``true_fail``, ``false_pass``)."""

    agreement: dict[str, int] | None = None
    gates: bool
    why_not: str | None = None
    confidence: float = 0.95


class DecisionSettings(BaseModel):
    """The oracle settings a decision was made with
    (:class:`~agentprop._decide.oracle.OracleSettings`)."""

    mode: Literal["sprt", "zero-failure", "fixed"]
    tau: float
    alpha: float
    beta: float
    max_runs: int
    runs: int
    unstable_floor: float
    confidence: float
    screen: int | None = None
    judge: JudgeSettings | None = None

    @classmethod
    def of(cls, settings: OracleSettings) -> DecisionSettings:
        judge = settings.judge
        judged = None
        if judge is not None:
            table = dataclasses.asdict(judge.agreement) if judge.agreement is not None else None
            judged = JudgeSettings(
                agreement=table,
                gates=judge.gates,
                why_not=judge.why_not,
                confidence=judge.confidence,
            )
        fields = {
            f.name: getattr(settings, f.name)
            for f in dataclasses.fields(settings)
            if f.name != "judge"
        }
        return cls(**fields, judge=judged)

    def oracle(self) -> OracleSettings:
        judge = None
        if self.judge is not None:
            table = (
                JudgeAgreement(**self.judge.agreement) if self.judge.agreement is not None else None
            )
            judge = JudgeCorrection(
                table, self.judge.gates, self.judge.why_not, self.judge.confidence
            )
        return OracleSettings(**self.model_dump(exclude={"judge"}), judge=judge)


class ShardInfo(BaseModel):
    """Which run a sharded run's records belong to (``agentprop run --shard i/N``): the shards
    of one run have the same ``spec_digest``, ``settings_digest`` and ``seed`` and ``count``,
    and each its own ``index`` (``agentprop merge`` checks it)."""

    index: int
    count: int
    spec_digest: str
    """The spec and bindings as every run sees them
    (:func:`~agentprop._decide.run_key.project_digest`)."""
    settings_digest: str
    """The run's settings, agent and case selection (everything but the shard)."""
    seed: int
    spec_path: str | None = None
    """Where the shard loaded its spec from (``agentprop merge`` loads it again for coverage)."""
    bindings_path: str | None = None
    case_filter: list[str] = Field(default_factory=list)
    """The run's ``--case`` filters (a filtered run is not held to the spec's coverage)."""
    runner: Literal["run", "pytest"] = "run"
    """What ran the shard: ``agentprop run --shard`` or ``pytest --agentprop-shard`` (whose
    ``spec_digest`` is the digest of the session's whole collection)."""


class DecisionStart(BaseModel):
    """A decision begins: which case, with which settings, from which trial index."""

    type: Literal["decision"] = "decision"
    schema_: str = Field(SCHEMA, alias="schema")
    decision: int
    """This run's number for the decision (its trial lines and end carry it)."""
    case: str
    """The decision's name: the case id (a DIR side or INV comparison names its own)."""
    kind: str | None = None
    stage: str | None = None
    """The pass of a budgeted run (``breadth``, ``confirm``, ``deepen``, ``final``);
    ``None`` outside one."""
    input_digest: str
    fingerprint: str
    first_trial: int
    settings: DecisionSettings
    shard: ShardInfo | None = None
    """The shard of a sharded run that made the decision (``None``: not sharded)."""

    model_config = {"populate_by_name": True}


class TrialLine(BaseModel):
    """One trial of a decision (see :data:`TrialStatus`)."""

    type: Literal["trial"] = "trial"
    decision: int
    case: str
    trial: int
    status: TrialStatus
    passed: bool | None = None
    """The property's outcome (``None``: not judged)."""
    checks: int | None = None
    """How many checks judged the run (``None``: not known, or not judged)."""
    failed_checks: list[str] = Field(default_factory=list)
    """The signature of every check the run failed (the first names the failure)."""
    signature: str | None = None
    explanation: str | None = None
    clause: str | None = None
    turn: int | None = None
    step: int | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    duration_s: float = 0.0
    trace: str | None = None
    """The run's id in ``traces.jsonl`` (written when the run was made; ``None``: no run)."""
    error_kind: str | None = None
    """The kind of the error that is not the agent's (``infrastructure``, ``cut``)."""


class DecisionEnd(BaseModel):
    """A decision ends: what the oracle decided (:func:`recompute` gives it again
    from the trials)."""

    type: Literal["end"] = "end"
    decision: int
    case: str
    verdict: str
    decided_by: str
    runs: int
    passes: int
    runs_beyond_decision: int = 0


class CheckLine(BaseModel):
    """A check a pytest session recorded (what its ``--agentprop-json`` lists): the test it ran
    in, its name, and the decision it was decided by (``None``: not one decision of the
    oracle's)."""

    type: Literal["check"] = "check"
    test: str
    case: str
    decision: int | None = None


AnyRecord = DecisionStart | TrialLine | DecisionEnd | CheckLine
Record = Annotated[AnyRecord, Field(discriminator="type")]
_RECORD: TypeAdapter[AnyRecord] = TypeAdapter(Record)


@dataclass(frozen=True)
class Recomputed:
    verdict: str
    decided_by: str
    runs: int
    passes: int


def _part_file(name: str, part: str) -> str:
    """``trials.jsonl`` of part ``gw0`` is ``trials-gw0.jsonl``."""
    stem, dot, ext = name.partition(".")
    return f"{stem}-{part}{dot}{ext}" if part else name


class Recorder:
    """Appends records to ``directory``'s :data:`RECORDS_FILE` and traces to its
    :data:`TRACES_FILE`, one flushed line each (thread-safe). A ``part`` (a pytest-xdist
    worker's id) writes ``trials-PART.jsonl`` and ``traces-PART.jsonl`` instead, so processes
    sharing a directory never write one file; :func:`read_records` reads every part."""

    def __init__(self, directory: str | Path, part: str = "") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.file = self.directory / _part_file(RECORDS_FILE, part)
        self._records: IO[str] = open(self.file, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self._traces: IO[str] = open(
            self.directory / _part_file(TRACES_FILE, part), "a", encoding="utf-8"
        )  # noqa: SIM115
        self._lock = threading.Lock()
        self._next = 0
        self.lines = 0
        self.shard: ShardInfo | None = None
        """Written into every decision's start record (``agentprop run --shard``)."""

    def new_decision(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def write(self, record: AnyRecord) -> None:
        text = record.model_dump_json(by_alias=True, exclude_none=True) + "\n"
        with self._lock:
            self._records.write(text)
            self._records.flush()
            self.lines += 1

    def set_shard(self, shard: ShardInfo) -> None:
        """Mark every decision recorded from now on as made by ``shard``, and write
        :data:`SHARD_FILE`."""
        self.shard = shard
        (self.directory / SHARD_FILE).write_text(shard.model_dump_json() + "\n", encoding="utf-8")

    def write_trace(self, trace_id: str, trace: Trace) -> None:
        text = '{"id":"' + trace_id + '","trace":' + trace.model_dump_json(fallback=str) + "}\n"
        with self._lock:
            self._traces.write(text)
            self._traces.flush()

    def close(self) -> None:
        with self._lock:
            self._records.close()
            self._traces.close()


_RECORDER: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "agentprop_recorder", default=None
)
_SCOPE: contextvars.ContextVar[tuple[str | None, str | None]] = contextvars.ContextVar(
    "agentprop_record_scope", default=(None, None)
)


def current_recorder() -> Recorder | None:
    return _RECORDER.get()


@contextlib.contextmanager
def recording(recorder: Recorder | None) -> Iterator[Recorder | None]:
    """Record every decision made in this context (and the tasks and threads it starts)
    with ``recorder``."""
    token = _RECORDER.set(recorder)
    try:
        yield recorder
    finally:
        _RECORDER.reset(token)


@contextlib.contextmanager
def record_scope(*, kind: str | None = None, stage: str | None = None) -> Iterator[None]:
    """Label the decisions made in this context with a case kind and a pass (``None``
    keeps the outer one)."""
    outer_kind, outer_stage = _SCOPE.get()
    token = _SCOPE.set((kind or outer_kind, stage or outer_stage))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def trace_id(input_digest: str, fingerprint: str, trial: int) -> str:
    """The id of a run in :data:`TRACES_FILE`: the same input, agent and trial give the same id."""
    return hashlib.sha256(f"{input_digest}\x1f{fingerprint}\x1f{trial}".encode()).hexdigest()[:32]


class Decided(Protocol):
    """What a decision's end record takes from its result (an oracle ``CheckResult``)."""

    @property
    def verdict(self) -> str: ...
    @property
    def decided_by(self) -> str: ...
    @property
    def runs(self) -> int: ...
    @property
    def passes(self) -> int: ...
    @property
    def runs_beyond_decision(self) -> int: ...


class DecisionLog:
    """The records of one decision, written through ``recorder`` as its trials end (the oracle
    calls it; see :func:`agentprop._decide.oracle.adecide`)."""

    def __init__(
        self,
        recorder: Recorder,
        name: str,
        input_digest: str,
        fingerprint: str,
        first_trial: int,
        settings: OracleSettings,
    ) -> None:
        self.recorder = recorder
        self.decision = recorder.new_decision()
        self.case = name
        self.input_digest = input_digest
        self.fingerprint = fingerprint
        kind, stage = _SCOPE.get()
        recorder.write(
            DecisionStart(
                decision=self.decision,
                case=name,
                kind=kind,
                stage=stage,
                input_digest=input_digest,
                fingerprint=fingerprint,
                first_trial=first_trial,
                settings=DecisionSettings.of(settings),
                shard=recorder.shard,
            )
        )

    def _line(self, trial: int, status: TrialStatus, trace: Trace | None, made: bool) -> TrialLine:
        ref = None
        line = TrialLine(decision=self.decision, case=self.case, trial=trial, status=status)
        if trace is not None:
            ref = trace_id(self.input_digest, self.fingerprint, trial)
            if made:
                self.recorder.write_trace(ref, trace)
                usage = trace.usage
                line.cost_usd, line.input_tokens, line.output_tokens = (
                    usage.cost_usd,
                    usage.input_tokens,
                    usage.output_tokens,
                )
            line.duration_s = trace.duration_s
            line.trace = ref
        return line

    def judged(self, trial: int, record: TrialRecord, trace: Trace, made: bool) -> None:
        line = self._line(trial, "started" if made else "reused", trace, made)
        line.passed = record.passed
        line.checks = record.checks
        line.failed_checks = list(record.failed_checks)
        line.signature, line.explanation, line.clause = (
            record.signature,
            record.explanation,
            record.clause,
        )
        line.turn, line.step = record.turn, record.step
        self.recorder.write(line)

    def unjudged(
        self,
        trial: int,
        status: TrialStatus,
        trace: Trace | None = None,
        made: bool = False,
        error_kind: str | None = None,
    ) -> None:
        line = self._line(trial, status, trace, made)
        line.error_kind = error_kind
        self.recorder.write(line)

    def end(self, result: Decided) -> None:
        self.recorder.write(
            DecisionEnd(
                decision=self.decision,
                case=self.case,
                verdict=result.verdict,
                decided_by=result.decided_by,
                runs=result.runs,
                passes=result.passes,
                runs_beyond_decision=result.runs_beyond_decision,
            )
        )


def records_files(directory: str | Path) -> list[Path]:
    """The records files of ``directory``: its :data:`RECORDS_FILE`, then every part's
    (``trials-PART.jsonl``, by name)."""
    where = Path(directory)
    whole = [where / RECORDS_FILE] if (where / RECORDS_FILE).is_file() else []
    return whole + sorted(p for p in where.glob(_part_file(RECORDS_FILE, "*")) if p.is_file())


def earlier_records(directory: str | Path) -> list[Path]:
    """The files a run recording into ``directory`` writes that are already there, from an
    earlier run (records, traces, a shard's files), by name; ``[]`` for a missing directory."""
    where = Path(directory)
    if not where.is_dir():
        return []
    names = {RECORDS_FILE, TRACES_FILE, SHARD_FILE, REPORT_FILE, CHECKS_FILE}
    parts = (_part_file(RECORDS_FILE, "*"), _part_file(TRACES_FILE, "*"))
    found = {where / n for n in names} | {p for g in parts for p in where.glob(g)}
    return sorted(p for p in found if p.is_file())


@dataclass(frozen=True)
class RecordsOptions:
    """How the records options are spelled where they were given (the CLI's ``--records``, the
    pytest plugin's ``--agentprop-records``) and what records into them."""

    records: str = "--records"
    replace: str = "--replace-records"
    who: str = "run"


def check_records_dir(
    directory: str | None, *, replace: bool, options: RecordsOptions = RecordsOptions()
) -> list[Path]:
    """The one check of a records directory, before any work: ``replace`` needs a directory,
    and a directory holding an earlier run's records (appended to, the two runs would read as
    one, and ``agentprop merge`` would count both) needs ``replace``. Returns those earlier
    files (for :func:`delete_records`); an :class:`~agentprop.errors.InputError` otherwise."""
    if replace and not directory:
        raise InputError(
            f"{options.replace} replaces the records of {options.records} DIR, and no "
            f"{options.records} was given",
            fix=f"add {options.records} DIR, or drop {options.replace}",
        )
    earlier = earlier_records(directory) if directory else []
    if earlier and not replace:
        raise InputError(
            f"{options.records} {directory}: the directory holds the records of an earlier run "
            f"({', '.join(p.name for p in earlier)}); this {options.who}'s would be added to "
            "them, and `agentprop merge` would count both runs",
            fix=f"give an empty or new directory, or pass {options.replace} to delete those "
            "files first",
        )
    return earlier


def delete_records(paths: Iterable[Path], options: RecordsOptions = RecordsOptions()) -> None:
    """Delete an earlier run's records (what :func:`check_records_dir` returned), as
    ``replace`` asked; a file that cannot be deleted is an input error naming it."""
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise InputError(
                f"{options.replace}: cannot delete {path} ({exc.strerror or exc})",
                fix=f"make it writable, or give {options.records} an empty or new directory",
            ) from None


def read_records(path: str | Path) -> Iterator[AnyRecord]:
    """The records of ``path`` (a records file, or the directory holding them: every file of
    :func:`records_files`, in order, each part's decision numbers moved past the previous
    parts'), in order. A torn last line (the process was killed mid-write) is skipped; a bad
    line elsewhere raises ``ValueError`` naming the file and line."""
    if not Path(path).is_dir():
        yield from _read_file(Path(path))
        return
    files = records_files(path)
    if len(files) <= 1:  # one process wrote them: its numbers as they are, read at full speed
        yield from _read_file(files[0] if files else Path(path) / RECORDS_FILE)
        return
    offset = 0
    for file in files:
        highest = 0
        for r in _read_file(file):
            if r.decision is not None:
                highest = max(highest, r.decision)
                if offset:
                    r.decision += offset
            yield r
        offset += highest


def _read_file(file: Path) -> Iterator[AnyRecord]:
    with open(file, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            yield _RECORD.validate_json(text)
        except ValidationError as exc:
            if number == len(lines):
                return  # no newline after it: torn, the run stopped while writing it
            raise ValueError(
                f"{file}:{number}: not a record of {SCHEMA}: {exc.errors()[0]['msg']}; the file "
                "was edited or written by another tool"
            ) from None


def recompute(records: Iterable[AnyRecord]) -> dict[int, Recomputed]:
    """Every decision's verdict, decided again from its start record and trial lines alone (as
    :func:`agentprop._decide.oracle.adecide` decides: judged trials in trial order until the test
    is done; a refused trial the test needed is the budget's end, an error not the agent's the
    infrastructure's). Decisions whose trials are all missing are decided on
    nothing (INCONCLUSIVE)."""
    starts: dict[int, DecisionStart] = {}
    trials: dict[int, list[TrialLine]] = {}
    for r in records:
        if isinstance(r, DecisionStart):
            starts[r.decision] = r
            trials.setdefault(r.decision, [])
        elif isinstance(r, TrialLine):
            trials.setdefault(r.decision, []).append(r)
    out: dict[int, Recomputed] = {}
    for number, start in starts.items():
        lines = trials[number]
        judged = sorted(
            (t for t in lines if t.passed is not None and t.status in ("started", "reused")),
            key=lambda t: t.trial,
        )
        refused = any(t.status == "refused" for t in lines)
        infra = any(t.status == "infrastructure" for t in lines)
        verdict, decided_by, runs, passes = decision_of(
            start.settings.oracle(), [bool(t.passed) for t in judged], refused=refused, infra=infra
        )
        out[number] = Recomputed(verdict, decided_by, runs, passes)
    return out
