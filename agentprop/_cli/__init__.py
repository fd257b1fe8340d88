"""The ``agentprop`` command line: one module per command, shared options in :mod:`.options`.

Each command module has ``add_parser(subparsers)``, which registers the command and sets its
``handler``, and ``command(args, out) -> int``. Exit codes (:mod:`.common`): 0 all cases pass
(or lint found no error), 1 a case failed (or lint found an error), 2 usage or input error.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from typing import NoReturn, TextIO, cast

from agentprop._cli import (
    cases,
    corpus,
    importing,
    init,
    judge,
    lint,
    merge,
    report,
    run,
    serve,
    snapshot,
    tdad,
)
from agentprop._cli import compile as compile_command
from agentprop._cli.common import EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE
from agentprop._cli.ctrl_c import exit_code
from agentprop._util.refs import did_you_mean
from agentprop._util.scrub import scrub_text
from agentprop._util.text import printable
from agentprop._version import __version__
from agentprop.errors import AgentPropError

COMMANDS = (
    lint,
    run,
    merge,
    cases,
    importing,
    corpus,
    snapshot,
    tdad,
    compile_command,
    serve,
    init,
    report,
    judge,
)
"""In the order ``agentprop --help`` lists them."""


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="agentprop",
        description="Property-based, statistically decided tests for tool-using LLM agents.",
    )
    p.add_argument("--version", action="version", version=f"agentprop {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return p


class _Parser(argparse.ArgumentParser):
    """An argument parser whose "invalid choice" error names the closest choice."""

    def error(self, message: str) -> NoReturn:
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            hint = did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2))).strip()
            message += f"; {hint}" if hint else ""
        super().error(message)


def unrecognized(p: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]) -> str:
    """argparse's "unrecognized arguments" with the closest option of the command for each."""
    command = getattr(args, "command", None)
    options: list[str] = list(p._option_string_actions)
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            options = list(action.choices[command]._option_string_actions)
    hints = []
    for word in extra:
        if word.startswith("-"):
            hint = did_you_mean(word.split("=", 1)[0], options).strip()
            if hint:
                hints.append(f"{word}: {hint}")
    return (
        f"unrecognized arguments: {' '.join(extra)}"
        + (f" ({'; '.join(hints)})" if hints else "")
        + (f"; `agentprop {command} --help` lists the options" if command else "")
    )


class _Printable(io.TextIOBase):
    """A text stream that writes :func:`~agentprop._util.text.printable` text to another: what
    the command prints may quote a spec's names or an agent's reply, which must not retitle the
    terminal, clear it, or hold a lone surrogate that no encoding can write."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, s: str) -> int:
        self.inner.write(printable(s))
        return len(s)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()


def main(
    argv: list[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = cast(TextIO, _Printable(out or sys.stdout))
    err = cast(TextIO, _Printable(err or sys.stderr))
    try:
        p = parser()
        args, extra = p.parse_known_args(argv)
        if extra:
            p.error(unrecognized(p, args, extra))
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C while the command line is read
        print("agentprop: interrupted", file=err)
        return EXIT_INTERRUPTED
    if args.command is None:
        p.print_help(out)
        return EXIT_USAGE
    try:
        return int(args.handler(args, out))
    except AgentPropError as exc:
        # an echoed key never reaches the terminal
        print(f"agentprop: error: {scrub_text(str(exc))}", file=err)
        return EXIT_USAGE
    except BrokenPipeError:  # `agentprop run ... | head`
        return EXIT_OK
    except KeyboardInterrupt as exc:  # Ctrl-C where nothing was decided yet (or a second one)
        code = exit_code(exc)
        print(
            "agentprop: interrupted" + (" (SIGTERM)" if code == EXIT_TERMINATED else ""), file=err
        )
        return code
