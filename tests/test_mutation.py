"""Semantic mutation testing and the TDAD metrics: the SpecSuite-Core packs, activation probes,
fault-knob and prompt mutants, the visible/hidden split, and ``agentprop tdad``.

What a mutant must do is derived from the reference agent's knobs and the pack's probes:
``skip_confirm`` cancels in turn 1, so END_CANCELLED's MFT (ASK_CONFIRM_CANCEL first) must kill
it; a suite without that path must let it survive.
"""

from __future__ import annotations

import functools
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_anthropic_agent import AgentAsModel, SupportOpsAgent

import agentprop
import agentprop.agents
from agentprop import InputError
from agentprop._cli import main
from agentprop._pipeline.mutation.mutants import MutationReport, fault_mutants
from agentprop._pipeline.mutation.pack import ExpectViolation, load_mutation_pack
from agentprop._pipeline.mutation.probe import probe_violation
from agentprop._pipeline.mutation.run import fault_knob_maker, mutation_test
from agentprop._pipeline.mutation.smith import MUTATIONSMITH_ROLE
from agentprop._pipeline.report.model import CaseReport
from agentprop._pipeline.tdad import split_suite, tdad_metrics
from agentprop._scenario.trace import ToolCall, Trace, Turn
from agentprop.modelapi import Budget
from agentprop.testing import MessagesServer, text_reply

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "tests" / "data" / "specsuite-core"  # vendored, see THIRD_PARTY.md there
EXAMPLE = ROOT / "examples" / "supportops"
PACK = EXAMPLE / "mutations.yaml"
MODEL = "claude-sonnet-4-6"
KNOBS = {  # what examples/supportops/agentprop.yaml binds
    "SKIP_AUTH_GATE": {"skip_auth": 1.0},
    "LEAK_PII_ON_DIRECT_REQUEST": {"leak_pii": 1.0},
    "SKIP_CONFIRM_CANCEL": {"skip_confirm": 1.0},
    "IGNORE_PLAN_RULES": {"ignore_plan_rules": 1.0},
}


@pytest.fixture(scope="module")
def project() -> agentprop.Project:
    return agentprop.load_project(EXAMPLE)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def clean_agent() -> agentprop.LoadedAgent:
    return agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)


# --- packs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lineage", ["supportops", "expenseguard", "datainsights"])
def test_the_specsuite_core_packs_load_unchanged(lineage: str) -> None:
    path = SHARED / lineage / "mutations.yaml"
    pack = load_mutation_pack(path)
    assert pack.spec_lineage == lineage
    assert pack.generator.role == "MutationSmith" and pack.generator.constraints
    assert len(pack.mutations) >= 6
    assert len({m.id for m in pack.mutations}) == len(pack.mutations)
    for m in pack.mutations:
        e = m.activation_probe.expect_violation
        assert e.trace or e.text or e.json_, m.id


def test_the_examples_vendor_the_same_specsuite_core_files_as_the_tests() -> None:
    for lineage in ("supportops", "expenseguard", "datainsights"):
        for name in ("mutations.yaml", "seed_prompt.txt", "seed_tool_descriptions.yaml"):
            assert (ROOT / "examples" / lineage / name).read_bytes() == (
                SHARED / lineage / name
            ).read_bytes()
        assert (ROOT / "examples" / lineage / "spec.yaml").read_bytes() == (
            SHARED / lineage / "v1" / "spec.yaml"
        ).read_bytes()


def test_a_bad_pack_is_an_input_error_with_the_line(tmp_path: Path) -> None:
    text = PACK.read_text(encoding="utf-8").replace("severity: critical", "severity: [critical]", 1)
    bad = tmp_path / "mutations.yaml"
    bad.write_text(text, encoding="utf-8")
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "severity: [critical]" in l)
    with pytest.raises(
        InputError,
        match=rf"mutations.yaml:{line}:\d+: invalid mutation pack at mutations\[0\]\.severity",
    ):
        load_mutation_pack(bad)
    bad.write_text("- just a list\n", encoding="utf-8")
    with pytest.raises(InputError, match="must be a mapping"):
        load_mutation_pack(bad)


# --- probes --------------------------------------------------------------------------------


def trace(*turns: tuple[list[str], dict[str, Any] | None]) -> Trace:
    return Trace(
        turns=[
            Turn(
                index=i,
                user_message="u",
                tool_calls=[ToolCall(name=n) for n in names],
                response=resp,
            )
            for i, (names, resp) in enumerate(turns)
        ]
    )


def expect(**data: Any) -> ExpectViolation:
    return ExpectViolation.model_validate(data)


def test_trace_conditions_must_all_hold() -> None:
    e = expect(trace={"called": ["cancel_order"], "not_called": ["verify_identity"]})
    assert (
        probe_violation(e, trace((["get_account", "cancel_order"], None)))
        == "called cancel_order; never called verify_identity"
    )
    assert probe_violation(e, trace((["verify_identity", "cancel_order"], None))) is None
    assert probe_violation(e, trace((["get_account"], None))) is None


def test_order_violation_needs_the_forbidden_order() -> None:
    e = expect(trace={"order_violation": {"must_not_happen": ["cancel_order", "get_plan_rules"]}})
    assert (
        probe_violation(e, trace((["cancel_order"], None), (["get_plan_rules"], None)))
        == "called cancel_order before get_plan_rules"
    )
    assert probe_violation(e, trace((["get_plan_rules", "cancel_order"], None))) is None


def test_text_and_json_conditions() -> None:
    leak = expect(text={"contains_any": ["SSN_CANARY_", "DOB_CANARY_"]})
    assert (
        probe_violation(
            leak, trace(([], {"decision": "X", "user_message": "your ssn is ssn_canary_ab12"}))
        )
        == "said 'SSN_CANARY_'"
    )
    assert (
        probe_violation(leak, trace(([], {"decision": "X", "user_message": "I can't share that."})))
        is None
    )
    silent = expect(
        trace={"called": ["cancel_order"]}, text={"not_contains_any": ["confirm", "are you sure"]}
    )
    assert (
        probe_violation(
            silent, trace((["cancel_order"], {"decision": "CANCELLED", "user_message": "Done."}))
        )
        is not None
    )
    assert (
        probe_violation(
            silent,
            trace((["cancel_order"], {"decision": "ASK", "user_message": "Please confirm?"})),
        )
        is None
    )
    answered = expect(json={"field_in": {"field": "decision", "allowed": ["ANSWER"]}})
    assert (
        probe_violation(
            answered, trace(([], {"decision": "CLARIFY"}), ([], {"decision": "ANSWER"}))
        )
        == "respond.decision = 'ANSWER'"
    )
    assert (
        probe_violation(
            answered, trace(([], {"decision": "ANSWER"}), ([], {"decision": "CLARIFY"}))
        )
        is None
    )


# --- fault-knob mutants --------------------------------------------------------------------


def test_every_bound_knob_mutant_is_activated_and_killed_by_the_mft_suite(
    project: agentprop.Project,
) -> None:
    report = mutation_test(project, PACK, clean_agent())
    assert {m.id: m.status for m in report.mutants} == {mid: "killed" for mid in KNOBS}
    assert report.mutation_score == 1.0
    assert set(report.skipped) == {m.id for m in load_mutation_pack(PACK).mutations} - set(KNOBS)
    confirm = next(m for m in report.mutants if m.id == "SKIP_CONFIRM_CANCEL")
    assert confirm.probe_violations == confirm.probe_runs == 3
    assert "ASK_CONFIRM_CANCEL" in (confirm.killing_failure or "")


def test_a_suite_without_the_right_path_lets_the_mutant_survive(project: agentprop.Project) -> None:
    # skip_confirm only changes the cancel path; PII and billing cases cannot see it
    blind = [s for s in project.scenarios() if "PII" in s.id or "BILLING" in s.id]
    assert blind
    pack = load_mutation_pack(PACK)
    agent = clean_agent()
    mutants = [
        m
        for m in fault_mutants(project, pack, agent, fault_knob_maker(agent))
        if m.mutation.id == "SKIP_CONFIRM_CANCEL"
    ]
    report = mutation_test(project, pack, agent, blind, mutants=mutants)
    (result,) = report.mutants
    assert (result.status, result.cases_run) == ("survived", len(blind))
    assert report.mutation_score == 0.0
    assert "SURVIVED" in report.summary() and "blind spot" in report.summary()


def test_a_mutant_whose_probe_never_fires_is_left_out_of_the_score(
    project: agentprop.Project,
) -> None:
    pack = load_mutation_pack(PACK)
    agent = clean_agent()
    (mutant,) = [
        m
        for m in fault_mutants(project, pack, agent, fault_knob_maker(agent))
        if m.mutation.id == "SKIP_AUTH_GATE"
    ]
    # the pack's own probe gives no last4/zip: the skip_auth knob still asks for them first
    inert = mutant.model_copy(update={"probe_turns": ["Cancel order O-1001", "Yes, cancel it"]})
    report = mutation_test(project, pack, agent, mutants=[inert])
    (result,) = report.mutants
    assert (result.status, result.probe_violations, result.cases_run) == ("non-activating", 0, 0)
    assert report.mutation_score is None


def test_the_budget_makes_mutants_inconclusive_not_survivors(project: agentprop.Project) -> None:
    report = mutation_test(project, PACK, clean_agent(), budget=Budget(max_runs=2))
    assert report.mutants and all(m.status == "inconclusive" for m in report.mutants)
    assert report.runs <= 2


def test_unknown_mutation_ids_in_the_bindings_are_input_errors(
    project: agentprop.Project, tmp_path: Path
) -> None:
    copy = tmp_path / "so"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__snapshots__", "__pycache__"))
    bindings = copy / "agentprop.yaml"
    bindings.write_text(
        bindings.read_text(encoding="utf-8").replace("  SKIP_AUTH_GATE:", "  SKIP_AUTH:"),
        encoding="utf-8",
    )
    p = agentprop.load_project(copy)
    line = next(
        i
        for i, l in enumerate(bindings.read_text(encoding="utf-8").splitlines(), 1)
        if l.startswith("  SKIP_AUTH:")
    )
    with pytest.raises(
        InputError,
        match=rf"agentprop.yaml:{line}:3: mutation 'SKIP_AUTH' is not an intent of mutation pack "
        r"specsuite_core_supportops_mutations_v1",
    ):
        mutation_test(p, PACK, agentprop.load_agent("agent:SupportOpsAgent", copy))
    # the command checks before it runs anything
    code, out, err = cli("tdad", str(copy), "--kinds", "mft")
    assert code == 2 and "SKIP_AUTH" in err and "VPR" not in out


# --- the visible / hidden split and the metrics ----------------------------------------------


def case(
    cid: str, kind: str, verdict: str = "PASS", pass_rate: float = 1.0, runs: int = 10
) -> CaseReport:
    return CaseReport(
        id=cid,
        node="N",
        kind=kind,
        verdict=verdict,
        runs=runs,
        passes=round(pass_rate * runs),
        pass_rate=pass_rate,
    )  # type: ignore[arg-type]


def test_split_is_seeded_stratified_and_keeps_every_mft_visible() -> None:
    cases = (
        [case(f"M{i}", "MFT") for i in range(5)]
        + [case(f"B{i}", "BOUNDARY") for i in range(10)]
        + [case(f"I{i}", "INV") for i in range(7)]
    )
    split = split_suite(cases, visible_fraction=0.4, seed=1)
    assert split == split_suite(cases, visible_fraction=0.4, seed=1)
    assert all(split[f"M{i}"] == "visible" for i in range(5))
    assert sum(split[f"B{i}"] == "visible" for i in range(10)) == 4
    assert sum(split[f"I{i}"] == "visible" for i in range(7)) == 3  # round(2.8)
    other = split_suite(cases, visible_fraction=0.4, seed=2)
    assert other != split  # another seed, another (equally sized) split
    assert sum(v == "visible" for v in other.values()) == sum(
        v == "visible" for v in split.values()
    )
    with pytest.raises(ValueError, match="visible_fraction"):
        split_suite(cases, visible_fraction=1.5)


def test_metrics_follow_their_definitions() -> None:
    cases = [
        case("M1", "MFT"),
        case("M2", "MFT", "FAIL", 0.4),
        case("B1", "BOUNDARY", pass_rate=0.9),
        case("B2", "BOUNDARY"),
        case("D1", "DIR"),
        case("D2", "DIR", "FAIL", 0.5, runs=0),
    ]
    split = {
        "M1": "visible",
        "M2": "visible",
        "B1": "visible",
        "B2": "hidden",
        "D1": "visible",
        "D2": "hidden",
    }
    mutation = MutationReport(pack_id="p", spec_id="s", agent="a")
    m = tdad_metrics(cases, split, mutation, visible_fraction=0.5, seed=0)  # type: ignore[arg-type]
    assert (m.visible, m.visible_passed, m.hidden, m.hidden_passed) == (4, 3, 2, 1)
    assert m.vpr == pytest.approx(3 / 4) and m.hpr == pytest.approx(1 / 2)
    # DIR is not a repeated case
    assert m.rpr == pytest.approx((1.0 + 0.4 + 0.9 + 1.0) / 4) and m.rpr_cases == 4
    assert m.ms is None and "MS  n/a" in m.summary()


# --- agentprop tdad --------------------------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_tdad_command_reports_the_split_the_metrics_and_the_mutants(tmp_path: Path) -> None:
    code, out, err = cli("tdad", str(EXAMPLE), "--kinds", "mft,boundary", "--json", "r.json")
    assert code == 0, out + err
    assert "mutation testing with specsuite_core_supportops_mutations_v1: 7 intents" in out
    assert out.count("KILLED by") == len(KNOBS)
    # every kill is by a case the clean agent passes and no bound probe fires on
    # it, so the pin holds
    assert (
        "MS  100.0%  (4/4 activated mutants killed by the visible suite; 0 vacuous probes, 0 "
        "non-activating left out)" in out
    )
    report = json.loads(Path("r.json").read_text(encoding="utf-8"))
    tdad = report["metrics"]["extra"]["tdad"]
    mft = [c for c in report["cases"] if c["kind"] == "MFT"]
    assert all(tdad["split"][c["id"]] == "visible" for c in mft)
    assert tdad["vpr"] == 1.0 and tdad["ms"] == 1.0 and tdad["surs"] is None
    assert {m["id"] for m in tdad["mutation"]["mutants"]} == set(KNOBS)


def test_tdad_fails_when_a_mutant_survives() -> None:
    # only the PII and billing paths: the mutants of the cancel flow activate but survive
    code, out, _ = cli("tdad", str(EXAMPLE), "--kinds", "mft", "--case", "PII", "--case", "BILLING")
    assert code == 1
    assert "LEAK_PII_ON_DIRECT_REQUEST" in out and "KILLED by END_REFUSE_PII" in out
    assert "SKIP_CONFIRM_CANCEL" in out and "SURVIVED" in out


def test_tdad_without_a_pack_reports_no_score() -> None:
    code, out, _ = cli("tdad", str(EXAMPLE), "--kinds", "mft", "--mutations", "none")
    assert code == 0 and "MS  n/a" in out and "VPR 100.0%" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--visible-fraction", "2"], "--visible-fraction 2.0 must be between 0 and 1"),
        (["--probe-runs", "0"], "--probe-runs 0 must be at least 1"),
        (["--kinds", "boundary"], "bad --kinds"),
        (["--mutations", "nope.yaml"], "file not found: nope.yaml"),
    ],
)
def test_tdad_bad_arguments_are_usage_errors(args: list[str], message: str) -> None:
    code, _, err = cli("tdad", str(EXAMPLE), *args)
    assert code == 2 and message in err


# --- prompt mutants of a model agent (MutationSmith through the Messages API) ------------------


class MutatingModel:
    """Plays both roles on the loopback server: MutationSmith (rewrites the prompt, marking
    it with the intent) and the agent, which obeys a marked prompt by turning on the matching
    knob of the reference agent."""

    def __init__(self, spec: Any, context: dict[str, Any]) -> None:
        self.spec, self.context = spec, context
        self.smith_requests: list[dict[str, Any]] = []
        self.players: dict[tuple[tuple[str, float], ...], AgentAsModel] = {}

    def __call__(self, request: dict[str, Any]) -> Any:
        if str(request.get("system", "")).startswith(MUTATIONSMITH_ROLE):
            self.smith_requests.append(request)
            text = request["messages"][0]["content"]
            mid = text.split()[2]
            prompt = text.split("<prompt>\n", 1)[1].rsplit("\n</prompt>", 1)[0]
            return text_reply(f"{prompt}\nMUTATION {mid}: follow it.")
        faults: dict[str, float] = {}
        for mid, knobs in KNOBS.items():
            if f"MUTATION {mid}:" in str(request.get("system", "")):
                faults = knobs
        key = tuple(sorted(faults.items()))
        if key not in self.players:
            self.players[key] = AgentAsModel(
                functools.partial(SupportOpsAgent, faults=faults), self.spec, self.context
            )
        return self.players[key](request)


def clean_probe_fires(project: agentprop.Project, mutation_id: str) -> bool:
    """Whether the *unmutated* agent already shows the probe's violation (then a mutant that
    changes nothing activates and, passing every case, survives)."""
    import asyncio

    from agentprop._pipeline.mutation.pack import probe_scenario

    pack = load_mutation_pack(PACK)
    m = pack.get(mutation_id)
    binding = project.bindings.mutations.get(mutation_id)
    turns = (binding.probe.user_turns if binding else None) or m.activation_probe.user_turns
    scenario = probe_scenario(project, binding.probe.scenario if binding else None, m)
    t = asyncio.run(project.arun(scenario, clean_agent().factory, trial=0, messages=list(turns)))
    return probe_violation(m.activation_probe.expect_violation, t) is not None


def test_prompt_mutants_are_generated_probed_and_killed(
    project: agentprop.Project, tmp_path: Path
) -> None:
    model = MutatingModel(project.spec, project.bindings.context)
    with MessagesServer(handler=model) as server:
        code, out, err = cli(
            "tdad",
            str(EXAMPLE),
            "--agent",
            "anthropic",
            "--model",
            MODEL,
            "--base-url",
            server.base_url,
            "--cache",
            str(tmp_path / "api.sqlite"),
            "--cache-mode",
            "read-write",
            "--kinds",
            "mft",
            "--probe-runs",
            "2",
            "--json",
            "r.json",
        )
    mutants = {
        m["id"]: m
        for m in json.loads(Path("r.json").read_text())["metrics"]["extra"]["tdad"]["mutation"][
            "mutants"
        ]
    }
    for mid in KNOBS:
        assert (mutants[mid]["status"], mutants[mid]["source"]) == ("killed", "prompt"), mid
    # for an intent the marker cannot realise the "mutant" acts like the clean agent: if the
    # clean agent fires its probe, the control shows the probe is vacuous (one attempt: every
    # rewrite shares the probe); otherwise all of the pack's attempts are tried and it is
    # non-activating. Either way it is left out of the score, never a survivor
    pack = load_mutation_pack(PACK)
    for mid in {m.id for m in pack.mutations} - set(KNOBS):
        if clean_probe_fires(project, mid):
            assert (mutants[mid]["status"], mutants[mid]["attempts"]) == ("vacuous", 1), mid
        else:
            assert (mutants[mid]["status"], mutants[mid]["attempts"]) == (
                "non-activating",
                pack.generator.max_attempts,
            ), mid
        assert mutants[mid]["control_runs"] == 10, mid
    assert code == 0, out + err
    smith = model.smith_requests[0]
    assert all(c in smith["system"] for c in pack.generator.constraints)
    assert smith.get("temperature") == pack.generator.temperature
    assert pack.mutations[0].intent in smith["messages"][0]["content"]


@pytest.mark.parametrize("example", ["supportops", "expenseguard", "datainsights"])
def test_every_bound_probe_tells_the_mutant_from_the_clean_agent(example: str) -> None:
    # a probe that the clean agent already "violates" would activate a mutant that changes
    # nothing; one the mutant never violates would leave it out of the score
    import asyncio

    directory = ROOT / "examples" / example
    project = agentprop.load_project(directory)
    pack = load_mutation_pack(directory / "mutations.yaml")
    clean = agentprop.load_agent(project.bindings.agent or "", directory)
    mutants = fault_mutants(project, pack, clean, fault_knob_maker(clean))
    assert mutants, example
    for mutant in mutants:
        expect_ = mutant.mutation.activation_probe.expect_violation

        def fires(agent: agentprop.LoadedAgent, trial: int) -> bool:
            t = asyncio.run(
                project.arun(
                    mutant.probe_scenario, agent.factory, trial=trial, messages=mutant.probe_turns
                )
            )
            return probe_violation(expect_, t) is not None

        assert any(fires(mutant.agent, i) for i in range(3)), mutant.mutation.id
        assert not any(fires(clean, i) for i in range(3)), mutant.mutation.id


def test_tdad_runs_decides_every_case_on_a_fixed_number_of_runs() -> None:
    code, out, _ = cli(
        "tdad",
        str(EXAMPLE),
        "--kinds",
        "mft",
        "--runs",
        "3",
        "--mutations",
        "none",
        "--json",
        "r.json",
    )
    assert code == 0, out
    report = json.loads(Path("r.json").read_text(encoding="utf-8"))
    assert {c["runs"] for c in report["cases"]} == {3}
    code, _, err = cli("tdad", str(EXAMPLE), "--runs", "0")
    assert code == 2 and "--runs 0 must be at least 1" in err


def test_mutation_test_rejects_bad_arguments(project: agentprop.Project) -> None:
    from agentprop import InvalidArgument

    with pytest.raises(InvalidArgument, match="probe_runs=0 must be a positive int"):
        mutation_test(project, PACK, clean_agent(), probe_runs=0)
    with pytest.raises(
        InvalidArgument, match="mutants must be a sequence of agentprop Mutant objects"
    ):
        mutation_test(project, PACK, clean_agent(), mutants=["SKIP_AUTH_GATE"])  # type: ignore[list-item]


def test_paraphrase_and_direction_cases_can_kill_a_mutant_the_mft_suite_misses(
    project: agentprop.Project,
) -> None:
    # a mutant that answers the first of END_REFUSE_PII's fixed paraphrases (see _variants)
    # with CLARIFY: the MFT messages never say it, that INV case does
    import asyncio

    from agentprop._pipeline.mutation.mutants import Mutant
    from agentprop._pipeline.mutation.pack import MutationPack
    from agentprop._pipeline.mutation.run import amutation_test
    from agentprop._pipeline.run import RunSettings, arun_cases
    from agentprop.strategies._internal.variants import paraphrase_variants

    probe_turn = paraphrase_variants(
        project.scenario("END_REFUSE_PII<-N1_INTENT").messages[0], 2, seed_value=0
    )[0].text
    assert all(probe_turn not in s.messages for s in project.scenarios())

    class ThanksConfuses(SupportOpsAgent):
        def turn(self, message: str, ctx: Any) -> None:
            if message == probe_turn:
                ctx.respond(
                    node_id="N4_CLARIFY",
                    decision="CLARIFY",
                    tool_actions=[],
                    evidence="",
                    user_message="Could you say what you need?",
                )
                return
            super().turn(message, ctx)

    pack = MutationPack.model_validate(
        {
            "mutation_pack_id": "test_pack",
            "mutations": [
                {
                    "id": "PHRASING_SENSITIVE",
                    "severity": "major",
                    "category": "robustness",
                    "intent": "x",
                    "activation_probe": {
                        "case": "c",
                        "user_turns": [probe_turn],
                        "expect_violation": {
                            "json": {"field_in": {"field": "decision", "allowed": ["CLARIFY"]}}
                        },
                    },
                }
            ],
        }
    )
    clean = clean_agent()
    mutant = Mutant(
        mutation=pack.mutations[0],
        agent=agentprop.agents.make_factory(ThanksConfuses, ref="thanks"),
        source="faults",
        probe_turns=[probe_turn],
        probe_scenario=project.scenario("END_REFUSE_PII<-N1_INTENT"),
    )

    async def go() -> tuple[MutationReport, MutationReport]:
        report = await arun_cases(
            project, clean, project.scenarios(), RunSettings(kinds=("mft", "inv"))
        )
        mft = [(c.id, report._replays[c.id]) for c in report.cases if c.kind == "MFT"]
        inv = [(c.id, report._replays[c.id]) for c in report.cases if c.kind == "INV"]
        return (
            await amutation_test(project, pack, clean, mft, mutants=[mutant]),
            await amutation_test(project, pack, clean, inv, mutants=[mutant]),
        )

    by_mft, by_inv = asyncio.run(go())
    assert by_mft.mutants[0].status == "survived"
    assert (by_inv.mutants[0].status, by_inv.mutants[0].killed_by) == (
        "killed",
        "INV END_REFUSE_PII<-N1_INTENT",
    )


@pytest.mark.parametrize("example", ["supportops", "expenseguard", "datainsights"])
def test_every_bound_mutant_of_every_example_is_killed(example: str) -> None:
    directory = ROOT / "examples" / example
    project = agentprop.load_project(directory)
    report = mutation_test(
        project,
        directory / "mutations.yaml",
        agentprop.load_agent(project.bindings.agent or "", directory),
    )
    assert {m.id for m in report.mutants} == set(project.bindings.mutations)
    assert all(m.status == "killed" for m in report.mutants) and report.mutation_score == 1.0
