"""``agentprop serve``: one case's world as an MCP server; each session is one trial, recorded and decided."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TextIO

from agentprop._cli.common import EXIT_FAIL, EXIT_OK, require_cases
from agentprop._version import __version__
from agentprop.errors import InputError, InvalidArgument


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser("serve", help="serve one case's world as an MCP server: each session is one trial, recorded and decided")
    serve.add_argument("spec", help="spec directory (spec.yaml + agentprop.yaml) or spec file")
    serve.add_argument("--case", required=True, metavar="ID", help="the case to serve: its id, or a part of it that only it contains")
    serve.add_argument("--bindings", help="bindings file (default: agentprop.yaml next to the spec)")
    serve.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP on 127.0.0.1 (each Mcp-Session-Id session is one trial) instead of stdio (one process, one trial)",
    )
    serve.add_argument("--port", type=int, default=0, help="port of --http (default: a free one, printed)")
    serve.add_argument(
        "--record",
        metavar="FILE",
        help="JSON-lines file of finished trials; earlier trials in it count towards the decision (default .agentprop/mcp/SPEC_ID/CASE.jsonl beside the bindings; `none` keeps them in memory)",
    )
    serve.add_argument("--fresh", action="store_true", help="delete the record file first: start the case's trials afresh")
    serve.add_argument("--until-decided", action="store_true", help="with --http: stop serving once the case is decided")
    serve.add_argument("--report", action="store_true", help="serve nothing: print the decision over the recorded trials and exit (0 when PASS)")
    serve.add_argument(
        "--turn-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds a turn may take before the trial is recorded as timed out (default 300)",
    )
    serve.add_argument("--seed", type=int, default=0, help="trial namespace: worlds (canaries) differ per trial and seed (default 0)")
    serve.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    """`agentprop serve`: one case's world over MCP (agentprop.mcp.CaseServer). Over stdio the
    log goes to stderr: stdout is the protocol."""
    from agentprop._agents.project import load_project
    from agentprop._util.mcp_sdk import mcp_sdk_problem

    sdk = mcp_sdk_problem("agentprop serve")
    if sdk is not None:
        raise InputError(sdk.problem, fix=sdk.fix)
    try:
        from agentprop._pipeline.serve import CaseServer, default_record_path, log_trial, url_with_token
    except ImportError as exc:
        raise InputError(
            f"agentprop serve could not import the installed MCP SDK: {exc}", fix="reinstall it: pip install --force-reinstall 'agentprop[mcp]'"
        ) from None
    project = load_project(args.spec, bindings=args.bindings)
    require_cases(project)
    try:
        scenario = project.scenario(args.case)
    except InvalidArgument as exc:
        raise InputError(str(exc), fix="give a case id from `agentprop run SPEC` (a unique part of one is enough)") from None
    if args.turn_timeout <= 0:
        raise InputError(f"--turn-timeout {args.turn_timeout} must be positive", fix="use e.g. --turn-timeout 300")
    if args.until_decided and not args.http:
        raise InputError("--until-decided applies to --http", fix="add --http, or drop --until-decided (over stdio each process serves one session)")
    record = None if (args.record or "").lower() == "none" else Path(args.record) if args.record else default_record_path(project, scenario)
    if args.fresh and record is not None:
        for stale in (record, *record.parent.glob(f"{record.name}.seed*.next")):
            stale.unlink(missing_ok=True)
    log = sys.stderr if not args.http else out
    case = CaseServer(project, scenario, record=record, turn_timeout_s=args.turn_timeout, seed=args.seed, on_trial=log_trial(log))
    case.on_note = lambda note: print(note, file=log, flush=True)
    if args.report:
        result = case.result()
        print(result.summary() if result.runs else f"{scenario.id}: no trial recorded in {record}", file=out)
        return EXIT_OK if result.verdict == "PASS" else EXIT_FAIL
    earlier = f"; {len(case.traces)} earlier trial(s) in {record} count (--fresh starts over)" if case.traces else ""
    where = f"recording to {record}" if record is not None else "not recording"
    if not args.http:
        print(
            f"agentprop {__version__}: serving {project.spec.spec_id} case {scenario.id} over stdio, one session; {where}{earlier}",
            file=log,
            flush=True,
        )
        asyncio.run(case.serve_stdio())
        if case.skipped and not case.split:
            print("the session ended before its client read a message or called a tool: not a trial, nothing recorded", file=log, flush=True)
        return EXIT_OK if case.result().verdict == "PASS" else EXIT_FAIL
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", args.port))
        # listen before the address is printed: a client that connects at once then waits in
        # the backlog until the server accepts, instead of being refused
        sock.listen(128)
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror}", fix="choose another --port, or 0 for a free one") from None
    url = url_with_token(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", case.token)  # no token, no session
    print(
        f"agentprop {__version__}: serving {project.spec.spec_id} case {scenario.id} at {url}; each session is one trial; {where}{earlier}",
        file=log,
        flush=True,
    )
    try:
        asyncio.run(case.serve_http(sock, until_decided=args.until_decided))
    except KeyboardInterrupt:
        pass
    result = case.result()
    print(result.summary() if result.runs else f"{scenario.id}: no trial finished", file=log)
    return EXIT_OK if result.verdict == "PASS" else EXIT_FAIL
