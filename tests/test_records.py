"""Per-trial records (agentprop._decide.records): written as trials end, read
back, decided again."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import CheckResult, OracleSettings, TrialRecord, adecide
from agentprop._decide.records import (
    RECORDS_FILE,
    TRACES_FILE,
    DecisionEnd,
    DecisionStart,
    Recorder,
    TrialLine,
    read_records,
    recompute,
    record_scope,
    recording,
)
from agentprop._modelapi.budget import Budget
from agentprop._scenario.trace import RunError, Trace
from agentprop.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"


def _agent(
    rate: float, seed: int, *, broken_at: int | None = None
) -> Callable[[int], Awaitable[Trace]]:
    """A simulated agent passing with probability ``rate`` (seeded per trial); ``broken_at``: that
    trial meets an error that is not the agent's."""

    async def run(i: int) -> Trace:
        errors = (
            [RunError(kind="cache_miss", message="no cached response")] if i == broken_at else []
        )
        ok = random.Random(seed * 7919 + i).random() < rate
        return Trace(
            case_id="sim", trial=i, agent="ok" if ok else "bad", errors=errors, duration_s=0.01
        )

    return run


def _judge(trace: Trace) -> TrialRecord:
    if trace.agent == "ok":
        return TrialRecord(passed=True, checks=2)
    return TrialRecord(
        passed=False,
        signature="sim:fail",
        explanation="failed",
        checks=2,
        failed_checks=("sim:fail",),
    )


SETTINGS = [
    OracleSettings(mode="sprt", tau=0.9),
    OracleSettings(mode="sprt", tau=0.9, max_runs=12),
    OracleSettings(mode="zero-failure", tau=1.0, runs=20),
    OracleSettings(mode="fixed", runs=7, tau=0.8),
    OracleSettings(mode="zero-failure", tau=1.0, runs=30, screen=2),
]


def _decide_all(directory: Path) -> list[CheckResult]:
    """Seeded decisions of known true rates under every mode, with and without a budget, one
    trial at a time and four in flight, some stopped by an infrastructure error; recorded."""
    results: list[CheckResult] = []

    async def go() -> None:
        seed = 0
        for settings in SETTINGS:
            for rate in (1.0, 0.93, 0.6, 0.2):
                for width in (1, 4):
                    for limit in (None, 5):
                        seed += 1
                        results.append(
                            await adecide(
                                _agent(rate, seed, broken_at=3 if seed % 11 == 0 else None),
                                settings,
                                judge=_judge,
                                name=f"case {seed}",
                                memo=TrialMemo(),
                                input_digest=f"input {seed}",
                                fingerprint="agent",
                                budget=Budget(max_runs=limit) if limit is not None else None,
                                concurrency=width,
                            )
                        )

    recorder = Recorder(directory)
    with recording(recorder), record_scope(kind="SIM"):
        asyncio.run(go())
    recorder.close()
    return results


def test_recompute_from_the_records_gives_every_live_decision(tmp_path: Path) -> None:
    results = _decide_all(tmp_path)
    records = list(read_records(tmp_path))
    starts = [r for r in records if isinstance(r, DecisionStart)]
    assert [s.case for s in starts] == [r.name for r in results] and {s.kind for s in starts} == {
        "SIM"
    }
    again = recompute(records)
    live = [(r.verdict, r.decided_by, r.runs, r.passes) for r in results]
    assert [
        (
            again[s.decision].verdict,
            again[s.decision].decided_by,
            again[s.decision].runs,
            again[s.decision].passes,
        )
        for s in starts
    ] == live
    # the simulation reaches every way a decision ends: it would prove little otherwise
    assert {v for v, *_ in live} == {"PASS", "FAIL", "UNSTABLE", "INCONCLUSIVE"}
    assert {"budget", "infrastructure", "screen"} <= {by for _, by, *_ in live}
    statuses = {r.status for r in records if isinstance(r, TrialLine)}
    assert {"started", "refused", "infrastructure", "beyond"} <= statuses
    ends = {r.decision: r for r in records if isinstance(r, DecisionEnd)}
    assert [(ends[s.decision].verdict, ends[s.decision].runs) for s in starts] == [
        (v, n) for v, _, n, _ in live
    ]


def test_a_trial_line_says_what_the_run_did_and_names_its_trace(tmp_path: Path) -> None:
    _decide_all(tmp_path)
    records = list(read_records(tmp_path))
    failed = next(r for r in records if isinstance(r, TrialLine) and r.passed is False)
    assert (failed.signature, failed.failed_checks, failed.checks, failed.status) == (
        "sim:fail",
        ["sim:fail"],
        2,
        "started",
    )
    assert failed.duration_s == 0.01 and failed.trace is not None
    traces = {
        json.loads(line)["id"]: json.loads(line)["trace"]
        for line in (tmp_path / TRACES_FILE).read_text().splitlines()
    }
    assert traces[failed.trace]["trial"] == failed.trial and traces[failed.trace]["agent"] == "bad"
    refused = next(r for r in records if isinstance(r, TrialLine) and r.status == "refused")
    assert refused.passed is None and refused.trace is None


def test_reading_skips_a_torn_last_line_and_names_a_bad_line_elsewhere(tmp_path: Path) -> None:
    _decide_all(tmp_path)
    file = tmp_path / RECORDS_FILE
    whole = list(read_records(tmp_path))
    with open(file, "a") as f:
        f.write('{"type":"trial","decision":1,"case":"case 1","tri')  # the run was killed mid-line
    assert list(read_records(file)) == whole
    lines = file.read_text().splitlines()
    lines[2] = '{"type": "trial", "nonsense": true}'
    file.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"{RECORDS_FILE}:3: not a record of agentprop.trials/1"):
        list(read_records(file))


def test_each_record_is_on_disk_as_soon_as_its_trial_ends(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    seen: list[int] = []

    async def run(i: int) -> Trace:
        # every earlier trial is already readable by another reader (a killed run keeps it)
        seen.append(sum(isinstance(r, TrialLine) for r in read_records(tmp_path)))
        return Trace(trial=i, agent="ok")

    with recording(recorder):
        asyncio.run(
            adecide(run, OracleSettings(mode="fixed", runs=4), judge=_judge, name="flushed")
        )
    assert seen == [0, 1, 2, 3]
    recorder.close()


def test_agentprop_run_records_reproduce_its_mft_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    report_path, records_dir = tmp_path / "report.json", tmp_path / "records"
    argv = [
        "run",
        str(SUPPORTOPS),
        "--case",
        "N7",
        "--kinds",
        "mft",
        "--fault",
        "skip_auth=0.3",
        "--corpus",
        "none",
    ]
    code = main(
        [*argv, "--json", str(report_path), "--records", str(records_dir)],
        out=out,
        err=io.StringIO(),
    )
    assert code == 1, out.getvalue()
    assert f"trial records written to {records_dir / RECORDS_FILE}" in out.getvalue()
    records = list(read_records(records_dir))
    again = recompute(records)
    last = {
        r.case: r.decision
        for r in records
        if isinstance(r, DecisionStart) and r.kind == "MFT" and r.stage == "final"
    }
    cases = [c for c in json.loads(report_path.read_text())["cases"] if c["kind"] == "MFT"]
    assert cases and {c["verdict"] for c in cases} == {"PASS", "FAIL"}
    assert [(again[last[c["id"]]].verdict, again[last[c["id"]]].runs) for c in cases] == [
        (c["verdict"], c["runs"]) for c in cases
    ]


def test_records_dir_that_cannot_be_written_is_an_input_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    err = io.StringIO()
    code = main(
        [
            "run",
            str(SUPPORTOPS),
            "--case",
            "N7",
            "--kinds",
            "mft",
            "--records",
            str(blocker / "sub"),
        ],
        out=io.StringIO(),
        err=err,
    )
    assert (
        code == 2
        and "--records" in err.getvalue()
        and "give a directory you can write to" in err.getvalue()
    )


def test_the_files_of_processes_sharing_a_directory_read_as_one(tmp_path: Path) -> None:
    """pytest-xdist workers record into one directory, a file each (``trials-gw0.jsonl`` ...):
    read together, every decision keeps its own number, its trials and the check naming it, and
    decides again as it was decided."""
    from agentprop._decide.records import CheckLine
    from agentprop._decide.session import Session

    decided: dict[str, CheckResult] = {}
    for part, rate in (("gw0", 0.95), ("gw1", 0.3)):
        recorder, session = Recorder(tmp_path, part), Session()
        with recording(recorder):
            for k in (1, 2):
                name = f"{part} case {k}"
                result = asyncio.run(adecide(_agent(rate, k), SETTINGS[0], judge=_judge, name=name))
                session.record(f"test_{part}", result)
                decided[name] = result
        recorder.close()
    assert sorted(p.name for p in tmp_path.glob("trials*.jsonl")) == [
        "trials-gw0.jsonl",
        "trials-gw1.jsonl",
    ]
    records = list(read_records(tmp_path))
    starts = {r.decision: r.case for r in records if isinstance(r, DecisionStart)}
    assert sorted(starts.values()) == sorted(decided) and len(starts) == 4  # no number reused
    checks = [r for r in records if isinstance(r, CheckLine)]
    assert [(c.test, c.case) for c in checks] == [
        ("test_gw0", "gw0 case 1"),
        ("test_gw0", "gw0 case 2"),
        ("test_gw1", "gw1 case 1"),
        ("test_gw1", "gw1 case 2"),
    ]
    again = recompute(records)
    for check in checks:
        assert check.decision is not None and starts[check.decision] == check.case
        result = decided[check.case]
        assert (again[check.decision].verdict, again[check.decision].runs) == (
            result.verdict,
            result.runs,
        )
    # a reader of one file sees that process's numbers, as it wrote them
    assert {r.decision for r in read_records(tmp_path / "trials-gw1.jsonl")} == {1, 2}


class _Config:
    """What the pytest plugin reads of a session's config: its options."""

    def __init__(self, options: dict[str, object]) -> None:
        self.options = options

    def getoption(self, name: str) -> object:
        return self.options.get(name)


def test_the_cli_and_the_pytest_plugin_check_a_records_dir_by_one_rule(tmp_path: Path) -> None:
    """``agentprop run --records`` and ``pytest --agentprop-records`` refuse the same
    directories in the same words, each naming its own options: one check, not two that
    drift apart (the plugin's said less, in another shape)."""
    import argparse

    from agentprop import pytest_plugin
    from agentprop._cli.run import check_records_args

    used = tmp_path / "records"
    used.mkdir()
    (used / RECORDS_FILE).write_text("{}\n")

    def plugin_says(records: str | None, replace: bool) -> str:
        options = {"--agentprop-records": records, "--agentprop-replace-records": replace}
        with pytest.raises(pytest.UsageError) as refused:
            pytest_plugin._check_records_dir(_Config(options))  # type: ignore[arg-type]
        return str(refused.value)

    def cli_says(records: str | None, replace: bool) -> str:
        args = argparse.Namespace(records=records, replace_records=replace, top_up_shards=None)
        with pytest.raises(InputError) as refused:
            check_records_args(args)
        return (
            str(refused.value)
            .replace("--replace-records", "--agentprop-replace-records")
            .replace("--records", "--agentprop-records")
            .replace("this run's", "this session's")
        )

    for records, replace in ((str(used), False), (None, True)):
        assert plugin_says(records, replace) == cli_says(records, replace)
    assert "fix: give an empty or new directory" in plugin_says(str(used), False)
    # replaced: the earlier records are deleted, and nothing else
    (used / "notes.txt").write_text("mine")
    options = {"--agentprop-records": str(used), "--agentprop-replace-records": True}
    pytest_plugin._check_records_dir(_Config(options))  # type: ignore[arg-type]
    assert sorted(p.name for p in used.iterdir()) == ["notes.txt"]


def test_a_records_dir_holding_an_earlier_run_is_refused_or_replaced(tmp_path: Path) -> None:
    """``--records`` appended to a directory an earlier run had used: the records of two runs
    read as one, and ``agentprop merge`` counted both. Such a directory is an input error
    naming it and the fix, unless ``--replace-records`` deletes the earlier records first."""
    records_dir = tmp_path / "records"
    argv = ["run", str(SUPPORTOPS), "--case", "N7", "--kinds", "mft", "--corpus", "none"]
    argv += ["--records", str(records_dir)]
    assert main(argv, out=io.StringIO(), err=io.StringIO()) == 0
    first = (records_dir / RECORDS_FILE).read_text()
    decisions = sum(isinstance(r, DecisionStart) for r in read_records(records_dir))
    assert decisions > 0
    (records_dir / "notes.txt").write_text("mine")

    err = io.StringIO()
    assert main(argv, out=io.StringIO(), err=err) == 2
    assert f"--records {records_dir}: the directory holds the records of an earlier run " in (
        err.getvalue()
    )
    assert "(traces.jsonl, trials.jsonl)" in err.getvalue()
    assert "give an empty or new directory, or pass --replace-records" in err.getvalue()
    assert (records_dir / RECORDS_FILE).read_text() == first  # nothing added

    out = io.StringIO()
    assert main([*argv, "--replace-records"], out=out, err=io.StringIO()) == 0, out.getvalue()
    assert sum(isinstance(r, DecisionStart) for r in read_records(records_dir)) == decisions
    assert (records_dir / "notes.txt").read_text() == "mine"  # not a record: kept

    err = io.StringIO()
    assert main([*argv[:-2], "--replace-records"], out=io.StringIO(), err=err) == 2
    assert "add --records DIR, or drop --replace-records" in err.getvalue()
