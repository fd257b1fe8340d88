"""Damaged state: a broken file is reported as that file, what is wrong and the fix.

Never a traceback, never an agent failure, never silently accepted (issue #15): snapshot files,
paraphrase-pool files, corpus entries, the trial memo and files written atomically. (The API
cache has its own tests in tests/test_cache_damage.py.)
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._decide.corpus import Corpus
from agentprop._decide.snapshot import SnapshotStore
from agentprop._util.files import write_atomic
from agentprop.errors import InputError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
BASELINES = sorted((EXAMPLE / "__snapshots__").glob("*.json"))
ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- atomic writes


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_create_files_with_the_umask_mode(
    tmp_path: Path, umask: int, mode: int
) -> None:
    old = os.umask(umask)
    try:
        path = write_atomic(tmp_path / "sub" / "x.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_atomic_writes_keep_the_mode_of_the_file_they_replace(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("old")
    path.chmod(0o640)
    write_atomic(path, "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


KILLED_WRITER = """
import os, sys, time
sys.path.insert(0, {root!r})
import agentprop._util.files as files
real_fsync = os.fsync
def stall(fd):
    print("writing", flush=True)
    time.sleep(60)
files.os.fsync = stall
files.write_atomic({target!r}, {text!r})
"""


def test_a_write_killed_midway_leaves_the_old_file_and_nothing_taken_for_data(
    tmp_path: Path,
) -> None:
    """SIGKILL while the new text is half on disk: the old snapshot is intact, the leftover
    temporary file is seen by no store, and the next write of the file removes it once it is
    old enough not to belong to a write in progress."""
    store = SnapshotStore(tmp_path / "__snapshots__")
    old = BASELINES[0].read_text(encoding="utf-8")
    target = store.dir / BASELINES[0].name
    store.dir.mkdir()
    target.write_text(old, encoding="utf-8")
    script = KILLED_WRITER.format(
        root=str(ROOT), target=str(target), text=old.replace('"runs"', '"runs" ') * 3
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert target.read_text(encoding="utf-8") == old
    strays = list(store.dir.glob(f".{target.name}.*.tmp"))
    assert len(strays) == 1 and strays[0].stat().st_size > 0
    assert [s.name for s in store.baselines()] == [
        json.loads(old)["name"]
    ] and store.pending() == []
    write_atomic(target, old)
    assert strays[0].exists(), "a fresh leftover may be another process's write in progress"
    two_hours_ago = time.time() - 7200
    os.utime(strays[0], (two_hours_ago, two_hours_ago))
    write_atomic(target, old)
    assert not strays[0].exists()
    assert store.load(json.loads(old)["name"]) is not None


# --------------------------------------------------------------------------- snapshots


def _baseline() -> dict:
    return json.loads(BASELINES[0].read_text(encoding="utf-8"))


def _corruptions() -> list[tuple[str, bytes | None, str]]:
    good = _baseline()
    text = json.dumps(good, indent=2)
    counts_off = dict(good, runs=good["runs"] + 3)
    zero = json.loads(text)
    zero["behaviours"][0]["count"] = 0
    negative = dict(good, runs=-2)
    dup = json.loads(text)
    dup["behaviours"] = dup["behaviours"] + [dup["behaviours"][0]]
    dup["runs"] = sum(b["count"] for b in dup["behaviours"])
    return [
        ("invalid UTF-8", text.encode()[:200] + b"\xff\xfe" + text.encode()[200:], "UTF-8"),
        ("deep JSON", ("[" * 200_000 + "]" * 200_000).encode(), "nested"),
        ("truncated", text.encode()[: len(text) // 2], "JSON"),
        ("a list", b"[]", "snapshot"),
        ("counts that do not add up to runs", json.dumps(counts_off).encode(), "runs"),
        ("a behaviour seen 0 times", json.dumps(zero).encode(), "count"),
        ("negative runs", json.dumps(negative).encode(), "runs"),
        ("a behaviour listed twice", json.dumps(dup).encode(), "twice"),
        ("a directory", None, "directory"),
    ]


@pytest.mark.parametrize("name, data, word", _corruptions(), ids=[c[0] for c in _corruptions()])
def test_a_damaged_snapshot_is_an_error_naming_the_file(
    tmp_path: Path, name: str, data: bytes | None, word: str
) -> None:
    store = SnapshotStore(tmp_path)
    target = store.path("case")
    if data is None:
        target.mkdir()
    else:
        target.write_bytes(data)
    with pytest.raises(InputError) as info:
        store.load("case")
    err = info.value
    assert err.location is not None and Path(err.location.path) == target
    assert err.fix and word.lower() in str(err).lower(), str(err)
    code, _, text = cli("snapshot", "list", str(tmp_path), "--dir", str(tmp_path))
    assert code == 2 and str(target) in text and "Traceback" not in text


def test_the_shipped_baselines_still_load() -> None:
    store = SnapshotStore(EXAMPLE / "__snapshots__")
    assert len(store.baselines()) == len(BASELINES) > 0


def test_a_snapshot_named_like_a_pending_candidate_has_its_own_file(tmp_path: Path) -> None:
    """``X.pending`` is a name like any other: its baseline must not be the file that holds
    the pending candidate of ``X`` (approving one would overwrite the other)."""
    store = SnapshotStore(tmp_path)
    paths = {
        store.path("X"),
        store.pending_path("X"),
        store.path("X.pending"),
        store.pending_path("X.pending"),
    }
    assert len(paths) == 4
    from agentprop._decide.snapshot import Snapshot

    snap = Snapshot.model_validate(_baseline())
    store.save(snap.model_copy(update={"name": "X.pending"}))
    store.save_pending(snap.model_copy(update={"name": "X"}))
    assert store.load("X.pending") is not None and store.load("X.pending").name == "X.pending"  # type: ignore[union-attr]
    assert store.load_pending("X") is not None and store.load_pending("X").name == "X"  # type: ignore[union-attr]
    assert [s.name for s in store.pending()] == ["X"]
    assert [s.name for s in store.baselines()] == ["X.pending"]


# --------------------------------------------------------------------------- paraphrase pools


@pytest.mark.parametrize(
    "data, word",
    [(b'{"text": "hi", "pool": ["\xff"]}', "UTF-8"), (b"[" * 200_000 + b"]" * 200_000, "nested")],
    ids=["invalid UTF-8", "deep JSON"],
)
def test_a_damaged_pool_file_is_an_error_naming_the_file(
    tmp_path: Path, data: bytes, word: str
) -> None:
    from agentprop.strategies._internal.llm_pool import llm_paraphrase_pool

    path = tmp_path / "pool.json"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        llm_paraphrase_pool("hi", pool_file=path)
    assert info.value.location is not None and Path(info.value.location.path) == path
    assert word.lower() in str(info.value).lower() and info.value.fix


# --------------------------------------------------------------------------- the corpus


def _good_entry(tmp_path: Path) -> Path:
    """A real corpus entry: one shrunk failure of the SupportOps agent with a fault."""
    corpus_dir = tmp_path / "corpus"
    code, out, err = cli(
        "run",
        str(EXAMPLE),
        "--fault",
        "wrong_order=1",
        "--case",
        "END_CANCELLED<-N7_CANCEL",
        "--kinds",
        "mft",
        "--runs",
        "3",
        "--shrink-budget",
        "30",
        "--corpus",
        str(corpus_dir),
    )
    assert code == 1, out + err
    entries = sorted(corpus_dir.glob("*/*.json"))
    assert len(entries) == 1, out
    return entries[0]


def test_one_damaged_corpus_entry_is_reported_and_skipped_not_blocking_the_run(
    tmp_path: Path,
) -> None:
    good = _good_entry(tmp_path)
    bad = good.parent / "0000deadbeef.json"
    bad.write_bytes(b'{"id": "0000deadbeef", "spec_id": \xff')
    corpus = Corpus(tmp_path / "corpus")
    entries = corpus.entries()
    assert [e.id for e in entries] == [good.stem]
    assert len(corpus.damaged) == 1 and corpus.damaged[0].location.path == bad  # type: ignore[union-attr]
    code, out, err = cli("corpus", "list", "--dir", str(tmp_path / "corpus"))
    assert code == 0 and good.stem in out and "damaged" in out and str(bad) in out, out + err
    code, out, err = cli(
        "run",
        str(EXAMPLE),
        "--fault",
        "wrong_order=1",
        "--case",
        "END_CANCELLED<-N7_CANCEL",
        "--kinds",
        "mft",
        "--runs",
        "3",
        "--shrink-budget",
        "0",
        "--corpus",
        str(tmp_path / "corpus"),
        "--json",
        str(tmp_path / "r.json"),
    )
    assert code == 1 and "Traceback" not in err, out + err
    assert f"REGRESSION {good.stem}" in out  # the good entry was replayed
    assert "damaged" in out and str(bad) in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert any(e["action"] == "damaged" and str(bad) in e["message"] for e in report["corpus"])


# --------------------------------------------------------------------------- the trial memo


MEMO_TEST = textwrap.dedent(
    """
    import agentprop
    from pathlib import Path
    EX = Path({example!r})
    def test_one():
        project = agentprop.load_project(EX)
        agent = agentprop.load_agent("agent:SupportOpsAgent", EX)
        agentprop.check(project, "END_BILLING_ANSWER<-N3_BILLING", agent, settings=agentprop.settings(runs=2, mode="fixed"))
    """  # noqa: E501
)


def _damaged_page(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (key TEXT PRIMARY KEY, trace_json TEXT NOT NULL)")
    con.execute("PRAGMA user_version = 2")
    for i in range(300):
        con.execute("INSERT INTO runs VALUES (?, ?)", (f"k{i}", "x" * 3000))
    con.commit()
    con.close()
    data = bytearray(path.read_bytes())
    data[4096:8192] = b"\x5a" * 4096
    path.write_bytes(bytes(data))


def _wrong_columns(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (key TEXT PRIMARY KEY)")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()


@pytest.mark.parametrize(
    "damage",
    [_damaged_page, _wrong_columns],
    ids=["a damaged page", "a runs table without trace_json"],
)
def test_a_damaged_trial_memo_is_a_usage_error_naming_it(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    memo = tmp_path / "memo.sqlite"
    damage(memo)
    (tmp_path / "test_x.py").write_text(MEMO_TEST.format(example=str(EXAMPLE)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_x.py",
            "--agentprop-memo",
            str(memo),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    text = proc.stdout + proc.stderr
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    assert proc.returncode == 4, text  # a usage error, not a failed agent test
    assert str(memo) in text and "delete" in text


def test_a_memo_damaged_after_it_was_opened_is_a_memo_error_not_a_crash(tmp_path: Path) -> None:
    from agentprop._decide.memo import TrialMemo
    from agentprop._scenario.trace import Trace
    from agentprop.errors import MemoFileError

    path = tmp_path / "memo.sqlite"
    memo = TrialMemo(path)
    memo.put("k", Trace(case_id="c"))
    con = sqlite3.connect(path)
    con.execute("DROP TABLE runs")
    con.commit()
    con.close()
    memo._mem.clear()
    with pytest.raises(MemoFileError) as info:
        memo.get("k")
    assert str(path) in str(info.value) and info.value.fix
