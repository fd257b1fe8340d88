"""The import rule import-linter cannot state: no private name is imported across packages.

A `_name` is private to the package that defines it (``agentprop._scenario``,
``agentprop.strategies`` ...); another package that needs it asks for it to be made public. The
layers and "no cycle inside a package" are import-linter contracts in pyproject.toml, checked by
`lint-imports`."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentprop"

ALLOWED = {
    # an internal signal of the walk down the tree, caught by the strategies that walk it; a public
    # exception would belong in agentprop/errors.py (tests/test_public_api.py), and this is not one
    "agentprop._scenario.solver._WalkStop",
}


def _package_of(module: str) -> str:
    """``agentprop._scenario.build`` -> ``agentprop._scenario``; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def private_imports_across_packages(
    root: Path, allowed: frozenset[str] | set[str] = frozenset()
) -> list[str]:
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                not isinstance(node, ast.ImportFrom)
                or node.level
                or not (node.module or "").startswith(root.name + ".")
            ):
                continue
            assert node.module is not None
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if (
                    private
                    and _package_of(node.module) != _package_of(module)
                    and f"{node.module}.{alias.name}" not in allowed
                ):
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno}: {module} imports "
                        f"{node.module}.{alias.name}"
                    )
    return found


def test_no_private_name_is_imported_across_packages() -> None:
    found = private_imports_across_packages(PACKAGE, ALLOWED)
    assert not found, (
        "private names imported from another package (make them public there):\n" + "\n".join(found)
    )


def test_the_rule_sees_a_private_import_across_packages_and_allows_one_inside(
    tmp_path: Path,
) -> None:
    root = tmp_path / "agentprop"
    for package in ("_a", "_b"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "_a" / "x.py").write_text("def _helper() -> None: ...\n")
    (root / "_a" / "y.py").write_text("from agentprop._a.x import _helper\n")
    (root / "_b" / "z.py").write_text("from agentprop._a.x import _helper, __doc__\n")
    assert private_imports_across_packages(root) == [
        "agentprop/_b/z.py:1: agentprop._b.z imports agentprop._a.x._helper"
    ]


def test_no_import_is_ignored_by_the_no_cycle_contract() -> None:
    """A cycle inside a package is fixed by moving code, not by an ignore line: the contract in
    pyproject.toml lists no ignored import (the records read the decision rule from
    ``agentprop._decide.rule``, below the oracle)."""
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    acyclic = [c for c in contracts if c.get("type") == "acyclic_siblings"]
    assert acyclic, "the 'no cycle inside a package' contract is missing from pyproject.toml"
    assert all(not c.get("ignore_imports") for c in acyclic), [
        c.get("ignore_imports") for c in acyclic
    ]
