"""The public API: every exported name resolves, ``import agentprop`` is cheap, every public
exception lives in ``agentprop.errors`` under ``AgentPropError`` (issue #12 items 1 and 5), and
the top level is small, with everything else in documented sub-modules (issue #25 item 5): a name
that left the top level (or ``agentprop.strategies``) still works, with a ``DeprecationWarning``
naming its new import path, and no docs page, example or README uses an old path."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agentprop
import agentprop.contracts
import agentprop.errors
import agentprop.strategies

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", agentprop.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(agentprop, name) is not None


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        agentprop.no_such_thing  # noqa: B018


def _fresh(code: str) -> list[str]:
    """The lines ``code`` prints in a fresh interpreter that imports this checkout's agentprop."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


HEAVY = ("hypothesis", "anthropic", "openai", "jsonschema", "numpy", "pydantic", "yaml")
"""Libraries that neither ``import agentprop`` nor ``import agentprop.strategies`` loads."""

LOADED = (
    "print(sorted(m for m in sys.modules if m.startswith('agentprop.')))\n"
    f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
)
"""Code printing the agentprop modules loaded, then the heavy libraries loaded."""


def test_import_agentprop_loads_no_subsystem() -> None:
    agentprop_modules, heavy = _fresh("import sys, agentprop\n" + LOADED)
    # not the strategies, the phrase packs or any subsystem: the errors only
    assert ast.literal_eval(agentprop_modules) == ["agentprop._version", "agentprop.errors"]
    assert heavy == "[]"


def test_every_exported_name_resolves_in_a_fresh_process() -> None:
    # -W error: no name of __all__ is one that left the top level (those warn)
    missing = _fresh(
        "import sys, agentprop\n"
        "assert 'agentprop.strategies' not in sys.modules\n"
        "print(sorted(n for n in agentprop.__all__ if getattr(agentprop, n, None) is None))\n"
        "print(sorted(set(agentprop.__all__) - set(dir(agentprop))))\n"
        "ns = {}\n"
        "exec('from agentprop import *', ns)\n"
        "print(sorted(set(agentprop.__all__) - set(ns)))"
    )
    assert missing == ["[]", "[]", "[]"]


NOT_FOR_A_PARAPHRASE = (
    "agentprop._modelapi",
    "agentprop._scenario",
    "agentprop._spec",
    "agentprop.strategies._internal.boundary",
    "agentprop.strategies._internal.directional",
    "agentprop.strategies._internal.llm_pool",
    "agentprop.strategies._internal.scenarios",
)
"""What a paraphrase does not need: the model-written pool and the model API client, the other
strategies and the spec's solver they draw from."""


@pytest.mark.parametrize(
    "use",
    [
        "import agentprop.strategies as aps; aps.paraphrases",
        "from agentprop.strategies import paraphrases",
        # what agentprop's own modules import (the oracle's plain cases, the run's variants)
        "import agentprop.strategies._internal.paraphrase",
    ],
)
def test_a_strategy_loads_its_own_modules_only(use: str) -> None:
    before, heavy_before, after, heavy_after = _fresh(
        "import sys, agentprop.strategies\n" + LOADED + use + "\n" + LOADED
    )
    assert ast.literal_eval(before) == [
        "agentprop._version",
        "agentprop.errors",
        "agentprop.strategies",
    ]
    assert heavy_before == "[]"
    loaded = ast.literal_eval(after)
    assert "agentprop.strategies._internal.paraphrase" in loaded
    assert [m for m in loaded if m.startswith(NOT_FOR_A_PARAPHRASE)] == []
    assert set(ast.literal_eval(heavy_after)) <= {"pydantic", "yaml"}  # the phrase packs'


def test_the_strategies_are_loaded_from_where_they_are_defined() -> None:
    aps = agentprop.strategies
    assert set(aps._WHERE) == set(aps.__all__) <= set(dir(aps))
    for name, module in aps._WHERE.items():
        fn = getattr(importlib.import_module(module), name)
        assert getattr(aps, name) is fn and fn.__module__ == module


def test_the_public_modules_import() -> None:
    import agentprop.contracts
    import agentprop.strategies
    import agentprop.testing

    assert callable(agentprop.contracts.calls_in_order)
    assert (
        callable(agentprop.strategies.paraphrases) and agentprop.testing.MessagesServer is not None
    )


def _exception_classes(path: Path) -> list[tuple[str, int]]:
    """Public classes defined in ``path`` whose bases name an exception."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            bases = {
                b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                for b in node.bases
            }
            if any(
                b.endswith(
                    ("Error", "Exception", "Warning", "Exhausted", "Miss", "Violation", "ApiKey")
                )
                or b in ("Unsatisfiable",)
                for b in bases
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
    assert elsewhere == [], "define public exceptions in agentprop/errors.py:\n" + "\n".join(
        elsewhere
    )


def test_agentproperror_catches_every_agentprop_error() -> None:
    errors = [
        obj
        for obj in vars(agentprop.errors).values()
        if isinstance(obj, type)
        and issubclass(obj, BaseException)
        and obj.__module__ == "agentprop.errors"
    ]
    assert len(errors) >= 15
    for cls in errors:
        if cls in (agentprop.errors.AgentPropertyViolation, agentprop.errors.AgentPropWarning):
            continue  # a test failure (an AssertionError) and a warning, not errors
        assert issubclass(cls, agentprop.errors.AgentPropError), cls
        assert cls.__doc__ and len(cls.__doc__.split()) >= 12, (
            f"{cls.__name__} needs a docstring saying when it is raised and what to do"
        )
    assert issubclass(agentprop.errors.AgentPropertyViolation, AssertionError)


def test_all_lists_exactly_the_lazy_names_and_the_eager_ones() -> None:
    from agentprop import _WHERE

    eager = {"__version__", "agent_settings"} | {
        n
        for n in dir(agentprop.errors)
        if n[0].isupper()
        and n != "SourceLocation"
        and isinstance(getattr(agentprop.errors, n), type)
        and n not in ("Any", "Path")
    }
    assert set(agentprop.__all__) == set(_WHERE) | (eager & set(agentprop.__all__)) and set(
        _WHERE
    ) <= set(agentprop.__all__)


# ------------------------------------------------------------------ a small surface (issue #25)

PUBLIC_MODULES = (
    "agentprop.agents",
    "agentprop.contracts",
    "agentprop.judges",
    "agentprop.modelapi",
    "agentprop.oracle",
    "agentprop.phrases",
    "agentprop.scenarios",
    "agentprop.snapshots",
    "agentprop.spec",
    "agentprop.strategies",
    "agentprop.tdad",
    "agentprop.testing",
)


def test_a_public_module_is_reachable_from_import_agentprop_alone() -> None:
    code = (
        "import sys, agentprop; assert 'agentprop.spec' not in sys.modules; "
        "print(agentprop.spec.load_spec.__name__, agentprop.oracle.shrink.__name__, "
        "'agentprop._spec.load' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.split() == ["load_spec", "shrink", "True"], proc.stderr
    assert set(agentprop._SUBMODULES) >= {m.removeprefix("agentprop.") for m in PUBLIC_MODULES}


def test_the_top_level_is_small() -> None:
    assert 20 <= len(agentprop.__all__) <= 30, sorted(agentprop.__all__)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_name_of_a_public_module_resolves(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__doc__ and mod.__all__
    for name in mod.__all__:
        assert getattr(mod, name) is not None, f"{module}.{name}"


MOVED_TO = agentprop._MOVED_TO | {
    n: "agentprop.contracts" for n in agentprop.contracts.__all__ if n not in agentprop.__all__
}
"""Every name that left the top level -> its new module (the contracts' one list is their
module's ``__all__``)."""


@pytest.mark.parametrize(("name", "module"), sorted(MOVED_TO.items()))
def test_a_name_that_left_the_top_level_still_works_with_a_warning_naming_its_new_home(
    name: str, module: str
) -> None:
    with pytest.warns(
        DeprecationWarning,
        match=rf"agentprop\.{name} is deprecated: import it from {re.escape(module)} instead",
    ):
        old = getattr(agentprop, name)
    assert old is getattr(importlib.import_module(module), name)
    assert name not in agentprop.__all__ and name not in dir(agentprop)


def test_from_agentprop_import_an_old_name_warns_too() -> None:
    with pytest.warns(DeprecationWarning, match=r"from agentprop\.spec import load_spec"):
        from agentprop import load_spec  # noqa: F401


@pytest.mark.parametrize(("name", "module"), sorted(agentprop.strategies._MOVED_TO.items()))
def test_a_helper_that_is_not_a_strategy_moved_out_of_strategies_with_a_warning(
    name: str, module: str
) -> None:
    with pytest.warns(
        DeprecationWarning, match=rf"agentprop\.strategies\.{name} is deprecated \(not a strategy\)"
    ):
        old = getattr(agentprop.strategies, name)
    assert old is getattr(importlib.import_module(module), name)


def test_strategies_holds_only_strategies() -> None:
    from hypothesis.strategies import SearchStrategy

    for name in agentprop.strategies.__all__:
        fn = getattr(agentprop.strategies, name)
        returns = fn.__annotations__["return"]
        assert "SearchStrategy" in str(returns), (
            f"agentprop.strategies.{name} returns {returns}, not a strategy"
        )
    assert isinstance(agentprop.strategies.paraphrases("Cancel order O-1"), SearchStrategy)


_OLD_TOP = re.compile(
    r"(?<![\w.])agentprop\.("
    + "|".join(sorted(MOVED_TO, key=len, reverse=True))
    + r")\b(?!\.(?:py|yaml|md))"
)
_OLD_STRATEGY = re.compile(
    r"\b(?:aps|strategies)\.("
    + "|".join(sorted(agentprop.strategies._MOVED_TO, key=len, reverse=True))
    + r")\b"
)
_FROM = re.compile(r"from agentprop(\.strategies)? import (\([^)]*\)|[^\n]+)")
FINGERPRINTS = ('"agentprop.AnthropicAgent/1"', '"agentprop.OpenAIAgent/1"')
"""Cache-key strings that name a class; they are data, not import paths (changing them would
invalidate every recorded API call)."""


def _old_paths(text: str) -> list[str]:
    found = [
        m.group(0)
        for m in _OLD_TOP.finditer(text)
        if not any(m.group(0) in f for f in FINGERPRINTS)
    ]
    found += [m.group(0) for m in _OLD_STRATEGY.finditer(text)]
    for m in _FROM.finditer(text):
        moved = agentprop.strategies._MOVED_TO if m.group(1) else MOVED_TO
        names = {n.split()[0] for n in re.split(r"[,()\n]", m.group(2).split("#")[0]) if n.strip()}
        found += [
            f"{m.group(0).split(' import ')[0]} import {n}" for n in sorted(names & set(moved))
        ]
    return found


def _user_facing_files() -> list[Path]:
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "docs").rglob("*.py")),
    ]
    files += sorted((ROOT / "examples").rglob("*.py")) + sorted((ROOT / "tests").rglob("*.py"))
    files += [
        p
        for p in sorted((ROOT / "benchmarks").rglob("*.py"))
        if "_specs_zoo" not in p.parts and "_reach_zoo" not in p.parts
    ]
    files += sorted((ROOT / "agentprop").rglob("*.py"))
    skip = {
        ROOT / "agentprop" / "__init__.py",
        ROOT / "agentprop" / "strategies" / "__init__.py",
        Path(__file__).resolve(),
    }
    return [p for p in files if p not in skip]


def test_docs_examples_readme_and_tests_use_only_the_new_import_paths() -> None:
    old = [
        f"{p.relative_to(ROOT)}: {hit}"
        for p in _user_facing_files()
        for hit in _old_paths(p.read_text(encoding="utf-8"))
    ]
    assert old == [], (
        "use the new import paths (see agentprop/__init__.py's _MOVED):\n" + "\n".join(old)
    )


def test_the_old_path_detector_finds_old_paths() -> None:
    assert _old_paths("x = agentprop.load_spec(p)\nfrom agentprop import Budget, check\n") == [
        "agentprop.load_spec",
        "from agentprop import Budget",
    ]
    assert _old_paths(
        "aps.find_slots(t)\nfrom agentprop.strategies import apply_transforms, paraphrases"
    ) == [
        "aps.find_slots",
        "from agentprop.strategies import apply_transforms",
    ]
    assert _old_paths("agentprop.spec.load_spec(p); agentprop.yaml; agentprop.check(a)") == []
