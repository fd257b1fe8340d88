"""The tutorial's test file works as the tutorial says: green for the clean agent, red with a
shrunk paraphrase when a phrasing-dependent fault is switched on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_TEST = ROOT / "examples" / "supportops" / "test_properties.py"


def run_example(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
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
            "--agentprop-corpus=none",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / ".hypothesis"), **env},
    )


def test_clean_agent_passes_the_tutorial_properties(tmp_path: Path) -> None:
    proc = run_example(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout
    assert "agentprop" in proc.stdout and "4 checks, 4 passed" in proc.stdout


def test_impatience_fault_is_found_and_shrunk_to_one_transform(tmp_path: Path) -> None:
    # a fixed Hypothesis seed keeps the search reproducible; the release profile (50 examples)
    # is what the tutorial recommends for hunting bugs
    proc = run_example(
        tmp_path,
        "--hypothesis-seed=1",
        "--agentprop-profile",
        "release",
        AGENTPROP_FAULTS="skip_auth_impatient=0.5",
    )
    assert proc.returncode == 1
    out = proc.stdout
    assert "AgentPropertyViolation" in out
    assert "decision_tree.N2_AUTH.requirements.must_call_tools_in_order" in out
    # the shrunk example is the original request plus exactly one transform that makes it
    # sound impatient (what the fault reacts to: now, asap, quick, immediately, hurry, "!")
    line = next(l for l in out.splitlines() if "Paraphrase: " in l)
    shown = line.split("Paraphrase: ", 1)[1].split("' = ")[0]
    assert "= original + " in line and re.search(
        r"\b(now|asap|immediately|right away|hurry|quick(ly)?)\b|!", shown, re.I
    ), line
    assert line.count("(") == 1, line
    assert "1 failed, 2 passed" in out
