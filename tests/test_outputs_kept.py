"""No results lost to a disk (issue #27 item 7).

Output paths are checked (and their directories created) before the first run, and made
absolute so that an agent changing directory cannot move them; a write that fails after the
work (a full disk: ``/dev/full``) keeps the results in a spare file, says where, and exits 2; a
corpus that cannot be written leaves the reproducer in the report with a ``not-saved`` event.
"""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._pipeline.report.model import RunReport, SnapshotCheckReport

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "supportops"
FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(
    not FULL.exists(), reason="/dev/full (a disk that is always full) is a Linux device"
)
RUN = ("--case", "N7_CANCEL", "--kinds", "mft", "--runs", "2", "--corpus", "none")

WANDERER = '''
import os

from agent import SupportOpsAgent


class Wanderer(SupportOpsAgent):
    """Changes the process's directory in every turn, as some tools do."""

    def turn(self, message, ctx):
        os.chdir(os.environ["WANDER_TO"])
        return super().turn(message, ctx)
'''


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _spare(out: str, name: str) -> Path:
    found = re.search(
        rf"cannot write the {name} to /dev/full \(No space left on device\); it was "
        r"written to (\S+) instead",
        out,
    )
    assert found is not None, out
    return Path(found.group(1))


@needs_dev_full
def test_a_full_disk_keeps_the_run_report_in_a_spare_file_and_exits_2() -> None:
    code, out, err = cli("run", str(EXAMPLE), *RUN, "--json", str(FULL))
    assert code == 2 and "Traceback" not in out + err
    assert "4 cases: 4 passed" in out  # the work was done and shown
    spare = _spare(out, "JSON report")
    try:
        report = RunReport.model_validate_json(spare.read_text(encoding="utf-8"))
        assert report.metrics.cases == 4
    finally:
        spare.unlink()


@needs_dev_full
def test_a_full_disk_for_one_output_still_writes_the_others(tmp_path: Path) -> None:
    code, out, _ = cli(
        "run", str(EXAMPLE), *RUN, "--junit", str(FULL), "--json", "out/new/report.json"
    )
    assert code == 2
    _spare(out, "JUnit XML").unlink()
    assert (
        RunReport.model_validate_json(
            (tmp_path / "out" / "new" / "report.json").read_text(encoding="utf-8")
        ).metrics.cases
        == 4
    )


@needs_dev_full
def test_snapshot_check_keeps_its_results_on_a_full_disk(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "*.pending.json"),
    )
    code, out, err = cli(
        "snapshot", "check", str(project), "--case", "N7_CANCEL", "--json", str(FULL)
    )
    assert code == 2 and "Traceback" not in out + err
    spare = _spare(out, "JSON report")
    try:
        assert SnapshotCheckReport.model_validate_json(spare.read_text(encoding="utf-8"))
    finally:
        spare.unlink()


def test_an_output_path_that_cannot_be_written_is_refused_before_any_run(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    code, out, err = cli("run", str(EXAMPLE), *RUN, "--json", "afile/report.json")
    assert code == 2 and "--json afile/report.json: cannot create its directory" in err
    assert "cases:" not in out  # nothing ran
    code, _, err = cli("run", str(EXAMPLE), *RUN, "--html", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_an_agent_that_changes_directory_does_not_move_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "__snapshots__"),
    )
    (project / "wanderer.py").write_text(WANDERER, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("WANDER_TO", str(elsewhere))
    code, out, err = cli(
        "run", str(project), "--agent", "wanderer:Wanderer", *RUN, "--json", "report.json"
    )
    os.chdir(tmp_path)
    assert code == 0, out + err
    assert (tmp_path / "report.json").is_file() and not (elsewhere / "report.json").exists()


def test_a_corpus_that_cannot_be_written_leaves_the_reproducer_in_the_report(
    tmp_path: Path,
) -> None:
    (tmp_path / "afile").write_text("x")
    code, out, err = cli(
        "run",
        str(EXAMPLE),
        "--fault",
        "skip_auth=1",
        "--case",
        "N7_CANCEL",
        "--kinds",
        "mft",
        "--runs",
        "2",
        "--corpus",
        "afile/corpus",
        "--json",
        "r.json",
    )
    assert code == 1 and "Traceback" not in out + err
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text(encoding="utf-8"))
    events = [e for e in report.corpus if e.action == "not-saved"]
    assert events and "not saved to the corpus" in events[0].message
    assert any(c.shrunk for c in report.cases if c.verdict == "FAIL")
