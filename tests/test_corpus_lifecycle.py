"""The failure corpus's lifecycle (issue #10 item 5): signatures, retirement, no duplicate
entries, the `agentprop corpus` commands, and the default location beside the bindings."""

from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path

import pytest
from conftest import REAL_DEFAULT_CORPUS_DIR

import agentprop
import agentprop._decide.corpus
import agentprop.oracle
from agentprop._cli import main
from agentprop._decide.corpus import Corpus, CorpusEntry, judge_replay, runs_to_rule_out
from agentprop._decide.oracle import CheckResult, FailureSeen
from agentprop._decide.session import Session
from agentprop._pipeline.report.model import RunReport

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
CANCEL = "END_CANCELLED<-N7_CANCEL"
SKIP = (
    "calls_in_order:decision_tree.N2_AUTH.requirements.must_call_tools_in_order@turn0:"
    "missing=verify_identity"
)


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the SupportOps example, with the real default corpus location (beside it)."""
    target = tmp_path / "proj"
    shutil.copytree(
        EXAMPLE, target, ignore=shutil.ignore_patterns(".agentprop", "__snapshots__", "__pycache__")
    )
    monkeypatch.setattr(agentprop._decide.corpus, "default_corpus_dir", REAL_DEFAULT_CORPUS_DIR)
    return target


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def run(project: Path, tmp: Path, *args: str) -> tuple[int, str, RunReport]:
    report = tmp / "report.json"
    # each case certified on its own: the bug is found on every seed (the screen of the default
    # profile may pass the case on two clean runs)
    code, out, err = cli(
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
        "--json",
        str(report),
        *args,
    )
    assert code in (0, 1), err
    return code, out, RunReport.model_validate_json(report.read_text())


def entry_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.glob("*/*.json") if p.parent.name != "retired")


# --------------------------------------------------------------------------- the default location


def test_default_corpus_sits_beside_the_bindings_and_is_replayed_from_any_directory(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    code, _, report = run(project_dir, tmp_path, "--fault", "skip_auth=1")
    assert code == 1
    corpus = project_dir / ".agentprop" / "corpus"
    [saved] = entry_files(corpus)
    assert not (first / ".agentprop").exists()
    assert report.corpus[0].action == "saved"
    # from another directory the same corpus is found and replayed first
    monkeypatch.chdir(second)
    _, out, again = run(project_dir, tmp_path, "--fault", "skip_auth=1")
    assert again.cases[0].kind == "REGRESSION" and saved.stem in again.cases[0].id
    assert f"regression: corpus entry {saved.stem}" in out
    # `agentprop corpus list --spec` finds it there too
    code, out, _ = cli("corpus", "list", "--spec", str(project_dir))
    assert code == 0 and saved.stem in out and SKIP in out


def test_prune_from_another_directory_keeps_every_entry_and_show_pytest_works_from_anywhere(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    # issue #27 item 1: the run is given a relative spec path; prune runs from elsewhere
    monkeypatch.chdir(project_dir.parent)
    run(Path(project_dir.name), tmp_path, "--fault", "skip_auth=1")
    corpus = project_dir / ".agentprop" / "corpus"
    [path] = entry_files(corpus)
    stored = json.loads(path.read_text())
    assert stored["spec_path_base"] == "corpus" and not Path(stored["spec_path"]).is_absolute()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, _ = cli("corpus", "prune", "--no-replay", "--dir", str(corpus))
    assert code == 0 and "0 removed, 0 retired, 1 kept" in out and path.exists()

    # the project moves with its corpus: the entry still finds its spec
    moved = tmp_path / "moved"
    shutil.move(str(project_dir), moved)
    [path] = entry_files(moved / ".agentprop" / "corpus")
    code, out, _ = cli("corpus", "prune", "--no-replay", "--dir", str(path.parent.parent))
    assert code == 0 and "0 removed, 0 retired, 1 kept" in out

    # the regression test finds the spec relative to its own file, run from any directory
    test_file = moved / "tests" / "test_regression.py"
    code, out, err = cli(
        "corpus",
        "show",
        path.stem,
        "--pytest",
        "--out",
        str(test_file),
        "--dir",
        str(path.parent.parent),
    )
    assert code == 0 and f"wrote {test_file}" in out, err
    assert "Path(__file__).resolve().parent / '..'" in test_file.read_text()
    monkeypatch.chdir(pytester.path)
    result = pytester.runpytest_inprocess(
        str(test_file), "-q", "-p", "no:cacheprovider", "--import-mode=importlib"
    )
    # the entry's fault is on: it reproduces
    assert result.ret == 1 and "AgentPropertyViolation" in result.stdout.str()


def test_prune_never_deletes_an_entry_whose_spec_is_not_found_without_asking(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an entry written before paths were anchored: its spec path is relative to another directory
    monkeypatch.chdir(project_dir.parent)
    run(Path(project_dir.name), tmp_path, "--fault", "skip_auth=1")
    corpus = project_dir / ".agentprop" / "corpus"
    [path] = entry_files(corpus)
    legacy = CorpusEntry.model_validate_json(path.read_text()).model_copy(
        update={"spec_path": project_dir.name, "spec_path_base": None}
    )
    path.write_text(legacy.model_dump_json())
    monkeypatch.chdir(project_dir)  # where ./proj does not exist
    monkeypatch.setenv("CI", "true")
    code, out, _ = cli("corpus", "prune", "--no-replay", "--dir", str(corpus))
    assert code == 0 and path.exists(), out
    assert (
        f"{legacy.id}: its spec " in out
        and "is not found" in out
        and "pass --yes to remove them" in out
    )
    assert "0 removed, 0 retired, 1 kept" in out
    code, out, _ = cli("corpus", "prune", "--no-replay", "--yes", "--dir", str(corpus))
    assert (
        code == 0
        and not path.exists()
        and f"removed {legacy.id}: its spec" in out
        and "1 removed" in out
    )


def test_the_corpus_option_still_overrides_the_default(project_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "mine"
    run(project_dir, tmp_path, "--fault", "skip_auth=1", "--corpus", str(elsewhere))
    assert len(entry_files(elsewhere)) == 1 and not (project_dir / ".agentprop").exists()
    run(project_dir, tmp_path, "--fault", "skip_auth=1", "--corpus", "none")
    assert not (project_dir / ".agentprop").exists()


# ----------------------------------------------------------------------- one entry per bug and case


def test_a_regression_is_not_saved_again_under_a_new_id(project_dir: Path, tmp_path: Path) -> None:
    corpus = project_dir / ".agentprop" / "corpus"
    run(project_dir, tmp_path, "--fault", "skip_auth=0.5")
    files = entry_files(corpus)
    assert len(files) == 1
    created = CorpusEntry.model_validate_json(files[0].read_text())
    # two more runs: the agent's code changed (a new fingerprint, which used to be part of the
    # id), and other seeds (other samples)
    for seed in ("1", "2"):
        with (project_dir / "agent.py").open("a", encoding="utf-8") as f:
            f.write(f"\n# edited before run {seed}\n")
        _, _, report = run(project_dir, tmp_path, "--fault", "skip_auth=0.5", "--seed", seed)
        assert report.cases[0].kind == "REGRESSION"
        # no new shrink for a known bug
        assert [b.known for b in report.bugs if b.origin == "cases"] == [True]
        assert all(b.shrink_runs == 0 for b in report.bugs)
    assert entry_files(corpus) == files
    entry = CorpusEntry.model_validate_json(files[0].read_text())
    assert entry.seen == 3 and entry.created == created.created and entry.last_seen is not None
    assert entry.agent_fingerprint != created.agent_fingerprint  # it follows the agent


def test_the_same_bug_found_again_on_the_same_case_updates_its_entry(tmp_path: Path) -> None:
    project = agentprop.load_project(EXAMPLE)
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"skip_auth": 1.0})
    result = agentprop.check(project, CANCEL, agent, raise_on_failure=False)
    corpus = Corpus(tmp_path)
    ids = set()
    for seed in (0, 1):
        shrunk = agentprop.oracle.shrink(
            project, CANCEL, agent, failing=result, budget=30, seed=seed
        )
        entry, new = corpus.record(
            agentprop._decide.corpus.entry_from_shrink(
                shrunk, spec_id=project.spec.spec_id, spec_path=str(EXAMPLE), agent=agent
            )
        )
        ids.add(entry.id)
        assert new == (seed == 0)
    assert len(ids) == 1 and corpus.entries()[0].seen == 2


# --------------------------------------------------------------------------- what a replay means


def test_an_entry_whose_fault_is_fixed_is_retired_with_a_message(
    project_dir: Path, tmp_path: Path
) -> None:
    corpus = project_dir / ".agentprop" / "corpus"
    run(project_dir, tmp_path, "--fault", "skip_auth=1")
    [path] = entry_files(corpus)
    fix_skip_auth(project_dir)
    # the same agent, its code fixed
    code, out, report = run(project_dir, tmp_path, "--fault", "skip_auth=1")
    assert code == 0
    replay = report.cases[0]
    assert (
        replay.kind == "CORPUS"
        and replay.verdict == "PASS"
        and replay.details["replay"] == "retired"
    )
    assert f"corpus: retired corpus entry {path.stem}" in out
    assert entry_files(corpus) == [] and not path.exists()
    retired = CorpusEntry.model_validate_json(
        (corpus / "retired" / path.parent.name / path.name).read_text()
    )
    assert retired.retired and "passed" in (retired.retired_reason or "")
    # retired entries are not replayed again
    _, _, later = run(project_dir, tmp_path, "--fault", "skip_auth=1")
    assert [c.kind for c in later.cases] == ["MFT"]


def test_a_bug_that_comes_back_after_retirement_can_be_shown_and_removed(
    project_dir: Path, tmp_path: Path
) -> None:
    # issue #27 item 10: the retired copy and the new live entry shared one id, and
    # `corpus show` / `corpus rm` refused it as "several corpus entries with id X"
    corpus = project_dir / ".agentprop" / "corpus"
    run(project_dir, tmp_path, "--fault", "skip_auth=1")
    [path] = entry_files(corpus)
    buggy = (project_dir / "agent.py").read_text()
    fix_skip_auth(project_dir)
    run(project_dir, tmp_path, "--fault", "skip_auth=1")  # fixed: retired
    retired = corpus / "retired" / path.parent.name / path.name
    assert retired.exists()
    (project_dir / "agent.py").write_text(buggy)
    run(project_dir, tmp_path, "--fault", "skip_auth=1")  # the bug is back: a live entry again
    assert entry_files(corpus) == [path] and not retired.exists()
    code, out, err = cli("corpus", "show", path.stem, "--dir", str(corpus))
    assert code == 0 and json.loads(out)["id"] == path.stem, err
    # a corpus left with both copies (by an older agentprop) shows the live one and removes both
    shutil.copy(path, retired)
    code, out, err = cli("corpus", "show", path.stem, "--dir", str(corpus))
    assert code == 0 and json.loads(out)["retired"] is None, err
    code, out, err = cli("corpus", "rm", path.stem, "--dir", str(corpus))
    assert code == 0, err
    assert not path.exists() and not retired.exists()


def test_a_different_failure_on_replay_is_not_called_a_regression(
    project_dir: Path, tmp_path: Path
) -> None:
    corpus = project_dir / ".agentprop" / "corpus"
    run(project_dir, tmp_path, "--fault", "skip_auth=1")
    [path] = entry_files(corpus)
    code, out, report = run(
        project_dir, tmp_path, "--fault", "wrong_order=1", "--replay-corpus", "all"
    )
    assert code == 1
    replay = report.cases[0]
    assert (
        replay.kind == "CORPUS"
        and replay.verdict == "FAIL"
        and replay.details["replay"] == "fails-differently"
    )
    assert "REGRESSION" not in out and "not a regression" in out
    assert replay.failures[0].signature != SKIP
    # the other failure is a bug of its own; the entry is kept, neither retired nor "seen again"
    bug = next(b for b in report.bugs if replay.id in b.cases)
    assert bug.origin == "cases" and "missing=get_account" in bug.key and not bug.known
    kept = CorpusEntry.model_validate_json(path.read_text())
    assert kept.seen == 1 and not kept.retired


def result_of(verdict: str, runs: int, failures: dict[str, int]) -> CheckResult:
    passes = runs - sum(failures.values())
    return CheckResult(
        verdict=verdict,
        decided_by="sprt",
        runs=runs,
        passes=passes,
        pass_rate=passes / runs,
        interval=(0, 1),
        interval_exact=(0, 1),  # type: ignore[arg-type]
        failures=[
            FailureSeen(signature=s, explanation=s, count=n, first_trial=0)
            for s, n in failures.items()
        ],
    )


def test_judge_replay_decides_on_the_entrys_signature_and_its_recorded_rate() -> None:
    project = agentprop.load_project(EXAMPLE)
    entry = CorpusEntry(
        id="e",
        spec_id="s",
        scenario_id=CANCEL,
        signature=SKIP,
        agent_ref="a",
        agent_fingerprint="f",
        scenario=project.scenario(CANCEL),
        original_messages=[],
        reproducer_rate=0.5,
        created="now",
    )
    assert (
        judge_replay(entry, result_of("FAIL", 10, {SKIP: 4, "other": 2}), confidence=0.95)[0]
        == "regression"
    )
    assert (
        judge_replay(entry, result_of("FAIL", 10, {"other": 6}), confidence=0.95)[0]
        == "fails-differently"
    )
    # still occurs
    assert judge_replay(entry, result_of("PASS", 30, {SKIP: 1}), confidence=0.95)[0] == "kept"
    need = runs_to_rule_out(0.5, 0.95)
    assert need == 5  # 0.5^5 = 0.031 <= 0.05 < 0.5^4
    assert judge_replay(entry, result_of("PASS", need - 1, {}), confidence=0.95)[0] == "kept"
    assert judge_replay(entry, result_of("PASS", need, {}), confidence=0.95)[0] == "retired"
    assert judge_replay(entry, result_of("INCONCLUSIVE", 3, {}), confidence=0.95)[0] == "kept"


@pytest.mark.parametrize("rate", [0.05, 0.2, 0.5, 0.9])
def test_a_fault_still_present_is_retired_at_most_as_often_as_the_confidence_allows(
    rate: float,
) -> None:
    """Seeded simulation: a fault that still fails at its recorded rate passes the
    rule-out count of clean runs in at most 5% of replays."""
    rng = random.Random(1234)
    n = runs_to_rule_out(rate, 0.95)
    trials = 20_000
    wrongly_retired = sum(all(rng.random() >= rate for _ in range(n)) for _ in range(trials))
    assert wrongly_retired / trials <= 0.05 + 0.005
    # and one run fewer would not be enough
    assert (1 - rate) ** (n - 1) > 0.05


# -------------------------------------------------------------------------- agentprop.check replays


def fix_skip_auth(project_dir: Path, *, instead: str | None = None) -> None:
    """Edit the copied agent as its author would fix the bug: the ``skip_auth`` knob no longer
    skips anything (with ``instead``, it turns on that other fault: the code now fails
    differently). Same reference, same knobs, other code."""
    agent = project_dir / "agent.py"
    text = agent.read_text()
    assert 'self._fault("skip_auth", ctx)' in text
    text = text.replace('self._fault("skip_auth", ctx)', "False", 1)
    if instead is not None:
        assert f'self._fault("{instead}", ctx)' in text
        text = text.replace(f'self._fault("{instead}", ctx)', 'self._fault("skip_auth", ctx)')
    agent.write_text(text)


def test_check_replays_retire_fixed_entries_and_tell_a_different_failure_from_a_regression(
    tmp_path: Path, project_dir: Path
) -> None:
    project = agentprop.load_project(EXAMPLE)
    skipper = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"skip_auth": 1.0})
    shrunk = agentprop.oracle.shrink(
        project,
        CANCEL,
        skipper,
        failing=agentprop.check(project, CANCEL, skipper, raise_on_failure=False),
        budget=30,
    )
    corpus = Corpus(tmp_path / "corpus")
    entry, _ = corpus.record(
        agentprop._decide.corpus.entry_from_shrink(
            shrunk, spec_id=project.spec.spec_id, spec_path=str(EXAMPLE), agent=skipper
        )
    )
    # another agent: the entry is not replayed, nor retired
    with Session(corpus=corpus).activate() as session:
        agentprop.check(project, CANCEL, agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE))
        assert session.recorded_corpus_notes() == [] and [e.id for e in corpus.entries()] == [
            entry.id
        ]
    # the same agent, its code now failing differently
    fix_skip_auth(project_dir, instead="wrong_order")
    with Session(corpus=corpus).activate():
        wrong = agentprop.load_agent("agent:SupportOpsAgent", project_dir, {"skip_auth": 1.0})
        with pytest.raises(agentprop.AgentPropertyViolation) as info:
            agentprop.check(project, CANCEL, wrong)
        assert any("not a regression" in n for n in getattr(info.value, "__notes__", []))
    fix_skip_auth(project_dir)
    # a new session: replay again, now with the fault fixed
    with Session(corpus=corpus).activate() as session:
        agentprop.check(
            project,
            CANCEL,
            agentprop.load_agent("agent:SupportOpsAgent", project_dir, {"skip_auth": 1.0}),
        )
        assert [n.action for n in session.recorded_corpus_notes()] == ["retired"]
        assert corpus.entries() == [] and [e.id for e in corpus.entries(retired=True)] == [entry.id]


# --------------------------------------------------------------------------- agentprop corpus


def test_corpus_commands_list_show_rm_prune_and_clear(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = project_dir / ".agentprop" / "corpus"
    spec = ("--spec", str(project_dir))
    run(project_dir, tmp_path, "--fault", "skip_auth=1")
    [path] = entry_files(corpus)
    eid = path.stem
    code, out, _ = cli("corpus", "list", *spec)
    assert (
        code == 0 and out.startswith(f"{eid}  supportops_v1  {CANCEL}  fails ") and "seen 1x" in out
    )
    code, out, _ = cli("corpus", "show", eid[:5], *spec)
    assert code == 0 and json.loads(out)["id"] == eid
    code, out, _ = cli("corpus", "show", eid, "--pytest", *spec)
    assert code == 0 and "def test_regression_" in out
    code, _, err = cli("corpus", "rm", "nope", *spec)
    assert code == 2 and "no corpus entry with id 'nope'" in err and path.exists()
    code, out, _ = cli("corpus", "rm", eid, *spec)
    assert code == 0 and f"removed {eid}" in out and not path.exists()

    # prune: an entry of a case that no longer exists is removed; one that now passes is retired
    run(project_dir, tmp_path, "--fault", "skip_auth=1")
    [path] = entry_files(corpus)
    stale = CorpusEntry.model_validate_json(path.read_text()).model_copy(
        update={"id": "0123456789ab", "scenario_id": "END_GONE<-N0"}
    )
    Corpus(corpus).save(stale)
    faulty = CorpusEntry.model_validate_json(path.read_text())
    # replayed with the clean agent
    Corpus(corpus).save(faulty.model_copy(update={"agent_faults": {}}))
    code, out, _ = cli("corpus", "prune", "--no-replay", *spec)
    assert (
        code == 0 and "removed 0123456789ab: case END_GONE<-N0 is no longer in supportops_v1" in out
    )
    assert "1 removed, 0 retired, 1 kept" in out
    code, out, _ = cli("corpus", "prune", *spec)
    assert (
        code == 0
        and f"retired corpus entry {path.stem}" in out
        and "0 removed, 1 retired, 0 kept" in out
    )
    code, out, _ = cli("corpus", "list", "--retired", *spec)
    assert path.stem in out and "retired" in out

    # clear: never without --yes unless someone at a terminal says yes
    monkeypatch.setenv("CI", "true")
    code, _, err = cli("corpus", "clear", *spec)
    assert code == 2 and "pass --yes" in err and (corpus / "retired").exists()
    monkeypatch.delenv("CI")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, _ = cli("corpus", "clear", *spec)
    assert code == 0 and "nothing deleted" in out and (corpus / "retired").exists()
    code, out, _ = cli("corpus", "clear", "--yes", *spec)
    assert code == 0 and "deleted 1 entries" in out and not corpus.exists()
    code, out, _ = cli("corpus", "list", *spec)
    assert code == 0 and "no entries in" in out


def test_corpus_without_an_action_names_the_actions() -> None:
    code, _, err = cli("corpus")
    assert code == 2 and "list, show, rm, prune or clear" in err


def test_clear_deletes_entries_and_nothing_else(tmp_path: Path) -> None:
    project = agentprop.load_project(EXAMPLE)
    entry = CorpusEntry(
        id="e1",
        spec_id="s",
        scenario_id=CANCEL,
        signature=SKIP,
        agent_ref="a",
        agent_fingerprint="f",
        scenario=project.scenario(CANCEL),
        original_messages=[],
        created="now",
    )
    corpus = Corpus(tmp_path)
    corpus.save(entry)
    corpus.retire(entry.model_copy(update={"id": "e2"}), "gone")
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    assert corpus.clear() == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
