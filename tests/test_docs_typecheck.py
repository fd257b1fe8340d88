"""The docs' Python passes a user's ``mypy --strict``.

A user copies the docs' examples into a typed project; the public names they use must be typed
well enough for that (``agent_settings`` returning an untyped ``object`` once made the README's
example fail with ``"object" not callable``), and the examples themselves must be typed code.

- The README, the first page and the tutorial's test file are read as one module per page:
  their ```` ```python ```` blocks continue each other (the tutorial's first two blocks are its
  test file; later ones are variations on it, checked alone like any other page's blocks).
- Every other block of every ``docs/*.md`` page is checked on its own when it is a complete
  program (:func:`fragment_reason` says why a block is not; each kind of fragment is named
  there). All of them are checked in one mypy run, on the repository's cache.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[1]
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
PAGES = ["README.md", "docs/testing-the-agent-you-have.md", "docs/tutorial.md"]
TUTORIAL_BLOCKS = 2
"""The tutorial's first two blocks are its test file; later ones are variations on it."""
SEARCH_PATH = ["docs/examples/judges", "examples/supportops"]
"""Where the docs' own helper modules live (the pages put them on ``sys.path``)."""


def blocks_of(page: str) -> list[str]:
    return list(_PYTHON.findall((ROOT / page).read_text(encoding="utf-8")))


def module_of(page: str) -> str:
    blocks = blocks_of(page)
    if page == "docs/tutorial.md":
        blocks = blocks[:TUTORIAL_BLOCKS]
    assert blocks, page
    return "\n".join(blocks)


def fragment_reason(block: str) -> str | None:
    """Why ``block`` is not a complete program (``None`` when it is). The kinds skipped:

    - an interactive session (starts with ``>>>``): its lines are prompts and printed output;
    - not Python on its own (a syntax error): a signature or an excerpt of a larger statement;
    - ``...`` in it: the page elides code the reader writes (``choices=...``, a body left out);
    - a name it neither defines, imports nor gets from builtins: it continues the page's
      prose or an earlier block (``project``, ``agent``, the reader's ``classify_intent``).
    """
    if block.lstrip().startswith(">>>"):
        return "an interactive session"
    try:
        ast.parse(block)
        table = symtable.symtable(block, "<block>", "exec")
    except SyntaxError:
        return "not Python on its own"
    if "..." in block:
        return "elides code with ..."
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    free = sorted(_global_references(table) - bound - set(dir(builtins)))
    return f"uses {', '.join(free)} from elsewhere" if free else None


def _global_references(table: symtable.SymbolTable) -> set[str]:
    names = {
        s.get_name()
        for s in table.get_symbols()
        if s.is_referenced() and (table.get_type() == "module" or s.is_global())
    }
    for child in table.get_children():
        names |= _global_references(child)
    return names


def complete_blocks() -> dict[str, str]:
    """Every complete block not already in a page module, by ``page#index``."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "docs").glob("*.md")):
        page = str(path.relative_to(ROOT))
        for i, block in enumerate(blocks_of(page)):
            if page in PAGES and (page != "docs/tutorial.md" or i < TUTORIAL_BLOCKS):
                continue
            if fragment_reason(block) is None:
                found[f"{page}#{i}"] = block
    return found


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        (">>> import agentprop\n", "an interactive session"),
        ("def f(x, *, n=10,\n", "not Python on its own"),
        ("import agentprop\nagentprop.check(f, ['hi'], prop=...)\n", "elides code with ..."),
        (
            "import agentprop\nagentprop.check(project, 'X', agent)\n",
            "uses agent, project from elsewhere",
        ),
        (
            "import agentprop\n\ndef test() -> None:\n    print(agentprop.__name__, len([1]))\n",
            None,
        ),
    ],
)
def test_fragments_are_told_from_complete_programs(block: str, reason: str | None) -> None:
    assert fragment_reason(block) == reason


def test_the_docs_python_passes_mypy_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = {page: module_of(page) for page in PAGES} | complete_blocks()
    assert len(sources) > len(PAGES) + 10, "the other pages' complete blocks were found"
    names: dict[str, str] = {}
    for i, (where, source) in enumerate(sources.items()):
        (tmp_path / f"snippet_{i}.py").write_text(source, encoding="utf-8")
        names[f"snippet_{i}.py"] = where
    monkeypatch.setenv("MYPYPATH", ":".join(str(ROOT / d) for d in SEARCH_PATH))
    # one run for all snippets, on the repository's cache (warm once `python -m mypy` has run)
    out, err, code = api.run(
        [
            "--strict",
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--python-version",
            "3.11",
            *(str(tmp_path / n) for n in names),
        ]
    )
    named = out.replace(str(tmp_path) + "/", "")
    # snippet_12 before snippet_1
    for file, where in sorted(names.items(), key=lambda kv: -len(kv[0])):
        named = named.replace(file, where)
    assert code == 0, f"mypy --strict on the docs' Python blocks:\n{named}{err}"
