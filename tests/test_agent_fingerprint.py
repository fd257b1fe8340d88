"""The agent fingerprint covers the agent's own source and the project modules it imports
(issue #23 item 9): editing a helper module invalidates memoised runs of the agent."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentprop._agents.loading import load_agent, source_files

AGENT = """
from {pkg}.helpers import reply


class Agent:
    def turn(self, message, ctx):
        ctx.respond(reply(message))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    pkg = f"fp_project_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**8}"
    root = tmp_path / pkg
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "helpers.py").write_text(
        "import json\n\ndef reply(m):\n    return {'decision': 'ANSWER'}\n"
    )
    (root / "agent.py").write_text(AGENT.format(pkg=pkg))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, pkg
    for name in [n for n in sys.modules if n.startswith(pkg)]:
        del sys.modules[name]


def test_editing_a_helper_the_agent_imports_changes_its_fingerprint(
    project: tuple[Path, str],
) -> None:
    tmp, pkg = project
    before = load_agent(f"{pkg}.agent:Agent", tmp)
    files = source_files(before.target)
    # json (stdlib) is not the project's
    assert [Path(f).name for f in files] == ["agent.py", "helpers.py"]
    helpers = tmp / pkg / "helpers.py"
    helpers.write_text(helpers.read_text().replace("ANSWER", "REFUSE"))
    os.utime(helpers, (1, 1))  # a new file version even within the same clock tick
    after = load_agent(f"{pkg}.agent:Agent", tmp)
    assert after.fingerprint != before.fingerprint
    again = load_agent(f"{pkg}.agent:Agent", tmp)
    assert again.fingerprint == after.fingerprint
