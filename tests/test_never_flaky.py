"""The tutorial's bug hunt gives the same verdicts however often it runs, and never ``Flaky``.

The tutorial's command runs four times in fresh processes sharing one corpus and one memo (as
once agentprop is configured): the first finds, shrinks and saves the bug; the next ones replay
the corpus entry, which every check of the case replays (memoised) so Hypothesis's own replay of
a failing example fails the same way; without a profile, and under pytest-xdist, too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_TEST = ROOT / "examples" / "supportops" / "test_properties.py"


def tutorial_command(tmp_path: Path, *args: str) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(EXAMPLE_TEST),
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "--hypothesis-seed=1",
            f"--agentprop-corpus={tmp_path / 'corpus'}",
            f"--agentprop-memo={tmp_path / 'trials.sqlite'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / ".hypothesis"),
            "AGENTPROP_FAULTS": "skip_auth_impatient=0.5",
        },
    )
    return proc.stdout + proc.stderr


def test_the_tutorials_bug_hunt_run_again_and_again_is_never_flaky(tmp_path: Path) -> None:
    release = ("--agentprop-profile", "release")
    runs = {
        "first": tutorial_command(tmp_path, *release),
        "second": tutorial_command(tmp_path, *release),
        "without a profile": tutorial_command(tmp_path),
        "under -n 2": tutorial_command(tmp_path, "-n", "2", *release),
    }
    assert "saved as corpus entry" in runs["first"], runs["first"][-3000:]
    for name, out in runs.items():
        assert "Flaky" not in out, f"{name}:\n{out[-4000:]}"
        assert "1 failed, 2 passed" in out, f"{name}:\n{out[-4000:]}"
        assert "decision_tree.N2_AUTH.requirements.must_call_tools_in_order" in out, (
            f"{name}:\n{out[-4000:]}"
        )
    for name in ("second", "without a profile", "under -n 2"):
        assert "regression: corpus entry" in runs[name], f"{name}:\n{runs[name][-4000:]}"


def test_the_first_pages_spec_free_bug_hunt_is_shrunk_saved_and_replayed_never_flaky(
    tmp_path: Path,
) -> None:
    """The spec-free tier (docs/testing-the-agent-you-have.md) has the same machinery: the first
    run shrinks the drawn paraphrase steps and saves the reproducer; the next runs replay it."""
    test_file = ROOT / "docs" / "examples" / "first-agent" / "test_orders.py"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / ".hypothesis"),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(test_file),
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
        "--hypothesis-seed=1",
    ]
    command.append(f"--agentprop-corpus={tmp_path / 'corpus'}")

    def run(*args: str) -> str:
        proc = subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
        )
        return proc.stdout + proc.stderr

    runs = {"first": run(f"--agentprop-json={tmp_path / 'first.json'}"), "second": run()}
    assert (
        "saved as corpus entry" in runs["first"]
        and "= original + whitespace(kind=1, site=0)" in runs["first"]
    ), runs["first"][-4000:]
    # the same, for tools
    record = json.loads((tmp_path / "first.json").read_text(encoding="utf-8"))
    assert record["schema"] == "agentprop.pytest/1" and [
        c["verdict"] for c in record["checks"]
    ] == ["FAIL"]
    (bug,) = record["bugs"]
    assert (
        bug["shrunk"]["reproducer_messages"] == [" What is the status of order O-1234?"]
        and bug["corpus_entry"]
    )
    assert bug["shrunk"]["reproducer_rate"]["runs"] >= 30 and bug["tests"] == [bug["test"]]
    for name, out in runs.items():
        assert (
            "Flaky" not in out
            and "1 failed" in out
            and "requires_tools::missing=query_order" in out
        ), f"{name}:\n{out[-4000:]}"
    assert "regression: corpus entry" in runs["second"], runs["second"][-4000:]
