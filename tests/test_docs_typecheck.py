"""The docs' headline Python passes a user's ``mypy --strict``.

A user copies the README's example and the first page's test into a typed project; the public
names they use must be typed well enough for that (``agent_settings`` returning an untyped
``object`` once made the README's example fail with ``"object" not callable``). Each page's
```` ```python ```` blocks are joined in order and checked as one module.
"""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
PAGES = ["README.md", "docs/testing-the-agent-you-have.md", "docs/tutorial.md"]
TUTORIAL_BLOCKS = 2
"""The tutorial's first two blocks are its test file; later ones are variations on it."""


def module_of(page: str) -> str:
    blocks = _PYTHON.findall((ROOT / page).read_text(encoding="utf-8"))
    if page == "docs/tutorial.md":
        blocks = blocks[:TUTORIAL_BLOCKS]
    assert blocks, page
    return "\n".join(blocks)


def test_the_pages_python_passes_mypy_strict(tmp_path: Path) -> None:
    files = []
    for i, page in enumerate(PAGES):
        source = tmp_path / f"snippet_{i}.py"
        source.write_text(module_of(page), encoding="utf-8")
        files.append(str(source))
    # one run for all pages, on the repository's cache (warm once `python -m mypy` has run)
    out, err, code = api.run(["--strict", "--cache-dir", str(ROOT / ".mypy_cache"), "--python-version", "3.11", *files])
    named = out.replace(str(tmp_path) + "/", "")
    for i, page in enumerate(PAGES):
        named = named.replace(f"snippet_{i}.py", page)
    assert code == 0, f"mypy --strict on the docs' Python blocks:\n{named}{err}"
