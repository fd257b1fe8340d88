"""Object references a user types (``--agent``, ``agent:``, ``handlers:``): ``MODULE:ATTR``.

``MODULE`` is either a dotted module name (``agent``, ``pkg.mod``) or a file path (it holds a
``/`` or ends in ``.py``: ``agent.py``, ``./so/agent.py``, ``so/agent``, ``/abs/my.dir/agent``).
A relative file or a dotted name is looked for in each search directory in turn (a file there
wins over an installed module). Anything unknown is an :class:`InputError` naming what was
looked for, where, and the closest known name.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentprop.errors import InputError, clip, clip_repr

_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def did_you_mean(name: str, known: Iterable[str], *, cutoff: float = 0.6) -> str:
    """``"did you mean 'X'? "`` for the known name closest to ``name``, or ``""``."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=cutoff)
    return f"did you mean {close[0]!r}? " if close else ""


def _hint(name: str, known: Iterable[str]) -> str:
    hint = did_you_mean(name, known).strip()
    return f"; {hint}" if hint else ""


@dataclass(frozen=True)
class ObjectRef:
    """``MODULE:ATTR`` split: ``module`` is a dotted name or, when ``is_path``, a file path."""

    text: str
    module: str
    attr: str
    is_path: bool


def parse_ref(ref: str, *, what: str = "object") -> ObjectRef:
    """Split ``ref``; an :class:`InputError` when it is not ``MODULE:ATTR`` or ``PATH:ATTR``."""
    module, colon, attr = ref.rpartition(":")
    ok_attr = bool(attr) and all(p.isidentifier() for p in attr.split("."))
    if not colon or not module or not ok_attr:
        hint = ""
        if not colon and ref.endswith(".py"):
            hint = f" (name the class or function after a colon: `{ref}:MyAgent`)"
        raise InputError(
            f"cannot load {what} {clip_repr(ref)}{hint}",
            expected="MODULE:ATTR or FILE:ATTR, e.g. `agent:MyAgent`, `agent.py:MyAgent`, "
            "`./agents/agent.py:MyAgent` or `mypkg.agents:build`",
            fix="name the module (or the .py file) and the class or function in it, "
            "separated by a colon",
        )
    is_path = "/" in module or os.sep in module or module.endswith(".py") or module.startswith(".")
    if not is_path and not all(p.isidentifier() for p in module.split(".")):
        raise InputError(
            f"cannot load {what} {clip_repr(ref)}: {clip_repr(module)} is neither a dotted module "
            "name nor a file path",
            expected="`pkg.mod:ATTR` (an importable module) or `dir/file.py:ATTR` (a file)",
            fix="write the module as dotted Python names, or as a path to the .py file",
        )
    return ObjectRef(ref, module, attr, is_path)


def is_project_ref(ref: str) -> bool:
    """Whether ``ref`` may stand in a bindings file: a dotted ``MODULE:ATTR``, or a relative file
    path inside the project (no ``..``, not absolute, plain file names) with ``:ATTR``."""
    try:
        parsed = parse_ref(ref)
    except InputError:
        return False
    if not parsed.is_path:
        return True
    if os.path.isabs(parsed.module) or "\\" in parsed.module:
        return False
    parts = [p for p in parsed.module.split("/") if p not in ("", ".")]
    return bool(parts) and all(_SEGMENT.match(p) and p != ".." for p in parts)


_LOADED: dict[
    tuple[str, tuple[str, ...]], tuple[str, Any, Path | None, tuple[int, int] | None]
] = {}
"""``(MODULE, search dirs)`` -> ``(its sys.modules name, the module, the file it came from,
that file's (mtime_ns, size) when loaded)``: a module is imported again only when its file
changed or a test dropped it from ``sys.modules``."""


def _stamp(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _file_candidates(ref: ObjectRef, dirs: Sequence[Path]) -> list[Path]:
    if ref.is_path:
        rel = Path(os.path.expanduser(ref.module))
        names = (
            [rel] if rel.suffix == ".py" else [rel.with_name(rel.name + ".py"), rel / "__init__.py"]
        )
    else:
        rel_mod = Path(*ref.module.split("."))
        names = [rel_mod.with_name(rel_mod.name + ".py"), rel_mod / "__init__.py"]
    if names[0].is_absolute():
        return names
    return [d / n for d in dirs for n in names]


def _load_file(path: Path, search_dir: Path) -> tuple[str, Any]:
    resolved = path.resolve()
    stamp = _stamp(resolved)
    stem = resolved.parent.name if resolved.name == "__init__.py" else resolved.stem
    unique = (
        f"agentprop_user_{abs(hash((str(resolved), stamp)))}_{re.sub(r'[^A-Za-z0-9_]', '_', stem)}"
    )
    module = sys.modules.get(unique)
    if module is None:
        spec = importlib.util.spec_from_file_location(unique, resolved)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[unique] = module
        # the file's own directory (its sibling imports) and the directory searched (a package
        # module importing its package)
        for entry in dict.fromkeys([str(resolved.parent), str(search_dir)]):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(unique, None)
            raise
    return unique, module


def import_ref_module(ref: ObjectRef, dirs: Sequence[Path], *, what: str) -> Any:
    """The module of ``ref``: a file found in ``dirs`` (or at an absolute path), else (for a
    dotted name) an installed module."""
    dirs = [Path(d) for d in dirs] or [Path(".")]
    key = (ref.module, tuple(os.path.abspath(d) for d in dirs))
    known = _LOADED.get(key)
    if (
        known is not None
        and sys.modules.get(known[0]) is known[1]
        and (known[2] is None or known[3] == _stamp(known[2]))
    ):
        return known[1]
    candidates = _file_candidates(ref, dirs)
    found = next((c for c in candidates if c.is_file()), None)
    try:
        if found is not None:
            search_dir = next((d for d in dirs if found.is_relative_to(d)), found.parent)
            unique, module = _load_file(found, search_dir)
        elif ref.is_path:
            raise _missing_file(ref, candidates, what=what)
        else:
            unique, module = ref.module, importlib.import_module(ref.module)
    except InputError:
        raise
    except ModuleNotFoundError as exc:
        if found is None and exc.name is not None and ref.module.startswith(exc.name):
            raise _missing_module(ref, candidates, dirs, what=what) from None
        raise _import_failed(ref, exc, what=what) from None
    except Exception as exc:  # the module itself failed: its error, named
        raise _import_failed(ref, exc, what=what) from None
    _LOADED[key] = (
        unique,
        module,
        found.resolve() if found else None,
        _stamp(found.resolve()) if found else None,
    )
    return module


def load_ref(ref: str, dirs: Sequence[Path], *, what: str = "object") -> Any:
    """The object ``ref`` names (see the module docstring); ``dirs`` are searched in order."""
    parsed = parse_ref(ref, what=what)
    module = import_ref_module(parsed, dirs, what=what)
    obj: Any = module
    for i, part in enumerate(parsed.attr.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = (
                parsed.module
                if i == 0
                else f"{parsed.module}:{'.'.join(parsed.attr.split('.')[:i])}"
            )
            names = _public_names(obj)
            listing = ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")
            raise InputError(
                f"{clip_repr(where)} has no {part!r} (for {what} {clip_repr(ref)})"
                + _hint(part, names),
                expected=f"one of the names it defines: {listing or '(none)'}",
                fix=f"fix the name after the colon, or define {part} in {clip(where, 200)}",
            ) from None
    return obj


def _public_names(obj: Any) -> list[str]:
    """The names a reference could mean: classes and functions defined in the module first."""
    own = getattr(obj, "__name__", None)
    names: list[str] = []
    rest: list[str] = []
    for name, value in vars(obj).items() if hasattr(obj, "__dict__") else []:
        if name.startswith("_"):
            continue
        if (inspect.isclass(value) or inspect.isfunction(value)) and getattr(
            value, "__module__", None
        ) == own:
            names.append(name)
        elif inspect.isclass(value) or inspect.isfunction(value):
            rest.append(name)
    return names or rest


def _missing_file(ref: ObjectRef, candidates: Sequence[Path], *, what: str) -> InputError:
    looked = ", ".join(dict.fromkeys(str(c) for c in candidates if c.name != "__init__.py"))
    nearby: list[str] = []
    for folder in dict.fromkeys(c.parent for c in candidates if c.name != "__init__.py"):
        if folder.is_dir():
            nearby += [p.name for p in folder.glob("*.py")]
    name = Path(ref.module).name
    hint = _hint(name if name.endswith(".py") else name + ".py", nearby)
    return InputError(
        f"no file {clip_repr(ref.module)} for {what} {clip_repr(ref.text)} (looked for "
        f"{clip(looked, 400)})" + hint,
        expected="a .py file, relative to the current directory or the project (the spec's "
        "folder), or an absolute path",
        fix="give the path of the file that defines the agent, e.g. `--agent "
        "path/to/agent.py:MyAgent`",
    )


def _missing_module(
    ref: ObjectRef, candidates: Sequence[Path], dirs: Sequence[Path], *, what: str
) -> InputError:
    nearby = [p.stem for d in dirs if d.is_dir() for p in d.glob("*.py")]
    hint = _hint(ref.module, nearby)
    looked = ", ".join(str(c) for c in candidates if c.name != "__init__.py")
    return InputError(
        f"cannot import module {clip_repr(ref.module)} for {what} {clip_repr(ref.text)}: no file "
        f"{clip(looked, 400)} and no installed module of that name" + hint,
        expected="a module file in the current directory or the project (the spec's folder), an "
        "importable module, or a path",
        fix=f"give the file's path (e.g. `path/to/{ref.module.split('.')[-1]}.py:{ref.attr}`), "
        "or install the package",
    )


def _import_failed(ref: ObjectRef, exc: BaseException, *, what: str) -> InputError:
    return InputError(
        f"cannot import module {clip_repr(ref.module)} for {what} {clip_repr(ref.text)}: "
        f"{type(exc).__name__}: {clip(str(exc), 300)}",
        fix="fix the error in the module (importing it with python shows the traceback), or "
        "install what it imports",
    )
