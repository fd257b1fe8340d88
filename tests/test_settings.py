"""``agentprop.settings``: one settings object, resolved in one place, honoured by
every check kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import core as hypothesis_core
from hypothesis import given
from hypothesis import strategies as st

import agentprop
import agentprop.oracle
from agentprop._decide.session import Session, settings_scope
from agentprop._decide.settings import resolve
from agentprop.errors import InvalidArgument

pytest_plugins = ["pytester"]

EXAMPLE = (Path(__file__).resolve().parents[1] / "examples" / "supportops").resolve()
CANCEL_ID = "END_CANCELLED<-N7_CANCEL"
DENIED_ID = "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY"


@pytest.fixture(autouse=True)
def fresh_session() -> Any:
    saved = dict(agentprop.settings._profiles)
    with Session().activate() as session:
        yield session
    agentprop.settings._profiles.clear()
    agentprop.settings._profiles.update(saved)


# ------------------------------------------------------------------------------- the object


def test_a_child_keeps_its_parents_values_and_overrides_some() -> None:
    parent = agentprop.settings(tau=0.95, max_runs=40)
    child = agentprop.settings(parent, max_runs=10, seed=3)
    assert (child.tau, child.max_runs, child.seed, child.mode) == (0.95, 10, 3, None)
    assert parent.max_runs == 40 and child == agentprop.settings(tau=0.95, max_runs=10, seed=3)


def test_fresh_draws_one_seed_when_made() -> None:
    fresh = agentprop.settings(fresh=True)
    assert fresh.seed is not None and fresh.seed > 0 and fresh.seed == fresh.seed
    with pytest.raises(InvalidArgument, match="fresh draws a new seed"):
        agentprop.settings(seed=1, fresh=True)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"mode": "bayes"}, "use 'sprt', 'zero-failure' or 'fixed'"),
        ({"tau": 1.5}, r"must be in \(0, 1\]"),
        ({"runs": 0}, "whole number of at least 1"),
        ({"seed": -1}, "whole number of at least 0"),
    ],
)
def test_bad_values_name_the_fix(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=fragment):
        agentprop.settings(**kwargs)


def test_profiles_register_load_and_get(fresh_session: Session) -> None:
    assert agentprop.settings.default() == agentprop.settings.get_profile("ci")
    agentprop.settings.register_profile(
        "nightly", agentprop.settings.get_profile("release"), tau=0.97
    )
    agentprop.settings.load_profile("nightly")
    assert fresh_session.profile == "nightly"
    assert (agentprop.settings.default().max_runs, agentprop.settings.default().tau) == (300, 0.97)
    with pytest.raises(
        InvalidArgument,
        match="no agentprop settings profile 'weekly'; registered: ci, nightly, release, smoke",
    ):
        agentprop.settings.load_profile("weekly")


def test_resolution_layers_profile_scope_object_call(fresh_session: Session) -> None:
    agentprop.settings.load_profile("smoke")
    assert resolve().max_runs == 30 and resolve().seed == 0  # the profile, the session's seed
    fresh_session.seed = 11
    assert resolve().seed == 11
    with settings_scope(max_runs=20, tau=0.8):  # what the pytest marker sets
        assert (resolve().max_runs, resolve().values["tau"]) == (20, 0.8)
        with agentprop.settings(max_runs=12, seed=4):  # a with block (or decorator) inside it
            assert (resolve().max_runs, resolve().values["tau"], resolve().seed) == (12, 0.8, 4)
            given = agentprop.settings(max_runs=9)
            assert resolve(given).max_runs == 9  # settings= of the call
            assert resolve(given, max_runs=5, seed=2).max_runs == 5  # the call's own arguments win
            assert resolve(given, seed=2).seed == 2
        assert resolve().max_runs == 20
    assert resolve().max_runs == 30


def test_the_decorator_works_above_and_below_given() -> None:
    seen: list[int | None] = []

    @agentprop.settings(max_runs=7)
    @given(st.integers(0, 1))
    def above(x: int) -> None:
        seen.append(resolve().max_runs)

    @given(st.integers(0, 1))
    @agentprop.settings(max_runs=8)
    def below(x: int) -> None:
        seen.append(resolve().max_runs)

    above()
    below()
    assert set(seen) == {7, 8} and resolve().max_runs == 100


def test_check_takes_the_settings_object() -> None:
    def agent(messages: list[str]) -> dict[str, str]:
        return {"status": "paid"}

    result = agentprop.check(
        agent, ["hi"], lambda t: True, settings=agentprop.settings(mode="fixed", runs=6, tau=1.0)
    )
    assert (result.runs, result.settings["mode"]) == (6, "fixed")
    with pytest.warns(DeprecationWarning):  # the old keyword still wins over settings=, as it did
        assert (
            agentprop.check(
                agent,
                ["hi"],
                lambda t: True,
                settings=agentprop.settings(mode="fixed", runs=6, tau=1.0),
                runs=3,
            ).runs
            == 3
        )
    with (
        pytest.raises(InvalidArgument, match="an OracleSettings replaces them all"),
        pytest.warns(DeprecationWarning),
    ):
        agentprop.check(
            agent, ["hi"], lambda t: True, settings=agentprop.oracle.OracleSettings(), runs=3
        )


def test_the_old_keywords_of_check_are_a_deprecated_spelling_of_settings() -> None:
    def agent(messages: list[str]) -> dict[str, str]:
        return {"status": "paid"}

    new = agentprop.check(
        agent,
        ["hi"],
        lambda t: True,
        settings=agentprop.settings(mode="fixed", runs=4, tau=1.0, seed=2),
    )
    message = (
        r"check\(mode='fixed', tau=1.0, runs=4, seed=2\) is deprecated: the fields mode, tau, "
        r"runs, seed of agentprop.settings go in settings="
    )
    with pytest.warns(DeprecationWarning, match=message) as caught:
        old = agentprop.check(agent, ["hi"], lambda t: True, mode="fixed", runs=4, tau=1.0, seed=2)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert (old.runs, old.settings) == (new.runs, new.settings) and (
        old.settings["mode"],
        old.settings["tau"],
    ) == ("fixed", 1.0)
    with pytest.warns(
        DeprecationWarning,
        match=r"acheck\(max_runs=9\) is deprecated: the field max_runs of agentprop.settings",
    ):
        import asyncio

        asyncio.run(agentprop.acheck(agent, ["hi"], lambda t: True, max_runs=9))


@pytest.mark.parametrize("kind", ["check_invariance", "check_direction", "check_snapshot"])
def test_the_seed_keyword_of_the_other_check_kinds_is_a_deprecated_spelling_of_settings(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentprop._agents.project import Project

    project = agentprop.load_project(EXAMPLE)
    agent = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)
    trials: list[int] = []
    original = Project.arun

    async def arun(self: Project, scenario: Any, factory: Any, *, trial: int, **kw: Any) -> Any:
        trials.append(trial)
        return await original(self, scenario, factory, trial=trial, **kw)

    monkeypatch.setattr(Project, "arun", arun)
    messages = project.scenario(CANCEL_ID).messages
    calls = {
        "check_invariance": lambda **kw: agentprop.check_invariance(
            project,
            CANCEL_ID,
            agent,
            [[messages[0] + " please", *messages[1:]]],
            n=5,
            memo=agentprop.oracle.TrialMemo(),
            require_base=False,
            raise_on_failure=False,
            **kw,
        ),
        "check_direction": lambda **kw: agentprop.check_direction(
            project,
            CANCEL_ID,
            DENIED_ID,
            agent,
            memo=agentprop.oracle.TrialMemo(),
            raise_on_failure=False,
            **kw,
        ),
        "check_snapshot": lambda **kw: agentprop.check_snapshot(
            project, CANCEL_ID, agent, directory=tmp_path, runs=2, raise_on_failure=False, **kw
        ),
    }
    with agentprop.settings(mode="fixed", runs=2, tau=1.0):
        calls[kind](settings=agentprop.settings(seed=3))
        new = sorted(trials)
        trials.clear()
        message = (
            rf"{kind}\(seed=3\) is deprecated: the field seed of agentprop.settings go in "
            rf"settings=, e.g. {kind}\(\.\.\., settings=agentprop.settings\(seed=3\)\)"
        )
        with pytest.warns(DeprecationWarning, match=message) as caught:
            calls[kind](seed=3)
        # the seed is honoured, as settings= honours it
        assert sorted(trials) == new and min(new) >= 3 * 1_000_003
    assert caught[0].filename == __file__  # the warning points at the caller's line


# ------------------------------------------------------------------- every check kind, pytest

EVERY_KIND = f"""
import json
import random

import pytest

import agentprop
from agentprop._agents.project import Project

EXAMPLE = {str(EXAMPLE)!r}
project = agentprop.load_project(EXAMPLE)
AGENT = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)
TRIALS = []


@pytest.fixture(autouse=True)
def watch_trials(monkeypatch):
    original = Project.arun  # a snapshot's runs are not memoised: every one is made here

    async def arun(self, scenario, factory, *, trial, **kw):
        TRIALS.append(trial)
        return await original(self, scenario, factory, trial=trial, **kw)

    monkeypatch.setattr(Project, "arun", arun)
    TRIALS.clear()


def record(kind, settings=None):
    with open("kinds.jsonl", "a") as f:
        f.write(json.dumps({{"kind": kind, "first": min(TRIALS) if TRIALS else None, "settings": settings}}) + "\\n")


{{marker}}
def test_check():
    r = agentprop.check(project, {CANCEL_ID!r}, AGENT)
    TRIALS.append(r.sampled_runs[0].trial)  # memo hits make no run: the result says which trials
    record("check", r.settings)

{{marker}}
def test_plain_check():
    r = agentprop.check(lambda m: {{"status": "paid"}}, ["hi"], lambda t: True)
    TRIALS.append(r.sampled_runs[0].trial)
    record("plain", r.settings)

{{marker}}
def test_invariance():
    m = project.scenario({CANCEL_ID!r}).messages
    r = agentprop.check_invariance(project, {CANCEL_ID!r}, AGENT, [[m[0] + " please", m[1]]], n=5)
    TRIALS.append(r.original_examples[0].trial)
    record("invariance", {{"runs": r.runs}})

{{marker}}
def test_direction():
    r = agentprop.check_direction(project, {CANCEL_ID!r}, {DENIED_ID!r}, AGENT)
    TRIALS.append(r.base.sampled_runs[0].trial)
    record("direction", r.base.settings)

{{marker}}
def test_snapshot(tmp_path):
    agentprop.check_snapshot(project, {CANCEL_ID!r}, AGENT, directory=tmp_path, runs=5, raise_on_failure=False)
    record("snapshot")
"""  # noqa: E501


def run_kinds(pytester: pytest.Pytester, marker: str, *args: str) -> dict[str, dict[str, Any]]:
    pytester.makepyfile(test_kinds=EVERY_KIND.replace("{marker}", marker))
    (pytester.path / "kinds.jsonl").unlink(missing_ok=True)
    seed = hypothesis_core.global_force_seed
    try:
        result = pytester.runpytest_inprocess(
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--import-mode=importlib",
            "--agentprop-shrink-budget=0",
            *args,
        )
    finally:
        hypothesis_core.global_force_seed = seed
    result.assert_outcomes(passed=5)
    lines = (pytester.path / "kinds.jsonl").read_text().splitlines()
    return {d["kind"]: d for d in map(json.loads, lines)}


def first_trials(kinds: dict[str, dict[str, Any]]) -> dict[str, int]:
    # a snapshot's runs start 500,000 after its seed's block, so two kinds never share a run
    return {k: d["first"] - (500_000 if k == "snapshot" else 0) for k, d in kinds.items()}


def test_every_check_kind_honours_the_marker_seed_and_profile(pytester: pytest.Pytester) -> None:
    kinds = run_kinds(
        pytester,
        '@pytest.mark.agentprop(mode="fixed", n=7, tau=1.0)',
        "--agentprop-seed=5",
        "--agentprop-profile=smoke",
    )
    assert set(kinds) == {"check", "plain", "invariance", "direction", "snapshot"}
    assert set(first_trials(kinds).values()) == {5 * 1_000_003}  # the same seed for every kind
    for kind in ("check", "plain", "direction"):
        s = kinds[kind]["settings"]
        # the marker's and the profile's
        assert (s["mode"], s["runs"], s["max_runs"]) == ("fixed", 7, 30), (kind, s)
    # its base case: the marker's 7 runs
    assert kinds["invariance"]["settings"]["runs"] == 7 + 2 * 5


def test_every_check_kind_honours_fresh_and_a_settings_decorator(pytester: pytest.Pytester) -> None:
    kinds = run_kinds(pytester, "@agentprop.settings(max_runs=44)", "--agentprop-fresh")
    firsts = set(first_trials(kinds).values())
    assert len(firsts) == 1 and firsts != {0}  # one fresh seed, used by every kind
    for kind in ("check", "plain", "direction"):
        assert kinds[kind]["settings"]["max_runs"] == 44, kind


# ----------------------------------------------------------- one registry: checks, pytest, CLI


def test_the_built_in_profiles_are_defined_once_and_agentprop_run_reads_them_from_settings() -> (
    None
):
    import agentprop._decide.profiles as profiles
    from agentprop._decide.settings import PROFILES

    assert not hasattr(profiles, "PROFILES")  # no second table of the same three names
    for name, values in PROFILES.items():
        assert agentprop.settings.get_profile(name).as_dict() == values
    assert [
        (p.name, p.screen, p.inv_runs)
        for p in map(profiles.get_profile, ("smoke", "ci", "release"))
    ] == [
        ("smoke", 1, 5),
        ("ci", 2, 5),
        ("release", None, 20),
    ]
    # the registry is what run reads
    agentprop.settings.register_profile("ci", agentprop.settings.get_profile("ci"), screen=3)
    assert profiles.get_profile(None).screen == 3


def test_suite_settings_layer_the_default_the_profile_and_the_flags() -> None:
    from agentprop._decide.settings import suite_settings

    agentprop.settings.register_profile(
        "nightly", agentprop.settings.get_profile("release"), tau=0.95
    )
    name, s = suite_settings("nightly")
    assert (name, s.tau, s.max_runs, s.screen, s.inv_runs) == ("nightly", 0.95, 300, 0, 20)
    # unset fields fall through to the default profile
    agentprop.settings.register_profile("bare", max_runs=40)
    assert suite_settings("bare")[1].as_dict() == {
        "max_runs": 40,
        "max_examples": 10,
        "screen": 2,
        "inv_runs": 5,
    }
    # a flag given wins; None is not given
    _, flagged = suite_settings("nightly", runs=3, tau=None, max_runs=50)
    assert (flagged.runs, flagged.tau, flagged.max_runs) == (3, 0.95, 50)
    with pytest.raises(InvalidArgument, match="no agentprop settings profile 'weekly'"):
        suite_settings("weekly")
    with pytest.raises(InvalidArgument, match=r"screen=-1\): must be a whole number of at least 0"):
        agentprop.settings(screen=-1)


def _cli(*argv: str) -> tuple[int, str]:
    import io

    from agentprop._cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue() + err.getvalue()


def _mft_runs(out: str) -> tuple[int, int, int]:
    import re

    found = re.search(
        r"MFT: (\d+) case\(s\); agent runs at least ([\d,]+) .* at most ([\d,]+)", out
    )
    assert found, out
    cases, least, most = (int(g.replace(",", "")) for g in found.groups())
    return cases, least, most


def test_a_profile_registered_with_settings_is_usable_by_agentprop_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = _cli("run", str(EXAMPLE), "--dry-run", "--kinds", "mft", "--profile", "quick")
    assert code == 2 and "unknown profile 'quick'" in out and "ci, release, smoke" in out, out
    agentprop.settings.register_profile("quick", screen=3)
    code, out = _cli("run", str(EXAMPLE), "--dry-run", "--kinds", "mft", "--profile", "quick")
    assert code == 0 and "dry run (profile quick)" in out, out
    cases, least, _ = _mft_runs(out)
    assert least == 3 * cases  # its screen: three clean runs a case
    # flags are layered on top of the profile, in one place: --runs decides every case as asked
    agentprop.settings.register_profile("fixed4", mode="fixed", runs=4)
    code, out = _cli(
        "run", str(EXAMPLE), "--dry-run", "--kinds", "mft", "--profile", "fixed4", "--runs", "2"
    )
    cases, least, most = _mft_runs(out)
    assert code == 0 and least == most == 2 * cases, out
    code, out = _cli("run", str(EXAMPLE), "--dry-run", "--kinds", "mft", "--tau", "1.5")
    assert code == 2 and "--tau 1.5: the pass rate to hold must be in (0, 1]" in out, out


def test_a_profile_registered_in_a_conftest_is_usable_by_the_pytest_option(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "import agentprop\nagentprop.settings.register_profile('nightly', "
        "max_runs=12, max_examples=3)\n"
    )
    pytester.makepyfile(
        test_p="""
import agentprop
from agentprop._decide.session import current_session
from agentprop._decide.settings import resolve

def test_profile():
    assert current_session().profile == "nightly"
    assert resolve().max_runs == 12 and agentprop.agent_settings().max_examples == 3
"""
    )
    args = (
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "--agentprop-memo=none",
        "--agentprop-corpus=none",
    )
    pytester.runpytest_inprocess(*args, "--agentprop-profile=nightly").assert_outcomes(passed=1)
    result = pytester.runpytest_inprocess(*args, "--agentprop-profile=weekly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "--agentprop-profile weekly: no such profile; registered: ci, nightly, release, smoke"
        in "\n".join(result.errlines)
    )
