"""``agentprop init``: a spec and bindings skeleton from the tools a team already has."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from agentprop._cli.common import EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = sub.add_parser(
        "init",
        help="write a spec and bindings skeleton from the tools you have (Python functions, an "
        "MCP server, or OpenAI function schemas)",
    )
    init.add_argument(
        "dir", help="directory to write spec.yaml and agentprop.yaml into (created if needed)"
    )
    source = init.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--openai-tools",
        metavar="FILE",
        help="JSON file of OpenAI function schemas (the `tools` list you pass to the API)",
    )
    source.add_argument(
        "--python-tools",
        metavar="MODULE:ATTR",
        help="the Python functions a spec-free test gives its agent: a function, a list of "
        "them or {name: function}",
    )
    source.add_argument(
        "--mcp",
        metavar="COMMAND",
        help='an MCP server to start over stdio, e.g. "python my_server.py"; '
        "its tools/list is read",
    )
    source.add_argument(
        "--mcp-url",
        metavar="URL",
        help="a running MCP server's streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp",
    )
    init.add_argument(
        "--name",
        help="the agent's name: spec_id NAME_v1 and the title (default: the directory's name)",
    )
    init.add_argument(
        "--force", action="store_true", help="overwrite spec.yaml and agentprop.yaml if they exist"
    )
    init.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    """`agentprop init`: the spec and bindings skeleton (agentprop._pipeline.init_project)."""
    from agentprop._pipeline.init_project import (
        stub_findings,
        tools_from_mcp,
        tools_from_openai_file,
        tools_from_python,
        write_skeleton,
    )

    if args.openai_tools:
        tools, source = tools_from_openai_file(Path(args.openai_tools)), args.openai_tools
    elif args.python_tools:
        tools, source = (
            tools_from_python(args.python_tools, Path.cwd()),
            f"the Python functions {args.python_tools}",
        )
    elif args.mcp:
        tools, source = tools_from_mcp(command=args.mcp), f"the MCP server `{args.mcp}`"
    else:
        tools, source = tools_from_mcp(url=args.mcp_url), f"the MCP server at {args.mcp_url}"
    directory = Path(args.dir)
    spec_path, bindings_path = write_skeleton(
        directory, tools, source=source, name=args.name, force=args.force
    )
    actions = [t.name for t in tools if t.name != "respond"]
    print(
        f"wrote {spec_path}: {len(actions)} tool(s) from {source} ({', '.join(actions)}), a "
        "respond tool, a response contract and a decision-tree stub",
        file=out,
    )
    print(
        f"wrote {bindings_path}: bindings for the stub (utterances for `intent`, an "
        "empty happy-path world)",
        file=out,
    )
    stubs = stub_findings(spec_path, bindings_path)
    print(
        f"next: `agentprop lint {directory}` lists the {len(stubs)} places left for you (S001); "
        "docs/getting-started.md#7-start-from-your-own-tools walks through them",
        file=out,
    )
    return EXIT_OK
