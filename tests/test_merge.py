"""``agentprop merge`` (agentprop._pipeline.merge): N shards' records, decided again, make the unsharded run."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._decide.records import RECORDS_FILE, SHARD_FILE, read_records
from agentprop._pipeline.merge import MergedCase, merge_shards, merged_cases

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
RUN = ["run", str(SUPPORTOPS), "--case", "N7", "--kinds", "mft,boundary", "--fault", "skip_auth=0.3"]
RUN += ["--corpus", "none", "--seed", "3", "--shrink-budget", "0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unsharded run (``all``) and its 3 shards (``s1``..``s3``), each in its own process, at once."""
    base = tmp_path_factory.mktemp("merge")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    jobs = {"all": []} | {f"s{i}": ["--shard", f"{i}/3"] for i in (1, 2, 3)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "agentprop._cli", *RUN, *extra, "--records", str(base / name), "--json", str(base / f"{name}.json")],
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
    return base


def _key(cases: list[MergedCase]) -> dict[tuple[str | None, str], tuple[object, ...]]:
    return {(c.kind, c.name): (c.verdict, c.decided_by, c.runs, c.passes, c.interval, c.signatures) for c in cases}


def test_merged_shards_equal_the_unsharded_run_verdict_for_verdict(runs: Path) -> None:
    merged = merge_shards([runs / "s3", runs / "s1", runs / "s2"])
    whole, _, _ = merged_cases(0, read_records(runs / "all"))
    assert _key(merged.cases) == _key(whole)
    assert {c.shard for c in merged.cases} == {1, 2, 3}  # the work was shared
    # the unsharded run's own report: every MFT and BOUNDARY case, its verdict and runs
    report = {c["id"]: (c["verdict"], c["runs"], c["passes"]) for c in json.loads((runs / "all.json").read_text())["cases"]}
    decided = {c.name: (c.verdict, c.runs, c.passes) for c in merged.cases if c.kind == "MFT" or c.name.startswith("BOUNDARY ")}
    assert decided == report
    assert {v for v, _, _ in report.values()} == {"PASS", "FAIL"}
    failing = [c for c in merged.cases if c.verdict == "FAIL"]
    assert failing and all(c.signatures and c.interval is not None and c.interval[1] < 1.0 for c in failing)


def test_merge_writes_its_reports_and_exits_as_the_run(runs: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    paths = {name: tmp_path / f"merged.{name}" for name in ("json", "junit", "markdown")}
    argv = ["merge", *(str(runs / f"s{i}") for i in (1, 2, 3))] + [x for name, p in paths.items() for x in (f"--{name}", str(p))]
    assert main(argv, out=out, err=io.StringIO()) == 1  # a case failed, as in the unsharded run
    data = json.loads(paths["json"].read_text())
    assert data["schema"] == "agentprop.merged/1" and [s["index"] for s in data["shards"]] == [1, 2, 3]
    assert len(data["cases"]) == len(merge_shards([runs / f"s{i}" for i in (1, 2, 3)]).cases)
    assert "<failure" in paths["junit"].read_text() and "| FAIL |" in paths["markdown"].read_text()


def _merge_error(dirs: list[Path]) -> str:
    err = io.StringIO()
    assert main(["merge", *map(str, dirs)], out=io.StringIO(), err=err) == 2
    return err.getvalue()


def test_a_missing_or_duplicated_shard_is_an_error_naming_it(runs: Path) -> None:
    assert "shard 2/3 missing" in _merge_error([runs / "s1", runs / "s3"])
    assert f"shard 3/3 is given twice: {runs / 's3'}, {runs / 's3'}" in _merge_error([runs / "s1", runs / "s2", runs / "s3", runs / "s3"])
    assert "not of a sharded run" in _merge_error([runs / "all", runs / "s1"])


def test_shards_of_another_run_are_refused_naming_what_differs(runs: Path, tmp_path: Path) -> None:
    other = tmp_path / "s2"
    shutil.copytree(runs / "s2", other)
    for name in (SHARD_FILE, RECORDS_FILE):
        (other / name).write_text((other / name).read_text().replace('"seed":3', '"seed":4'))
    error = _merge_error([runs / "s1", other, runs / "s3"])
    assert f"{other} is not a shard of the run of {runs / 's1'}: its seed is 4, not 3" in error
    # records of two shards in one directory (--records appends)
    mixed = tmp_path / "mixed"
    shutil.copytree(runs / "s1", mixed)
    with open(mixed / RECORDS_FILE, "a") as f:
        f.write((runs / "s2" / RECORDS_FILE).read_text())
    assert "holds the records of 2 different shards or runs" in _merge_error([mixed, runs / "s2", runs / "s3"])
