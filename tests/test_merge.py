"""``agentprop merge`` (agentprop._pipeline.merge, .merge_report): N shards make the
unsharded run's report."""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentprop._cli import main
from agentprop._decide.records import RECORDS_FILE, REPORT_FILE, SHARD_FILE, read_records
from agentprop._pipeline.merge import MergedCase, merge_shards, merged_cases

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
# default kinds
RUN = ["run", str(SUPPORTOPS), "--case", "N7", "--fault", "skip_auth=0.3", "--explore", "4"]
RUN += ["--corpus", "none", "--seed", "3", "--shrink-budget", "12"]


def _processes(base: Path, run: list[str], jobs: dict[str, list[str]]) -> None:
    """``agentprop run`` once per job, each in its own process, at once."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentprop._cli",
                *run,
                *extra,
                "--records",
                str(base / name),
                "--json",
                str(base / f"{name}.json"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, extra in jobs.items()
    ]
    for p in procs:
        output, _ = p.communicate(timeout=300)
        assert p.returncode in (0, 1), output


@contextlib.contextmanager
def _counting_reads(monkeypatch: pytest.MonkeyPatch, files: set[Path]) -> Iterator[dict[str, int]]:
    """How many times each of ``files`` was read through to its end while the block ran."""
    passes: dict[str, int] = {}
    real_open = builtins.open

    class Counted:
        def __init__(self, f: Any, name: str) -> None:
            self.f, self.name = f, name

        def __enter__(self) -> Counted:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def __iter__(self) -> Iterator[Any]:
            yield from self.f
            passes[self.name] = passes.get(self.name, 0) + 1

        def __getattr__(self, name: str) -> Any:
            return getattr(self.f, name)

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        f = real_open(file, *args, **kwargs)
        return Counted(f, str(file)) if isinstance(file, str | Path) and Path(file) in files else f

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", counting_open)
        yield passes


TERM_DURING_TOP_UP = """
import os, signal, sys

from agentprop._cli import main
from agentprop._pipeline import merge_topup

redecide, policies = merge_topup.redecide_case, merge_topup.top_up_policies
sent = []


async def signalled(*args, **kwargs):
    if not sent:  # the top-up has started: the CI runner cancels the job
        sent.append(os.kill(os.getpid(), signal.SIGTERM))
    return await redecide(*args, **kwargs)


async def signalled_after(*args, **kwargs):
    made = await policies(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)  # the top-up is made: the reports are written next
    return made


if os.environ.get("TERM_AFTER"):
    merge_topup.top_up_policies = signalled_after
else:
    merge_topup.redecide_case = signalled
sys.exit(main(sys.argv[1:]))
"""
"""``agentprop run ARGS...`` in a process that sends itself SIGTERM as the top-up starts (or,
with ``TERM_AFTER`` set, once it is made)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unsharded run (``all``) and its 3 shards (``s1``..``s3``), each in its own process."""
    base = tmp_path_factory.mktemp("merge")
    _processes(base, RUN, {"all": []} | {f"s{i}": ["--shard", f"{i}/3"] for i in (1, 2, 3)})
    return base


def _normalised(report: dict[str, Any]) -> dict[str, Any]:
    """A run report without what measures this process rather than the run: wall times, and the
    runs started / reused / refused (a shard cannot reuse a run another shard made: the sum of
    the shards' spend is not the unsharded run's), the budget, and the merge's own account."""

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "duration_s"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    out: dict[str, Any] = strip(report)
    for name in ("runs_started", "runs_reused", "runs_refused"):
        out["metrics"].pop(name)
    for name in ("merge", "budget"):
        out["metrics"]["extra"].pop(name, None)
    return out


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_the_merged_report_is_the_unsharded_report(runs: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    argv = [
        "merge",
        *(str(runs / f"s{i}") for i in (3, 1, 2)),
        "--json",
        str(tmp_path / "m.json"),
        "--html",
        str(tmp_path / "m.html"),
    ]
    # a case failed, as in the unsharded run
    assert main(argv, out=out, err=io.StringIO()) == 1, out.getvalue()
    merged, whole = (
        json.loads((tmp_path / "m.json").read_text()),
        json.loads((runs / "all.json").read_text()),
    )
    assert _normalised(merged) == _normalised(whole)
    # what the comparison covered: every kind, failing DIR pairs, a shrunk bug, claims, coverage
    # (PROBE: the side question about the user's data asked beside each N7 request)
    kinds = {c["kind"] for c in merged["cases"]}
    assert kinds == {"MFT", "EXPLORE", "PROBE", "BOUNDARY", "DIR", "INV"}
    assert any(c["kind"] == "DIR" and c["verdict"] == "FAIL" for c in merged["cases"])
    # explored paths on every shard, and first-round inputs that failed on one of them: had a
    # path's second round learned from other paths' failures, the shards' inputs would differ
    explored = {
        i: [
            c
            for c in json.loads((runs / f"s{i}.json").read_text())["cases"]
            if c["kind"] == "EXPLORE"
        ]
        for i in (1, 2, 3)
    }
    assert all(explored.values()) and any(
        c["verdict"] == "FAIL" and c["id"].endswith(" ~0") for cs in explored.values() for c in cs
    )
    assert not any("EXPLORE" in p for p in merged["problems"])
    assert (
        merged["bugs"]
        and all(b["shrink_runs"] > 0 for b in merged["bugs"])
        and any(c["shrunk"] for c in merged["cases"])
    )
    assert (
        merged["claims"]
        and merged["metrics"]["extra"]["coverage"]["branches"]["covered"]
        and merged["tree"]
    )
    account = merged["metrics"]["extra"]["merge"]
    assert [s["index"] for s in account["shards"]] == [1, 2, 3] and account["not_recomputed"] == []
    # every case is decided again from its records: an INV case's two-sample test, and an INV
    # case NOT APPLICABLE (its base case failed) too
    invs = {c["verdict"] for c in merged["cases"] if c["kind"] == "INV"}
    assert {"PASS", "NOT APPLICABLE"} <= invs
    assert account["cases_decided_again"] == len(merged["cases"])
    assert account["cases_from_reports"] == 0
    assert merged["bugs"][0]["id"] in (tmp_path / "m.html").read_text()
    assert f"{merged['metrics']['cases']} cases" in out.getvalue()


def _key(cases: list[MergedCase]) -> dict[tuple[str | None, str], tuple[object, ...]]:
    return {
        (c.kind, c.name): (c.verdict, c.decided_by, c.runs, c.passes, c.interval, c.signatures)
        for c in cases
    }


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_merged_shards_equal_the_unsharded_run_verdict_for_verdict(runs: Path) -> None:
    merged = merge_shards([runs / "s3", runs / "s1", runs / "s2"])
    whole, _, _ = merged_cases(0, read_records(runs / "all"))
    assert _key(merged.cases) == _key(whole)
    assert {c.shard for c in merged.cases} == {1, 2, 3}  # the work was shared
    # the unsharded run's own report: every MFT and BOUNDARY case, its verdict and runs
    cases = json.loads((runs / "all.json").read_text())["cases"]
    report = {
        c["id"]: (c["verdict"], c["runs"], c["passes"])
        for c in cases
        if c["kind"] in ("MFT", "BOUNDARY")
    }
    decided = {
        c.name: (c.verdict, c.runs, c.passes)
        for c in merged.cases
        if c.kind == "MFT" or c.name.startswith("BOUNDARY ")
    }
    assert decided == report
    assert {v for v, _, _ in report.values()} == {"PASS", "FAIL"}
    failing = [c for c in merged.cases if c.verdict == "FAIL" and c.kind == "MFT"]
    assert failing and all(
        c.signatures and c.interval is not None and c.interval[1] < 1.0 for c in failing
    )


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_merge_writes_junit_and_markdown_as_a_run_does(runs: Path, tmp_path: Path) -> None:
    paths = {name: tmp_path / f"merged.{name}" for name in ("junit", "markdown")}
    argv = ["merge", *(str(runs / f"s{i}") for i in (1, 2, 3))] + [
        x for name, p in paths.items() for x in (f"--{name}", str(p))
    ]
    assert main(argv, out=io.StringIO(), err=io.StringIO()) == 1
    assert "<failure" in paths["junit"].read_text() and "FAIL" in paths["markdown"].read_text()


def _merge_error(dirs: list[Path]) -> str:
    err = io.StringIO()
    assert main(["merge", *map(str, dirs)], out=io.StringIO(), err=err) == 2
    return err.getvalue()


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_a_missing_or_duplicated_shard_is_an_error_naming_it(runs: Path) -> None:
    assert "shard 2/3 missing" in _merge_error([runs / "s1", runs / "s3"])
    assert f"shard 3/3 is given twice: {runs / 's3'}, {runs / 's3'}" in _merge_error(
        [runs / "s1", runs / "s2", runs / "s3", runs / "s3"]
    )
    assert "not of a sharded run" in _merge_error([runs / "all", runs / "s1"])


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_shards_of_another_run_are_refused_naming_what_differs(runs: Path, tmp_path: Path) -> None:
    other = tmp_path / "s2"
    shutil.copytree(runs / "s2", other)
    for name in (SHARD_FILE, RECORDS_FILE):
        (other / name).write_text((other / name).read_text().replace('"seed":3', '"seed":4'))
    error = _merge_error([runs / "s1", other, runs / "s3"])
    assert f"{other} is not a shard of the run of {runs / 's1'}: its seed is 4, not 3" in error
    # records of two shards in one directory (appended or copied together by hand)
    mixed = tmp_path / "mixed"
    shutil.copytree(runs / "s1", mixed)
    with open(mixed / RECORDS_FILE, "a") as f:
        f.write((runs / "s2" / RECORDS_FILE).read_text())
    assert "holds the records of 2 different shards or runs" in _merge_error(
        [mixed, runs / "s2", runs / "s3"]
    )


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_an_unfinished_shard_is_named_and_its_records_counted(runs: Path, tmp_path: Path) -> None:
    cut = tmp_path / "s2"
    shutil.copytree(runs / "s2", cut)
    (cut / REPORT_FILE).unlink()  # the shard was killed before it ended
    lines = (cut / RECORDS_FILE).read_text().splitlines(keepends=True)
    (cut / RECORDS_FILE).write_text("".join(lines[:7]) + lines[7][:20])  # and mid-line
    error = _merge_error([runs / "s1", cut, runs / "s3"])
    decisions = sum(r.type == "decision" for r in read_records(cut))
    assert (
        f"shard 2/3 ({cut}) is incomplete" in error
        and f"its records hold {decisions} decision(s)" in error
    )
    assert "run shard 2/3 again" in error
    # what it recorded up to the kill still merges, decision by decision, marked incomplete
    out = io.StringIO()
    argv = [
        "merge",
        "--records-only",
        str(runs / "s1"),
        str(cut),
        "--json",
        str(tmp_path / "d.json"),
    ]
    assert main(argv, out=out, err=io.StringIO()) in (1, 3)
    assert "merged the records of 2 of 3 shard(s)" in out.getvalue()
    assert "INCOMPLETE: shard(s) 3/3 not given" in out.getvalue()
    decided = json.loads((tmp_path / "d.json").read_text())
    assert decided["schema"] == "agentprop.merged/1" and {c["shard"] for c in decided["cases"]} == {
        1,
        2,
    }


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_a_report_its_records_do_not_bear_out_is_refused(runs: Path, tmp_path: Path) -> None:
    edited = tmp_path / "s3"
    shutil.copytree(runs / "s3", edited)
    report = json.loads((edited / REPORT_FILE).read_text())
    case = next(c for c in report["cases"] if c["kind"] == "MFT" and c["verdict"] == "FAIL")
    case["verdict"] = "PASS"
    (edited / REPORT_FILE).write_text(json.dumps(report))
    error = _merge_error([runs / "s1", runs / "s2", edited])
    assert (
        f"shard 3/3: its report says {case['id']} is PASS" in error
        and "its trial records decide FAIL" in error
    )


@pytest.mark.slow  # shard processes (the module's fixture or its own)
@pytest.mark.parametrize("edit", ["verdict", "p_value"])
def test_an_inv_verdict_its_records_do_not_bear_out_is_refused(
    runs: Path, tmp_path: Path, edit: str
) -> None:
    # the two-sample comparison is made again from the sides' recorded runs, not
    # taken from the report
    shard = next(
        i
        for i in (1, 2, 3)
        if any(
            c["kind"] == "INV" and c["verdict"] == "PASS"
            for c in json.loads((runs / f"s{i}.json").read_text())["cases"]
        )
    )
    edited = tmp_path / f"s{shard}"
    shutil.copytree(runs / f"s{shard}", edited)
    report = json.loads((edited / REPORT_FILE).read_text())
    case = next(c for c in report["cases"] if c["kind"] == "INV" and c["verdict"] == "PASS")
    if edit == "verdict":
        case["verdict"] = "FAIL"
    else:
        case["details"]["variants"][0]["p_value"] /= 2
    (edited / REPORT_FILE).write_text(json.dumps(report))
    error = _merge_error([edited if i == shard else runs / f"s{i}" for i in (1, 2, 3)])
    said = "its records decide PASS" if edit == "verdict" else "p-values differ from the report's"
    assert (
        f"shard {shard}/3: its report says {case['id']} is {case['verdict']} (two-sample test)"
        in error
        and said in error
    )


@pytest.mark.slow  # shard processes (the module's fixture or its own)
@pytest.mark.parametrize(
    "was, now, said",
    [
        ("NOT APPLICABLE", "INCONCLUSIVE", "they decide NOT APPLICABLE on 0 runs"),
        ("PASS", "INCONCLUSIVE", "they decide compared (PASS or FAIL)"),
    ],
)
def test_an_undecided_inv_case_its_records_do_not_bear_out_is_refused(
    runs: Path, tmp_path: Path, was: str, now: str, said: str
) -> None:
    # NOT APPLICABLE and INCONCLUSIVE are held to the base case's and the sides' decisions too
    shard = next(
        i
        for i in (1, 2, 3)
        if any(
            c["kind"] == "INV" and c["verdict"] == was
            for c in json.loads((runs / f"s{i}.json").read_text())["cases"]
        )
    )
    edited = tmp_path / f"s{shard}"
    shutil.copytree(runs / f"s{shard}", edited)
    report = json.loads((edited / REPORT_FILE).read_text())
    case = next(c for c in report["cases"] if c["kind"] == "INV" and c["verdict"] == was)
    case["verdict"] = now
    (edited / REPORT_FILE).write_text(json.dumps(report))
    error = _merge_error([edited if i == shard else runs / f"s{i}" for i in (1, 2, 3)])
    assert f"shard {shard}/3: its report says {case['id']} is {now}" in error, error
    assert said in error, error


def _inv_case(verdict: str, runs: int, base: dict[str, Any]) -> Any:
    from agentprop._pipeline.report.model import CaseReport

    return CaseReport(
        id="INV S", node="N", kind="INV", messages=["v1", "v2"], verdict=verdict, runs=runs,
        passes=0, pass_rate=0.0, decided_by="two-sample test",
        details={"runs_per_side": 5, "base": {"case": "S", **base}},
    )  # fmt: skip


@pytest.mark.parametrize(
    "sides, base, expected",
    [
        # the budget refused a run of variant 1: nothing compared
        ([(5, False), (3, True)], ("PASS", 10, True), ("INCONCLUSIVE", 8)),
        # an error not the agent's stopped the original: no variant sampled
        ([(2, False, True)], ("PASS", 10, True), ("INCONCLUSIVE", 2)),
        # a look of a budgeted run: fewer runs than a side needs
        ([(2, False), (2, False), (2, False)], ("PASS", 10, True), ("INCONCLUSIVE", 6)),
        # its base case undecided (decided for this case: its runs count)
        ([], ("INCONCLUSIVE", 4, False), ("INCONCLUSIVE", 4)),
        # its base case failed
        ([], ("FAIL", 3, True), ("NOT APPLICABLE", 0)),
    ],
)
def test_an_undecided_inv_case_is_decided_again_from_its_base_and_sides(
    sides: list[tuple[Any, ...]], base: tuple[str, int, bool], expected: tuple[str, int]
) -> None:
    from agentprop._pipeline.merge_report import _Side, _undecided_inv

    verdict, runs, reused = base
    offsets = {
        k * 5: _Side([None] * side[0], side[0], side[1], len(side) > 2)
        for k, side in enumerate(sides)
    }
    decided = {
        ("MFT" if reused else None, "S"): MergedCase(
            "S", "MFT" if reused else None, 1, verdict, "fixed", runs, 0, None, (), 0.0
        )
    }
    said = {"verdict": verdict, "runs": runs, "reused": reused}
    assert _undecided_inv(_inv_case(*expected, said), offsets, decided) is None
    other = "NOT APPLICABLE" if expected[0] == "INCONCLUSIVE" else "INCONCLUSIVE"
    problem = _undecided_inv(_inv_case(other, expected[1], said), offsets, decided)
    assert problem == (
        f"they decide {expected[0]} on {expected[1]} runs, not {other} on {expected[1]}"
    )
    # a base case the records decide otherwise than the report says
    wrong = {**said, "runs": runs + 1}
    assert "its base case S is" in str(
        _undecided_inv(_inv_case(*expected, wrong), offsets, decided)
    )


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_a_policy_the_shards_could_not_top_up_is_said_and_the_merge_is_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = [
        "run",
        str(SUPPORTOPS),
        "--case",
        "N7",
        "--kinds",
        "mft",
        "--corpus",
        "none",
        "--seed",
        "3",
        "--shrink-budget",
        "0",
    ]
    _processes(tmp_path, run, {"all": []} | {f"s{i}": ["--shard", f"{i}/2"] for i in (1, 2)})
    out = io.StringIO()
    assert (
        main(
            [
                "merge",
                str(tmp_path / "s1"),
                str(tmp_path / "s2"),
                "--json",
                str(tmp_path / "m.json"),
            ],
            out=out,
            err=io.StringIO(),
        )
        == 3
    )
    whole = json.loads((tmp_path / "all.json").read_text())
    assert [(c["policy"], c["status"]) for c in whole["claims"]] == [
        ("P2_AUTH_GATE", "certified")
    ] and whole["claims"][0]["topped_up"] > 0
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [(c["policy"], c["status"], c["topped_up"]) for c in merged["claims"]] == [
        ("P2_AUTH_GATE", "not certified", 0)
    ]
    assert merged["metrics"]["extra"]["merge"]["not_recomputed"] == [
        "the pooled top-up of P2_AUTH_GATE"
    ]
    assert any("skipped the pooled top-up of P2_AUTH_GATE" in p for p in merged["problems"])
    assert (
        "INCOMPLETE: not in the merged report: the pooled top-up of P2_AUTH_GATE" in out.getvalue()
    )
    # the verdicts are the run's
    assert [c["verdict"] for c in merged["cases"]] == [c["verdict"] for c in whole["cases"]]

    # the shards' own command with --top-up-shards in place of --shard makes that top-up:
    # the unsharded run's report, its topped-up cases and claims included
    out = io.StringIO()
    argv = [*run, "--top-up-shards", str(tmp_path / "s1"), str(tmp_path / "s2")]
    argv += ["--records", str(tmp_path / "top"), "--json", str(tmp_path / "t.json")]
    shards = {tmp_path / "s1" / "traces.jsonl", tmp_path / "s2" / "traces.jsonl"}
    with _counting_reads(monkeypatch, shards) as passes:
        assert main(argv, out=out, err=io.StringIO()) == 0, out.getvalue()
    # each shard's traces file read through once, however many of its cases were topped up
    assert passes and set(passes.values()) == {1}, passes
    topped = json.loads((tmp_path / "t.json").read_text())
    assert _normalised(topped) == _normalised(whole)
    account = topped["metrics"]["extra"]["merge"]
    assert account["not_recomputed"] == [] and account["top_up"]["policies"] == ["P2_AUTH_GATE"]
    assert account["top_up"]["runs"] == whole["claims"][0]["topped_up"] > 0
    assert "topped up P2_AUTH_GATE as the unsharded run does" in out.getvalue()
    # only the runs beyond the shards' were made (theirs reused), each recorded
    made = [r for r in read_records(tmp_path / "top") if r.type == "trial"]
    assert sum(r.status == "started" for r in made) == account["top_up"]["runs"]  # type: ignore[union-attr]
    assert {r.status for r in made} == {"started", "reused"}  # type: ignore[union-attr]

    # ... and recorded like a shard's: `agentprop merge` takes the top-up's records with the
    # shards' and makes the same top-up again from them, with no agent
    out = io.StringIO()
    argv = ["merge", str(tmp_path / "s2"), str(tmp_path / "top"), str(tmp_path / "s1")]
    assert main([*argv, "--json", str(tmp_path / "r.json")], out=out, err=io.StringIO()) == 0
    again = json.loads((tmp_path / "r.json").read_text())
    assert _normalised(again) == _normalised(whole)
    assert again["metrics"]["extra"]["merge"]["top_up"] == account["top_up"]
    # a top-up whose records lack a run it needs is refused, never made
    cut = tmp_path / "top-cut"
    shutil.copytree(tmp_path / "top", cut)
    (cut / "traces.jsonl").write_text("")
    err = io.StringIO()
    argv = ["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), str(cut)]
    assert main(argv, out=io.StringIO(), err=err) == 2
    assert f"the records in {cut} do not hold every run of the top-up" in err.getvalue()

    # a top-up its budget cut short is made again exactly from its records: the runs its
    # budget refused are refused again, and its claim names the recorded limit
    out = io.StringIO()
    argv = [*run, "--top-up-shards", str(tmp_path / "s1"), str(tmp_path / "s2")]
    argv += ["--max-runs", "5", "--records", str(tmp_path / "top-5")]
    code = main([*argv, "--json", str(tmp_path / "t5.json")], out=out, err=io.StringIO())
    cut_short = json.loads((tmp_path / "t5.json").read_text())
    assert 0 < cut_short["claims"][0]["topped_up"] < account["top_up"]["runs"], out.getvalue()
    assert "the top-up stopped: max_runs=5 reached" in cut_short["claims"][0]["statement"]
    assert any(r.status == "refused" for r in read_records(tmp_path / "top-5") if r.type == "trial")  # type: ignore[union-attr]
    out = io.StringIO()
    argv = ["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), str(tmp_path / "top-5")]
    again_code = main([*argv, "--json", str(tmp_path / "r5.json")], out=out, err=out)
    assert again_code == code, out.getvalue()
    assert _normalised(json.loads((tmp_path / "r5.json").read_text())) == _normalised(cut_short)

    # SIGTERM while the top-up runs (a CI job cancelled) ends it as it ends any run: the
    # reports written (the shards' merge, saying the top-up is not in it), exit 143; its trial
    # records kept, unfinished, so a later merge does not take them for a finished top-up
    (tmp_path / "term.py").write_text(TERM_DURING_TOP_UP)
    argv = [*run, "--top-up-shards", str(tmp_path / "s1"), str(tmp_path / "s2")]
    argv += ["--records", str(tmp_path / "top-term"), "--json", str(tmp_path / "term.json")]
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(tmp_path / "term.py"), *argv],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 143, done.stdout + done.stderr
    assert "interrupted by SIGTERM: the pooled top-up of P2_AUTH_GATE was not finished" in (
        done.stdout
    )
    term = json.loads((tmp_path / "term.json").read_text())
    assert term["metrics"]["extra"]["merge"]["not_recomputed"] == [
        "the pooled top-up of P2_AUTH_GATE (interrupted)"
    ]
    assert [c["verdict"] for c in term["cases"]] == [c["verdict"] for c in whole["cases"]]
    assert any(r.type == "decision" for r in read_records(tmp_path / "top-term"))
    assert not (tmp_path / "top-term" / REPORT_FILE).exists()
    err = io.StringIO()
    argv = ["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), str(tmp_path / "top-term")]
    assert main(argv, out=io.StringIO(), err=err) == 2
    assert "did not finish" in err.getvalue()
    # ... and once the top-up is made, it only stops what follows: the whole report, exit 143
    argv = [*run, "--top-up-shards", str(tmp_path / "s1"), str(tmp_path / "s2")]
    argv += ["--json", str(tmp_path / "term-after.json")]
    done = subprocess.run(
        [sys.executable, str(tmp_path / "term.py"), *argv],
        env={**os.environ, "PYTHONPATH": path, "TERM_AFTER": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 143, done.stdout + done.stderr
    assert (
        "interrupted by SIGTERM: after the top-up was made; the reports above hold the whole "
        in (done.stdout)
    )
    after = json.loads((tmp_path / "term-after.json").read_text())
    assert _normalised(after) == _normalised(topped)

    # a command that is not the shards' is refused, naming what differs
    err = io.StringIO()
    argv = [*run, "--fault", "skip_auth=0.1", "--top-up-shards", str(tmp_path / "s1")]
    assert main([*argv, str(tmp_path / "s2")], out=io.StringIO(), err=err) == 2
    assert "--top-up-shards: the shards are not of this run: their settings, agent and cases" in (
        err.getvalue()
    )

    # the top-up made again into its own records directory with --replace-records replaces
    # the earlier records instead of adding to them (a merge would read both as one run)
    kept = len(list(read_records(tmp_path / "top")))
    argv = [*run, "--top-up-shards", str(tmp_path / "s1"), str(tmp_path / "s2")]
    argv += ["--records", str(tmp_path / "top"), "--replace-records"]
    assert main(argv, out=io.StringIO(), err=io.StringIO()) == 0
    assert len(list(read_records(tmp_path / "top"))) == kept
    # ... and the top-up's records never go into a shard's own directory
    err = io.StringIO()
    argv = [*run, "--top-up-shards", str(tmp_path / "s1"), str(tmp_path / "s2")]
    assert main([*argv, "--records", str(tmp_path / "s2")], out=io.StringIO(), err=err) == 2
    assert "is one of the --top-up-shards directories" in err.getvalue()


@pytest.mark.slow  # shard processes (the module's fixture or its own)
def test_shards_that_grouped_no_bugs_merge_into_a_report_without_bugs(
    runs: Path, tmp_path: Path
) -> None:
    # `agentprop run --shrink-budget 0` lists no bugs; its merge must not list any either
    dirs = []
    for i in (1, 2, 3):
        d = tmp_path / f"s{i}"
        shutil.copytree(runs / f"s{i}", d)
        report = json.loads((d / REPORT_FILE).read_text())
        report["bugs"] = []
        for case in report["cases"]:
            case["bugs"], case["shrunk"] = [], None
        (d / REPORT_FILE).write_text(json.dumps(report))
        dirs.append(str(d))
    assert (
        main(
            ["merge", *dirs, "--json", str(tmp_path / "m.json")],
            out=io.StringIO(),
            err=io.StringIO(),
        )
        == 1
    )
    merged = json.loads((tmp_path / "m.json").read_text())
    assert merged["bugs"] == [] and not any(c["bugs"] or c["shrunk"] for c in merged["cases"])
    assert any(c["verdict"] == "FAIL" for c in merged["cases"])


def test_explored_inputs_merge_in_the_order_the_unsharded_run_draws_them() -> None:
    from agentprop._agents.project import load_project
    from agentprop._pipeline.merge_report import _explore_order
    from agentprop._pipeline.report.model import CaseReport

    project = load_project(SUPPORTOPS)
    a, b = (s.id for s in project.scenarios()[:2])
    shard_order = [f"EXPLORE {b} ~{k}" for k in range(3)] + [f"EXPLORE {a} ~{k}" for k in range(3)]
    cases = [
        CaseReport(id=i, node="-", kind="EXPLORE", verdict="PASS", runs=1, passes=1, pass_rate=1.0)
        for i in shard_order
    ]
    order = _explore_order(project, cases)
    # --explore 3: a first round of 2 inputs per path, in scenario order, then the second round's
    expected = [
        f"EXPLORE {a} ~0",
        f"EXPLORE {a} ~1",
        f"EXPLORE {b} ~0",
        f"EXPLORE {b} ~1",
        f"EXPLORE {a} ~2",
        f"EXPLORE {b} ~2",
    ]
    assert sorted(shard_order, key=order.__getitem__) == expected
