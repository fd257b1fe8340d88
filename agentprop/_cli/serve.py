"""``agentprop serve``: a case's world, or every case of a run, as an MCP server; each session is
one trial of one case, recorded and decided as ``agentprop run`` decides the same trials."""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import EXIT_FAIL, EXIT_OK, require_cases, selected_scenarios
from agentprop._version import __version__
from agentprop.errors import InputError, InvalidArgument

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentprop._agents.project import Project
    from agentprop._decide.oracle import CheckResult
    from agentprop._pipeline.serve import CaseServer, RunServer
    from agentprop._scenario.build import Scenario
    from agentprop._scenario.trace import Trace


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve a case's world, or a whole run's, as an MCP server: each session is one "
        "trial, recorded and decided",
        description="Serve a case's world over MCP to an agent that connects on its own: each MCP "
        "session is one trial. With one --case, that case; with none or several (and --http), a "
        "whole run: one server for every MFT case (or those whose id contains a --case), each new "
        "session the next trial of the first case still undecided (concurrent sessions: of the "
        "undecided cases with the fewest trials in progress), and the verdicts at the end are "
        "those `agentprop run --kinds mft` reaches on the same trials (give the same "
        "--mode/--tau/--runs).",
    )
    serve.add_argument("spec", help="spec directory (spec.yaml + agentprop.yaml) or spec file")
    serve.add_argument(
        "--case",
        action="append",
        metavar="ID",
        help="the case to serve: its id, or a part of it that only it contains; repeat it (or "
        "leave it out) to serve a whole run over every case whose id contains one (`agentprop "
        "cases PROJECT` lists them)",
    )
    serve.add_argument(
        "--bindings", help="bindings file (default: agentprop.yaml next to the spec)"
    )
    serve.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP on 127.0.0.1 (each Mcp-Session-Id session is one trial) "
        "instead of stdio (one process, one trial)",
    )
    serve.add_argument(
        "--port", type=int, default=0, help="port of --http (default: a free one, printed)"
    )
    serve.add_argument(
        "--record",
        metavar="FILE",
        help="JSON-lines file of finished trials; earlier trials in it count towards the decision "
        "(default .agentprop/mcp/SPEC_ID/CASE.jsonl beside the bindings; `none` keeps them in "
        "memory); for a whole run, a directory with a file per case",
    )
    serve.add_argument(
        "--fresh",
        action="store_true",
        help="delete the record file first: start the case's trials afresh",
    )
    serve.add_argument(
        "--until-decided",
        action="store_true",
        help="with --http: stop serving once the case (every case of a run) is decided",
    )
    serve.add_argument(
        "--report",
        action="store_true",
        help="serve nothing: print the decision over the recorded trials and exit (0 when PASS)",
    )
    serve.add_argument(
        "--turn-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds a turn may take before the trial is recorded as timed out (default 300)",
    )
    serve.add_argument(
        "--seed",
        type=int,
        default=0,
        help="trial namespace: worlds (canaries) differ per trial and seed (default 0)",
    )
    serve.add_argument(
        "--mode",
        choices=["sprt", "fixed", "zero-failure"],
        help="decision mode, as `agentprop run --mode` (default: each case's own)",
    )
    serve.add_argument("--tau", type=float, help="pass-rate threshold, as `agentprop run --tau`")
    serve.add_argument(
        "--runs",
        type=int,
        metavar="N",
        help="runs per case, as `agentprop run --runs` (alone: fixed mode)",
    )
    serve.add_argument(
        "--json",
        metavar="PATH",
        help="write the verdicts as JSON (cases: id, verdict, runs, passes, "
        "failures) when serving ends",
    )
    serve.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    """`agentprop serve`: one case's world over MCP (agentprop.mcp.CaseServer), or a whole run's
    (agentprop.mcp.RunServer). Over stdio the log goes to stderr: stdout is the protocol."""
    from agentprop._agents.project import load_project
    from agentprop._util.mcp_sdk import mcp_sdk_problem

    sdk = mcp_sdk_problem("agentprop serve")
    if sdk is not None:
        raise InputError(sdk.problem, fix=sdk.fix)
    try:
        from agentprop._pipeline.serve import default_record_path, log_trial
    except ImportError as exc:
        raise InputError(
            f"agentprop serve could not import the installed MCP SDK: {exc}",
            fix="reinstall it: pip install --force-reinstall 'agentprop[mcp]'",
        ) from None
    project = load_project(args.spec, bindings=args.bindings)
    require_cases(project)
    if args.turn_timeout <= 0:
        raise InputError(
            f"--turn-timeout {args.turn_timeout} must be positive",
            fix="use e.g. --turn-timeout 300",
        )
    if args.runs is not None and args.runs < 1:
        raise InputError(
            f"--runs {args.runs} must be at least 1",
            fix="give --runs 1 or more, or leave it out (each case's own settings)",
        )
    if args.tau is not None and not 0 < args.tau < 1:
        raise InputError(
            f"--tau {args.tau} must lie between 0 and 1",
            fix="give e.g. --tau 0.9, or leave it out (the spec's min_pass_rate)",
        )
    if args.until_decided and not args.http:
        raise InputError(
            "--until-decided applies to --http",
            fix="add --http, or drop --until-decided (over stdio each process serves one session)",
        )
    if len(args.case or []) != 1:
        return _serve_run(project, args, out)
    try:
        scenario = project.scenario(args.case[0])
    except InvalidArgument as exc:
        raise InputError(
            str(exc),
            fix="give a case id from `agentprop cases SPEC` (a unique part of one is enough)",
        ) from None
    record = (
        None
        if (args.record or "").lower() == "none"
        else Path(args.record)
        if args.record
        else default_record_path(project, scenario)
    )
    log = sys.stderr if not args.http else out
    case = _case_server(project, scenario, args, record, log_trial(log))
    case.on_note = lambda note: print(note, file=log, flush=True)
    if args.report:
        result = case.result()
        print(
            result.summary() if result.runs else f"{scenario.id}: no trial recorded in {record}",
            file=out,
        )
        _write_json(args.json, project.spec.spec_id, [result])
        return EXIT_OK if result.verdict == "PASS" else EXIT_FAIL
    earlier = (
        f"; {len(case.traces)} earlier trial(s) in {record} count (--fresh starts over)"
        if case.traces
        else ""
    )
    where = f"recording to {record}" if record is not None else "not recording"
    if not args.http:
        print(
            f"agentprop {__version__}: serving {project.spec.spec_id} case {scenario.id} over "
            f"stdio, one session; {where}{earlier}",
            file=log,
            flush=True,
        )
        asyncio.run(case.serve_stdio())
        if case.skipped and not case.split:
            print(
                "the session ended before its client read a message or called a tool: not a "
                "trial, nothing recorded",
                file=log,
                flush=True,
            )
        _write_json(args.json, project.spec.spec_id, [case.result()])
        return EXIT_OK if case.result().verdict == "PASS" else EXIT_FAIL
    _serve_http(
        case,
        args,
        log,
        lambda url: (
            f"agentprop {__version__}: serving {project.spec.spec_id} case {scenario.id} at "
            f"{url}; each session is one trial; {where}{earlier}"
        ),
    )
    result = case.result()
    print(result.summary() if result.runs else f"{scenario.id}: no trial finished", file=log)
    _write_json(args.json, project.spec.spec_id, [result])
    return EXIT_OK if result.verdict == "PASS" else EXIT_FAIL


def _serve_run(project: Project, args: argparse.Namespace, out: TextIO) -> int:
    """A whole run over one HTTP server: every MFT case (or those a --case names)."""
    from agentprop._pipeline.serve import RunServer, default_record_path, log_trial

    scenarios = selected_scenarios(project, args.case or [])  # as `agentprop run --case` selects
    if not args.http and not args.report:
        raise InputError(
            f"a whole run ({len(scenarios)} cases) is served over HTTP only: over stdio each "
            "process serves one session, one trial",
            fix="add --http (and give the client the URL it prints), or give exactly one --case "
            "to serve that case over stdio",
        )
    root = (
        None
        if (args.record or "").lower() == "none"
        else Path(args.record)
        if args.record
        else None
    )
    if root is not None and root.exists() and not root.is_dir():
        raise InputError(
            f"--record {root} is a file; a whole run records into a directory, a file per case",
            fix="give a directory, or `none`",
        )
    log = out
    cases = []
    for scenario in scenarios:
        record = (
            None
            if (args.record or "").lower() == "none"
            else (
                root / default_record_path(project, scenario).name
                if root
                else default_record_path(project, scenario)
            )
        )
        cases.append(_case_server(project, scenario, args, record, log_trial(log, case=True)))
    run = RunServer(cases, on_note=lambda note: print(note, file=log, flush=True))
    if not args.report:
        earlier = sum(len(c.traces) for c in cases)
        _serve_http(
            run,
            args,
            log,
            lambda url: (
                f"agentprop {__version__}: serving {project.spec.spec_id}, a run of {len(cases)} "
                f"case(s), at {url}; each session is one trial of the first case still undecided; "
                + (
                    f"{earlier} earlier trial(s) recorded count (--fresh starts over)"
                    if earlier
                    else "no earlier trials"
                )
            ),
        )
    results = run.results()
    print(run.summary(), file=out)
    _write_json(args.json, project.spec.spec_id, results)
    return EXIT_OK if all(r.verdict == "PASS" for r in results) else EXIT_FAIL


def _case_server(
    project: Project,
    scenario: Scenario,
    args: argparse.Namespace,
    record: Path | None,
    on_trial: Callable[[Trace, CheckResult], None],
) -> CaseServer:
    """One case's server as the arguments set it (--fresh forgets its record
    first), in either mode."""
    from agentprop._pipeline.serve import CaseServer, served_settings

    if args.fresh and record is not None:
        _forget(record)
    chosen = served_settings(project, scenario, mode=args.mode, tau=args.tau, runs=args.runs)
    return CaseServer(
        project,
        scenario,
        settings=chosen.settings,
        record=record,
        turn_timeout_s=args.turn_timeout,
        seed=args.seed,
        on_trial=on_trial,
        rule=chosen.rule,
    )


def _serve_http(
    server: CaseServer | RunServer,
    args: argparse.Namespace,
    log: TextIO,
    banner: Callable[[str], str],
) -> None:
    """Listen on --port, print ``banner(url)`` and serve until stopped (or decided, with
    --until-decided). The URL carries the server's token: no token, no session."""
    from agentprop._pipeline.serve import url_with_token

    sock = _listen(args.port)
    url = url_with_token(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", server.token)
    print(banner(url), file=log, flush=True)
    try:
        asyncio.run(server.serve_http(sock, until_decided=args.until_decided))
    except KeyboardInterrupt:
        pass


def _write_json(path: str | None, spec_id: str, results: list[CheckResult]) -> None:
    if not path:
        return
    cases = [
        {
            "id": r.name,
            "verdict": r.verdict,
            "runs": r.runs,
            "passes": r.passes,
            "decided_by": r.decided_by,
            "failures": [f.model_dump(exclude={"traceback"}) for f in r.failures],
        }
        for r in results
    ]
    Path(path).write_text(
        json.dumps({"spec_id": spec_id, "cases": cases}, indent=2) + "\n", encoding="utf-8"
    )


def _forget(record: Path) -> None:
    for stale in (record, *record.parent.glob(f"{record.name}.seed*.next")):
        stale.unlink(missing_ok=True)


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        # listen before the address is printed: a client that connects at once then waits in
        # the backlog until the server accepts, instead of being refused
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InputError(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror}",
            fix="choose another --port, or 0 for a free one",
        ) from None
    return sock
