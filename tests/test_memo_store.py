"""The trial memo behind a store interface (issue #29 item 3): a run stored by one process is
replayed by another, through the SQLite file or a real Redis server alike."""

from __future__ import annotations

import multiprocessing
import os
import re
import time
from pathlib import Path

import pytest

from agentprop._decide.memo import FileMemoStore, RedisMemoStore, TrialMemo, open_memo_store
from agentprop._scenario.trace import Trace, Turn
from agentprop.errors import InvalidArgument

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"


def _memo(spec: tuple[str, str]) -> TrialMemo:
    backend, where = spec
    if backend == "file":
        return TrialMemo(where)
    return TrialMemo(store=open_memo_store(where))


@pytest.fixture(params=["file", "redis"])
def memo_spec(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """How a process opens one fresh shared memo (picklable, for spawned processes)."""
    if request.param == "file":
        return ("file", str(tmp_path / "trials.sqlite"))
    return (
        "redis",
        f"{request.getfixturevalue('redis_url')}?prefix=memo{os.getpid()}-{time.monotonic_ns()}",
    )


def _trace(i: int) -> Trace:
    return Trace(trial=i, turns=[Turn(index=0, user_message=f"message {i}")])


def _store_runs(spec: tuple[str, str], keys: list[str]) -> None:
    memo = _memo(spec)
    for i, key in enumerate(keys):
        memo.put(key, _trace(i))


def test_a_run_stored_by_one_process_is_replayed_by_another(memo_spec: tuple[str, str]) -> None:
    memo = _memo(memo_spec)
    keys = [memo.key("input", "agent-fingerprint", trial) for trial in range(3)]
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_store_runs, args=(memo_spec, keys))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 0
    assert len(memo) == 3
    got = memo.get(keys[2])
    assert got is not None and got.turns[0].user_message == "message 2" and memo.hits == 1
    assert memo.get(memo.key("input", "another agent", 0)) is None and memo.misses == 1
    # a fresh memo in this process too: nothing held in memory, all from the store
    assert _memo(memo_spec).get(keys[0]) == _trace(0)


def test_the_store_of_a_memo_is_the_file_or_the_server(redis_url: str, tmp_path: Path) -> None:
    assert isinstance(TrialMemo(tmp_path / "t.sqlite").store, FileMemoStore)
    assert TrialMemo().store is None
    store = open_memo_store(f"{redis_url}?prefix=p{time.monotonic_ns()}&run=ignored")
    assert (
        isinstance(store, RedisMemoStore)
        and store.key.endswith(":memo")
        and store.key.startswith("p")
    )
    with pytest.raises(InvalidArgument, match="a path or a store, not both"):
        TrialMemo(tmp_path / "t.sqlite", store=store)


MEMO_TEST = f"""
import agentprop

EXAMPLE = {str(EXAMPLE)!r}
project = agentprop.load_project(EXAMPLE)
CLEAN = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)


def test_billing():
    agentprop.check(project, "END_BILLING_ANSWER<-N3_BILLING", CLEAN, settings=agentprop.settings(mode="fixed", runs=4, seed=1))
"""  # noqa: E501


def test_two_pytest_sessions_on_one_store_share_the_memo(
    redis_url: str, pytester: pytest.Pytester
) -> None:
    # two CI machines (here two sessions in other directories): the second replays the first's runs
    pytester.makepyfile(test_billing=MEMO_TEST)
    store = f"{redis_url}?prefix=pytest{time.monotonic_ns()}"
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--agentprop-store", store)
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--agentprop-store", store)
    first.assert_outcomes(passed=1)
    second.assert_outcomes(passed=1)
    made = re.search(r"(\d+) new agent runs, (\d+) memo hits", first.stdout.str())
    again = re.search(r"(\d+) new agent runs, (\d+) memo hits", second.stdout.str())
    assert made is not None and again is not None, first.stdout.str() + second.stdout.str()
    assert int(made[1]) == 4 and int(again[1]) == 0 and int(again[2]) == 4
    assert not (pytester.path / ".agentprop" / "trials.sqlite").exists()


def test_a_memo_file_under_a_shared_store_is_read_and_never_written(
    redis_url: str, tmp_path: Path
) -> None:
    import hashlib

    from agentprop._decide.memo import FrozenFileMemoStore, LayeredMemoStore, ReadOnlyMemoStore
    from agentprop.errors import MemoFileError

    path = tmp_path / "trials.sqlite"
    older = TrialMemo(path)  # an earlier session's memo file (committed, or left by a run)
    kept = older.key("input", "agent", 0)
    older.put(kept, _trace(0))
    assert isinstance(older.store, FileMemoStore)
    older.store._close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    files = sorted(p.name for p in tmp_path.iterdir())

    shared = open_memo_store(f"{redis_url}?prefix=layered{time.monotonic_ns()}")
    memo = TrialMemo(store=LayeredMemoStore(shared, FrozenFileMemoStore(path)))
    assert memo.get(kept) == _trace(0)  # the file's run, replayed
    new = memo.key("input", "agent", 1)
    memo.put(new, _trace(1))
    assert shared.get(new) is not None and shared.get(kept) is None  # new runs: the store's
    assert TrialMemo(store=shared).get(new) == _trace(1)  # ... where another process finds them
    # the file is as it was: not written, no journal or WAL file beside it
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    with pytest.raises(MemoFileError, match="is not written"):
        FrozenFileMemoStore(path).put(new, "{}")
    # a read-only store drops what is stored through it
    ReadOnlyMemoStore(shared).put(memo.key("input", "agent", 2), "{}")
    assert shared.get(memo.key("input", "agent", 2)) is None
    # a file that is not a memo is named
    (tmp_path / "other.sqlite").write_text("not a database")
    with pytest.raises(MemoFileError, match="other.sqlite"):
        FrozenFileMemoStore(tmp_path / "other.sqlite")


def test_a_pytest_session_on_a_store_replays_the_projects_memo_file(
    redis_url: str, pytester: pytest.Pytester
) -> None:
    # runs a session left in .agentprop/trials.sqlite are replayed under the store, the file
    # untouched and nothing run again
    pytester.makepyfile(test_billing=MEMO_TEST)
    memo_file = pytester.path / ".agentprop" / "trials.sqlite"
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--agentprop-memo",
                                          str(memo_file))  # fmt: skip
    first.assert_outcomes(passed=1)
    before = memo_file.read_bytes()
    store = f"{redis_url}?prefix=files{time.monotonic_ns()}"
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--agentprop-store", store)
    second.assert_outcomes(passed=1)
    again = re.search(r"(\d+) new agent runs, (\d+) memo hits", second.stdout.str())
    assert again is not None and (int(again[1]), int(again[2])) == (0, 4), second.stdout.str()
    assert memo_file.read_bytes() == before


def test_a_frozen_memo_file_sees_the_runs_still_in_its_wal(tmp_path: Path) -> None:
    # a session still open (or killed before its checkpoint) keeps its latest runs in the WAL
    # beside the file; the frozen reader must see them, not the file's older state alone
    from agentprop._decide.memo import FrozenFileMemoStore

    path = tmp_path / "trials.sqlite"
    open_session = TrialMemo(path)
    key = open_session.key("input", "agent", 0)
    open_session.put(key, _trace(0))
    assert (tmp_path / "trials.sqlite-wal").stat().st_size > 0  # not yet checkpointed
    assert TrialMemo(store=FrozenFileMemoStore(path)).get(key) == _trace(0)
