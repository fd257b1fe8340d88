"""Which MCP SDK agentprop's MCP code can use, and the message when the installed one cannot.

langchain-mcp-adapters 0.3 requires mcp<2 while agentprop's MCP code needs mcp>=2.3: with both
installed, pip picks a 1.x SDK, and ``agentprop serve`` must say that (which version, held down
by which package), not that the SDK is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._util import mcp_sdk

SUPPORTOPS = Path(__file__).resolve().parents[1] / "examples" / "supportops"
CAP = "langchain-mcp-adapters 0.3.2 (mcp<2.0.0,>=1.24.0)"


def test_a_missing_sdk_an_old_one_and_a_capped_one_are_told_apart() -> None:
    missing = mcp_sdk.diagnose("agentprop serve", None, [])
    assert missing is not None and "not installed" in missing.problem and "agentprop[mcp]" in missing.fix
    old = mcp_sdk.diagnose("agentprop serve", "1.30.0", [])
    assert old is not None and "not installed" not in old.problem and "mcp 1.30.0 is installed" in old.problem
    assert old.fix == "pip install -U 'agentprop[mcp]'"
    capped = mcp_sdk.diagnose("agentprop serve", "1.30.0", [CAP])
    assert capped is not None and CAP in capped.problem and "environment of its own" in capped.fix
    assert mcp_sdk.diagnose("agentprop serve", "2.3.0", [CAP]) is None
    assert mcp_sdk.diagnose("agentprop serve", "2.10", []) is None


@pytest.mark.parametrize(
    ("spec", "excludes"),
    [("<2.0.0,>=1.24.0", True), ("<3,>=1.19.0", False), (">=2.3", False), ("==1.9.4", True), ("<=2.3", False), ("<2.3", True), ("", False)],
)
def test_only_requirements_that_rule_out_the_minimum_count_as_caps(spec: str, excludes: bool) -> None:
    assert mcp_sdk._excludes_min(spec) is excludes


def test_the_installed_sdk_is_read_from_package_metadata() -> None:
    pytest.importorskip("mcp")
    version = mcp_sdk.installed_mcp()
    assert version is not None
    assert (mcp_sdk.mcp_sdk_problem("x") is None) == (mcp_sdk._version_tuple(version) >= mcp_sdk.MIN_VERSION)


def test_serve_names_the_conflict_instead_of_saying_not_installed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(mcp_sdk, "installed_mcp", lambda: "1.30.0")
    monkeypatch.setattr(mcp_sdk, "capping_packages", lambda: [CAP])
    code = main(["serve", str(SUPPORTOPS), "--case", "END_BILLING_ANSWER<-N3_BILLING", "--record", "none"])
    err = capsys.readouterr().err
    assert code == 2
    assert "mcp 1.30.0 is installed" in err and CAP in err and "not installed" not in err
