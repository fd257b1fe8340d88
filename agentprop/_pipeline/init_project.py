"""``agentprop init``: a spec and bindings skeleton from the tools a team already has.

Tools come from an MCP server, Python functions or OpenAI function schemas. It writes
``spec.yaml`` (the tools, ``respond``, a response contract and a two-leaf tree stub) and
``agentprop.yaml`` (bindings that realise the stub). Every place left to fill carries a
``# STUB:`` comment that ``agentprop lint`` lists (``S001``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentprop._spec.lint import LintFinding
from agentprop.errors import InputError, SourceLocation


@dataclass(frozen=True)
class SourceTool:
    """A tool as the source describes it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


# ----------------------------------------------------------------- sources


def _openai_entry(entry: Any, where: str) -> SourceTool:
    if not isinstance(entry, Mapping):
        raise InputError(
            f"{where}: a tool must be a JSON object, not {type(entry).__name__}",
            expected='{"type": "function", "function": {"name": ..., "description": ..., '
            '"parameters": {...}}}',
            fix="write each tool as an OpenAI function schema",
        )
    body: Mapping[str, Any] = (
        entry["function"] if isinstance(entry.get("function"), Mapping) else entry
    )
    if entry.get("type") not in (None, "function"):
        raise InputError(
            f"{where}: tool type {entry.get('type')!r} is not a function",
            fix="keep only function tools in the file",
        )
    name = body.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(
            f"{where}: the tool has no valid name ({name!r})",
            expected="a name of letters, digits and _ . -",
            fix='give the tool a "name"',
        )
    params = body.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, Mapping) or params.get("type", "object") != "object":
        raise InputError(
            f"{where}: the parameters of {name} are not a JSON Schema object",
            expected='"parameters": {"type": "object", "properties": {...}}',
            fix=f"fix the parameters of {name}",
        )
    return SourceTool(
        name=name, description=str(body.get("description") or ""), input_schema=dict(params)
    )


def tools_from_openai_file(path: Path) -> list[SourceTool]:
    """The tools of a JSON file of OpenAI function schemas."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read {path}: {exc.strerror}",
            fix="give the path of a JSON file of OpenAI function schemas",
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path} is not JSON: {exc.msg}",
            location=SourceLocation(path, exc.lineno, exc.colno),
            fix="fix the JSON at that line",
        ) from None
    entries = data.get("tools") if isinstance(data, Mapping) and "tools" in data else data
    if isinstance(entries, Mapping):
        entries = [entries]
    if not isinstance(entries, list) or not entries:
        raise InputError(
            f"{path} holds no tools",
            expected='a JSON list of function schemas (or {"tools": [...]})',
            fix="export your tools as the list you pass to the OpenAI API",
        )
    return [_openai_entry(e, f"{path}: tool {i}") for i, e in enumerate(entries)]


def tools_from_python(ref: str, base_dir: Path) -> list[SourceTool]:
    """The tools a spec-free test gives its agent (``MODULE:ATTR``: a function, a list of
    functions, or ``{name: function}``): each function's name, the first paragraph of its
    docstring, its parameters as a JSON Schema (from their annotations, through pydantic) and,
    when it is annotated to return an object, its output schema."""
    import inspect

    from pydantic import BaseModel, TypeAdapter, create_model

    from agentprop._scenario.build import load_object

    obj = load_object(ref, base_dir, what="tools")
    items = (
        list(obj.items())
        if isinstance(obj, Mapping)
        else [
            (getattr(f, "__name__", ""), f)
            for f in (obj if isinstance(obj, list | tuple) else [obj])
        ]
    )
    tools: list[SourceTool] = []
    for name, fn in items:
        if not callable(fn) or not _NAME.match(name or ""):
            raise InputError(
                f"{ref}: {name or fn!r} is not a named function",
                fix="point --python-tools at a function, a list of functions or {name: function}",
            )
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            raise InputError(
                f"{ref}: cannot read the parameters of {name}", fix="give it a Python signature"
            ) from None
        fields: dict[str, Any] = {
            p.name: (
                Any if p.annotation is inspect.Parameter.empty else p.annotation,
                ... if p.default is inspect.Parameter.empty else p.default,
            )
            for p in signature.parameters.values()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        }
        args_model: type[BaseModel] = create_model(f"{name}_args", **fields)
        params: dict[str, Any] = args_model.model_json_schema()
        params.pop("title", None)
        output: dict[str, Any] | None = None
        if signature.return_annotation is not inspect.Signature.empty:
            try:
                schema = TypeAdapter(signature.return_annotation).json_schema()
            except Exception:  # an annotation pydantic cannot describe: no output schema
                schema = {}
            output = schema if schema.get("type") == "object" else None
        description = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        tools.append(
            SourceTool(
                name=name, description=description, input_schema=params, output_schema=output
            )
        )
    if not tools:
        raise InputError(
            f"{ref} holds no tools",
            fix="point --python-tools at a function, a list of functions or {name: function}",
        )
    return tools


async def _list_mcp_tools(server: Any) -> list[SourceTool]:
    from agentprop._agents.mcp_compat import Client, get

    tools: list[SourceTool] = []
    async with Client(server) as client:
        cursor: str | None = None
        for _ in range(100):
            result = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
            for t in result.tools:
                tools.append(
                    SourceTool(
                        name=t.name,
                        description=t.description or "",
                        input_schema=dict(get(t, "input_schema") or {"type": "object"}),
                        output_schema=dict(get(t, "output_schema"))
                        if get(t, "output_schema")
                        else None,
                    )
                )
            cursor = get(result, "next_cursor")
            if not cursor:
                break
    return tools


def tools_from_mcp(
    command: str | None = None, url: str | None = None, *, timeout_s: float = 60.0
) -> list[SourceTool]:
    """The tools an MCP server lists: started with ``command`` (stdio) or reached at ``url``."""
    from agentprop._util.mcp_sdk import mcp_sdk_problem

    sdk = mcp_sdk_problem("reading an MCP server (agentprop init --mcp)")
    if sdk is not None:
        raise InputError(sdk.problem, fix=sdk.fix)
    try:
        from agentprop._agents.mcp_compat import StdioServerParameters
    except ImportError as exc:
        raise InputError(
            f"reading an MCP server could not import the installed MCP SDK: {exc}",
            fix="reinstall it: pip install --force-reinstall 'agentprop[mcp]'",
        ) from None
    if command is not None:
        words = shlex.split(command)
        if not words:
            raise InputError("--mcp needs a command", fix='e.g. --mcp "python my_server.py"')
        server: Any = StdioServerParameters(command=words[0], args=words[1:])
        what = f"the MCP server `{command}`"
    else:
        server = url
        what = f"the MCP server at {url}"

    async def listed() -> list[SourceTool]:
        async with asyncio.timeout(timeout_s):
            return await _list_mcp_tools(server)

    try:
        tools = asyncio.run(listed())
    except TimeoutError:
        raise InputError(
            f"{what} did not list its tools within {timeout_s:g} s",
            fix="check that it starts and speaks MCP",
        ) from None
    except Exception as exc:  # connection refused, spawn failure, protocol error
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        raise InputError(
            f"cannot list the tools of {what}: {type(leaf).__name__}: {leaf}",
            fix="check the command or URL (a streamable HTTP endpoint ends in /mcp)",
        ) from None
    if not tools:
        raise InputError(
            f"{what} lists no tools", fix="point --mcp at the server that has your agent's tools"
        )
    return tools


# ----------------------------------------------------------------- the skeleton


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "my_agent"


def _dump(value: Any, indent: int) -> str:
    text = yaml.safe_dump(
        value, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )
    pad = " " * indent
    return "".join(pad + line + "\n" for line in text.splitlines())


_RESPOND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "node_id": {"type": "string", "description": "The decision-tree node the agent ended at."},
        "decision": {"type": "string"},
        "tool_actions": {
            "type": "array",
            "items": {"type": "string"},
            "description": "The tools called this turn, in order.",
        },
        "evidence": {
            "type": "string",
            "description": "What the decision rests on, citing tool outputs.",
        },
        "user_message": {"type": "string", "description": "What the user is told."},
    },
    "required": ["node_id", "decision", "tool_actions", "evidence", "user_message"],
}


def _respond_contract(respond: SourceTool | None) -> tuple[dict[str, Any], list[str], list[str]]:
    """The respond schema, its required fields and the decisions (the source's own respond
    tool, when it has one, e.g. a world served by ``agentprop serve``)."""
    if respond is None:
        return _RESPOND_SCHEMA, list(_RESPOND_SCHEMA["required"]), ["ANSWERED", "CLARIFY"]
    schema = dict(respond.input_schema)
    decision = (schema.get("properties") or {}).get("decision") or {}
    decisions = [str(d) for d in decision.get("enum") or []] or ["ANSWERED", "CLARIFY"]
    required = [str(r) for r in schema.get("required") or []] or ["decision"]
    if "decision" not in required:
        required.insert(0, "decision")
    return schema, required, decisions


def spec_yaml(tools: Sequence[SourceTool], *, spec_id: str, title: str, source: str) -> str:
    """The text of the skeleton spec."""
    respond = next((t for t in tools if t.name == "respond"), None)
    actions = [t for t in tools if t.name != "respond"]
    schema, required, decisions = _respond_contract(respond)
    first, second = decisions[0], decisions[1] if len(decisions) > 1 else decisions[0]
    optional = [f for f in (schema.get("properties") or {}) if f not in required]
    tool = actions[0].name if actions else None
    out = [
        f"# Spec skeleton written by `agentprop init` from {source}.",
        "# The tools are filled in; the places left for you are marked STUB, and "
        "`agentprop lint` lists them.",
        "# The format is TDAD / SpecSuite-Core: docs/reference.md describes every key.",
        f"spec_id: {spec_id}",
        f"title: {json.dumps(title)}",
        "risk_level: medium            # low, medium, high or critical (high and up: every case "
        "needs 50 clean runs)",
        "version: '1.0'",
        "assumptions: []",
        "defaults:",
        "  reliability:",
        "    reruns: 10",
        "    min_pass_rate: 0.9          # the pass rate each case must show",
        "  limits:",
        "    max_tool_calls_per_turn: 6",
        "tools:",
    ]
    for t in actions:
        out.append(f"- name: {t.name}")
        out.append(f"  description: {json.dumps(t.description)}")
        out.append("  input_schema:")
        out.append(_dump(t.input_schema, 4).rstrip("\n"))
        if t.output_schema:
            out.append("  output_schema:")
            out.append(_dump(t.output_schema, 4).rstrip("\n"))
        else:
            out.append(
                "  # STUB: describe what the tool returns; agentprop makes the "
                "world's outputs from it"
            )
            out.append("  output_schema: {type: object, properties: {}}")
        out.append("  failure_modes: []   # e.g. [timeout, not_found]: failures a test may inject")
    out += [
        "- name: respond",
        "  description: "
        + json.dumps(
            respond.description
            if respond is not None and respond.description
            else "End the turn with the structured response."
        ),
        "  input_schema:",
        _dump(schema, 4).rstrip("\n"),
        "policies: []                  # rules every turn must keep, e.g. {id: "
        "P1_NO_PII, text: ...}",
        "response_contract:",
        f"  required_json_fields: {json.dumps(required)}",
        f"  optional_json_fields: {json.dumps(optional)}",
        "  # STUB: the decisions your agent makes, one per kind of outcome",
        f"  decision_enum: {json.dumps(decisions)}",
        "# STUB: the decision tree, one node per situation your agent must tell apart",
        "# A node's branches say (`when`) which condition sends it where; a "
        "leaf (no branches) is an",
        "# outcome named END_<DECISION>. This stub routes on one variable, `intent`, "
        "bound in agentprop.yaml.",
        "decision_tree:",
        "- node_id: N1_ROUTE",
        "  description: Decide what the user needs.",
        "  branches:",
        "  - when: intent == answerable",
        f"    next: END_{first}",
        "  - when: intent == unclear",
        f"    next: END_{second}",
        f"- node_id: END_{first}",
        "  description: Answer from the tools' outputs.",
        "  requirements:",
        f"    must_call_tools_in_order: [{tool}]   # STUB: the tools this outcome needs, in order"
        if tool
        else "    must_call_tools_in_order: []",
        f"- node_id: END_{second}",
        "  description: Ask the user what they mean.",
    ]
    return "\n".join(out) + "\n"


def bindings_yaml(tools: Sequence[SourceTool], *, spec_file: str = "spec.yaml") -> str:
    """The text of the skeleton bindings."""
    names = [t.name for t in tools if t.name != "respond"]
    world = "\n".join(f"  {n}: {{}}" for n in names) or "  {}"
    return "\n".join(
        [
            "# agentprop bindings written by `agentprop init`: how each condition "
            "of the decision tree",
            "# is realised in a test (docs/reference.md#bindings). Places to "
            "fill in are marked STUB.",
            "version: 1",
            f"spec: {spec_file}",
            "# STUB: your agent, MODULE:ATTR (agent.py beside this file -> "
            "agent:MyAgent), or pass --agent",
            "# agent: agent:MyAgent",
            "context: {}                     # what the agent is given besides the messages, "
            "e.g. {account_id: A1}",
            "slots: {}                       # values placed in utterances and worlds, "
            "e.g. {order_id: O-1}",
            "# STUB: the happy-path output of each tool (fields of its output_schema)",
            "world:",
            world,
            "variables:",
            "  intent:",
            "    utterance:",
            "      # STUB: what a user says for each value of `intent` (two or more ways each)",
            '      answerable: ["A question your tools can answer."]',
            '      unclear: ["Hmm, can you sort out the thing?"]',
            "",
        ]
    )


_ABSOLUTE = re.compile(r"(?<![\w.:/])(?:[A-Za-z]:)?[/\\][^\s'\"`<>]+")
_URL_QUERY = re.compile(r"(\bhttps?://[^\s?'\"`]+)\?[^\s'\"`]*")


def portable_source(source: str, directory: Path) -> str:
    """``source`` as the skeleton may record it: absolute paths made relative to ``directory``
    (a Python interpreter or a path far outside it by its name alone), and a URL's query (the
    token ``agentprop serve`` prints) left out, so a skeleton carries no machine's paths and no
    secret."""
    source = _URL_QUERY.sub(r"\1", source)
    base = directory.resolve()

    def relative(match: re.Match[str]) -> str:
        path = Path(match.group(0))
        if path.name.startswith("python") or Path(sys.executable).resolve() == path.resolve():
            return path.name.split(".exe")[0] if path.name.startswith("python") else path.name
        try:
            rel = os.path.relpath(path, base)
        except ValueError:  # another drive
            return path.name
        return path.name if rel.count("..") > 3 else rel

    return _ABSOLUTE.sub(relative, source)


def write_skeleton(
    directory: Path,
    tools: Sequence[SourceTool],
    *,
    source: str,
    name: str | None = None,
    force: bool = False,
) -> list[Path]:
    """Write ``spec.yaml`` and ``agentprop.yaml`` into ``directory`` (refusing to overwrite
    either without ``force``); returns the paths written."""
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise InputError(
                f"{source} lists the tool {t.name!r} twice", fix="give every tool its own name"
            )
        seen.add(t.name)
    spec_path, bindings_path = directory / "spec.yaml", directory / "agentprop.yaml"
    existing = [p for p in (spec_path, bindings_path) if p.exists()]
    if existing and not force:
        raise InputError(
            f"{', '.join(map(str, existing))} already exist{'s' if len(existing) == 1 else ''}",
            fix="choose another directory, or pass --force to overwrite",
        )
    label = name or directory.resolve().name
    directory.mkdir(parents=True, exist_ok=True)
    recorded = portable_source(source, directory)
    spec_path.write_text(
        spec_yaml(tools, spec_id=f"{_slug(label)}_v1", title=label, source=recorded),
        encoding="utf-8",
    )
    bindings_path.write_text(bindings_yaml(tools), encoding="utf-8")
    return [spec_path, bindings_path]


_STUB = re.compile(r"#\s*STUB:\s*(.*)$")


def stub_findings(*paths: Path | None) -> list[LintFinding]:
    """Warning S001 for every ``# STUB:`` place left in these files."""
    out: list[LintFinding] = []
    for path in paths:
        if path is None or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            m = _STUB.search(line)
            if m:
                out.append(
                    LintFinding(
                        code="S001",
                        severity="warning",
                        message="left for you by `agentprop init`: " + m.group(1).strip(),
                        file=str(path),
                        line=n,
                        column=m.start() + 1,
                        fix="write it, then delete the `# STUB:` comment "
                        "(docs/getting-started.md#7-start-from-your-own-tools)",
                    )
                )
    return out


__all__ = [
    "SourceTool",
    "bindings_yaml",
    "spec_yaml",
    "stub_findings",
    "tools_from_mcp",
    "tools_from_openai_file",
    "write_skeleton",
]
