"""`agentprop init`: a spec and bindings skeleton from an MCP server's tools or OpenAI schemas."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from agentprop import load_project
from agentprop._cli import main
from agentprop.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
SUPPORTOPS = ROOT / "examples" / "supportops"


def test_init_from_openai_schemas_writes_a_skeleton_that_lint_explains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "orders"
    assert main(["init", str(target), "--openai-tools", str(QUICKSTART / "tools.json")]) == 0
    printed = capsys.readouterr().out
    assert "2 tool(s)" in printed and "(get_order, cancel_order)" in printed
    spec = load_spec(target / "spec.yaml")
    assert spec.spec_id == "orders_v1"
    source = json.loads((QUICKSTART / "tools.json").read_text())
    for entry in source:
        fn = entry["function"]
        tool = spec.tool(fn["name"])
        assert tool.description == fn["description"] and tool.input_schema == fn["parameters"]
    assert spec.response_contract.decision_enum == ["ANSWERED", "CLARIFY"]
    # the stub tree is a real tree: its paths build cases once an agent is there
    project = load_project(target)
    assert sorted(s.id for s in project.scenarios()) == [
        "END_ANSWERED<-N1_ROUTE",
        "END_CLARIFY<-N1_ROUTE",
    ]
    assert main(["lint", str(target)]) == 0
    lint = capsys.readouterr().out
    stubs = [line for line in lint.splitlines() if "warning S001" in line]
    assert len(stubs) == 8 and all("left for you by `agentprop init`" in s for s in stubs)
    assert any("agentprop.yaml:" in s and "your agent, MODULE:ATTR" in s for s in stubs)


def test_init_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["init", str(tmp_path), "--openai-tools", str(QUICKSTART / "tools.json")]
    assert main(args) == 0
    (tmp_path / "spec.yaml").write_text("edited", encoding="utf-8")
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "spec.yaml, " in err and "already exist" in err and "--force" in err
    assert (tmp_path / "spec.yaml").read_text() == "edited"
    assert main([*args, "--force"]) == 0
    assert load_spec(tmp_path / "spec.yaml").spec_id.endswith("_v1")


def test_the_shipped_skeleton_is_what_init_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/getting-started.md lints examples/quickstart/skeleton as the skeleton init writes."""
    monkeypatch.chdir(ROOT)
    assert (
        main(
            [
                "init",
                str(tmp_path / "skeleton"),
                "--openai-tools",
                "examples/quickstart/tools.json",
                "--name",
                "quickstart",
            ]
        )
        == 0
    )
    for name in ("spec.yaml", "agentprop.yaml"):
        assert (tmp_path / "skeleton" / name).read_text() == (
            QUICKSTART / "skeleton" / name
        ).read_text(), name


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('[{"type": "function",\n "function": {"name": }}]', "is not JSON"),
        ('[{"type": "function", "function": {"description": "no name"}}]', "has no valid name"),
        ('{"tools": []}', "holds no tools"),
        ('[{"name": "f", "parameters": {"type": "string"}}]', "not a JSON Schema object"),
    ],
)
def test_bad_tool_files_are_input_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(content, encoding="utf-8")
    assert main(["init", str(tmp_path / "out"), "--openai-tools", str(tools)]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(tools) in err
    assert not (tmp_path / "out" / "spec.yaml").exists()


def test_responses_api_and_bare_function_entries_are_read(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            {
                "tools": [
                    {
                        "type": "function",
                        "name": "search",
                        "description": "Search.",
                        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                    },
                    {
                        "name": "fetch",
                        "parameters": {
                            "type": "object",
                            "properties": {"url": {"type": "string"}},
                            "required": ["url"],
                        },
                    },
                ]
            }
        ),
        encoding="utf-8",
    )
    assert main(["init", str(tmp_path / "out"), "--openai-tools", str(tools)]) == 0
    spec = load_spec(tmp_path / "out" / "spec.yaml")
    assert [t.name for t in spec.action_tools] == ["search", "fetch"]
    assert spec.tool("fetch").input_schema["required"] == ["url"]


def _supportops_tools() -> dict[str, dict[str, object]]:
    spec = load_spec(SUPPORTOPS / "spec.yaml")
    return {t.name: t.input_schema for t in spec.action_tools}


def test_init_from_an_mcp_server_over_http(tmp_path: Path) -> None:
    """The MCP source here is agentprop's own world server for SupportOps: the skeleton gets
    its tools and schemas, and a response contract from its respond tool."""
    pytest.importorskip("mcp")
    from agentprop.mcp import CaseServer, HttpCaseServer

    project = load_project(SUPPORTOPS)
    with HttpCaseServer(
        CaseServer(project, project.scenario("END_CANCELLED<-N7_CANCEL"))
    ) as running:
        assert main(["init", str(tmp_path), "--mcp-url", running.url, "--name", "Support Ops"]) == 0
        token = running.case.token
    text = (tmp_path / "spec.yaml").read_text()
    assert token not in text and "/mcp." in text  # the server's token is no part of the skeleton
    spec = load_spec(tmp_path / "spec.yaml")
    assert spec.spec_id == "support_ops_v1"
    assert {t.name: t.input_schema for t in spec.action_tools} == _supportops_tools()
    assert spec.response_contract.decision_enum == project.spec.response_contract.decision_enum
    assert set(spec.response_contract.required_json_fields) == set(
        project.spec.response_contract.required_json_fields
    )
    # the tree stub routes to two of the server's decisions
    leaves = [n.node_id for n in spec.decision_tree if n.is_terminal]
    assert leaves == [f"END_{d}" for d in spec.response_contract.decision_enum[:2]]


def test_init_from_an_mcp_server_over_stdio(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    command = (
        f"{sys.executable} -m agentprop serve {SUPPORTOPS} --case "
        "END_CANCELLED<-N7_CANCEL --record none"
    )
    monkey_env = {"PYTHONPATH": str(ROOT)}
    import os

    saved = os.environ.get("PYTHONPATH")
    os.environ.update(monkey_env)
    try:
        assert main(["init", str(tmp_path), "--mcp", command]) == 0
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    text = (tmp_path / "spec.yaml").read_text()
    # no machine's paths: the interpreter by its name, the served spec relative to the skeleton
    assert (
        sys.executable not in text
        and str(ROOT) not in text
        and "`python -m agentprop serve " in text
    )
    spec = load_spec(tmp_path / "spec.yaml")
    assert {t.name: t.input_schema for t in spec.action_tools} == _supportops_tools()
    bindings = yaml.safe_load((tmp_path / "agentprop.yaml").read_text())
    assert set(bindings["world"]) == set(_supportops_tools())


def test_an_unreachable_mcp_server_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("mcp")
    assert main(["init", str(tmp_path), "--mcp-url", "http://127.0.0.1:9/mcp"]) == 2
    err = capsys.readouterr().err
    assert "cannot list the tools of the MCP server at http://127.0.0.1:9/mcp" in err


PYTHON_TOOLS = '''
def query_order(order_id: str, verbose: bool = False) -> dict[str, str]:
    """Look an order up.

    More words that stay out of the spec's description."""
    return {"order_id": order_id}


def cancel_order(order_id: str) -> None:
    """Cancel an order."""


TOOLS = [query_order, cancel_order]
'''


def test_init_from_the_python_tools_of_a_spec_free_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_tools.py").write_text(PYTHON_TOOLS)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "orders", "--python-tools", "my_tools:TOOLS"]) == 0
    assert "(query_order, cancel_order)" in capsys.readouterr().out
    spec = load_spec(tmp_path / "orders" / "spec.yaml")
    query = spec.tool("query_order")
    assert query.description == "Look an order up."
    assert query.input_schema["required"] == ["order_id"]
    assert (
        query.input_schema["properties"]["order_id"]["type"] == "string"
        and query.input_schema["properties"]["verbose"]["default"] is False
    )
    assert query.output_schema is not None and query.output_schema["type"] == "object"
    # returns None: the skeleton's empty object
    assert spec.tool("cancel_order").output_schema == {"type": "object", "properties": {}}
    assert main(["lint", "orders"]) == 0
    # no such name: a usage error
    assert main(["init", "bad", "--python-tools", "my_tools:ORDERS"]) == 2
