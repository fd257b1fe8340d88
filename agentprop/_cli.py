"""The ``agentprop`` command line.

Exit codes: 0 all cases pass (or lint found no error), 1 a case failed (or lint found an
error), 2 usage or input error (bad spec, bindings, agent or arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TextIO

from agentprop._version import __version__
from agentprop._agents import load_agent, parse_faults
from agentprop._project import load_project
from agentprop._run import RunSettings, arun_cases, render_table
from agentprop._scenario import leaf_scenarios
from agentprop._spec.load import lint_spec, resolve_spec_path
from agentprop.errors import AgentPropError, InputError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentprop",
        description="Property-based, statistically decided tests for tool-using LLM agents.",
    )
    p.add_argument("--version", action="version", version=f"agentprop {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    lint = sub.add_parser("lint", help="check a spec (and its bindings) and list inconsistencies")
    lint.add_argument("spec", help="spec file, or a directory with spec.yaml")
    lint.add_argument("--bindings", help="bindings file (default: agentprop.yaml next to the spec)")
    lint.add_argument("--json", dest="json_path", help="also write the findings as JSON to this file")

    run = sub.add_parser("run", help="run an agent over the spec's cases and decide each case")
    run.add_argument("spec", help="spec directory (spec.yaml + agentprop.yaml) or spec file")
    run.add_argument("--agent", help="MODULE:ATTR of the agent (default: `agent:` in the bindings)")
    run.add_argument("--fault", action="append", default=[], metavar="NAME=P", help="turn on a fault knob of the agent with probability P (repeatable)")
    run.add_argument("--bindings", help="bindings file (default: agentprop.yaml next to the spec)")
    run.add_argument("--mode", choices=["sprt", "zero-failure", "fixed"], help="how each case is decided (default: sprt; zero-failure for high-risk specs)")
    run.add_argument("--tau", type=float, help="required pass rate (default: the spec's min_pass_rate)")
    run.add_argument("--runs", type=int, help="runs of fixed or zero-failure mode (alone, selects fixed mode)")
    run.add_argument("--max-runs", type=int, help="truncate the sequential test after this many runs (default 100)")
    run.add_argument("--seed", type=int, default=0, help="trial namespace: change it to draw fresh samples")
    run.add_argument("--concurrency", type=int, default=8, help="runs in flight at once (default 8)")
    run.add_argument("--case", action="append", default=[], metavar="ID", help="only run cases whose id contains ID (repeatable)")
    run.add_argument("--json", dest="json_path", help="write the report (schema agentprop.run/1) to this file")
    return p


def _lint(args: argparse.Namespace, out: TextIO) -> int:
    findings = lint_spec(args.spec)
    problems: list[str] = []
    warnings: list[str] = []
    try:
        project = load_project(args.spec, bindings=args.bindings)
    except AgentPropError as exc:
        if not any(f.severity == "error" for f in findings):
            raise
        project = None
        print(f"(bindings not checked: {str(exc).splitlines()[0]})", file=out)
    if project is not None and project.bindings.path is not None:
        warnings = project.bindings.warnings
        _, problems = leaf_scenarios(project.spec, project.bindings)
    for f in findings:
        print(f.render(), file=out)
    for w in warnings:
        print(f"{project.bindings.path}: warning B001: {w}", file=out)  # type: ignore[union-attr]
    for pr in problems:
        print(f"{project.bindings.path}: warning P001: unrealisable path: {pr}", file=out)  # type: ignore[union-attr]
    errors = sum(f.severity == "error" for f in findings)
    warns = sum(f.severity == "warning" for f in findings) + len(warnings) + len(problems)
    infos = sum(f.severity == "info" for f in findings)
    print(f"{resolve_spec_path(args.spec)}: {errors} error(s), {warns} warning(s), {infos} note(s)", file=out)
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps({"findings": [f.model_dump() for f in findings], "bindings_warnings": warnings, "unrealisable_paths": problems}, indent=2),
            encoding="utf-8",
        )
    return EXIT_FAIL if errors else EXIT_OK


def _run(args: argparse.Namespace, out: TextIO) -> int:
    project = load_project(args.spec, bindings=args.bindings)
    ref = args.agent or project.bindings.agent
    if not ref:
        raise InputError(
            "no agent to run",
            expected="--agent MODULE:ATTR, or `agent: MODULE:ATTR` in the bindings file",
            fix="pass --agent, e.g. --agent examples/supportops/agent.py's class as --agent agent:SupportOpsAgent",
        )
    base = project.base_dir if not args.agent else Path.cwd()
    agent = load_agent(ref, base if (base / (ref.split(':')[0].replace('.', '/') + '.py')).is_file() else project.base_dir, parse_faults(args.fault))
    scenarios, problems = leaf_scenarios(project.spec, project.bindings)
    if args.case:
        scenarios = [s for s in scenarios if any(c in s.id for c in args.case)]
        if not scenarios:
            raise InputError(f"no case id contains {', '.join(args.case)}", fix="run without --case to see the case ids")
    if args.runs is not None and args.runs < 1:
        raise InputError(f"--runs {args.runs} must be at least 1", fix="use --runs 1 or more")
    settings = RunSettings(mode=args.mode, runs=args.runs, tau=args.tau, max_runs=args.max_runs, seed=args.seed, concurrency=args.concurrency)
    faults = ", ".join(f"{k}={v:g}" for k, v in agent.faults.items())
    print(f"agentprop {__version__}: {project.spec.spec_id} ({project.spec.title}) with agent {agent.ref}" + (f" [faults: {faults}]" if faults else ""), file=out)
    report = asyncio.run(arun_cases(project, agent, scenarios, settings, problems=problems))
    print(render_table(report), file=out)
    for pr in problems:
        print(f"note: unrealisable path: {pr}", file=out)
    if args.json_path:
        Path(args.json_path).write_text(report.to_json(), encoding="utf-8")
        print(f"report written to {args.json_path}", file=out)
    branches = report.metrics.extra["coverage"]["branches"]
    if not branches["met"] and not args.case:
        print(
            f"branch coverage {branches['enforced']:.0%} is below the spec's min_branch_coverage "
            f"{branches['min_branch_coverage']}: run the cases for {', '.join(branches['not_run']) or 'the missing branches'}",
            file=out,
        )
        return EXIT_FAIL
    return EXIT_OK if report.metrics.passed == report.metrics.cases else EXIT_FAIL


def main(argv: list[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    if args.command is None:
        parser.print_help(out)
        return EXIT_USAGE
    try:
        if args.command == "lint":
            return _lint(args, out)
        return _run(args, out)
    except AgentPropError as exc:
        print(f"agentprop: error: {exc}", file=err)
        return EXIT_USAGE
    except BrokenPipeError:  # `agentprop run ... | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
