"""Loading agents named on the command line or in a bindings file (``MODULE:ATTR``).

``ATTR`` may be an agent class (instantiated once per conversation), a zero-argument factory,
or an agent function ``agent(message, ctx)`` itself. Fault knobs (``--fault NAME=P``) are
passed as ``ATTR(faults={...})``; an agent declares its knobs in a ``FAULTS`` mapping of name to
description so unknown names are caught before anything runs.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import json
import os
import site
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprop._agents.runtime import BUILDS, AgentFactory
from agentprop._scenario.build import load_object
from agentprop._util.refs import did_you_mean
from agentprop.errors import InputError, InvalidArgument


@dataclass
class LoadedAgent:
    """An agent factory plus what identifies it (for reports and memoised trials)."""

    ref: str
    factory: AgentFactory
    faults: dict[str, float] = field(default_factory=dict)
    fingerprint: str = ""
    target: Any = field(default=None, repr=False)
    """The class or function the factory wraps (what fault-knob mutants are rebuilt from)."""
    concurrent: bool | None = None
    """Whether the agent's turns are ``async`` (a model-backed agent waiting on an API): then a
    case keeps several of its trials in flight. ``None``: found out by :func:`runs_concurrently`."""


def runs_concurrently(agent: LoadedAgent) -> bool:
    """Whether ``agent``'s turns are coroutines, which several trials of one case may await at
    once; a sync agent's runs (threads contending for the interpreter) gain nothing from it.
    Read off the agent class or function when there is one, else off one agent the factory
    makes (an agent that cannot be made counts as sync: its runs will record the failure)."""
    if agent.concurrent is None:
        target = agent.target
        fn: Any = None
        if inspect.isclass(target):
            fn = getattr(target, "turn", None) or getattr(target, "__call__", None)  # noqa: B004 (the bound __call__ method itself)
        elif target is not None and _takes_two_positional(target):
            fn = target
        if fn is None:
            try:
                made = agent.factory()
                fn = getattr(made, "turn", None) or made
            except (Exception, SystemExit, KeyboardInterrupt):  # agent code: its runs record it
                fn = None
        agent.concurrent = fn is not None and (
            inspect.iscoroutinefunction(fn)
            or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 (the bound __call__ method itself)
        )
    return agent.concurrent


def _takes_two_positional(obj: Any) -> bool:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    params = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    return len(params) == 2


def _excluded_dirs() -> tuple[str, ...]:
    """Where code that is not the project's lives: the standard library, installed packages
    and agentprop itself (their edits do not change what the agent under test is)."""
    paths = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths |= set(site.getsitepackages()) | {site.getusersitepackages()}
    paths.add(str(Path(__file__).resolve().parents[1]))
    return tuple(str(Path(p).resolve()) + os.sep for p in paths if p)


def _imported_names(tree: ast.Module, package: str) -> list[str]:
    """The modules a module's source imports (relative imports resolved against ``package``);
    ``from a import b`` names both ``a`` and ``a.b`` (``b`` may be a submodule)."""
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, base] if base else parts)
            if base:
                out.append(base)
                out += [f"{base}.{a.name}" for a in node.names]
    return out


def _file_facts_of(path: str, package: str) -> tuple[str, tuple[str, ...]] | None:
    """``(sha256 of the file, modules it imports)``, cached per file version."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _file_facts(path, package, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _file_facts(
    path: str, package: str, mtime_ns: int, size: int
) -> tuple[str, tuple[str, ...]] | None:
    """The facts of one version of a file (its mtime and size are part of the key)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    try:
        names = tuple(_imported_names(ast.parse(data), package))
    except (SyntaxError, ValueError):
        names = ()
    return hashlib.sha256(data).hexdigest(), names


def source_files(obj: Any) -> list[str]:
    """The files an agent's fingerprint covers: the module defining ``obj`` and, transitively,
    every module it imports that is the project's (not in the standard library, installed
    packages or agentprop). Modules are found among those already imported (loading the agent
    imported them)."""
    module = inspect.getmodule(obj)
    if module is None or not getattr(module, "__file__", None):
        return []
    excluded = _excluded_dirs()
    seen: dict[str, None] = {}
    queue = [module]
    while queue:
        mod = queue.pop()
        path = getattr(mod, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        path = str(Path(path).resolve())
        if path in seen or (mod is not module and path.startswith(excluded)):
            continue
        seen[path] = None
        package = mod.__name__ if path.endswith("__init__.py") else mod.__name__.rpartition(".")[0]
        facts = _file_facts_of(path, package)
        if facts is None:
            continue
        for name in facts[1]:
            found = sys.modules.get(name)
            if found is not None:
                queue.append(found)
    return sorted(seen)


def source_digest(obj: Any) -> str:
    """A digest of the agent's own source and of every project module it imports (see
    :func:`source_files`): editing the agent or a helper it imports changes its fingerprint,
    so memoised trials of the old code are not reused. Cached per file version."""
    files = source_files(obj)
    if not files:
        try:
            src = inspect.getsource(obj)
        except (OSError, TypeError):
            src = repr(obj)
        return hashlib.sha256(src.encode()).hexdigest()[:16]
    parts = []
    for path in files:
        facts = _file_facts_of(path, "")
        parts.append(f"{Path(path).name}:{facts[0] if facts else 'unreadable'}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def make_factory(
    obj: Any, faults: Mapping[str, float] | None = None, *, ref: str = ""
) -> LoadedAgent:
    faults = dict(faults or {})
    name = ref or getattr(obj, "__qualname__", repr(obj))
    if faults:
        known = getattr(obj, "FAULTS", None)
        if known is None:
            raise InputError(
                f"agent {name} has no fault knobs, but --fault was given",
                fix="drop --fault, or give the agent a FAULTS mapping and a `faults=` parameter",
            )
        unknown = sorted(set(faults) - set(known))
        if unknown:
            listing = "\n".join(f"    {k}: {v}" for k, v in dict(known).items())
            raise InputError(
                f"unknown fault knob(s) {', '.join(unknown)} for agent {name}"
                + (
                    f"; {hint}"
                    if (hint := did_you_mean(unknown[0], [str(k) for k in known]).strip())
                    else ""
                ),
                expected=f"one of:\n{listing}",
                fix="use --fault NAME=P with a name from the list and 0 <= P <= 1",
            )
        for k, p in faults.items():
            if not 0.0 <= p <= 1.0:
                raise InputError(
                    f"fault {k}={p} is not a probability", fix="use a value between 0 and 1"
                )

        def factory() -> Any:
            return obj(faults=faults)

        setattr(factory, BUILDS, obj)  # built as obj itself is (runtime._build)

    elif _takes_two_positional(obj) and not inspect.isclass(obj):

        def factory() -> Any:
            return obj

    else:
        factory = obj
    digest = hashlib.sha256(
        json.dumps(
            {"ref": name, "src": source_digest(obj), "faults": sorted(faults.items())}
        ).encode()
    ).hexdigest()[:16]
    return LoadedAgent(ref=name, factory=factory, faults=faults, fingerprint=digest, target=obj)


def load_agent(
    ref: str,
    base_dir: str | Path = ".",
    faults: Mapping[str, float] | str | None = None,
    *,
    search: Sequence[str | Path] = (),
) -> LoadedAgent:
    """Import ``MODULE:ATTR`` or ``FILE:ATTR`` and wrap it; ``faults`` turns on the agent's fault
    knobs, as a mapping or as ``--fault`` text (``"skip_auth=0.3,leak_pii"``; ``""`` is none).
    A relative file (``agent.py:MyAgent``, ``./so/agent.py:MyAgent``, ``so/agent:MyAgent``) or
    module file is looked for in ``search`` and then ``base_dir``, before installed modules."""
    if isinstance(faults, str):
        faults = parse_faults([f for f in faults.split(",") if f.strip()])
    obj = load_object(ref, Path(base_dir), what="agent", dirs=[Path(d) for d in search])
    return make_factory(obj, faults, ref=ref)


def parse_faults(items: list[str]) -> dict[str, float]:
    """``["skip_auth=0.3", "leak_pii"]`` -> ``{"skip_auth": 0.3, "leak_pii": 1.0}``."""
    out: dict[str, float] = {}
    for item in items:
        name, _, value = item.partition("=")
        name = name.strip()
        if not name:
            raise InputError(
                f"bad --fault {item!r}",
                expected="NAME=P, e.g. skip_auth=0.3",
                fix="name the knob before '='",
            )
        try:
            out[name] = float(value) if value else 1.0
        except ValueError:
            raise InputError(
                f"bad --fault {item!r}: {value!r} is not a number",
                expected="NAME=P with 0 <= P <= 1",
                fix=f"e.g. --fault {name}=0.5",
            ) from None
    return out


def as_loaded_agent(agent: Any) -> LoadedAgent:
    """The agent ``check`` and its relatives were given, as a :class:`LoadedAgent`: one as is, a
    model agent by its own ``loaded()``, anything else (a class, a factory, a function) by
    :func:`make_factory`."""
    if isinstance(agent, LoadedAgent):
        return agent
    loaded = getattr(agent, "loaded", None)
    if callable(loaded) and not isinstance(agent, type):
        result = loaded()  # e.g. AnthropicAgent: its own name and behaviour fingerprint
        if isinstance(result, LoadedAgent):
            return result
    if agent is None:
        raise InvalidArgument(
            "check() needs an agent: a class, a factory, an agent function or a LoadedAgent"
        )
    return make_factory(agent)
