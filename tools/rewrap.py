"""Wrap the lines that ``ruff format`` cannot: comments, docstrings and long string literals.

    python tools/rewrap.py [--line-length 100] [--check] PATH...

Each file is formatted by ruff, rewrapped and formatted again until nothing changes. Invariants:
the module's AST is unchanged (every string value byte-identical, a statement string such as a
docstring keeps its words), and a file whose AST would change is refused, not written; a second
run changes nothing. A line that cannot be wrapped is listed; inside a multi-line string, which
cannot change, it gets ``# noqa: E501`` at the end of the string.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
import unicodedata
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# frozen zoos: their FREEZE.sha256 hashes every file, so no tool may touch them
EXCLUDE = ("benchmarks/_specs_zoo", "benchmarks/_reach_zoo")
NOQA = "# noqa: E501"
_PRAGMA = re.compile(r"#\s*(noqa\b|type:|pragma:|pyright:|pylint:|mypy:|fmt:|isort:|ruff:|nosec\b)")
_LIST_ITEM = re.compile(r"([-*+]|\d+[.)]) ")
_FIELD_ITEM = re.compile(r"(:\w|\*{0,2}\w[\w.]*( \([^)]*\))?: )")
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)
_FSTRING_END = getattr(tokenize, "FSTRING_END", -1)
_BREAK_AFTER = " /,;:-)]}|&"


class RefusedError(Exception):
    """The rewrapped file would not mean what the original means (the reason says how)."""


@dataclass(frozen=True)
class Leftover:
    """A line still longer than the limit after rewrapping, and why it was left."""

    line: int
    width: int
    reason: str


@dataclass
class Tok:
    """A token with its bracket depth; an f-string (3.12+) is merged into one STRING token."""

    type: int
    text: str
    start: tuple[int, int]
    end: tuple[int, int]
    depth: int


@dataclass
class Edit:
    """Replace rows first..last (1-based, inclusive) with ``lines``."""

    first: int
    last: int
    lines: list[str]


@dataclass
class Pass:
    """What one rewrap pass found: the edits to make and the lines it could not wrap."""

    edits: list[Edit] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)
    unskipped: list[int] = field(default_factory=list)  # rows whose ``# fmt: skip`` went


def width(text: str) -> int:
    """Display width, as ruff measures it (East Asian wide characters count two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def overlong(line: str, limit: int, comment_col: int | None = None) -> bool:
    """Whether ruff's E501 reports ``line`` (it ignores single words, trailing URLs, pragmas)."""
    text = line.rstrip("\r\n")
    if width(text) <= limit:
        return False
    chunks = text.split()
    if len(chunks) == 1 or (len(chunks) == 2 and chunks[0] == "#"):
        return False
    if comment_col is not None and re.search(
        r"#\s*noqa(?::[^#]*\bE501\b|(?!:))", text[comment_col:]
    ):
        return False  # silenced: a line no tool could wrap, marked by hand or --noqa-leftovers
    if "://" in chunks[-1] and width(text) - width(chunks[-1]) <= limit:
        return False
    if comment_col is not None:  # a trailing pragma (noqa, type: ignore) does not count
        segments = re.split(r"\s+(?=#)", text[comment_col:].strip())
        while segments and _PRAGMA.match(segments[-1]):
            segments.pop()
        code = text[:comment_col]
        kept = code.rstrip() + "  " if code.strip() else code
        if width((kept + "  ".join(segments)).rstrip()) <= limit:
            return False
    return True


# --- tokens -----------------------------------------------------------------------------------


def _slice(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    (r1, c1), (r2, c2) = start, end
    if r1 == r2:
        return lines[r1 - 1][c1:c2]
    return lines[r1 - 1][c1:] + "".join(lines[r1 : r2 - 1]) + lines[r2 - 1][:c2]


def tokens(src: str, lines: Sequence[str]) -> list[Tok]:
    """The tokens of ``src`` with bracket depths; the parts of a 3.12 f-string are merged."""
    out: list[Tok] = []
    depth = 0
    nest = 0
    fstart = (0, 0)
    fdepth = 0
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type == _FSTRING_START:
            if nest == 0:
                fstart, fdepth = t.start, depth
            nest += 1
            continue
        if nest:
            if t.type == _FSTRING_END:
                nest -= 1
                if nest == 0:
                    text = _slice(lines, fstart, t.end)
                    out.append(Tok(tokenize.STRING, text, fstart, t.end, fdepth))
            continue
        if t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
        out.append(Tok(t.type, t.string, t.start, t.end, depth))
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
    return out


# --- string literals --------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    """A string literal taken apart: prefix letters, quote and body (as written)."""

    prefix: str
    quote: str
    body: str

    @property
    def raw(self) -> bool:
        return "r" in self.prefix.lower()

    @property
    def fmt(self) -> bool:
        return "f" in self.prefix.lower()


def parse_literal(text: str) -> Literal | None:
    """``text`` as a one-line literal, or None for a triple-quoted or malformed one."""
    match = re.fullmatch(r"([A-Za-z]*)(['\"])(.*)\2", text, re.DOTALL)
    if match is None or text[len(match.group(1)) :].startswith(match.group(2) * 3):
        return None
    return Literal(match.group(1), match.group(2), match.group(3))


def _units(lit: Literal) -> list[tuple[str, bool]]:
    """The body cut where it may be split: (text, is_replacement_field); escapes stay whole."""
    body, out, i = lit.body, [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            j = _escape_end(body, i, lit.raw)
            out.append((body[i:j], False))
            i = j
        elif lit.fmt and c in "{}" and body[i : i + 2] in ("{{", "}}"):
            out.append((body[i : i + 2], False))
            i += 2
        elif lit.fmt and c == "{":
            j = _field_end(body, i)
            out.append((body[i:j], True))
            i = j
        else:
            out.append((c, False))
            i += 1
    return out


def _escape_end(body: str, i: int, raw: bool) -> int:
    if raw or i + 1 >= len(body):
        return min(i + 2, len(body))
    c = body[i + 1]
    if c == "N" and body[i + 2 : i + 3] == "{":
        close = body.find("}", i)
        return len(body) if close < 0 else close + 1
    n = {"x": 2, "u": 4, "U": 8}.get(c)
    if n is not None:
        return min(i + 2 + n, len(body))
    if c in "01234567":
        j = i + 1
        while j < len(body) and j < i + 4 and body[j] in "01234567":
            j += 1
        return j
    return i + 2


def _field_end(body: str, i: int) -> int:
    """The end of the replacement field opened at ``body[i]`` (nested braces and strings)."""
    depth, j = 0, i
    while j < len(body):
        c = body[j]
        if c in "'\"":
            close = j + 1
            while close < len(body) and body[close] != c:
                close += 2 if body[close] == "\\" else 1
            j = close + 1
            continue
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return len(body)


def _render(lit: Literal, units: Sequence[tuple[str, bool]]) -> str:
    text = "".join(u for u, _ in units)
    prefix = lit.prefix
    if lit.fmt and not any(is_field for _, is_field in units):
        prefix = prefix.replace("f", "").replace("F", "")
        text = text.replace("{{", "{").replace("}}", "}")
    return f"{prefix}{lit.quote}{text}{lit.quote}"


def split_literal(text: str, room: int, first_room: int | None = None) -> list[str] | None:
    """``text`` cut into literals of at most ``room`` columns that concatenate to its value.

    The first literal gets ``first_room`` columns when given. Cuts go after a space where one
    fits, else after punctuation, else between characters; never inside an escape or a
    replacement field. None when no cut is possible.
    """
    lit = parse_literal(text)
    if lit is None:
        return None
    units = _units(lit)
    overhead = len(lit.prefix) + 2 * len(lit.quote)
    pieces: list[list[tuple[str, bool]]] = []
    start = 0
    while start < len(units):
        avail = max((room if pieces or first_room is None else first_room) - overhead, 8)
        used, end, best, soft = 0, start, -1, -1
        while end < len(units) and used + width(units[end][0]) <= avail:
            used += width(units[end][0])
            end += 1
            last = units[end - 1][0]
            if last == " " or last == "\\n":
                best = end
            elif last[-1] in _BREAK_AFTER:
                soft = end
        if end >= len(units):
            pieces.append(list(units[start:]))
            break
        cut = best if best > start else soft if soft > start else end
        if cut == start:  # one unit (a field) wider than the room: it goes alone
            cut = start + 1
        pieces.append(list(units[start:cut]))
        start = cut
    pieces = _merge_crumbs(pieces, room - overhead)
    if len(pieces) < 2:
        return None
    if sum(width(u) for u, _ in pieces[-1]) < 20:  # a crumb: "... as the final " "action."
        before_last = (room if len(pieces) > 2 or first_room is None else first_room) - overhead
        pieces[-2:] = _balanced(pieces[-2] + pieces[-1], before_last) or pieces[-2:]
    return [_render(lit, piece) for piece in pieces]


def _balanced(units: list[tuple[str, bool]], avail: int) -> list[list[tuple[str, bool]]] | None:
    """``units`` cut in two after a space (the head within ``avail``): the last space that
    leaves the tail 20 columns, else the one nearest the middle."""
    widths = [width(u) for u, _ in units]
    total = sum(widths)
    best: tuple[tuple[int, int], int] | None = None
    used = 0
    for i, (unit, _) in enumerate(units[:-1]):
        used += widths[i]
        if used > avail:
            break
        score = (0, -used) if total - used >= 20 else (1, abs(2 * used - total))
        if unit == " " and (best is None or score < best[0]):
            best = (score, i + 1)
    return None if best is None else [units[: best[1]], units[best[1] :]]


def _merge_crumbs(pieces: list[list[tuple[str, bool]]], avail: int) -> list[list[tuple[str, bool]]]:
    """Short pieces next to a replacement field too wide for any line joined to it.

    A line cannot hold such a field anyway; a piece of a few characters beside it (a
    parenthesis, a word) only adds a line.
    """

    def wide(piece: list[tuple[str, bool]]) -> bool:
        return any(is_field and width(u) > avail for u, is_field in piece)

    def crumb(piece: list[tuple[str, bool]]) -> bool:
        return sum(width(u) for u, _ in piece) <= 12 and not wide(piece)

    out: list[list[tuple[str, bool]]] = []
    for piece in pieces:
        if out and ((wide(out[-1]) and crumb(piece)) or (crumb(out[-1]) and wide(piece))):
            out[-1] = out[-1] + piece
        else:
            out.append(piece)
    return out


def join_literals(texts: Sequence[str]) -> str | None:
    """One literal with the value of the concatenation of ``texts``, or None if they differ in kind.

    The parts must share their quote and their prefix apart from ``f``; a plain part joined to
    an f-string has its braces doubled.
    """
    lits = [parse_literal(t) for t in texts]
    if any(lit is None for lit in lits):
        return None
    parts = [lit for lit in lits if lit is not None]
    kinds = {(lit.quote, lit.prefix.replace("f", "").replace("F", "")) for lit in parts}
    if len(kinds) != 1:
        return None
    fmt = any(lit.fmt for lit in parts)
    bodies = [
        lit.body if lit.fmt or not fmt else lit.body.replace("{", "{{").replace("}", "}}")
        for lit in parts
    ]
    first = parts[0]
    prefix = first.prefix if first.fmt or not fmt else first.prefix + "f"
    return f"{prefix}{first.quote}{''.join(bodies)}{first.quote}"


# --- the module's structure -------------------------------------------------------------------


def _char_col(lines: Sequence[str], row: int, byte_col: int) -> int:
    return len(lines[row - 1].encode()[:byte_col].decode(errors="ignore"))


@dataclass
class Structure:
    """Where the statement strings are and which spans must not be touched."""

    statement_strings: set[tuple[int, int]] = field(default_factory=set)
    protected: list[tuple[tuple[int, int], tuple[int, int]]] = field(default_factory=list)

    def is_protected(self, pos: tuple[int, int]) -> bool:
        return any(a <= pos < b for a, b in self.protected)


def structure(tree: ast.Module, lines: Sequence[str]) -> Structure:
    """Statement strings (docstrings and their kin) and annotations and match patterns."""
    out = Structure()

    def span(node: ast.expr | ast.pattern) -> tuple[tuple[int, int], tuple[int, int]]:
        start = (node.lineno, _char_col(lines, node.lineno, node.col_offset))
        end_row, end_col = node.end_lineno or node.lineno, node.end_col_offset or 0
        return start, (end_row, _char_col(lines, end_row, end_col))

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out.statement_strings.add(span(node.value)[0])
        annotations: list[ast.expr | ast.pattern | None] = []
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif isinstance(node, ast.match_case):
            annotations.append(node.pattern)
        out.protected.extend(span(a) for a in annotations if a is not None)
    return out


# --- one pass ---------------------------------------------------------------------------------


def _comment_parts(line: str) -> tuple[str, str, int, str] | None:
    """(indent, marker, hang, text) of a full-line comment, or None for a pragma or shebang."""
    match = re.fullmatch(r"([ \t]*)(#:?)( *)(.*?)\s*", line)
    if match is None or _PRAGMA.match(line.strip()) or line.lstrip().startswith(("#!", "# -*-")):
        return None
    indent, marker, spaces, text = match.groups()
    return indent, marker, max(len(spaces) - 1, 0), text


def _item_hang(text: str) -> int:
    match = _LIST_ITEM.match(text)
    return len(match.group(0)) if match else 0


def _cut_words(text: str, avail: int) -> tuple[str, str]:
    """``text`` cut at the last space that leaves the head within ``avail`` columns."""
    if width(text) <= avail:
        return text, ""
    literal = [m.span() for m in re.finditer(r"(`+)[^`]+?\1", text)]  # ``code`` stays whole
    best = -1
    for match in re.finditer(r" +", text):
        if match.start() == 0 or any(a < match.start() < b for a, b in literal):
            continue
        if width(text[: match.start()]) <= avail:
            best = match.start()
        else:
            break
    if best < 0:
        spaces = [m.start() for m in re.finditer(r"(?<=\S) +", text)]
        free = [p for p in spaces if not any(a < p < b for a, b in literal)]
        if not free:
            return text, ""
        best = free[0]
    return text[:best], text[best:].lstrip(" ")


def _is_continuation(text: str) -> bool:
    return bool(text) and not _LIST_ITEM.match(text) and not _FIELD_ITEM.match(text)


def _balanced_lines(
    first_prefix: str, cont_prefix: str, head: str, tail: str, limit: int
) -> list[str] | None:
    """``head tail`` as two lines cut at a space: the last that leaves the second line 20 columns
    of text, else the one nearest the middle; None if none fits."""
    text = f"{head} {tail}"
    literal = [m.span() for m in re.finditer(r"(`+)[^`]+?\1", text)]
    best: tuple[tuple[int, int], list[str]] | None = None
    for match in re.finditer(r" +", text):
        p = match.start()
        if any(a < p < b for a, b in literal):
            continue
        one, two = first_prefix + text[:p], cont_prefix + text[match.end() :]
        rest = width(text[match.end() :])
        score = (0, -width(one)) if rest >= 20 else (1, abs(width(one) - width(two)))
        if width(one) <= limit and width(two) <= limit and (best is None or score < best[0]):
            best = (score, [one, two])
    return None if best is None else best[1]


def wrap_paragraph(
    rows: Sequence[tuple[str, str] | None],
    first_prefix: str,
    cont_prefix: str,
    text: str,
    limit: int,
) -> tuple[list[str], int]:
    """Wrap ``text`` from the first of ``rows``, carrying the overflow into the next rows.

    ``rows`` are the (prefix, text) of the lines after the first, None where a row may not
    take words (not a plain continuation). Returns the new lines and how many of ``rows``
    they replace.
    """
    out: list[str] = []
    prefix, used = first_prefix, 0
    while True:
        head, tail = _cut_words(text, limit - width(prefix))
        out.append((prefix + head).rstrip())
        if not tail:
            if len(out) == 2 and used == 0 and width(head) < 20:  # a crumb: even the two out
                out = (
                    _balanced_lines(
                        first_prefix, cont_prefix, out[0][len(first_prefix) :], head, limit
                    )
                    or out
                )
            return out, used
        prefix = cont_prefix
        nxt = rows[used] if used < len(rows) else None
        if nxt is not None and nxt[0] == cont_prefix and _is_continuation(nxt[1]):
            text = tail + " " + nxt[1]
            used += 1
        else:
            text = tail


def _comment_edit(
    lines: Sequence[str], row: int, full_comment_rows: set[int], limit: int
) -> Edit | None:
    parts = _comment_parts(lines[row - 1].rstrip("\r\n"))
    if parts is None:
        return None
    indent, marker, hang, text = parts
    ruler = re.match(r"([-=#*~_])\1{9,}", text)
    if ruler is not None:  # a section rule: shorter, not wrapped
        over = width(lines[row - 1].rstrip("\r\n")) - limit
        keep = max(len(ruler.group(0)) - over, 3)
        short = f"{indent}{marker} {' ' * hang}{ruler.group(1) * keep}{text[ruler.end() :]}"
        return Edit(row, row, [short + "\n"])
    first_prefix = f"{indent}{marker} {' ' * hang}"
    cont_prefix = first_prefix + " " * _item_hang(text)
    following: list[tuple[str, str] | None] = []
    r = row + 1
    while r in full_comment_rows:
        nxt = _comment_parts(lines[r - 1].rstrip("\r\n"))
        if nxt is None or nxt[0] != indent or nxt[1] != marker:
            break
        following.append((f"{nxt[0]}{nxt[1]} {' ' * nxt[2]}", nxt[3]))
        r += 1
    new, used = wrap_paragraph(following, first_prefix, cont_prefix, text, limit)
    if len(new) == 1:
        return None
    return Edit(row, row + used, [line + "\n" for line in new])


def _split_comment(comment: str) -> tuple[list[str], list[str]]:
    """A trailing comment cut into its notes and its pragmas (``# noqa``, ``# type:`` ...)."""
    notes: list[str] = []
    pragmas: list[str] = []
    for segment in re.split(r"\s+(?=#)", comment.strip()):
        (pragmas if _PRAGMA.match(segment) else notes).append(segment)
    return notes, pragmas


def _move_comment_edit(lines: Sequence[str], row: int, comment: Tok, limit: int) -> Edit | None:
    """The trailing comment of ``row`` moved onto lines of its own above it (pragmas stay)."""
    line = lines[row - 1].rstrip("\r\n")
    if row > 1 and lines[row - 2].rstrip("\r\n").endswith("\\"):
        return None
    notes, pragmas = _split_comment(comment.text)
    if not notes:
        return None
    code = line[: comment.start[1]].rstrip()
    indent = code[: len(code) - len(code.lstrip())]
    text = " ".join(re.sub(r"^#+:?\s*", "", note) for note in notes)
    marker = "#:" if notes[0].startswith("#:") else "#"
    above, _ = wrap_paragraph([], f"{indent}{marker} ", f"{indent}{marker} ", text, limit)
    kept = code + ("  " + "  ".join(pragmas) if pragmas else "")
    return Edit(row, row, [a + "\n" for a in above] + [kept + "\n"])


def _run(toks: Sequence[Tok], i: int) -> list[Tok]:
    """The one-line strings that follow ``toks[i]`` in its implicit concatenation, each first
    on its own line, with nothing but line breaks between them."""
    run = [toks[i]]
    j = i + 1
    while j < len(toks):
        t = toks[j]
        if t.type == tokenize.NL:
            j += 1
            continue
        prev = run[-1]
        one_line = t.end[0] == t.start[0] and t.depth > 0
        if t.type != tokenize.STRING or t.start[0] == prev.end[0] or not one_line:
            break
        run.append(t)
        j += 1
    return run


def _split_edit(
    lines: Sequence[str], toks: Sequence[Tok], i: int, row_toks: Sequence[Tok], limit: int
) -> Edit | None:
    """The string ``toks[i]`` and the rest of its concatenation re-cut to fit, where ruff puts it.

    Ruff lays the parts of a broken concatenation out one a line: in a bracket opened on the
    same line, 4 columns in per bracket; as a keyword or dict value, the first part stays and
    the rest go at the line's indent; elsewhere it adds parentheses.
    """
    tok = toks[i]
    row = tok.start[0]
    line = lines[row - 1]
    indent = len(line) - len(line.lstrip())
    run = _run(toks, i)
    joined = join_literals([t.text for t in run]) if len(run) > 1 else tok.text
    if joined is None:
        run, joined = [tok], tok.text
    opened = 0
    for t in row_toks:
        if t is tok:
            break
        if t.type == tokenize.OP and t.text in "([{":
            opened += 1
        elif t.type == tokenize.OP and t.text in ")]}":
            opened = max(opened - 1, 0)
    if row_toks[0] is tok:
        first_col = rest_col = tok.start[1]
    elif tok.depth == 0 or opened:
        first_col = rest_col = indent + 4 * max(opened, 1)
    else:
        first_col = tok.start[1]
        rest_col = run[1].start[1] if len(run) > 1 else indent
    pieces = split_literal(joined, limit - rest_col - 1, limit - first_col - 1)
    if pieces is None or pieces == [t.text for t in run]:
        return None
    last = run[-1]
    head, tail = line[: tok.start[1]], lines[last.end[0] - 1][last.end[1] :]
    if len(run) == 1:
        return Edit(row, row, [head + " ".join(pieces) + tail])
    body = [head + pieces[0] + "\n"] + [" " * rest_col + p + "\n" for p in pieces[1:]]
    body[-1] = body[-1][:-1] + tail
    return Edit(row, last.end[0], body)


def _statement_string_edit(lines: Sequence[str], tok: Tok, limit: int) -> Edit | None:
    """The long prose lines of a triple-quoted statement string (a docstring) rewrapped.

    Code blocks (fenced, ``::`` literal blocks, doctests) and tables are left as they are.
    """
    match = re.match(r"[A-Za-z]*('''|\"\"\")", tok.text)
    if match is None:
        return None
    (r1, c1), (r2, c2) = tok.start, tok.end
    if lines[r2 - 1][c2:].strip():
        return None
    opening = lines[r1 - 1][: c1 + match.end()]
    rows: list[tuple[str, str]] = []  # (prefix, text) of each row of the string
    for r in range(r1, r2 + 1):
        line = lines[r - 1].rstrip("\r\n")
        if r == r1:
            rows.append((opening, line[len(opening) :]))
        else:
            stripped = line.lstrip(" ")
            rows.append((line[: len(line) - len(stripped)], stripped))
    prose = _prose_rows(rows)
    out: list[str] = []
    i = 0
    changed = False
    while i < len(rows):
        prefix, text = rows[i]
        line = prefix + text
        if not (prose[i] and overlong(line, limit) and not text.endswith("\\")):
            out.append(line)
            i += 1
            continue
        base = prefix if i > 0 else opening[: len(opening) - len(opening.lstrip())]
        cont = base + " " * _item_hang(text)
        following = [rows[j] if prose[j] else None for j in range(i + 1, len(rows))]
        new, used = wrap_paragraph(following, prefix, cont, text, limit)
        changed = changed or len(new) > 1
        out.extend(new)
        i += 1 + used
    if not changed:
        return None
    return Edit(r1, r2, [line + "\n" for line in out])


def _prose_rows(rows: Sequence[tuple[str, str]]) -> list[bool]:
    """Which rows of a docstring are prose (not a code block, doctest or table)."""
    out: list[bool] = []
    fence = False
    literal_indent: int | None = None
    doctest = False
    for i, (prefix, text) in enumerate(rows):
        indent = len(prefix) if i else 0
        stripped = text.strip()
        if literal_indent is not None and stripped and indent <= literal_indent:
            literal_indent = None
        if stripped.startswith("```"):
            fence = not fence
            out.append(False)
            continue
        if not stripped:
            doctest = False
        elif stripped.startswith(">>>"):
            doctest = True
        code = (
            fence or doctest or literal_indent is not None or stripped.startswith(("|", "+-", "=="))
        )
        out.append(not code and bool(stripped))
        if stripped.endswith("::") and literal_indent is None:
            literal_indent = indent
    return out


def _noqa_edit(lines: Sequence[str], row: int) -> Edit | None:
    line = lines[row - 1].rstrip("\r\n")
    if "noqa" in line:
        return None
    return Edit(row, row, [f"{line}  {NOQA}\n"])


def _unformatted_rows(toks: Sequence[Tok]) -> dict[int, Tok | None]:
    """The rows ruff format leaves as written: those of a ``# fmt: skip`` statement (with that
    comment) and of a ``# fmt: off`` region (with None)."""
    rows: dict[int, Tok | None] = {}
    start: int | None = None
    skip: Tok | None = None
    off_from: int | None = None
    for t in toks:
        if t.type == tokenize.COMMENT:
            text = t.text.replace(" ", "")
            if "#fmt:skip" in text:
                skip = t
            elif text.startswith("#fmt:off") and off_from is None:
                off_from = t.start[0]
            elif text.startswith("#fmt:on") and off_from is not None:
                rows.update(dict.fromkeys(range(off_from, t.start[0] + 1)))
                off_from = None
        if t.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
            if skip is not None and start is None:  # a comment line of its own
                skip = None
            continue
        if t.type == tokenize.COMMENT:
            continue
        if start is None:
            start = t.start[0]
        if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if skip is not None:
                rows.update(dict.fromkeys(range(start, t.start[0] + 1), skip))
            start, skip = None, None
    if off_from is not None:
        rows.update(dict.fromkeys(range(off_from, toks[-1].end[0] + 1 if toks else off_from + 1)))
    return rows


def _unskip_edit(lines: Sequence[str], comment: Tok) -> Edit:
    """``# fmt: skip`` taken out of ``comment``, so that ruff formats the statement it ends."""
    row = comment.start[0]
    line = lines[row - 1]
    rest = re.sub(r"\s*#\s*fmt:\s*skip\b", "", comment.text).strip()
    code = line[: comment.start[1]].rstrip()
    return Edit(row, row, [code + (f"  {rest}" if rest.startswith("#") else "") + "\n"])


def rewrap_pass(
    src: str, limit: int, noqa_leftovers: bool = False, comments_only: bool = False
) -> Pass:
    """One pass over formatted source: the edits that wrap its long lines, and what is left.

    ``comments_only`` makes only the comments' edits: the first pass, before ruff formats the
    source, so that a trailing comment does not make ruff break the code it follows.
    """
    lines = src.splitlines(keepends=True)
    toks = tokens(src, lines)
    index = {id(t): i for i, t in enumerate(toks)}
    info = structure(ast.parse(src), lines)
    by_row: dict[int, list[Tok]] = {}
    multiline: dict[int, Tok] = {}
    for t in toks:
        if t.type in (
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            continue
        by_row.setdefault(t.start[0], []).append(t)
        if t.type == tokenize.STRING and t.end[0] > t.start[0]:
            for r in range(t.start[0], t.end[0] + 1):
                multiline[r] = t
    frozen = _unformatted_rows(toks)
    full_comment_rows = {
        r for r, ts in by_row.items() if len(ts) == 1 and ts[0].type == tokenize.COMMENT
    }
    result = Pass()
    done: set[int] = set()
    for row in range(1, len(lines) + 1):
        row_toks = by_row.get(row, [])
        comment = next((t for t in row_toks if t.type == tokenize.COMMENT), None)
        line = lines[row - 1]
        if not overlong(line, limit, comment.start[1] if comment else None):
            continue
        edit: Edit | None = None
        reason = "code that ruff format cannot wrap"
        if row in frozen:
            skip = frozen[row]
            if skip is None or comments_only:
                result.leftovers.append(
                    Leftover(row, width(line.rstrip()), "in a # fmt: off region")
                )
            elif id(skip) not in done:  # a table too wide for the limit: ruff lays it out
                done.add(id(skip))
                result.edits.append(_unskip_edit(lines, skip))
                result.unskipped.append(skip.start[0])
            continue
        string = multiline.get(row)
        if comments_only:
            if string is None and comment is not None and row in full_comment_rows:
                edit = _comment_edit(lines, row, full_comment_rows, limit)
            elif string is None and comment is not None and _split_comment(comment.text)[0]:
                edit = _move_comment_edit(lines, row, comment, limit)
            if edit is not None:
                result.edits.append(edit)
            continue
        if string is not None:
            if id(string) in done:
                continue
            done.add(id(string))
            if string.start in info.statement_strings:
                edit = _statement_string_edit(lines, string, limit)
                reason = "a code block, doctest or table in a docstring"
            if edit is None:
                edit = _noqa_edit(lines, string.end[0])
                if edit is None:
                    continue
                reason = "inside a multi-line string (# noqa: E501 at its end)"
                result.leftovers.append(Leftover(row, width(line.rstrip("\r\n")), reason))
        elif comment is not None and row in full_comment_rows:
            edit = _comment_edit(lines, row, full_comment_rows, limit)
            reason = "a comment that cannot be wrapped"
        elif comment is not None and _split_comment(comment.text)[0]:
            edit = _move_comment_edit(lines, row, comment, limit)
        else:
            strings = [
                t
                for t in row_toks
                if t.type == tokenize.STRING and t.end[0] == row and not info.is_protected(t.start)
            ]
            statement = [t for t in strings if t.start in info.statement_strings]
            if statement:
                edit = _statement_string_edit(lines, statement[0], limit)
            for tok in sorted(strings, key=lambda t: -width(t.text)):
                if edit is None:
                    edit = _split_edit(lines, toks, index[id(tok)], row_toks, limit)
            if edit is None and any(
                info.is_protected(t.start) for t in row_toks if t.type == tokenize.STRING
            ):
                reason = "a string in an annotation or a match pattern"
        if edit is None:
            result.leftovers.append(Leftover(row, width(line.rstrip("\r\n")), reason))
            if noqa_leftovers:
                edit = _noqa_edit(lines, row)
        if edit is not None:
            result.edits.append(edit)
    return result


def apply(src: str, edits: Sequence[Edit]) -> str:
    """``src`` with the non-overlapping ``edits`` made (an edit overlapping an earlier one
    waits)."""
    lines = src.splitlines(keepends=True)
    taken: list[Edit] = []
    for edit in sorted(edits, key=lambda e: e.first):
        if taken and edit.first <= taken[-1].last:
            continue
        taken.append(edit)
    for edit in reversed(taken):
        lines[edit.first - 1 : edit.last] = edit.lines
    return "".join(lines)


# --- the self-check ---------------------------------------------------------------------------


class _Normalise(ast.NodeTransformer):
    """Adjacent f-string parts merged, a statement string reduced to its words."""

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        self.generic_visit(node)
        values: list[ast.expr] = []
        for value in node.values:
            last = values[-1] if values else None
            if isinstance(value, ast.Constant) and isinstance(last, ast.Constant):
                values[-1] = ast.Constant(str(last.value) + str(value.value))
            else:
                values.append(value)
        if all(isinstance(v, ast.Constant) for v in values):
            return ast.Constant(
                "".join(str(v.value) for v in values if isinstance(v, ast.Constant))
            )
        node.values = values
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            node.value = ast.Constant(" ".join(node.value.value.split()))
        return node


def normalised_dump(src: str) -> tuple[str, int]:
    """The AST of ``src`` as compared by the self-check, and how many warnings parsing gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tree = ast.parse(src)
    return ast.dump(_Normalise().visit(tree)), len(caught)


def check_same(before: str, after: str) -> None:
    """Raise RefusedError unless ``after`` parses to the AST of ``before`` (normalised)."""
    try:
        new = normalised_dump(after)
    except SyntaxError as exc:
        raise RefusedError(f"the rewrapped text does not parse: {exc}") from exc
    old = normalised_dump(before)
    if new[0] != old[0]:
        raise RefusedError("the rewrapped text has a different AST (a string value changed)")
    if new[1] > old[1]:
        raise RefusedError("the rewrapped text gives a warning the original did not (an escape?)")


# --- files ------------------------------------------------------------------------------------


def _ruff(args: Sequence[str], src: str) -> subprocess.CompletedProcess[str]:
    ruff = shutil.which("ruff")
    command = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    return subprocess.run([*command, *args], input=src, capture_output=True, text=True)


def ruff_format(src: str, path: Path, limit: int) -> str:
    """``src`` formatted by ruff at ``limit`` columns (with the project's other settings)."""
    done = _ruff(["format", "--line-length", str(limit), "--stdin-filename", str(path), "-"], src)
    if done.returncode != 0:
        raise RefusedError(f"ruff format failed: {done.stderr.strip()}")
    return done.stdout


_NOQA_CODES = re.compile(r"#\s*noqa:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)")


def stranded_noqa(src: str) -> list[tuple[Tok, list[str], int]]:
    """The ``# noqa: CODES`` comments ruff format left on the closing line of a statement it
    split: (comment, codes, first row of the statement)."""
    lines = src.splitlines(keepends=True)
    toks = tokens(src, lines)
    out: list[tuple[Tok, list[str], int]] = []
    start: int | None = None
    for t in toks:
        if t.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT):
            if t.type == tokenize.COMMENT and start is not None and t.start[0] > start:
                code = lines[t.start[0] - 1][: t.start[1]].strip()
                match = _NOQA_CODES.search(t.text)
                if match and re.fullmatch(r"[)\]}]+[:,]?", code):
                    codes = [c.strip() for c in match.group(1).split(",")]
                    out.append((t, [c for c in codes if c != "E501"], start))
            continue
        if start is None:
            start = t.start[0]
        if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            start = None
    return [item for item in out if item[1]]


def relocate_noqa(src: str, path: Path) -> str:
    """Each stranded ``# noqa`` moved to the line of the statement where ruff reports its codes."""
    stranded = stranded_noqa(src)
    if not stranded:
        return src
    codes = sorted({c for _, cs, _ in stranded for c in cs})
    args = ["check", "--ignore-noqa", "--select", ",".join(codes), "--output-format", "json"]
    done = _ruff([*args, "--stdin-filename", str(path), "-"], src)
    try:
        found = [(v["location"]["row"], v["code"]) for v in json.loads(done.stdout or "[]")]
    except (ValueError, KeyError, TypeError):
        return src
    lines = src.splitlines(keepends=True)
    for comment, wanted, first in sorted(stranded, key=lambda item: -item[0].start[0]):
        row = comment.start[0]
        rows = {r for r, c in found if c in wanted and first <= r <= row}
        if len(rows) != 1 or row in rows:
            continue
        (target,) = rows
        lines[row - 1] = lines[row - 1][: comment.start[1]].rstrip() + "\n"
        lines[target - 1] = f"{lines[target - 1].rstrip()}  {comment.text}\n"
    return "".join(lines)


@dataclass
class Outcome:
    """The rewrapped text of one file and the lines still long in it."""

    text: str
    leftovers: list[Leftover]
    unskipped: list[int] = field(
        default_factory=list
    )  # rows (when it happened) of `# fmt: skip`s taken out


def rewrap(src: str, limit: int, path: Path | None = None, noqa_leftovers: bool = False) -> Outcome:
    """``src`` rewrapped (and formatted by ruff when ``path`` is given) until nothing changes."""
    current = apply(src, rewrap_pass(src, limit, comments_only=True).edits)
    unskipped: list[int] = []
    for _ in range(12):
        formatted = (
            relocate_noqa(ruff_format(current, path, limit), path) if path is not None else current
        )
        found = rewrap_pass(formatted, limit, noqa_leftovers)
        unskipped += found.unskipped
        new = apply(formatted, found.edits)
        check_same(src, new)
        if new == formatted == current:
            return Outcome(new, found.leftovers, unskipped)
        current = new
    raise RefusedError("rewrapping did not settle in 12 passes")


def python_files(paths: Sequence[str], root: Path) -> Iterator[Path]:
    """The .py files under ``paths``, leaving out the frozen zoos and hidden directories."""
    for given in paths:
        path = Path(given)
        found = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for file in found:
            full = file.resolve()
            rel = (
                full.relative_to(root).as_posix() if full.is_relative_to(root) else file.as_posix()
            )
            if any(rel == ex or rel.startswith(ex + "/") for ex in EXCLUDE):
                continue
            if any(part.startswith(".") or part == "__pycache__" for part in Path(rel).parts[:-1]):
                continue
            yield file


_MYPY_LINE = re.compile(r"^(?P<file>[^:\n]+):(?P<row>\d+): error: .*  \[(?P<code>[\w-]+)\]$", re.M)
_TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")


def relocate_type_ignores(mypy_output: str) -> list[str]:
    """Each ``# type: ignore`` that mypy calls unused moved to the line of the same statement
    where mypy reports its error (ruff format leaves it on the closing line of a statement it
    splits). Returns what was moved, as ``file:row -> row``."""
    errors: dict[str, list[tuple[int, str]]] = {}
    for error in _MYPY_LINE.finditer(mypy_output):
        errors.setdefault(error["file"], []).append((int(error["row"]), error["code"]))
    moved: list[str] = []
    for file, found in errors.items():
        unused = sorted((r for r, c in found if c == "unused-ignore"), reverse=True)
        if not unused or not Path(file).is_file():
            continue
        src = Path(file).read_text(encoding="utf-8")
        lines = src.splitlines(keepends=True)
        toks = tokens(src, lines)
        starts = _statement_starts(toks)
        for row in unused:
            comment = next(
                (t for t in toks if t.type == tokenize.COMMENT and t.start[0] == row), None
            )
            ignore = _TYPE_IGNORE.search(comment.text) if comment else None
            if comment is None or ignore is None:
                continue
            codes = {c.strip() for c in (ignore["codes"] or "").split(",") if c.strip()}
            first = starts.get(row, row)
            rows = {
                r
                for r, c in found
                if first <= r < row and c != "unused-ignore" and (not codes or c in codes)
            }
            if len(rows) != 1:
                continue
            (target,) = rows
            lines[row - 1] = lines[row - 1][: comment.start[1]].rstrip() + "\n"
            lines[target - 1] = f"{lines[target - 1].rstrip()}  {comment.text}\n"
            moved.append(f"{file}:{row} -> {target}")
        new = "".join(lines)
        check_same(src, new)
        Path(file).write_text(new, encoding="utf-8")
    return moved


def _statement_starts(toks: Sequence[Tok]) -> dict[int, int]:
    """The first row of the statement each row belongs to."""
    out: dict[int, int] = {}
    start: int | None = None
    for t in toks:
        if t.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT):
            if start is not None:
                out[t.start[0]] = start
            continue
        if start is None:
            start = t.start[0]
        for r in range(t.start[0], t.end[0] + 1):
            out[r] = start
        if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            start = None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("paths", nargs="*", help="files or directories (their .py files)")
    parser.add_argument("--line-length", type=int, default=100)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a file would change"
    )
    parser.add_argument(
        "--noqa-leftovers", action="store_true", help="mark every line left long with # noqa: E501"
    )
    parser.add_argument(
        "--type-ignores",
        action="store_true",
        help="only move each type: ignore mypy (run here) calls unused to its error's line",
    )
    args = parser.parse_args(argv)
    if args.type_ignores:
        done = subprocess.run(
            [sys.executable, "-m", "mypy", *args.paths], capture_output=True, text=True
        )
        for line in relocate_type_ignores(done.stdout):
            print(f"type: ignore moved: {line}")
        return 0
    if not args.paths:
        parser.error("give the files or directories to rewrap")
    root = Path.cwd().resolve()
    changed = refused = left = 0
    for path in python_files(args.paths, root):
        src = path.read_text(encoding="utf-8")
        try:
            outcome = rewrap(src, args.line_length, path, args.noqa_leftovers)
        except (RefusedError, SyntaxError) as exc:
            print(f"{path}: refused, left unchanged: {exc}", file=sys.stderr)
            refused += 1
            continue
        for row in outcome.unskipped:
            print(f"{path}:{row}: # fmt: skip taken out: the statement is wider than the limit")
        for item in outcome.leftovers:
            print(f"{path}:{item.line}: {item.width} columns: {item.reason}")
            left += "noqa" not in item.reason
        if outcome.text != src:
            changed += 1
            if args.check:
                print(f"{path}: would be rewrapped")
            else:
                path.write_text(outcome.text, encoding="utf-8")
    verb = "would be rewrapped" if args.check else "rewrapped"
    print(f"{changed} files {verb}, {refused} refused, {left} lines left long", file=sys.stderr)
    return 1 if refused or left or (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
