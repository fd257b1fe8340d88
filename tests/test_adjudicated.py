"""The benchmarks' reading of blind adjudications: frozen files only, exact matches only, and a
clean-agent failure nobody judged still counts as a false alarm."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks._support.adjudicated import (
    ADJUDICATION,
    RETIRED,
    AdjudicationError,
    Adjudications,
    failure_from,
    failure_of,
    failure_record,
    world_key,
)


def _write(folder: Path, name: str, groups: list[dict[str, object]]) -> Path:
    path = folder / name
    path.write_text(json.dumps({"groups": groups}), encoding="utf-8")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (folder / f"FREEZE-{path.stem}.sha256").write_text(f"{digest}  {name}\n", encoding="utf-8")
    return path


def _member(seed: int, case: str, turns: list[str], failure: str) -> dict[str, object]:
    return {"seed": seed, "case": case, "turns": turns, "failure": failure}


TURNS = ["Refill my prescription, DOB 14 June 1979", "Yes"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    _write(
        tmp_path,
        "clean_failures.json",
        [
            {
                "spec": "pharmacy",
                "verdict": "agent_error",
                "pattern": "date of birth not in ISO form",
                "members": [_member(0, "EXPLORE A ~1", TURNS, "decision_tree.N2: turn 1 ...")],
            },
            {
                "spec": "pharmacy",
                "verdict": "tester_error_input",
                "pattern": "the intent word is unreadable",
                "members": [_member(1, "EXPLORE B ~0", ["Rfeil it"], "decision_tree.N1: ...")],
            },
        ],
    )
    return tmp_path


def test_only_the_exact_failure_judged_is_a_finding(folder: Path) -> None:
    judged = Adjudications.load(folder)
    same = failure_of("pharmacy", 0, "EXPLORE A ~1", TURNS, ["decision_tree.N2"])
    found = judged.verdict(same)
    assert found is not None and found.verdict == "agent_error"
    others = [
        failure_of("pharmacy", 0, "EXPLORE A ~1", [TURNS[0], "Yes please"], ["decision_tree.N2"]),
        failure_of("pharmacy", 1, "EXPLORE A ~1", TURNS, ["decision_tree.N2"]),  # another seed
        failure_of("pharmacy", 0, "EXPLORE A ~1", TURNS, ["policies.P1"]),  # another clause
        failure_of("travel", 0, "EXPLORE A ~1", TURNS, ["decision_tree.N2"]),  # another spec
    ]
    assert [judged.verdict(f) for f in others] == [None, None, None, None]
    tester = failure_of("pharmacy", 1, "EXPLORE B ~0", ["Rfeil it"], ["decision_tree.N1", None])
    tally = judged.tally([same, *others, tester])
    assert (tally.failures, tally.agent_errors, tally.tester_errors, tally.unadjudicated) == (
        6,
        1,
        1,
        4,
    )
    # a tester error and every failure nobody judged are false alarms
    assert tally.false_alarms == 5
    assert "the intent word is unreadable" in tally.tester_error_cases[0]


def test_a_doubt_from_any_adjudicator_makes_the_failure_a_false_alarm(folder: Path) -> None:
    # a later adjudicator judges the same input a tester error: the doubt wins, whichever file
    # sorts first
    _write(
        folder,
        "clean_failures_again.json",
        [
            {
                "spec": "pharmacy",
                "verdict": "ambiguous",
                "pattern": "the date could be read either way",
                "members": [_member(0, "EXPLORE A ~1", TURNS, "decision_tree.N2: turn 1 ...")],
            }
        ],
    )
    judged = Adjudications.load(folder)
    same = failure_of("pharmacy", 0, "EXPLORE A ~1", TURNS, ["decision_tree.N2"])
    found = judged.verdict(same)
    assert found is not None and found.verdict == "ambiguous"
    assert judged.tally([same]).false_alarms == 1


def test_a_verdict_given_in_a_faults_world_judges_that_world_only(folder: Path) -> None:
    """The same input in another world (a fault's overrides over the bindings' world) is
    another case: its expectation may follow there and not here, or the other way round."""
    world = {"get_claim": {"amount": 2400}}
    member = {**_member(0, "EXPLORE C ~2", TURNS, "decision_tree.N5: ..."), "world": world}
    _write(
        folder,
        "clean_failures_world.json",
        [{"spec": "pharmacy", "verdict": "agent_error", "pattern": "p", "members": [member]}],
    )
    judged = Adjudications.load(folder)
    plain = failure_of("pharmacy", 0, "EXPLORE C ~2", TURNS, ["decision_tree.N5"])
    there = replace(plain, world=world_key(world))
    assert judged.verdict(plain) is None
    found = judged.verdict(there)
    assert found is not None and found.verdict == "agent_error"
    # the record a benchmark's --json keeps carries the world, and reads back the same failure
    assert failure_from(json.loads(json.dumps(failure_record(there)))) == there
    assert "world" not in failure_record(plain)
    assert judged.verdict(replace(there, world=world_key({"get_claim": {"amount": 1}}))) is None


def test_an_edited_or_unfrozen_adjudication_is_refused(folder: Path) -> None:
    path = folder / "clean_failures.json"
    path.write_text(path.read_text(encoding="utf-8").replace("agent_error", "ambiguous"))
    with pytest.raises(AdjudicationError, match="never edited"):
        Adjudications.load(folder)
    _write(folder, "clean_failures.json", [])
    (folder / "clean_failures_more.json").write_text('{"groups": []}', encoding="utf-8")
    with pytest.raises(AdjudicationError, match="only once frozen"):
        Adjudications.load(folder)


def test_a_retired_adjudication_judges_nothing(folder: Path) -> None:
    same = failure_of("pharmacy", 0, "EXPLORE A ~1", TURNS, ["decision_tree.N2"])
    judged = Adjudications.load(folder, retired={"clean_failures.json": "another world now"})
    assert judged.verdict(same) is None and judged.files == []
    # the project's retired files are still there, frozen, as the record of what they judged
    for name in RETIRED:
        assert (ADJUDICATION / name).exists()
        assert name not in Adjudications.load(ADJUDICATION).files


def test_the_project_adjudications_hold_their_freeze() -> None:
    judged = Adjudications.load(ADJUDICATION)
    assert "clean_failures.json" in judged.files and judged.index
    # every verdict is one of the four the method defines
    for name in judged.files:
        for group in json.loads((ADJUDICATION / name).read_text(encoding="utf-8"))["groups"]:
            assert group["verdict"] in {
                "agent_error",
                "tester_error_input",
                "tester_error_expectation",
                "ambiguous",
            }


def test_the_list_to_judge_holds_exactly_the_failures_no_verdict_covers(tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = tmp_path / "adj"
    folder.mkdir()
    failure = "decision_tree.N2_VERIFY: turn 2 decided ASK_IDENTITY"
    _write(
        folder,
        "clean_failures_x.json",
        [
            {
                "spec": "pharmacy_refill",
                "verdict": "agent_error",
                "members": [_member(0, "A", TURNS, failure)],
            }
        ],
    )
    case = {"verdict": "FAIL", "failures": [{"clause": "decision_tree.N2_VERIFY"}]}
    report = {
        "cases": [
            {**case, "id": "A", "messages": TURNS},  # judged
            {**case, "id": "A", "messages": [TURNS[0], "yes"]},  # another input: not judged
            {**case, "id": "B", "messages": TURNS},  # another case: not judged
            {"verdict": "PASS", "id": "C", "messages": TURNS, "failures": []},
        ]
    }
    (tmp_path / "r.json").write_text(json.dumps(report), encoding="utf-8")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "_support" / "unjudged.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            "--spec",
            "pharmacy_refill",
            "--seed",
            "0",
            str(tmp_path / "r.json"),
            "--adjudications",
            str(folder),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    listed = json.loads(done.stdout)
    assert [(f["case"], f["turns"]) for f in listed] == [("A", [TURNS[0], "yes"]), ("B", TURNS)]
    assert "3 failing case(s), 1 already judged, 2 to judge" in done.stderr
