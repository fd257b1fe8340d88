"""What ``agentprop run`` imports: a fresh process pays for every module before its first model
call, and the run's time over the SDK alone counts it (issue 31, "the floor").

numpy took a fifth of a second of ``agentprop run``'s start-up, for an ``isinstance`` check on
``np.bool_`` and the shrinker's and the two-sample tests' arrays; those modules now import it
where it is used, and a run that shrinks nothing and compares no samples never imports it. The
same for Hypothesis (the strategies import it where a strategy is made; a run of MFT cases
draws none), rapidfuzz (one slip is read without it), the log importers (imported cases are
read without them), the test servers and the report renderers a run writes no file with.
``agentprop lint`` loads the spec, the bindings and the project, and checks a declared language
against the phrase packs, without the oracle, the model API or the paraphrase transforms."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentprop.testing import OpenAIServer, respond_reply, tool_use_reply

ROOT = Path(__file__).resolve().parents[1]

NOT_IMPORTED = (
    "numpy",
    "hypothesis",
    "rapidfuzz",
    "xml.etree",
    "http.server",
    "agentprop.testing",
    "agentprop._pipeline.importing",
    "agentprop._pipeline.report.html",
    "agentprop._pipeline.report.junit",
    "agentprop._pipeline.report.markdown",
)
"""Modules an ``agentprop run`` of a passing case through a model agent must not import (a
Python agent may import them itself: the SupportOps example imports rapidfuzz)."""

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


def _billing(request: dict[str, Any]) -> Any:
    """The SupportOps billing case's two replies: ``get_account``, then the answer."""
    if not any(m.get("role") == "assistant" for m in request["messages"]):
        return tool_use_reply("get_account", {"account_id": "A1"})
    return respond_reply(
        node_id="END_BILLING_ANSWER",
        decision="BILLING_ANSWER",
        tool_actions=["get_account"],
        evidence="get_account: plan PLAN-BASIC",
        user_message="You are on plan PLAN-BASIC; order O-1001 is processing.",
    )


def test_a_run_of_a_passing_case_does_not_import_the_heavy_modules(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OPENAI_API_KEY": "test",
    }
    with OpenAIServer(handler=_billing) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                SCRIPT,
                "run",
                str(ROOT / "examples" / "supportops"),
                "--agent",
                "openai",
                "--model",
                "gpt-4.1-mini",
                "--base-url",
                server.base_url,
                "--cache",
                str(tmp_path / "cache.sqlite"),
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
    # the run decided the case through the model agent (the statistics, the report and the
    # API's SDK were used) ...
    assert {"agentprop._stats.sequential", "agentprop._pipeline.report", "openai"} <= modules
    assert len(server.requests) == 6  # three runs of two calls
    # ... without the heavy modules
    assert not [
        m for m in NOT_IMPORTED if m in modules or any(k.startswith(m + ".") for k in modules)
    ]


LINT_DOES_NOT_IMPORT = (
    "agentprop._decide",
    "agentprop._judge",
    "agentprop._modelapi",
    "agentprop.strategies._internal.llm_pool",
    "agentprop.strategies._internal.paraphrase",
)
"""What ``agentprop lint`` has no use for: the oracle and its generator's choices, the judges, the
model API client, the model-written pool and the paraphrase transforms."""


def test_lint_does_not_import_the_oracle_or_the_paraphrase_transforms(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, "lint", str(ROOT / "examples" / "supportops")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    modules = set(result["modules"])
    # it linted the spec, loaded the project and read the phrase packs (languages: [en, zh]) ...
    assert {
        "agentprop._spec.lint",
        "agentprop._agents.project",
        "agentprop.strategies._internal.packs",
    } <= modules
    # ... without what only a run needs
    assert sorted(m for m in modules if m.startswith(LINT_DOES_NOT_IMPORT)) == []
