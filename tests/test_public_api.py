"""The public API: every exported name resolves, ``import agentprop`` is cheap, and every public
exception lives in ``agentprop.errors`` under ``AgentPropError`` (issue #12 items 1 and 5)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import agentprop
import agentprop.errors

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", agentprop.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(agentprop, name) is not None


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        agentprop.no_such_thing  # noqa: B018


def test_import_agentprop_loads_no_subsystem() -> None:
    code = (
        "import sys, agentprop; "
        "print(sorted(m for m in sys.modules if m.startswith(('agentprop._', 'hypothesis', 'anthropic', 'jsonschema', 'numpy')) and m != 'agentprop._version'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]", proc.stdout


def test_the_public_modules_import() -> None:
    import agentprop.contracts
    import agentprop.strategies
    import agentprop.testing

    assert agentprop.contracts.calls_in_order is agentprop.calls_in_order
    assert callable(agentprop.strategies.paraphrases) and agentprop.testing.MessagesServer is not None


def _exception_classes(path: Path) -> list[tuple[str, int]]:
    """Public classes defined in ``path`` whose bases name an exception."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases}
            if any(
                b.endswith(("Error", "Exception", "Warning", "Exhausted", "Miss", "Violation", "ApiKey")) or b in ("Unsatisfiable",) for b in bases
            ):
                found.append((node.name, node.lineno))
    return found


def test_every_public_exception_is_defined_in_errors_py() -> None:
    elsewhere = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted((ROOT / "agentprop").rglob("*.py"))
        if path.name != "errors.py"
        for name, line in _exception_classes(path)
    ]
    assert elsewhere == [], "define public exceptions in agentprop/errors.py:\n" + "\n".join(elsewhere)


def test_agentproperror_catches_every_agentprop_error() -> None:
    errors = [
        obj
        for obj in vars(agentprop.errors).values()
        if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == "agentprop.errors"
    ]
    assert len(errors) >= 15
    for cls in errors:
        if cls in (agentprop.errors.AgentPropertyViolation, agentprop.errors.AgentPropWarning):
            continue  # a test failure (an AssertionError) and a warning, not errors
        assert issubclass(cls, agentprop.errors.AgentPropError), cls
        assert cls.__doc__ and len(cls.__doc__.split()) >= 12, f"{cls.__name__} needs a docstring saying when it is raised and what to do"
    assert issubclass(agentprop.errors.AgentPropertyViolation, AssertionError)


def test_all_lists_exactly_the_lazy_names_and_the_eager_ones() -> None:
    from agentprop import _WHERE

    eager = {"__version__", "agent_settings"} | {
        n
        for n in dir(agentprop.errors)
        if n[0].isupper() and n != "SourceLocation" and isinstance(getattr(agentprop.errors, n), type) and n not in ("Any", "Path")
    }
    assert set(agentprop.__all__) == set(_WHERE) | (eager & set(agentprop.__all__)) and set(_WHERE) <= set(agentprop.__all__)
