"""benchmarks/shards.py: 1, 2 and 4 shards in separate processes against a loopback model, the
merge of synthesised records and the two ledgers, at tiny sizes; it writes the
keys issue #29 names."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "shards_benchmark", ROOT / "benchmarks" / "shards.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["shards_benchmark"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_shards_merge_and_ledgers_are_measured_and_written(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    redis = (
        importlib.util.find_spec("redis") is not None and shutil.which("redis-server") is not None
    )
    argv = [
        "--runs",
        "1",
        "--latency",
        "0.01",
        "--merge-records",
        "300",
        "--calls",
        "5",
        "--json",
        str(tmp_path / "s.json"),
    ]
    assert bench.main(argv) == (0 if redis else 3)
    figures = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    # each N's merge decided what the 1-shard run decided, with as many requests
    assert figures["checks_failed"] == []
    assert figures["speedup_4_shards"] == pytest.approx(
        figures["wall_s_1_shard"] / figures["wall_s_4_shards"]
    )
    assert figures["speedup_2_shards"] == pytest.approx(
        figures["wall_s_1_shard"] / figures["wall_s_2_shards"]
    )
    assert figures["merge_trial_records"] >= 300 and figures["merge_s"] > 0
    # fewer than 100,000 lines merged: not reported as that figure
    assert figures["merge_s_100k_records"] is None
    assert figures["ledger_us_per_call_file"] > 0 and all(
        figures[f"cpu_s_{n}"] > 0 for n in ("1_shard", "2_shards", "4_shards")
    )
    assert (figures["ledger_us_per_call_redis"] is not None) == redis
    out = capsys.readouterr().out
    assert "1 shard (baseline)" in out and "speedup" in out
    if not redis:
        assert "redis ledger:           not measured" in out


def test_synthesised_records_are_distinct_decisions_of_the_same_shards(
    bench: ModuleType, tmp_path: Path
) -> None:
    from agentprop._decide.records import ShardInfo

    shards = []
    for i in (1, 2):
        d = tmp_path / f"s{i}"
        d.mkdir()
        info = ShardInfo(index=i, count=2, spec_digest="s", settings_digest="t", seed=1)
        (d / "shard.json").write_text(info.model_dump_json(), encoding="utf-8")
        settings = {"mode": "fixed", "tau": 0.9, "alpha": 0.05, "beta": 0.1, "max_runs": 3}
        lines = [
            {"type": "decision", "schema": "agentprop.trials/1", "decision": 1, "case": f"C{i}",
             "input_digest": "x", "fingerprint": "f", "first_trial": 0, "shard": info.model_dump(),
             "settings": {**settings, "runs": 3, "unstable_floor": 0.5, "confidence": 0.95}},
            *({"type": "trial", "decision": 1, "case": f"C{i}", "trial": t, "status": "started",
               "passed": True} for t in range(3)),
            {"type": "end", "decision": 1, "case": f"C{i}", "verdict": "PASS",
             "decided_by": "fixed", "runs": 3, "passes": 3},
        ]  # fmt: skip
        (d / "trials.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8"
        )
        shards.append(d)
    assert bench.synthesise(shards, 10, tmp_path / "out") == 12  # 6 trial lines a copy, 2 copies
    from agentprop._pipeline.merge import merge_shards

    merged = merge_shards(sorted((tmp_path / "out").iterdir()))
    assert sorted(c.name for c in merged.cases) == ["C1#copy0", "C1#copy1", "C2#copy0", "C2#copy1"]
    assert merged.trials == 12
