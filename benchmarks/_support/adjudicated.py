"""Blind adjudications of clean-agent failures, read by the benchmarks that count false alarms.

A failure of a correct ("clean") zoo agent is a false alarm only when its input is not a valid
instance of its scenario or its expectation does not follow from the spec; otherwise the clean
agent is wrong on a valid input. ``benchmarks/_adjudication/`` holds blind verdicts on such
failures, each file frozen by a ``FREEZE*.sha256`` beside it (checked on load). A failure is
matched to a verdict by spec, seed, case id, the exact input turns, the violated clause and the
world it ran in; whatever does not match exactly is unadjudicated, and the benchmarks count it
as a false alarm.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ADJUDICATION = Path(__file__).resolve().parents[1] / "_adjudication"

AGENT_ERROR = "agent_error"
"""The verdict that makes a clean-agent failure a finding; every other verdict (a tester error
of the input or of the expectation, or ambiguous) leaves it a false alarm."""


class AdjudicationError(Exception):
    """An adjudication file that is missing its freeze hash, or no longer matches it."""


RETIRED = {
    "clean_failures_worlds_s13.json": (
        "judged base-agent bugs in fault worlds as find.py built them before e4ac9df, which "
        "pinned a world variable's branches to their meaning; those worlds run no more, and the "
        "same overrides now name another world (clean_failures_worlds2_s13.json judged it)"
    ),
}
"""Adjudication files kept as a record but no longer matched, and why: what they judged is no
longer what a benchmark runs under the key they gave it. A file is retired here, never edited."""


@dataclass(frozen=True)
class Verdict:
    verdict: str
    pattern: str
    source: str
    """The adjudication file that judged it."""


@dataclass(frozen=True)
class Failure:
    """One clean-agent failure as a benchmark saw it."""

    spec: str
    seed: int
    case: str
    turns: tuple[str, ...]
    clauses: frozenset[str]
    """The clauses (``decision_tree.N7_CONFIRM``) the case's failures broke."""
    world: str = ""
    """The world it ran in, when not the spec folder's own: the overrides applied over the
    bindings' world as canonical JSON (:func:`world_key`); a verdict given in one world never
    judges the same input in another."""


def world_key(overrides: Mapping[str, Any] | None) -> str:
    """The :attr:`Failure.world` of a run with ``overrides`` applied over the bindings' world."""
    return json.dumps(overrides, sort_keys=True, ensure_ascii=False) if overrides else ""


@dataclass
class Tally:
    """Clean-agent failures split by their blind verdict."""

    failures: int = 0
    agent_errors: int = 0
    tester_errors: int = 0
    unadjudicated: int = 0
    tester_error_cases: list[str] = field(default_factory=list)
    unadjudicated_cases: list[str] = field(default_factory=list)

    @property
    def false_alarms(self) -> int:
        """Tester errors and failures nobody judged: a failure is a finding only when a blind
        adjudicator found the input valid and the expectation following from the spec."""
        return self.tester_errors + self.unadjudicated

    def as_dict(self) -> dict[str, object]:
        return {
            "clean_failures": self.failures,
            "clean_agent_errors": self.agent_errors,
            "tester_errors": self.tester_errors,
            "unadjudicated": self.unadjudicated,
            "false_alarms": self.false_alarms,
        }


def _clause_of(failure_text: str) -> str:
    return failure_text.split(":", 1)[0].strip()


def _frozen_hashes(folder: Path) -> dict[str, str]:
    hashes: dict[str, str] = {}
    for freeze in sorted(folder.glob("FREEZE*.sha256")):
        for line in freeze.read_text(encoding="utf-8").splitlines():
            if line.strip():
                digest, name = line.split(maxsplit=1)
                hashes[Path(name.strip().lstrip("*")).name] = digest
    return hashes


@dataclass
class Adjudications:
    """Every frozen adjudication of a folder, indexed for exact matching."""

    index: dict[tuple[str, int, str, tuple[str, ...], str], list[tuple[str, Verdict]]]
    files: list[str]

    @classmethod
    def load(
        cls, folder: Path = ADJUDICATION, retired: Mapping[str, str] = RETIRED
    ) -> Adjudications:
        """The frozen files of ``folder`` but the ``retired`` ones (see :data:`RETIRED`)."""
        hashes = _frozen_hashes(folder)
        index: dict[tuple[str, int, str, tuple[str, ...], str], list[tuple[str, Verdict]]] = {}
        files = []
        for path in sorted(folder.glob("clean_failures*.json")):
            if path.name in retired:
                continue
            data = path.read_bytes()
            expected = hashes.get(path.name)
            if expected is None:
                raise AdjudicationError(
                    f"{path}: no FREEZE*.sha256 in {folder} names it; an adjudication counts "
                    "only once frozen (sha256sum FILE > FREEZE-NAME.sha256)"
                )
            if hashlib.sha256(data).hexdigest() != expected:
                raise AdjudicationError(
                    f"{path} no longer matches its freeze hash {expected[:12]}...: a frozen "
                    "adjudication is never edited; add a new file instead"
                )
            files.append(path.name)
            for group in json.loads(data)["groups"]:
                verdict = Verdict(group["verdict"], group.get("pattern", ""), path.name)
                for m in group["members"]:
                    world = world_key(m.get("world"))
                    key = (group["spec"], int(m["seed"]), m["case"], tuple(m["turns"]), world)
                    index.setdefault(key, []).append((_clause_of(m["failure"]), verdict))
        return cls(index, files)

    def verdict(self, failure: Failure) -> Verdict | None:
        """The blind verdict on exactly this failure, or ``None`` when none was given. When
        several adjudicators judged it and disagree, a tester error (or ambiguous) wins over
        ``agent_error``: the failure is a finding only if no blind reader doubted it."""
        given = [
            verdict
            for clause, verdict in self.index.get(
                (failure.spec, failure.seed, failure.case, failure.turns, failure.world), []
            )
            if clause in failure.clauses
        ]
        doubted = [v for v in given if v.verdict != AGENT_ERROR]
        return (doubted or given or [None])[0]

    def tally(self, failures: Iterable[Failure]) -> Tally:
        out = Tally()
        for f in failures:
            out.failures += 1
            v = self.verdict(f)
            label = f"{f.spec} seed {f.seed}: {f.case}"
            if v is None:
                out.unadjudicated += 1
                out.unadjudicated_cases.append(label)
            elif v.verdict == AGENT_ERROR:
                out.agent_errors += 1
            else:
                out.tester_errors += 1
                out.tester_error_cases.append(f"{label} ({v.verdict}: {v.pattern})")
        return out


def failure_record(f: Failure) -> dict[str, object]:
    """A failure as JSON (a benchmark's ``--json`` keeps them, so ``--rejudge`` can count its
    false alarms again against adjudications landed after the run)."""
    return {
        "spec": f.spec,
        "seed": f.seed,
        "case": f.case,
        "turns": list(f.turns),
        "clauses": sorted(f.clauses),
        **({"world": json.loads(f.world)} if f.world else {}),
    }


def failure_from(record: Mapping[str, Any]) -> Failure:
    """The failure a :func:`failure_record` wrote."""
    return Failure(
        str(record["spec"]),
        int(record["seed"]),
        str(record["case"]),
        tuple(str(t) for t in record["turns"]),
        frozenset(str(c) for c in record["clauses"]),
        world_key(record.get("world")),
    )


def judged_text(failures: Iterable[Failure], adjudications: Adjudications) -> str:
    """What blind adjudications said of one bug's failing cases: ``agent error (FILE)`` when one
    of them was judged so and no adjudicator doubted any, the doubt when one did, else ``not
    adjudicated``."""
    given = [v for f in failures if (v := adjudications.verdict(f)) is not None]
    doubted = [v for v in given if v.verdict != AGENT_ERROR]
    if doubted:
        return f"{doubted[0].verdict} ({doubted[0].source})"
    if given:
        return f"agent error ({given[0].source})"
    return "not adjudicated"


def failure_of(
    spec: str, seed: int, case: str, messages: Sequence[str], clauses: Iterable[str | None]
) -> Failure:
    return Failure(spec, seed, case, tuple(messages), frozenset(c for c in clauses if c))
