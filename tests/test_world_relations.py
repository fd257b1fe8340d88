"""Related tool-output fields stay consistent when exploration varies one of them: a date and
the days derived from it, a total and its items, a count and its list; a past date never moves
past today; and the bundled and zoo worlds never give a contradictory world."""

from __future__ import annotations

import io
import json
import random
import re
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

import agentprop
from agentprop._decide.choices import Choices, ChoiceSpace, TurnChoice, WorldChoice, world_fields
from agentprop._spec.bindings import parse_field_path
from agentprop._spec.relations import resolve, world_relations
from agentprop.errors import BindingsError

ROOT = Path(__file__).resolve().parents[1]
TODAY = date(2026, 12, 3)

_ORDER_FIELDS = {
    "shipped_on": {"type": "string"},
    "days_since_shipped": {"type": "integer"},
    "items": {
        "type": "array",
        "items": {"type": "object", "properties": {"price": {"type": "number"}}},
    },
    "total": {"type": "number"},
    "item_count": {"type": "integer"},
    "n": {"type": "integer"},
}
_WORLD = {
    "order_id": "{order_id}",
    "status": "shipped",
    "shipped_on": "2026-11-26",
    "days_since_shipped": 7,
    "items": [{"price": 10.0}, {"price": 15.5}],
    "total": 25.5,
    "item_count": 2,
    "n": 4,
}


def _project(tmp_path: Path, **bindings: Any) -> agentprop.Project:
    """The quickstart with a get_order output whose fields are related."""
    src = ROOT / "examples" / "quickstart"
    for name in ("spec.yaml", "agent.py", "tools.json"):
        shutil.copy(src / name, tmp_path / name)
    spec = yaml.safe_load((src / "spec.yaml").read_text())
    tool = next(t for t in spec["tools"] if t["name"] == "get_order")
    tool["output_schema"]["properties"].update(_ORDER_FIELDS)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    b = yaml.safe_load((src / "agentprop.yaml").read_text())
    b["context"] = {"today": TODAY.isoformat()}
    b["world"]["get_order"] = dict(_WORLD)
    b.update(bindings)
    (tmp_path / "agentprop.yaml").write_text(yaml.safe_dump(b, sort_keys=False))
    return agentprop.load_project(tmp_path)


def _order(space: ChoiceSpace, choices: Choices) -> dict[str, Any]:
    return resolve(space.render(choices).world.overrides["get_order"])


def _consistent(order: dict[str, Any], today: date = TODAY) -> None:
    shipped = date.fromisoformat(order["shipped_on"])
    assert shipped <= today, order  # a past date never moves past today
    assert order["days_since_shipped"] == (today - shipped).days, order
    assert order["total"] == pytest.approx(sum(i["price"] for i in order["items"])), order
    assert order["item_count"] == len(order["items"]), order


def test_relations_holding_on_the_bound_world_are_found(tmp_path: Path) -> None:
    rel = world_relations(_project(tmp_path).bindings)
    assert rel.today == TODAY and rel.today_from == "context.today"
    assert {r.describe() for r in rel.relations} == {
        "get_order.days_since_shipped = days_since(shipped_on)",
        "get_order.total = total_of(items[].price)",
        "get_order.item_count = count_of(items)",
    }  # n (4) is no day count of shipped_on (7 days ago): not related


def test_every_drawn_world_keeps_its_related_fields_consistent(tmp_path: Path) -> None:
    project = _project(tmp_path)
    scenario = project.scenarios()[0]
    space = ChoiceSpace(project, scenario)
    free = {f.field: f.candidates for f in space.fields}
    # the date's move to a month later (past today) is not tried; the count is never varied
    # alone; the total (derived from the items, which do not change) neither
    assert "2026-12-26" not in free["shipped_on"] and free["shipped_on"]
    assert "item_count" not in free and "total" not in free
    dropped = {(d.field, str(d.value)) for d in space.dropped_world}
    assert ("shipped_on", "2026-12-26") in dropped and ("item_count", "0") in dropped
    rng, seen = random.Random(0), set()
    for _ in range(300):
        choices = space.draw(rng, world_probability=0.9)
        order = _order(space, choices)
        _consistent(order)
        seen |= {w.field for w in choices.world}
    assert {"shipped_on", "days_since_shipped", "items[0].price"} <= seen


def test_a_varied_date_re_derives_its_days_and_the_days_their_date(tmp_path: Path) -> None:
    project = _project(tmp_path)
    space = ChoiceSpace(project, project.scenarios()[0])

    def varied(field: str, value: Any) -> dict[str, Any]:
        turns = tuple(TurnChoice() for _ in space.scenario.turns)
        choice = WorldChoice(tool="get_order", field=field, value=value)
        return _order(space, Choices(turns=turns, world=(choice,)))

    assert varied("shipped_on", "2025-11-26")["days_since_shipped"] == 372
    assert varied("days_since_shipped", 14)["shipped_on"] == "2026-11-19"
    assert varied("items[0].price", 20.0)["total"] == 35.5


def test_an_independent_field_is_varied_alone_and_a_declared_relation_is_kept(
    tmp_path: Path,
) -> None:
    relations = {"get_order": {"days_since_shipped": {"independent": True}}}
    project = _project(tmp_path, relations=relations)
    rel = world_relations(project.bindings)
    assert not any(r.field == ("days_since_shipped",) for r in rel.relations)
    # n holds 4 and relates to nothing detectable; declared, it follows shipped_on's days
    # (without a today in the context, the day it implies: 2026-11-30)
    declared = {
        "get_order": {
            "n": {"days_since": "shipped_on"},
            "days_since_shipped": {"independent": True},
        }
    }
    other = tmp_path / "declared"
    other.mkdir()
    project = _project(other, relations=declared, context={})
    rel = world_relations(project.bindings)
    assert rel.today == date(2026, 11, 30) and "implied by get_order.n" in rel.today_from
    space = ChoiceSpace(project, project.scenarios()[0])
    turns = tuple(TurnChoice() for _ in space.scenario.turns)
    change = WorldChoice(tool="get_order", field="n", value=8)
    assert _order(space, Choices(turns=turns, world=(change,)))["shipped_on"] == "2026-11-22"


def test_a_relation_on_no_output_field_is_a_bindings_error_at_its_line(tmp_path: Path) -> None:
    with pytest.raises(BindingsError) as info:
        _project(tmp_path, relations={"get_order": {"nope": {"independent": True}}})
    assert "tool 'get_order' has no output field 'nope'" in str(info.value)
    assert re.search(r"agentprop\.yaml:\d+:\d+: ", str(info.value))  # file and line


def test_a_relation_naming_no_world_field_or_not_holding_is_a_bindings_error(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path, relations={"get_order": {"n": {"days_since": "shipped"}}})
    with pytest.raises(BindingsError, match=r"relations\.get_order\.n.*get_order\.shipped is not"):
        world_relations(project.bindings)
    other = tmp_path / "other"
    other.mkdir()
    project = _project(other, relations={"get_order": {"n": {"days_since": "shipped_on"}}})
    with pytest.raises(BindingsError, match=r"does not hold.*get_order\.n = days_since"):
        world_relations(project.bindings)


def test_a_path_setting_the_days_moves_the_date_with_them(tmp_path: Path) -> None:
    rel = world_relations(_project(tmp_path).bindings)
    out = rel.reconcile(
        {"get_order": {**_WORLD, "days_since_shipped": 31}},
        {("get_order", ("days_since_shipped",))},
    )
    assert out["get_order"]["shipped_on"] == "2026-11-02"
    assert rel.contradictions(out) == []
    # a boundary value no date is that far from leaves the date as it is (and says so)
    huge = {"get_order": {**_WORLD, "days_since_shipped": 2**31 - 1}}
    out = rel.reconcile(huge, {("get_order", ("days_since_shipped",))})
    assert out["get_order"]["shipped_on"] == "2026-11-26" and rel.contradictions(out)


def _zoo_projects() -> list[Path]:
    out = sorted(p.parent for p in (ROOT / "examples").glob("*/agentprop.yaml"))
    for zoo in ("_specs_zoo", "_reach_zoo"):  # frozen: read only
        out += sorted(p.parent for p in (ROOT / "benchmarks" / zoo).glob("*/agentprop.yaml"))
    return out


def test_the_bundled_and_zoo_worlds_never_give_a_contradictory_world() -> None:
    """Every value exploration may set, on every path of every bundled and zoo project, gives a
    consistent world; and the two contradictions a blind adjudicator noticed are gone."""
    checked = 0
    for where in _zoo_projects():
        project = agentprop.load_project(where)
        rel = world_relations(project.bindings)
        for scenario in project.scenarios():
            assert rel.contradictions(scenario.world.overrides) == [], scenario.id
            for f in world_fields(project, scenario)[0]:
                for value in f.candidates:
                    overrides = {t: dict(v) for t, v in scenario.world.overrides.items()}
                    overrides[f.tool][f.field] = value
                    at = (f.tool, tuple(parse_field_path(f.field)))
                    world = rel.reconcile(overrides, {at})
                    assert rel.contradictions(world) == [], (where.name, scenario.id, f, value)
                    checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    ("where", "tool", "date_field", "days_field", "today"),
    [
        (
            "benchmarks/_specs_zoo/pharmacy_refill",
            "get_prescription",
            "last_fill_date",
            "days_since_fill",
            date(2026, 12, 3),
        ),
        (
            "examples/supportops",
            "get_account",
            "orders[0].created_at",
            "orders[0].days_since_created",
            date(2026, 11, 30),
        ),
    ],
)
def test_the_adjudicators_dates_keep_their_days(
    where: str, tool: str, date_field: str, days_field: str, today: date
) -> None:
    project = agentprop.load_project(ROOT / where)
    for scenario in project.scenarios():
        space = ChoiceSpace(project, scenario)
        rng = random.Random(1)
        for _ in range(20):
            out = resolve(
                space.render(space.draw(rng, world_probability=0.9)).world.overrides[tool]
            )
            d, n = out, out
            for part in parse_field_path(date_field):
                d = d[part]
            for part in parse_field_path(days_field):
                n = n[part]
            assert date.fromisoformat(str(d)) <= today
            assert n == (today - date.fromisoformat(str(d))).days, (scenario.id, out)


def test_a_run_counts_the_world_values_it_left_out_and_never_tries_them(tmp_path: Path) -> None:
    from agentprop._cli import main

    project = _project(tmp_path)
    out, report = io.StringIO(), tmp_path / "report.json"
    args = ["run", str(tmp_path), "--corpus", "none", "--seed", "0", "--explore-seed", "0"]
    code = main([*args, "--explore", "6", "--json", str(report)], out=out, err=io.StringIO())
    printed = out.getvalue().splitlines()
    assert code == 0, printed
    left_out = {
        (d.tool, d.field, json.dumps(d.value))
        for s in project.scenarios()
        for d in ChoiceSpace(project, s).dropped_world
    }
    distinct = {f"{t}.{f}={v}" for t, f, v in left_out}
    [line] = [p for p in printed if p.startswith("not tried (world values")]
    assert line.startswith(
        "not tried (world values that would contradict a related field or an order): "
        f"{len(distinct)} value(s) of "
    )
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["metrics"]["extra"]["world_not_tried"]["values"] == len(distinct)
    tried = [
        (w["tool"], w["field"], json.dumps(w["value"]))
        for c in data["cases"]
        if c.get("kind") == "EXPLORE"
        for w in (c.get("details") or {}).get("choices", {}).get("world", [])
    ]
    assert tried and not set(tried) & left_out  # world values were tried, none left out


def test_reading_the_overrides_copies_only_what_a_path_key_writes_into(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # reconcile and contradictions read each tool's overrides once a relation; deep copies of
    # the whole output (kilobytes) for each were most of their cost
    from agentprop._spec import relations

    orders = [{"id": "O-1", "amount": 5, "tags": ["a"]}, {"id": "O-2", "amount": 7}]
    fields = {"orders": orders, "orders[1].amount": 9, "note": {"x": 1}}
    monkeypatch.setattr(relations.copy, "deepcopy", lambda value: pytest.fail("deep copy"))
    view = relations._view(fields)
    assert view["orders"][1]["amount"] == 9 and view["orders"][0] is orders[0]
    assert orders[1]["amount"] == 7 and fields["orders"] is orders  # the overrides unchanged
    assert view["note"] is fields["note"]
    monkeypatch.undo()
    assert view == relations.resolve(fields)
