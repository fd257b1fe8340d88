"""What keeps a run of many cases flat in memory: the JSON report written a case at a time, a
bounded number of passing traces per report, kept runs moved (not copied) into the case
reports, and the in-memory memo compressed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._decide.memo import TrialMemo, trace_json
from agentprop._decide.oracle import CheckResult, SampledRun
from agentprop._pipeline import kinds
from agentprop._pipeline.kinds import PassingQuota, case_from_check, passing_quota, run_traces
from agentprop._pipeline.report.model import RunReport
from agentprop._scenario.trace import Trace, Turn
from benchmarks._support.synthetic_report import synthetic_report

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"


def _trace(i: int) -> Trace:
    return Trace(
        case_id="c",
        trial=i,
        turns=[Turn(index=0, user_message=f'message {i}\nwith a newline and "quotes"')],
    )


def test_the_json_report_in_pieces_is_the_same_text_as_whole() -> None:
    report = synthetic_report(cases=40, runs=400, seed=3, traces_per_case=2)
    assert any(c.traces for c in report.cases)
    pieces = list(report.json_chunks())
    assert len(pieces) == len(report.cases) + 2  # never one string of every case
    assert "".join(pieces) == report.to_json()
    empty = report.model_copy(update={"cases": []})
    assert "".join(empty.json_chunks()) == empty.to_json()
    RunReport.model_validate_json("".join(pieces))


def test_a_report_keeps_passing_traces_up_to_its_quota_and_every_failing_one() -> None:
    runs = [
        SampledRun(
            trial=i,
            passed=i % 3 != 0,
            signature=None if i % 3 else "x:y",
            trace_json=trace_json(_trace(i)),
        )
        for i in range(12)
    ]
    with passing_quota(PassingQuota(3)) as quota:
        kept = run_traces(runs)
    assert [t.trial for t in kept] == [0, 1, 2, 3, 4, 6, 9] and quota.left == 0
    assert len(run_traces(runs)) == 12  # outside a run's report: no cap


def test_case_from_check_moves_the_kept_runs_into_the_case(tmp_path: Path) -> None:
    from agentprop._agents.project import load_project

    project = load_project(SUPPORTOPS)
    scenario = project.scenarios()[0]
    result = CheckResult(
        verdict="PASS",
        decided_by="fixed",
        runs=1,
        passes=1,
        pass_rate=1.0,
        interval=(0.0, 1.0),
        interval_exact=(0.0, 1.0),
        sampled_runs=[SampledRun(trial=0, passed=True, trace_json=trace_json(_trace(0)))],
    )
    case = case_from_check(scenario.id, "MFT", scenario, result, {})
    assert [t.trial for t in case.traces] == [0] and result.sampled_runs == []


def test_agentprop_run_keeps_at_most_the_quota_of_passing_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(kinds, "PASSING_PER_RUN", 4)
    path = tmp_path / "report.json"
    code = main(
        ["run", str(SUPPORTOPS), "--kinds", "mft", "--fault", "skip_auth=0.5", "--json", str(path)],
        out=io.StringIO(),
        err=io.StringIO(),
    )
    assert code == 1
    data = json.loads(path.read_text())
    traces = [t for c in data["cases"] for t in c["traces"]]
    # a case decided again (a policy topped up) gives back nothing it took: at most the cap
    assert 0 < sum(t["passed"] for t in traces) <= 4
    failing_cases = [c for c in data["cases"] if c["verdict"] == "FAIL"]
    assert failing_cases and all(any(not t["passed"] for t in c["traces"]) for c in failing_cases)
    sampling = data["trace_sampling"]
    assert (
        sampling["kept"] == len(traces)
        and sampling["kept"] + sampling["omitted"] == data["metrics"]["runs"]
    )
    assert sampling["passing_per_run"] == 4


def test_the_memo_holds_runs_compressed_and_gives_them_back_equal() -> None:
    memo = TrialMemo()
    trace = Trace(case_id="c", trial=1, turns=[Turn(index=0, user_message="hello " * 200)])
    key = memo.key("input", "agent", 1)
    memo.put(key, trace)
    assert len(memo._mem[key]) < len(trace_json(trace)) / 4
    again = memo.get(key)
    assert again is not None and trace_json(again) == trace_json(trace)


def test_the_models_made_by_the_thousand_share_one_set_of_field_names() -> None:
    from agentprop._agents.project import load_project
    from agentprop._pipeline.report.model import CaseReport

    scenario = load_project(SUPPORTOPS).scenarios()[0]
    again = scenario.model_validate_json(scenario.model_dump_json())
    # one set for the class, not one each
    assert scenario.model_fields_set is again.model_fields_set
    assert scenario.turns[0].model_fields_set is again.turns[0].model_fields_set
    one, two = (
        CheckResult(
            verdict="PASS",
            decided_by="fixed",
            runs=n,
            passes=n,
            pass_rate=1.0,
            interval=(0.0, 1.0),
            interval_exact=(0.0, 1.0),
        )
        for n in (1, 2)
    )
    assert one.model_fields_set is two.model_fields_set
    a, b = (case_from_check(f"case {i}", "MFT", scenario, one, {}) for i in (1, 2))
    before = b.model_dump_json()
    a.rule = "changed"  # pydantic adds the name to the shared set: it is there already
    assert a.model_fields_set is b.model_fields_set == set(CaseReport.model_fields)
    assert b.model_dump_json() == before and a.rule == "changed"
    assert CaseReport.model_validate_json(a.model_dump_json()) == a


def test_a_copy_of_a_bulk_model_shares_the_set_too() -> None:
    from agentprop._agents.project import load_project

    scenario = load_project(SUPPORTOPS).scenarios()[0]
    for copied in (scenario.model_copy(update={"id": "other"}), scenario.model_copy(deep=True)):
        assert (
            copied.model_fields_set is scenario.model_fields_set == set(type(scenario).model_fields)
        )
    assert scenario.model_copy(update={"id": "other"}).id == "other" and scenario.id != "other"


def test_cases_share_the_values_they_repeat() -> None:
    from agentprop._agents.project import load_project

    scenario = load_project(SUPPORTOPS).scenarios()[0]
    twin = scenario.model_validate_json(scenario.model_dump_json())  # equal, not the same objects
    assert twin.world is not scenario.world and twin.path is not scenario.path
    result = CheckResult(
        verdict="PASS",
        decided_by="fixed",
        runs=3,
        passes=3,
        pass_rate=1.0,
        interval=(0.5, 1.0),
        interval_exact=(0.4, 1.0),
        pass_hat_k={"1": 1.0},
    )
    a = case_from_check("a", "MFT", scenario, result, {})
    b = case_from_check(
        "b", "EXPLORE", twin, result.model_copy(update={"interval": (0.5, 1.0)}), {}
    )
    for name in ("world", "path", "branches", "expected_decisions", "pass_hat_k", "interval"):
        assert getattr(a, name) is getattr(b, name), name
    assert (
        a.world == scenario.world.model_dump(mode="json")
        and a.interval == (0.5, 1.0)
        and a.pass_hat_k == {"1": 1.0}
    )
    assert (
        a.model_dump_json().replace('"a"', '"b"').replace('"MFT"', '"EXPLORE"')
        == b.model_dump_json()
    )


def test_shared_values_share_the_parts_they_repeat_and_stay_equal() -> None:
    from agentprop._util.bulk import LONGEST_SHARED, shared

    def choices(k: int) -> dict[str, object]:  # built afresh each call: equal parts, other objects
        return {
            "lang": "en",
            "turns": [
                {
                    "template": 0,
                    "steps": [["politeness", [["choice", 2]]], ["urgency", [["choice", k]]]],
                }
            ],
            "world": [],
        }

    a, b = shared(choices(1)), shared(choices(5))
    assert a == choices(1) and b == choices(5) and a is not b
    assert a["turns"][0]["steps"][0] is b["turns"][0]["steps"][0]  # ["politeness", ...] held once
    assert a["world"] is b["world"]
    assert (
        shared({"n": 1}) is not shared({"n": "1"})
        and shared([1]) is not shared([1.0])
        and shared([True]) is not shared([1])
    )
    long = ["x" * LONGEST_SHARED]
    # too long to look up
    assert shared(list(long)) == long and shared(list(long)) is not shared(list(long))


def test_the_memo_packs_runs_against_the_first_one() -> None:
    import zlib

    memo = TrialMemo()
    traces = [
        Trace(
            case_id=f"case {i}",
            trial=i,
            turns=[Turn(index=0, user_message=f"where is my order O-{1000 + i}?")],
        )
        for i in range(20)
    ]
    for i, trace in enumerate(traces):
        memo.put(memo.key("input", "agent", i), trace)
    last = trace_json(traces[-1])
    # the runs of one suite repeat their keys and ids: against the first run, a run packs
    # in far less than alone
    assert len(memo._mem[memo.key("input", "agent", 19)]) < len(zlib.compress(last.encode(), 1)) / 2
    for i, trace in enumerate(traces):
        again = memo.get(memo.key("input", "agent", i))
        assert again is not None and trace_json(again) == trace_json(trace)
