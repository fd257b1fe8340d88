"""Worlds: deterministic, schema-valid tool outputs, overrides, canaries, failures, handlers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agentprop._scenario.world import (
    CANARY_MARK,
    Failure,
    World,
    canary_label,
    get_path,
    set_path,
)
from agentprop._spec.load import load_spec
from agentprop._spec.model import Spec
from agentprop.errors import InvalidArgument, ToolError

SPECS = [
    f"{suite}/{v}" for suite in ("supportops", "expenseguard", "datainsights") for v in ("v1", "v2")
]


def _leaves(value: Any) -> list[Any]:
    """Every scalar inside a nested output, in a stable order."""
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _leaves(value[k])]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


# ----------------------------------------------------------------------------- defaults


@pytest.mark.parametrize("spec_rel", SPECS)
def test_default_outputs_validate_against_output_schemas(
    specsuite_dir: Path, spec_rel: str
) -> None:
    spec = load_spec(specsuite_dir / spec_rel / "spec.yaml")
    tools_with_output = [t for t in spec.tools if t.output_schema is not None]
    assert tools_with_output
    for seed in range(8):
        world = World(spec=spec, seed=seed)
        for tool in tools_with_output:
            out = world.default_output(tool.name)
            validator = jsonschema.validators.validator_for(tool.output_schema)(tool.output_schema)
            errors = [e.message for e in validator.iter_errors(out)]
            assert errors == [], f"{spec.spec_id}.{tool.name} seed {seed}: {errors} in {out}"


def test_same_seed_same_outputs(supportops_spec: Spec) -> None:
    for tool in supportops_spec.action_tools:
        a = World(spec=supportops_spec, seed=7).default_output(tool.name)
        b = World(spec=supportops_spec, seed=7).default_output(tool.name)
        assert a == b


def test_different_seeds_vary_strings_and_numbers(supportops_spec: Spec) -> None:
    outs = [World(spec=supportops_spec, seed=s).default_output("get_account") for s in range(5)]
    ids = {o["account_id"] for o in outs}
    days = {o["orders"][0]["days_since_created"] for o in outs}
    assert len(ids) >= 4 and len(days) >= 3
    # booleans and enums stay on the happy path whatever the seed
    for s in range(5):
        w = World(spec=supportops_spec, seed=s)
        assert w.default_output("verify_identity")["verified"] is True
        assert w.default_output("cancel_order")["status"] == "canceled"
        assert w.default_output("get_plan_rules")["can_cancel"] is True


def test_tools_of_one_world_are_independent_of_call_order(supportops_spec: Spec) -> None:
    w1 = World(spec=supportops_spec, seed=3)
    first = w1.default_output("get_plan_rules")
    w2 = World(spec=supportops_spec, seed=3)
    w2.default_output("get_account")
    w2.default_output("verify_identity")
    assert w2.default_output("get_plan_rules") == first


def test_outputs_are_stable_across_processes(supportops_example_dir: Path) -> None:
    code = (
        "import json,sys\n"
        "from agentprop._spec.load import load_spec\n"
        "from agentprop._scenario.world import World\n"
        f"s = load_spec({str(supportops_example_dir / 'spec.yaml')!r})\n"
        "print(json.dumps(World(spec=s, seed=11).default_output('get_account'), sort_keys=True))\n"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": h},
        ).stdout
        for h in ("1", "2")
    }
    assert len(outs) == 1
    assert json.loads(outs.pop())["account_id"]


def test_returned_outputs_are_copies(supportops_spec: Spec) -> None:
    w = World(spec=supportops_spec, seed=1)
    out = w.call("get_account", {"account_id": "A1"})
    out["orders"].clear()
    out["plan_id"] = "mutated"
    again = w.call("get_account", {"account_id": "A1"})
    assert again["orders"] and again["plan_id"] != "mutated"


# ----------------------------------------------------------------------------- overrides


def test_overrides_by_dotted_path(supportops_spec: Spec) -> None:
    base = World(spec=supportops_spec, seed=2).default_output("get_account")
    w = World(
        spec=supportops_spec,
        seed=2,
        overrides={
            "get_account": {
                "orders[0].days_since_created": 45,
                "address": {"city": "Springfield"},
                "plan_id": "PLAN-X",
            },
            "get_plan_rules": {"can_cancel": False},
        },
    )
    out = w.default_output("get_account")
    assert out["orders"][0]["days_since_created"] == 45
    assert out["orders"][0]["order_id"] == base["orders"][0]["order_id"]  # siblings kept
    assert out["address"]["city"] == "Springfield"
    # nested mapping merged, not replaced
    assert out["address"]["line1"] == base["address"]["line1"]
    assert out["plan_id"] == "PLAN-X"
    assert w.default_output("get_plan_rules")["can_cancel"] is False
    # the override does not leak into a world without it
    assert (
        World(spec=supportops_spec, seed=2).default_output("get_plan_rules")["can_cancel"] is True
    )


def test_override_replaces_a_whole_list(supportops_spec: Spec) -> None:
    orders = [{"order_id": "O-1", "status": "shipped"}, {"order_id": "O-2", "status": "processing"}]
    w = World(spec=supportops_spec, overrides={"get_account": {"orders": orders}})
    out = w.call("get_account", {"account_id": "A1"})
    assert out["orders"] == orders
    orders.append({"order_id": "O-3"})  # the world keeps its own copy
    assert len(w.call("get_account", {"account_id": "A1"})["orders"]) == 2


def test_set_and_get_path() -> None:
    target: dict[str, Any] = {}
    set_path(target, "a.b[1].c", 5)
    assert target == {"a": {"b": [{}, {"c": 5}]}}
    assert get_path(target, "a.b[1].c") == 5
    set_path(target, "a.b[1].c", 6)
    assert get_path(target, ["a", "b", 1, "c"]) == 6
    with pytest.raises((KeyError, IndexError)):
        get_path(target, "a.b[5].c")


# ----------------------------------------------------------------------------- canaries

PII = {"get_account": ["pii.ssn", "pii.email"]}


def test_canaries_are_planted_in_pii_fields(supportops_spec: Spec) -> None:
    w = World(spec=supportops_spec, seed=4, pii=PII, canary_nonce="run-1")
    out = w.call("get_account", {"account_id": "A1"})
    assert re.fullmatch(r"SSN_CANARY_[0-9a-f]{8}", out["pii"]["ssn"])
    assert re.fullmatch(r"EMAIL_CANARY_[0-9a-f]{8}", out["pii"]["email"])
    assert w.canaries == {
        "get_account.pii.ssn": out["pii"]["ssn"],
        "get_account.pii.email": out["pii"]["email"],
    }
    # fields not marked PII keep their generated values
    assert "CANARY" not in out["pii"]["dob"]
    assert "CANARY" not in json.dumps(
        w.call("verify_identity", {"account_id": "A1", "last4": "1", "zip": "2"})
    )


def test_the_canary_marker_is_spelled_in_one_module(supportops_spec: Spec) -> None:
    """The world plants canaries and the judges read them (a leak's label, a grounding that is
    never offered as a near miss) by one definition: no other module spells the marker."""
    package = Path(__file__).resolve().parents[1] / "agentprop"
    spelled = sorted(
        str(p.relative_to(package)) for p in package.rglob("*.py") if "_CANARY_" in p.read_text()
    )
    assert spelled == [str(Path("_scenario") / "world.py")]
    w = World(spec=supportops_spec, seed=4, pii=PII)
    ssn = w.canaries["get_account.pii.ssn"]
    assert CANARY_MARK in ssn and canary_label(ssn) == "SSN"


def test_canaries_unique_per_nonce_and_stable_for_one(supportops_spec: Spec) -> None:
    values = [
        World(spec=supportops_spec, seed=4, pii=PII, canary_nonce=f"n{i}").canaries[
            "get_account.pii.ssn"
        ]
        for i in range(50)
    ]
    assert len(set(values)) == 50
    again = World(spec=supportops_spec, seed=4, pii=PII, canary_nonce="n0").canaries[
        "get_account.pii.ssn"
    ]
    assert again == values[0]
    w = World(spec=supportops_spec, seed=4, pii=PII, canary_nonce="n0")
    assert w.canaries["get_account.pii.ssn"] != w.canaries["get_account.pii.email"].replace(
        "EMAIL", "SSN"
    )


def test_canaries_win_over_overrides(supportops_spec: Spec) -> None:
    w = World(
        spec=supportops_spec, pii=PII, overrides={"get_account": {"pii": {"ssn": "123-45-6789"}}}
    )
    assert w.default_output("get_account")["pii"]["ssn"].startswith("SSN_CANARY_")


# --------------------------------------------------------------------------- sharing between worlds


def _reference_output(spec_path: Path, tool: str, **world: Any) -> Any:
    """The output a world on a freshly loaded spec gives (nothing remembered from other worlds)."""
    return World(spec=load_spec(spec_path), **world).default_output(tool)


def test_outputs_shared_between_worlds_stay_isolated(supportops_example_dir: Path) -> None:
    path = supportops_example_dir / "spec.yaml"
    spec = load_spec(path)
    a = World(spec=spec, seed=5, pii=PII, canary_nonce="a")
    first = a.call("get_account", {"account_id": "A1"})
    first["orders"].clear()
    first["pii"]["email"] = "leaked@example.com"
    first["plan_id"] = "mutated"
    b = World(spec=spec, seed=5, pii=PII, canary_nonce="b")
    assert b.call("get_account", {"account_id": "A1"}) == _reference_output(
        path, "get_account", seed=5, pii=PII, canary_nonce="b"
    )
    assert a.call("get_account", {"account_id": "A1"}) == _reference_output(
        path, "get_account", seed=5, pii=PII, canary_nonce="a"
    )
    # each world plants its own canaries in the shared output
    assert a.default_output("get_account")["pii"]["ssn"] == a.canaries["get_account.pii.ssn"]
    assert (
        b.default_output("get_account")["pii"]["ssn"]
        == b.canaries["get_account.pii.ssn"]
        != a.canaries["get_account.pii.ssn"]
    )
    assert "CANARY" not in json.dumps(World(spec=spec, seed=5).default_output("get_account")["pii"])


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"plan_id": "PLAN-X"},
        {"orders": [{"order_id": "O-9"}], "orders[0].status": "held"},
        {"orders[0].status": "held", "orders": [{"order_id": "O-9"}]},  # same pairs, other order
        {"orders[0].days_since_created": 1},
        {"orders[0].days_since_created": True},  # == 1 in Python, not in JSON
        {"orders[0].days_since_created": 1.0},
    ],
)
def test_overrides_are_per_world_whatever_was_computed_before(
    supportops_example_dir: Path, overrides: dict[str, Any]
) -> None:
    path = supportops_example_dir / "spec.yaml"
    spec = load_spec(path)
    for other in (
        {},
        {"plan_id": "PLAN-X"},
        {"orders[0].days_since_created": 1},
        {"orders[0].status": "held", "orders": [{"order_id": "O-9"}]},
    ):
        World(spec=spec, seed=9, overrides={"get_account": other}).default_output("get_account")
    out = World(spec=spec, seed=9, overrides={"get_account": overrides}).default_output(
        "get_account"
    )
    expected = _reference_output(path, "get_account", seed=9, overrides={"get_account": overrides})
    # types too: 1, true, 1.0
    assert json.dumps(out, sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_argument_checks_are_remembered_exactly(specsuite_dir: Path) -> None:
    spec = load_spec(specsuite_dir / "expenseguard" / "v1" / "spec.yaml")
    args = {"from_currency": "EUR", "to_currency": "USD", "date": "2026-01-02"}
    w = World(spec=spec)
    for _ in range(2):  # the second time from what the first check found
        for amount in (1, 1.0, 2.5):
            w.call("fx_convert", {**args, "amount": amount})
        for amount in (True, "1"):  # True == 1 in Python, but a boolean is not a number
            with pytest.raises(ToolError) as info:
                w.call("fx_convert", {**args, "amount": amount})
            assert info.value.kind == "invalid_arguments" and "amount" in info.value.message
    assert w.call_count("fx_convert") == 6


# ----------------------------------------------------------------------------- failures


def test_failure_on_every_call(supportops_spec: Spec) -> None:
    w = World(spec=supportops_spec, failures=[Failure("get_account", "timeout")])
    for _ in range(3):
        with pytest.raises(ToolError) as info:
            w.call("get_account", {"account_id": "A1"})
        assert info.value.kind == "timeout"
        assert info.value.message
    assert w.call_count("get_account") == 3
    # other tools are untouched
    assert w.call("get_plan_rules", {"plan_id": "P"})["plan_id"]


def test_failure_on_specific_calls(supportops_spec: Spec) -> None:
    w = World(
        spec=supportops_spec, failures=[Failure("cancel_order", "rate_limited", calls=(2, 3))]
    )
    outcomes = []
    for _ in range(4):
        try:
            w.call("cancel_order", {"order_id": "O-1"})
            outcomes.append("ok")
        except ToolError as exc:
            outcomes.append(exc.kind)
    assert outcomes == ["ok", "rate_limited", "rate_limited", "ok"]


def test_failure_custom_message(supportops_spec: Spec) -> None:
    w = World(
        spec=supportops_spec,
        failures=[Failure("create_ticket", "timeout", message="ticketing is down")],
    )
    with pytest.raises(ToolError, match="ticketing is down"):
        w.call("create_ticket", {"category": "c", "summary": "s"})


def test_failure_modes_are_per_tool(supportops_spec: Spec) -> None:
    w = World(
        spec=supportops_spec,
        failures=[
            Failure("get_account", "timeout", calls=(1,)),
            Failure("get_account", "not_found", calls=(2,)),
        ],
    )
    kinds = []
    for _ in range(2):
        with pytest.raises(ToolError) as info:
            w.call("get_account", {"account_id": "A1"})
        kinds.append(info.value.kind)
    assert kinds == ["timeout", "not_found"]


# ----------------------------------------------------------------------------- arguments and tools


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"account_id": "A1", "last4": "4242"},
        {"account_id": "A1", "last4": 4242, "zip": "94107"},
    ],
)
def test_invalid_arguments(supportops_spec: Spec, args: dict[str, Any]) -> None:
    w = World(spec=supportops_spec)
    with pytest.raises(ToolError) as info:
        w.call("verify_identity", args)
    assert info.value.kind == "invalid_arguments"
    assert "verify_identity" in info.value.message
    assert w.call_count("verify_identity") == 0  # a refused call is not counted


def test_invalid_nested_argument_names_the_field(supportops_spec: Spec) -> None:
    w = World(spec=supportops_spec)
    with pytest.raises(ToolError) as info:
        w.call(
            "update_address",
            {"account_id": "A1", "new_address": {"line1": "x", "city": "y", "postal_code": "z"}},
        )
    assert info.value.kind == "invalid_arguments"
    assert "new_address" in info.value.message and "country" in info.value.message


def test_argument_validation_can_be_disabled(supportops_spec: Spec) -> None:
    w = World(spec=supportops_spec, validate_args=False)
    assert "verified" in w.call("verify_identity", {})


def test_unknown_tool(supportops_spec: Spec) -> None:
    with pytest.raises(ToolError) as info:
        World(spec=supportops_spec).call("refund_order", {"order_id": "O-1"})
    assert info.value.kind == "unknown_tool"
    assert "refund_order" in info.value.message and "cancel_order" in info.value.message


def test_handlers_get_arguments_and_keep_state(supportops_spec: Spec) -> None:
    seen: list[tuple[dict[str, Any], World]] = []

    def ticket(args: dict[str, Any], world: World) -> dict[str, Any]:
        seen.append((args, world))
        world.state["n"] = world.state.get("n", 0) + 1
        if args["category"] == "bad":
            raise ToolError("timeout", "handler says no")
        return {"ticket_id": f"T-{world.state['n']}"}

    w = World(spec=supportops_spec, handlers={"create_ticket": ticket})
    assert w.call("create_ticket", {"category": "a", "summary": "s"}) == {"ticket_id": "T-1"}
    assert w.call("create_ticket", {"category": "b", "summary": "s"}) == {"ticket_id": "T-2"}
    with pytest.raises(ToolError, match="handler says no"):
        w.call("create_ticket", {"category": "bad", "summary": "s"})
    assert [a["category"] for a, _ in seen] == ["a", "b", "bad"]
    assert all(world is w for _, world in seen)
    assert w.state["n"] == 3
    # a fresh world starts with fresh state
    assert World(spec=supportops_spec, handlers={"create_ticket": ticket}).state == {}


def test_failures_take_precedence_over_handlers(supportops_spec: Spec) -> None:
    calls: list[int] = []
    w = World(
        spec=supportops_spec,
        handlers={"create_ticket": lambda args, world: calls.append(1) or {"ticket_id": "T"}},
        failures=[Failure("create_ticket", "timeout", calls=(1,))],
    )
    with pytest.raises(ToolError):
        w.call("create_ticket", {"category": "a", "summary": "s"})
    assert calls == []
    assert w.call("create_ticket", {"category": "a", "summary": "s"}) == {"ticket_id": "T"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"overrides": {"refund_order": {"x": 1}}},
        {"failures": [Failure("refund_order", "timeout")]},
        {"handlers": {"refund_order": lambda a, w: None}},
        {"pii": {"refund_order": ["ssn"]}},
    ],
    ids=["overrides", "failures", "handlers", "pii"],
)
def test_world_rejects_unknown_tools(supportops_spec: Spec, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument) as info:
        World(spec=supportops_spec, **kwargs)
    assert "refund_order" in str(info.value) and "cancel_order" in str(info.value)


def test_world_rejects_unknown_failure_mode(supportops_spec: Spec) -> None:
    with pytest.raises(InvalidArgument) as info:
        World(spec=supportops_spec, failures=[Failure("create_ticket", "rate_limited")])
    # create_ticket declares only `timeout`
    assert "rate_limited" in str(info.value) and "timeout" in str(info.value)
    assert isinstance(info.value, TypeError)  # InvalidArgument is a TypeError, as in Hypothesis
