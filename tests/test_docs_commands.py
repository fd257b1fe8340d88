"""Every command README.md and docs/*.md tell the reader to run works from another directory.

The commands are read from the pages, not copied here: each line of a ``bash``/``sh``/``shell``
block, and the ``$ COMMAND`` line of a ``text`` block, that runs ``agentprop …``, ``python -m
pytest …`` or ``pytest …`` (``\\`` continuations joined, a trailing ``# comment`` kept apart);
a command a page gives bare and again with its output runs once. Each page's commands run in
order, as a reader would type them, in a scratch copy of the repository's examples (and of
``docs/examples/``) at ``repo/``, from a sibling folder: a path under ``examples/`` or
``docs/examples/`` becomes ``../repo/…``, and a dotted module reference
(``examples.x.agent:Class``) the file path a reader elsewhere would give.

The exit code each must end with is the one the page promises:

- a command shown with its output (``text`` block): ``agentprop: error:`` → 2; lint's
  ``N error(s)`` → 1 when N > 0; ``INCOMPLETE:`` → 3; a failed case, a ``FAIL`` or
  ``INCONCLUSIVE`` verdict (a case that did not pass), a bug found (``bug 1 [...]``, a
  reproducer), a ``CHANGED`` snapshot or a survived mutant → 1; else
  0 (docs/reference.md, "Exit codes");
- a command whose comment says how it ends: ``N failed`` → 1, ``N passed`` → 0;
- otherwise what the page says of it in its prose (:data:`STATED`, each with where), else 0.

What cannot run offline or on its own is skipped with the reason (:data:`NOT_RUN`); the
commands that take minutes (:data:`HEAVY`) run only with ``AGENTPROP_DOCS_HEAVY=1``. Runs are
cheapened as a reader may: ``--corpus none`` unless the command names a corpus, and at most
``--explore 2``."""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_docs_outputs import DOC_FILES, ROOT, _scratch, run_shown  # noqa: E402

_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_RUNS = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S+\s+)*(?:agentprop\s|python -m pytest\b|pytest\b)")


@dataclass(frozen=True)
class DocCommand:
    file: Path
    line: int
    command: str
    comment: str = ""
    shown: tuple[str, ...] | None = None
    """The output the page shows under it (a ``text`` block), if any."""

    @property
    def id(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def doc_commands(path: Path) -> list[DocCommand]:
    """The commands of one page, in page order."""
    text = path.read_text(encoding="utf-8")
    out: list[DocCommand] = []
    for m in _BLOCK.finditer(text):
        lang, body = m.group(1), m.group(2)
        first = text.count("\n", 0, m.start()) + 2
        lines = body.rstrip("\n").split("\n")
        if lang == "text":
            if lines[0].startswith("$ ") and _RUNS.match(lines[0][2:]):
                out.append(DocCommand(path, first, lines[0][2:].strip(), shown=tuple(lines[1:])))
            continue
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        i = 0
        while i < len(lines):
            start, line = i, lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            words, _, comment = line.strip().partition("  #")
            if _RUNS.match(words.strip()):
                out.append(
                    DocCommand(path, first + start, " ".join(words.split()), comment.strip())
                )
    return out


def _once(commands: list[DocCommand]) -> list[DocCommand]:
    """A page's commands without a bare one the page also shows with its output (run once,
    checked against the output)."""
    shown = {c.command for c in commands if c.shown is not None}
    return [c for c in commands if c.shown is not None or c.command not in shown]


COMMANDS = [c for page in DOC_FILES for c in _once(doc_commands(page))]

NOT_RUN: dict[str, str] = {
    r"--agent (anthropic|openai)\b(?!.*--base-url http://127\.0\.0\.1)"
    r"|^agentprop compile": "a real model: needs an API key and the network "
    "(tests/test_cli_anthropic.py and tests/test_cli_openai.py run these commands "
    "against loopback servers)",
    r"^agentprop serve": "serves one MCP session and waits for the client to connect "
    "(tests/test_mcp_world.py drives it)",
    r"^agentprop corpus (show|rm) 3f0c": "3f0c stands for an entry id the reader's own run printed",
    r"specs/supportops/v2": "an illustration: the page says the v2 spec is not in this repository "
    "(tests/test_surs.py runs it on one)",
    r"^pytest --agentprop-": "runs the reader's own test suite (the options are tested in "
    "tests/test_pytest_plugin.py)",
}
"""Commands not run here, by pattern, with the reason."""

HEAVY: dict[str, str] = {
    r"^agentprop tdad examples/supportops$": "the whole TDAD suite with mutants: minutes (the "
    "page says 6.5 on 2 cores)",
    r"^agentprop tdad examples/supportops --kinds mft,boundary$": "TDAD with its mutants: minutes",
    r"^agentprop run examples/supportops( --fault skip_auth=0\.3)?( --json report\.json)?$": "the "
    "whole suite of the example: minutes on 2 cores",
    r"^(?!.*--kinds mft\b).*profile release": "the release profile over every case kind: up to "
    "300 runs a case (tests/test_docs_outputs.py runs it from the repository's folder)",
    r"pytest .*(test_properties|test_orders)\.py": "Hypothesis draws tens of conversations a "
    "property (tests/test_docs_outputs.py runs it)",
}
"""Commands that take minutes, by pattern: run only with ``AGENTPROP_DOCS_HEAVY=1``."""

STATED: list[tuple[str, int, str]] = [
    (
        r"^agentprop run examples/supportops$",
        3,
        "getting-started.md §1: 3 (INCOMPLETE) ... as here",
    ),
    (
        r"^agentprop run .*--fault skip_auth=0\.3",
        1,
        "getting-started.md §2: the bugs the fault makes are printed before the table",
    ),
    (r"^AGENTPROP_FAULTS=wrong_order=1 pytest", 1, "tutorial.md: 2 failed, with the diff"),
]
"""Exit codes the pages state in prose, for commands shown without output or comment."""


AGAIN: dict[str, tuple[str, str]] = {
    r"^agentprop snapshot approve": (
        r"^agentprop snapshot check .*--fault",
        "snapshots.md: reject and approve are the two answers to one candidate ('Then decide:'), "
        "so the check that made it runs again first",
    ),
}
"""Commands that need a state an earlier command of the page made and a later one undid: the
earlier command (the last one of the page matching the pattern) runs again first, unchecked."""


def _match(table: dict[str, str], command: str) -> str | None:
    return next((why for pattern, why in table.items() if re.search(pattern, command)), None)


def promised_exit(cmd: DocCommand) -> int:
    """The exit code the page promises for ``cmd`` (the rules of the module docstring)."""
    if cmd.shown is not None:
        shown = "\n".join(cmd.shown)
        if "agentprop: error:" in shown:
            return 2
        errors = re.search(r"(\d+) error\(s\)", shown)
        if errors is not None:
            return 1 if int(errors.group(1)) else 0
        if "INCOMPLETE:" in shown:
            return 3
        if re.search(
            r"\b[1-9]\d* failed|\bfails "
            r"[1-9]\d*/|\bFAIL\b|\bINCONCLUSIVE\b|\bCHANGED\b|AgentPropertyViolation|survived|"
            r"^bug \d+ \[|^\s*reproducer: \[",
            shown,
            re.M,
        ):
            return 1
        return 0
    if re.search(r"\b[1-9]\d* failed\b", cmd.comment):
        return 1
    if re.search(r"\bpassed\b", cmd.comment):
        return 0
    return next((code for pattern, code, _ in STATED if re.search(pattern, cmd.command)), 0)


def as_typed_from(command: str, prefix: str) -> str:
    """``command`` as a reader in another folder types it: repository paths under ``prefix``,
    a dotted ``examples.…:Class`` as its file path, runs cheapened (module docstring)."""
    words = shlex.split(command)
    out: list[str] = []
    for i, word in enumerate(words):
        if re.match(r"(docs/)?examples/", word):
            word = prefix + word
        elif i > 0 and words[i - 1] == "--agent" and re.match(r"examples\.[\w.]+:\w+$", word):
            module, _, attr = word.partition(":")
            word = f"{prefix}{module.replace('.', '/')}.py:{attr}"
        out.append(word)
    if out[:2] == ["agentprop", "run"]:
        if not any(w.startswith("--corpus") for w in out):
            out += ["--corpus", "none"]
        if not any(w.startswith("--explore") for w in out):
            out += ["--explore", "2"]
    return shlex.join(out)


PAGES = sorted({c.file for c in COMMANDS})


def test_the_pages_hold_the_commands_a_reader_runs() -> None:
    # the collector must find them: a renamed fence would make this file test nothing
    ids = {c.id.split(":")[0] for c in COMMANDS}
    assert {
        "README.md",
        "docs/getting-started.md",
        "docs/tutorial.md",
        "docs/shrinking.md",
        "docs/snapshots.md",
    } <= ids, ids
    assert len(COMMANDS) >= 40, [c.id for c in COMMANDS]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_command_of_the_page_ends_as_promised_from_another_directory(
    page: Path, tmp_path: Path
) -> None:
    repo = _scratch(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    heavy_ok = os.environ.get("AGENTPROP_DOCS_HEAVY") == "1"
    wrong: list[str] = []
    ran = 0
    for cmd in (c for c in COMMANDS if c.file == page):
        if _match(NOT_RUN, cmd.command) is not None or (
            not heavy_ok and _match(HEAVY, cmd.command) is not None
        ):
            continue
        prefix = os.path.relpath(repo, elsewhere) + "/"
        again = next(
            (earlier for pattern, (earlier, _) in AGAIN.items() if re.search(pattern, cmd.command)),
            None,
        )
        if again is not None:
            before = [
                c
                for c in COMMANDS
                if c.file == page and c.line < cmd.line and re.search(again, c.command)
            ]
            run_shown(as_typed_from(before[-1].command, prefix), elsewhere)
        typed = as_typed_from(cmd.command, prefix)
        code, printed = run_shown(typed, elsewhere)
        ran += 1
        expected = promised_exit(cmd)
        if code != expected:
            wrong.append(
                f"{cmd.id}: `{typed}` exited {code}, the page promises {expected}\n    "
                + "\n    ".join(printed[-12:])
            )
    assert not wrong, "\n".join(wrong)
    if not ran:
        pytest.skip("every command of this page is listed in NOT_RUN or HEAVY (with the reason)")
