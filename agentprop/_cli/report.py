"""``agentprop report REPORT.json``: render a JSON report (``run``/``tdad --json``, ``snapshot
check --json``) as HTML, JUnit XML or Markdown, without running anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import EXIT_OK, check_report_outputs, write_report_outputs
from agentprop._cli.options import report_outputs_parent
from agentprop.errors import InputError, SourceLocation

if TYPE_CHECKING:
    from agentprop._pipeline.report.model import RunReport, SnapshotCheckReport


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rep = sub.add_parser(
        "report",
        help="render a JSON report (run/tdad --json, snapshot check --json) as HTML, "
        "JUnit XML or Markdown",
        parents=[report_outputs_parent()],
    )
    rep.add_argument("json_file", metavar="REPORT.json", help="a report written by --json")
    rep.set_defaults(handler=command)


def load_report_file(path: str) -> RunReport | SnapshotCheckReport:
    """A report written by ``--json``: a run report or a snapshot check, told apart by its
    ``schema``; anything else is an input error naming the file and the fix."""
    from pydantic import ValidationError

    from agentprop._pipeline.report.model import (
        SCHEMA_ID,
        SNAPSHOT_CHECK_SCHEMA_ID,
        RunReport,
        SnapshotCheckReport,
    )

    file = Path(path)
    if not file.is_file():
        raise InputError(
            f"no such report file: {path}",
            fix="give the file `agentprop run SPEC --json PATH` wrote",
        )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(
            f"not JSON: {exc}",
            location=SourceLocation(
                file, getattr(exc, "lineno", None), getattr(exc, "colno", None)
            ),
            fix="give the file `agentprop run SPEC --json PATH` wrote, unchanged",
        ) from None
    schema = data.get("schema") if isinstance(data, dict) else None
    models: dict[str, type[RunReport | SnapshotCheckReport]] = {
        SCHEMA_ID: RunReport,
        SNAPSHOT_CHECK_SCHEMA_ID: SnapshotCheckReport,
    }
    if schema not in models:
        raise InputError(
            f"not an agentprop report: its schema is {schema!r}",
            location=SourceLocation(file),
            expected=f'"schema": {SCHEMA_ID!r} (agentprop run/tdad --json) or '
            f"{SNAPSHOT_CHECK_SCHEMA_ID!r} (agentprop snapshot check --json)",
            fix="render a report this agentprop writes (a newer agentprop may write a "
            "newer schema: upgrade)",
        )
    try:
        return models[schema].model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(
            f"not a valid {schema} report: {where}: {first['msg']} "
            f"({exc.error_count()} problem(s))",
            location=SourceLocation(file),
            fix="give the file agentprop wrote, unchanged; docs/report-schema.md "
            "describes every field",
        ) from None


def command(args: argparse.Namespace, out: TextIO) -> int:
    if not (args.html_path or args.junit_path or args.markdown_path):
        raise InputError(
            "agentprop report needs an output",
            expected="--html PATH, --junit PATH and/or --markdown PATH",
            fix=f"e.g. agentprop report {args.json_file} --html report.html",
        )
    check_report_outputs(args)
    write_report_outputs(load_report_file(args.json_file), args, out)
    return EXIT_OK
