"""Issue #23 item 3: conditions covered like avionics code (MC/DC).

Where a branch is ``missing_service or missing_symptom``, the path case withholds both; an agent
that asks back only when *both* are missing passed everything. Each atom of an ``and`` / ``or``
now gets a case where it alone decides the branch, and the run reports the condition coverage.
The it_helpdesk spec of the issue's zoo (benchmarks/_specs_zoo, frozen) has both shapes.
"""

from __future__ import annotations

import io
from pathlib import Path

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._scenario.mcdc import condition_atoms

ROOT = Path(__file__).resolve().parents[1]
HELPDESK = ROOT / "benchmarks" / "_specs_zoo" / "it_helpdesk"


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out, err=out)
    return code, out.getvalue()


def test_each_atom_of_an_or_gets_a_case_where_it_alone_takes_the_branch() -> None:
    project = load_project(HELPDESK)
    assert [a.id for a in condition_atoms(project.spec)][:2] == ["N1_TRIAGE#0.1", "N1_TRIAGE#0.2"]
    by_atom = {s.id.rsplit("/MCDC ", 1)[1]: s for s in project.scenarios() if "/MCDC " in s.id}
    one, two = by_atom["N1_TRIAGE#0.1"], by_atom["N1_TRIAGE#0.2"]
    assert one.expect_decision == two.expect_decision == "ASK_DETAILS"
    # exactly one of the two withheld, the other given
    assert len(one.withheld) == 1 and len(two.withheld) == 1 and one.withheld != two.withheld
    assert project.condition_gaps == {}


def test_an_agent_that_asks_back_only_when_both_are_missing_is_caught() -> None:
    code, out = cli(
        "run",
        str(HELPDESK),
        "--kinds",
        "mft",
        "--corpus",
        "none",
        "--fault",
        "asks_only_if_both_missing=1",
        "--shrink-budget",
        "0",
    )
    assert code == 1
    failing = [
        line for line in out.splitlines() if "/MCDC N1_TRIAGE#0." in line and " FAIL " in line
    ]
    assert len(failing) == 2, out


def test_the_run_reports_condition_coverage() -> None:
    code, out = cli(
        "run", str(HELPDESK), "--kinds", "mft", "--corpus", "none", "--shrink-budget", "0"
    )
    assert "conditions (MC/DC): 4/4 atoms shown to change their branch alone" in out
