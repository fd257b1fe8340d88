"""``agentprop lint``: a spec's (and its bindings') inconsistencies, each with
file, line and fix."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import EXIT_FAIL, EXIT_OK
from agentprop._cli.options import BINDINGS_HELP
from agentprop.errors import AgentPropError

if TYPE_CHECKING:
    from agentprop._agents.project import Project
    from agentprop._spec.lint import LintFinding
    from agentprop._util.yaml_source import YamlSource


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lint = sub.add_parser("lint", help="check a spec (and its bindings) and list inconsistencies")
    lint.add_argument("spec", help="spec file, or a directory with spec.yaml")
    lint.add_argument("--bindings", help=BINDINGS_HELP)
    lint.add_argument(
        "--json", dest="json_path", help="also write the findings as JSON to this file"
    )
    lint.set_defaults(handler=command)


def _path_findings(project: Project, src: YamlSource) -> list[LintFinding]:
    """Unrealisable paths as lint findings, each at the spec line of the node it stops at
    (``src``: the spec's YAML as lint read it)."""
    from agentprop._spec.lint import LintFinding

    index = {n.node_id: i for i, n in enumerate(project.spec.decision_tree)}
    out: list[LintFinding] = []
    for pr in project.path_problems:
        loc = None
        if pr.node in index:
            loc = src.location(("decision_tree", index[pr.node]))
        where = " -> ".join(pr.nodes)
        out.append(
            LintFinding(
                code=pr.code,
                severity="info"
                if pr.code == "P003"
                else "error"
                if pr.code == "P005"
                else "warning",
                message=f"{pr.label} {pr.path_id}"
                + (f" ({where})" if where else "")
                + f": {pr.reason}",
                file=str(loc.path if loc is not None and loc.path else project.spec_path),
                line=loc.line if loc is not None else None,
                column=loc.column if loc is not None else None,
                fix=pr.fix,
            )
        )
    return out


def _too_big(project: Project, exc: AgentPropError) -> str:
    """A tree over a path limit, as one error line: how many paths it has (counted, not
    listed; up to :data:`COUNT_UP_TO`), the limit hit and how to raise it."""
    from agentprop._spec.paths import count_paths

    n, complete = count_paths(project.spec, limit=COUNT_UP_TO)
    count = f"{n:,} loop-free paths" if complete else f"more than {n:,} loop-free paths"
    first, *rest = str(exc).splitlines()
    fix = next(
        (line.strip()[len("fix: ") :] for line in rest if line.strip().startswith("fix: ")), ""
    )
    return (
        f"{project.spec_path}: error P004: the decision tree has {count}; "
        f"{first.split(': ', 1)[-1]}" + (f"\n  fix: {fix}" if fix else "")
    )


COUNT_UP_TO = 1_000_000
"""Lint counts a tree's paths up to this many (a lazy walk: a second or so)."""


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._agents.project import load_project
    from agentprop._scenario.exits import binding_findings
    from agentprop._spec.implied import condition_variables
    from agentprop._spec.load import lint_and_load_spec, resolve_spec_path
    from agentprop.errors import LimitExceeded
    from agentprop.strategies._internal.packs import check_languages

    findings, spec, source = lint_and_load_spec(args.spec)
    problems: list[str] = []
    warnings: list[str] = []
    try:
        project = load_project(args.spec, bindings=args.bindings, spec=spec)
        check_languages(project.bindings)  # a declared language needs a phrase pack
    except AgentPropError as exc:
        if not any(f.severity == "error" for f in findings):
            raise
        project = None
        print(f"(bindings not checked: {str(exc).splitlines()[0]})", file=out)
    bindings_path = project.bindings.path if project is not None else None
    too_big: list[str] = []
    if project is not None and project.bindings.path is not None:
        warnings = project.bindings.warnings
        try:
            problems = project.problems
        except LimitExceeded as exc:  # reported as an error, the rest still linted
            too_big = [_too_big(project, exc)]
    resolved: list[str] = []
    if project is not None and project.bindings.path is not None:
        mapped = {k.split("<-", 1)[0] for k in project.bindings.outcomes}
        kept = []
        for f in findings:
            leaf = (
                next((w for w in f.message.split() if w in mapped), None)
                if f.code in ("L003", "L012")
                else None
            )
            if leaf is not None and f.severity != "error":
                resolved.append(leaf)
            else:
                kept.append(f)
        findings = kept
    if project is not None and problems:
        # a path over the call limit that the bindings' paths report (P001, with the calls) is
        # not reported again by the spec-only check (L016)
        reported = {pr.path_id for pr in project.path_problems}
        findings = [
            f for f in findings if not (f.code == "L016" and f.message.split(" ", 2)[1] in reported)
        ]
    for f in findings:
        print(f.render(), file=out)
    if resolved:
        print(
            f"(decisions of {', '.join(sorted(set(resolved)))} are given by "
            f"`outcomes:` in {bindings_path})",
            file=out,
        )
    for w in warnings:
        print(f"{bindings_path}: warning B001: {w}", file=out)
    path_findings = _path_findings(project, source) if project is not None and problems else []
    for f in path_findings:
        print(f.render(), file=out)
    downgrades = (
        binding_findings(project.bindings, project.spec)
        if project is not None and project.bindings.path is not None and not too_big
        else []
    )
    for f in downgrades:
        print(f.render(), file=out)
    if project is not None and project.bindings.path is None:
        names = condition_variables(project.spec)
        print(
            "note: no bindings file (agentprop.yaml) next to the spec; to test it, bind these "
            f"condition variables: {', '.join(names)} (see docs/reference.md#bindings)",
            file=out,
        )
    from agentprop._pipeline.init_project import stub_findings

    stubs = stub_findings(
        resolve_spec_path(args.spec), project.bindings.path if project is not None else None
    )
    for f in stubs:
        print(f.render(), file=out)
    for line in too_big:
        print(line, file=out)
    errors = (
        sum(f.severity == "error" for f in findings)
        + len(too_big)
        + sum(f.severity == "error" for f in path_findings)
    )
    warns = (
        sum(f.severity == "warning" for f in findings)
        + len(warnings)
        + sum(f.severity == "warning" for f in path_findings)
        + len(stubs)
    )
    infos = (
        sum(f.severity == "info" for f in findings)
        + sum(f.severity == "info" for f in path_findings)
        + len(downgrades)
    )
    print(
        f"{resolve_spec_path(args.spec)}: {errors} error(s), {warns} warning(s), {infos} info",
        file=out,
    )
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "findings": [f.model_dump() for f in findings],
                    "bindings_warnings": warnings,
                    "unrealisable_paths": problems,
                    "bindings_readings": [f.model_dump() for f in downgrades],
                },
                indent=2,
            ),
            encoding="utf-8",
        )
    return EXIT_FAIL if errors else EXIT_OK
