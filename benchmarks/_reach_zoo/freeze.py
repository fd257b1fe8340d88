"""Check (or with --write, rewrite) FREEZE.sha256: one sha256 over every file of the reach zoo
except FREEZE.sha256 itself and caches, taken in order of relative path (path, NUL, bytes, NUL)."""

import hashlib
import sys
from pathlib import Path

ZOO = Path(__file__).resolve().parent
SKIP = {"FREEZE.sha256"}


def digest() -> str:
    h = hashlib.sha256()
    files = [p for p in ZOO.rglob("*") if p.is_file() and p.name not in SKIP and not {"__pycache__", ".agentprop"} & set(p.parts)]
    for p in sorted(files, key=lambda p: p.relative_to(ZOO).as_posix()):
        h.update(p.relative_to(ZOO).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


if __name__ == "__main__":
    if "--write" in sys.argv:
        (ZOO / "FREEZE.sha256").write_text(digest() + "\n")
    ok = (ZOO / "FREEZE.sha256").read_text().strip() == digest()
    print(f"reach zoo freeze {'OK' if ok else 'MISMATCH'}: {digest()}")
    sys.exit(0 if ok else 1)
