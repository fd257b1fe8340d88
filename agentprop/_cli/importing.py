"""``agentprop import PROJECT LOG``: production traces judged by the spec's contracts.

Prints which path each trace took and what it broke, one line per distinct behaviour;
``--to-cases`` / ``--to-corpus`` keep them (:mod:`agentprop._pipeline.import_cases`). Exit 0 when
every trace kept every contract, 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import EXIT_OK, require_cases
from agentprop._cli.options import BINDINGS_HELP, SPEC_HELP

if TYPE_CHECKING:
    from agentprop._pipeline.import_cases import Written

FORMATS = (
    "auto",
    "openai-chat",
    "openai-responses",
    "anthropic-messages",
    "otel",
    "langsmith",
    "phoenix",
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = sub.add_parser(
        "import",
        help="judge production traces (OpenAI / Anthropic logs, OTel GenAI spans, LangSmith runs, "
        "Phoenix spans) by the spec's contracts",
    )
    imp.add_argument("spec", metavar="PROJECT", help=SPEC_HELP)
    imp.add_argument(
        "log",
        metavar="LOG",
        help="the log or export: JSONL of logged calls {request, response}, OTLP JSON, LangSmith "
        "runs or Phoenix spans",
    )
    imp.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="the log's format: openai-chat (Chat Completions calls), openai-responses (Responses "
        "API calls), anthropic-messages (Messages API calls), otel (OTLP JSON GenAI spans or "
        "events), langsmith (LangSmith runs), phoenix (Phoenix / OpenInference spans), or auto "
        "(default: told from the head of the file)",
    )
    imp.add_argument("--bindings", help=BINDINGS_HELP)
    imp.add_argument(
        "--to-cases",
        action="store_true",
        help="write one case per distinct behaviour (the user's turns as its conversation, the "
        "recorded tool outputs as its world) to .agentprop/cases beside the bindings, where "
        "`agentprop run` picks them up",
    )
    imp.add_argument(
        "--to-corpus",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="write one corpus entry per behaviour that broke a contract (default corpus: "
        ".agentprop/corpus beside the bindings), replayed first by `agentprop run`",
    )
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
    print(
        f"imported {args.log} ({fmt}) for {project.spec.spec_id} in "
        f"{time.perf_counter() - started:.1f}s",
        file=out,
    )
    for line in summary.lines():
        print(line, file=out)
    if args.to_cases:
        from agentprop._pipeline.import_cases import cases_dir, to_cases

        _print_written("cases", to_cases(project, summary, args.log), cases_dir(project), out)
    if args.to_corpus is not None:
        from agentprop._decide.corpus import Corpus, default_corpus_dir
        from agentprop._pipeline.import_cases import to_corpus

        where = Path(args.to_corpus) if args.to_corpus else default_corpus_dir(project)
        _print_written(
            "corpus entries", to_corpus(project, summary, args.log, Corpus(where)), where, out
        )
    return EXIT_OK if summary.passed == summary.traces else 1


def _print_written(what: str, written: Written, where: Path, out: TextIO) -> None:
    print(
        f"{what}: {len(written.new)} new, {len(written.kept)} already there, in {where}", file=out
    )
    for name in written.new:
        print(f"  + {name}", file=out)
    for reason in written.skipped:
        print(f"  not written: {reason}", file=out)
