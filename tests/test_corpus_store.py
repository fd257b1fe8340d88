"""The failure corpus behind a store interface (issue #29 item 3): the union of what every
process found, one entry per bug, in a directory or on a real Redis server; a Redis corpus over
a committed directory reads it and never writes it."""

from __future__ import annotations

import functools
import hashlib
import io
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REAL_DEFAULT_CORPUS_DIR

import agentprop
import agentprop._decide.corpus
from agentprop._cli import main
from agentprop._decide.corpus import Corpus, CorpusEntry, RedisCorpus, open_store_corpus
from agentprop._pipeline.report.model import RunReport
from agentprop._scenario.build import Scenario

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
CANCEL = "END_CANCELLED<-N7_CANCEL"
SKIP = (
    "calls_in_order:decision_tree.N2_AUTH.requirements.must_call_tools_in_order@turn0:"
    "missing=verify_identity"
)


@functools.cache
def _scenario() -> Scenario:
    return agentprop.load_project(EXAMPLE).scenario(CANCEL)


def _entry(entry_id: str) -> CorpusEntry:
    return CorpusEntry(
        id=entry_id,
        spec_id="supportops",
        scenario_id=CANCEL,
        signature=SKIP,
        agent_ref="agent:SupportOpsAgent",
        agent_fingerprint="f",
        scenario=_scenario(),
        original_messages=["cancel my order"],
        reproducer_rate=0.5,
        created="2026-12-03T00:00:00+00:00",
    )


def _corpus(spec: tuple[str, str]) -> Corpus:
    backend, where = spec
    return Corpus(where) if backend == "file" else open_store_corpus(where, None)


@pytest.fixture(params=["file", "redis"])
def corpus_spec(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """How a process opens one fresh shared corpus (picklable, for spawned processes)."""
    if request.param == "file":
        return ("file", str(tmp_path / "corpus"))
    return (
        "redis",
        f"{request.getfixturevalue('redis_url')}?prefix=corpus{os.getpid()}-{time.monotonic_ns()}",
    )


def _record_many(spec: tuple[str, str], times: int, start: Any) -> None:
    corpus = _corpus(spec)
    start.wait(timeout=120)  # both race from the same moment
    for i in range(times):
        corpus.record(_entry("bug1"))
        corpus.record(_entry(f"own-{os.getpid()}-{i}"))


def test_two_processes_recording_the_same_bug_keep_one_entry_seen_by_both(
    corpus_spec: tuple[str, str],
) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_record_many, args=(corpus_spec, 10, start)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    entries = _corpus(corpus_spec).entries()
    shared = [e for e in entries if e.id == "bug1"]
    # the union: each process's own bugs, and the shared one once, every recording counted
    assert len(entries) == 1 + 2 * 10 and len(shared) == 1
    assert shared[0].seen == 20


def test_retire_remove_and_find_again_behave_alike_on_both_stores(
    corpus_spec: tuple[str, str],
) -> None:
    corpus = _corpus(corpus_spec)
    first, new = corpus.record(_entry("a"))
    assert new and corpus.find("a", "supportops") == first
    twice, new = corpus.record(_entry("a"))
    assert not new and twice.seen == 2 and twice.last_seen is not None
    corpus.retire(twice, "passed 30 runs")
    assert corpus.entries() == [] and [e.retired_reason for e in corpus.entries(retired=True)] == [
        "passed 30 runs"
    ]
    # the bug came back: the live entry supersedes the retired one
    again, new = corpus.record(_entry("a"))
    assert new and corpus.entries(retired=True) == [] and corpus.get("a").seen == 1
    corpus.record(_entry("b"))
    corpus.remove(again)
    assert [e.id for e in corpus.entries()] == ["b"]
    assert corpus.clear() == 1 and corpus.entries() == []


def _digest(folder: Path) -> str:
    return hashlib.sha256(
        b"".join(p.name.encode() + p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
    ).hexdigest()


def test_a_redis_corpus_reads_its_committed_directory_and_never_writes_it(
    redis_url: str, tmp_path: Path
) -> None:
    committed = Corpus(tmp_path / "committed")
    committed.record(_entry("old"))
    committed.record(_entry("gone"))
    committed.retire(_entry("retired-long-ago"), "fixed")
    digest = _digest(committed.root)
    corpus = open_store_corpus(
        f"{redis_url}?prefix=over{time.monotonic_ns()}", Corpus(committed.root)
    )
    assert isinstance(corpus, RedisCorpus) and "(read-only)" in corpus.describe()
    assert sorted(e.id for e in corpus.entries()) == ["gone", "old"]
    seen, new = corpus.record(_entry("old"))  # found again: seen twice, kept on Redis
    assert not new and seen.seen == 2 and corpus.find("old", "supportops") == seen
    corpus.record(_entry("fresh"))
    corpus.retire(corpus.get("old"), "passed")
    corpus.remove(corpus.get("gone"))
    assert [e.id for e in corpus.entries()] == ["fresh"]
    assert sorted(e.id for e in corpus.entries(retired=True)) == ["old", "retired-long-ago"]
    assert _digest(committed.root) == digest  # the directory was read, never written
    assert sorted(e.id for e in Corpus(committed.root).entries()) == ["gone", "old"]


def test_cli_run_saves_its_bug_to_the_store_not_the_directory(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__snapshots__", "__pycache__"),
    )
    monkeypatch.setattr(agentprop._decide.corpus, "default_corpus_dir", REAL_DEFAULT_CORPUS_DIR)
    store = f"{redis_url}?prefix=cli{time.monotonic_ns()}"
    argv = [
        "run",
        str(project),
        "--kinds",
        "mft",
        "--case",
        CANCEL,
        "--shrink-budget",
        "40",
        "--profile",
        "release",
        "--fault",
        "skip_auth=1",
    ]
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--store", store, "--json", str(tmp_path / "r.json")], out=out, err=err)
    assert code == 1, err.getvalue()
    report = RunReport.model_validate_json((tmp_path / "r.json").read_text())
    assert [c.action for c in report.corpus] == ["saved"]
    assert not (project / ".agentprop" / "corpus").exists()
    [entry] = open_store_corpus(store, None).entries()
    assert entry.signature == SKIP
    # `agentprop corpus` reads the same store ($AGENTPROP_STORE here)
    monkeypatch.setenv("AGENTPROP_STORE", store)
    out = io.StringIO()
    assert main(["corpus", "list", "--spec", str(project)], out=out, err=io.StringIO()) == 0
    assert entry.id in out.getvalue() and SKIP in out.getvalue()


FAULTY_TEST = f"""
import agentprop

EXAMPLE = {str(EXAMPLE)!r}
project = agentprop.load_project(EXAMPLE)
FAULTY = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {{"skip_auth": 1.0}})


def test_cancel():
    agentprop.check(project, {CANCEL!r}, FAULTY, settings=agentprop.settings(mode="fixed", runs=3))
"""


def test_a_pytest_session_on_a_store_records_its_bug_there(
    redis_url: str, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_cancel=FAULTY_TEST)
    store = f"{redis_url}?prefix=pytest{time.monotonic_ns()}"
    directory = pytester.path / "corpus"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--agentprop-store", store, "--agentprop-corpus", str(directory)
    )
    result.assert_outcomes(failed=1)
    [entry] = open_store_corpus(store, None).entries()
    assert entry.signature == SKIP and not directory.exists()
