"""Shared fixtures: where the SpecSuite-Core specs and the SupportOps example live."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy  # noqa: F401  (see below)
import pytest

import agentprop._decide.corpus
from agentprop._agents.project import Project, load_project
from agentprop._spec.bindings import Bindings, load_bindings
from agentprop._spec.load import load_spec
from agentprop._spec.model import Spec

# numpy is imported here, before any test, because agentprop imports it lazily and pytester's
# in-process runs drop every module first imported inside them from sys.modules afterwards;
# numpy cannot be loaded twice in one process, so a later test importing it again failed
# ("cannot load module more than once per process") whenever it ran after such a run.

# The suite is hermetic about where it runs: CI services set ``CI``, which switches the API
# cache to replay-only and snapshots to refuse updates; a user's shell may hold fault knobs for
# the examples, an approver, API keys or base URLs. Tests of that behaviour set them themselves
# (monkeypatch.setenv); every other test runs as on a fresh machine, subprocesses included.
HOST_ENVIRONMENT = (
    "CI",
    "AGENTPROP_CACHE_MODE",
    "AGENTPROP_FAULTS",
    "AGENTPROP_APPROVER",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENTPROP_STORE",
    "AGENTPROP_RUN_ID",
    "AGENTPROP_INPUT_MODEL",
)
for _name in HOST_ENVIRONMENT:
    os.environ.pop(_name, None)
os.environ["AGENTPROP_SEED"] = "0"
"""`agentprop run` explores new inputs each run outside CI; the suite (docs outputs included)
keeps seed 0's, as CI does. Tests of the per-run seed unset it."""

REPO_ROOT = Path(__file__).resolve().parents[1]
SPECSUITE_DIR = REPO_ROOT / "tests" / "data" / "specsuite-core"
"""The SpecSuite-Core specs, packs and prompts, vendored with their licence (see
THIRD_PARTY.md there)."""
SUPPORTOPS_EXAMPLE_DIR = REPO_ROOT / "examples" / "supportops"
RUNBOOK_DIR = REPO_ROOT / "tests" / "data" / "promises" / "runbook"
"""A spec whose responses carry grounded fields (node ids, tool actions, evidence)."""


@pytest.fixture(scope="session")
def specsuite_dir() -> Path:
    """The vendored SpecSuite-Core data (tests/data/specsuite-core): unchanged third-party specs."""
    return SPECSUITE_DIR


@pytest.fixture(scope="session")
def supportops_example_dir() -> Path:
    """``examples/supportops``: spec.yaml + agentprop.yaml bindings + agent.py."""
    return SUPPORTOPS_EXAMPLE_DIR


@pytest.fixture(scope="session")
def supportops_spec(supportops_example_dir: Path) -> Spec:
    return load_spec(supportops_example_dir / "spec.yaml")


@pytest.fixture(scope="session")
def supportops_bindings(supportops_example_dir: Path, supportops_spec: Spec) -> Bindings:
    return load_bindings(supportops_example_dir / "agentprop.yaml", supportops_spec)


@pytest.fixture(scope="session")
def supportops_project(supportops_example_dir: Path) -> Project:
    """``examples/supportops`` loaded once per session (never at import, so collecting loads
    nothing); shared by every module, so a test must not change it."""
    return load_project(supportops_example_dir)


@pytest.fixture(scope="session")
def runbook_project() -> Project:
    """``tests/data/promises/runbook`` loaded once per session; a test must not change it."""
    return load_project(RUNBOOK_DIR)


REAL_DEFAULT_CORPUS_DIR = agentprop._decide.corpus.default_corpus_dir
"""The real default (beside the bindings), for the tests of the default location itself."""


@pytest.fixture(autouse=True)
def _corpus_outside_the_repo(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default corpus sits beside the bindings, i.e. inside examples/ for the example
    projects: tests keep it in a temporary directory instead, so no test replays another's
    reproducers and the repository stays clean. Tests of the default location restore it
    with
    ``monkeypatch.setattr(agentprop._decide.corpus, "default_corpus_dir", REAL_DEFAULT_CORPUS_DIR)``."""  # noqa: E501
    root = tmp_path_factory.mktemp("corpus-default")
    monkeypatch.setattr(
        agentprop._decide.corpus, "default_corpus_dir", lambda project: root / project.spec.spec_id
    )


@pytest.fixture(scope="session")
def faulty_supportops_report():
    """A real run report: the SupportOps agent with ``skip_auth=0.3`` over the MFT and DIR
    cases, failures grouped into bugs and shrunk (a few seconds; shared by the report tests)."""
    from agentprop._agents.loading import load_agent
    from agentprop._agents.project import load_project
    from agentprop._decide.memo import TrialMemo
    from agentprop._pipeline.run import RunSettings, arun_cases, shrink_failures
    from agentprop._util.aio import run_sync

    project = load_project(SUPPORTOPS_EXAMPLE_DIR)
    agent = load_agent("agent:SupportOpsAgent", SUPPORTOPS_EXAMPLE_DIR, {"skip_auth": 0.3})
    memo = TrialMemo()
    report = run_sync(
        arun_cases(
            project,
            agent,
            project.scenarios(),
            RunSettings(kinds=("mft", "dir"), explore=0),
            problems=project.problems,
            memo=memo,
        )
    )
    shrink_failures(project, agent, report, budget=30, corpus=None, memo=memo)
    return report


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``redis-server`` on a free loopback port, for this test session only."""
    try:
        import redis
    except ImportError:
        pytest.skip("redis-py is not installed (pip install 'agentprop[redis]')")
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip(
            "redis-server is not installed (Debian: apt-get install redis-server; "
            ".ci/run installs it)"
        )
    port = _free_port()
    directory = tmp_path_factory.mktemp("redis")
    cmd = [
        server,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(directory),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        for _ in range(200):
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.skip(
                    f"redis-server could not start: {err.strip() or f'exit {proc.returncode}'}"
                )
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.skip(f"redis-server did not answer on port {port} within 10 s")
        yield url
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=30)
