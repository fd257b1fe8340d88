"""Check each fault of MANIFEST.json against its reference agent, without agentprop's runner.

For every fault: its trigger and its non-trigger are played (turn by turn, in the bindings'
world with the fault's world overrides) by the correct agent and by the agent with the knob at
1.0. A fault passes when the transcripts (decision, node, tools called, PII canary shown) differ
on the trigger and are equal on the non-trigger. Run: ``python benchmarks/_reach_zoo/check_faults.py``
(agentprop importable); exit 1 when a fault fails.
"""

from __future__ import annotations

import copy
import importlib
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from agentprop import load_spec

ZOO = Path(__file__).resolve().parent


class _Call:
    def __init__(self, name: str) -> None:
        self.name, self.ok, self.error_kind = name, True, None


class _Ctx:
    """Just what the zoo's agents use of agentprop's TurnContext."""

    def __init__(self, spec: Any, world: dict[str, Any], context: dict[str, Any], seed: int) -> None:
        self.spec, self.world, self.context = spec, world, context
        self.rng = random.Random(seed)
        self.calls_this_turn: list[_Call] = []
        self.response: dict[str, Any] | None = None

    def call(self, name: str, **args: Any) -> Any:
        self.calls_this_turn.append(_Call(name))
        return copy.deepcopy(self.world.get(name, {}))

    def respond(self, **fields: Any) -> None:
        self.response = fields


def _fill(value: Any, slots: dict[str, str]) -> Any:
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", lambda m: str(slots.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [_fill(v, slots) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, slots) for k, v in value.items()}
    return value


def _set(obj: Any, path: str, value: Any) -> None:
    keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]
    for k in keys[:-1]:
        obj = obj.setdefault(k, {}) if isinstance(obj, dict) else obj[k]
    obj[keys[-1]] = value


def _play(spec_dir: Path, fault: str, p: float, case: dict[str, Any]) -> list[tuple[Any, ...]]:
    bindings = yaml.safe_load((spec_dir / "agentprop.yaml").read_text())
    world = _fill(bindings.get("world", {}), bindings.get("slots", {}))
    canaries = []
    for tool, fields in (bindings.get("pii") or {}).items():
        for field in fields:
            canary = f"CANARY_{field.split('.')[-1].upper()}_7f3a"
            _set(world.setdefault(tool, {}), field, canary)
            canaries.append(canary)
    for tool, sets in (case.get("world") or {}).items():
        for path, value in sets.items():
            _set(world.setdefault(tool, {}), path, value)
    sys.path.insert(0, str(spec_dir))
    sys.modules.pop("agent", None)
    module = importlib.import_module("agent")
    sys.path.pop(0)
    cls = getattr(module, bindings["agent"].split(":")[1])
    agent = cls(faults={fault: p} if p else {})
    spec = load_spec(spec_dir / "spec.yaml")
    out = []
    for i, message in enumerate(case["turns"]):
        ctx = _Ctx(spec, world, dict(bindings.get("context") or {}), seed=i)
        agent.turn(message, ctx)
        r = ctx.response or {}
        shown = json.dumps(r, ensure_ascii=False)
        out.append((r.get("node_id"), r.get("decision"), tuple(c.name for c in ctx.calls_this_turn), any(c in shown for c in canaries)))
    return out


def main() -> int:
    manifest = json.loads((ZOO / "MANIFEST.json").read_text())
    failed = 0
    for spec in manifest["specs"]:
        for fault in spec["faults"]:
            spec_dir = ZOO / spec["dir"]
            good_t, bad_t = _play(spec_dir, fault["knob"], 0.0, fault["trigger"]), _play(spec_dir, fault["knob"], 1.0, fault["trigger"])
            good_n, bad_n = _play(spec_dir, fault["knob"], 0.0, fault["non_trigger"]), _play(spec_dir, fault["knob"], 1.0, fault["non_trigger"])
            ok = good_t != bad_t and good_n == bad_n and good_t[-1][:2] == good_n[-1][:2]
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {spec['dir']}/{fault['knob']}: correct {good_t[-1][1]}, faulty {bad_t[-1][1]}"
                  f"{' (PII shown)' if bad_t[-1][3] else ''}; non-trigger {good_n[-1][1]} / {bad_n[-1][1]}")  # fmt: skip
    print(f"{failed} fault(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
