"""``agentprop merge``: one report from the per-trial records of the N shards of one run.

The shards must be of one run (the same spec digest, settings digest, seed and shard count) and
together complete and disjoint (each of 1..N exactly once); anything else is an input error
naming the shard or directory. Every decision is decided again from its trial lines
(:func:`~agentprop._decide.records.recompute`), never taken from a shard's summary: a case's
verdict, runs, passes, interval and failure signatures come from its judged trials. The shards of
a pytest session give one entry per check (test and name, :func:`merged_checks`), in the order
of the session's collection.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprop._decide.records import (
    RECORDS_FILE,
    SHARD_FILE,
    AnyRecord,
    CheckLine,
    DecisionStart,
    ShardInfo,
    TrialLine,
    read_records,
    recompute,
    records_files,
)
from agentprop._pipeline.pytest_merge import COLLECTION_FILE
from agentprop._stats.intervals import wilson_interval
from agentprop.errors import InputError

__all__ = ["MERGED_SCHEMA", "MergedCase", "MergedRun", "merge_shards", "merged_cases"]

MERGED_SCHEMA = "agentprop.merged/1"
_RUN_FIELDS = ("spec_digest", "settings_digest", "seed", "count")


@dataclass(frozen=True)
class MergedCase:
    """One decision name's last decision (of its kind, outside an earlier pass of a budgeted
    run), decided again from its trials: an MFT, EXPLORE, PROBE or BOUNDARY case, or a side of a
    DIR or INV case (the records do not say how sides combine into a DIR / INV case's verdict)."""

    name: str
    kind: str | None
    shard: int
    verdict: str
    decided_by: str
    runs: int
    passes: int
    interval: tuple[float, float] | None
    signatures: tuple[str, ...]
    """The distinct signatures of its judged failing trials, in the order first met."""
    cost_usd: float
    test: str | None = None
    """The pytest test whose check this is (the shards of a pytest session); ``None`` for the
    cases of ``agentprop run --shard``."""


@dataclass
class MergedRun:
    """The merged shards: the run they are of, where each came from, and every case."""

    info: ShardInfo
    directories: dict[int, Path]
    cases: list[MergedCase] = field(default_factory=list)
    decisions: int = 0
    trials: int = 0
    top_up: Path | None = None
    """The records of the pooled top-up made when the shards were merged (``agentprop run ...
    --top-up-shards DIR... --records TOP``: its shard index is 0), when given."""
    unchecked: int = 0
    """Of a pytest session's shards, the decisions no check names: in flight when a shard
    stopped, or made while shrinking a failure (they are not in ``cases``)."""
    records: dict[int, list[AnyRecord]] = field(default_factory=dict, repr=False)
    """Of a pytest session's shards merged with ``decide=False``: each shard's records, as read
    (empty otherwise)."""

    def verdicts(self) -> Counter[str]:
        return Counter(c.verdict for c in self.cases)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": MERGED_SCHEMA,
            "spec_digest": self.info.spec_digest,
            "settings_digest": self.info.settings_digest,
            "seed": self.info.seed,
            "shards": [
                {"index": i, "count": self.info.count, "records": str(d)}
                for i, d in sorted(self.directories.items())
            ],
            "runner": self.info.runner,
            "decisions": self.decisions,
            "trials": self.trials,
            **({"decisions_not_checks": self.unchecked} if self.info.runner == "pytest" else {}),
            "verdicts": dict(sorted(self.verdicts().items())),
            "cases": [
                {
                    **({"test": c.test} if self.info.runner == "pytest" else {}),
                    "name": c.name,
                    "kind": c.kind,
                    "shard": c.shard,
                    "verdict": c.verdict,
                    "decided_by": c.decided_by,
                    "runs": c.runs,
                    "passes": c.passes,
                    "interval": list(c.interval) if c.interval is not None else None,
                    "signatures": list(c.signatures),
                    "cost_usd": c.cost_usd,
                }
                for c in self.cases
            ],
        }


def _shard_of(directory: Path, records: list[AnyRecord]) -> ShardInfo:
    """The shard ``directory``'s records are of; records of two runs in one
    directory are an error."""
    infos = {
        r.shard.model_dump_json()
        for r in records
        if isinstance(r, DecisionStart) and r.shard is not None
    }
    file = directory / SHARD_FILE
    if file.is_file():
        try:
            infos.add(
                ShardInfo.model_validate_json(file.read_text(encoding="utf-8")).model_dump_json()
            )
        except ValueError:
            raise InputError(
                f"{file}: not a shard description",
                fix="give the DIR of `agentprop run --shard i/N --records DIR`, as it wrote it",
            ) from None
    unsharded = any(isinstance(r, DecisionStart) and r.shard is None for r in records)
    if not infos or unsharded:
        raise InputError(
            f"{directory}: {'some' if infos else 'its'} records are not of a sharded run",
            fix="give the DIR of `agentprop run SPEC --shard i/N --records DIR`, one "
            "fresh directory per shard",
        )
    if len(infos) > 1:
        raise InputError(
            f"{directory}: holds the records of {len(infos)} different shards or "
            "runs (--records appends)",
            fix="run each shard with its own, fresh --records directory",
        )
    return ShardInfo.model_validate_json(infos.pop())


def _decided(
    shard: int, records: list[AnyRecord]
) -> tuple[dict[int, DecisionStart], Callable[[int, str, str | None], MergedCase], int]:
    """``records``' decision starts, a maker of a decision's :class:`MergedCase` (decided again
    from its trials, under a name), and the trial lines read."""
    again = recompute(records)
    starts = {r.decision: r for r in records if isinstance(r, DecisionStart)}
    trials: dict[int, list[TrialLine]] = {}
    for r in records:
        if isinstance(r, TrialLine):
            trials.setdefault(r.decision, []).append(r)

    def case(number: int, name: str, test: str | None) -> MergedCase:
        start, decided = starts[number], again[number]
        judged = sorted(
            (t for t in trials.get(number, []) if t.passed is not None), key=lambda t: t.trial
        )[: decided.runs]
        signatures = tuple(
            dict.fromkeys(t.signature for t in judged if t.passed is False and t.signature)
        )
        interval = (
            wilson_interval(decided.passes, decided.runs, start.settings.confidence)
            if decided.runs
            else None
        )
        cost = sum(t.cost_usd for t in trials.get(number, []))
        return MergedCase(
            name,
            start.kind,
            shard,
            decided.verdict,
            decided.decided_by,
            decided.runs,
            decided.passes,
            interval,
            signatures,
            cost,
            test,
        )

    return starts, case, sum(len(t) for t in trials.values())


def merged_cases(shard: int, records: Iterable[AnyRecord]) -> tuple[list[MergedCase], int, int]:
    """The cases of one shard's records (each name's last decision in the final pass, or outside
    a budgeted run's passes), decided again from their trials; and the decisions and trials read."""
    listed = list(records)
    starts, case, trials = _decided(shard, listed)
    last: dict[tuple[str | None, str], int] = {}
    for number, start in starts.items():
        if start.stage in (None, "final"):
            last[start.kind, start.case] = number
    out = [case(number, name, None) for (_kind, name), number in last.items()]
    return out, len(starts), trials


def merged_checks(
    shard: int, records: Iterable[AnyRecord]
) -> tuple[list[MergedCase], int, int, int]:
    """The checks of one pytest shard's records (each test's last check of a name, at its first
    check's place, as the session's record lists them; its decision decided again from its
    trials); the decisions and trials read;
    and how many decisions no check names (in flight when the shard stopped, or made while
    shrinking). A check that was not one decision of the oracle's has no trials: left out."""
    listed = list(records)
    starts, case, trials = _decided(shard, listed)
    latest: dict[tuple[str, str], int] = {}
    for r in listed:
        if isinstance(r, CheckLine) and r.decision is not None and r.decision in starts:
            latest[(r.test, r.case)] = r.decision
    out = [case(number, name, test) for (test, name), number in latest.items()]
    return out, len(starts), trials, len(set(starts) - set(latest.values()))


def merge_shards(
    directories: list[str | Path], *, complete: bool = True, decide: bool = True
) -> MergedRun:
    """The cases of the shards in ``directories``, checked to be the complete (``complete=False``:
    some of the), disjoint shards of one run. ``decide=False``, for a pytest session's shards:
    their checks are not decided here but their records kept (``records``), for
    :func:`~agentprop._pipeline.pytest_merge.merge_pytest_shards` to decide once."""
    loaded: list[tuple[Path, ShardInfo, list[AnyRecord]]] = []
    for given in directories:
        directory = Path(given)
        if not records_files(directory) and not (directory / SHARD_FILE).is_file():
            raise InputError(
                f"{directory}: no {RECORDS_FILE} or {SHARD_FILE} there",
                fix="give the DIR of `agentprop run --shard i/N --records DIR`",
            )
        records = list(read_records(directory)) if records_files(directory) else []
        loaded.append((directory, _shard_of(directory, records), records))
    if not loaded:
        raise InputError(
            "no shard records given",
            fix="give the records directory of every shard: agentprop merge DIR1 DIR2 ...",
        )
    tops = [d for d, info, _ in loaded if info.index == 0 and info.runner == "run"]
    if len(tops) > 1:
        raise InputError(
            f"the records of a top-up are given twice: {', '.join(map(str, tops))}",
            fix="give the --records directory of one --top-up-shards command",
        )
    if tops and len(tops) == len(loaded):
        raise InputError(
            f"{tops[0]} holds the records of a top-up, not of a shard",
            fix="give it with the directories of the shards it topped up",
        )
    top_loaded = [x for x in loaded if x[0] in tops]
    loaded = [x for x in loaded if x[0] not in tops]
    first_dir, first, _ = loaded[0]
    for directory, info, _ in [*loaded[1:], *top_loaded]:
        if info.runner != first.runner:
            what = {"run": "`agentprop run --shard`", "pytest": "`pytest --agentprop-shard`"}
            raise InputError(
                f"{directory} is a shard of {what[info.runner]} but {first_dir} of "
                f"{what[first.runner]}: one merge takes the shards of one run",
                fix="merge the pytest session's shards and the agentprop run's shards apart",
            )
        for name in _RUN_FIELDS:
            if getattr(info, name) != getattr(first, name):
                raise InputError(
                    f"{directory} is not a shard of the run of {first_dir}: its {name} is "
                    f"{getattr(info, name)!r}, not {getattr(first, name)!r}",
                    fix="merge the shards of one run: the same spec, settings, agent, --seed "
                    "and N in --shard i/N",
                )
    where: dict[int, list[Path]] = {}
    for directory, info, _ in loaded:
        where.setdefault(info.index, []).append(directory)
    twice = {i: ds for i, ds in where.items() if len(ds) > 1}
    if twice:
        i, ds = min(twice.items())
        raise InputError(
            f"shard {i}/{first.count} is given twice: {', '.join(map(str, ds))}",
            fix="give each shard's records directory once",
        )
    missing = [i for i in range(1, first.count + 1) if i not in where]
    if missing and complete:
        names = ", ".join(f"{i}/{first.count}" for i in missing)
        raise InputError(
            f"shard{'s' if len(missing) > 1 else ''} {names} missing: the run has "
            f"{first.count} shards",
            fix="give every shard's --records directory",
        )
    run = MergedRun(first, {info.index: directory for directory, info, _ in loaded})
    run.top_up = tops[0] if tops else None
    if first.runner == "pytest":
        if decide:
            _pytest_checks(run, loaded)
        else:
            run.records = {info.index: records for _, info, records in loaded}
        return run
    seen: set[tuple[str | None, str]] = set()
    for _directory, info, records in sorted(loaded, key=lambda x: x[1].index):
        cases, decisions, trials = merged_cases(info.index, records)
        # a DIR side shared by pairs on two shards is the same decision (same input,
        # seed, trials): kept once
        run.cases += [c for c in cases if (c.kind, c.name) not in seen]
        seen.update((c.kind, c.name) for c in cases)
        run.decisions += decisions
        run.trials += trials
    return run


def _pytest_checks(run: MergedRun, loaded: list[tuple[Path, ShardInfo, list[AnyRecord]]]) -> None:
    """Fill ``run`` with the checks of a pytest session's shards, in the collection's order
    (what a shard's ``collection.json`` lists; a shard's own order otherwise)."""
    order: dict[str, int] = {}
    for directory, _, _ in loaded:
        file = directory / COLLECTION_FILE
        if file.is_file() and not order:
            try:
                tests = json.loads(file.read_text(encoding="utf-8"))["tests"]
                order = {t: i for i, t in enumerate(tests)}
            except (ValueError, KeyError, TypeError):
                raise InputError(
                    f"{file}: not the collection of a pytest session",
                    fix="give the DIR as `pytest --agentprop-records DIR` wrote it",
                ) from None
    checks: list[tuple[int, int, MergedCase]] = []
    for _directory, info, records in sorted(loaded, key=lambda x: x[1].index):
        cases, decisions, trials, unchecked = merged_checks(info.index, records)
        at = len(checks)
        checks += [(order.get(c.test or "", len(order)), at + k, c) for k, c in enumerate(cases)]
        run.decisions += decisions
        run.trials += trials
        run.unchecked += unchecked
    run.cases = [c for _, _, c in sorted(checks, key=lambda x: (x[0], x[1]))]


_FAILING = ("FAIL", "UNSTABLE")


def merged_markdown(run: MergedRun) -> str:
    """A Markdown table of the merged cases (of a pytest session's shards, its checks)."""
    counts = ", ".join(f"{n} {v}" for v, n in sorted(run.verdicts().items()))
    pytest = run.info.runner == "pytest"
    what = "checks" if pytest else "decided names"
    lines = [
        f"# agentprop: {run.info.count} shards merged (seed {run.info.seed})",
        "",
        f"{len(run.cases)} {what}: {counts or 'none'}; {run.decisions} decisions, "
        f"{run.trials} trial lines, each decided again from its trials.",
        "",
        "| shard | "
        + ("test | check" if pytest else "kind | name")
        + " | verdict | runs | passes | interval | signatures |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in run.cases:
        interval = f"{c.interval[0]:.2f}-{c.interval[1]:.2f}" if c.interval is not None else "-"
        name = c.name.replace("|", "\\|")
        first = (c.test or "-").replace("|", "\\|") if pytest else c.kind or "-"
        lines.append(
            f"| {c.shard} | {first} | {name} | {c.verdict} | {c.runs} | {c.passes} | "
            f"{interval} | {', '.join(c.signatures) or '-'} |"
        )
    return "\n".join(lines) + "\n"


def merged_junit(run: MergedRun) -> str:
    """JUnit XML: one testcase per merged name (FAIL and UNSTABLE fail, INCONCLUSIVE is skipped)."""
    import xml.etree.ElementTree as ET

    verdicts = run.verdicts()
    suite = ET.Element(
        "testsuite",
        name="agentprop merge",
        tests=str(len(run.cases)),
        failures=str(sum(verdicts[v] for v in _FAILING)),
        skipped=str(verdicts["INCONCLUSIVE"] + verdicts["NOT APPLICABLE"]),
    )
    for c in run.cases:
        classname = f"agentprop.shard{c.shard}.{c.kind or 'side'}"
        if c.test is not None:  # a pytest session's check: named by its test
            classname = f"agentprop.shard{c.shard}.{c.test}"
        case = ET.SubElement(suite, "testcase", classname=classname, name=c.name)
        text = f"{c.verdict} ({c.decided_by}): {c.passes}/{c.runs} runs passed" + (
            f"; signatures: {', '.join(c.signatures)}" if c.signatures else ""
        )
        if c.verdict in _FAILING:
            ET.SubElement(case, "failure", message=text)
        elif c.verdict in ("INCONCLUSIVE", "NOT APPLICABLE"):
            ET.SubElement(case, "skipped", message=text)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
