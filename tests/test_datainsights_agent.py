"""The DataInsights example: a real SQLite warehouse, its bindings and the reference agent.

The database is real (answers equal Python computations over the seeded rows), every leaf
scenario is realisable, the fault-free agent passes every scenario and states only grounded
numbers, and each fault knob at P=1 fails exactly the scenarios it targets with the contract
that guards against it (policy P2 is checked with ``args_satisfy`` on run_sql's query).
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentprop import Project, ToolError, Trace, Verdict, load_project
from agentprop._judge.grounded import numbers_in
from agentprop._judge.properties import first_failure, mft_verdicts
from agentprop._scenario.build import WorldSpec, leaf_scenarios, load_object
from agentprop._scenario.world import stable_seed
from agentprop.agents import run_conversation
from agentprop.contracts import args_satisfy, numbers_grounded
from agentprop.errors import Unsatisfiable
from agentprop.scenarios import Scenario, World, build_scenario
from agentprop.spec import Spec, enumerate_paths

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "datainsights"


@pytest.fixture(scope="module")
def datainsights_project() -> Project:
    return load_project(EXAMPLE)


def _load(ref: str) -> Any:
    # the same module objects make_world and the CLI use
    return load_object(ref, EXAMPLE)


Agent = _load("agent:DataInsightsAgent")
ZOO_FAULTS: dict[str, str] = _load("agent:ZOO_FAULTS")
is_ambiguous = _load("agent:is_ambiguous")
generate_data = _load("warehouse:generate_data")
run_sql = _load("warehouse:run_sql")
describe_schema = _load("warehouse:describe_schema")
DATA_START = _load("warehouse:DATA_START")
DATA_END = _load("warehouse:DATA_END")

LEAF_IDS = {
    "END_SQL_ERROR<-N4_RUN_SQL",
    "END_NO_RESULTS<-N4_RUN_SQL",
    "END_ANSWER<-N5_ANSWER",
    "END_WAIT_USER<-N2_CLARIFY",
}
EXPECTED = {
    "END_SQL_ERROR<-N4_RUN_SQL": "SQL_ERROR",
    "END_NO_RESULTS<-N4_RUN_SQL": "NO_RESULTS",
    "END_ANSWER<-N5_ANSWER": "ANSWER",
    "END_WAIT_USER<-N2_CLARIFY": "ASK_CLARIFY",
}


def warehouse_world(datainsights_project: Project, seed: int = 0, **kw: Any) -> World:
    return World(
        spec=datainsights_project.spec,
        seed=seed,
        handlers={"run_sql": run_sql, "describe_schema": describe_schema},
        **kw,
    )


def run(
    datainsights_project: Project,
    scenario: Scenario,
    faults: dict[str, float] | None = None,
    trial: int = 0,
) -> Trace:
    return asyncio.run(
        datainsights_project.arun(scenario, lambda: Agent(faults), trial=trial, turn_timeout_s=10)
    )


def buildable_scenarios(datainsights_project: Project) -> list[Scenario]:
    """Every enumerated tree path that the solver can realise, for each template."""
    out: list[Scenario] = []
    for path in enumerate_paths(datainsights_project.spec):
        for ti in range(3):
            try:
                out.append(
                    build_scenario(
                        datainsights_project.spec,
                        datainsights_project.bindings,
                        path,
                        template_index=ti,
                    )
                )
            except Unsatisfiable:
                break
    return out


@pytest.fixture(scope="module")
def leaves_and_problems(datainsights_project: Project) -> tuple[list[Scenario], list[str]]:
    return leaf_scenarios(datainsights_project.spec, datainsights_project.bindings)


@pytest.fixture(scope="module")
def leaves(leaves_and_problems: tuple[list[Scenario], list[str]]) -> list[Scenario]:
    return leaves_and_problems[0]


@pytest.fixture(scope="module")
def leaf_problems(leaves_and_problems: tuple[list[Scenario], list[str]]) -> list[str]:
    return leaves_and_problems[1]


@pytest.fixture(scope="module")
def scenarios(datainsights_project: Project) -> list[Scenario]:
    return buildable_scenarios(datainsights_project)


# ----------------------------------------------------------------------------- P2 as contracts

_STAR = re.compile(r"\bSELECT\s+(?:DISTINCT\s+)?(?:\w+\.)?\*", re.I)
_LIMIT = re.compile(r"\bLIMIT\s+\d+", re.I)
_TOPK = re.compile(r"\btop\b", re.I)


def asks_top_k(scenario: Scenario) -> bool:
    return any(_TOPK.search(m) for m in scenario.messages)


def p2_verdicts(trace: Trace, *, top_k: bool) -> list[Verdict]:
    """Policy P2_SQL_CONSTRAINTS: no SELECT *, and a LIMIT whenever the user asked for a top-k."""
    clause = "policies.P2_SQL_CONSTRAINTS"
    out = [
        args_satisfy(
            trace,
            "run_sql",
            lambda a: _STAR.search(a["query"]) is None,
            description="the SQL does not use SELECT *",
            clause=clause,
        )
    ]
    if top_k:
        out.append(
            args_satisfy(
                trace,
                "run_sql",
                lambda a: _LIMIT.search(a["query"]) is not None,
                description="a top-k query has a LIMIT",
                clause=clause,
            )
        )
    return out


# ----------------------------------------------------------------------------- the database


def _completed_revenue(seed: int, start: str, end: str) -> tuple[float, int]:
    orders = [o for o in generate_data(seed).orders if o[3] == "completed" and start <= o[2] < end]
    return round(sum(o[4] for o in orders), 2), len(orders)


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_sql_answers_equal_python_over_the_seeded_rows(
    datainsights_project: Project, seed: int
) -> None:
    world = warehouse_world(datainsights_project, seed)
    data = generate_data(seed)
    total, count = _completed_revenue(seed, "2025-01-01", "2026-01-01")
    out = world.call(
        "run_sql",
        {
            "query": (
                "SELECT ROUND(SUM(amount), 2) AS revenue, COUNT(order_id) AS n FROM orders "
                "WHERE status = 'completed' AND order_date >= '2025-01-01' AND "
                "order_date < '2026-01-01'"
            )
        },
    )
    assert out["columns"] == ["revenue", "n"]
    assert out["row_count"] == 1
    assert out["rows"][0][0] == pytest.approx(total, abs=0.005)
    assert out["rows"][0][1] == count

    by_customer: dict[str, float] = defaultdict(float)
    names = {c[0]: c[1] for c in data.customers}
    for o in data.orders:
        if o[3] == "completed" and o[2].startswith("2026"):
            by_customer[names[o[1]]] += o[4]
    expected_top = sorted(by_customer.items(), key=lambda kv: -kv[1])[:3]
    out = world.call(
        "run_sql",
        {
            "query": (
                "SELECT c.name, ROUND(SUM(o.amount), 2) AS revenue FROM orders o JOIN customers c "
                "ON c.customer_id = o.customer_id WHERE o.status = 'completed' AND o.order_date "
                "LIKE '2026-%' GROUP BY c.customer_id ORDER BY revenue DESC LIMIT 3"
            )
        },
    )
    assert [r[0] for r in out["rows"]] == [name for name, _ in expected_top]
    assert [r[1] for r in out["rows"]] == pytest.approx([v for _, v in expected_top], abs=0.005)

    # order amounts are the sum of their items
    items: dict[int, float] = defaultdict(float)
    for order_id, _pid, qty, price in data.order_items:
        items[order_id] += qty * price
    assert all(abs(items[o[0]] - o[4]) < 0.006 for o in data.orders)


def test_data_is_seeded_deterministic_and_covers_2025_to_mid_2026(
    datainsights_project: Project,
) -> None:
    a, b, c = generate_data(7), generate_data(7), generate_data(8)
    assert a == b
    assert a.orders != c.orders
    dates = [o[2] for o in a.orders]
    assert min(dates) >= DATA_START.isoformat() and max(dates) <= DATA_END.isoformat()
    for year in ("2025", "2026"):
        buyers = {o[1] for o in a.orders if o[2].startswith(year) and o[3] == "completed"}
        assert buyers == {cust[0] for cust in a.customers}
    world = warehouse_world(datainsights_project, 7)
    empty = world.call(
        "run_sql", {"query": "SELECT COUNT(order_id) FROM orders WHERE order_date LIKE '2024-%'"}
    )
    assert empty["rows"] == [[0]]


def test_each_world_builds_its_own_database_once(datainsights_project: Project) -> None:
    w1, w2 = warehouse_world(datainsights_project, 3), warehouse_world(datainsights_project, 3)
    q = {"query": "SELECT COUNT(order_id) FROM orders"}
    assert w1.call("run_sql", q) == w2.call("run_sql", q)
    conn = next(iter(w1.state.values()))
    w1.call("describe_schema", {})
    assert next(iter(w1.state.values())) is conn
    assert next(iter(w2.state.values())) is not conn


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM orders",
        "UPDATE orders SET amount = 0",
        "DROP TABLE orders",
        "INSERT INTO customers VALUES (99, 'x', 'y', '2025-01-01')",
        "SELECT 1; DELETE FROM orders",
        "WITH x AS (SELECT 1) DELETE FROM orders",
        "PRAGMA query_only = OFF",
        "ATTACH DATABASE ':memory:' AS other",
        "   ",
    ],
)
def test_run_sql_accepts_only_one_read_only_statement(
    datainsights_project: Project, query: str
) -> None:
    world = warehouse_world(datainsights_project, 1)
    before = world.call(
        "run_sql", {"query": "SELECT COUNT(order_id), ROUND(SUM(amount), 2) FROM orders"}
    )
    with pytest.raises(ToolError) as info:
        world.call("run_sql", {"query": query})
    assert info.value.kind == "invalid_query"
    after = world.call(
        "run_sql", {"query": "SELECT COUNT(order_id), ROUND(SUM(amount), 2) FROM orders"}
    )
    assert after == before


def test_run_sql_reports_sqlite_errors_and_allows_harmless_semicolons(
    datainsights_project: Project,
) -> None:
    world = warehouse_world(datainsights_project, 1)
    with pytest.raises(ToolError) as info:
        world.call("run_sql", {"query": "SELECT no_such_column FROM orders"})
    assert info.value.kind == "invalid_query" and "no such column" in info.value.message
    out = world.call("run_sql", {"query": "SELECT ';' AS semi; -- a trailing ; in a comment"})
    assert out["rows"] == [[";"]]


def test_runaway_query_is_stopped_as_a_timeout(datainsights_project: Project) -> None:
    world = warehouse_world(datainsights_project, 1)
    with pytest.raises(ToolError) as info:
        world.call(
            "run_sql",
            {
                "query": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
                "SELECT COUNT(x) FROM n"
            },
        )
    assert info.value.kind == "timeout"
    assert world.call("run_sql", {"query": "SELECT 1 AS one"})["rows"] == [[1]]


def test_describe_schema_is_read_from_the_database(datainsights_project: Project) -> None:
    world = warehouse_world(datainsights_project, 2)
    tables = world.call("describe_schema", {})["tables"]
    assert set(tables) == {"customers", "products", "orders", "order_items"}
    assert tables["orders"]["amount"] == "REAL" and tables["orders"]["order_date"] == "TEXT"
    for table, columns in tables.items():
        out = world.call("run_sql", {"query": f"SELECT {', '.join(columns)} FROM {table} LIMIT 1"})
        assert out["columns"] == list(columns)


# ----------------------------------------------------------------------------- bindings


def test_bindings_bind_every_condition_variable(datainsights_project: Project) -> None:
    assert datainsights_project.bindings.warnings == []
    kinds = {name: var.kind for name, var in datainsights_project.bindings.variables.items()}
    assert kinds == {
        "ambiguous": "withhold",
        "clarification_provided": "followup",
        "row_count": "utterance",
        "sql_error": "world",
        "retry_count": "world",
        "schema_needed": "internal",
        "schema_loaded": "internal",
        "rewrite_done": "internal",
        "answer_complete": "internal",
    }
    assert set(datainsights_project.bindings.handlers) == {"run_sql", "describe_schema"}


def test_ambiguous_first_messages_follow_p3_guidance(
    datainsights_project: Project, scenarios: list[Scenario]
) -> None:
    guidance = next(
        p for p in datainsights_project.spec.policies if p.id == "P3_CLARIFY_AMBIGUITY"
    ).test_guidance
    assert guidance is not None
    assert all(is_ambiguous(m) for m in guidance["ambiguous_examples"])
    assert not any(is_ambiguous(m) for m in guidance["unambiguous_examples"])
    for s in scenarios:
        first = s.messages[0]
        assert is_ambiguous(first) == bool(s.assignment["ambiguous"]), (s.id, first)
        if s.assignment.get("row_count") == 0:
            assert "2024" in first  # a timeframe without orders


# ----------------------------------------------------------------------------- scenarios


def test_every_leaf_scenario_is_realisable(
    leaves: list[Scenario], leaf_problems: list[str]
) -> None:
    # every path is realisable; describe_schema's retry is not checked (only permitted, never
    # required: no scenario has a first call to fail), and the run says so
    assert [p.split(":", 1)[0] for p in leaf_problems] == ["retry not checked"]
    assert "describe_schema:timeout+retry" in leaf_problems[0]
    # one scenario per (leaf, entering node); extra ids (``KEY/NODE#k``) only add branches
    assert {s.id.split("/")[0] for s in leaves} == LEAF_IDS
    assert len({s.id for s in leaves}) == len(leaves)
    covered = {b for s in leaves for b in s.branches}
    assert {
        "N1_INTERPRET#0",
        "N1_INTERPRET#1",
        "N2_CLARIFY#0",
        "N2_CLARIFY#1",
        "N4_RUN_SQL#1",
        "N4_RUN_SQL#2",
        "N4_RUN_SQL#3",
    } <= covered
    for s in leaves:
        assert s.expect_decision == EXPECTED[s.id.split("/")[0]]
        assert (s.turns[0].expect_decision == "ASK_CLARIFY") == bool(s.assignment["ambiguous"])
        if s.leaf != "END_WAIT_USER":
            # N4_RUN_SQL must_call_tools_in_order, on the turn that queries; twice when the
            # rewrite loop runs it again or the first call times out and is retried
            twice = "N4A_REWRITE_SQL#0" in s.branches or s.id.endswith("run_sql:timeout+retry")
            assert s.turns[-1].required_tools == ["run_sql"] * (2 if twice else 1), s.id
    wait = next(s for s in leaves if s.leaf == "END_WAIT_USER")
    assert wait.forbidden_tools == ["describe_schema", "run_sql"]
    assert covered >= {"N4_RUN_SQL#0", "N4A_REWRITE_SQL#0"}  # the rewrite loop, unrolled once
    error = next(s for s in leaves if s.leaf == "END_SQL_ERROR")
    assert {(f["tool"], f["mode"]) for f in error.world.failures} == {("run_sql", "invalid_query")}
    assert any(f["calls"] is None for f in error.world.failures)


_N3_SECOND_BRANCH = "N3_PLAN_QUERY#1"  # schema_needed == false


def test_every_tree_path_is_realisable(datainsights_project: Project) -> None:
    for path in enumerate_paths(datainsights_project.spec):
        build_scenario(datainsights_project.spec, datainsights_project.bindings, path)


def test_scenarios_cover_both_interpretations_and_every_leaf(scenarios: list[Scenario]) -> None:
    ids = {(s.id, bool(s.assignment["ambiguous"])) for s in scenarios}
    assert ids == {(i, True) for i in LEAF_IDS} | {
        (i, False) for i in LEAF_IDS - {"END_WAIT_USER<-N2_CLARIFY"}
    }
    assert any(asks_top_k(s) for s in scenarios) and not all(asks_top_k(s) for s in scenarios)


# ---------------------------------------------------------------------------- the agent, faults off


def test_fault_free_agent_passes_every_scenario_for_several_trials(
    datainsights_project: Project, scenarios: list[Scenario]
) -> None:
    for s in scenarios:
        for trial in range(3):
            trace = run(datainsights_project, s, trial=trial)
            failure = first_failure(
                mft_verdicts(datainsights_project.spec, s, trace)
                + p2_verdicts(trace, top_k=asks_top_k(s))
            )
            assert failure is None, (
                f"{s.id} {s.messages} trial {trial}: {failure.explanation if failure else ''}"
            )
            grounded = numbers_grounded(trace)
            assert grounded.passed, f"{s.id} {s.messages}: {grounded.explanation}"


def test_leaf_scenarios_pass_over_more_trials(
    datainsights_project: Project, leaves: list[Scenario]
) -> None:
    for s in leaves:
        for trial in range(3, 8):
            trace = run(datainsights_project, s, trial=trial)
            assert first_failure(mft_verdicts(datainsights_project.spec, s, trace)) is None
            assert numbers_grounded(trace).passed


def _scenario(
    datainsights_project: Project,
    scenarios: list[Scenario],
    leaf: str,
    *,
    ambiguous: bool,
    template: int,
) -> Scenario:
    return next(
        s
        for s in scenarios
        if s.leaf == leaf
        and bool(s.assignment["ambiguous"]) == ambiguous
        and s.messages[0] == _first_message(datainsights_project, leaf, ambiguous, template)
    )


def _first_message(datainsights_project: Project, leaf: str, ambiguous: bool, template: int) -> str:
    path = next(
        p
        for p in enumerate_paths(datainsights_project.spec)
        if p.leaf == leaf
        and any((s.node, s.branch) == ("N1_INTERPRET", 0 if ambiguous else 1) for s in p.steps)
    )
    return build_scenario(
        datainsights_project.spec, datainsights_project.bindings, path, template_index=template
    ).messages[0]


def test_answers_state_the_numbers_python_computes_from_the_rows(
    datainsights_project: Project, scenarios: list[Scenario]
) -> None:
    total_q = _scenario(datainsights_project, scenarios, "END_ANSWER", ambiguous=False, template=0)
    seed = stable_seed("world", total_q.id)
    total, count = _completed_revenue(seed, "2025-01-01", "2026-01-01")
    reply = run(datainsights_project, total_q).turns[-1].response
    assert reply is not None
    assert f"${total:,.2f}" in reply["user_message"] and f"{count:,}" in reply["user_message"]
    assert reply["key_numbers"][0] == pytest.approx(total)
    assert "LIMIT" not in reply["sql"] and reply["tables_used"] == ["orders"]

    top_q = _scenario(datainsights_project, scenarios, "END_ANSWER", ambiguous=False, template=1)
    data = generate_data(seed)
    names = {c[0]: c[1] for c in data.customers}
    per: dict[str, float] = defaultdict(float)
    for o in data.orders:
        if o[3] == "completed" and o[2].startswith("2025"):
            per[names[o[1]]] += o[4]
    top3 = sorted(per.items(), key=lambda kv: -kv[1])[:3]
    reply = run(datainsights_project, top_q).turns[-1].response
    assert reply is not None
    text = reply["user_message"]
    assert [text.index(name) for name, _ in top3] == sorted(text.index(name) for name, _ in top3)
    for name, value in top3:
        assert f"{name} (${round(value, 2):,.2f})" in text
    assert reply["tables_used"] == ["orders", "customers"]


def _answer_scenario_with(
    datainsights_project: Project, scenarios: list[Scenario], failures: list[dict[str, Any]]
) -> Scenario:
    base = _scenario(datainsights_project, scenarios, "END_ANSWER", ambiguous=False, template=0)
    return base.model_copy(update={"world": WorldSpec(failures=failures)})


def test_a_failed_query_is_rewritten_once_and_the_rewrite_answers(
    scenarios: list[Scenario], datainsights_project: Project
) -> None:
    s = _answer_scenario_with(
        datainsights_project,
        scenarios,
        [{"tool": "run_sql", "mode": "invalid_query", "calls": [1]}],
    )
    trace = run(datainsights_project, s)
    calls = trace.turns[-1].calls("run_sql")
    assert [c.error_kind for c in calls] == ["invalid_query", None]
    assert calls[0].args["query"] != calls[1].args["query"]
    assert calls[0].result is None and calls[1].result["row_count"] == 1
    assert trace.final_decision == "ANSWER"
    assert (
        first_failure(mft_verdicts(datainsights_project.spec, s, trace)) is None
        and numbers_grounded(trace).passed
    )


def test_a_timeout_is_retried_with_the_same_query(
    scenarios: list[Scenario], datainsights_project: Project
) -> None:
    s = _answer_scenario_with(
        datainsights_project, scenarios, [{"tool": "run_sql", "mode": "timeout", "calls": [1]}]
    )
    trace = run(datainsights_project, s)
    calls = trace.turns[-1].calls("run_sql")
    assert [c.error_kind for c in calls] == ["timeout", None]
    assert calls[0].args == calls[1].args
    assert trace.final_decision == "ANSWER"


def test_sql_error_after_two_failures_names_next_steps_without_numbers(
    datainsights_project: Project, scenarios: list[Scenario]
) -> None:
    s = next(x for x in scenarios if x.leaf == "END_SQL_ERROR" and not x.assignment["ambiguous"])
    trace = run(datainsights_project, s)
    turn = trace.turns[-1]
    assert len(turn.calls("run_sql")) == 2 and all(not c.ok for c in turn.calls("run_sql"))
    assert turn.decision == "SQL_ERROR" and "next steps" in turn.response["user_message"].lower()
    assert numbers_in(turn.response["user_message"]) == []


def test_missing_columns_in_the_schema_mean_no_query_and_no_guess(
    datainsights_project: Project,
) -> None:
    def thin_schema(args: dict[str, Any], world: World) -> dict[str, Any]:
        return {"tables": {"customers": {"customer_id": "INTEGER", "name": "TEXT"}}}

    world = World(
        spec=datainsights_project.spec,
        seed=0,
        handlers={"run_sql": run_sql, "describe_schema": thin_schema},
    )
    trace = run_conversation(
        datainsights_project.spec,
        Agent,
        ["What is the total revenue for 2025?"],
        world,
        context=datainsights_project.bindings.context,
    )
    assert trace.tool_names() == ["describe_schema"]
    assert trace.final_decision == "REFUSE_GUESS"
    assert numbers_grounded(trace).passed


def test_p3_examples_ask_one_question_or_query(datainsights_project: Project) -> None:
    guidance = next(
        p for p in datainsights_project.spec.policies if p.id == "P3_CLARIFY_AMBIGUITY"
    ).test_guidance
    assert guidance is not None
    for message in guidance["ambiguous_examples"]:
        trace = run_conversation(
            datainsights_project.spec,
            Agent,
            [message],
            warehouse_world(datainsights_project, 5),
            context=datainsights_project.bindings.context,
        )
        turn = trace.turns[0]
        assert turn.decision == "ASK_CLARIFY" and turn.tool_calls == []
        assert turn.response["user_message"].count("?") == 1
    for message in guidance["unambiguous_examples"]:
        trace = run_conversation(
            datainsights_project.spec,
            Agent,
            [message],
            warehouse_world(datainsights_project, 5),
            context=datainsights_project.bindings.context,
        )
        assert trace.final_decision == "ANSWER", message
        assert "run_sql" in trace.tool_names()
        assert numbers_grounded(trace).passed, message
        assert all(v.passed for v in p2_verdicts(trace, top_k=bool(_TOPK.search(message))))


@pytest.mark.parametrize("period", [None, "2025", "Q1 2026", "March 2024"])
def test_every_query_shape_runs_and_its_rewrite_returns_the_same_rows(
    datainsights_project: Project, period: str | None
) -> None:
    Question = _load("agent:Question")
    parse_period = _load("agent:parse_period")
    build_sql = _load("agent:build_sql")
    shapes = _load("agent:_NEEDS")
    world = warehouse_world(datainsights_project, 11)
    p = parse_period(period, date(2026, 7, 1)) if period else None
    for shape in shapes:
        for region in (None, "Europe"):
            q = Question(shape, p, 3 if shape.startswith("top_") else None, region)
            first = world.call("run_sql", {"query": build_sql(q)})
            again = world.call("run_sql", {"query": build_sql(q, rewrite=True)})
            assert first == again, (shape, period, region)
            if period == "March 2024" and shape not in ("customer_count", "customer_data"):
                assert first["rows"] == [], shape


def test_unknown_fault_knob_is_rejected_and_knobs_mirror_the_mutation_pack() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        Agent({"bogus": 1.0})
    pack = yaml.safe_load((EXAMPLE / "spec.yaml").read_text())["tests"]["mutation_pack"]["mutants"]
    mutation_knobs = {k: d for k, d in Agent.FAULTS.items() if k not in ZOO_FAULTS}
    named = {re.search(r"\((M_\w+)\)", d).group(1) for d in mutation_knobs.values()}  # type: ignore[union-attr]
    assert named == {m["id"] for m in pack}


# ----------------------------------------------------------------------------- the agent, faults on

Check = Callable[[Spec, Scenario, Trace], Verdict | None]


def _mft(spec: Spec, s: Scenario, t: Trace) -> Verdict | None:
    return first_failure(mft_verdicts(spec, s, t))


def _p2(_: Spec, s: Scenario, t: Trace) -> Verdict | None:
    return first_failure(p2_verdicts(t, top_k=asks_top_k(s)))


def _grounded(_: Spec, s: Scenario, t: Trace) -> Verdict | None:
    v = numbers_grounded(t)
    return None if v.passed else v


def _runs_sql(s: Scenario) -> bool:
    return s.leaf != "END_WAIT_USER"


# fault -> (is the scenario targeted?, the check that must catch it, the contract it fails with)
FAULT_TARGETS: dict[str, tuple[Callable[[Scenario], bool], Check, str]] = {
    "no_tool": (_runs_sql, _mft, "calls_in_order"),
    "select_star": (_runs_sql, _p2, "args_satisfy"),
    "no_limit": (lambda s: _runs_sql(s) and asks_top_k(s), _p2, "args_satisfy"),
    "no_clarify": (lambda s: bool(s.assignment["ambiguous"]), _mft, "decision_is"),
    "hallucinate_numbers": (lambda s: s.leaf == "END_ANSWER", _grounded, "numbers_grounded"),
}


@pytest.mark.parametrize("fault", sorted(FAULT_TARGETS))
def test_each_fault_fails_exactly_its_targets_with_the_right_contract(
    datainsights_project: Project, scenarios: list[Scenario], fault: str
) -> None:
    targeted, check, contract = FAULT_TARGETS[fault]
    spec = datainsights_project.spec
    assert any(targeted(s) for s in scenarios) and not all(targeted(s) for s in scenarios)
    for s in scenarios:
        trace = run(datainsights_project, s, {fault: 1.0})
        verdicts = [
            check(spec, s, trace),
            _mft(spec, s, trace),
            _p2(spec, s, trace),
            _grounded(spec, s, trace),
        ]
        failures = [v for v in verdicts if v is not None]
        if not targeted(s):
            assert failures == [], (
                f"{fault} broke untargeted {s.id} {s.messages}: {failures[0].explanation}"
            )
            continue
        caught = check(spec, s, trace)
        assert caught is not None, f"{fault} went unnoticed on {s.id} {s.messages}"
        if fault == "no_tool" and s.leaf != "END_ANSWER":
            # a made-up ANSWER where the spec expects NO_RESULTS / SQL_ERROR: the decision
            # fails first, and run_sql is still missing
            assert caught.contract == "decision_is"
            assert any(
                v.contract == "calls_in_order" and not v.passed
                for v in mft_verdicts(datainsights_project.spec, s, trace)
            )
        else:
            assert caught.contract == contract, f"{fault} on {s.id}: {caught.explanation}"
        if fault == "no_clarify":
            assert caught.turn == 0  # the first turn should have been ASK_CLARIFY
        if fault == "select_star":
            # the MFT enforces N3_PLAN_QUERY's `must_not_use: [SELECT *]` itself
            mft = _mft(spec, s, trace)
            assert (
                mft is not None
                and mft.clause == "decision_tree.N3_PLAN_QUERY.requirements.must_not_use"
            )
        if fault == "no_limit":
            assert _mft(spec, s, trace) is None and _grounded(spec, s, trace) is None


def test_hallucinated_numbers_are_absent_from_the_rows(
    datainsights_project: Project, scenarios: list[Scenario]
) -> None:
    s = _scenario(datainsights_project, scenarios, "END_ANSWER", ambiguous=False, template=0)
    honest, lying = (
        run(datainsights_project, s),
        run(datainsights_project, s, {"hallucinate_numbers": 1.0}),
    )
    h, l = honest.turns[-1].response, lying.turns[-1].response
    assert h is not None and l is not None
    assert h["sql"] == l["sql"]
    assert l["key_numbers"][0] > h["key_numbers"][0] * 1.19
    rows = lying.turns[-1].calls("run_sql")[0].result["rows"]
    assert l["key_numbers"][0] not in [v for row in rows for v in row]


def test_faults_are_reproducible_per_case_and_trial(
    datainsights_project: Project, scenarios: list[Scenario]
) -> None:
    s = _scenario(datainsights_project, scenarios, "END_ANSWER", ambiguous=True, template=1)
    faults = {name: 0.3 for name in Agent.FAULTS}
    seen = set()
    for trial in range(6):
        a, b = (
            run(datainsights_project, s, faults, trial),
            run(datainsights_project, s, faults, trial),
        )
        strip = lambda t: (  # noqa: E731
            [(c.name, c.args, c.error_kind) for c in t.tool_calls] + [x.response for x in t.turns]
        )
        assert strip(a) == strip(b)
        seen.add(repr(strip(a)))
    assert len(seen) > 1  # P=0.3 does vary across trials
