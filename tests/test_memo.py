"""The trial memo stores runs, not verdicts: properties are judged on every lookup.

An agent run is the expensive, noisy part of a check; a property over its trace is cheap and
deterministic. The memo keeps each run (its trace) under what determined it -- the spec as the
agent sees it, the scenario's world and messages, the context, the trial index and the agent --
and never under the property, so editing a property or the spec's expectations re-judges the
stored runs instead of replaying stale verdicts.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentprop
import agentprop.errors
from agentprop import Project, check
from agentprop._scenario.trace import Trace
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "supportops"
sys.path.insert(0, str(EXAMPLE))
from agent import SupportOpsAgent  # noqa: E402

CANCEL = "END_CANCELLED<-N7_CANCEL"

STARTED: list[str] = []
"""One entry per conversation the counting agent started (its factory is called once per run)."""


class CountingAgent(SupportOpsAgent):
    """The clean reference agent, counting its runs."""

    def __init__(self, faults: dict[str, float] | None = None) -> None:
        super().__init__(faults)
        STARTED.append("run")


def _agent_runs(action: Callable[[], Any]) -> tuple[Any, int]:
    before = len(STARTED)
    out = action()
    return out, len(STARTED) - before


def _property(result: bool) -> Callable[[Trace], bool]:
    """A property that always returns ``result``. Both versions have the same module and
    qualified name, as a property edited between two test sessions does."""

    def prop(trace: Trace) -> bool:
        return result

    return prop


def test_an_edited_property_is_judged_afresh_on_the_stored_runs(
    supportops_project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "trials.sqlite"
    agent = make_factory(CountingAgent)
    always_fail, always_pass = _property(False), _property(True)
    assert (
        always_fail.__qualname__ == always_pass.__qualname__
        and always_fail.__code__ is always_pass.__code__
    )

    first, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            agent,
            prop=always_fail,
            memo=TrialMemo(path),
            raise_on_failure=False,
            settings=agentprop.settings(mode="fixed", runs=5),
        )
    )
    assert first.verdict == "FAIL" and ran == 5 and first.memo_hits == 0

    # the property is edited to always pass; a new session opens the same memo file
    second, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            agent,
            prop=always_pass,
            memo=TrialMemo(path),
            raise_on_failure=False,
            settings=agentprop.settings(mode="fixed", runs=5),
        )
    )
    assert second.verdict == "PASS" and second.passes == 5
    assert ran == 0 and second.memo_hits == 5  # the stored runs were judged again, not re-run


def test_decide_and_adecide_judge_stored_runs_with_the_judge_they_are_given() -> None:
    from agentprop._scenario.trace import Turn
    from agentprop._util.aio import run_sync
    from agentprop.oracle import OracleSettings, TrialRecord, adecide, decide

    made: list[int] = []

    def run_trial(i: int) -> Trace:
        made.append(i)
        return Trace(trial=i, turns=[Turn(index=0, user_message=f"m{i}")])

    async def arun_trial(i: int) -> Trace:
        return run_trial(i)

    def even(trace: Trace) -> TrialRecord:
        return TrialRecord(
            passed=trace.trial % 2 == 0, signature=None if trace.trial % 2 == 0 else "odd"
        )

    memo = TrialMemo()
    settings = OracleSettings(mode="fixed", runs=6, tau=0.9)
    first = decide(
        run_trial, settings, judge=even, memo=memo, input_digest="in", fingerprint="agent"
    )
    assert made == list(range(6)) and first.passes == 3 and first.failures[0].signature == "odd"
    # another judge of the same input: the six stored runs, judged again; no new run
    second = decide(
        run_trial,
        settings,
        judge=lambda t: TrialRecord(passed=True),
        memo=memo,
        input_digest="in",
        fingerprint="agent",
    )
    assert made == list(range(6)) and (second.passes, second.memo_hits) == (6, 6)
    third = run_sync(
        adecide(
            arun_trial,
            settings,
            judge=even,
            memo=memo,
            input_digest="in",
            fingerprint="agent",
            concurrency=4,
        )
    )
    assert made == list(range(6)) and third.passes == 3 and third.memo_hits == 6
    # the trace attached to a failure is the stored run that failed
    assert Trace.from_json(third.sample_traces[0]).trial == 1


# --------------------------------------------------------------------------- the spec


def _copy_project(
    tmp_path: Path, name: str, *, spec_edit: tuple[str, str] | None = None, bindings_extra: str = ""
) -> agentprop.Project:
    """``examples/supportops`` copied to ``tmp_path/name``, its spec and bindings edited."""
    where = tmp_path / name
    where.mkdir()
    spec = (EXAMPLE / "spec.yaml").read_text(encoding="utf-8")
    if spec_edit is not None:
        assert spec.count(spec_edit[0]) == 1, spec_edit[0]
        spec = spec.replace(*spec_edit)
    (where / "spec.yaml").write_text(spec, encoding="utf-8")
    shutil.copy(EXAMPLE / "agent.py", where / "agent.py")
    (where / "agentprop.yaml").write_text(
        (EXAMPLE / "agentprop.yaml").read_text(encoding="utf-8") + bindings_extra, encoding="utf-8"
    )
    return agentprop.load_project(where)


AUTH_ORDER = "    - verify_identity\n    - get_account\n    - get_plan_rules\n"


def test_editing_the_specs_expectations_changes_the_verdict_without_new_runs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trials.sqlite"
    agent = make_factory(CountingAgent)
    original = _copy_project(tmp_path, "original")
    first, ran = _agent_runs(
        lambda: check(
            original,
            CANCEL,
            agent,
            memo=TrialMemo(path),
            raise_on_failure=False,
            settings=agentprop.settings(mode="fixed", runs=5),
        )
    )
    assert first.verdict == "PASS" and ran == 5

    # the expected decision of the leaf, edited in the bindings
    decided = _copy_project(
        tmp_path, "decided", bindings_extra="\noutcomes:\n  END_CANCELLED: CANCEL_ABORTED\n"
    )
    assert decided.scenario(CANCEL).expect_decision == "CANCEL_ABORTED"
    result, ran = _agent_runs(
        lambda: check(
            decided,
            CANCEL,
            agent,
            memo=TrialMemo(path),
            raise_on_failure=False,
            settings=agentprop.settings(mode="fixed", runs=5),
        )
    )
    assert result.verdict == "FAIL" and ran == 0 and result.memo_hits == 5
    assert "decided CANCELLED; the spec expects CANCEL_ABORTED" in result.failures[0].explanation

    # a requirement of the decision tree, edited in the spec
    required = _copy_project(
        tmp_path,
        "required",
        spec_edit=(AUTH_ORDER, "    - get_account\n    - verify_identity\n    - get_plan_rules\n"),
    )
    assert required.scenario(CANCEL).turns[0].required_tools == [
        "get_account",
        "verify_identity",
        "get_plan_rules",
    ]
    result, ran = _agent_runs(
        lambda: check(
            required,
            CANCEL,
            agent,
            memo=TrialMemo(path),
            raise_on_failure=False,
            settings=agentprop.settings(mode="fixed", runs=5),
        )
    )
    assert result.verdict == "FAIL" and ran == 0 and result.memo_hits == 5
    assert result.clause == "decision_tree.N2_AUTH.requirements.must_call_tools_in_order"


@pytest.mark.parametrize(
    "edit",
    [
        {
            "spec_edit": (
                "description: Cancel an order by order_id.",
                "description: Cancel one order by its order_id.",
            )
        },
        {"spec_edit": ("max_tool_calls_per_turn: 4", "max_tool_calls_per_turn: 5")},
        {
            "spec_edit": (
                "text: Must obtain explicit user confirmation",
                "text: Always obtain explicit user confirmation",
            )
        },
        {"bindings_extra": "\n"},  # control: nothing the run sees changed (only the bindings' text)
    ],
    ids=["tool description", "limit", "policy text", "control"],
)
def test_what_the_agent_sees_in_the_spec_is_part_of_the_key(
    tmp_path: Path, edit: dict[str, Any]
) -> None:
    path = tmp_path / "trials.sqlite"
    agent = make_factory(CountingAgent)
    _, ran = _agent_runs(
        lambda: check(
            _copy_project(tmp_path, "original"),
            CANCEL,
            agent,
            memo=TrialMemo(path),
            settings=agentprop.settings(mode="fixed", runs=3),
        )
    )
    assert ran == 3
    edited = _copy_project(tmp_path, "edited", **edit)
    result, ran = _agent_runs(
        lambda: check(
            edited,
            CANCEL,
            agent,
            memo=TrialMemo(path),
            settings=agentprop.settings(mode="fixed", runs=3),
        )
    )
    assert ran == (0 if "bindings_extra" in edit else 3) and result.memo_hits == 3 - ran


def test_the_bindings_context_is_part_of_the_key(
    supportops_project: Project, tmp_path: Path
) -> None:
    memo = TrialMemo()
    agent = make_factory(CountingAgent)
    check(
        supportops_project,
        CANCEL,
        agent,
        memo=memo,
        settings=agentprop.settings(mode="fixed", runs=3),
    )
    other = _copy_project(tmp_path, "context", bindings_extra="")
    other.bindings = other.bindings.model_copy(
        update={"context": {"account_id": "A1", "locale": "en-GB"}}
    )
    _, ran = _agent_runs(
        lambda: check(
            other, CANCEL, agent, memo=memo, settings=agentprop.settings(mode="fixed", runs=3)
        )
    )
    assert ran == 3


# --------------------------------------------------------------------------- agent, trial, cost


def test_another_agent_fingerprint_or_trial_index_means_new_runs(
    supportops_project: Project,
) -> None:
    memo = TrialMemo()
    agent = make_factory(CountingAgent)
    _, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            agent,
            memo=memo,
            settings=agentprop.settings(mode="fixed", runs=5),
        )
    )
    assert ran == 5
    # the same agent: all five runs stored; a longer decision reuses them and adds five
    result, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            agent,
            memo=memo,
            settings=agentprop.settings(mode="fixed", runs=10),
        )
    )
    assert ran == 5 and result.memo_hits == 5
    # another fingerprint (a fault knob at probability 0 behaves the same, but is another agent)
    other = make_factory(CountingAgent, {"skip_auth": 0.0})
    assert other.fingerprint != agent.fingerprint
    result, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            other,
            memo=memo,
            settings=agentprop.settings(mode="fixed", runs=5),
        )
    )
    assert ran == 5 and result.memo_hits == 0
    # another seed: other trial indices
    result, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            agent,
            memo=memo,
            settings=agentprop.settings(mode="fixed", runs=5, seed=1),
        )
    )
    assert ran == 5 and result.memo_hits == 0


class PricedAgent(CountingAgent):
    """The clean agent, reporting model usage on every turn (as a model-backed agent does)."""

    def turn(self, message: str, ctx: Any) -> None:
        ctx.add_usage(input_tokens=10, output_tokens=4, cost_usd=0.25)
        super().turn(message, ctx)


def test_a_memo_hit_costs_nothing_again(supportops_project: Project) -> None:
    memo = TrialMemo()
    agent = make_factory(PricedAgent)
    turns = len(supportops_project.scenario(CANCEL).turns)
    first = check(
        supportops_project,
        CANCEL,
        agent,
        memo=memo,
        settings=agentprop.settings(mode="fixed", runs=4),
    )
    assert first.memo_hits == 0
    assert (first.cost_usd, first.input_tokens, first.output_tokens) == (
        4 * turns * 0.25,
        4 * turns * 10,
        4 * turns * 4,
    )
    again = check(
        supportops_project,
        CANCEL,
        agent,
        memo=memo,
        settings=agentprop.settings(mode="fixed", runs=6),
    )
    assert again.memo_hits == 4 and again.runs == 6  # only the two new runs are paid for
    assert (again.cost_usd, again.input_tokens, again.output_tokens) == (
        2 * turns * 0.25,
        2 * turns * 10,
        2 * turns * 4,
    )


def test_a_property_sees_the_same_trace_on_a_fresh_run_and_on_a_replay(
    supportops_project: Project, tmp_path: Path
) -> None:
    seen: list[dict[str, Any]] = []

    def prop(trace: Trace) -> bool:
        seen.append(trace.model_dump())
        return True

    agent = make_factory(SupportOpsAgent, {"skip_auth": 0.5})
    check(
        supportops_project,
        CANCEL,
        agent,
        prop=prop,
        memo=TrialMemo(tmp_path / "m.sqlite"),
        settings=agentprop.settings(mode="fixed", runs=6),
    )
    fresh, seen[:] = list(seen), []
    check(
        supportops_project,
        CANCEL,
        agent,
        prop=prop,
        memo=TrialMemo(tmp_path / "m.sqlite"),
        settings=agentprop.settings(mode="fixed", runs=6),
    )
    assert len(fresh) == 6 and seen == fresh


def test_invariance_reuses_the_runs_of_the_mft_check_of_the_same_scenario(
    supportops_project: Project,
) -> None:
    memo = TrialMemo()
    agent = make_factory(CountingAgent)
    scenario = supportops_project.scenario(CANCEL)
    _, ran = _agent_runs(
        lambda: check(
            supportops_project,
            scenario,
            agent,
            memo=memo,
            settings=agentprop.settings(mode="fixed", runs=20),
        )
    )
    assert ran == 20
    variant = [scenario.messages[0].replace("Please", "Kindly"), scenario.messages[1]]
    assert variant != scenario.messages
    # require_base=False: the base MFT is the check above (its own gate would decide it again,
    # at the safety rule's 59 runs); what is measured here is the reuse of its runs
    result, ran = _agent_runs(
        lambda: agentprop.check_invariance(
            supportops_project, scenario, agent, [variant], n=20, memo=memo, require_base=False
        )
    )
    # the original side is the check's 20 runs (same key); only the variant ran
    assert result.verdict == "PASS" and result.runs == 40 and ran == 20


def test_a_stored_run_that_no_longer_parses_is_run_again(
    supportops_project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "trials.sqlite"
    agent = make_factory(CountingAgent)
    check(
        supportops_project,
        CANCEL,
        agent,
        memo=TrialMemo(path),
        settings=agentprop.settings(mode="fixed", runs=3),
    )
    with sqlite3.connect(path) as con:
        con.execute(
            "UPDATE runs SET trace_json = '{\"turns\": 7}' WHERE rowid = (SELECT "
            "MIN(rowid) FROM runs)"
        )
    memo = TrialMemo(path)
    result, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            agent,
            memo=memo,
            settings=agentprop.settings(mode="fixed", runs=3),
        )
    )
    assert result.verdict == "PASS" and ran == 1 and memo.unreadable == 1 and result.memo_hits == 2
    _, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            agent,
            memo=TrialMemo(path),
            settings=agentprop.settings(mode="fixed", runs=3),
        )
    )
    assert ran == 0  # the new run replaced the unreadable one


# --------------------------------------------------------------------------- the file


def _version_and_tables(path: Path) -> tuple[int, set[str]]:
    with sqlite3.connect(path) as con:
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return version, tables


def _old_format_memo(path: Path, rows: int) -> None:
    """A memo file as agentprop wrote it before runs were stored: verdicts in ``trials``."""
    with sqlite3.connect(path) as con:
        con.execute(
            "CREATE TABLE trials (key TEXT PRIMARY KEY, passed INTEGER NOT NULL, signature TEXT, "
            "explanation TEXT, clause TEXT, cost_usd REAL, input_tokens INTEGER, output_tokens "
            "INTEGER, trace_json TEXT)"
        )
        for i in range(rows):
            con.execute(
                "INSERT INTO trials VALUES (?, 0, 'decision_is', 'x', NULL, 0, 0, 0, NULL)",
                (f"k{i}",),
            )


def test_a_new_memo_file_records_its_format(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "trials.sqlite"
    TrialMemo(path)
    assert (
        _version_and_tables(path)
        == (agentprop._decide.memo.SCHEMA_VERSION, {"runs"})
        == (2, {"runs"})
    )


def test_an_old_format_memo_is_converted_and_says_what_was_dropped(
    supportops_project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "trials.sqlite"
    _old_format_memo(path, rows=3)
    with pytest.warns(agentprop.errors.AgentPropWarning) as caught:
        memo = TrialMemo(path)
    text = str(caught[0].message)
    assert str(path) in text and "format 1 (verdicts) converted to format 2 (runs)" in text
    assert "3 stored verdict(s) were dropped" in text and "cannot be judged again" in text
    assert _version_and_tables(path) == (2, {"runs"}) and len(memo) == 0
    _, ran = _agent_runs(
        lambda: check(
            supportops_project,
            CANCEL,
            make_factory(CountingAgent),
            memo=memo,
            settings=agentprop.settings(mode="fixed", runs=2),
        )
    )
    assert ran == 2 and len(TrialMemo(path)) == 2  # a plain memo from now on: no second warning


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            b"this is not a database, just text " * 40,
            "not a usable trial memo: SQLite says file is not a database",
        ),
        (b"SQLite format 3\x00" + b"\xff" * 200, "not a usable trial memo: SQLite says"),
    ],
    ids=["text", "broken header"],
)
def test_a_garbage_memo_file_is_an_error_naming_the_file(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "trials.sqlite"
    path.write_bytes(content)
    with pytest.raises(agentprop.errors.MemoFileError) as info:
        TrialMemo(path)
    text = str(info.value)
    assert text.startswith(f"{path}: {problem}"), text
    assert "fix: delete the file (it is only a cache of agent runs" in text
    assert path.read_bytes() == content  # left as it was


def test_a_foreign_sqlite_file_or_a_newer_format_is_refused_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "app.sqlite"
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(
        agentprop.errors.MemoFileError,
        match=r"not an agentprop trial memo \(SQLite user_version 0, tables: users",
    ):
        TrialMemo(foreign)
    assert _version_and_tables(foreign) == (0, {"users"})
    with sqlite3.connect(foreign) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL

    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as con:
        con.execute("CREATE TABLE runs (key TEXT PRIMARY KEY, trace_json TEXT NOT NULL)")
        con.execute("PRAGMA user_version = 3")
    with pytest.raises(
        agentprop.errors.MemoFileError, match="trial memo of format 3, written by a newer agentprop"
    ):
        TrialMemo(newer)

    with pytest.raises(agentprop.errors.MemoFileError, match="the trial memo path is a directory"):
        TrialMemo(tmp_path)


# --------------------------------------------------------------------------- in pytest

pytest_plugins = ["pytester"]


def test_pytest_names_a_garbage_memo_file_in_a_usage_error(pytester: pytest.Pytester) -> None:
    path = pytester.path / "trials.sqlite"
    path.write_bytes(b"not a database at all " * 50)
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--import-mode=importlib", f"--agentprop-memo={path}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert (
        f"ERROR: agentprop memo: {path}: not a usable trial memo: SQLite says "
        "file is not a database" in err
    ), err
    assert "fix: delete the file (it is only a cache of agent runs" in err
    assert "INTERNALERROR" not in err + result.stdout.str() and "Traceback" not in err


class _ConfigWarnings:
    """What the plugin's memo opening needs of a pytest ``Config``: a place for config warnings."""

    def __init__(self) -> None:
        self.warnings: list[Warning] = []

    def issue_config_time_warning(self, warning: Warning, stacklevel: int) -> None:
        self.warnings.append(warning)


def test_pytest_converts_an_old_format_memo_with_a_config_warning(tmp_path: Path) -> None:
    # in-process on purpose: a second pytest session in this process would replace the
    # plugin's session state, and the file's conversion is all there is to see
    from agentprop.pytest_plugin import _open_memo

    path = tmp_path / "trials.sqlite"
    _old_format_memo(path, rows=2)
    config = _ConfigWarnings()
    memo = _open_memo(config, path, "")  # type: ignore[arg-type]
    assert [type(w).__name__ for w in config.warnings] == ["AgentPropWarning"]
    assert (
        "trial memo of format 1 (verdicts) converted to format 2 (runs); its 2 stored "
        "verdict(s) were dropped" in str(config.warnings[0])
    )
    assert memo.path == path and _version_and_tables(path) == (2, {"runs"})
    # any other unusable file is a usage error naming it
    foreign = tmp_path / "app.sqlite"
    with sqlite3.connect(foreign) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(
        pytest.UsageError, match=f"agentprop memo: {foreign}: not an agentprop trial memo"
    ):
        _open_memo(config, foreign, "")  # type: ignore[arg-type]
