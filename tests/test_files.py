"""Atomic file writes: the old content or the new, never half, and no temporary left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentprop._util.files import write_atomic


def test_writes_creates_directories_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "x.json"
    assert write_atomic(target, "one") == target
    write_atomic(target, "two ✓")
    assert target.read_text(encoding="utf-8") == "two ✓"
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_a_failed_write_keeps_the_old_file_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "x.json"
    write_atomic(target, "old")

    def broken(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
