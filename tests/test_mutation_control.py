"""Mutation testing with a control (issue #11, item 8): every activation probe also runs on the
clean agent, a probe the clean agent fires is *vacuous* (left out of MS, reported with its
rates), a case the clean agent does not pass kills nothing, and probes may run in the worlds of
BOUNDARY and DIR cases so that a boundary fault can activate.

The rates of the reference agents are known by construction: a fault knob at 1.0 always
misbehaves, the clean agent never does, so the published probes that fire on the clean agent
in the happy-path world are facts of the agents, pinned here.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import agentprop
import agentprop.tdad
from agentprop import InvalidArgument
from agentprop._cli import main
from agentprop._pipeline.mutation.mutants import Mutant, fault_mutants
from agentprop._pipeline.mutation.pack import (
    MutationPack,
    load_mutation_pack,
    probe_scenario,
    resolve_probe_world,
)
from agentprop._pipeline.mutation.probe import (
    PROBE_ALPHA,
    activation_decision,
    default_control_runs,
    min_control_runs,
)
from agentprop._pipeline.mutation.run import (
    KillerCase,
    amutation_test,
    fault_knob_maker,
    mutation_test,
)
from agentprop._pipeline.run import RunSettings, arun_cases
from agentprop._stats import fisher_exact_greater, fisher_exact_two_sided

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
BOUNDARY_30 = "BOUNDARY order.days_since_created=30 @N5_CANCEL_ELIGIBILITY"
"""The order is exactly as old as the cancel window: the clean agent cancels,
``window_off_by_one`` denies."""


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def example(name: str) -> tuple[agentprop.Project, MutationPack, agentprop.LoadedAgent]:
    directory = ROOT / "examples" / name
    project = agentprop.load_project(directory)
    return (
        project,
        load_mutation_pack(directory / "mutations.yaml"),
        agentprop.load_agent(project.bindings.agent or "", directory),
    )


# --- the statistics -------------------------------------------------------------------------


def test_one_sided_fisher_exact_known_values() -> None:
    assert fisher_exact_greater(3, 3, 0, 3) == pytest.approx(1 / 20)  # 1 / C(6, 3)
    assert fisher_exact_greater(3, 3, 0, 10) == pytest.approx(1 / 286)
    # both firings among the mutant's 3 of 13 runs
    assert fisher_exact_greater(2, 3, 0, 10) == pytest.approx(3 / 78)
    assert fisher_exact_greater(0, 3, 5, 10) == 1.0
    assert fisher_exact_greater(3, 3, 10, 10) == 1.0
    # one tail of the two-sided test: never larger than it when the mutant's rate is the higher
    for a, b in [(3, 0), (2, 1), (3, 4), (1, 0)]:
        assert fisher_exact_greater(a, 3, b, 10) <= fisher_exact_two_sided(a, 3, b, 10) + 1e-12


def test_control_runs_are_enough_for_an_always_firing_mutant() -> None:
    for probe_runs in range(1, 8):
        n = min_control_runs(probe_runs)
        assert fisher_exact_greater(probe_runs, probe_runs, 0, n) <= PROBE_ALPHA
        assert n == 1 or fisher_exact_greater(probe_runs, probe_runs, 0, n - 1) > PROBE_ALPHA
        assert default_control_runs(probe_runs) >= max(10, n)
    assert default_control_runs(1) == 19 and default_control_runs(3) == 10


def simulate(
    p_mutant: float,
    p_clean: float,
    *,
    probe_runs: int = 3,
    control_runs: int = 10,
    trials: int = 4000,
    seed: int = 0,
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    km = rng.binomial(probe_runs, p_mutant, trials)
    kc = rng.binomial(control_runs, p_clean, trials)
    statuses = [
        activation_decision(int(a), probe_runs, int(b), control_runs).status for a, b in zip(km, kc)
    ]
    return {s: statuses.count(s) / trials for s in ("activated", "vacuous", "non-activating")}


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.3, 0.5, 0.8, 1.0])
def test_a_mutant_no_worse_than_the_clean_agent_is_activated_at_most_alpha_of_the_time(
    rate: float,
) -> None:
    # the null hypothesis holds (same firing rate): activation is a false alarm
    rates = simulate(rate, rate, seed=int(rate * 100))
    assert rates["activated"] <= PROBE_ALPHA
    if rate >= 0.3:  # the clean agent fires it: vacuous, almost always
        assert rates["vacuous"] >= 0.95


def test_an_always_firing_mutant_is_activated_against_a_clean_agent_that_never_fires() -> None:
    assert simulate(1.0, 0.0) == {"activated": 1.0, "vacuous": 0.0, "non-activating": 0.0}
    assert simulate(0.0, 0.0) == {"activated": 0.0, "vacuous": 0.0, "non-activating": 1.0}
    assert simulate(1.0, 1.0)["vacuous"] == 1.0
    # a flaky mutant (fires 2 runs in 3) still activates most of the time; a rarely noisy
    # clean agent (5%) does not make a reliable mutant's probe vacuous
    assert simulate(2 / 3, 0.0)["activated"] >= 0.7
    assert simulate(1.0, 0.05)["activated"] >= 0.9


# --- vacuous probes -------------------------------------------------------------------------


PUBLISHED_PROBES_CLEAN_FIRES = {
    # the pack's own user turns in the bindings' happy-path world, on the bundled clean agents
    # the happy world's plan allows cancelling: the clean agent cancels
    "supportops": {"IGNORE_PLAN_RULES"},
    # no alcohol, no foreign receipt there
    "expenseguard": {
        "IGNORE_DISALLOWED_ITEM",
        "FAIL_TO_OPEN_COMPLIANCE_CASE",
        "SKIP_FX_CONVERSION",
    },
    # the fixture's revenue is not 125000; no SQL error
    "datainsights": {"HALLUCINATE_NUMBERS", "IGNORE_SQL_ERROR"},
}


def unchanged_mutants(
    project: agentprop.Project, pack: MutationPack, clean: agentprop.LoadedAgent
) -> list[Mutant]:
    """A "mutant" per intent that is the clean agent itself, probed as the pack publishes it."""
    return [
        Mutant(
            mutation=m,
            agent=clean,
            source="faults",
            probe_turns=list(m.activation_probe.user_turns),
            probe_scenario=probe_scenario(project, None, m),
        )
        for m in pack.mutations
    ]


@pytest.mark.parametrize("name", sorted(PUBLISHED_PROBES_CLEAN_FIRES))
def test_published_probes_that_fire_on_the_clean_agent_are_vacuous_not_blind_spots(
    name: str,
) -> None:
    # an unchanged agent can never be an activated mutant: before the control, the probes the
    # clean agent fires made it "SURVIVED ... blind spot" and pulled MS down
    project, pack, clean = example(name)
    report = mutation_test(project, pack, clean, mutants=unchanged_mutants(project, pack, clean))
    statuses = {m.id: m.status for m in report.mutants}
    assert {mid for mid, s in statuses.items() if s == "vacuous"} == PUBLISHED_PROBES_CLEAN_FIRES[
        name
    ]
    assert {mid for mid, s in statuses.items() if s != "vacuous"} == {
        m.id for m in pack.mutations
    } - PUBLISHED_PROBES_CLEAN_FIRES[name]
    assert all(s in ("vacuous", "non-activating") for s in statuses.values())
    assert report.mutation_score is None and report.activated == 0
    for m in report.mutants:
        if m.status == "vacuous":
            # the control alone decides it
            assert (m.control_violations, m.control_runs, m.probe_runs) == (10, 10, 0)
            assert m.control_explanation
    summary = report.summary()
    assert "SURVIVED" not in summary and "blind spot" not in summary
    assert f"{len(PUBLISHED_PROBES_CLEAN_FIRES[name])} vacuous probes" in summary
    assert "VACUOUS probe: the clean agent shows the violation in 10/10 runs" in summary


def test_a_knob_mutant_probed_where_the_clean_agent_already_violates_is_vacuous() -> None:
    # IGNORE_PLAN_RULES's published probe ("cancel ... yes") in the happy-path world, where
    # the plan allows cancelling: the bindings move it to END_CANCEL_DENIED's world for a reason
    project, pack, clean = example("supportops")
    (bound,) = [
        m
        for m in fault_mutants(project, pack, clean, fault_knob_maker(clean))
        if m.mutation.id == "IGNORE_PLAN_RULES"
    ]
    happy = bound.model_copy(
        update={"probe_scenario": probe_scenario(project, None, bound.mutation)}
    )
    (result,) = mutation_test(project, pack, clean, mutants=[happy]).mutants
    assert (result.status, result.control_violations, result.control_runs) == ("vacuous", 10, 10)
    assert "called cancel_order" in (result.control_explanation or "")
    (kept,) = mutation_test(project, pack, clean, mutants=[bound]).mutants
    assert (kept.status, kept.control_violations, kept.probe_violations) == ("killed", 0, 3)
    assert kept.probe_p_value is not None and kept.probe_p_value <= PROBE_ALPHA


def test_bad_control_settings_are_rejected() -> None:
    project, pack, clean = example("supportops")
    with pytest.raises(InvalidArgument, match="control_runs=2 is too few: with probe_runs=3"):
        mutation_test(project, pack, clean, control_runs=2)
    with pytest.raises(InvalidArgument, match="probe_alpha=1.5"):
        mutation_test(project, pack, clean, probe_alpha=1.5)
    # the async core refuses alike (mutation_test is a thin wrapper of it)
    for bad, said in [
        ({"probe_runs": 0}, "probe_runs=0"),
        ({"probe_alpha": 1.5}, "probe_alpha=1.5"),
    ]:
        with pytest.raises(InvalidArgument, match=said):
            asyncio.run(amutation_test(project, pack, clean, [], **bad))  # type: ignore[arg-type]
    code, _, err = cli("tdad", str(SUPPORTOPS), "--control-runs", "1")
    assert code == 2 and "--control-runs 1 is too few" in err


# --- a kill needs a case the clean agent passes -----------------------------------------------


def test_a_case_the_clean_agent_fails_too_does_not_kill() -> None:
    project, pack, _ = example("supportops")
    # the agent under test already cancels without confirming: END_CANCELLED's MFT fails on it
    clean = agentprop.load_agent("agent:SupportOpsAgent", SUPPORTOPS, faults={"skip_confirm": 1.0})
    (auth,) = [
        m
        for m in fault_mutants(project, pack, clean, fault_knob_maker(clean))
        if m.mutation.id == "SKIP_AUTH_GATE"
    ]
    cancelled = project.scenario("END_CANCELLED<-N7_CANCEL")
    refuse_auth = project.scenario("END_REFUSE_AUTH<-N2_AUTH")
    only_failing = mutation_test(project, pack, clean, [cancelled], mutants=[auth])
    (r,) = only_failing.mutants
    assert (r.status, r.uncounted, r.cases_run, r.cases_counted) == (
        "survived",
        [cancelled.id],
        1,
        0,
    )  # it fails on the mutant too, but kills nothing
    assert "SURVIVED: the suite has no visible case the clean agent passes to kill it" in r.line()
    assert (
        only_failing.clean_not_passing == {cancelled.id: "FAIL"}
        and only_failing.mutation_score == 0.0
    )
    assert (
        "cannot kill: END_CANCELLED<-N7_CANCEL (the clean agent's verdict is FAIL)"
        in only_failing.summary()
    )
    with_auth = mutation_test(project, pack, clean, [cancelled, refuse_auth], mutants=[auth])
    (r,) = with_auth.mutants
    assert (r.status, r.killed_by, r.uncounted) == ("killed", refuse_auth.id, [cancelled.id])
    # known clean verdicts (what `agentprop tdad` passes): the failing case is not
    # even run on the mutant
    report = asyncio.run(
        arun_cases(project, clean, [cancelled, refuse_auth], RunSettings(kinds=("mft",)))
    )
    killers = [
        KillerCase(c.id, report._replays[c.id], clean_verdict=c.verdict) for c in report.cases
    ]
    (r,) = asyncio.run(amutation_test(project, pack, clean, killers, mutants=[auth])).mutants
    assert (r.status, r.killed_by, r.uncounted, r.cases_run) == (
        "killed",
        refuse_auth.id,
        [cancelled.id],
        1,
    )


def test_tdad_with_a_faulty_clean_agent_counts_no_kill_by_a_case_it_fails(tmp_path: Path) -> None:
    # the agent under test skips the confirmation; its SKIP_CONFIRM_CANCEL "mutant" is the same
    # agent. Without the control that mutant activated and was "killed" by END_CANCELLED, a case
    # the agent under test fails itself (MS 4/4)
    code, out, err = cli(
        "tdad", str(SUPPORTOPS), "--kinds", "mft", "--fault", "skip_confirm=1.0", "--json", "r.json"
    )
    assert code == 1, out + err  # a visible case fails
    # loop, retry and MC/DC cases included
    assert (
        "19 visible cases the clean agent passes to kill them (6 it does not pass cannot kill)"
        in out
    )
    line = next(l for l in out.splitlines() if l.strip().startswith("SKIP_CONFIRM_CANCEL"))
    assert "VACUOUS probe: the clean agent shows the violation in 10/10 runs" in line
    assert "cannot kill: END_CANCELLED<-N7_CANCEL (the clean agent's verdict is FAIL)" in out
    assert (
        "MS  100.0%  (3/3 activated mutants killed by the visible suite; 1 vacuous probes, 0 "
        "non-activating left out)" in out
    )
    assert (
        "vacuous probes (the clean agent fires them): SKIP_CONFIRM_CANCEL (mutant 0/0, clean 10/10)"
        in out
    )
    tdad = json.loads(Path("r.json").read_text(encoding="utf-8"))["metrics"]["extra"]["tdad"]
    assert (tdad["mutants_killed"], tdad["mutants_activated"]) == (3, 3)
    assert [v["id"] for v in tdad["vacuous_probes"]] == ["SKIP_CONFIRM_CANCEL"]
    assert tdad["vacuous_probes"][0]["control_violations"] == 10 and tdad["non_activating"] == []
    # the three confirm paths, and the loop and retry cases built on them
    assert {c.split("/")[0] for c in tdad["cases_clean_not_passing"]} == {
        "END_CANCELLED<-N7_CANCEL",
        "END_TICKET<-N7_CANCEL",
        "END_CANCEL_ABORTED<-N6_CONFIRM_CANCEL",
    }
    assert len(tdad["cases_clean_not_passing"]) == 6
    killers = {
        m["id"]: m["killed_by"] for m in tdad["mutation"]["mutants"] if m["status"] == "killed"
    }
    assert "END_CANCELLED<-N7_CANCEL" not in killers.values()


# --- probes in BOUNDARY and DIR worlds --------------------------------------------------------


WINDOW_PACK = {
    "mutation_pack_id": "window_pack",
    "mutations": [
        {
            "id": "WINDOW_OFF_BY_ONE",
            "severity": "major",
            "category": "business_logic_violation",
            "intent": "Treat an order exactly as old as the cancel window as too old to cancel.",
            "activation_probe": {
                "case": "cancel_at_the_window",
                "user_turns": ["Cancel order O-1001, last4 4242 zip 94107", "Yes, cancel it"],
                "expect_violation": {
                    "trace": {"not_called": ["cancel_order"]},
                    "json": {"field_in": {"field": "decision", "allowed": ["CANCEL_DENIED"]}},
                },
            },
        }
    ],
}


def window_mutant(project: agentprop.Project, world: str | None) -> tuple[MutationPack, Mutant]:
    pack = MutationPack.model_validate(WINDOW_PACK)
    m = pack.mutations[0]
    agent = agentprop.load_agent(
        "agent:SupportOpsAgent", SUPPORTOPS, faults={"window_off_by_one": 1.0}
    )
    return pack, Mutant(
        mutation=m,
        agent=agent,
        source="faults",
        probe_turns=list(m.activation_probe.user_turns),
        probe_scenario=probe_scenario(project, world, m),
    )


def test_a_boundary_fault_activates_in_a_boundary_world_and_a_boundary_case_kills_it() -> None:
    project, _, clean = example("supportops")
    assert (
        resolve_probe_world(project, BOUNDARY_30).world.overrides["get_account"][
            "orders[0].days_since_created"
        ]
        == 30
    )

    async def go() -> tuple[agentprop.tdad.MutationReport, agentprop.tdad.MutationReport]:
        report = await arun_cases(
            project, clean, project.scenarios(), RunSettings(kinds=("mft", "boundary"))
        )
        killers = [
            KillerCase(c.id, report._replays[c.id], clean_verdict=c.verdict)
            for c in report.cases
            if c.id in report._replays
        ]
        happy_pack, happy = window_mutant(project, None)
        edge_pack, edge = window_mutant(project, BOUNDARY_30)
        return (
            await amutation_test(project, happy_pack, clean, killers, mutants=[happy]),
            await amutation_test(project, edge_pack, clean, killers, mutants=[edge]),
        )

    in_happy_world, at_the_edge = asyncio.run(go())
    # 10 days old: the fault cannot show
    assert in_happy_world.mutants[0].status == "non-activating"
    (r,) = at_the_edge.mutants
    assert (r.status, r.probe_violations, r.control_violations) == ("killed", 3, 0)
    assert r.killed_by == BOUNDARY_30 and at_the_edge.mutation_score == 1.0


def test_tdad_binds_a_probe_to_a_boundary_case(tmp_path: Path) -> None:
    copy = tmp_path / "so"
    shutil.copytree(SUPPORTOPS, copy, ignore=shutil.ignore_patterns("__snapshots__", "__pycache__"))
    import yaml

    (copy / "window.yaml").write_text(yaml.safe_dump(WINDOW_PACK), encoding="utf-8")
    bindings = copy / "agentprop.yaml"
    text = bindings.read_text(encoding="utf-8")
    start = text.index("\nmutations:\n")
    end = text.find("\n\n", start + 1)
    block = (
        "\nmutations:\n  WINDOW_OFF_BY_ONE:\n    faults: {window_off_by_one: 1.0}\n    probe:\n"
        f'      scenario: "{BOUNDARY_30}"\n'
    )
    bindings.write_text(
        text[:start] + block + (text[end:] if end != -1 else "\n"), encoding="utf-8"
    )
    code, out, err = cli(
        "tdad", str(copy), "--kinds", "mft,boundary", "--mutations", str(copy / "window.yaml")
    )
    assert code == 0, out + err
    assert f"KILLED by {BOUNDARY_30}" in out and "probe 3/3 vs clean 0/10" in out
    assert (
        "MS  100.0%  (1/1 activated mutants killed by the visible suite; 0 vacuous probes, 0 "
        "non-activating left out)" in out
    )
    # a DIR case's world, either side, is a probe world too; an unknown id is a
    # bindings error at its line
    dir_id = "DIR order.days_since_created: 10 -> 9 @N5_CANCEL_ELIGIBILITY#1"
    assert (
        resolve_probe_world(agentprop.load_project(copy), dir_id).world.overrides["get_account"][
            "orders[0].days_since_created"
        ]
        == 9
    )
    assert (
        resolve_probe_world(agentprop.load_project(copy), dir_id + " (base)").world.overrides[
            "get_account"
        ]["orders[0].days_since_created"]
        == 10
    )
    bindings.write_text(
        bindings.read_text(encoding="utf-8").replace(
            "days_since_created=30", "days_since_created=300"
        ),
        encoding="utf-8",
    )
    line = next(
        i
        for i, l in enumerate(bindings.read_text(encoding="utf-8").splitlines(), 1)
        if "days_since_created=300" in l
    )
    code, out, err = cli(
        "tdad", str(copy), "--kinds", "mft,boundary", "--mutations", str(copy / "window.yaml")
    )
    assert (
        code == 2
        and f"agentprop.yaml:{line}:" in err
        and "no BOUNDARY or DIR case" in err
        and "VPR" not in out
    )


# --- the promises zoo -------------------------------------------------------------------------


def test_the_zoo_entries_of_item_8_are_found() -> None:
    from benchmarks._promises_zoo import all_entries

    entries = [e for e in all_entries() if e.item == 8]
    assert {e.name for e in entries} == {"vacuous_probe", "kill_by_a_case_the_clean_agent_fails"}
    for entry in entries:
        assert entry.check is not None and (ROOT / entry.project / "spec.yaml").is_file()
        for seed in (0, 1):
            outcome = entry.check(seed)
            assert outcome.found and outcome.runs > 0, (entry.name, outcome.note)
