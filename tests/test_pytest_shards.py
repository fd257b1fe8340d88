"""The shards of a pytest session merged: ``pytest --agentprop-shard i/N --agentprop-records DIR``
in separate processes (pytest-xdist ``-n 2`` inside one of them), then ``agentprop merge``,
against the same session run unsharded (its ``--agentprop-json``).

The project checks the supportops example's clean and faulty agents (some checks fail, a bug is
found by two tests, a test expects its failure) and has a derandomized Hypothesis test; memo and
corpus are off, so every process starts alike. The merged record must equal the unsharded one
check for check (verdicts, runs, pass rates, intervals, in order) and bug for bug (key, the test
it was shrunk in, its reproducer, the tests hit); only what a run's memo saved differs.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentprop._cli import main
from agentprop._decide.oracle import OracleSettings, TrialRecord, adecide
from agentprop._decide.records import (
    REPORT_FILE,
    CheckLine,
    DecisionLog,
    Recorder,
    read_records,
    recording,
)
from agentprop._decide.session import Session
from agentprop._pipeline.pytest_merge import (
    merge_pytest_shards,
    pytest_shard_info,
    write_collection,
)
from agentprop._pipeline.shards import Shard
from agentprop._scenario.trace import Trace

ROOT = Path(__file__).resolve().parents[1]

PROJECT = f"""
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import agentprop

EXAMPLE = Path({str(ROOT / "examples" / "supportops")!r})
project = agentprop.load_project(EXAMPLE)
IDS = [s.id for s in project.scenarios()][:8]


def agent(**faults):
    return agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, faults)


CLEAN = agent()
FAULTY = agent(skip_confirm=0.3, leak_pii=0.2)
FIXED = agentprop.settings(mode="fixed", runs=6)


@pytest.mark.parametrize("sid", IDS)
def test_clean(sid):
    agentprop.check(project, sid, CLEAN, settings=FIXED)


@pytest.mark.parametrize("sid", IDS)
def test_faulty(sid):
    agentprop.check(project, sid, FAULTY, settings=FIXED)


def test_expected_failure():
    with pytest.raises(agentprop.AgentPropertyViolation):
        agentprop.check(project, IDS[5], agent(skip_confirm=1.0), settings=FIXED)


@settings(derandomize=True, max_examples=3, database=None, deadline=None)
@given(st.sampled_from(IDS))
def test_drawn(sid):
    agentprop.check(project, sid, CLEAN, settings=FIXED)
"""

UNSEEDED = """
from pathlib import Path

from hypothesis import given, settings, strategies as st

import agentprop

EXAMPLE = Path({example!r})
project = agentprop.load_project(EXAMPLE)
IDS = [s.id for s in project.scenarios()][:4]
CLEAN = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)


@settings(max_examples=2, deadline=None)  # Hypothesis's example database on
@given(st.sampled_from(IDS))
def test_drawn(sid):
    agentprop.check(project, sid, CLEAN, settings=agentprop.settings(mode="fixed", runs=2))
"""


def _start(where: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    argv += ["--agentprop-memo", "none", "--agentprop-corpus", "none", *args]
    return subprocess.Popen(
        argv, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _ended(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = process.communicate(timeout=240)
    return process.returncode, out


def _pytest(where: Path, *args: str) -> tuple[int, str]:
    return _ended(_start(where, *args))


def _merge(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["merge", *argv], out=out, err=out)
    return code, out.getvalue()


def _decided(record: dict[str, Any]) -> dict[str, Any]:
    """What a session decided: all but what its memo saved (hits, and the sample traces'
    timings, which differ between any two runs)."""
    kept = {k: v for k, v in record.items() if k not in ("merge", "memo_hits", "results")}
    kept["results"] = [
        {
            "test": r["test"],
            **{k: v for k, v in r["result"].items() if k not in ("memo_hits", "sample_traces")},
        }
        for r in record["results"]
    ]
    return kept


@pytest.mark.slow  # 5 pytest sessions, one with two workers
def test_pytest_shards_merge_into_the_unsharded_session(tmp_path: Path) -> None:
    (tmp_path / "test_agents.py").write_text(PROJECT)
    # every session at once, each in its own process (the memo is off: none sees another's runs)
    whole = _start(tmp_path, "-n", "0", "--agentprop-json", "whole.json")
    shards = [
        _start(
            tmp_path,
            "-n",
            "2" if i == 2 else "0",
            "--agentprop-shard",
            f"{i}/4",
            "--agentprop-records",
            f"s{i}",
        )  # fmt: skip
        for i in (1, 2, 3, 4)
    ]
    code, out = _ended(whole)
    assert code == 1, out  # three checks fail
    for shard in shards:
        code, out = _ended(shard)
        assert code in (0, 1), out
    # the shard under pytest-xdist: one records file per worker, every check recorded
    assert sorted(p.name for p in (tmp_path / "s2").glob("trials*.jsonl")) == [
        "trials-gw0.jsonl",
        "trials-gw1.jsonl",
    ]
    assert any(isinstance(r, CheckLine) for r in read_records(tmp_path / "s2"))
    code, out = _merge(*(str(tmp_path / f"s{i}") for i in (1, 2, 3, 4)), "--json",
                       str(tmp_path / "merged.json"))  # fmt: skip
    assert code == 1, out  # as the unsharded session: a test failed
    expected = json.loads((tmp_path / "whole.json").read_text())
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert len(expected["checks"]) == 20 and {c["verdict"] for c in expected["checks"]} >= {
        "PASS",
        "FAIL",
    }
    assert [b for b in expected["bugs"] if len(b["tests"]) > 1], "a bug hit by two tests"
    assert merged["checks"] == expected["checks"]
    assert merged["bugs"] == expected["bugs"]
    assert _decided(merged) == _decided(expected)
    assert merged["merge"]["checks_decided_again"] == 20
    assert merged["merge"]["checks_from_reports"] == []
    assert "20 checks" in out and "20 decided again" in out


@pytest.mark.slow  # two pytest sessions
def test_an_unseeded_hypothesis_test_is_refused_by_the_merge(tmp_path: Path) -> None:
    (tmp_path / "test_drawn.py").write_text(
        UNSEEDED.format(example=str(ROOT / "examples" / "supportops"))
    )
    args = ("-n", "0", "--agentprop-shard", "1/1", "--agentprop-records")
    unseeded = _start(tmp_path, *args, "s1")
    # with a seed, the draws no longer depend on the tests run before: the merge takes it
    seeded = _start(tmp_path, "--hypothesis-seed", "7", *args, "s2")
    for process in (unseeded, seeded):
        code, out = _ended(process)
        assert code == 0, out
    code, out = _merge(str(tmp_path / "s1"))
    assert code == 2
    assert "test_drawn.py::test_drawn is a Hypothesis test drawing from Hypothesis's" in out, out
    assert "--hypothesis-seed N" in out
    code, out = _merge(str(tmp_path / "s2"))
    assert code == 0, out
    # ... and its shard's record says it replays its database's examples first
    report = json.loads((tmp_path / "s2" / REPORT_FILE).read_text())
    assert report["hypothesis_database"] == ["test_drawn.py::test_drawn"]
    assert report["unseeded_hypothesis"] == []


def test_pytest_and_agentprop_run_shards_are_not_merged_together(tmp_path: Path) -> None:
    from agentprop._decide.records import SHARD_FILE, ShardInfo

    for name, runner, index in (("a", "pytest", 1), ("b", "run", 2)):
        (tmp_path / name).mkdir()
        info = ShardInfo(index=index, count=2, spec_digest="d", settings_digest="s", seed=0,
                         runner=runner)  # type: ignore[arg-type]  # fmt: skip
        (tmp_path / name / SHARD_FILE).write_text(info.model_dump_json())
    code, out = _merge(str(tmp_path / "a"), str(tmp_path / "b"))
    assert code == 2
    assert "is a shard of `agentprop run --shard` but" in out
    assert "of `pytest --agentprop-shard`: one merge takes the shards of one run" in out


# ----------------------------------------------------------------- shards made in this process

TESTS = ["t.py::test_a", "t.py::test_b", "t.py::test_c", "t.py::test_d"]


def _bug(key: str, test: str, tests: list[str], corpus_entry: str | None = None) -> dict[str, Any]:
    return {"key": key, "test": test, "shrunk": {"shrunk_by": test}, "corpus_entry": corpus_entry,
            "tests": tests}  # fmt: skip


def _shard(where: Path, index: int, tests: dict[str, float], **report: Any) -> Path:
    """Shard ``index`` of 2 of a session over :data:`TESTS`: each test in ``tests`` makes one
    seeded check of that pass rate, recorded as ``--agentprop-records`` records it; its
    ``report.json`` is the session's record, with ``report``'s entries over it."""
    directory = where / f"s{index}"
    recorder, session = Recorder(directory), Session()
    recorder.set_shard(pytest_shard_info(TESTS, Shard(index, 2), seed=0, options={}))
    write_collection(directory, TESTS)

    def agent(rate: float, seed: int) -> Any:
        async def run(i: int) -> Trace:
            return Trace(trial=i, agent="ok" if (i * 7 + seed) % 10 < rate * 10 else "bad")

        return run

    def judge(trace: Trace) -> TrialRecord:
        return TrialRecord(passed=trace.agent == "ok", signature=None if trace.agent == "ok"
                           else "sim:fail")  # fmt: skip

    checks = []
    with recording(recorder):
        for test, rate in tests.items():
            result = asyncio.run(
                adecide(
                    agent(rate, len(test)),
                    OracleSettings(mode="fixed", runs=10),
                    judge=judge,
                    name="case",
                )  # fmt: skip
            )
            session.record(test, result)
            checks.append({"test": test, "case": "case", "verdict": result.verdict,
                           "pass_rate": result.pass_rate, "interval": list(result.interval),
                           "runs": result.runs})  # fmt: skip
    recorder.close()
    data = {"schema": "agentprop.pytest/1", "profile": "ci", "seed": 0, "checks": checks,
            "results": [], "corpus_notes": [], "bugs": [], "snapshots": [], "memo_hits": 0,
            "exitstatus": 0, "unseeded_hypothesis": []}  # fmt: skip
    data.update(report)
    (directory / REPORT_FILE).write_text(json.dumps(data))
    return directory


def _merged(*directories: Path) -> Any:
    from agentprop._pipeline.merge import merge_shards

    run = merge_shards(list(directories))
    return merge_pytest_shards(
        {i: (run.info.model_copy(update={"index": i}), d) for i, d in run.directories.items()}
    )


def test_checks_come_out_in_collection_order_each_decided_again(tmp_path: Path) -> None:
    one = _shard(tmp_path, 1, {"t.py::test_d": 1.0, "t.py::test_b": 0.5})
    two = _shard(tmp_path, 2, {"t.py::test_c": 0.8, "t.py::test_a": 1.0}, exitstatus=1)
    merged = _merged(two, one)
    checks = merged.data["checks"]
    assert [c["test"] for c in checks] == TESTS
    assert [(c["verdict"], c["runs"]) for c in checks] == [
        ("PASS", 10), ("FAIL", 10), ("UNSTABLE", 10), ("PASS", 10),
    ]  # fmt: skip
    assert (
        checks[1]["pass_rate"] == 0.5 and checks[1]["interval"][0] < 0.5 < checks[1]["interval"][1]
    )
    assert merged.again == 4 and merged.failed  # shard 2's session failed


def test_merge_reads_and_decides_each_pytest_shard_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentprop merge`` of a pytest session's shards decides each check once from its trial
    lines, and reads each shard's records once (it checked the shards by deciding every check,
    then decided them all again for the session's record)."""
    import agentprop._decide.records as records
    from agentprop._pipeline import merge, pytest_merge

    one = _shard(tmp_path, 1, {"t.py::test_d": 1.0, "t.py::test_b": 0.5})
    two = _shard(tmp_path, 2, {"t.py::test_c": 0.8, "t.py::test_a": 1.0})
    decided: list[int] = []
    read: list[Path] = []

    def counted_recompute(given: Any) -> Any:
        out = records.recompute(given)
        decided.extend(out)
        return out

    def counted_read(path: Any) -> Any:
        read.append(Path(path))
        return records.read_records(path)

    for module in (merge, pytest_merge):
        monkeypatch.setattr(module, "recompute", counted_recompute)
        monkeypatch.setattr(module, "read_records", counted_read)
    code, out = _merge(str(one), str(two))
    assert code == 0, out
    assert "4 decided again from 40 trial lines" in out
    assert len(decided) == 4  # one decision a check, each decided once
    assert sorted(read) == [one, two]


def test_a_bug_found_on_two_shards_keeps_the_first_tests_shrink(tmp_path: Path) -> None:
    one = _shard(tmp_path, 1, {}, bugs=[_bug("k", "t.py::test_c", ["t.py::test_c"])])
    two = _shard(
        tmp_path, 2, {}, bugs=[_bug("k", "t.py::test_b", ["t.py::test_d", "t.py::test_b"])]
    )
    bugs = _merged(one, two).data["bugs"]
    assert bugs == [_bug("k", "t.py::test_b", ["t.py::test_b", "t.py::test_c", "t.py::test_d"])]


def test_a_bug_saved_to_the_corpus_during_the_run_is_named(tmp_path: Path) -> None:
    one = _shard(tmp_path, 1, {}, bugs=[_bug("k", "t.py::test_c", ["t.py::test_c"], "e1")])
    two = _shard(tmp_path, 2, {})
    (problem,) = _merged(one, two).data["merge"]["problems"]
    assert "bug k was saved to the corpus as entry e1 during the run (by t.py::test_c)" in problem


def test_an_unfinished_or_interrupted_shard_is_refused(tmp_path: Path) -> None:
    one = _shard(tmp_path, 1, {"t.py::test_a": 1.0})
    two = _shard(tmp_path, 2, {"t.py::test_b": 1.0}, exitstatus=2)
    code, out = _merge(str(one), str(two))
    assert code == 2 and "shard 2/2" in out and "ended with exit status 2" in out, out
    (two / REPORT_FILE).unlink()
    code, out = _merge(str(one), str(two))
    assert code == 2, out
    assert "is incomplete: it has no report.json" in out
    assert "its records hold 1 check(s) and 10 trial line(s)" in out


def test_a_shard_report_its_records_do_not_bear_out_is_refused(tmp_path: Path) -> None:
    one = _shard(tmp_path, 1, {"t.py::test_a": 1.0})
    report = json.loads((one / REPORT_FILE).read_text())
    report["checks"][0]["verdict"] = "FAIL"
    (one / REPORT_FILE).write_text(json.dumps(report))
    code, out = _merge(str(one), str(_shard(tmp_path, 2, {})))
    assert code == 2
    assert "its report.json says 'case' of t.py::test_a is FAIL on 10 runs but its trial " in out
    assert "records decide PASS on 10" in out


CRASH = """
import os
import signal
from pathlib import Path

import agentprop

EXAMPLE = Path({example!r})
FIXED = agentprop.settings(mode="fixed", runs=4)


def _check():
    project = agentprop.load_project(EXAMPLE)
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)
    agentprop.check(project, project.scenarios()[0].id, agent, settings=FIXED)


def test_kept():
    _check()


def test_killed():
    _check()
    os.kill(os.getpid(), signal.SIGKILL)  # the worker dies after its check was recorded
"""


@pytest.mark.slow  # a pytest session with two workers
def test_a_check_of_a_worker_killed_mid_session_is_kept_by_its_records(tmp_path: Path) -> None:
    (tmp_path / "test_crash.py").write_text(
        CRASH.format(example=str(ROOT / "examples" / "supportops"))
    )
    code, out = _pytest(
        tmp_path, "-n", "2", "--agentprop-shard", "1/1", "--agentprop-records", "s1"
    )
    assert code == 1 and "crashed" in out, out
    report = json.loads((tmp_path / "s1" / REPORT_FILE).read_text())
    # the killed worker never sent its session to the controller: the report lacks its check
    assert [c["test"] for c in report["checks"]] == ["test_crash.py::test_kept"]
    code, out = _merge(str(tmp_path / "s1"), "--json", str(tmp_path / "merged.json"))
    assert code == 1, out  # a test failed (its worker crashed)
    merged = json.loads((tmp_path / "merged.json").read_text())
    # ... but its records hold it: the merge decides it again from the trials it wrote
    assert [(c["test"], c["verdict"], c["runs"]) for c in merged["checks"]] == [
        ("test_crash.py::test_kept", "PASS", 4),
        ("test_crash.py::test_killed", "PASS", 4),
    ]
    assert merged["merge"]["checks_decided_again"] == 2


def test_records_only_tables_a_pytest_sessions_checks_by_test_from_any_shards(
    tmp_path: Path,
) -> None:
    # two tests make a check of the same name ('case'): the table tells them apart by test
    one = _shard(tmp_path, 1, {"t.py::test_d": 1.0, "t.py::test_b": 0.5})
    two = _shard(tmp_path, 2, {"t.py::test_c": 0.8, "t.py::test_a": 1.0})
    (two / REPORT_FILE).unlink()  # shard 2 did not finish
    # ... and a worker of it was killed mid-check: a decision no check names yet
    killed = Recorder(two, "gw1")
    killed.shard = pytest_shard_info(TESTS, Shard(2, 2), seed=0, options={})
    DecisionLog(killed, "x", "input", "agent", 0, OracleSettings(mode="fixed", runs=3))
    killed.close()
    out = tmp_path / "t.json"
    code, text = _merge("--records-only", str(two), str(one), "--json", str(out), "--markdown",
                        str(tmp_path / "t.md"))  # fmt: skip
    assert code == 1, text  # test_b's check failed
    assert "merged the records of 2 of 2 shard(s) of one pytest session (seed 0): 4 checks" in text
    assert "FAIL         case [t.py::test_b]: 5/10 runs" in text
    assert f"note: shard 2/2 ({two}) did not finish (no report.json)" in text
    assert "note: 1 decision(s) no check names are left out" in text
    table = json.loads(out.read_text())
    assert table["runner"] == "pytest" and table["decisions_not_checks"] == 1
    rows = [(c["test"], c["name"], c["shard"], c["verdict"], c["runs"]) for c in table["cases"]]
    assert rows == [
        ("t.py::test_a", "case", 2, "PASS", 10),
        ("t.py::test_b", "case", 1, "FAIL", 10),
        ("t.py::test_c", "case", 2, "UNSTABLE", 10),
        ("t.py::test_d", "case", 1, "PASS", 10),
    ]  # in the collection's order, each decided again from its trials
    assert "| 1 | t.py::test_b | case | FAIL | 10 | 5 |" in (tmp_path / "t.md").read_text()
    # a subset of the shards: the missing one is named
    code, text = _merge("--records-only", str(two))
    assert code == 1 and "INCOMPLETE: shard(s) 1/2 not given" in text, text
    # the merge proper still wants every shard finished
    code, text = _merge(str(one), str(two))
    assert code == 2 and "is incomplete: it has no report.json" in text


def test_a_fresh_seed_per_process_is_refused_for_recorded_shards(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    code, out = _pytest(tmp_path, "-n", "0", "--agentprop-fresh", "--agentprop-shard", "1/2",
                        "--agentprop-records", "s1")  # fmt: skip
    assert code == pytest.ExitCode.USAGE_ERROR, out
    assert "--agentprop-fresh draws a new seed in every process" in out
    assert "give every shard the same --agentprop-seed N instead" in out


def test_a_test_replaying_hypothesis_database_is_named_by_the_merge(tmp_path: Path) -> None:
    one = _shard(tmp_path, 1, {"t.py::test_a": 1.0}, hypothesis_database=["t.py::test_a"])
    two = _shard(tmp_path, 2, {"t.py::test_b": 1.0}, hypothesis_database=["t.py::test_x"])
    (problem,) = _merged(one, two).data["merge"]["problems"]  # test_x made no check: not named
    assert problem.startswith(
        "shard 1/2: t.py::test_a replay(s) the examples Hypothesis's database saved"
    )
    code, out = _merge(str(one), str(two))
    assert code == 0 and "note: shard 1/2: t.py::test_a replay(s)" in out, out


def test_the_top_up_of_a_pytest_sessions_shards_is_refused_naming_the_merge(
    tmp_path: Path,
) -> None:
    one = _shard(tmp_path, 1, {"t.py::test_a": 1.0})
    two = _shard(tmp_path, 2, {"t.py::test_b": 1.0})
    code, out = _run_cli(
        "run", str(ROOT / "examples" / "supportops"), "--top-up-shards", str(one), str(two)
    )
    assert code == 2
    assert "--top-up-shards: the shards are of a pytest session" in out, out
    assert "agentprop merge DIR... --json PATH" in out


def _run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out, err=out)
    return code, out.getvalue()


def test_a_records_dir_of_an_earlier_session_is_refused_or_replaced(tmp_path: Path) -> None:
    """``--agentprop-records`` appended to the records an earlier session left in DIR, so the
    two sessions read as one (and `agentprop merge` counted both): such a DIR is a usage error
    naming it and the fix, unless ``--agentprop-replace-records`` deletes those files first."""
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    records = tmp_path / "s1"
    records.mkdir()
    (records / "trials-gw0.jsonl").write_text('{"type":"trial"}\n')
    (records / "notes.txt").write_text("mine")
    code, out = _pytest(tmp_path, "-n", "0", "--agentprop-records", "s1")
    assert code == pytest.ExitCode.USAGE_ERROR, out
    assert "--agentprop-records s1: the directory holds the records of an earlier run " in out
    assert "(trials-gw0.jsonl)" in out and "--agentprop-replace-records" in out
    code, out = _pytest(tmp_path, "-n", "0", "--agentprop-records", "s1",
                        "--agentprop-replace-records")  # fmt: skip
    assert code == 0, out
    assert not (records / "trials-gw0.jsonl").exists() and (records / REPORT_FILE).is_file()
    assert (records / "notes.txt").read_text() == "mine"  # not a record: kept
