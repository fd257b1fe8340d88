"""agentprop.adapters: a spec's tools as typed callables, and the PydanticAI adapter end to end.

The PydanticAI agent's model is played by the SupportOps reference agent
(examples/supportops_pydanticai/agent.py), so its trace can be compared with the runtime's
record of the reference agent run in-process.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentprop import ToolError, Trace, TurnContext, load_agent, load_project
from agentprop._cli import main
from agentprop.adapters import bind, tool_functions
from agentprop.errors import InvalidArgument

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
CANCEL = "END_CANCELLED<-N7_CANCEL"
PYDANTIC_AGENT = "examples.supportops_pydanticai.agent:SupportOpsPydanticAI"


@pytest.fixture(scope="module")
def project() -> Any:
    return load_project(SUPPORTOPS)


def _base(annotation: Any) -> Any:
    """``Annotated[Optional[X], ...]`` -> ``X``."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Union and len(args) == 1:
        return _base(args[0])
    return annotation


def test_tool_functions_carry_the_schema_as_signature_and_docstring(project: Any) -> None:
    functions = {f.__name__: f for f in tool_functions(project.spec)}
    assert set(functions) == {t.name for t in project.spec.action_tools} | {"respond"}
    verify = inspect.signature(functions["verify_identity"])
    assert list(verify.parameters) == ["account_id", "last4", "zip"]
    assert all(
        p.default is inspect.Parameter.empty and p.kind is p.KEYWORD_ONLY
        for p in verify.parameters.values()
    )
    assert _base(verify.parameters["last4"].annotation) is str
    doc = functions["verify_identity"].__doc__ or ""
    assert doc.startswith("Verify user identity before performing any account-changing action.")
    assert "last4: Last 4 digits of a payment method on file." in doc
    # a nested object is a pydantic model with the schema's fields
    address = _base(
        inspect.signature(functions["update_address"]).parameters["new_address"].annotation
    )
    assert issubclass(address, BaseModel) and {"line1", "city", "postal_code", "country"} <= set(
        address.model_fields
    )
    # respond: the response contract, the decision an enum of decision_enum
    decision = _base(inspect.signature(functions["respond"]).parameters["decision"].annotation)
    assert set(typing.get_args(decision)) == set(project.spec.response_contract.decision_enum)


def test_tool_functions_act_on_the_bound_turn_and_are_recorded(project: Any) -> None:
    functions = {f.__name__: f for f in tool_functions(project.spec)}
    address = _base(
        inspect.signature(functions["update_address"]).parameters["new_address"].annotation
    )

    class UsesFunctions:
        def turn(self, message: str, ctx: TurnContext) -> None:
            with bind(ctx):
                account = functions["get_account"](account_id="A1")
                functions["update_address"](
                    account_id="A1",
                    new_address=address(line1="1 Main St", city="X", postal_code="1", country="US"),
                )
                with pytest.raises(ToolError) as bad:
                    # the world checks arguments against the schema
                    functions["get_plan_rules"](plan_id=7)
                assert bad.value.kind == "invalid_arguments"
                functions["respond"](
                    node_id="END_BILLING_ANSWER",
                    decision="BILLING_ANSWER",
                    tool_actions=["get_account"],
                    evidence=f"plan {account['plan_id']}",
                    user_message="ok",
                )

    trace = asyncio.run(
        project.arun(project.scenario("END_BILLING_ANSWER<-N3_BILLING"), UsesFunctions, trial=0)
    )
    (turn,) = trace.turns
    assert [c.name for c in turn.tool_calls] == ["get_account", "update_address", "get_plan_rules"]
    # optional fields left out stay out; the model reached the world as JSON
    assert turn.tool_calls[1].args == {
        "account_id": "A1",
        "new_address": {"line1": "1 Main St", "city": "X", "postal_code": "1", "country": "US"},
    }
    assert (
        turn.tool_calls[2].error_kind == "invalid_arguments" and turn.decision == "BILLING_ANSWER"
    )
    with pytest.raises(InvalidArgument, match="outside a turn"):
        functions["get_account"](account_id="A1")


def test_pydantic_ai_reads_the_typed_functions(project: Any) -> None:
    pytest.importorskip("pydantic_ai")
    from agentprop.adapters.pydantic_ai import pydantic_ai_tools

    tools = {t.name: t for t in pydantic_ai_tools(project.spec)}
    schema = tools["verify_identity"].function_schema.json_schema
    assert schema["required"] == ["account_id", "last4", "zip"]
    assert schema["properties"]["zip"]["description"] == "Billing ZIP code."
    assert tools["verify_identity"].description.startswith("Verify user identity")
    nested = json.dumps(tools["update_address"].function_schema.json_schema)
    assert "postal_code" in nested


def _comparable(trace: Trace) -> dict[str, Any]:
    data = trace.model_dump()
    for key in ("duration_s", "agent"):
        data.pop(key)
    for turn in data["turns"]:
        turn.pop("duration_s")
        turn.pop("usage")  # the framework reports the played model's token estimate
        for error in turn["errors"]:
            error.pop("traceback", None)
    return data


def test_pydantic_ai_agent_is_recorded_like_the_python_agent(project: Any) -> None:
    pytest.importorskip("pydantic_ai")
    faults = {"skip_auth": 0.5, "never_retry": 0.5, "leak_pii": 0.5}
    python = load_agent("agent:SupportOpsAgent", project.base_dir, faults)
    framework = load_agent(PYDANTIC_AGENT, ROOT, faults)

    async def compare() -> tuple[int, int]:
        differing = model_calls = 0
        for sc in project.scenarios()[::3]:
            for trial in range(2):
                a = await project.arun(sc, python.factory, trial=trial)
                b = await project.arun(sc, framework.factory, trial=trial)
                differing += _comparable(a) != _comparable(b)
                model_calls += b.usage.model_calls
        return differing, model_calls

    differing, model_calls = asyncio.run(compare())
    assert differing == 0
    assert model_calls > 0  # the turns really went through PydanticAI's model loop


def test_run_through_pydantic_ai_finds_the_injected_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pydantic_ai")
    monkeypatch.chdir(ROOT)
    report = tmp_path / "report.json"
    code = main(
        [
            "run",
            str(SUPPORTOPS),
            "--agent",
            PYDANTIC_AGENT,
            "--fault",
            "skip_auth=0.5",
            "--profile",
            "release",  # certify the case: two clean runs (the ci profile) can miss a 50% fault
            "--kinds",
            "mft",
            "--case",
            CANCEL,
            "--shrink-budget",
            "0",
            "--corpus",
            "none",
            "--json",
            str(report),
        ]
    )
    assert code == 1
    (case,) = json.loads(report.read_text())["cases"]
    assert (
        case["verdict"] == "FAIL"
        and "verify_identity was never called" in case["failures"][0]["explanation"]
    )
