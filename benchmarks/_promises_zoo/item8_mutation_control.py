"""Item 8: the mutation score has a control.

Two faults of the mutation test itself, not of an agent, so each entry is a ``check``:

* ``vacuous_probe`` — expenseguard's FAIL_TO_OPEN_COMPLIANCE_CASE mutant probed in the
  happy-path world, where no item is disallowed and the clean agent never opens a compliance
  case either: the probe fires on the clean agent. Found when agentprop reports the probe as
  vacuous (with the clean firing rate) instead of counting the mutant as activated.
* ``kill_by_a_case_the_clean_agent_fails`` — the agent under test already cancels without
  confirming, so END_CANCELLED's case fails on it; a SKIP_AUTH_GATE mutant fails that case
  too. Found when agentprop does not count it as a kill and lists the case as one the clean
  agent does not pass.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks._promises_zoo import ZooFault, ZooOutcome

ROOT = Path(__file__).resolve().parents[2]


def _vacuous_probe(seed: int) -> ZooOutcome:
    import agentprop
    from agentprop._pipeline.mutation.mutants import fault_mutants
    from agentprop._pipeline.mutation.pack import load_mutation_pack, probe_scenario
    from agentprop._pipeline.mutation.run import fault_knob_maker, mutation_test

    directory = ROOT / "examples" / "expenseguard"
    project = agentprop.load_project(directory)
    pack = load_mutation_pack(directory / "mutations.yaml")
    clean = agentprop.load_agent(project.bindings.agent or "", directory)
    (bound,) = [
        m
        for m in fault_mutants(project, pack, clean, fault_knob_maker(clean))
        if m.mutation.id == "FAIL_TO_OPEN_COMPLIANCE_CASE"
    ]
    happy = bound.model_copy(
        update={"probe_scenario": probe_scenario(project, None, bound.mutation)}
    )
    report = mutation_test(project, pack, clean, mutants=[happy], seed=seed)
    (result,) = report.mutants
    found = result.status == "vacuous" and result.control_violations > 0 and report.activated == 0
    return ZooOutcome(found=found, runs=report.runs, note=result.line())


def _kill_by_a_failing_case(seed: int) -> ZooOutcome:
    import agentprop
    from agentprop._pipeline.mutation.mutants import fault_mutants
    from agentprop._pipeline.mutation.pack import load_mutation_pack
    from agentprop._pipeline.mutation.run import fault_knob_maker, mutation_test

    directory = ROOT / "examples" / "supportops"
    project = agentprop.load_project(directory)
    pack = load_mutation_pack(directory / "mutations.yaml")
    clean = agentprop.load_agent(
        project.bindings.agent or "", directory, faults={"skip_confirm": 1.0}
    )
    (auth,) = [
        m
        for m in fault_mutants(project, pack, clean, fault_knob_maker(clean))
        if m.mutation.id == "SKIP_AUTH_GATE"
    ]
    case = project.scenario("END_CANCELLED<-N7_CANCEL")
    report = mutation_test(project, pack, clean, [case], mutants=[auth], seed=seed)
    (result,) = report.mutants
    found = (
        result.status != "killed"
        and case.id in report.clean_not_passing
        and case.id in result.uncounted
    )
    return ZooOutcome(found=found, runs=report.runs, note=result.line())


ENTRIES: list[ZooFault] = [
    ZooFault(name="vacuous_probe", item=8, project="examples/expenseguard", check=_vacuous_probe),
    ZooFault(
        name="kill_by_a_case_the_clean_agent_fails",
        item=8,
        project="examples/supportops",
        faults={"skip_confirm": 1.0},
        check=_kill_by_a_failing_case,
    ),
]
