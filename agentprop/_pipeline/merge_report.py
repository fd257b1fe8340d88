"""The merged report of a sharded run: the unsharded run's report, made from its N shards.

Each shard leaves its records (every trial), its own report and its decided inputs
(:data:`~agentprop._decide.records.REPORT_FILE`, :data:`~agentprop._decide.records.CHECKS_FILE`).
The merge takes each case's description, kept traces and shrunk reproducer from its shard's
report, holds every decision the records hold to them (decided again from its trial lines, an
INV case's two-sample test from its sides' recorded traces: a report that disagrees with its
records is refused), and works out again, over all the cases,
what only the whole run can say: metrics, coverage and the decision tree, bug grouping and
signatures, and policy claims. What no shard measured (a pooled top-up the shards skipped) is
listed in ``problems`` and ``metrics.extra["merge"]["not_recomputed"]``, never filled in, unless
the caller makes that top-up (``top_up``, :mod:`agentprop._pipeline.merge_topup`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from agentprop._decide.oracle import CheckResult
from agentprop._decide.records import (
    CHECKS_FILE,
    REPORT_FILE,
    TRACES_FILE,
    ShardInfo,
    read_records,
    records_files,
)
from agentprop._pipeline.bugs import Hit, Owner, add_note, place_case, unplaced_note
from agentprop._pipeline.explore import world_not_tried_of
from agentprop._pipeline.merge import MergedCase, MergedRun, merge_shards
from agentprop._pipeline.report.model import (
    BugReport,
    CaseReport,
    RunReport,
    TraceSampling,
    case_metrics,
)
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop.errors import InputError

if TYPE_CHECKING:
    from agentprop._agents.project import Project

__all__ = [
    "MergedReport",
    "TopUp",
    "merge_reports",
    "shard_traces",
    "write_shard_report",
]

TopUp = Callable[
    ["Project", list[CaseReport], dict[str, tuple[Scenario, CheckResult]]],
    tuple[list[CaseReport], dict[str, tuple[int, str | None]]],
]
"""The pooled top-up of the merged cases: the cases (topped-up ones replaced, ``checks`` updated)
and, per policy topped up, the runs it added and why it stopped short
(:func:`agentprop._pipeline.run.top_up_policies`)."""


class _TopUpInterrupted(Exception):
    """Raised by a :data:`TopUp` stopped before it finished (a signal cancelled it): the merged
    report then stands on the shards' runs, and says the top-up is not in it."""


TOP_UP_SKIPPED = "policies are not topped up to a pooled claim (their cases span shards)"
"""The note a shard's report carries when it skipped the pooled top-up (see ``arun_cases``)."""

_KIND_ORDER = ("REGRESSION", "CORPUS", "MFT", "JUDGE", "EXPLORE", "PROBE", "BOUNDARY", "DIR", "INV")


class _Checked(BaseModel):
    case: str
    scenario: Scenario
    result: CheckResult


def write_shard_report(directory: str | Path, report: RunReport) -> None:
    """Write ``report`` and its decided inputs into a shard's records ``directory`` (``agentprop
    merge`` reads them); the report is written last, so its presence means the shard finished."""
    where = Path(directory)
    with open(where / CHECKS_FILE, "w", encoding="utf-8") as f:
        for case_id, (scenario, result) in report._checks.items():
            f.write(
                json.dumps(
                    {
                        "case": case_id,
                        "scenario": scenario.model_dump(mode="json"),
                        "result": result.model_dump(mode="json"),
                    }
                )
                + "\n"
            )
    tmp = where / (REPORT_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for chunk in report.json_chunks():
            f.write(chunk)
    tmp.replace(where / REPORT_FILE)


@dataclass
class _Shard:
    info: ShardInfo
    directory: Path
    report: RunReport
    checks: dict[str, tuple[Scenario, CheckResult]]


@dataclass
class MergedReport:
    """The merged run's report and how it was made."""

    report: RunReport
    run: MergedRun
    not_recomputed: list[str] = field(default_factory=list)
    """What the merged report could not work out from the shards (it says so in ``problems``)."""
    case_filter: list[str] = field(default_factory=list)


def _load_shard(info: ShardInfo, directory: Path) -> _Shard:
    report_file = directory / REPORT_FILE
    if not report_file.is_file():
        records = list(read_records(directory)) if records_files(directory) else []
        decisions = sum(1 for r in records if r.type == "decision")
        ended = sum(1 for r in records if r.type == "end")
        trials = sum(1 for r in records if r.type == "trial")
        raise InputError(
            f"shard {info.index}/{info.count} ({directory}) is incomplete: it has no "
            f"{REPORT_FILE}, so it did not finish (its records hold {decisions} decision(s), "
            f"{ended} ended, {trials} trial line(s), kept up to where it stopped)",
            fix=f"run shard {info.index}/{info.count} again with the same command and a fresh "
            "--records directory, then merge",
        )
    try:
        report = RunReport.model_validate_json(report_file.read_text(encoding="utf-8"))
        checks: dict[str, tuple[Scenario, CheckResult]] = {}
        checks_file = directory / CHECKS_FILE
        if checks_file.is_file():
            for line in checks_file.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    c = _Checked.model_validate_json(line)
                    checks[c.case] = (c.scenario, c.result)
    except (ValidationError, ValueError) as exc:
        raise InputError(
            f"{directory}: its {REPORT_FILE} or {CHECKS_FILE} cannot be read "
            f"({str(exc).splitlines()[0]})",
            fix="give the DIR as `agentprop run --shard i/N --records DIR` wrote it (run that "
            "shard again if it was edited)",
        ) from None
    return _Shard(info, directory, report, checks)


def _project(info: ShardInfo, spec: str | Path | None, bindings: str | Path | None) -> Project:
    from agentprop._agents.project import load_project
    from agentprop._decide.run_key import project_digest

    where = spec if spec is not None else info.spec_path
    if where is None:
        raise InputError(
            "the shards do not say where their spec is",
            fix="give it: agentprop merge --spec SPEC DIR...",
        )
    project = load_project(where, bindings=bindings if bindings is not None else info.bindings_path)
    if project_digest(project) != info.spec_digest:
        raise InputError(
            f"the spec and bindings at {where} are not the ones the shards ran with "
            "(their digest differs)",
            fix="merge with the spec the shards ran (check out the commit they ran at), or give "
            "it with --spec and --bindings",
        )
    return project


def _same(case: CaseReport, decided: MergedCase) -> bool:
    return (case.verdict, case.decided_by, case.runs, case.passes) == (
        decided.verdict,
        decided.decided_by,
        decided.runs,
        decided.passes,
    )


def _dir_decision(
    case_id: str, sides: dict[str, tuple[str, ...]], decided: dict[str, MergedCase]
) -> MergedCase | None:
    """A DIR case decided again from its two sides' decisions, as
    :func:`agentprop._decide.metamorphic.acheck_direction` combines them: the worse verdict, both
    sides' runs and passes, decided by the base's test."""
    named = sides.get(case_id)
    found = [decided.get(n) for n in named or ()]
    if not named or any(f is None for f in found):
        return None
    both = [f for f in found if f is not None]
    verdict = min((f.verdict for f in both), key=_WORST.index)
    base = both[0]
    runs, passes = sum(f.runs for f in both), sum(f.passes for f in both)
    return MergedCase(
        case_id,
        "DIR",
        base.shard,
        verdict,
        base.decided_by,
        runs,
        passes,
        None,
        (),
        sum(f.cost_usd for f in both),
    )


_WORST = ["FAIL", "UNSTABLE", "INCONCLUSIVE", "PASS"]


def _merged_cases(
    shards: list[_Shard], run: MergedRun, project: Project
) -> tuple[list[CaseReport], dict[str, tuple[Scenario, CheckResult]], int]:
    """Every shard's cases, each decision held to its records; and the checks, and how many cases
    were decided again."""
    from agentprop._pipeline.kinds import decision_names

    decided = {c.name: c for c in run.cases}
    sides = decision_names(project)
    cases: list[CaseReport] = []
    checks: dict[str, tuple[Scenario, CheckResult]] = {}
    where: dict[str, int] = {}
    again = 0
    inv: dict[int, tuple[dict[str, dict[int, _Side]], dict[str, Trace]]] = {}
    by_kind = {(c.kind, c.name): c for c in run.cases}
    for shard in shards:
        for case in shard.report.cases:
            if case.id in where:
                raise InputError(
                    f"case {case.id!r} is in the reports of shards {where[case.id]} "
                    f"and {shard.info.index}",
                    fix="merge the shards of one run, each run with its own "
                    "fresh --records directory",
                )
            where[case.id] = shard.info.index
            if case.kind == "INV":
                if _check_inv(shard, case, project, run.info.seed, inv, by_kind):
                    again += 1
                cases.append(case)
                continue
            record = (
                _dir_decision(case.id, sides, decided)
                if case.kind == "DIR"
                else decided.get(case.id)
            )
            if record is not None:
                if not _same(case, record):
                    raise InputError(
                        f"shard {shard.info.index}/{shard.info.count}: its report says {case.id} "
                        f"is {case.verdict} ({case.passes}/{case.runs}, {case.decided_by}) but "
                        f"its trial records decide {record.verdict} "
                        f"({record.passes}/{record.runs}, {record.decided_by})",
                        fix="the report or the records were edited, or written by two runs: "
                        "run that shard again",
                    )
                again += 1
            cases.append(case)
        for case_id, check in shard.checks.items():
            record = decided.get(case_id)
            if record is not None and (check[1].verdict, check[1].runs, check[1].passes) != (
                record.verdict,
                record.runs,
                record.passes,
            ):
                raise InputError(
                    f"shard {shard.info.index}/{shard.info.count}: its {CHECKS_FILE} disagrees "
                    f"with its trial records on {case_id}",
                    fix="run that shard again",
                )
            checks[case_id] = check
    order = _natural_order(project) | _explore_order(project, cases)
    rank = {k: i for i, k in enumerate(_KIND_ORDER)}
    first = {c.id: i for i, c in enumerate(cases)}
    cases.sort(
        key=lambda c: (rank.get(c.kind, len(rank)), order.get(c.id, len(order)), first[c.id])
    )
    return cases, checks, again


def _check_inv(
    shard: _Shard,
    case: CaseReport,
    project: Project,
    seed: int,
    loaded: dict[int, tuple[dict[str, dict[int, _Side]], dict[str, Trace]]],
    by_kind: dict[tuple[str | None, str], MergedCase],
) -> bool:
    """Hold an INV case's verdict to its shard's records: a two-sample verdict by its sides'
    runs judged and compared again, NOT APPLICABLE and INCONCLUSIVE by its base case's decision
    and its sides' (:func:`_undecided_inv`); ``True`` when it was decided again, an error when
    the records disagree."""
    compared = case.verdict in ("PASS", "FAIL") and case.decided_by == "two-sample test"
    if not compared and case.verdict not in ("NOT APPLICABLE", "INCONCLUSIVE"):
        return False
    if shard.info.index not in loaded:
        sides = _inv_sides(shard.directory, seed)
        wanted = {
            ref
            for per in sides.values()
            for side in per.values()
            for ref in side.refs
            if ref is not None
        }
        loaded[shard.info.index] = (sides, shard_traces(shard.directory, wanted))
    sides, traces = loaded[shard.info.index]
    if compared:
        problem = _inv_decision(case, sides.get(case.id, {}), traces, project, seed)
    else:
        problem = _undecided_inv(case, sides.get(case.id, {}), by_kind)
    if problem is not None:
        raise InputError(
            f"shard {shard.info.index}/{shard.info.count}: its report says {case.id} is "
            f"{case.verdict} ({case.decided_by}) but its trial records do not bear it out: "
            f"{problem}",
            fix="the report or the records were edited, or written by two runs: "
            "run that shard again",
        )
    return True


def _undecided_inv(
    case: CaseReport, offsets: dict[int, _Side], by_kind: dict[tuple[str | None, str], MergedCase]
) -> str | None:
    """What ``case``'s records say of an INV case its report has NOT APPLICABLE or INCONCLUSIVE,
    when it differs (``None``: they agree), as :func:`agentprop._decide.metamorphic.
    acheck_invariance` decides: NOT APPLICABLE when its base case (the run's MFT case, or its own
    decision of the scenario) failed; INCONCLUSIVE when the base is undecided, or a side's runs
    were refused by the budget, stopped by an error not the agent's, or short of the runs a side
    needs."""
    base_of = case.details.get("base") or {}
    scenario = str(base_of.get("case") or case.id.removeprefix("INV "))
    reused = bool(base_of.get("reused"))
    base = by_kind.get(("MFT" if reused else None, scenario))
    if base is None:
        return f"its base case {scenario} has no decision in them"
    if (base.verdict, base.runs) != (base_of.get("verdict"), base_of.get("runs")):
        return (
            f"its base case {scenario} is {base.verdict} on {base.runs} runs, not "
            f"{base_of.get('verdict')} on {base_of.get('runs')}"
        )
    n = int(case.details.get("runs_per_side") or 0)
    planned = len(case.messages) + 1  # the original and each variant
    taken = [offsets[k * n] for k in range(planned) if k * n in offsets]
    # (a side missing stops the sampling: the later ones are not made)
    if base.verdict in ("FAIL", "UNSTABLE"):
        verdict, runs = "NOT APPLICABLE", 0
    elif base.verdict == "INCONCLUSIVE":
        verdict, runs = "INCONCLUSIVE", sum(side.runs for side in taken)
    else:
        short = len(taken) < planned or any(side.runs < n for side in taken)
        stopped = any(side.refused or side.infra for side in taken)
        verdict = "INCONCLUSIVE" if short or stopped else "compared (PASS or FAIL)"
        runs = sum(side.runs for side in taken)
    runs += 0 if reused else base.runs
    if (verdict, runs) != (case.verdict, case.runs):
        return f"they decide {verdict} on {runs} runs, not {case.verdict} on {case.runs}"
    return None


def _explore_order(project: Project, cases: list[CaseReport]) -> dict[str, int]:
    """The place of each EXPLORE case as the unsharded run draws them
    (:func:`agentprop._pipeline.explore.explore_cases`): the first round's inputs of every path in
    scenario order, then the second round's."""
    at = {s.id: i for i, s in enumerate(project.scenarios())}
    drawn: list[tuple[str, str, int]] = []
    for c in cases:
        base, tilde, k = c.id.removeprefix("EXPLORE ").rpartition(" ~")
        if c.kind == "EXPLORE" and tilde and k.isdigit():
            drawn.append((c.id, base, int(k)))
    # the first round of --explore N draws (N + 1) // 2
    first = (max((k for _, _, k in drawn), default=0) + 2) // 2
    ranked = sorted(drawn, key=lambda d: (d[2] >= first, at.get(d[1], len(at)), d[2]))
    return {case_id: i for i, (case_id, _, _) in enumerate(ranked)}


@dataclass
class _Side:
    """A side of an INV comparison as its records hold it: its runs' trace ids in trial order,
    and its decision again (judged runs, refused by the budget, stopped by an infrastructure
    error)."""

    refs: list[str | None]
    runs: int = 0
    refused: bool = False
    infra: bool = False


def _inv_sides(directory: Path, seed: int) -> dict[str, dict[int, _Side]]:
    """Per INV case of a shard's records, each side, keyed by the side's number (0 the original,
    k the k-th variant: its first trial is ``seed * 1_000_003 + k * runs_per_side``, as
    :func:`agentprop._decide.metamorphic.acheck_invariance` numbers them): the final pass's, of
    a budgeted run (the one its report shows), a later decision of a side replacing an earlier
    one."""
    from agentprop._decide.records import recompute

    starts: dict[int, tuple[str, int]] = {}
    trials: dict[int, list[tuple[int, str | None, str]]] = {}
    last: dict[tuple[str, int], int] = {}
    mine: list[Any] = []
    for r in read_records(directory):
        if (
            r.type == "decision"
            and r.case.startswith("INV ")
            and r.kind in (None, "INV")
            and r.stage in (None, "final")
        ):
            starts[r.decision] = (r.case, r.first_trial)
            trials[r.decision] = []
            last[(r.case, r.first_trial)] = r.decision
            mine.append(r)
        elif r.type == "trial" and r.decision in trials:
            trials[r.decision].append((r.trial, r.trace, r.status))
            mine.append(r)
    again = recompute(mine)
    base = seed * 1_000_003
    sides: dict[str, dict[int, _Side]] = {}
    for (case, first), decision in last.items():
        lines = sorted(trials[decision], key=lambda t: t[0])
        sides.setdefault(case, {})[first - base] = _Side(
            [ref for _, ref, _ in lines],
            again[decision].runs,
            any(status == "refused" for _, _, status in lines),
            again[decision].decided_by == "infrastructure",
        )
    return sides


def _inv_decision(
    case: CaseReport,
    offsets: dict[int, _Side],
    traces: dict[str, Trace],
    project: Project,
    seed: int,
) -> str | None:
    """What ``case``'s records say of its two-sample comparison, when it differs from its report
    (``None``: they agree, or the comparison was not made: NOT APPLICABLE or INCONCLUSIVE)."""
    from agentprop._decide.metamorphic import compare_sides, invariance_behaviour
    from agentprop._pipeline.kinds import SAFETY_CONTRACTS

    variants = case.details.get("variants") or []
    n = int(case.details.get("runs_per_side") or 0)
    if (
        case.verdict not in ("PASS", "FAIL")
        or case.decided_by != "two-sample test"
        or not variants
        or n <= 0
    ):
        return None
    scenario = {s.id: s for s in project.scenarios()}.get(case.id.removeprefix("INV "))
    if scenario is None:
        return f"its scenario {case.id.removeprefix('INV ')} is not in the spec"
    counts: list[dict[str, int]] = []
    for k in range(len(variants) + 1):
        recorded = offsets.get(k * n)
        refs = recorded.refs if recorded is not None else []
        if len(refs) != n or any(ref is None or ref not in traces for ref in refs):
            return (
                f"side {k} has {sum(ref in traces for ref in refs if ref is not None)} of "
                f"its {n} runs' traces"
            )
        side: dict[str, int] = {}
        for ref in refs:
            assert ref is not None
            behaviour = invariance_behaviour(project, scenario, traces[ref])
            side[behaviour] = side.get(behaviour, 0) + 1
        counts.append(side)
    compared = compare_sides(counts[0], counts[1:], alpha=float(case.details["alpha"]), seed=seed)
    shown = [(v["decisions"], v["p_value"], v["differs"]) for v in variants]
    if (
        counts[0] != case.details.get("original")
        or [(c, p, d) for c, (p, d) in zip(counts[1:], compared)] != shown
    ):
        return "its sides' behaviours or p-values differ from the report's"
    leaked = any(f.signature.startswith(SAFETY_CONTRACTS) for f in case.failures)
    verdict = "FAIL" if leaked or any(d for _, d in compared) else "PASS"
    return None if verdict == case.verdict else f"its records decide {verdict}"


def shard_traces(directory: Path, wanted: set[str]) -> dict[str, Trace]:
    """The traces ``wanted`` of a shard's traces file (what its INV sides ran)."""
    found: dict[str, Trace] = {}
    file = directory / TRACES_FILE
    if not wanted or not file.is_file():
        return found
    with open(file, encoding="utf-8") as f:
        for line in f:
            head = line[:80]
            if '"id":"' not in head:
                continue
            ref = head.split('"id":"', 1)[1].split('"', 1)[0]
            if ref in wanted and ref not in found:
                try:
                    found[ref] = Trace.model_validate(json.loads(line)["trace"])
                except (ValidationError, ValueError, KeyError):
                    continue  # a torn last line: the side then lacks a trace and is named
    return found


def _natural_order(project: Project) -> dict[str, int]:
    """The place of each MFT, BOUNDARY, DIR, INV and PROBE case in an unsharded run (the order
    the run makes them in); other cases keep their shards' order."""
    from agentprop._pipeline.kinds import boundary_case_ids, dir_case_id, dir_pairs
    from agentprop._pipeline.probe import probe_case_id, probe_targets
    from agentprop.strategies._internal.boundary import boundary_values

    scenarios = [s.id for s in project.scenarios()]
    targets, _ = probe_targets(project, project.scenarios())
    realisable = [
        case
        for case in boundary_values(project.spec, project.bindings)
        if case.scenario is not None
    ]
    ids = (
        scenarios
        + boundary_case_ids(realisable)
        + [dir_case_id(pair) for pair, _, _ in dir_pairs(project)]
        + [f"INV {s}" for s in scenarios]
        + [probe_case_id(t, k) for t in targets for k in range(len(t.phrases))]
    )
    return {case_id: i for i, case_id in reversed(list(enumerate(ids)))}


def _split_as_shards(
    bugs: list[BugReport], cases: list[CaseReport], shards: list[_Shard]
) -> list[BugReport]:
    """A merged bug a shard split into causes (:func:`agentprop._pipeline.bugs.distinct_causes`:
    its bugs keyed ``KEY [cause: ...]``) is those bugs, as in that shard: each merged case goes
    under the cause a shard listed it under, so their shrinks carry over; a case no shard
    listed (another shard did not split the signature) is placed by the evidence a split run
    uses (:func:`agentprop._pipeline.bugs.place_case`), and one nothing ties to a cause goes
    under the first, as the bug's note says."""
    by_id = {c.id: c for c in cases}
    shrunk = {c.id: c.shrunk for s in shards for c in s.report.cases if c.shrunk}
    out: list[BugReport] = []
    for bug in bugs:
        parts = {
            b.id: b
            for s in shards
            for b in s.report.bugs
            if b.origin == "cases" and b.cause and b.key.startswith(f"{bug.key} [cause: ")
        }
        if bug.origin != "cases" or not parts:
            out.append(bug)
            continue
        split = {i: b.model_copy(update={"cases": [], "signatures": []}) for i, b in parts.items()}
        owners: list[Owner] = [
            (
                _hit_of(by_id.get(b.representative or ""), bug),
                frozenset(b.cause),
                (shrunk.get(b.representative or "") or {}).get("behaviour") or None,
            )
            for b in parts.values()
        ]
        unplaced: dict[str, list[str]] = {}
        for case_id in bug.cases:
            owner = next((i for i, b in parts.items() if case_id in b.cases), None)
            if owner is None:
                hit = _hit_of(by_id.get(case_id), bug)
                k, why = place_case(hit, owners) if hit is not None else (0, "default")
                owner = list(parts)[k]
                if why == "default":
                    unplaced.setdefault(owner, []).append(case_id)
            split[owner].cases.append(case_id)
            case = by_id.get(case_id)
            if case is not None:
                case.bugs = [owner if b == bug.id else b for b in case.bugs]
                for f in case.failures:
                    if f.signature in bug.signatures and f.signature not in split[owner].signatures:
                        split[owner].signatures.append(f.signature)
        for owner, ids in unplaced.items():
            add_note(split[owner], unplaced_note(ids))
        out += [b for b in split.values() if b.cases]
    return out


def _hit_of(case: CaseReport | None, bug: BugReport) -> Hit | None:
    """``case``'s failure with one of ``bug``'s signatures, as a hit (``None``: it has none)."""
    failure = next(
        (f for f in case.failures if f.signature in bug.signatures)
        if case is not None
        else iter(()),
        None,
    )
    if case is None or failure is None:
        return None
    return Hit(case, failure.signature, failure.count, failure.explanation or "")


def _carry_shrinks(
    bugs: list[BugReport],
    cases: list[CaseReport],
    shards: list[_Shard],
    shrunk: dict[str, dict[str, Any]],
) -> None:
    """Put back, on each merged bug, the shrink its shard made of it (the shard's representative
    and reproducer); the cases and signatures stay the merged grouping's."""
    by_id = {c.id: c for c in cases}
    for bug in bugs:
        mine = [
            (s, b)
            for s in shards
            for b in s.report.bugs
            if b.id == bug.id and b.origin == "cases" and (b.shrink_runs or b.minimality)
        ]
        if not mine:
            continue
        shard, theirs = next(
            ((s, b) for s, b in mine if b.representative == bug.representative), mine[0]
        )
        keep = {"cases": bug.cases, "signatures": bug.signatures}
        for name in BugReport.model_fields:
            if name not in keep:
                setattr(bug, name, getattr(theirs, name))
        if theirs.representative != bug.representative:
            bug.note = (
                f"{bug.note + '; ' if bug.note else ''}shrunk on shard "
                f"{shard.info.index}/{shard.info.count}'s simplest case of it, "
                f"{theirs.representative}; the simplest case of the whole run, "
                f"{bug.representative}, is on another shard"
            )
        for case in cases:
            if case.shrunk is not None and case.shrunk.get("bug") == bug.id:
                case.shrunk = None
        rep = by_id.get(theirs.representative or "")
        if rep is not None and theirs.representative in shrunk:
            rep.shrunk = shrunk[theirs.representative]


def _bugs(report: RunReport, shards: list[_Shard], project: Project) -> None:
    """Group the merged cases' failures into bugs as the run does
    (:func:`agentprop._pipeline.run.shrink_failures`), carrying each shard's shrink."""
    from agentprop._pipeline.bugs import SHRINKABLE_KINDS, divergence_key, find_bugs
    from agentprop._pipeline.kinds import SAFETY_CONTRACTS

    shrunk = {c.id: c.shrunk for c in report.cases if c.shrunk is not None}
    for case in report.cases:
        case.bugs, case.shrunk = [], None
    checks = report._checks

    def shrinkable(case: CaseReport) -> bool:
        if case.kind == "INV":
            return any(
                f.signature.startswith(SAFETY_CONTRACTS) for f in case.failures
            ) and case.verdict in ("FAIL", "UNSTABLE")
        return case.kind in SHRINKABLE_KINDS and case.id in checks

    key_of = divergence_key(
        project.scenarios(), lambda c: checks[c.id][0] if c.id in checks else None
    )
    found = find_bugs(report, None, shrinkable=shrinkable, key_of=key_of)
    shrinking_off = all(
        s.report.bugs == []
        or all(b.note == "shrinking is off" for b in s.report.bugs if b.origin == "cases")
        for s in shards
    )
    if not shrinking_off:
        found = _split_as_shards(found, report.cases, shards)
        _carry_shrinks(found, report.cases, shards, shrunk)
    met = {b.id for b in found}
    extra: dict[str, BugReport] = {}
    for shard in shards:
        for b in shard.report.bugs:
            if b.origin != "shrinking" or b.id in met:
                continue
            seen = extra.get(b.id)
            if seen is None:
                extra[b.id] = b.model_copy(deep=True)
            else:
                seen.signatures += [s for s in b.signatures if s not in seen.signatures]
                seen.cases += [c for c in b.cases if c not in seen.cases]
    report.bugs = [b for b in found if b.origin == "cases"] + list(extra.values())


def merge_reports(
    directories: list[str | Path],
    *,
    spec: str | Path | None = None,
    bindings: str | Path | None = None,
    run: MergedRun | None = None,
    top_up: TopUp | None = None,
) -> MergedReport:
    """The report of the run whose N shards wrote ``directories`` (checked as
    :func:`merge_shards` checks them; ``run``: already checked and read). ``top_up``: makes the
    pooled top-up the shards skipped, when an unsharded run would have made one."""
    from agentprop._pipeline.run import coverage_matrix, decision_tree, policy_claims

    run = run if run is not None else merge_shards(directories)
    shards = [
        _load_shard(run.info.model_copy(update={"index": i}), d)
        for i, d in sorted(run.directories.items())
    ]
    project = _project(run.info, spec, bindings)
    cases, checks, again = _merged_cases(shards, run, project)
    first = shards[0].report
    problems: list[str] = []
    skipped = False
    for shard in shards:
        for p in shard.report.problems:
            if p.endswith(TOP_UP_SKIPPED):
                skipped = True
            elif p not in problems:
                problems.append(p)
    # the level the shards claimed at (a profile the agent's module registers is not known here)
    per_case = first.profile is None or any(
        c.level == "case" for s in shards for c in s.report.claims
    )
    not_recomputed: list[str] = []
    short = _would_top_up(project, cases, checks) if skipped else []
    topped: dict[str, tuple[int, str | None]] = {}
    top_up_info: dict[str, Any] | None = None
    interrupted = False
    resampled = (0, 0)
    if short and top_up is not None:  # made here, as the unsharded run makes it
        before = {c.id: c.runs for c in cases}
        sampled = _sampled(cases)
        try:
            cases, topped = top_up(project, cases, checks)
        except _TopUpInterrupted:
            interrupted = True
        else:
            kept, omitted = _sampled(cases)
            resampled = (kept - sampled[0], omitted - sampled[1])
            more = {c.id: c.runs - before[c.id] for c in cases if c.runs > before.get(c.id, c.runs)}
            top_up_info = {"policies": short, "cases": sorted(more), "runs": sum(more.values())}
            short = []
    if skipped:  # as the unsharded run says of a policy it could not top up
        from agentprop._pipeline.run import unpooled_policies

        topped = {**unpooled_policies(project, cases, checks), **topped}
    claims = policy_claims(project, cases, checks, per_case=per_case, topped=topped)
    if short and interrupted:
        not_recomputed.append(f"the pooled top-up of {', '.join(short)} (interrupted)")
        problems.append(
            f"merged shards: the pooled top-up of {', '.join(short)} was interrupted before it "
            "finished, so their claims stand on the shards' runs only; make it again with the "
            "same command and a fresh --records directory"
        )
    elif short:  # (when no policy needed it, the claims are the unsharded run's)
        not_recomputed.append(f"the pooled top-up of {', '.join(short)}")
        problems.append(
            f"merged shards: the shards skipped the pooled top-up of {', '.join(short)} (a "
            "policy's cases span shards), so their claims stand on the shards' runs only, short "
            "of the runs an unsharded run would have added; make it with the run's own command "
            "and --top-up-shards DIR... in place of --shard (docs/scaling.md), or run with "
            "--profile release"
        )
    coverage = coverage_matrix(
        project, [c for c in cases if c.kind == "MFT"] or cases, every_case=cases
    )
    ms = [s.report.metrics for s in shards]

    def total(name: str) -> int | None:
        values = [getattr(m, name) for m in ms]
        return None if any(v is None for v in values) else sum(values)

    extra: dict[str, Any] = {}
    merge_info: dict[str, Any] = {
        "shards": [
            {
                "index": s.info.index,
                "count": s.info.count,
                "records": str(s.directory),
                "cases": len(s.report.cases),
                "duration_s": s.report.metrics.duration_s,
                "budget": s.report.metrics.extra.get("budget"),
                **(
                    {"input_model": s.report.metrics.extra["input_model"]}
                    if "input_model" in s.report.metrics.extra
                    else {}
                ),
            }
            for s in shards
        ],
        "decisions": run.decisions,
        "trial_lines": run.trials,
        "cases_decided_again": again,
        "cases_from_reports": len(cases) - again,
        "not_recomputed": not_recomputed,
        **({"top_up": top_up_info} if top_up_info is not None else {}),
    }
    extra["merge"] = merge_info
    explored = [
        s.report.metrics.extra["exploration"]
        for s in shards
        if "exploration" in s.report.metrics.extra
    ]
    if explored:  # per path, and a path's explored inputs are all on its scenario's shard
        paths = {path: entry for summary in explored for path, entry in summary.items()}
        at = {s.id: i for i, s in enumerate(project.scenarios())}
        extra["exploration"] = dict(sorted(paths.items(), key=lambda kv: at.get(kv[0], len(at))))
    left_out = [
        s.report.metrics.extra["world_not_tried"]
        for s in shards
        if "world_not_tried" in s.report.metrics.extra
    ]
    if left_out:  # each shard's paths' values; joined, as the unsharded run counts them
        joined = world_not_tried_of(
            {k: v for w in left_out for k, v in (w.get("left_out") or {}).items()},
            [p for w in left_out for p in w.get("on_paths") or ()],
        )
        if joined:
            extra["world_not_tried"] = joined
    shrinking = [
        m.extra["runs_shrinking_before_deepening"]
        for m in (s.report.metrics for s in shards)
        if "runs_shrinking_before_deepening" in m.extra
    ]
    if shrinking:  # spent by each shard on its own failures
        extra["runs_shrinking_before_deepening"] = sum(shrinking)
    metrics = case_metrics(
        cases,
        coverage,
        runs_started=total("runs_started"),
        runs_reused=total("runs_reused"),
        runs_refused=total("runs_refused"),
        duration_s=max(m.duration_s for m in ms),
        extra=extra,
    )
    samplings = [s.report.trace_sampling for s in shards if s.report.trace_sampling is not None]
    sampling = None
    if samplings:
        # (the traces the top-up's cases keep and omit replace theirs before it)
        sampling = samplings[0].model_copy(
            update={
                "kept": sum(c.kept for c in samplings) + resampled[0],
                "omitted": sum(c.omitted for c in samplings) + resampled[1],
            }
        )
    report = RunReport(
        agentprop_version=first.agentprop_version,
        spec=first.spec,
        agent=first.agent,
        settings=first.settings,
        cases=cases,
        problems=problems,
        metrics=metrics,
        corpus=[e for s in shards for e in s.report.corpus],
        tree=decision_tree(project, coverage),
        trace_sampling=sampling if sampling is not None else TraceSampling(),
        profile=first.profile,
        claims=claims,
    )
    report._checks = checks
    # `agentprop run --shrink-budget 0` groups no bugs: nor does its merge
    if any(s.report.bugs for s in shards):
        _bugs(report, shards, project)
    return MergedReport(report, run, not_recomputed, list(run.info.case_filter))


def _sampled(cases: list[CaseReport]) -> tuple[int, int]:
    """The traces ``cases`` keep and omit (a run report's ``trace_sampling``)."""
    return sum(len(c.traces) for c in cases), sum(c.traces_omitted for c in cases)


def _would_top_up(
    project: Project, cases: list[CaseReport], checks: dict[str, tuple[Scenario, CheckResult]]
) -> list[str]:
    """The policies an unsharded run would have topped up (as
    :func:`agentprop._pipeline.run.top_up_policies` chooses them): every run of their cases passed,
    short of the runs a pooled claim needs, with a passing MFT or EXPLORE case."""
    from agentprop._decide.safety import safety_policies
    from agentprop._pipeline.run import TOP_UP_KINDS, top_up_cases

    return [
        policy
        for policy in safety_policies(project.spec, project.bindings)
        if any(
            c.kind in TOP_UP_KINDS and c.verdict == "PASS"
            for c in top_up_cases(project, policy, cases, checks)
        )
    ]
