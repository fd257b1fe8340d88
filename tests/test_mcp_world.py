"""The world as an MCP server (agentprop.mcp), driven by the official SDK's own client.

The scripted MCP agent is the SupportOps reference agent played over MCP
(examples/supportops/mcp_agent.py): the same code, fault knobs and random source as agent.py,
so the MCP recording can be compared with the runtime's recording of the Python agent, trace for
trace.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentprop import Trace, load_agent, load_project  # noqa: E402
from agentprop._agents.mcp_compat import V2, Client, MCPError, StdioServerParameters  # noqa: E402
from agentprop._cli import main  # noqa: E402
from agentprop.errors import ToolError  # noqa: E402
from agentprop.mcp import CaseServer, HttpCaseServer, McpConversation  # noqa: E402
from agentprop.oracle import OracleSettings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
CANCEL = "END_CANCELLED<-N7_CANCEL"


@pytest.fixture(scope="module")
def project() -> Any:
    return load_project(SUPPORTOPS)


@pytest.fixture(scope="module")
def reference_agent(project: Any) -> Any:
    return load_agent("agent:SupportOpsAgent", project.base_dir).target


def _comparable(trace: Trace) -> dict[str, Any]:
    data = trace.model_dump()
    data.pop("duration_s")
    data.pop("agent")
    for turn in data["turns"]:
        turn.pop("duration_s")
        for error in turn["errors"]:
            error.pop("traceback", None)
    return data


def test_mcp_agent_is_recorded_exactly_like_the_python_agent(project: Any) -> None:
    """Every tool call, result, error, response and decision of a trial run over MCP equals
    the runtime's record of the same agent run in-process (faults on, several cases)."""
    faults = {"skip_auth": 0.5, "leak_pii": 0.5, "never_retry": 0.5, "skip_confirm": 0.3}
    python = load_agent("agent:SupportOpsAgent", project.base_dir, faults)
    over_mcp = load_agent("mcp_agent:SupportOpsMcpAgent", project.base_dir, faults)
    scenarios = project.scenarios()[::2]

    async def compare() -> int:
        differing = 0
        for sc in scenarios:
            for trial in range(3):
                a = await project.arun(sc, python.factory, trial=trial)
                b = await project.arun(sc, over_mcp.factory, trial=trial)
                assert b.tool_calls or b.turns[0].response is not None
                differing += _comparable(a) != _comparable(b)
        return differing

    assert asyncio.run(compare()) == 0


@pytest.mark.parametrize("agent", ["agent:SupportOpsAgent", "mcp_agent:SupportOpsMcpAgent"])
def test_run_through_mcp_finds_the_injected_fault(
    agent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agentprop run` with the MCP agent fails the cancel case with the signature the Python
    agent's run has: verify_identity was skipped (skip_auth)."""
    report = tmp_path / "report.json"
    code = main(
        [
            "run",
            str(SUPPORTOPS),
            "--agent",
            agent,
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
    assert case["verdict"] == "FAIL"
    assert "verify_identity was never called" in case["failures"][0]["explanation"]


def test_clean_mcp_agent_passes_its_case(tmp_path: Path) -> None:
    code = main(
        [
            "run",
            str(SUPPORTOPS),
            "--agent",
            "mcp_agent:SupportOpsMcpAgent",
            "--kinds",
            "mft",
            "--case",
            CANCEL,
            "--shrink-budget",
            "0",
            "--corpus",
            "none",
        ]
    )
    assert code == 0


async def _play_session(client: Any, agent: Any, spec: Any, seed: int = 0) -> McpConversation:
    conversation = McpConversation(client, rng=random.Random(seed))
    async for message in conversation:
        await conversation.play(agent.turn, message, spec=spec)
    return conversation


def test_each_in_process_session_is_one_decided_trial(project: Any, reference_agent: Any) -> None:
    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=3)
    )
    seen: list[tuple[int, str]] = []
    case.on_trial = lambda trace, result: seen.append((trace.trial, result.verdict))

    async def sessions() -> None:
        for i in range(3):
            async with case.connect() as client:
                await _play_session(client, reference_agent(), project.spec, seed=i)

    asyncio.run(sessions())
    assert [t.decisions for t in case.traces] == [["ASK_CONFIRM_CANCEL", "CANCELLED"]] * 3
    # each trial gets a world of its own: canaries differ from trial to trial
    assert len({json.dumps(t.canaries, sort_keys=True) for t in case.traces}) == 3
    assert seen == [(0, "INCONCLUSIVE"), (1, "INCONCLUSIVE"), (2, "PASS")]
    assert case.result().verdict == "PASS"


def test_the_turn_protocol_over_mcp(project: Any) -> None:
    """user_message ends the turn before; an invalid respond is an error the agent may correct;
    unknown tools and calls after respond are recorded as the runtime records them."""
    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=1)
    )

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with case.connect() as client:
            conv = McpConversation(client)
            names = {t.name for t in (await client.list_tools()).tools}
            out["tools"] = names
            out["context"] = await conv.context()
            out["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
            out["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
            first = await conv.next_message()
            out["first"] = first
            with pytest.raises(ToolError) as unknown:
                await conv.call("delete_everything")
            out["unknown"] = unknown.value.kind
            with pytest.raises(ToolError) as invalid:
                await conv.respond(decision="NOT_A_DECISION")
            out["invalid"] = invalid.value.kind
            await conv.respond(
                node_id="N6_CONFIRM_CANCEL",
                decision="ASK_CONFIRM_CANCEL",
                tool_actions=[],
                evidence="none",
                user_message="Confirm?",
            )
            with pytest.raises(ToolError) as late:
                await conv.call("get_account", account_id="A1")
            out["late"] = late.value.kind
            out["second"] = await conv.next_message()
            # the final turn: no respond; then the conversation is over
            out["third"] = await conv.next_message()
            with pytest.raises(ToolError) as over:
                await conv.call("get_account", account_id="A1")
            out["over"] = over.value.message
        return out

    out = asyncio.run(session())
    assert {"verify_identity", "get_account", "cancel_order", "respond"} <= out["tools"]
    assert out["context"] == {"account_id": "A1"} and out["resources"] == ["agentprop://context"]
    assert out["prompts"] == ["user_message"]
    assert out["first"] == project.scenario(CANCEL).messages[0]
    assert out["second"] == project.scenario(CANCEL).messages[1]
    assert out["third"] is None and "conversation is over" in out["over"]
    assert (out["unknown"], out["invalid"], out["late"]) == (
        "unknown_tool",
        "invalid_respond",
        "protocol",
    )
    (trace,) = case.traces
    first, second = trace.turns
    assert [c.name for c in first.tool_calls] == ["delete_everything", "get_account"]
    assert [e.kind for e in first.errors] == ["unknown_tool", "protocol"]
    assert first.decision == "ASK_CONFIRM_CANCEL"
    assert [e.kind for e in second.errors] == ["no_respond"]


def test_a_session_that_ends_mid_conversation_is_recorded(project: Any) -> None:
    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=1)
    )

    async def session() -> None:
        async with case.connect() as client:
            conv = McpConversation(client)
            await conv.next_message()
            await conv.call("verify_identity", account_id="A1", last4="4242", zip="94107")

    asyncio.run(session())
    (trace,) = case.traces
    assert len(trace.turns) == 1 and trace.tool_names() == ["verify_identity"]
    (error,) = trace.all_errors()
    assert (
        error.kind == "agent_exception" and "ended during turn 1, before respond" in error.message
    )
    assert case.result().verdict == "FAIL"


def test_a_session_whose_client_never_took_part_is_no_trial(project: Any) -> None:
    # a client that connects, lists the tools and leaves (or a stdio server started with no
    # client at all) says nothing about the agent: it is neither judged nor recorded, and the
    # next session is the case's next trial
    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=1)
    )

    async def idle() -> None:
        async with case.connect() as client:
            await client.list_tools()

    asyncio.run(idle())
    assert case.traces == [] and case.skipped == 1 and case.result().verdict == "INCONCLUSIVE"


def test_a_session_that_reads_the_message_and_hangs_up_is_no_trial(project: Any) -> None:
    """A client that opens a session per request reads the message in one session and calls the
    tools in others: the reading session ends before any tool call. It is not counted as a
    failed trial (issue #28: a passing case turned FAIL); the log says why, with the fix."""
    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=1)
    )
    notes: list[str] = []
    case.on_note = notes.append

    async def reads_and_leaves() -> None:
        async with case.connect() as client:
            await McpConversation(client).next_message()

    asyncio.run(reads_and_leaves())
    assert (
        case.traces == []
        and case.skipped == 1
        and case.split == 1
        and case.result().verdict == "INCONCLUSIVE"
    )
    (note,) = notes
    assert (
        f"{CANCEL} trial 0 is no trial" in note
        and "read the user's message and ended before any tool call" in note
    )
    assert "client.session(" in note


def test_an_exception_in_the_mcp_agent_is_the_runs_agent_exception(project: Any) -> None:
    from agentprop.mcp import McpAgent

    class Broken(McpAgent):
        async def converse(self, client: Any, conversation: McpConversation) -> None:
            async for _ in conversation:
                raise RuntimeError("the model returned garbage")

    trace = asyncio.run(project.arun(project.scenario(CANCEL), Broken, trial=0))
    (error,) = trace.all_errors()
    assert (
        error.kind == "agent_exception"
        and "RuntimeError: the model returned garbage" in error.message
    )


def test_http_sessions_are_trials_and_sessionless_requests_are_refused(
    project: Any, reference_agent: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    record = tmp_path / "trials.jsonl"
    case = CaseServer(
        project,
        project.scenario(CANCEL),
        settings=OracleSettings(mode="fixed", runs=2),
        record=record,
    )

    async def over_http(url: str, seed: int) -> str:
        async with Client(url) as client:
            await _play_session(
                client,
                reference_agent({"skip_auth": 1.0}) if seed else reference_agent(),
                project.spec,
                seed,
            )
            return client.protocol_version

    async def modern(url: str) -> str:
        async with Client(url, mode="2026-07-28") as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("get_account", {"account_id": "A1"})
            return str(refused.value)

    with HttpCaseServer(case) as running:
        versions = [asyncio.run(over_http(running.url, seed)) for seed in (0, 1)]
        # mcp 1.x speaks no sessionless revision
        refusal = asyncio.run(modern(running.url)) if V2 else None
    # the handshake era, with sessions
    assert all(v.startswith("20") and v < "2026" for v in versions)
    assert refusal is None or "needs an MCP session" in refusal
    # a client closing its session is no error (mcp 1.x logs one, with a traceback, unless quieted)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [t.trial for t in case.traces] == [0, 1]
    assert case.traces[1].tool_names()[0] == "get_account"  # skip_auth: verify_identity skipped
    result = case.result()
    assert (
        result.verdict == "FAIL"
        and "verify_identity was never called" in result.failures[0].explanation
    )
    # recorded: a new server for the case continues from the record
    assert len(record.read_text().splitlines()) == 2
    again = CaseServer(
        project,
        project.scenario(CANCEL),
        settings=OracleSettings(mode="fixed", runs=2),
        record=record,
    )
    assert len(again.traces) == 2 and again.result().verdict == "FAIL"


def test_agentprop_serve_over_stdio_records_one_trial_per_process(
    tmp_path: Path, reference_agent: Any, project: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "cancel.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "agentprop",
            "serve",
            str(SUPPORTOPS),
            "--case",
            CANCEL,
            "--record",
            str(record),
        ],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )

    async def session() -> None:
        async with Client(params) as client:
            await _play_session(client, reference_agent(), project.spec)

    asyncio.run(session())
    (line,) = record.read_text().splitlines()
    trace = Trace.from_json(line)
    assert (
        trace.case_id == CANCEL
        and trace.decisions == ["ASK_CONFIRM_CANCEL", "CANCELLED"]
        and not trace.errors
    )
    code = main(["serve", str(SUPPORTOPS), "--case", CANCEL, "--record", str(record), "--report"])
    out = capsys.readouterr().out
    # a safety case needs 59 clean runs
    assert code == 1 and "INCONCLUSIVE" in out and "(1/1)" in out


def test_serve_refuses_bad_input_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(SUPPORTOPS), "--case", "NO_SUCH_CASE"]) == 2
    assert "no scenario 'NO_SUCH_CASE'" in capsys.readouterr().err
    assert main(["serve", str(SUPPORTOPS), "--case", CANCEL, "--until-decided"]) == 2
    assert "--until-decided applies to --http" in capsys.readouterr().err


def test_the_pytest_fixture_serves_a_case(
    agentprop_mcp_server: Any, project: Any, reference_agent: Any
) -> None:
    running = agentprop_mcp_server(
        CANCEL, project, http=True, settings=OracleSettings(mode="fixed", runs=1)
    )

    async def session() -> None:
        async with Client(running.url) as client:
            await _play_session(client, reference_agent({"leak_pii": 1.0}), project.spec)

    asyncio.run(session())
    assert running.case.result().verdict == "PASS"  # leak_pii does not touch a cancel
    in_process = agentprop_mcp_server(
        CANCEL, project, settings=OracleSettings(mode="fixed", runs=1)
    )
    assert isinstance(in_process, CaseServer) and in_process.result().runs == 0


def test_agentprop_serve_http_until_decided(
    tmp_path: Path, reference_agent: Any, project: Any
) -> None:
    """`agentprop serve --http --until-decided`: sessions over HTTP until the verdict (here the
    first session skips verify_identity, which fails a safety case at once), then exit 1."""
    import io
    import re
    import threading
    import time

    out = io.StringIO()
    codes: list[int] = []
    server = threading.Thread(
        target=lambda: codes.append(
            main(
                [
                    "serve",
                    str(SUPPORTOPS),
                    "--case",
                    CANCEL,
                    "--http",
                    "--until-decided",
                    "--record",
                    str(tmp_path / "r.jsonl"),
                ],
                out=out,
                err=out,
            )
        ),
        daemon=True,
    )
    server.start()
    deadline = time.monotonic() + 60
    while (
        not (found := re.search(r"at (http://127\.0\.0\.1:\d+/mcp\?token=[\w-]+);", out.getvalue()))
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert found, out.getvalue()

    async def session() -> None:
        async with Client(found.group(1)) as client:
            await _play_session(client, reference_agent({"skip_auth": 1.0}), project.spec)

    asyncio.run(session())
    server.join(30)
    assert codes == [1]
    printed = out.getvalue()
    assert (
        "trial 0:" in printed
        and "verdict FAIL" in printed
        and "verify_identity was never called" in printed
    )


def test_http_sessions_need_the_servers_token(project: Any, reference_agent: Any) -> None:
    """Issue #27 item 19: any local process can reach the loopback port; only a client holding
    the token (in the URL the server gives, or as a bearer token) may open a session."""
    import json
    import urllib.error
    import urllib.request

    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=2)
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"},
        },
    }
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def post(url: str, extra: dict[str, str]) -> tuple[int, str]:
        request = urllib.request.Request(
            url, data=json.dumps(initialize).encode(), headers={**headers, **extra}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, ""
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    with HttpCaseServer(case) as running:
        bare = running.url.split("?")[0]
        assert running.url == f"{bare}?token={case.token}" and len(case.token) >= 32
        for url, extra in [
            (bare, {}),
            (f"{bare}?token=wrong", {}),
            (bare, {"authorization": "Bearer wrong"}),
        ]:
            status, body = post(url, extra)
            assert status == 401 and "token" in json.loads(body)["error"]
        assert post(bare, {"authorization": f"Bearer {case.token}"})[0] == 200

        async def session() -> None:
            async with Client(running.url) as client:
                await _play_session(client, reference_agent(), project.spec)

        asyncio.run(session())
    assert [t.trial for t in case.traces] == [0]  # the refused requests opened no trial


def test_a_session_that_calls_tools_without_reading_the_message_is_no_trial(project: Any) -> None:
    """langchain-mcp-adapters opens a session per tool call by default: one conversation would be
    split into many sessions, each a failed trial. Such calls are refused, saying why, and the
    session is not counted."""
    case = CaseServer(
        project, project.scenario(CANCEL), settings=OracleSettings(mode="fixed", runs=1)
    )
    notes: list[str] = []
    case.on_note = notes.append

    async def stray() -> str:
        async with case.connect() as client:
            with pytest.raises(ToolError) as refused:
                await McpConversation(client).call("get_account", account_id="A1")
            return refused.value.message

    message = asyncio.run(stray())
    assert "without reading the user's message" in message and "client.session(" in message
    assert case.traces == [] and case.skipped == 1 and case.split == 1
    (note,) = notes
    assert note.startswith(f"{CANCEL} trial 0 is no trial") and "session per tool call" in note
    asyncio.run(stray())
    assert case.split == 2 and len(notes) == 1  # said once


def test_trial_numbers_are_unique_across_servers_sharing_a_record(
    project: Any, tmp_path: Path
) -> None:
    """Stdio processes started in parallel (one per session) each read the record when they
    start; the counter file beside it still gives each trial its own number."""
    record = tmp_path / "trials.jsonl"
    servers = [
        CaseServer(
            project,
            project.scenario(CANCEL),
            settings=OracleSettings(mode="fixed", runs=3),
            record=record,
        )
        for _ in range(3)
    ]

    async def sessions() -> list[int]:
        trials = [servers[i % 3].start_trial() for i in range(6)]
        for server, trial in zip([servers[i % 3] for i in range(6)], trials):
            await server.end_trial(trial)
        return [t.index for t in trials]

    assert sorted(asyncio.run(sessions())) == list(range(6))
    assert servers[0].counter is not None and servers[0].counter.read_text() == "6"
    later = CaseServer(
        project,
        project.scenario(CANCEL),
        settings=OracleSettings(mode="fixed", runs=3),
        record=record,
    )

    async def one() -> int:
        trial = later.start_trial()
        await later.end_trial(trial)
        return trial.index

    assert asyncio.run(one()) == 6


RUN_CASES = ["END_REFUSE_PII<-N1_INTENT", "cancel_order:timeout+retry", "N2_AUTH:missing"]


async def _client_loop(url: str, reference_agent: Any, spec: Any, faults: dict[str, float]) -> int:
    """A client that opens session after session, each one conversation, until the server has
    no message for a new session (the run is over); returns how many conversations it had."""
    played = 0
    while True:
        session = Client(url)
        try:
            client = await session.__aenter__()
            conversation = McpConversation(client, rng=random.Random(played))
            first = await conversation.next_message()
        except Exception:  # noqa: BLE001 (httpx's or httpx2's ConnectError, in a group)
            assert played, "the server never took a session"
            return played  # --until-decided: the server stopped once the run was decided
        try:
            if first is None:
                return played
            agent = reference_agent(faults)
            message: str | None = first
            while message is not None:
                await conversation.play(agent.turn, message, spec=spec)
                message = await conversation.next_message()
            played += 1
        finally:
            await session.__aexit__(None, None, None)


def _run_verdicts(report: Path) -> dict[str, str]:
    cases = json.loads(report.read_text())["cases"]
    return {
        c["id"]: (c["failures"][0]["signature"] if c["failures"] else c["verdict"]) for c in cases
    }


# serving with no settings matches `agentprop run --profile release` the same way (each safety
# case certified by 59 clean runs: 237 sessions, too slow to run here)
@pytest.mark.parametrize(
    ("settings", "served"), [(["--runs", "2"], ["--runs", "2"])], ids=["explicit-runs"]
)
def test_serve_a_whole_run_decides_every_case_as_run_does(
    settings: list[str], served: list[str], tmp_path: Path, reference_agent: Any, project: Any
) -> None:
    """`agentprop serve --http` without --case serves every case it selects from one process, a
    session per trial, case after case; its verdicts, failure signatures and run counts are
    those of `agentprop run` with the same agent and settings."""
    import io
    import re
    import threading
    import time

    selection = [a for case in RUN_CASES for a in ("--case", case)]
    faults = {"never_retry": 1.0}
    assert (
        main(
            [
                "run",
                str(SUPPORTOPS),
                "--kinds",
                "mft",
                *selection,
                *settings,
                "--fault",
                "never_retry=1",
                "--explore",
                "0",
            ]
            + ["--shrink-budget", "0", "--corpus", "none", "--json", str(tmp_path / "run.json")]
        )
        == 1
    )
    expected = _run_verdicts(tmp_path / "run.json")
    assert (
        len(expected) >= 4
        and "PASS" in expected.values()
        and any("retry" in v for v in expected.values())
    )

    out = io.StringIO()
    codes: list[int] = []
    args = [
        "serve",
        str(SUPPORTOPS),
        *selection,
        "--http",
        "--until-decided",
        *served,
        "--record",
        "none",
        "--json",
        str(tmp_path / "serve.json"),
    ]
    server = threading.Thread(
        target=lambda: codes.append(main(args, out=out, err=out)), daemon=True
    )
    server.start()
    deadline = time.monotonic() + 60
    while (
        not (found := re.search(r"at (http://127\.0\.0\.1:\d+/mcp\?token=[\w-]+);", out.getvalue()))
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert found, out.getvalue()
    played = asyncio.run(_client_loop(found.group(1), reference_agent, project.spec, faults))
    server.join(30)
    printed = out.getvalue()
    assert codes == [1], printed
    assert _run_verdicts(tmp_path / "serve.json") == expected
    runs = {c["id"]: c["runs"] for c in json.loads((tmp_path / "run.json").read_text())["cases"]}
    assert {
        c["id"]: c["runs"] for c in json.loads((tmp_path / "serve.json").read_text())["cases"]
    } == runs
    assert played == sum(
        c["runs"] for c in json.loads((tmp_path / "serve.json").read_text())["cases"]
    )
    assert (
        f"supportops_v1: {len(expected)} case(s)" in printed
        and "END_REFUSE_PII<-N1_INTENT trial 0:" in printed
    )


def test_a_served_run_takes_concurrent_sessions(reference_agent: Any, project: Any) -> None:
    """Sessions opened at the same time are bound to trials of different cases (each case one
    trial at a time while another case has none), and every case is decided."""
    from agentprop._cli.common import selected_scenarios
    from agentprop.mcp import RunServer

    scenarios = selected_scenarios(project, RUN_CASES)
    cases = [
        CaseServer(project, s, settings=OracleSettings(mode="fixed", runs=2)) for s in scenarios
    ]
    run = RunServer(cases)
    with HttpCaseServer(run) as running:

        async def clients() -> list[int]:
            return list(
                await asyncio.gather(
                    *(
                        _client_loop(running.url, reference_agent, project.spec, {})
                        for _ in range(3)
                    )
                )
            )

        played = asyncio.run(clients())
    assert run.decided and [r.verdict for r in run.results()] == ["PASS"] * len(cases)
    assert sum(played) == 2 * len(cases) and all(len(c.traces) == 2 for c in cases)
    assert all(sorted(t.trial for t in c.traces) == [0, 1] for c in cases)


def test_serve_refuses_a_whole_run_over_stdio_and_unknown_cases(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", str(SUPPORTOPS)]) == 2
    err = capsys.readouterr().err
    assert "served over HTTP only" in err and "add --http" in err
    assert (
        main(["serve", str(SUPPORTOPS), "--http", "--case", "NO_SUCH_A", "--case", "NO_SUCH_B"])
        == 2
    )
    assert "no case id contains NO_SUCH_A, NO_SUCH_B" in capsys.readouterr().err
    assert main(["serve", str(SUPPORTOPS), "--case", CANCEL, "--runs", "0"]) == 2
    assert "--runs 0 must be at least 1" in capsys.readouterr().err


def test_serve_report_of_a_whole_run_needs_no_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record_file = tmp_path / "a-file"
    record_file.write_text("")
    assert main(["serve", str(SUPPORTOPS), "--http", "--record", str(record_file)]) == 2
    assert "a whole run records into a directory" in capsys.readouterr().err
    assert main(["serve", str(SUPPORTOPS), "--case", CANCEL, "--tau", "1.5"]) == 2
    assert "--tau 1.5 must lie between 0 and 1" in capsys.readouterr().err
    selection = [a for case in RUN_CASES for a in ("--case", case)]
    assert (
        main(
            [
                "serve",
                str(SUPPORTOPS),
                *selection,
                "--report",
                "--record",
                str(tmp_path / "records"),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert (
        "INCONCLUSIVE END_REFUSE_PII<-N1_INTENT (0/0)" in " ".join(out.split())
        and "supportops_v1: 5 case(s): 5 INCONCLUSIVE" in out
    )


def test_a_client_of_a_real_server_gets_every_case_kind_exploration_and_shrinking(
    tmp_path: Path,
) -> None:
    """An MCP client agent run by agentprop through a real server per trial (McpServedAgent:
    streamable HTTP on loopback, the SDK's own client, a session a turn) is tested like the
    Python agent it plays: the same cases of every kind the filter selects (MFT, EXPLORE,
    PROBE, DIR, INV), the same verdicts, and the same bug shrunk to the same reproducer. With
    the run's default concurrency, trials dispatched just before a decision are cancelled
    unstarted; this run hung on them for good before they gave their permits back."""
    reports = {}
    for agent in ("agent:SupportOpsAgent", "mcp_agent:SupportOpsServedMcpAgent"):
        report = tmp_path / f"{agent.split(':')[0]}.json"
        code = main(
            [
                "run",
                str(SUPPORTOPS),
                "--agent",
                agent,
                "--fault",
                "leak_pii=0.5",
                "--case",
                "END_BILLING_ANSWER<-N3_BILLING",
                "--explore",
                "1",
                "--explore-seed",
                "1",
                "--corpus",
                "none",
                "--json",
                str(report),
            ]
        )
        assert code == 1
        reports[agent] = json.loads(report.read_text())
    python, served = reports.values()
    kinds = {c["kind"] for c in served["cases"]}
    assert kinds == {"MFT", "EXPLORE", "PROBE", "DIR", "INV"}
    assert [(c["id"], c["verdict"]) for c in served["cases"]] == [
        (c["id"], c["verdict"]) for c in python["cases"]
    ]

    def bugs(report: dict[str, Any]) -> list[Any]:
        return [
            (b["signature"], b["representative"], b["minimal"], b["reproducer_messages"])
            for b in report["bugs"]
        ]

    (bug,) = bugs(served)
    assert bug[0].startswith("no_canary_leak:") and bug[1].startswith("PROBE ")
    assert served["bugs"][0]["shrink_runs"] > 0 and bugs(served) == bugs(python)
