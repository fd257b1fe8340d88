"""Files agentprop writes and reads back: never torn by a kill, never trusted blindly.

:func:`write_atomic` writes a hidden temporary file and renames it over the target, so readers
see the old file or the new one, never half. :func:`read_regular` and :func:`read_json` open
only regular files, read at most a size limit, and turn any damage into an
:class:`~agentprop.errors.InputError` naming the file and how to fix it, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from agentprop._util.text import find_lone_surrogate
from agentprop.errors import InputError, SourceLocation, clip

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def path_component(name: str, *, reserved: Collection[str] = ()) -> str:
    """``name`` (a spec id, a snapshot or case name) as one safe path component.

    Names made of letters, digits, ``_``, ``.`` and ``-`` that do not start with ``.`` or
    ``-`` are kept as they are. Anything else (``../../X``, ``/etc``, ``..``, separators,
    control characters) has the unsafe characters replaced by ``_``, leading dots and dashes
    dropped and a short hash of the exact name appended, so the result never leaves the
    directory it is joined to, and two names never share a component. ``reserved`` names (a
    folder the store uses itself) get the hash too.
    """
    safe = _UNSAFE_NAME.sub("_", name).lstrip(".-")[:120]
    if safe == name and safe and safe not in reserved:
        return safe
    return f"{safe or '_'}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


STRAY_AGE_S = 3600.0
"""A temporary file of :func:`write_atomic` older than this is a leftover of a killed write."""


def _temp_name(target: Path) -> Path:
    return target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"


def stray_temp_files(target: str | Path, *, older_than: float = STRAY_AGE_S) -> list[Path]:
    """Leftover temporary files of writes of ``target`` killed more than ``older_than``
    seconds ago (a younger one may belong to a write in progress in another process)."""
    target = Path(target)
    now = time.time()
    out = []
    for path in target.parent.glob(f".{target.name}.*.tmp"):
        try:
            if now - path.stat().st_mtime >= older_than:
                out.append(path)
        except OSError:  # removed meanwhile
            continue
    return out


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8) through a temporary file in the same directory and a
    rename: readers see the old file or the new one, never a torn one. Creates the directory;
    removes leftovers of earlier killed writes of the same file (see the module docstring)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    for stray in stray_temp_files(target):
        stray.unlink(missing_ok=True)
    try:
        keep_mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        keep_mode = None
    tmp = _temp_name(target)
    # mode 0o666: the kernel applies the umask, as for any new file (mkstemp would give 0o600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if keep_mode is not None:
                os.fchmod(handle.fileno(), keep_mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


MAX_READ_BYTES = 64 * 1024 * 1024
"""Largest state file read back (64 MiB; a corpus entry or snapshot is a few KB)."""


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular(
    path: str | Path,
    *,
    what: str,
    fix: str,
    limit: int = MAX_READ_BYTES,
    error: type[InputError] = InputError,
) -> bytes:
    """The bytes of ``path`` when it is a regular file (a link to one counts) of at most
    ``limit`` bytes; anything else (missing, a directory, a FIFO, a device such as
    ``/dev/zero``, unreadable, too big) is ``error`` naming the file. Never blocks on a FIFO
    and never reads more than ``limit + 1`` bytes."""
    file = Path(path)
    try:
        mode = os.stat(file).st_mode
    except FileNotFoundError:
        raise error(
            f"{what} not found", location=SourceLocation(file), expected=what, fix=fix
        ) from None
    except OSError as exc:
        raise error(
            f"cannot read {what}: {exc.strerror or exc}",
            location=SourceLocation(file),
            expected="a readable file",
            fix=fix,
        ) from None
    if not stat.S_ISREG(mode):
        kind = _kind_of(mode)
        raise error(
            f"{file} is {kind}, not {what}",
            location=SourceLocation(file),
            expected=f"{what} (a regular file)",
            fix=fix,
        )
    try:
        # O_NONBLOCK: should the file be swapped for a FIFO after the check, open() does not wait
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise error(
                    f"{file} is not a regular file, not {what}",
                    location=SourceLocation(file),
                    expected=what,
                    fix=fix,
                )
            data = handle.read(limit + 1)
    except OSError as exc:
        raise error(
            f"cannot read {what}: {exc.strerror or exc}",
            location=SourceLocation(file),
            expected="a readable file",
            fix=fix,
        ) from None
    if len(data) > limit:
        raise error(
            f"{what} of more than {limit:,} bytes (agentprop's limit for it; damaged, "
            "or not the file meant)",
            location=SourceLocation(file),
            expected=f"{what} of at most {limit:,} bytes",
            fix=fix,
        )
    return data


def read_json(
    path: str | Path,
    *,
    what: str,
    fix: str,
    error: type[InputError] = InputError,
    limit: int = MAX_READ_BYTES,
) -> Any:
    """The JSON document in ``path``; any way the file cannot be read or parsed is ``error``
    (an :class:`InputError` subclass) naming the file and, when known, the line and column.
    ``what`` names the file's kind in the message (``a snapshot file``); ``fix`` says how to
    recover (delete it and record again, restore it from version control ...). Text with a
    lone surrogate (a ``"\\ud83d"`` escape) is refused too: nothing could write it back."""
    file = Path(path)
    data = read_regular(file, what=what, fix=fix, limit=limit, error=error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise error(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} ({what}, damaged)",
            location=SourceLocation(file, line, col),
            expected=f"{what} (JSON, UTF-8)",
            fix=fix,
        ) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"not valid JSON: {exc.msg} ({what}, damaged or edited)",
            location=SourceLocation(file, exc.lineno, exc.colno),
            expected=f"{what} (JSON)",
            fix=fix,
        ) from None
    except RecursionError:
        raise error(
            f"JSON nested too deep to read ({what}, damaged)",
            location=SourceLocation(file, 1, 1),
            expected=f"{what} as agentprop writes it (a few levels deep)",
            fix=fix,
        ) from None
    try:
        bad = find_lone_surrogate(document)
    except RecursionError:
        bad = None  # json.loads managed the depth, so the walk does too, barring a tight stack
    if bad is not None:
        where = ".".join(str(p) for p in bad[0]) or "the top level"
        raise error(
            f"a lone surrogate U+{ord(bad[1]):04X} at {where} ({what}, damaged or edited): not "
            "text anything can write back",
            location=SourceLocation(file),
            expected=f"{what} of valid Unicode text",
            fix=fix,
        )
    return document


def describe_validation(exc: Exception, limit: int = 300) -> str:
    """The first problem of a pydantic ``ValidationError`` as ``where: what`` (cut to
    ``limit`` characters), for messages about damaged files."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors(include_url=False)[0]
        except Exception:  # noqa: BLE001 - describing an error must not raise another
            return clip(str(exc), limit)
        where = ".".join(clip(str(p), 40) for p in first.get("loc", ()))
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        return clip(f"{where}: {msg}" if where else msg, limit)
    return clip(str(exc), limit)
