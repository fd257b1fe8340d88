"""``agentprop import PROJECT LOG``: production traces judged by the spec's contracts.

Reads a Chat Completions or Messages JSONL log, or OTLP JSON GenAI spans (:mod:`agentprop._pipeline.importing`), prints a
progress line on stderr and a summary: which path each trace took and what it broke, one line
per distinct behaviour. Exit 0 when every trace kept every contract, 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from agentprop._cli.common import EXIT_OK, require_cases
from agentprop._cli.options import BINDINGS_HELP, SPEC_HELP

FORMATS = ("auto", "openai-chat", "anthropic-messages", "otel")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = sub.add_parser("import", help="judge production traces (Chat Completions or Messages JSONL logs, OTel GenAI spans) by the spec's contracts")
    imp.add_argument("spec", metavar="PROJECT", help=SPEC_HELP)
    imp.add_argument("log", metavar="LOG", help="the log: one JSON object a line, {request: ..., response: ...} of one model call")
    imp.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="the log's format: openai-chat (Chat Completions calls), anthropic-messages (Messages API calls), otel (OTLP JSON GenAI spans), or auto (default: told from the first line)",
    )
    imp.add_argument("--bindings", help=BINDINGS_HELP)
    imp.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._agents.project import load_project
    from agentprop._pipeline.importing import detect_format, judge_trace, read_log, summarise

    project = load_project(args.spec, bindings=args.bindings)
    require_cases(project)
    started = time.perf_counter()

    def progress(n: int) -> None:
        if n % 200 == 0:
            print(f"\rread {n} record(s)", end="", file=sys.stderr, flush=True)

    log = Path(args.log)
    fmt = detect_format(log) if args.format == "auto" else args.format
    traces = read_log(log, fmt, spec_id=project.spec.spec_id, progress=progress)
    scenarios = project.scenarios()
    judged = []
    for n, trace in enumerate(traces, 1):
        judged.append(judge_trace(project, trace, scenarios))
        if n % 100 == 0 or n == len(traces):
            print(f"\rjudged {n}/{len(traces)} trace(s)", end="", file=sys.stderr, flush=True)
    print("", file=sys.stderr)
    summary = summarise(judged)
    print(f"imported {args.log} ({fmt}) for {project.spec.spec_id} in {time.perf_counter() - started:.1f}s", file=out)
    for line in summary.lines():
        print(line, file=out)
    return EXIT_OK if summary.passed == summary.traces else 1
