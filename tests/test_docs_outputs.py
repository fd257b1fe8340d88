"""Every command output shown in README.md and docs/ comes from running the command.

A shown output is a fenced ``text`` block whose first line is ``$ COMMAND`` (a later ``$ COMMAND``
line in the block runs next, in the same scratch copy). The test runs the
command (``agentprop ...`` in-process, ``python -m pytest ...`` in a subprocess; leading
``NAME=VALUE`` words set environment variables) in a scratch copy of the repository's examples
(and of ``docs/examples/``, files the docs refer to), and checks the block's lines against what
it printed. ``$ python`` alone runs the ```` ```python ```` block shown right before the text
block, so a Python example and its output cannot drift apart either.

- every shown line must match a printed line, in the order shown;
- a line that is just ``...`` stands for any number of printed lines;
- inside a line, ``...`` (or ``…``) stands for any text, and white space runs are one space;
- durations (``2.1s``, ``0.4 s``) and dollar amounts match any value.

A claim in the docs is a test: the day the headline example stops being true, CI fails here.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```text\n(\$ .*?)^```", re.M | re.S)
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class ShownOutput:
    file: Path
    line: int
    command: str
    lines: tuple[str, ...]
    code: str = ""
    """For ``$ python``: the ```python block right before the text block."""

    @property
    def id(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def shown_outputs() -> list[ShownOutput]:
    out: list[ShownOutput] = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for m in _FENCE.finditer(text):
            body = m.group(1).rstrip("\n").split("\n")
            line = text.count("\n", 0, m.start()) + 2
            code = ""
            if body[0][2:].strip() == "python":
                before = list(_PYTHON.finditer(text, 0, m.start()))
                assert before, (
                    f"{path}:{line}: `$ python` shows the output of the ```python block before "
                    "it, and there is none"
                )
                code = before[-1].group(1)
            out.append(ShownOutput(path, line, body[0][2:].strip(), tuple(body[1:]), code))
    return out


_DURATION = re.compile(r"\d+(?:\.\d+)?\s?s\b")
_DOLLARS = re.compile(r"\$\d+(?:\.\d+)?")


def _normalise(line: str) -> str:
    line = _DURATION.sub("<duration>", line)
    line = _DOLLARS.sub("<usd>", line)
    return " ".join(line.split())


def _line_pattern(shown: str) -> re.Pattern[str]:
    parts = re.split(r"\.\.\.|…", _normalise(shown))
    return re.compile(
        r"\s*" + ".*".join(re.escape(p.strip()) if p.strip() else "" for p in parts) + r"\s*$"
    )


def mismatch(shown: tuple[str, ...], printed: list[str]) -> str | None:
    """``None`` when ``shown`` matches ``printed`` by the rules above; else what did not match."""
    actual = [_normalise(p) for p in printed]
    pos = 0
    gap = False
    for s in shown:
        if s.strip() in ("...", "…"):
            gap = True
            continue
        pattern = _line_pattern(s)
        window = range(pos, len(actual)) if gap else range(pos, min(pos + 1, len(actual)))
        hit = next((i for i in window if pattern.match(actual[i])), None)
        if hit is None:
            # a line the docs show next may sit a little further down (blank lines, progress)
            hit = (
                next((i for i in range(pos, len(actual)) if pattern.match(actual[i])), None)
                if not gap
                else None
            )
            if hit is None:
                return f"shown line not printed (after printed line {pos}): {s!r}"
        pos = hit + 1
        gap = False
    return None


def _scratch(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    shutil.copytree(
        ROOT / "examples",
        work / "examples",
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "*.pending.json"),
    )
    shutil.copytree(
        ROOT / "docs" / "examples",
        work / "docs" / "examples",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return work


def run_shown(command: str, cwd: Path, code: str = "") -> tuple[int, list[str]]:
    env = dict(os.environ)
    if command == "python":
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return proc.returncode, (proc.stdout + proc.stderr).splitlines()
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[:1] == ["agentprop"]:
        from agentprop._cli import main

        buf = io.StringIO()
        saved_env = dict(os.environ)
        saved_cwd = Path.cwd()
        os.environ.update(env)
        os.chdir(cwd)
        try:
            code = main(words[1:], out=buf, err=buf)
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        return code, buf.getvalue().splitlines()
    if words[:3] == ["python", "-m", "pytest"] or words[:1] == ["pytest"]:
        args = words[3:] if words[0] == "python" else words[1:]
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        # no examples saved by an earlier run
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(cwd / ".hypothesis")
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        return proc.returncode, (proc.stdout + proc.stderr).splitlines()
    raise AssertionError(
        f"the docs show output of {command!r}, which this test does not know how to run"
    )


SHOWN = shown_outputs()


def test_the_docs_show_command_outputs() -> None:
    # the collector must find the blocks: a renamed fence would make this file test nothing
    assert len(SHOWN) >= 2, [s.id for s in SHOWN]


def steps(shown: ShownOutput) -> list[tuple[str, tuple[str, ...]]]:
    """The block's commands with the lines each shows: a later line starting ``$ `` is the
    next command, run after the one before in the same scratch copy (import, then run)."""
    out: list[tuple[str, list[str]]] = [(shown.command, [])]
    for line in shown.lines:
        if line.startswith("$ "):
            out.append((line[2:].strip(), []))
        else:
            out[-1][1].append(line)
    return [(command, tuple(lines)) for command, lines in out]


@pytest.mark.parametrize("shown", SHOWN, ids=[s.id for s in SHOWN])
def test_shown_output_is_what_the_command_prints(shown: ShownOutput, tmp_path: Path) -> None:
    scratch = _scratch(tmp_path)
    for command, lines in steps(shown):
        _, printed = run_shown(command, scratch, shown.code)
        problem = mismatch(lines, printed)
        assert problem is None, (
            f"{shown.id}: `{command}`: {problem}\n--- printed ---\n" + "\n".join(printed[-60:])
        )


def test_matching_rules() -> None:
    printed = [
        "agentprop 0.1.0: x",
        "case  verdict",
        "A  PASS  18",
        "B  FAIL  7  turn 1 never called verify_identity",
        "3 cases: 2 passed; 43 runs, $0.0000, 1.2s",
    ]
    assert (
        mismatch(
            (
                "agentprop 0.1.0: x",
                "...",
                "B FAIL 7 turn 1 ...",
                "3 cases: 2 passed; 43 runs, $0.0100, 9.9s",
            ),
            printed,
        )
        is None
    )
    assert mismatch(("A PASS 18", "B PASS 7"), printed) is not None
    assert mismatch(("B FAIL 7 ...", "A PASS 18"), printed) is not None  # order matters
    assert mismatch(("3 cases: 3 passed; ...",), printed) is not None


def test_the_when_expressions_the_reference_shows_parse() -> None:
    from agentprop._spec.when import parse_when

    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    block = text.split("### `when` expressions", 1)[1].split("```\n", 2)[1]
    expressions = [line for line in block.splitlines() if line.strip()]
    assert len(expressions) >= 5
    for expression in expressions:
        parse_when(expression)


def test_python_blocks_run_with_their_output() -> None:
    python = [s for s in SHOWN if s.command == "python"]
    assert len(python) >= 4 and all(s.code.strip() for s in python)
