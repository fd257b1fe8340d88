"""Sharded runs (agentprop._pipeline.shards, ``agentprop run --shard i/N``)."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._decide.records import SHARD_FILE, DecisionStart, ShardInfo, read_records
from agentprop._pipeline.shards import Shard, parse_shard, shard_of
from agentprop.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
RUN = ["run", str(QUICKSTART), "--corpus", "none", "--seed", "3", "--explore", "0"]


def test_parse_shard_takes_i_of_n_counting_from_one() -> None:
    assert (
        parse_shard("2/3") == Shard(2, 3)
        and parse_shard(" 1 / 1 ") == Shard(1, 1)
        and str(Shard(2, 3)) == "2/3"
    )
    for bad, why in (
        ("2", "not of the form i/N"),
        ("0/3", "shard 0 is not one of 1..3"),
        ("4/3", "shard 4 is not one of 1..3"),
        ("1/0", "at least 1"),
    ):
        with pytest.raises(InputError, match=why):
            parse_shard(bad)


@pytest.mark.parametrize("bad", ["0/3", "3", "a/b", "5/4"])
def test_a_bad_shard_is_a_usage_error_naming_the_fix(bad: str) -> None:
    err = io.StringIO()
    assert main([*RUN, "--shard", bad], out=io.StringIO(), err=err) == 2
    assert (
        f"--shard {bad}" in err.getvalue().replace(repr(bad), bad)
        and "fix: write" in err.getvalue()
    )


def test_shards_partition_the_cases_evenly_per_kind_and_keep_them_as_cases_are_added() -> None:
    kinds = {"MFT": 600, "PROBE": 900, "DIR": 300, "BOUNDARY": 150}
    ids = [f"{kind} case {k}" for kind, n in kinds.items() for k in range(n)]
    for count in (2, 3, 4):
        shards = [Shard(i, count) for i in range(1, count + 1)]
        assert all(sum(s.keeps(case) for s in shards) == 1 for case in ids)  # disjoint and complete
        for kind, n in kinds.items():
            per_shard = Counter(
                shard_of(case, count) for case in ids if case.startswith(kind + " ")
            )
            assert set(per_shard) == set(range(1, count + 1))
            assert all(abs(m - n / count) <= 0.2 * n / count for m in per_shard.values()), (
                kind,
                count,
                per_shard,
            )
    before = {case: shard_of(case, 4) for case in ids}
    grown = [*ids, *(f"MFT new {k}" for k in range(100))]
    assert {case: shard_of(case, 4) for case in grown if case in before} == before


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = main(argv, out=out, err=io.StringIO())
    return code, out.getvalue()


def test_three_shards_decide_each_case_of_the_unsharded_run_once_alike(tmp_path: Path) -> None:
    code, text = _run([*RUN, "--json", str(tmp_path / "all.json")])
    assert code == 0, text
    whole = {
        c["id"]: (c["verdict"], c["runs"])
        for c in json.loads((tmp_path / "all.json").read_text())["cases"]
    }
    seen: dict[str, tuple[str, int]] = {}
    infos: list[ShardInfo] = []
    for i in (1, 2, 3):
        report, records = tmp_path / f"s{i}.json", tmp_path / f"r{i}"
        code, text = _run(
            [*RUN, "--shard", f"{i}/3", "--json", str(report), "--records", str(records)]
        )
        # a shard's partial coverage is not INCOMPLETE: the merge reports coverage
        assert code == 0, text
        cases = {
            c["id"]: (c["verdict"], c["runs"]) for c in json.loads(report.read_text())["cases"]
        }
        assert not set(cases) & set(seen)
        seen.update(cases)
        info = ShardInfo.model_validate_json((records / SHARD_FILE).read_text())
        assert all(r.shard == info for r in read_records(records) if isinstance(r, DecisionStart))
        infos.append(info)
    assert seen == whole
    assert [(s.index, s.count) for s in infos] == [(1, 3), (2, 3), (3, 3)]
    assert len({(s.spec_digest, s.settings_digest, s.seed) for s in infos}) == 1


def test_the_settings_digest_changes_with_the_settings(tmp_path: Path) -> None:
    digests = []
    for extra in ([], ["--max-runs-per-case", "50"]):
        code, text = _run(
            [
                *RUN,
                "--kinds",
                "mft",
                "--shard",
                "1/2",
                "--records",
                str(tmp_path / str(len(digests))),
                *extra,
            ]
        )
        assert code == 0, text
        digests.append(
            ShardInfo.model_validate_json(
                (tmp_path / str(len(digests)) / SHARD_FILE).read_text()
            ).settings_digest
        )
    assert digests[0] != digests[1]


def test_shards_outside_ci_explore_the_inputs_of_their_seed_not_a_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # outside CI a run draws a new explore seed; N shards drawing N seeds could not be merged
    import argparse

    from agentprop._cli.run import explore_seed

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("AGENTPROP_SEED", raising=False)
    seeds = {
        explore_seed(argparse.Namespace(explore_seed=None, seed=0, shard=f"{i}/3"))
        for i in (1, 2, 3)
    }
    assert seeds == {0}
    unsharded = argparse.Namespace(explore_seed=None, seed=0, shard=None)
    assert explore_seed(unsharded) > 0 and "new seed" in unsharded.explore_seed_source
