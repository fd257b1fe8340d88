"""Behaviour snapshots: a recorded baseline of what an agent does on a case.

A snapshot records the distribution of *behaviours* over ``runs`` runs of one case (per turn:
decision, tool calls with arguments, other ``respond`` fields, errors; free text, canaries and
ignored paths masked), with one example trace per behaviour. A check compares new runs with
the baseline by an exact two-sample test, so noise alone does not fail it. A missing baseline
fails (NEW); only an explicit approval with a written reason replaces a baseline, never under
``CI``; a matching run never rewrites the file.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import fnmatch
import getpass
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentprop._agents.loading import LoadedAgent, as_loaded_agent
from agentprop._agents.project import Project
from agentprop._judge.judges import JudgeLike
from agentprop._modelapi.budget import Budget
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import RunError, Trace
from agentprop._stats import categorical_two_sample_test
from agentprop._util.files import describe_validation, read_json, write_atomic
from agentprop.errors import InputError, InvalidArgument, SourceLocation, clip_repr

SCHEMA: Final = "agentprop.snapshot/1"
TEXT_LIMIT = 40
"""Strings longer than this, or with whitespace, are free text and become ``"<text>"``."""
TEXT = "<text>"
MIN_REASON = 10

SnapshotVerdict = Literal["MATCH", "CHANGED", "NEW", "UPDATED", "INCONCLUSIVE"]


# --- behaviours -------------------------------------------------------------------------


class ToolBehaviour(BaseModel):
    """One tool call: its name, normalised arguments and, if it failed, the error kind."""

    model_config = ConfigDict(frozen=True)

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None

    def describe(self) -> str:
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.args.items())
        return f"{self.name}({args})" + (f"!{self.error}" if self.error else "")


class TurnBehaviour(BaseModel):
    """What the agent did in answer to one user message."""

    model_config = ConfigDict(frozen=True)

    decision: str | None = None
    tools: list[ToolBehaviour] = Field(default_factory=list)
    response: dict[str, Any] = Field(default_factory=dict)
    """The other ``respond`` fields, normalised (the decision is kept apart)."""
    errors: list[str] = Field(default_factory=list)


class Behaviour(BaseModel):
    """A run with the free text taken out; equal behaviours have equal :attr:`key`."""

    model_config = ConfigDict(frozen=True)

    turns: list[TurnBehaviour] = Field(default_factory=list)
    judged: dict[str, bool] = Field(default_factory=dict)
    """What each judge recorded with the snapshot said of the run (judge name -> passed)."""

    @property
    def key(self) -> str:
        # a behaviour with no judged property keys as it did before judges existed
        text = json.dumps(
            self.model_dump(mode="json", exclude={"judged"} if not self.judged else None),
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def describe(self) -> str:
        """``T1 verify_identity(…) get_account(…) -> ASK_CONFIRM_CANCEL | T2 …``."""
        parts = []
        for i, turn in enumerate(self.turns, 1):
            tools = " ".join(t.describe() for t in turn.tools)
            # a plain agent's turn has no decision: its answer's fields (normalised) say what it did
            answer = _short(turn.response, 80) if turn.response else "no decision"
            outcome = turn.decision or ("ERROR:" + ",".join(turn.errors) if turn.errors else answer)
            parts.append(f"T{i} {tools + ' ' if tools else ''}-> {outcome}")
        judged = "".join(
            f" [{name}: {'pass' if ok else 'fail'}]" for name, ok in sorted(self.judged.items())
        )
        return (" | ".join(parts) or "(no turns)") + judged


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ignored(path: str, ignore: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in ignore)


def _normalise(value: Any, path: str, canaries: dict[str, str], ignore: Sequence[str]) -> Any:
    if isinstance(value, dict):
        return {
            k: _normalise(v, f"{path}.{k}", canaries, ignore)
            for k, v in sorted(value.items())
            if not _ignored(f"{path}.{k}", ignore)
        }
    if isinstance(value, (list, tuple)):
        return [_normalise(v, path, canaries, ignore) for v in value]
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, str):
        for field, canary in canaries.items():
            if canary and canary in value:
                return f"<canary:{field}>"
        if len(value) > TEXT_LIMIT or any(ch.isspace() for ch in value):
            return TEXT
        return value
    if value is None or isinstance(value, (bool, int)):
        return value
    return _normalise(str(value), path, canaries, ignore)


def behaviour_of(
    trace: Trace, *, ignore: Sequence[str] = (), judges: Sequence[JudgeLike] = ()
) -> Behaviour:
    """The behaviour of one run. ``ignore`` holds glob patterns over ``response.FIELD`` and
    ``tools.TOOL.ARG`` paths to leave out (``response.ticket_id``, ``tools.*.note``); each of
    ``judges`` (code or model judges) adds whether the run passed it."""
    turns = []
    for turn in trace.turns:
        tools = [
            ToolBehaviour(
                name=call.name,
                args=_normalise(
                    {
                        k: v
                        for k, v in call.args.items()
                        if not _ignored(f"tools.{call.name}.{k}", ignore)
                    },
                    f"tools.{call.name}",
                    trace.canaries,
                    ignore,
                ),
                error=call.error_kind or ("error" if call.error else None),
            )
            for call in turn.tool_calls
            if not _ignored(f"tools.{call.name}", ignore)
        ]
        response = turn.response if turn.response is not None else {}
        others = {k: v for k, v in response.items() if k != "decision"}
        turns.append(
            TurnBehaviour(
                decision=turn.decision,
                tools=tools,
                response=_normalise(others, "response", trace.canaries, ignore),
                errors=sorted({e.kind for e in turn.errors}),
            )
        )
    if trace.errors and turns:
        extra = sorted({e.kind for e in trace.errors})
        last = turns[-1]
        turns[-1] = last.model_copy(update={"errors": sorted(set(last.errors) | set(extra))})
    elif trace.errors:
        turns.append(TurnBehaviour(errors=sorted({e.kind for e in trace.errors})))
    return Behaviour(turns=turns, judged={judge.name: judge(trace).passed for judge in judges})


def behaviour_diff(before: Behaviour, after: Behaviour) -> list[str]:
    """What changed from ``before`` to ``after``, one line per difference."""
    lines: list[str] = []
    if len(before.turns) != len(after.turns):
        lines.append(f"turns: {len(before.turns)} -> {len(after.turns)}")
    for i, (b, a) in enumerate(zip(before.turns, after.turns), 1):
        where = f"turn {i}"
        names_b, names_a = [t.name for t in b.tools], [t.name for t in a.tools]
        added = list((Counter(names_a) - Counter(names_b)).elements())
        removed = list((Counter(names_b) - Counter(names_a)).elements())
        if added:
            lines.append(f"{where}: tools added: {', '.join(added)}")
        if removed:
            lines.append(f"{where}: tools removed: {', '.join(removed)}")
        if len(b.tools) != len(a.tools):
            lines.append(f"{where}: steps {len(b.tools)} -> {len(a.tools)}")
        elif not added and names_b != names_a:
            lines.append(f"{where}: tool order {', '.join(names_b)} -> {', '.join(names_a)}")
        seen: Counter[str] = Counter()
        for call in a.tools:
            seen[call.name] += 1
            match = [t for t in b.tools if t.name == call.name]
            if len(match) < seen[call.name]:
                continue
            old = match[seen[call.name] - 1]
            for key in sorted(set(old.args) | set(call.args)):
                if old.args.get(key, "<absent>") != call.args.get(key, "<absent>"):
                    lines.append(
                        f"{where}: {call.name}.{key}: {_short(old.args.get(key, '<absent>'), 80)} "
                        f"-> {_short(call.args.get(key, '<absent>'), 80)}"
                    )
            if old.error != call.error:
                lines.append(
                    f"{where}: {call.name} error: {old.error or 'none'} -> {call.error or 'none'}"
                )
        if b.decision != a.decision:
            lines.append(f"{where}: decision {b.decision or 'none'} -> {a.decision or 'none'}")
        for key in sorted(set(b.response) | set(a.response)):
            old_v, new_v = b.response.get(key, "<absent>"), a.response.get(key, "<absent>")
            if old_v != new_v:
                lines.append(f"{where}: response.{key}: {_short(old_v, 80)} -> {_short(new_v, 80)}")
        if b.errors != a.errors:
            lines.append(
                f"{where}: errors {', '.join(b.errors) or 'none'} -> "
                f"{', '.join(a.errors) or 'none'}"
            )
    for name in sorted(set(before.judged) | set(after.judged)):
        old_j, new_j = before.judged.get(name), after.judged.get(name)
        if old_j != new_j:
            lines.append(f"judge {name}: {_judged_word(old_j)} -> {_judged_word(new_j)}")
    return lines


def _judged_word(value: bool | None) -> str:
    return "not judged" if value is None else "pass" if value else "fail"


# --- the snapshot file ------------------------------------------------------------------


class BehaviourRecord(BaseModel):
    key: str
    count: int
    behaviour: Behaviour
    example: Trace
    """The first run that behaved this way, in full, for review."""


class Approval(BaseModel):
    """One accepted change of the baseline."""

    at: str
    by: str
    reason: str
    runs: int
    counts: dict[str, int]
    replaced: dict[str, int] | None = None
    """The distribution this approval replaced (``None`` for the first baseline)."""
    agent: str = ""
    agent_fingerprint: str = ""


class Snapshot(BaseModel):
    """A baseline (or a pending candidate): the behaviours of ``runs`` runs of one case."""

    model_config = ConfigDict(populate_by_name=True)

    schema_: Literal["agentprop.snapshot/1"] = Field(SCHEMA, alias="schema")
    name: str
    spec_id: str
    scenario_id: str
    messages: list[str]
    world: str
    """A digest of the case's world, so a snapshot of another world is never compared."""
    ignore: list[str] = Field(default_factory=list)
    runs: int
    seed: int = 0
    agent: str = ""
    agent_fingerprint: str = ""
    behaviours: list[BehaviourRecord]
    approvals: list[Approval] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Snapshot:
        """The counts describe ``runs`` runs: each behaviour seen at least once, listed once,
        the counts adding up to ``runs`` (a file edited by hand or damaged is refused, not
        compared)."""
        if self.runs < 0:
            raise ValueError(f"runs is {self.runs}; a snapshot records at least 1 run")
        keys = [b.key for b in self.behaviours]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"behaviour {twice[0]} is listed twice")
        zero = [b.key for b in self.behaviours if b.count < 1]
        if zero:
            raise ValueError(
                f"behaviour {zero[0]} has count "
                f"{next(b.count for b in self.behaviours if b.key == zero[0])}; "
                "every count is at least 1"
            )
        total = sum(b.count for b in self.behaviours)
        if total != self.runs:
            raise ValueError(f"the behaviour counts add up to {total}, but runs is {self.runs}")
        return self

    @property
    def counts(self) -> dict[str, int]:
        return {b.key: b.count for b in self.behaviours}

    def record(self, key: str) -> BehaviourRecord | None:
        return next((b for b in self.behaviours if b.key == key), None)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, by_alias=True) + "\n"


class BehaviourChange(BaseModel):
    key: str
    describe: str
    baseline_count: int
    current_count: int
    nearest: str | None = None
    """The baseline behaviour this one is closest to (fewest differences)."""
    diff: list[str] = Field(default_factory=list)


class SnapshotResult(BaseModel):
    name: str
    verdict: SnapshotVerdict
    path: str
    directory: str = ""
    """The snapshot directory (what ``agentprop snapshot approve DIR NAME`` takes)."""
    pending_path: str | None = None
    p_value: float | None = None
    alpha: float
    runs: int
    baseline_runs: int = 0
    baseline: dict[str, int] = Field(default_factory=dict)
    current: dict[str, int] = Field(default_factory=dict)
    changes: list[BehaviourChange] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    reason: str | None = None
    infrastructure_error: str | None = None
    """The kind of the error, not the agent's, that left the check INCONCLUSIVE (``cache_miss``,
    ``auth`` ...; the note has the message): nothing was recorded."""
    descriptions: dict[str, str] = Field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict in ("MATCH", "UPDATED")

    def summary(self) -> str:
        if self.verdict == "NEW":
            head = f"snapshot {self.name}: NEW (no baseline at {self.path})"
        elif self.verdict == "INCONCLUSIVE":
            why = (
                f"a run met an error that is not the agent's: {self.infrastructure_error}"
                if self.infrastructure_error
                else "the budget ran out"
            )
            head = f"snapshot {self.name}: INCONCLUSIVE ({why} after {self.runs} runs)"
        else:
            test = (
                f"p={self.p_value:.4f} "
                f"{'<' if self.p_value < self.alpha else '>='} alpha={self.alpha}"
                if self.p_value is not None
                else "first baseline"
            )
            head = (
                f"snapshot {self.name}: {self.verdict} ({test}; {self.runs} runs vs baseline "
                f"{self.baseline_runs})"
            )
        lines = [head]
        width = max([len(str(v)) for v in (*self.baseline.values(), *self.current.values())] + [1])
        shown: set[str] = set()
        for label, counts, total in (
            ("baseline", self.baseline, self.baseline_runs),
            ("current", self.current, self.runs),
        ):
            for key, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"  {label:8} {count:>{width}}/{total}  {key}")
                if key not in shown:
                    shown.add(key)
                    turns = self.descriptions.get(key, "").split(" | ")
                    lines.extend(f"      {_short(t, 160)}" for t in turns if t)
        for change in self.changes:
            if change.baseline_count == 0:
                near = f"; nearest baseline behaviour {change.nearest}" if change.nearest else ""
                lines.append(
                    f"  new behaviour {change.key} ({change.current_count}/{self.runs}){near}:"
                )
                lines.extend(
                    f"    {d}" for d in change.diff or ["(no baseline behaviour to compare with)"]
                )
            elif change.current_count == 0:
                lines.append(
                    f"  gone: {change.key} (was {change.baseline_count}/{self.baseline_runs})"
                )
        lines.extend(f"  note: {n}" for n in self.notes)
        if self.pending_path:
            lines.append(f"  candidate written to {self.pending_path}")
        if self.verdict in ("NEW", "CHANGED"):
            lines.append(
                "  if the new behaviour is right, approve it with a reason: "
                "agentprop snapshot approve "
                f'{_quote(self.directory or "SPEC")} {_quote(self.name)} --reason "..." (in '
                'pytest: --agentprop-snapshot-update --agentprop-snapshot-reason "...")'
            )
        if self.verdict == "UPDATED" and self.reason:
            lines.append(f"  approved: {self.reason}")
        return "\n".join(lines)


def _quote(text: str) -> str:
    return f"'{text}'" if re.search(r"[^A-Za-z0-9_./-]", text) else text


# --- the store --------------------------------------------------------------------------


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _file_stem(name: str) -> str:
    """A file name for a snapshot name: unsafe characters replaced, plus a short hash of the
    exact name whenever anything was replaced or the name ends in ``.pending``, so two names
    never share a file and no baseline shares one with a pending candidate."""
    safe = _UNSAFE.sub("_", name).strip("._")[:120] or "_"
    # `NAME.pending.json` holds the candidate of NAME: no stem may end in `.pending`, or the
    # baseline of `X.pending` would be the candidate of `X`
    if safe != name or safe.lower().endswith(".pending"):
        safe += "-" + hashlib.sha256(name.encode()).hexdigest()[:6]
    return safe


class SnapshotStore:
    """Snapshot files under one directory: ``NAME.json`` baselines, ``NAME.pending.json``
    candidates waiting for approval. Writes are atomic (a kill never leaves half a file)."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def path(self, name: str) -> Path:
        return self.dir / f"{_file_stem(name)}.json"

    def pending_path(self, name: str) -> Path:
        return self.dir / f"{_file_stem(name)}.pending.json"

    def load(self, name: str) -> Snapshot | None:
        path = self.path(name)
        return _read(path) if path.exists() else None

    def load_pending(self, name: str) -> Snapshot | None:
        path = self.pending_path(name)
        return _read(path) if path.exists() else None

    def baselines(self) -> list[Snapshot]:
        files = (
            sorted(p for p in self.dir.glob("*.json") if not p.name.endswith(".pending.json"))
            if self.dir.is_dir()
            else []
        )
        return [_read(p) for p in files]

    def pending(self) -> list[Snapshot]:
        files = sorted(self.dir.glob("*.pending.json")) if self.dir.is_dir() else []
        return [_read(p) for p in files]

    def save(self, snapshot: Snapshot) -> Path:
        path = self.path(snapshot.name)
        write_atomic(path, snapshot.to_json())
        return path

    def save_pending(self, snapshot: Snapshot) -> Path:
        path = self.pending_path(snapshot.name)
        write_atomic(path, snapshot.to_json())
        return path

    def discard_pending(self, name: str) -> bool:
        path = self.pending_path(name)
        if path.is_file():
            path.unlink()
            return True
        return False

    def resolve(self, name: str, *, pending: bool) -> str:
        """The full name of a snapshot from a unique substring of it."""
        names = [s.name for s in (self.pending() if pending else self.baselines())]
        if name in names:
            return name
        matches = [n for n in names if name in n]
        if len(matches) == 1:
            return matches[0]
        what = "pending snapshot" if pending else "snapshot"
        if not names:
            raise InputError(
                f"there are no {what}s in {self.dir}",
                fix="`agentprop snapshot check SPEC` records candidates (NEW or CHANGED "
                "snapshots) to review and approve",
            )
        if not matches:
            raise InputError(
                f"no {what} named {name!r} in {self.dir}",
                expected=f"one of: {', '.join(names)}",
                fix="`agentprop snapshot review SPEC` lists the pending ones, `agentprop snapshot "
                "list SPEC` the baselines",
            )
        raise InputError(
            f"{name!r} matches several {what}s: {', '.join(matches)}",
            fix="use a longer part of the name",
        )

    def approve(
        self, name: str, reason: str | None, *, by: str | None = None, allow_ci: bool = False
    ) -> Snapshot:
        """Make the pending candidate ``name`` the baseline, recording why."""
        reason = check_reason(reason, allow_ci=allow_ci)
        candidate = self.load_pending(name)
        if candidate is None:
            raise InputError(
                f"no pending snapshot {name!r} in {self.dir}",
                fix="run `agentprop snapshot check` first; it writes a candidate "
                "when a snapshot changed",
            )
        old = self.load(name)
        approved = _approved(candidate, old, reason, by)
        self.save(approved)
        self.discard_pending(name)
        return approved


_DAMAGED_FIX = (
    "restore the file from version control, or delete it and record a new baseline (agentprop "
    "snapshot check SPEC)"
)


def _read(path: Path) -> Snapshot:
    raw = read_json(path, what="a snapshot file", fix=_DAMAGED_FIX)
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA:
        found = raw.get("schema") if isinstance(raw, dict) else type(raw).__name__
        raise InputError(
            f"not an agentprop snapshot (schema {clip_repr(found, 60)})",
            location=SourceLocation(path),
            expected=f'"schema": "{SCHEMA}"',
            fix="snapshot directories hold only files agentprop wrote; move other files elsewhere",
        )
    try:
        snapshot = Snapshot.model_validate(raw)
        if snapshot.runs < 1:
            raise ValueError(f"runs is {snapshot.runs}; a snapshot file records at least 1 run")
        return snapshot
    except ValueError as exc:  # pydantic's ValidationError is a ValueError too
        raise InputError(
            f"invalid snapshot: {describe_validation(exc)}",
            location=SourceLocation(path),
            expected=f"a snapshot file ({SCHEMA}) as agentprop writes it",
            fix=_DAMAGED_FIX,
        ) from None
    except RecursionError:
        raise InputError(
            "invalid snapshot: nested too deep to read",
            location=SourceLocation(path),
            expected=f"a snapshot file ({SCHEMA}) as agentprop writes it",
            fix=_DAMAGED_FIX,
        ) from None


def check_reason(reason: str | None, *, allow_ci: bool = False, option: str = "--reason") -> str:
    """The reason an approval must carry; approvals are refused when ``CI`` is set. ``option``
    is how the user gives the reason where this is called (named in the fix)."""
    if os.environ.get("CI") and not allow_ci:
        raise InputError(
            "refusing to approve a behaviour snapshot while CI is set",
            expected="approvals made by a person, on their machine",
            fix='approve locally (agentprop snapshot approve ... --reason "...") and '
            "commit the snapshot file",
        )
    text = (reason or "").strip()
    if len(text) < MIN_REASON:
        raise InputError(
            "approving a behaviour change needs a reason"
            + (f" longer than {text!r}" if text else ""),
            expected=f"a sentence of at least {MIN_REASON} characters saying why the "
            "new behaviour is right",
            fix=f'e.g. {option} "refunds over $500 now escalate: policy P4 changed in spec v2"',
        )
    return text


def _approver(by: str | None) -> str:
    if by:
        return by
    env = os.environ.get("AGENTPROP_APPROVER")
    if env:
        return env
    try:
        return getpass.getuser()
    except Exception:  # no user database in some containers
        return "unknown"


def _approved(candidate: Snapshot, old: Snapshot | None, reason: str, by: str | None) -> Snapshot:
    approval = Approval(
        at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        by=_approver(by),
        reason=reason,
        runs=candidate.runs,
        counts=candidate.counts,
        replaced=old.counts if old is not None else None,
        agent=candidate.agent,
        agent_fingerprint=candidate.agent_fingerprint,
    )
    history = list(old.approvals) if old is not None else []
    return candidate.model_copy(update={"approvals": [*history, approval]})


# --- recording and comparing -------------------------------------------------------------


def world_digest(scenario: Scenario) -> str:
    text = json.dumps(scenario.world.model_dump(mode="json"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


async def record_snapshot(
    project: Project,
    scenario: Scenario,
    agent: LoadedAgent,
    *,
    name: str,
    runs: int = 10,
    seed: int = 0,
    ignore: Sequence[str] = (),
    budget: Budget | None = None,
    concurrency: int = 8,
    messages: Sequence[str] | None = None,
    judges: Sequence[JudgeLike] = (),
) -> tuple[Snapshot, int, RunError | None]:
    """Run the case ``runs`` times and summarise the behaviours. Returns the snapshot, the
    number of runs actually made (fewer when the budget ran out) and the error, not the agent's,
    that stopped a run (a cache miss, no key ...; such runs are left out)."""
    msgs = list(messages) if messages is not None else scenario.messages
    base = seed * 1_000_003 + 500_000
    gate = asyncio.Semaphore(max(1, concurrency))
    started: list[int] = []
    for i in range(runs):
        if budget is not None and not budget.try_start_run():
            break
        started.append(base + i)

    async def one(trial: int) -> Trace:
        async with gate:
            return await project.arun(
                scenario, agent.factory, trial=trial, agent_name=agent.ref, messages=msgs
            )

    everything = await asyncio.gather(*(one(t) for t in started))
    case = Snapshot(
        name=name,
        spec_id=project.spec.spec_id,
        scenario_id=scenario.id,
        messages=msgs,
        world=world_digest(scenario),
        ignore=list(ignore),
        runs=0,
        seed=seed,
        agent=agent.ref,
        agent_fingerprint=agent.fingerprint,
        behaviours=[],
    )
    return summarise(case, everything, judges=judges)


def summarise(
    case: Snapshot, everything: Sequence[Trace], *, judges: Sequence[JudgeLike] = ()
) -> tuple[Snapshot, int, RunError | None]:
    """``case`` (a snapshot with no runs: its name, case and agent) with the behaviours of
    ``everything``; the number of runs counted, and the error, not the agent's, that stopped a
    run (such runs are left out: no behaviour of the agent)."""
    infra = next(
        (t.infrastructure_error for t in everything if t.infrastructure_error is not None), None
    )
    traces = [t for t in everything if t.infrastructure_error is None]
    records: dict[str, BehaviourRecord] = {}
    for trace in traces:
        behaviour = behaviour_of(trace, ignore=case.ignore, judges=judges)
        key = behaviour.key
        if key in records:
            records[key].count += 1
        else:
            records[key] = BehaviourRecord(key=key, count=1, behaviour=behaviour, example=trace)
    ordered = sorted(records.values(), key=lambda r: (-r.count, r.key))
    return case.model_copy(update={"runs": len(traces), "behaviours": ordered}), len(traces), infra


def compare(
    baseline: Snapshot, current: Snapshot, *, alpha: float, seed: int = 0
) -> tuple[float, list[BehaviourChange], list[str]]:
    """The p-value that both come from one distribution, the behaviours that appeared or
    disappeared (each new one diffed against its nearest baseline behaviour), and notes."""
    p = categorical_two_sample_test(baseline.counts, current.counts, seed=seed)
    changes: list[BehaviourChange] = []
    notes: list[str] = []
    for record in current.behaviours:
        if baseline.record(record.key) is not None:
            continue
        best: tuple[int, int, str, list[str]] | None = None
        for old in baseline.behaviours:
            diff = behaviour_diff(old.behaviour, record.behaviour)
            candidate = (len(diff), -old.count, old.key, diff)
            if best is None or candidate[:3] < best[:3]:
                best = candidate
        changes.append(
            BehaviourChange(
                key=record.key,
                describe=record.behaviour.describe(),
                baseline_count=0,
                current_count=record.count,
                nearest=best[2] if best else None,
                diff=best[3] if best else [],
            )
        )
    for old in baseline.behaviours:
        if current.record(old.key) is None:
            changes.append(
                BehaviourChange(
                    key=old.key,
                    describe=old.behaviour.describe(),
                    baseline_count=old.count,
                    current_count=0,
                )
            )
    if changes and p >= alpha:
        notes.append(
            f"behaviours differ from the baseline's but not beyond sampling noise (p={p:.3f} >= "
            f"alpha={alpha}); more runs (runs=...) would tell a rare new behaviour from chance"
        )
    return p, changes, notes


def _check_args(runs: int, alpha: float) -> None:
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise InvalidArgument(f"runs={runs!r} must be a positive int (10 is the default)")
    if not 0.0 < alpha < 1.0:
        raise InvalidArgument(f"alpha={alpha!r} must be between 0 and 1 (0.05 is the default)")


async def acheck_snapshot(
    project: Project,
    scenario: Scenario,
    agent: Any,
    *,
    store: SnapshotStore,
    name: str | None = None,
    runs: int = 10,
    alpha: float = 0.05,
    update: bool = False,
    reason: str | None = None,
    allow_ci: bool = False,
    ignore: Sequence[str] = (),
    budget: Budget | None = None,
    seed: int = 0,
    messages: Sequence[str] | None = None,
    judges: Sequence[JudgeLike] = (),
) -> SnapshotResult:
    agent = as_loaded_agent(agent)
    _check_args(runs, alpha)
    _check_ignore(ignore)
    if update:
        reason = check_reason(reason, allow_ci=allow_ci)
    name = name or scenario.id
    baseline = store.load(name)
    path = str(store.path(name))
    msgs = list(messages) if messages is not None else scenario.messages
    rerecord = False
    if baseline is not None:  # before any run: a mismatch should not cost runs
        rerecord = _check_same_case(
            baseline,
            project.spec.spec_id,
            msgs,
            world_digest(scenario),
            list(ignore),
            path,
            update=update,
        )
    current, made, infra = await record_snapshot(
        project,
        scenario,
        agent,
        name=name,
        runs=runs,
        seed=seed,
        ignore=ignore,
        budget=budget,
        messages=msgs,
        judges=judges,
    )
    return decide_snapshot(
        store,
        current,
        baseline,
        made=made,
        runs=runs,
        infra=infra,
        rerecord=rerecord,
        alpha=alpha,
        update=update,
        reason=reason,
        seed=seed,
    )


def decide_snapshot(
    store: SnapshotStore,
    current: Snapshot,
    baseline: Snapshot | None,
    *,
    made: int,
    runs: int,
    infra: RunError | None,
    rerecord: bool,
    alpha: float,
    update: bool,
    reason: str | None,
    seed: int,
) -> SnapshotResult:
    """The verdict of ``current`` (``made`` of the ``runs`` asked for) against ``baseline``,
    and what it writes: a pending candidate (NEW, CHANGED) or, with ``update`` and a checked
    ``reason``, the approved baseline (UPDATED). A check with runs missing is INCONCLUSIVE."""
    name, ignore = current.name, current.ignore
    where: dict[str, Any] = dict(
        name=name, path=str(store.path(name)), directory=str(store.dir), alpha=alpha, runs=made
    )

    def approve(previous: Snapshot | None) -> None:
        store.save(_approved(current, previous, reason or "", None))
        store.discard_pending(name)

    if infra is not None:  # never recorded, never compared: the runs were not all made
        return SnapshotResult(
            verdict="INCONCLUSIVE",
            notes=[f"not the agent's ({infra.kind}): {infra.message}"],
            infrastructure_error=infra.kind,
            **where,
        )
    # new ignore patterns: the old behaviours are not comparable, the approval replaces them
    if rerecord and baseline is not None:
        if made < runs:
            return SnapshotResult(verdict="INCONCLUSIVE", **where)
        approve(baseline)
        return SnapshotResult(
            verdict="UPDATED",
            current=current.counts,
            reason=reason,
            descriptions={r.key: r.behaviour.describe() for r in current.behaviours},
            notes=[f"re-recorded with ignore patterns {list(ignore)} (were {baseline.ignore})"],
            **where,
        )
    descriptions = {r.key: r.behaviour.describe() for r in current.behaviours}
    if baseline is not None:
        descriptions.update({r.key: r.behaviour.describe() for r in baseline.behaviours})
    common: dict[str, Any] = dict(
        **where,
        current=current.counts,
        descriptions=descriptions,
        baseline=baseline.counts if baseline else {},
        baseline_runs=baseline.runs if baseline else 0,
    )
    if made < runs:
        return SnapshotResult(verdict="INCONCLUSIVE", **common)
    if baseline is None:
        if update:
            approve(None)
            return SnapshotResult(verdict="UPDATED", reason=reason, **common)
        pending = store.save_pending(current)
        return SnapshotResult(verdict="NEW", pending_path=str(pending), **common)
    p, changes, notes = compare(baseline, current, alpha=alpha, seed=seed)
    if p >= alpha:
        if update:
            notes.append("the behaviour matches the baseline; the baseline was kept as it is")
        store.discard_pending(name)
        return SnapshotResult(verdict="MATCH", p_value=p, changes=changes, notes=notes, **common)
    if update:
        approve(baseline)
        return SnapshotResult(
            verdict="UPDATED", p_value=p, changes=changes, notes=notes, reason=reason, **common
        )
    pending = store.save_pending(current)
    return SnapshotResult(
        verdict="CHANGED",
        p_value=p,
        changes=changes,
        notes=notes,
        pending_path=str(pending),
        **common,
    )


def _check_ignore(ignore: Sequence[str]) -> None:
    for pattern in ignore:
        if not isinstance(pattern, str) or not pattern.startswith(("response.", "tools.")):
            raise InvalidArgument(
                f"ignore pattern {pattern!r} matches nothing: patterns are globs over "
                "response.FIELD, tools.TOOL and tools.TOOL.ARG (e.g. 'response.ticket_id', "
                "'tools.create_ticket.*', 'tools.log_*')"
            )


def _check_same_case(
    baseline: Snapshot,
    spec_id: str,
    messages: list[str],
    world: str,
    ignore: list[str],
    path: str,
    *,
    update: bool,
) -> bool:
    """Raise when the baseline was recorded for another case; ``True`` when only the ignore
    patterns differ and ``update`` re-records it."""
    mismatched = [
        what
        for what, old, new in (
            ("spec", baseline.spec_id, spec_id),
            ("messages", baseline.messages, messages),
            ("world", baseline.world, world),
        )
        if old != new
    ]
    if mismatched:
        raise InputError(
            f"snapshot {baseline.name!r} was recorded for a different case "
            f"({', '.join(mismatched)} changed)",
            location=SourceLocation(Path(path)),
            expected="the same spec, messages and world as the baseline",
            fix="give this check its own name (name=... in Python), or, if the case itself "
            "changed on purpose, delete the "
            "file and record a new baseline (agentprop snapshot check SPEC "
            '--update --reason "...")',
        )
    if baseline.ignore != ignore:
        if update:
            return True
        raise InputError(
            f"snapshot {baseline.name!r} was recorded with ignore patterns "
            f"{baseline.ignore}, not {ignore}",
            location=SourceLocation(Path(path)),
            expected="the baseline's ignore patterns, or a re-recorded baseline",
            fix='re-record it under the new patterns: rerun with --update --reason "..." '
            "(update=True, reason=... in Python)",
        )
    return False


def default_snapshot_dir(project: Project) -> Path:
    """``__snapshots__`` next to the spec: baselines are committed with the spec they test."""
    return project.spec_path.parent / "__snapshots__"


def _describe_lines(behaviour: Behaviour, indent: str) -> list[str]:
    return [f"{indent}{_short(t, 160)}" for t in behaviour.describe().split(" | ")]


def render_pending(candidate: Snapshot, baseline: Snapshot | None, *, alpha: float = 0.05) -> str:
    """A pending candidate next to its baseline, as ``agentprop snapshot review`` shows it."""
    descriptions = {r.key: r.behaviour.describe() for r in candidate.behaviours}
    if baseline is None:
        result = SnapshotResult(
            name=candidate.name,
            verdict="NEW",
            path="(none yet)",
            alpha=alpha,
            runs=candidate.runs,
            current=candidate.counts,
            descriptions=descriptions,
        )
    else:
        descriptions.update({r.key: r.behaviour.describe() for r in baseline.behaviours})
        p, changes, notes = compare(baseline, candidate, alpha=alpha, seed=candidate.seed)
        result = SnapshotResult(
            name=candidate.name,
            verdict="CHANGED",
            path="",
            p_value=p,
            alpha=alpha,
            runs=candidate.runs,
            baseline_runs=baseline.runs,
            baseline=baseline.counts,
            current=candidate.counts,
            changes=changes,
            notes=notes,
            descriptions=descriptions,
        )
    lines = result.summary().splitlines()
    lines = [line for line in lines if "approve it with a reason" not in line]
    head = f"pending {candidate.name} (agent {candidate.agent}, {candidate.runs} runs)"
    return "\n".join([head, *lines[1:]])


def render_baseline(snapshot: Snapshot) -> str:
    """A baseline with its behaviours and approval history (``agentprop snapshot show``)."""
    lines = [
        f"snapshot {snapshot.name} ({snapshot.spec_id}, case {snapshot.scenario_id})",
        f"  messages: {snapshot.messages!r}",
        f"  {snapshot.runs} runs with agent {snapshot.agent} (fingerprint "
        f"{snapshot.agent_fingerprint or '-'})"
        + (f"; ignoring {', '.join(snapshot.ignore)}" if snapshot.ignore else ""),
    ]
    for record in snapshot.behaviours:
        lines.append(f"  {record.count}/{snapshot.runs}  {record.key}")
        lines.extend(_describe_lines(record.behaviour, "      "))
    lines.append("  approvals:" if snapshot.approvals else "  approvals: none")
    for a in snapshot.approvals:
        replaced = "first baseline" if a.replaced is None else f"replaced {a.replaced}"
        lines.append(f"    {a.at} by {a.by}: {a.reason} ({replaced})")
    return "\n".join(lines)
