"""Which MCP SDK agentprop's MCP code can use, and the message when the installed one cannot.

agentprop runs on mcp 1.24+ below 2 (what langchain-mcp-adapters 0.3 and fastmcp 3 require) and on
2.3+; the early 2.x releases and anything older than 1.24 are refused, naming the installed version
and, when a package holds it down, that package -- never "not installed".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._util import mcp_sdk

SUPPORTOPS = Path(__file__).resolve().parents[1] / "examples" / "supportops"
LANGCHAIN_CAP = "langchain-mcp-adapters 0.3.2 (mcp<2.0.0,>=1.24.0)"
OLD_CAP = "old-adapter 0.1 (mcp<1.20)"


def test_a_missing_sdk_an_old_one_a_capped_one_and_an_early_2x_are_told_apart() -> None:
    missing = mcp_sdk.diagnose("agentprop serve", None, [])
    assert (
        missing is not None
        and "not installed" in missing.problem
        and "agentprop[mcp]" in missing.fix
    )
    old = mcp_sdk.diagnose("agentprop serve", "1.19.0", [])
    assert (
        old is not None
        and "not installed" not in old.problem
        and "mcp 1.19.0 is installed" in old.problem
    )
    assert old.fix == "pip install -U 'agentprop[mcp]'"
    capped = mcp_sdk.diagnose("agentprop serve", "1.19.0", [OLD_CAP])
    assert (
        capped is not None and OLD_CAP in capped.problem and "environment of its own" in capped.fix
    )
    early = mcp_sdk.diagnose("agentprop serve", "2.1.0", [])
    assert (
        early is not None
        and "mcp 2.1.0 is installed" in early.problem
        and "2.3" in early.fix
        and "<2" in early.fix
    )
    # what langchain-mcp-adapters holds it to, and 2.3+, both run
    for version in ("1.24.0", "1.30.0", "2.3.0", "2.10", "3.0"):
        assert mcp_sdk.diagnose("agentprop serve", version, [LANGCHAIN_CAP]) is None, version


@pytest.mark.parametrize(
    ("spec", "excludes"),
    [
        ("<2.0.0,>=1.24.0", False),
        ("<3,>=1.19.0", False),
        (">=2.3", False),
        ("==1.9.4", True),
        ("<=1.24", False),
        ("<1.24", True),
        ("<1.20", True),
        ("", False),
    ],
)
def test_only_requirements_that_rule_out_the_minimum_count_as_caps(
    spec: str, excludes: bool
) -> None:
    assert mcp_sdk._excludes_min(spec) is excludes


def test_the_installed_sdk_is_read_from_package_metadata() -> None:
    pytest.importorskip("mcp")
    version = mcp_sdk.installed_mcp()
    assert version is not None
    assert (mcp_sdk.mcp_sdk_problem("x") is None) == mcp_sdk.supported(version)


def test_serve_names_the_conflict_instead_of_saying_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(mcp_sdk, "installed_mcp", lambda: "1.19.0")
    monkeypatch.setattr(mcp_sdk, "capping_packages", lambda: [OLD_CAP])
    code = main(
        ["serve", str(SUPPORTOPS), "--case", "END_BILLING_ANSWER<-N3_BILLING", "--record", "none"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "mcp 1.19.0 is installed" in err and OLD_CAP in err and "not installed" not in err


def test_wire_types_are_built_and_read_the_same_on_either_sdk() -> None:
    """mcp 1.x names fields in camelCase, 2.x in snake_case with camelCase aliases: agentprop
    builds with the aliases and reads through mcp_compat.get, so its code runs on both."""
    pytest.importorskip("mcp")
    from agentprop._agents.mcp_compat import get, types

    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="x")], structuredContent={"a": 1}, isError=True
    )
    assert get(result, "is_error") is True and get(result, "structured_content") == {"a": 1}
    tool = types.Tool(name="t", inputSchema={"type": "object"})
    assert get(tool, "input_schema") == {"type": "object"} and get(tool, "output_schema") is None
