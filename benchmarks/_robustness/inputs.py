"""Hostile inputs for agentprop's loaders: the bundled specs, bindings and phrase packs, mutated.

Shared by the fuzz test in the suite (``tests/test_fuzz_inputs.py``: a few dozen examples) and
``benchmarks/robustness.py`` (hundreds, each under a timeout). Two levels of mutation:

- **text**: edits of the YAML text itself: characters inserted (control characters, YAML
  indicators, quotes, tabs), spans deleted, lines duplicated, dropped, swapped or re-indented,
  and hostile blocks appended (billion laughs, recursive aliases, 1,000-deep nesting, integers
  of 5,000 digits, 120 KB values, duplicate keys);
- **tree**: the document parsed, one value replaced (by ``null``, a boolean, a huge or negative
  number, ``.inf``/``.nan``, an empty, long, path-like or brace-holding string, a deep list, a
  value taken from elsewhere in the same file), a key or item deleted or duplicated, a key
  renamed, then dumped back to YAML.

:func:`judge` runs one input the way a user would meet it (``agentprop lint`` on a copy of the
example project, then ``agentprop run`` with a small budget when lint accepts it; a phrase pack
is loaded and turned into a paraphrase strategy) and classifies
what happened: ``clear_error`` (exit 2, ``FILE:LINE:COL`` and a fix, a bounded message),
``accepted`` (exit 0 or 1: the mutation left a usable file), ``unclear_error`` (exit 2 without
a location, or an overlong message) or ``traceback`` (an exception escaped).
"""

from __future__ import annotations

import contextlib
import copy
import io
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
PACKS = REPO / "agentprop" / "strategies" / "packs"

MAX_MESSAGE = 2_000
"""A clear error message is at most this long (a 120 KB value must not come back)."""

SPEC_BASES = ("supportops", "expenseguard", "datainsights")
PACK_BASES = ("en", "zh")


@dataclass(frozen=True)
class HostileInput:
    kind: str
    """``spec``, ``bindings`` or ``pack``."""
    base: str
    """The example (``supportops`` ...) or pack language the input was made from."""
    text: str
    how: str
    """The mutations, in words (for reports)."""


@dataclass(frozen=True)
class Outcome:
    verdict: str
    """``clear_error``, ``accepted``, ``unclear_error`` or ``traceback``."""
    detail: str = ""


def base_text(kind: str, base: str) -> str:
    if kind == "pack":
        return (PACKS / f"{base}.yaml").read_text(encoding="utf-8")
    name = "spec.yaml" if kind == "spec" else "agentprop.yaml"
    return (EXAMPLES / base / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- hostile pieces

_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(
        [None, "l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"],
        ["l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8"],
    )
)

BLOCKS = (
    ("billion laughs", _LAUGHS),
    ("recursive alias", "loop: &loop [*loop]\n"),
    ("recursive mapping alias", "loop: &loop {self: *loop}\n"),
    ("1,000-deep flow list", "deep: " + "[" * 1000 + "]" * 1000 + "\n"),
    ("1,000-deep flow map", "deep: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n"),
    ("5,000-digit integer", "big: " + "9" * 5000 + "\n"),
    ("120 KB value", "long: '" + "x" * 120_000 + "'\n"),
    ("undefined alias", "ghost: *nowhere\n"),
    ("python tag", "evil: !!python/object/apply:os.system ['true']\n"),
    ("binary tag", "blob: !!binary aGVsbG8=\n"),
    ("merge key", "base: &base {a: 1}\nmerged: {<<: *base, b: 2}\n"),
    ("second document", "---\nagain: 1\n"),
    ("tab indentation", "tabbed:\n\t- 1\n"),
)

SNIPPETS = (
    "\x00",
    "\x01",
    "\x07",
    "\x1b",
    "\x7f",
    "\ufeff",
    "\u2028",
    "\ud800",
    "\t",
    "\n",
    "\r",
    "\r\n",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    "&a ",
    "*a",
    "!!str ",
    "!!int ",
    "|",
    ">",
    "'",
    '"',
    "#",
    "%",
    "@",
    "`",
    "? ",
    ",",
    "<<: ",
    "~",
    ".inf",
    ".nan",
    "-.inf",
    "0x" + "f" * 40,
    "0x" + "F" * 5000,  # issue #27: integers past the digit limit in other notations
    ":".join(["1"] + ["59"] * 3000),
    '"\\ud83d"',  # a lone surrogate as a YAML escape
    '"\\udc80\\ud83d"',
    '"\\0"',  # a NUL, an escape sequence, a window title as YAML escapes
    '"\\e[2J"',
    '"\\e]0;owned\\a"',
    "1e999",
    "9" * 5000,
    "../..",
    "/etc/passwd",
    "{order_id}",
    "{",
    "}}",
    "é",
    "中文",
    "😀",
)

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.sampled_from([0, -1, 1, 2**31, 2**53 + 1, 10**300, -(10**300), 50_000_000, 99_999_999_999]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [
            "",
            " ",
            "x" * 120_000,
            "{" * 3,
            "{S}",
            "{x}",
            "../../X",
            "/tmp/x",
            "..",
            "a\x01b",
            "line\nbreak",
            "'\"",
            "*",
            "&",
            "yes",
            "no",
            "on",
            "null",
            "~",
            "1e300",
            "9" * 400,
        ]
    ),
    st.text(max_size=20),
)


def _values_in(data: Any) -> list[Any]:
    out: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                out.append(k)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        else:
            out.append(node)

    walk(data)
    return out


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


# --------------------------------------------------------------------------- mutations


@st.composite
def _text_mutation(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """One edit of the YAML text and its description."""
    lines = text.split("\n")
    op = draw(st.sampled_from(["insert", "delete", "line", "scalar", "block"]))
    if op == "insert":
        at = draw(st.integers(0, len(text)))
        piece = draw(st.one_of(st.sampled_from(SNIPPETS), st.text(min_size=1, max_size=5)))
        return text[:at] + piece + text[at:], f"insert {piece[:20]!r} at {at}"
    if op == "delete":
        at = draw(st.integers(0, max(len(text) - 1, 0)))
        n = draw(st.integers(1, 40))
        return text[:at] + text[at + n :], f"delete {n} characters at {at}"
    if op == "line":
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        how = draw(st.sampled_from(["duplicate", "drop", "swap", "indent", "dedent", "tab"]))
        if how == "duplicate":
            lines.insert(i, lines[i])
        elif how == "drop":
            del lines[i]
        elif how == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "indent":
            lines[i] = "  " + lines[i]
        elif how == "dedent":
            lines[i] = lines[i][2:] if lines[i].startswith("  ") else lines[i]
        else:
            lines[i] = "\t" + lines[i].lstrip(" ")
        return "\n".join(lines), f"{how} line {i + 1}"
    if op == "scalar":
        candidates = [
            i
            for i, line in enumerate(lines)
            if re.search(r":\s+\S", line) and not line.lstrip().startswith("#")
        ]
        if not candidates:
            return text, "no scalar to replace"
        i = draw(st.sampled_from(candidates))
        value = draw(
            st.sampled_from(
                [
                    "",
                    "[]",
                    "{}",
                    "null",
                    "true",
                    "-1",
                    "0",
                    ".inf",
                    ".nan",
                    "1.0e+300",
                    "9" * 5000,
                    "'" + "x" * 120_000 + "'",
                    "'../../X'",
                    "[" * 70 + "]" * 70,
                    "*a",
                    "&a x",
                    "!!binary AA==",
                    "{x: 1}",
                ]
            )
        )
        head = lines[i][: lines[i].index(":") + 1]
        lines[i] = f"{head} {value}"
        return "\n".join(lines), f"line {i + 1} value -> {value[:30]!r}"
    name, block = draw(st.sampled_from(BLOCKS))
    if draw(st.booleans()):
        return text.rstrip("\n") + "\n" + block, f"append {name}"
    # inside an existing mapping: indent the block under the first top-level key with a mapping
    return block + text, f"prepend {name}"


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


@st.composite
def _tree_mutation(draw: st.DrawFn, data: Any) -> tuple[Any, str]:
    """One edit of the parsed document and its description."""
    data = copy.deepcopy(data)
    paths = _paths(data)
    path = draw(st.sampled_from(paths))
    here = "/".join(map(str, path)) or "(root)"
    op = draw(
        st.sampled_from(["replace", "borrow", "delete", "duplicate", "rename", "wrap", "deep"])
    )
    if op in ("delete", "duplicate", "rename") and not path:
        op = "replace"
    if op == "replace":
        value: Any = draw(
            st.one_of(
                _SCALARS,
                st.lists(_SCALARS, max_size=3),
                st.dictionaries(st.text(max_size=5), _SCALARS, max_size=3),
            )
        )
    elif op == "borrow":
        value = copy.deepcopy(draw(st.sampled_from(_values_in(data) or [None])))
    elif op == "wrap":
        old = _get(data, path)
        value = draw(st.sampled_from([[old], {"x": old}]))
    elif op == "deep":
        value = _deep(draw(st.sampled_from([10, 63, 70, 200])))
    if op in ("replace", "borrow", "wrap", "deep"):
        if not path:
            return value, f"document -> {op}"
        _get(data, path[:-1])[path[-1]] = value
        return data, f"{op} {here}"
    parent = _get(data, path[:-1])
    key = path[-1]
    if op == "delete":
        del parent[key]
    elif op == "duplicate":
        if isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        else:
            parent[f"{key}_copy"] = copy.deepcopy(parent[key])
    else:  # rename (a typo of the key)
        if isinstance(parent, dict):
            new = draw(
                st.sampled_from(
                    [f"{key}s", str(key)[:-1] or "x", str(key).upper(), f"_{key}", 1, True, None]
                )
            )
            parent[new] = parent.pop(key)
    return data, f"{op} {here}"


def _parse(text: str) -> Any:
    """The document, read within agentprop's YAML limits (``None`` if it cannot be read): an
    earlier mutation may have appended a billion laughs, which plain ``yaml.safe_load`` would
    expand to gigabytes."""
    from agentprop._util.yaml_source import _BoundedLoader

    try:
        loader = _BoundedLoader(text)
    except yaml.YAMLError:  # a character YAML refuses
        return None
    try:
        return loader.get_single_data()
    except (yaml.YAMLError, ValueError, RecursionError):
        return None
    finally:
        loader.dispose()


def _dump(data: Any) -> str | None:
    try:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None


@st.composite
def hostile_inputs(
    draw: st.DrawFn, kinds: tuple[str, ...] = ("spec", "bindings", "pack")
) -> HostileInput:
    """A mutated spec, bindings file or phrase pack (one to three mutations, text or tree)."""
    kind = draw(st.sampled_from(kinds))
    base = draw(st.sampled_from(PACK_BASES if kind == "pack" else SPEC_BASES))
    text = base_text(kind, base)
    steps: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            text, how = draw(_text_mutation(text))
        else:
            data = _parse(text)
            if data is None:
                text, how = draw(_text_mutation(text))
            else:
                mutated, how = draw(_tree_mutation(data))
                dumped = _dump(mutated)
                if dumped is None:
                    continue
                text = dumped
        steps.append(how)
    return HostileInput(kind=kind, base=base, text=text, how="; ".join(steps) or "unchanged")


# --------------------------------------------------------------------------- judging

LOCATED = re.compile(r"^agentprop: error: (?P<file>\S+?):(?P<line>\d+):(?P<col>\d+): ", re.M)


def write_project(item: HostileInput, root: Path) -> Path:
    """A copy of the example project with the mutated file in place; returns the directory."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    example = EXAMPLES / item.base
    for name in ("spec.yaml", "agentprop.yaml"):
        shutil.copy(example / name, root / name)
    for extra in example.glob("*.py"):
        shutil.copy(extra, root / extra.name)
    target = root / ("spec.yaml" if item.kind == "spec" else "agentprop.yaml")
    target.write_text(item.text, encoding="utf-8", errors="surrogatepass")
    return root


def judge(item: HostileInput, workdir: Path, *, run: bool = True) -> Outcome:
    """Run ``item`` as a user would meet it and classify the result (see the module docstring):
    ``agentprop lint`` and, when lint accepts a project and ``run`` is set, ``agentprop run``
    (:data:`RUN_ARGS`). An exception that escapes is returned as ``traceback`` with its text."""
    import traceback

    try:
        if item.kind == "pack":
            return _judge_pack(item, workdir)
        return _judge_project(item, workdir, run=run)
    except Exception:
        return Outcome("traceback", traceback.format_exc()[-3000:])


RUN_ARGS = (
    "--kinds",
    "mft,explore,boundary,dir,inv",
    "--explore",
    "1",
    "--max-runs",
    "20",
    "--concurrency",
    "2",
    "--shrink-budget",
    "0",
    "--corpus",
    "none",
)
"""What an accepted project is run with: every case kind built, a few agent runs of the
example's own Python agent (worlds generated, tools answered, responses checked)."""


def _judge_run(root: Path) -> Outcome:
    """``agentprop run`` on a project that ``lint`` accepted."""
    from agentprop._cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(["run", str(root), *RUN_ARGS], out=out, err=err)
    text = err.getvalue()
    if code in (0, 1):
        return Outcome("accepted", f"run exit {code}")
    if code == 2 and "  fix: " in text and len(text) <= MAX_MESSAGE:
        return Outcome("clear_error", "run: " + text.splitlines()[0][:300])
    return Outcome("unclear_error", f"run exit {code}: {text[:600]}{out.getvalue()[-600:]}")


def _judge_project(item: HostileInput, workdir: Path, *, run: bool = True) -> Outcome:
    from agentprop._cli import main

    root = write_project(item, workdir / "project")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(["lint", str(root)], out=out, err=err)
    text = err.getvalue()
    if code in (0, 1):
        return _judge_run(root) if run else Outcome("accepted", f"exit {code}")
    m = LOCATED.search(text)
    target = root / ("spec.yaml" if item.kind == "spec" else "agentprop.yaml")
    if (
        code == 2
        and m is not None
        and "  fix: " in text
        and len(text) <= MAX_MESSAGE
        and Path(m["file"]).name in (target.name, "spec.yaml", "agentprop.yaml")
    ):
        return Outcome("clear_error", text.splitlines()[0][:300])
    return Outcome("unclear_error", f"exit {code}: {text[:600]}")


def _judge_pack(item: HostileInput, workdir: Path) -> Outcome:
    from agentprop import strategies as aps
    from agentprop.errors import InputError
    from agentprop.strategies._internal.packs import load_pack

    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "pack.yaml"
    path.write_text(item.text, encoding="utf-8", errors="surrogatepass")
    try:
        pack = load_pack(path)
        aps.paraphrases("Please cancel my order O-1001, thanks.", lang=pack.lang, packs=[path])
    except InputError as exc:
        text = str(exc)
        located = (
            exc.location is not None
            and exc.location.line is not None
            and exc.location.column is not None
        )
        if located and exc.fix and len(text) <= MAX_MESSAGE:
            return Outcome("clear_error", text.splitlines()[0][:300])
        return Outcome("unclear_error", text[:600])
    return Outcome("accepted", "loaded")


# -------------------------------------------------------------------------- the attack of issue #15


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def curated_inputs() -> list[HostileInput]:
    """The inputs behind issue #15's 13 causes of tracebacks and its hangs, made from the
    SupportOps example and the English pack."""
    spec = base_text("spec", "supportops")
    bindings = base_text("bindings", "supportops")
    pack = base_text("pack", "en")
    field = "            days_since_created:\n              type: integer\n"
    decision = "      decision:\n        type: string\n        enum:\n        - REQUEST_AUTH_INFO\n"
    when = "when: intent == pii_request"
    window = "cancel_window_days, min: 0}"
    cases = [
        ("spec", "recursive alias", "spec_id: &a [*a]\n" + spec.split("\n", 1)[1]),
        ("spec", "billion laughs", _LAUGHS + spec),
        ("spec", "1,000-deep nesting", spec + "deep: " + "[" * 1000 + "]" * 1000 + "\n"),
        (
            "spec",
            "5,000-digit integer",
            _edit(spec, "max_tool_calls_per_turn: 4", "max_tool_calls_per_turn: " + "9" * 5000),
        ),
        ("spec", "control byte", _edit(spec, "SupportOps Agent", "Support\x01Ops")),
        (
            "spec",
            "when with 130 nested parentheses",
            _edit(spec, when, "when: '" + "(" * 130 + "intent == pii_request" + ")" * 130 + "'"),
        ),
        (
            "spec",
            "when with 400 nots",
            _edit(spec, when, "when: '" + "not " * 400 + "intent == pii_request'"),
        ),
        (
            "spec",
            "decision enum holding an object",
            _edit(spec, decision, decision + "        - {x: 1}\n"),
        ),
        (
            "spec",
            "decision enum holding a number",
            _edit(spec, decision, decision + "        - 5\n"),
        ),
        (
            "spec",
            "minimum > maximum",
            _edit(spec, field, field + "              minimum: 10\n              maximum: 1\n"),
        ),
        (
            "spec",
            "minItems: 50000000",
            _edit(
                spec,
                "      orders:\n        type: array\n",
                "      orders:\n        type: array\n        minItems: 50000000\n",
            ),
        ),
        (
            "spec",
            "120 KB value",
            _edit(spec, "risk_level: medium", "risk_level: '" + "x" * 120_000 + "'"),
        ),
        (
            "bindings",
            "field under a boolean sub-schema",
            _edit(
                bindings,
                "world: {tool: verify_identity, field: verified}",
                "world: {tool: verify_identity, field: verified.deeper.still}",
            ),
        ),
        (
            "bindings",
            "world value of the wrong type",
            _edit(bindings, "    can_cancel: true\n", "    can_cancel: [1, 2]\n"),
        ),
        (
            "bindings",
            "max: .inf",
            _edit(bindings, window, "cancel_window_days, min: 0, max: .inf}"),
        ),
        ("bindings", "agent: ../x", _edit(bindings, "agent: agent:SupportOpsAgent", "agent: ../x")),
        (
            "bindings",
            "huge list index",
            _edit(
                bindings,
                '"orders[0].days_since_created"',
                '"orders[99999999999].days_since_created"',
            ),
        ),
        ("bindings", "duplicate keys", _edit(bindings, "version: 1\n", "version: 1\nversion: 1\n")),
        ("bindings", "billion laughs", bindings + "\n" + _LAUGHS),
        ("pack", "billion laughs", pack + "\n" + _LAUGHS),
        ("pack", "recursive alias", pack + "\nloop: &loop [*loop]\n"),
        ("pack", "control byte", _edit(pack, "greetings:", "greetings:\n  - 'he\x07llo'")),
    ]
    return [
        HostileInput(kind, "en" if kind == "pack" else "supportops", text, how)
        for kind, how, text in cases
    ]
