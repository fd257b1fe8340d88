"""What ``agentprop run`` imports: a fresh process pays for every module before its first model
call, and the run's time over the SDK alone counts it (issue 31, "the floor").

numpy took a fifth of a second of ``agentprop run``'s start-up, for an ``isinstance`` check on
``np.bool_`` and the shrinker's and the two-sample tests' arrays; those modules now import it
where it is used, and a run that shrinks nothing and compares no samples never imports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NOT_IMPORTED = ("numpy",)
"""Heavy modules an ``agentprop run`` of a passing case must not import."""

SCRIPT = """
import contextlib, io, json, sys
from agentprop._cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_a_run_of_a_passing_case_does_not_import_the_heavy_modules(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            "run",
            str(ROOT / "examples" / "supportops"),
            "--kinds",
            "mft",
            "--mode",
            "fixed",
            "--runs",
            "3",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
            "--corpus",
            "none",
            "--explore",
            "0",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] in (0, 3), result["code"]  # 3: passed, the spec has untestable parts
    modules = set(result["modules"])
    # the run decided the case (the statistics and the report were used) ...
    assert {"agentprop._stats.sequential", "agentprop._pipeline.report"} <= modules
    # ... without the heavy modules
    assert not [
        m for m in NOT_IMPORTED if m in modules or any(k.startswith(m + ".") for k in modules)
    ]
