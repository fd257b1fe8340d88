"""Issue #23 item 2: no silent green.

A spec whose highest-severity branch needs more tool calls than ``max_tool_calls_per_turn``
allows cannot be tested there: the run used to print every case PASS, ``min_branch_coverage:
met`` and exit 0. Now what no case reached is named with the reason, ``min_branch_coverage``
counts every branch, and the run exits 3 (INCOMPLETE), neither 0 nor the failure code 1.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from agentprop._cli import main

ROOT = Path(__file__).resolve().parents[1]
LOOKUPS = ROOT / "tests" / "data" / "promises" / "unrealisable_paths"


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out, err=out)
    return code, out.getvalue()


def _escalating_lookups(tmp_path: Path, *, limit: int = 3, failures: bool = False) -> Path:
    """The lookups spec where the thorough branch ends in its own decision, ESCALATE, under a
    policy that names that decision; the branch needs 4 calls. Its tools' timeouts (which no
    branch routes) are dropped unless ``failures``."""
    work = tmp_path / "lookups"
    shutil.copytree(LOOKUPS, work, ignore=shutil.ignore_patterns(".agentprop", "__pycache__"))
    spec = (work / "spec.yaml").read_text(encoding="utf-8")
    if not failures:
        spec = spec.replace("failure_modes: [timeout]", "failure_modes: []")
    spec = spec.replace("enum: [DONE]", "enum: [DONE, ESCALATE]").replace(
        "decision_enum: [DONE]", "decision_enum: [DONE, ESCALATE]"
    )
    spec = spec.replace(
        "  - when: otherwise\n    next: N3_FINISH\n- node_id: N3_FINISH",
        "  - when: otherwise\n    next: N4_ESCALATE\n- node_id: N4_ESCALATE\n  requirements:\n"
        "    must_call_tools_in_order: [summarize]\n  branches:\n  - when: otherwise\n    next: "
        "END_ESCALATE\n- node_id: N3_FINISH",
    )
    spec = spec.replace(
        "policies:\n",
        "policies:\n- id: P0_ESCALATE_EXPLAINED\n  priority: 200\n  text: Before ESCALATE, tell "
        "the user which records were checked.\n  enforcement: {type: strict}\n",
    )
    spec = spec.replace("max_tool_calls_per_turn: 3", f"max_tool_calls_per_turn: {limit}")
    spec = spec.replace("min_branch_coverage: 0.5", "min_branch_coverage: 0.4")
    (work / "spec.yaml").write_text(spec, encoding="utf-8")
    return work


def test_a_branch_over_the_call_limit_makes_the_run_incomplete(tmp_path: Path) -> None:
    work = _escalating_lookups(tmp_path)
    code, out = cli("run", str(work), "--kinds", "mft", "--corpus", "none")
    assert "1 cases: 1 passed, 0 failed" in out
    assert code == 3, out
    assert "coverage of all branches 40% (min_branch_coverage 0.4: met)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("not tested"))
    calls = (
        "over the call limit: needs 4 calls (lookup, cross_check, audit, summarize), "
        "max_tool_calls_per_turn is 3"
    )
    assert f"branch N1_ROUTE#1 ({calls})" in line
    assert f"branch N4_ESCALATE#0 ({calls})" in line
    assert f"path END_ESCALATE<-N4_ESCALATE ({calls})" in line
    assert (
        "decision ESCALATE (no case expects it: only END_ESCALATE<-N4_ESCALATE decide(s) it" in line
    )
    assert (
        "policy policies.P0_ESCALATE_EXPLAINED (no case exercises it (it names ESCALATE))" in line
    )
    assert "INCOMPLETE: every case passed, but 6 item(s) of the spec were not tested" in out


def test_min_branch_coverage_counts_the_untestable_branches(tmp_path: Path) -> None:
    work = _escalating_lookups(tmp_path)
    spec = work / "spec.yaml"
    spec.write_text(
        spec.read_text(encoding="utf-8").replace(
            "min_branch_coverage: 0.4", "min_branch_coverage: 1"
        ),
        encoding="utf-8",
    )
    code, out = cli("run", str(work), "--kinds", "mft", "--corpus", "none")
    assert code == 3
    assert "coverage of all branches 40% (min_branch_coverage 1: NOT MET)" in out
    assert "branch coverage 40% of all branches is below the spec's min_branch_coverage 1" in out


def test_a_failing_case_still_exits_1(tmp_path: Path) -> None:
    work = _escalating_lookups(tmp_path)
    code, out = cli(
        "run",
        str(work),
        "--kinds",
        "mft",
        "--corpus",
        "none",
        "--fault",
        "skip_summary=1",
        "--shrink-budget",
        "0",
    )
    assert code == 1, out


def test_a_spec_tested_everywhere_exits_0(tmp_path: Path) -> None:
    work = _escalating_lookups(tmp_path, limit=4)
    code, out = cli("run", str(work), "--kinds", "mft", "--corpus", "none")
    assert "not tested" not in out
    assert "INCOMPLETE" not in out
    assert code in (0, 1)  # the lookups agent answers DONE, not ESCALATE, on the thorough path


def test_an_unrouted_failure_and_an_unsendable_optional_field_make_the_run_incomplete(
    tmp_path: Path,
) -> None:
    """A declared failure no branch routes (L018) is injected by no case, and an optional
    response field the respond schema lacks (L021) is sent by no agent that follows the schema:
    the run names both as not tested, with the lint code, and exits 3."""
    work = _escalating_lookups(tmp_path, failures=True)
    spec = work / "spec.yaml"
    text = spec.read_text(encoding="utf-8")
    contract = "required_json_fields: [node_id, decision, tool_actions, evidence, user_message]\n"
    assert contract in text
    spec.write_text(
        text.replace(contract, contract + "  optional_json_fields: [total_due]\n"), encoding="utf-8"
    )
    code, out = cli("run", str(work), "--kinds", "mft", "--corpus", "none")
    assert code == 3, out
    line = next(ln for ln in out.splitlines() if ln.startswith("not tested"))
    unrouted = (
        "declared, but no branch routes it and no retry_policy retries it "
        "(L018): no case injects it"
    )
    for tool in ("lookup", "cross_check", "audit", "summarize"):
        assert f"failure tools.{tool}.failure_modes.timeout ({unrouted})" in line
    assert (
        "field respond.total_due (optional in response_contract but not in the respond tool's "
        "input_schema (L021), and no run's response carried it)" in line
    )
    assert "not tested (11): " in line  # and the 6 items of the branch over the call limit


# ----------------------------------------------------------------------------- lint, no bindings


def _spec_only(tmp_path: Path, edit: dict[str, str]) -> tuple[int, str, Path]:
    """The lookups spec alone (no bindings), with text replacements."""
    work = tmp_path / "alone"
    work.mkdir()
    text = (LOOKUPS / "spec.yaml").read_text(encoding="utf-8")
    for old, new in edit.items():
        assert old in text, old
        text = text.replace(old, new)
    (work / "spec.yaml").write_text(text, encoding="utf-8")
    code, out = cli("lint", str(work))
    return code, out, work / "spec.yaml"


def _line(path: Path, text: str) -> int:
    return next(
        i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text in line
    )


def test_lint_without_bindings_finds_a_path_over_the_call_limit(tmp_path: Path) -> None:
    code, out, spec = _spec_only(tmp_path, {})
    assert code == 0
    assert (
        f"{spec}:{_line(spec, 'node_id: N3_FINISH')}:12: warning L016: path END_DONE<-N3_FINISH "
        "(N1_ROUTE -> N2_DEEP -> N3_FINISH -> END_DONE)" in out
    )
    assert (
        "requires 4 tool calls in one turn (lookup, cross_check, audit, summarize) but "
        "max_tool_calls_per_turn is 3" in out
    )
    # with the bindings, the path's P001 says it (with the solver's reason): not twice
    code, out = cli("lint", str(LOOKUPS))
    assert "L016" not in out and out.count("P001") == 1


def test_lint_finds_an_unrouted_failure_a_sourceless_variable_and_an_unused_policy(
    tmp_path: Path,
) -> None:
    code, out, spec = _spec_only(
        tmp_path,
        {
            "  - when: depth == quick\n": "  - when: record.age_days > 30\n    next: END_DONE\n  "
            "- when: depth == quick\n",
            "  text: Report only what the tools returned.\n": "  text: Report only what the tools "
            "returned; never call purge_cache.\n",
            "- name: respond\n": "- name: purge_cache\n  input_schema: {type: object, properties: "
            "{}}\n- name: respond\n",
            "required_json_fields: [node_id, decision, tool_actions, evidence, user_message]\n": (
                "required_json_fields: [node_id, decision, tool_actions, evidence, user_message]\n"
                "  optional_json_fields: [record_id]\n"
            ),
        },
    )
    assert (
        "warning L018: tool summarize declares failure mode(s) timeout, which its "
        "retry_policy does not retry" in out
    )
    assert f"{spec}:{_line(spec, 'record.age_days')}:" in out
    assert (
        "warning L019: variable record.age_days has no possible source: no tool's output (or "
        "input) schema has a field 'age_days'" in out
    )
    assert (
        "warning L020: policy P1_GROUNDED names purge_cache, which the decision tree never uses"
        in out
    )
    assert (
        "info L021: response_contract lists optional field(s) record_id that the respond tool's "
        "input_schema does not have" in out
    )


def test_lint_finds_an_undotted_variable_with_no_source(tmp_path: Path) -> None:
    """``tier == gold``: no schema field is named tier, no enum holds gold, and the tree reads
    no other value of it. ``depth`` (read as quick and as thorough) is what a user says: not
    flagged; nor is a variable compared with a number."""
    code, out, spec = _spec_only(
        tmp_path,
        {
            "  - when: depth == quick\n": "  - when: tier == gold\n    next: END_DONE\n  - when: "
            "hops > 2\n    next: END_DONE\n  - when: depth == quick\n"
        },
    )
    assert f"{spec}:{_line(spec, 'tier == gold')}:" in out
    assert (
        "warning L019: variable tier has no possible source: no tool's output (or input) schema "
        "has a field 'tier', no schema's enum holds 'gold', and the tree reads "
        "no other value of it" in out
    )
    assert out.count("L019") == 1


def test_lint_reads_a_retry_that_fits_as_realisable_and_says_nothing(tmp_path: Path) -> None:
    """A tool's retry is a required call only when a case injects the failure: a path that fits
    the limit without it is no L016."""
    code, out, _ = _spec_only(
        tmp_path, {"max_tool_calls_per_turn: 3": "max_tool_calls_per_turn: 4"}
    )
    assert "L016" not in out
