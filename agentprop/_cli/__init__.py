"""The ``agentprop`` command line: one module per command, shared options in :mod:`.options`.

Each command module has ``add_parser(subparsers)``, which registers the command and sets its
``handler``, and ``command(args, out) -> int``. Exit codes (:mod:`.common`): 0 all cases pass
(or lint found no error), 1 a case failed (or lint found an error), 2 usage or input error.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from agentprop._cli import compile as compile_command
from agentprop._cli import corpus, init, judge, lint, report, run, serve, snapshot, tdad
from agentprop._cli.common import EXIT_OK, EXIT_USAGE
from agentprop._util.scrub import scrub_text
from agentprop._version import __version__
from agentprop.errors import AgentPropError

COMMANDS = (lint, run, corpus, snapshot, tdad, compile_command, serve, init, report, judge)
"""In the order ``agentprop --help`` lists them."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentprop",
        description="Property-based, statistically decided tests for tool-using LLM agents.",
    )
    p.add_argument("--version", action="version", version=f"agentprop {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return p


def main(argv: list[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    p = parser()
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    if args.command is None:
        p.print_help(out)
        return EXIT_USAGE
    try:
        return int(args.handler(args, out))
    except AgentPropError as exc:
        print(f"agentprop: error: {scrub_text(str(exc))}", file=err)  # an echoed key never reaches the terminal
        return EXIT_USAGE
    except BrokenPipeError:  # `agentprop run ... | head`
        return EXIT_OK
