"""The suite itself: collecting it loads no project.

A test module runs its top level when pytest collects it, on every xdist worker; a project
loaded there is paid for even when no test of the module is selected. Projects are loaded in
fixtures (tests/conftest.py: ``supportops_project``, ``runbook_project``). The scan is static:
statements run at import (module and class bodies, decorators, default values), and any
function of the same module they call, must not call a loader.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
LOADERS = frozenset({"load_project", "load_agent", "load_spec", "load_bindings"})
"""Calls that read a spec, bindings or an agent from disk (examples/ and tests/data/)."""


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _run_at_import(tree: ast.Module) -> list[ast.AST]:
    """The parts of a module that run when it is imported (function bodies do not)."""
    out: list[ast.AST] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out += stmt.decorator_list + stmt.args.defaults
            out += [d for d in stmt.args.kw_defaults if d is not None]
        elif isinstance(stmt, ast.ClassDef):
            out += stmt.decorator_list + stmt.bases
            pending += stmt.body
        else:
            out.append(stmt)
    return out


def import_time_loads(source: str) -> list[str]:
    """``line: name`` of each loader call ``source`` makes when imported, directly or through
    a function of its own."""
    tree = ast.parse(source)
    functions = {
        f.name: f for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    found: list[str] = []
    seen: set[str] = set()
    pending = _run_at_import(tree)
    while pending:
        for node in ast.walk(pending.pop()):
            if not isinstance(node, ast.Call):
                continue
            name = _callee(node)
            if name in LOADERS:
                found.append(f"{node.lineno}: {name}")
            elif isinstance(node.func, ast.Name) and name in functions and name not in seen:
                seen.add(name)
                pending += functions[name].body
    return sorted(found, key=lambda s: int(s.split(":")[0]))


def test_no_test_module_loads_a_project_at_import() -> None:
    offenders = {
        path.name: loads
        for path in sorted(TESTS.glob("*.py"))
        if (loads := import_time_loads(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, (
        f"these test modules load a project when collected: {offenders}; load it in a fixture "
        "(tests/conftest.py has supportops_project and runbook_project) instead"
    )


def test_the_scan_sees_loads_at_import_and_only_those() -> None:
    source = """
import agentprop
import pytest

PROJECT = agentprop.load_project("examples/supportops")
PATHS = len(paths())

def paths():
    return agentprop.load_project("x").scenarios()

@pytest.mark.parametrize("s", load_spec("spec.yaml").nodes)
def test_a(s, d=load_agent("agent:A", ".")):
    load_bindings("agentprop.yaml", s)

class Agent:
    SPEC = load_spec("spec.yaml")

@pytest.fixture(scope="session")
def project():
    return agentprop.load_project("examples/supportops")
"""
    assert import_time_loads(source) == [
        "5: load_project",
        "9: load_project",
        "11: load_spec",
        "12: load_agent",
        "16: load_spec",
    ]
