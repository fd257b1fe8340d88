"""Item 7: INV passed an agent that is always wrong on a path.

``ignore_plan_rules`` at 1.0 cancels on every run of ``END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY``
(the plan forbids it). Its MFT fails on every run (found). Both sides of the path's invariance
case are then identically wrong, and the two-sample test saw no difference: INV PASSED and
counted towards HPR and mutation kills. The custom check runs the path's MFT and INV cases and
is found only when the MFT fails *and* the INV case is not PASS (NOT APPLICABLE, with its
reason).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from benchmarks._promises_zoo import ZooFault, ZooOutcome

PROJECT = "examples/supportops"
PATH = "END_CANCEL_DENIED<-N5_CANCEL_ELIGIBILITY"


def check_inv_is_not_applicable(seed: int) -> ZooOutcome:
    import agentprop
    from agentprop._pipeline.run import RunSettings, arun_cases

    root = Path(__file__).resolve().parents[2]
    project = agentprop.load_project(root / PROJECT)
    agent = agentprop.load_agent(
        project.bindings.agent or "", project.base_dir, faults={"ignore_plan_rules": 1.0}
    )
    report = asyncio.run(
        arun_cases(
            project, agent, [project.scenario(PATH)], RunSettings(kinds=("mft", "inv"), seed=seed)
        )
    )
    verdicts = {c.kind: c for c in report.cases}
    mft, inv = verdicts["MFT"], verdicts["INV"]
    found = mft.verdict == "FAIL" and inv.verdict != "PASS"
    note = f"MFT {mft.verdict}; INV {inv.verdict}" + (f": {inv.reason}" if inv.reason else "")
    return ZooOutcome(found=found, runs=report.metrics.runs, note=note)


ENTRIES: list[ZooFault] = [
    ZooFault(
        name="always_wrong_path_inv",
        item=7,
        project=PROJECT,
        faults={"ignore_plan_rules": 1.0},
        kinds=("mft", "inv"),
        cases=(PATH,),
        check=check_inv_is_not_applicable,
    ),
]
