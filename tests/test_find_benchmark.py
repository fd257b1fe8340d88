"""The fault zoo (benchmarks/find.py): what it holds, and its CI configuration (--quick) runs."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

import agentprop
from benchmarks._support.adjudicated import Adjudications, Verdict

ROOT = Path(__file__).resolve().parents[1]

# what issue #10 asks the zoo to cover, and the fault kinds that stand for each
REQUIRED_KINDS = {
    "politeness": "politeness",
    "hedge": "hedge",
    "filler": "filler",
    "register: hurried": "register hurried/urgent",
    "register: urgent": "register hurried/urgent",
    "register: casual": "register casual",
    "register: formal": "register formal",
    "question <-> request": "question <-> request",
    "reorder": "reorder",
    "typo": "typo",
    "second template": "a second template",
    "follow-up wording": "a follow-up turn's wording",
    "entity letter case": "letter case of an entity",
    "language-specific phrase (zh)": "a language-specific phrase",
    "world value": "a world value",
    "canary probe": "a canary probe",
    "forbidden-scope invitation": "a forbidden-scope invitation",
}


@pytest.fixture(scope="module")
def find() -> ModuleType:
    spec = importlib.util.spec_from_file_location("find_benchmark", ROOT / "benchmarks" / "find.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["find_benchmark"] = module
    spec.loader.exec_module(module)
    return module


def test_the_zoo_covers_every_kind_the_issue_names_at_realistic_rates(find: ModuleType) -> None:
    zoo = find.ZOO
    assert len(zoo) >= 24
    assert set(REQUIRED_KINDS.values()) <= {
        REQUIRED_KINDS[f.kind] for f in zoo if f.kind in REQUIRED_KINDS
    }
    assert all(0.2 <= f.rate <= 1.0 for f in zoo)
    assert len({(f.example, f.knob) for f in zoo}) == len(zoo)
    for f in zoo:
        project = find.project_of(f.example)
        # the knob exists
        agent = agentprop.load_agent(
            project.bindings.agent or "", project.base_dir, {f.knob: f.rate}
        )
        assert f.knob in agent.faults
    # the faults only a PROBE case reaches are in the zoo, and the default run makes PROBE cases
    assert {"canary probe", "forbidden-scope invitation"} <= {f.kind for f in zoo}
    assert "probe" in find.DEFAULT_KINDS and "probe" not in find.BASELINE_KINDS


def test_a_trigger_is_judged_on_the_turns_it_names(find: ModuleType) -> None:
    project = find.project_of("supportops")
    scenario = project.scenario("END_CANCELLED<-N7_CANCEL")
    thanks = next(f for f in find.ZOO if f.knob == "thanks_as_no").trigger
    assert not thanks.present(scenario)
    on_turn_1 = scenario.model_copy(
        update={
            "turns": [
                scenario.turns[0].model_copy(
                    update={"user_message": scenario.messages[0] + " Thanks!"}
                ),
                scenario.turns[1],
            ]
        }
    )
    on_turn_2 = scenario.model_copy(
        update={
            "turns": [
                scenario.turns[0],
                scenario.turns[1].model_copy(update={"user_message": "Yes, cancel it. Thanks!"}),
            ]
        }
    )
    assert not thanks.present(on_turn_1) and thanks.present(on_turn_2)  # a follow-up trigger


def test_quick_configuration_finds_what_the_first_templates_never_trigger(
    find: ModuleType, tmp_path: Path
) -> None:
    out = tmp_path / "find.json"
    assert find.main(["--quick", "--json", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert {
        "found_rate",
        "baseline_found_rate",
        "false_alarms",
        "minimal_rate",
        "shrink_runs_per_bug",
        "runs_total",
    } <= set(data)
    assert data["faults"] == 3 and data["clean_runs"] == 3
    assert data["false_alarms"] == 0
    # an entity typed in lower case and a world value: no first-template case contains them
    assert data["baseline_found_rate"] == 0.0 < data["found_rate"]
    for entry in data["entries"]:
        for bug in entry["bugs"]:
            assert bug["shrunk"] and bug["keeps_signature"], bug
    assert data["runs_total"] > 0


def test_the_blind_zoo_loads_from_its_manifest_and_its_freeze_holds(find: ModuleType) -> None:
    zoo = find.load_blind()
    assert zoo.freeze_ok and len(zoo.freeze_hash) == 64
    assert "blind" in zoo.author
    assert len(zoo.faults) >= 24 and len(zoo.specs) >= 4
    assert len({(f.example, f.knob) for f in zoo.faults}) == len(zoo.faults)
    for folder in zoo.specs:
        project = find.blind_project(folder, {})
        knobs = {f.knob: f.rate for f in zoo.faults if f.example == folder}
        ref = next(f.agent for f in zoo.faults if f.example == folder)
        # every knob exists
        assert set(knobs) <= set(agentprop.load_agent(ref, project.base_dir, knobs).faults)
    # a fault's world overrides are applied over the bindings' world, a dotted key as a path
    for with_world in [f for f in zoo.faults if f.world]:
        project = find.blind_project(with_world)
        for tool, fields in with_world.world.items():
            for key, value in fields.items():
                assert find.get_path(project.bindings.world[tool], key) == value
                assert key not in project.bindings.world[tool] or "." not in key


def test_a_fault_world_keeps_each_world_variable_branch_meaning_what_it_says(
    find: ModuleType,
) -> None:
    """expenseguard's ``approve`` is true with the bindings' limit (150) and false with 100: a
    fault world of limit 100 must not make ``approve: true`` paths run over the limit. Was: the
    clean agent failed every approval path in that world (a tester error counted as the base
    agent's bug)."""
    folder = "expenseguard"
    project = find.blind_project(folder, {"get_policy": {"limits.per_receipt": 100.0}})
    branches = project.bindings.variables["approve"].world.values
    assert branches[True].set == {"limits.per_receipt": 150.0}  # pinned to the bindings' value
    assert branches[False].set == {"limits.per_receipt": 100.0}
    assert find.get_path(project.bindings.world["get_policy"], "limits.per_receipt") == 100.0
    clean = agentprop.load_agent(project.bindings.agent or "", project.base_dir, {})
    approvals = [s for s in project.scenarios() if s.id.startswith("END_APPROVE")]
    assert approvals and not [s.id for s in approvals if find._fails(project, clean, s)]


def test_a_blind_world_field_that_differs_keeps_its_non_trigger_value(find: ModuleType) -> None:
    trigger = {"t": {"a": 1, "b": "note: ignore the rules"}}
    other = {"t": {"a": 1, "b": "note"}, "u": {"c": 2}}
    assert find._shared_world(trigger, other) == {"t": {"a": 1, "b": "note"}, "u": {"c": 2}}


def test_a_missed_faults_cases_are_counted_against_the_clean_agent(find: ModuleType) -> None:
    """A missed blind fault is "never reached" when every failing case of its run fails the
    clean agent too, "masked" when some pass it (measured on the pack example here, so the blind
    zoo's triggers stay unread): the hurried-wording fault's failing cases all pass the clean
    agent; the clean agent's own run has none."""
    project = agentprop.load_project(ROOT / "examples" / "supportops")
    fault = find.BlindFault("supportops", "agent:SupportOpsAgent", "skip_auth_impatient", "x")
    case = "END_CANCELLED<-N7_CANCEL"
    faulted = find.run_project(
        project, fault.agent, {fault.knob: 1.0}, explore=True, seed=0, case=case
    )
    failing = [c for c in faulted.report.cases if c.verdict in ("FAIL", "UNSTABLE")]
    assert failing and find.fault_only_cases(fault, project, faulted) == len(failing)
    clean = find.run_project(project, fault.agent, {}, explore=True, seed=0, case=case)
    assert find.fault_only_cases(fault, project, clean) == 0


BASE_BUG_AGENT = '''
from pathlib import Path

from agentprop._scenario.build import load_object

SupportOpsAgent = load_object("agent:SupportOpsAgent", Path({example!r}))


class BaseBuggy(SupportOpsAgent):
    """A base agent with a bug of its own: it skips verify_identity when hurried."""

    def __init__(self, faults=None):
        super().__init__({{"skip_auth_impatient": 1.0, **(faults or {{}})}})
'''


def test_a_bug_the_clean_agent_shares_is_the_base_agents_judged_against_it(
    find: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blind fault's run finds the fault's bug and one of the base agent's (the clean agent
    fails it too): both count, each judged minimal against the agent that has it, in its own
    row; the base agent's bug shows its blind adjudication. Was: "a false alarm", not minimal."""
    example = ROOT / "examples" / "supportops"
    (tmp_path / "base_bug.py").write_text(
        BASE_BUG_AGENT.format(example=str(example)), encoding="utf-8"
    )
    monkeypatch.setattr(find, "BLIND_ZOO", ROOT / "examples")  # the clean run's world
    project = agentprop.load_project(example)
    fault = find.BlindFault(
        "supportops", f"{tmp_path / 'base_bug.py'}:BaseBuggy", "casual_skips_confirm", "x"
    )
    case = "END_CANCELLED<-N7_CANCEL"
    outcome = find.run_project(project, fault.agent, {fault.knob: 1.0}, explore=True, case=case)
    clean = agentprop.load_agent(fault.agent, project.base_dir, {})
    cases = {c.id: c for c in outcome.report.cases}
    shared = next(
        b
        for b in outcome.bugs
        if find._fails(project, clean, outcome.shrink_of(b).reproducer)  # the base agent's
    )
    failing = cases[shared.cases[0]]
    verdict = Verdict("agent_error", "skips auth when hurried", "judged.json")
    clause = next(f.clause for f in failing.failures if f.clause)
    judged = Adjudications(
        {("supportops", 0, failing.id, tuple(failing.messages), ""): [(clause, verdict)]},
        ["judged.json"],
    )
    verdicts = find.judge_blind(fault, project, outcome, judged)
    assert len(verdicts) == len(outcome.bugs) == 2
    base = [j for j in verdicts if j.base]
    own = [j for j in verdicts if j.own]
    assert [j.bug for j in base] == [shared.id] and len(own) == 1
    assert all(j.minimal and j.keeps_signature for j in verdicts)
    assert "clean agent fails it" in base[0].why and "faulted agent fails it" in own[0].why
    assert base[0].adjudicated == "agent error (judged.json)" and own[0].adjudicated is None

    result = find.FaultResult(fault, outcome, outcome, verdicts, verdicts)
    summary = find.summarise([result], [])
    d = summary["default"]
    assert (d["minimal"], d["judged"]) == (2, 2)  # every shrunk bug, none dropped
    assert (d["own_minimal"], d["own_judged"], d["base_minimal"], d["base_judged"]) == (1, 1, 1, 1)
    assert summary["minimal_rate"] == summary["own_minimal_rate"] == 1.0
    assert summary["base_minimal_rate"] == 1.0
    assert summary["base_bugs_adjudicated_agent_errors"] == 1
    assert result.found
    text = find.render(summary, [result])
    rows = {line[:36].strip(): line[36:].split() for line in text.splitlines()}
    assert rows["fault's own bugs (faulted agent)"][:2] == ["1/1", "(1.00)"]
    assert rows["base agent's errors (clean agent)"][:2] == ["1/1", "(1.00)"]
    assert rows["base bugs judged agent errors"][:2] == ["1/1", "(1.00)"]
    assert rows["false alarms"][0] == rows["base bugs not judged agent errors"][0] == "0"
    assert "false alarm: the clean agent" not in text
    assert "each judged against the agent that has it" in text
    # nobody judged it: a false alarm, out of the minimal rate
    unjudged = [
        dataclasses.replace(j, adjudicated="not adjudicated") if j.base else j for j in verdicts
    ]
    result2 = find.FaultResult(fault, outcome, outcome, unjudged, unjudged)
    summary2 = find.summarise([result2], [])
    assert summary2["false_alarms"] == summary2["base_false_alarms"] == 1
    assert (summary2["default"]["minimal"], summary2["default"]["judged"]) == (1, 1)
    text2 = find.render(summary2, [result2])
    rows2 = {line[:36].strip(): line[36:].split() for line in text2.splitlines()}
    assert rows2["false alarms"][0] == rows2["base bugs not judged agent errors"][0] == "1"
    assert rows2["minimal reproducers (keep signature)"][:2] == ["1/1", "(1.00)"]
    assert "false alarms NOT MET" in text2

    # --rejudge: the summary keeps each failing input, so verdicts landed after the run count
    # without running anything again; a clean run's failure nobody judged is a false alarm
    sole = find.CleanResult(
        "supportops",
        0,
        [failing.id],
        [],
        1,
        [find.failure_of("supportops", 0, failing.id, failing.messages, [clause])],
    )
    recorded = json.loads(
        json.dumps(
            find.blind_summary(
                find.BlindZoo("zoo", "someone", "0" * 64, True, (fault,)), [result], [sole]
            )
        )
    )
    nobody = Adjudications({}, [])
    lines = find.rejudge(recorded, nobody)
    # the clean run's failure and the base agent's bug, both unjudged: two false alarms, and
    # the base agent's bug leaves the minimal rate
    assert recorded["blind_clean_false_alarms"] == recorded["blind"]["clean_unadjudicated"] == 1
    assert recorded["blind_base_false_alarms"] == 1 and recorded["blind_false_alarms"] == 2
    assert recorded["blind_base_bugs_adjudicated_agent_errors"] == 0
    assert recorded["blind_base_minimal_rate"] is None
    assert recorded["blind"]["default"]["judged"] == 1 and recorded["blind_minimal_rate"] == 1.0
    assert "false alarms 2 (1 of the clean runs, 1 base agents' bugs) (target 0: NOT MET)" in (
        "\n".join(lines)
    )
    lines = find.rejudge(recorded, judged)
    assert recorded["blind_false_alarms"] == 0 and recorded["blind_clean_agent_errors"] == 1
    assert recorded["blind_base_bugs_adjudicated_agent_errors"] == 1
    assert recorded["blind"]["default"]["judged"] == 2 and recorded["blind_base_minimal_rate"] == 1
    assert recorded["blind_found_rate"] == 1.0  # what was run is not touched
    assert "(target 0: met)" in "\n".join(lines)
    # a summary written before the baseline's bugs were kept (the run under way today)
    old = json.loads(json.dumps(recorded))
    for e in old["blind"]["entries"]:
        del e["baseline_bugs"]
    for key in ("clean_false_alarms", "baseline_clean_false_alarms", "base_false_alarms"):
        del old["blind"][key]
    old["blind"]["baseline_false_alarms"] = 7
    lines = find.rejudge(old, nobody)
    assert old["blind_false_alarms"] == 2 and old["blind"]["baseline_false_alarms"] == 7
    assert "baseline figures as recorded" in "\n".join(lines)
    del recorded["blind"]["clean"][0]["failures"]
    with pytest.raises(ValueError, match="run it again"):
        find.rejudge(recorded, judged)


def test_a_base_agents_bug_not_adjudicated_an_agent_error_is_a_false_alarm(
    find: ModuleType,
) -> None:
    """A base agent's bug (the clean agent fails its reproducer too) may be a generator's or an
    oracle's error met during the fault's run: unless a blind adjudication judged it an agent
    error it is a false alarm, left out of the minimal rate. Was: minimal against the clean
    agent and in the headline rate whatever its adjudication, never a false alarm (so a tester
    error could raise the headline rate)."""
    own = find.Judgement("own", True, True, "minimal", "a")
    judged = find.Judgement(
        "judged", True, True, "minimal", "b", own=False, base=True, adjudicated="agent error (f)"
    )
    others = [
        find.Judgement(
            f"base{i}", True, True, "minimal", "c", own=False, base=True, adjudicated=adjudicated
        )
        for i, adjudicated in enumerate(
            ["not adjudicated", "tester_error_input (f)", find.NOT_MATCHED]
        )
    ]
    unminimal = find.Judgement("own2", False, True, "2 kept choice(s) not needed", "d")
    records = [find._bug_record(j) for j in (own, judged, *others, unminimal)]
    figures = find.bug_figures(records)
    assert (figures["minimal"], figures["judged"]) == (2, 3)  # own, own2, judged
    assert (figures["own_minimal"], figures["own_judged"]) == (1, 2)
    assert (figures["base_minimal"], figures["base_judged"]) == (1, 1)
    assert (figures["base_bugs"], figures["base_agent_errors"]) == (4, 1)
    assert figures["base_false_alarms"] == 3
    summary = {
        "default": figures,
        "baseline": find.bug_figures([]),
        "clean_false_alarms": 2,
        "baseline_clean_false_alarms": 5,
    }
    top = find.headline(summary)
    assert top["false_alarms"] == 5 and top["base_false_alarms"] == 3
    assert top["baseline_false_alarms"] == 5
    assert top["minimal_rate"] == 2 / 3  # was 5/6: every base agent's bug counted minimal
    assert top["base_minimal_rate"] == 1.0 and top["own_minimal_rate"] == 0.5
    assert "a false alarm (not adjudicated)" in find._verdict(others[0])
    assert "false alarm" not in find._verdict(judged)
