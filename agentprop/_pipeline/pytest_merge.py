"""The shards of a pytest session (``pytest --agentprop-shard i/N --agentprop-records DIR``)
merged into the session's record: what the unsharded session's ``--agentprop-json`` holds.

Each shard's DIR holds its trial records (one file per pytest-xdist worker), the session's whole
collection (``collection.json``) and, once the shard finished, its record (``report.json``).
Every check is decided again from its decision's trial lines (verdict, runs, pass rate, interval),
never taken from a shard's summary, and a shard whose record its trial lines do not bear out is
refused; checks, bugs, corpus replays and snapshots come out in the collection's order, as an
unsharded session without pytest-xdist lists them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprop._decide.records import (
    REPORT_FILE,
    AnyRecord,
    CheckLine,
    DecisionStart,
    ShardInfo,
    read_records,
    recompute,
    records_files,
)
from agentprop._stats.intervals import wilson_interval
from agentprop.errors import InputError

__all__ = [
    "COLLECTION_FILE",
    "PytestMerge",
    "merge_pytest_shards",
    "pytest_shard_info",
    "write_collection",
]

COLLECTION_FILE = "collection.json"
"""The node ids the session collected, in order, before a shard kept its share."""


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def pytest_shard_info(
    collected: list[str], shard: Any, *, seed: int, options: dict[str, Any]
) -> ShardInfo:
    """The identity of a pytest shard: its ``spec_digest`` is the whole collection's (the shards
    of one session collect the same tests), its ``settings_digest`` the agentprop options'."""
    return ShardInfo(
        index=shard.index,
        count=shard.count,
        spec_digest=_digest(collected),
        settings_digest=_digest(options),
        seed=seed,
        runner="pytest",
    )


def write_collection(directory: Path, collected: list[str]) -> None:
    """Write the session's collection into a records ``directory`` (every process of a shard
    writes the same)."""
    from agentprop._util.files import write_atomic

    write_atomic(directory / COLLECTION_FILE, json.dumps({"tests": collected}) + "\n")


@dataclass
class PytestMerge:
    """The merged session record (schema ``agentprop.pytest/1``, plus ``merge``) and how it was
    made."""

    data: dict[str, Any]
    failed: bool
    """Whether a shard's pytest session failed (a test failed), as the unsharded one would."""
    again: int = 0
    from_reports: list[str] = field(default_factory=list)
    trials: int = 0
    """The shards' trial lines, read once."""


@dataclass
class _Shard:
    info: ShardInfo
    directory: Path
    report: dict[str, Any]
    checks: list[tuple[str, str, int | None]]
    """Every check line: test, name, decision number."""
    decided: dict[int, tuple[str, str, int, int, float]]
    """Decision number -> verdict, decided by, runs, passes, confidence."""
    trials: int


def _load(info: ShardInfo, directory: Path, records: list[AnyRecord] | None = None) -> _Shard:
    report_file = directory / REPORT_FILE
    if records is None:
        records = list(read_records(directory)) if records_files(directory) else []
    if not report_file.is_file():
        held = sum(isinstance(r, CheckLine) for r in records)
        lines = sum(r.type == "trial" for r in records)
        raise InputError(
            f"shard {info.index}/{info.count} ({directory}) is incomplete: it has no "
            f"{REPORT_FILE}, so its pytest session did not finish (its records hold {held} "
            f"check(s) and {lines} trial line(s), kept up to where it stopped)",
            fix=f"run shard {info.index}/{info.count} again with a fresh --agentprop-records "
            "directory, then merge",
        )
    try:
        report = json.loads(report_file.read_text(encoding="utf-8"))
        assert isinstance(report, dict) and isinstance(report.get("checks"), list)
    except (ValueError, AssertionError):
        raise InputError(
            f"{report_file}: not the record of a pytest session",
            fix="give the DIR as `pytest --agentprop-records DIR` wrote it (run that shard again "
            "if it was edited)",
        ) from None
    status = report.get("exitstatus")
    if status not in (0, 1, 5):  # passed, tests failed, no tests in this shard
        raise InputError(
            f"shard {info.index}/{info.count} ({directory}): its pytest session ended with exit "
            f"status {status} (interrupted, or an internal or usage error), so not every test "
            "of the shard ran",
            fix=f"run shard {info.index}/{info.count} again with a fresh --agentprop-records "
            "directory, then merge",
        )
    settings = {r.decision: r.settings.confidence for r in records if isinstance(r, DecisionStart)}
    decided = {
        n: (d.verdict, d.decided_by, d.runs, d.passes, settings[n])
        for n, d in recompute(records).items()
    }
    checks = [(r.test, r.case, r.decision) for r in records if isinstance(r, CheckLine)]
    trials = sum(r.type == "trial" for r in records)
    return _Shard(info, directory, report, checks, decided, trials)


def _collection(shards: list[_Shard]) -> dict[str, int]:
    for shard in shards:
        file = shard.directory / COLLECTION_FILE
        if file.is_file():
            tests = json.loads(file.read_text(encoding="utf-8"))["tests"]
            if _digest(tests) != shard.info.spec_digest:
                raise InputError(
                    f"{file}: not the collection its shard ran (its digest differs)",
                    fix="give the DIR as `pytest --agentprop-records DIR` wrote it",
                )
            return {t: i for i, t in enumerate(tests)}
    return {}


def _check_entry(shard: _Shard, test: str, name: str, decision: int) -> dict[str, Any]:
    """A check of ``shard`` decided again from its decision's trial lines, as the session lists
    it (:func:`agentprop._decide.oracle._result`'s rate and interval)."""
    verdict, _, runs, passes, confidence = shard.decided[decision]
    return {
        "test": test,
        "case": name,
        "verdict": verdict,
        "pass_rate": passes / runs if runs else 0.0,
        "interval": list(wilson_interval(passes, runs, confidence)) if runs else [0.0, 1.0],
        "runs": runs,
    }


def merge_pytest_shards(
    infos: dict[int, tuple[ShardInfo, Path]], records: dict[int, list[AnyRecord]] | None = None
) -> PytestMerge:
    """The record of the pytest session whose N shards (checked complete and disjoint by
    :func:`agentprop._pipeline.merge.merge_shards`) are ``infos``; ``records``: their records
    when already read (by ``merge_shards(..., decide=False)``), each decided here once."""
    shards = [_load(info, d, (records or {}).get(i)) for i, (info, d) in sorted(infos.items())]
    order = _collection(shards)

    def rank(test: str) -> int:
        return order.get(test, len(order))

    profiles = {(s.report.get("profile"), s.report.get("seed")) for s in shards}
    if len(profiles) > 1:
        raise InputError(
            "the shards' sessions ran with different profiles or seeds: "
            + ", ".join(f"{p} seed {s}" for p, s in sorted(profiles, key=str)),
            fix="run every shard with the same --agentprop-profile and --agentprop-seed",
        )
    for shard in shards:
        checked = {test for test, _, _ in shard.checks}
        unseeded = [t for t in shard.report.get("unseeded_hypothesis", []) if t in checked]
        if unseeded:
            raise InputError(
                f"shard {shard.info.index}/{shard.info.count}: {unseeded[0]}"
                + (f" (and {len(unseeded) - 1} more)" if len(unseeded) > 1 else "")
                + " is a Hypothesis test drawing from Hypothesis's process-wide random (no "
                "@seed, settings(derandomize=True) or --hypothesis-seed), so the examples it "
                "checked depend on the tests that ran before it in its process: the shards' "
                "checks of it are not the ones an unsharded session makes",
                fix="run every shard, and the unsharded session, with --hypothesis-seed N (or "
                "give the test @seed(N) or settings(derandomize=True))",
            )
    checks: list[tuple[int, int, dict[str, Any]]] = []
    again, from_reports = 0, []
    for shard in shards:
        said = {(c["test"], c["case"]): c for c in shard.report["checks"]}
        latest: dict[tuple[str, str], int | None] = {}
        for test, name, decision in shard.checks:
            latest[(test, name)] = decision
        missing = [k for k in said if k not in latest]
        if missing:
            test, name = missing[0]
            raise InputError(
                f"shard {shard.info.index}/{shard.info.count}: its {REPORT_FILE} lists the check "
                f"{name!r} of {test} but its trial records do not hold it",
                fix="the report or the records were edited, or the records directory was not "
                "fresh: run that shard again",
            )
        for at, ((test, name), decision) in enumerate(latest.items()):
            reported = said.get((test, name))
            if decision is None or decision not in shard.decided:
                if reported is None:  # neither recomputable nor reported: nothing to list
                    continue
                entry = dict(reported)
                from_reports.append(f"{name} [{test}]")
            else:
                entry = _check_entry(shard, test, name, decision)
                again += 1
                if reported is not None and (reported["verdict"], reported["runs"]) != (
                    entry["verdict"],
                    entry["runs"],
                ):
                    raise InputError(
                        f"shard {shard.info.index}/{shard.info.count}: its {REPORT_FILE} says "
                        f"{name!r} of {test} is {reported['verdict']} on {reported['runs']} runs "
                        f"but its trial records decide {entry['verdict']} on {entry['runs']}",
                        fix="the report or the records were edited, or written by two sessions: "
                        "run that shard again",
                    )
            checks.append((rank(test), at, entry))
    checks.sort(key=lambda c: (c[0], c[1]))
    first = shards[0].report
    data: dict[str, Any] = {
        "schema": first.get("schema"),
        "profile": first.get("profile"),
        "seed": first.get("seed"),
        "checks": [c for _, _, c in checks],
        "results": _in_order([r for s in shards for r in s.report.get("results", [])], rank),
        "corpus_notes": _in_order(
            [n for s in shards for n in s.report.get("corpus_notes", [])], rank
        ),
        "bugs": _bugs(shards, rank),
        "snapshots": sorted(
            (n for s in shards for n in s.report.get("snapshots", [])), key=lambda n: rank(n[0])
        ),
        "memo_hits": sum(int(s.report.get("memo_hits") or 0) for s in shards),
    }
    written = [s.report["input_model"] for s in shards if s.report.get("input_model")]
    if written:  # --agentprop-input-model: what the model wrote, added up as over xdist workers
        from agentprop._decide.written import merge_summaries

        data["input_model"] = merge_summaries(written)
    data["merge"] = {
        "shards": [
            {
                "index": s.info.index,
                "count": s.info.count,
                "records": str(s.directory),
                "checks": len(s.report["checks"]),
                "exitstatus": s.report.get("exitstatus"),
            }
            for s in shards
        ],
        "trial_lines": sum(s.trials for s in shards),
        "checks_decided_again": again,
        "checks_from_reports": from_reports,
    }
    saved = [b for b in data["bugs"] if b.get("corpus_entry")]
    if saved and len(shards) > 1:
        data["merge"]["problems"] = [
            f"bug {b['key']} was saved to the corpus as entry {b['corpus_entry']} during the "
            f"run (by {b['test']}): an unsharded session replays it first in every later check "
            "of its case, a shard only in its own; checks of that case on other shards may differ "
            "from the unsharded session's (run shards with --agentprop-corpus none, or a "
            "committed corpus)"
            for b in saved
        ]
    for shard in shards:
        checked = {test for test, _, _ in shard.checks}
        replayed = [t for t in shard.report.get("hypothesis_database", []) if t in checked]
        if replayed and len(shards) > 1:
            data["merge"].setdefault("problems", []).append(
                f"shard {shard.info.index}/{shard.info.count}: {', '.join(replayed)} replay(s) "
                "the examples Hypothesis's database saved before drawing new ones, and each "
                "shard replays its own database's: their checks equal the unsharded session's "
                "only when every shard's database held what the unsharded session's held (a "
                "fresh checkout holds none; settings(database=None) replays nothing)"
            )
    failed = any(s.report.get("exitstatus") == 1 for s in shards)
    return PytestMerge(data, failed, again, from_reports, sum(s.trials for s in shards))


def _in_order(entries: list[dict[str, Any]], rank: Any) -> list[dict[str, Any]]:
    """``entries`` (each of a ``test``) in the collection's order, a test's in their order."""
    return sorted(entries, key=lambda e: rank(e["test"]))


def _bugs(shards: list[_Shard], rank: Any) -> list[dict[str, Any]]:
    """One entry per bug (by key): the shrink of the test that comes first in the collection (an
    unsharded session shrinks a bug in the first test failing with it), with every shard's tests
    failing with it."""
    by_key: dict[str, dict[str, Any]] = {}
    for shard in shards:
        for bug in shard.report.get("bugs", []):
            known = by_key.get(bug["key"])
            if known is None:
                by_key[bug["key"]] = dict(bug, tests=sorted(bug["tests"], key=rank))
                continue
            tests = known["tests"] + [t for t in bug["tests"] if t not in known["tests"]]
            if rank(bug["test"]) < rank(known["test"]):
                known.update(bug)
            known["tests"] = sorted(tests, key=rank)
    return sorted(by_key.values(), key=lambda b: rank(b["test"]))
