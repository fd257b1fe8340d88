"""The pytest plugin is light: a project that never calls agentprop does not import it.

The plugin loads in every pytest run where agentprop is installed; it imports only the standard
library, pytest and two small modules, and makes the session (memo, corpus, budget) the first
time a check asks for one. ``benchmarks/startup.py`` measures what that costs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "agentprop._decide",
    "agentprop._agents",
    "agentprop._scenario",
    "agentprop._spec",
    "agentprop._pipeline",
    "agentprop.strategies",
)

CONFTEST = """
import json
import sys


def pytest_sessionfinish(session):
    with open("modules.json", "w") as f:
        json.dump(sorted(m for m in sys.modules if m.startswith(("agentprop", "hypothesis"))), f)
"""


def loaded_after(tmp_path: Path, test: str) -> tuple[list[str], str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_it.py").write_text(test)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "test_it.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return list(json.loads((tmp_path / "modules.json").read_text())), proc.stdout


def test_a_project_that_does_not_use_agentprop_does_not_import_it(tmp_path: Path) -> None:
    loaded, out = loaded_after(tmp_path, "def test_one():\n    assert 1 + 1 == 2\n")
    assert "agentprop.pytest_plugin" in loaded  # the plugin did load
    assert "=== agentprop ===" not in out  # and has nothing to say
    assert [m for m in loaded if m.startswith(HEAVY) or m == "hypothesis"] == []


def test_the_session_is_made_when_a_check_first_needs_it(tmp_path: Path) -> None:
    test = (
        "import agentprop\n\n\n"
        "def test_check():\n"
        "    result = agentprop.check(lambda m: {'ok': True}, ['hi'], lambda t: True)\n"
        "    assert result.passed\n"
    )
    loaded, out = loaded_after(tmp_path, test)
    assert "agentprop._decide.session" in loaded
    assert "1 checks, 1 passed" in out  # recorded in the plugin's session, summarised at the end


def test_loading_the_plugin_imports_nothing_for_fresh_seeds() -> None:
    # secrets (and with it hmac and _hashlib) is for --agentprop-fresh only: loaded when asked
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    code = (
        "import sys, agentprop.pytest_plugin; print(sorted({'secrets', 'hmac', '_hashlib'} "
        "& set(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_the_startup_benchmark_reads_its_runs_by_median_minimum_and_spread() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "startup_benchmark", ROOT / "benchmarks" / "startup.py"
    )
    assert spec is not None and spec.loader is not None
    startup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(startup)
    # one round disturbed by another process
    with_it, without = [110.0, 180.0, 95.0, 130.0], [100.0, 100.0, 90.0, 120.0]
    # the disturbed pair moves neither figure
    assert startup.overhead(with_it, without) == (10.0, 5.0)
    assert startup.spread(with_it, without) == 56.25 and startup.spread([1.0], [0.0]) == 0.0
