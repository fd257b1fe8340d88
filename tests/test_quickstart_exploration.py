"""docs/getting-started.md's claim: the quickstart agent's first version read order ids in
capitals only, and the default run's exploration found it and shrank it to that one choice."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

from agentprop._cli import main

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def test_an_agent_that_reads_ids_in_capitals_only_is_found_by_the_default_exploration(
    tmp_path: Path,
) -> None:
    project = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, project)
    agent = project / "agent.py"
    fixed = agent.read_text(encoding="utf-8")
    first_version = fixed.replace(", re.IGNORECASE)", ")").replace(
        "found.group(1).upper()", "found.group(1)"
    )
    assert first_version != fixed
    agent.write_text(first_version, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["run", str(project), "--kinds", "mft,explore", "--corpus", "none"], out=out, err=err
    )
    text = out.getvalue()
    assert code == 1, text + err.getvalue()
    # the written cases pass: only an explored input, the id typed as users type it, fails
    assert re.search(r"^END_ANSWERED<-N1_ROUTE +PASS", text, re.M)
    assert "choices kept: turn 1: order_id lower" in text
    assert "reproducer: ['Where is my order o-1001?']" in text
