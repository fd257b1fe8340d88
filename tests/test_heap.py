"""``agentprop run`` keeps what it loads out of the garbage collector's sight while its runs go on.

A fresh ``agentprop run`` process holds the model SDK's thousands of type classes, its own
modules, the project and the agent for the whole run; every full collection during the runs
walked them all again (a hundred-odd milliseconds of CPU each on the Anthropic SDK's heap,
where the SDK alone pays for its own only). They are frozen (``gc.freeze``) from the start of
the command and when the agent is loaded, and given back to the collector when it ends; the
``agentprop`` script's process ends with its heap frozen again (the interpreter's last
collection would walk it all only to free what the process gives back anyway)."""

from __future__ import annotations

import gc
import io
import os
import weakref
from pathlib import Path
from typing import Any

import pytest

from agentprop._cli import main
from agentprop._util import aio
from agentprop._util.heap import freeze_more, frozen_heap

SUPPORTOPS = Path(__file__).resolve().parents[1] / "examples" / "supportops"


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_the_block_freezes_the_heap_and_gives_it_back() -> None:
    assert gc.get_freeze_count() == 0
    before = _Node()
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        during = _Node()
        frozen = gc.get_freeze_count()
        freeze_more()  # what was made since is frozen too
        assert gc.get_freeze_count() > frozen
        gone_before, gone_during = weakref.ref(before), weakref.ref(during)
        del before, during
        gc.collect()
        assert gone_before() is not None  # frozen: not even a full collection looks at it
    assert gc.get_freeze_count() == 0
    gc.collect()
    # nothing kept: the cycles are freed once the block gives them back
    assert gone_before() is None and gone_during() is None


def test_a_heap_frozen_by_someone_else_is_left_frozen() -> None:
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        with frozen_heap():
            made = [_Node() for _ in range(1000)]
            freeze_more()
            # not frozen by us: the count can only fall (frozen objects other tests free)
            assert gc.get_freeze_count() <= count
            del made
        assert 0 < gc.get_freeze_count() <= count
    finally:
        gc.unfreeze()
    freeze_more()  # outside a block: nothing
    assert gc.get_freeze_count() == 0


def test_agentprop_run_runs_its_agent_on_a_frozen_heap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    seen: list[int] = []
    real = aio.run

    def spy(coro: Any) -> Any:
        seen.append(gc.get_freeze_count())
        return real(coro)

    monkeypatch.setattr(aio, "run", spy)
    argv = ["run", str(SUPPORTOPS), "--kinds", "mft", "--mode", "fixed", "--runs", "2"]
    code = main([*argv, "--case", "END_BILLING_ANSWER<-N3_BILLING", "--corpus", "none"],
                out=io.StringIO(), err=io.StringIO())  # fmt: skip
    assert code in (0, 3)
    assert seen and seen[0] > 0  # the runs saw the loaded project and agent frozen
    assert gc.get_freeze_count() == 0  # and the command gave them back


def test_the_agentprop_script_ends_its_process_on_a_frozen_heap() -> None:
    # the interpreter's last collection would walk the SDK's classes, the modules and the
    # project only to free memory the ending process gives back anyway
    import subprocess
    import sys

    script = (
        "import gc, sys\n"
        "sys.argv = ['agentprop', '--version']\n"
        "from agentprop.__main__ import console\n"
        "code = console()\n"
        "print(code, gc.get_freeze_count() > 0)\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert proc.stdout.split()[-2:] == ["0", "True"]
