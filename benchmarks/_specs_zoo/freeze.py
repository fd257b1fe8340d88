"""Recompute the zoo's freeze hash and check it against FREEZE.sha256 (`--write` rewrites it)."""

import hashlib
import pathlib
import sys

here = pathlib.Path(__file__).resolve().parent
files = sorted(p for p in here.rglob("*") if p.is_file() and p.name != "FREEZE.sha256" and "__pycache__" not in p.parts)
digest = hashlib.sha256(
    b"".join(p.relative_to(here).as_posix().encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest() for p in files)
).hexdigest()
(here / "FREEZE.sha256").write_text(digest + "\n") if "--write" in sys.argv else None
sys.exit(f"FREEZE.sha256 mismatch: now {digest}" if (here / "FREEZE.sha256").read_text().strip() != digest else print(digest))
