"""``agentprop cases PROJECT``: the ids it lists are the ids ``agentprop run`` decides."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentprop._cli import main

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
QUICKSTART = ROOT / "examples" / "quickstart"


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_listed_ids_are_the_ids_a_run_decides(tmp_path: Path) -> None:
    kinds = "probe,boundary,dir,inv"
    code, out, _ = cli("cases", str(SUPPORTOPS), "--kinds", kinds, "--json")
    assert code == 0
    listed = json.loads(out)
    assert {c["kind"] for c in listed} == {"PROBE", "BOUNDARY", "DIR", "INV"}
    report = tmp_path / "r.json"
    cli(
        "run",
        str(SUPPORTOPS),
        "--kinds",
        kinds,
        "--profile",
        "smoke",
        "--corpus",
        "none",
        "--shrink-budget",
        "0",
        "--json",
        str(report),
    )
    ran = [c["id"] for c in json.loads(report.read_text())["cases"]]
    assert sorted(c["id"] for c in listed) == sorted(ran)
    assert len(ran) == len(set(ran)) > 30


def test_the_table_names_kind_path_and_what_each_case_expects() -> None:
    code, out, _ = cli("cases", str(QUICKSTART))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("quickstart_v1: 8 case(s) (2 MFT, 2 EXPLORE, 2 DIR, 2 INV)")
    assert lines[1:4] == [
        "MFT      END_ANSWERED<-N1_ROUTE",
        "         path: N1_ROUTE > END_ANSWERED",
        "         expects ANSWERED: 'Where is my order O-1001?'",
    ]
    assert "EXPLORE  EXPLORE END_ANSWERED<-N1_ROUTE ~0 … ~11" in lines
    assert "DIR      DIR intent: 'answerable' -> 'unclear' @N1_ROUTE#0" in lines
    assert "INV      INV END_CLARIFY<-N1_ROUTE" in lines


def test_kinds_select_like_run_and_a_bad_kind_is_a_usage_error() -> None:
    code, out, _ = cli("cases", str(QUICKSTART), "--kinds", "mft", "--json")
    assert code == 0
    assert [(c["kind"], c["id"]) for c in json.loads(out)] == [
        ("MFT", "END_ANSWERED<-N1_ROUTE"),
        ("MFT", "END_CLARIFY<-N1_ROUTE"),
    ]
    code, _, err = cli("cases", str(QUICKSTART), "--kinds", "mft,nope")
    assert code == 2 and "unknown case kind(s) nope" in err


def test_a_case_filter_that_matches_nothing_points_to_the_listing() -> None:
    code, _, err = cli("run", str(QUICKSTART), "--case", "NO_SUCH_CASE")
    assert code == 2 and "agentprop cases PROJECT" in err
