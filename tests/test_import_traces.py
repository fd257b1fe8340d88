"""``agentprop import``: OpenAI Chat Completions logs read into traces and judged by the spec.

docs/examples/imports/openai_chat_quickstart.jsonl (shown in docs/importing-traces.md) is written by
hand in the shapes the OpenAI API reference documents for ``POST /v1/chat/completions`` (request:
``model``, ``messages``, ``tools``, ``tool_choice``; response: ``chat.completion`` with
``choices[].message.tool_calls`` of ``type: function`` whose ``arguments`` are JSON text; tool
results as ``role: tool`` messages with ``tool_call_id``), one ``{"request", "response"}`` pair a
line. Its four calls hold three conversations of the quickstart: a correct lookup (two calls), an
answer given without looking the order up, and an unclear message asked back.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._pipeline.importing import (
    anthropic_trace_of,
    detect_format,
    judge_trace,
    read_log,
    read_openai_chat,
    read_otel,
    summarise,
    trace_of,
)

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
LOG = ROOT / "docs" / "examples" / "imports" / "openai_chat_quickstart.jsonl"
ANTHROPIC_LOG = LOG.with_name("anthropic_messages_quickstart.jsonl")
"""The same three conversations as Messages API calls, in the shapes the Anthropic API reference
documents for ``POST /v1/messages`` (request: ``model``, ``max_tokens``, ``system``,
``messages``, ``tools`` with ``input_schema``; response: ``type: message`` with ``content``
blocks, ``tool_use`` with ``input`` an object, ``stop_reason``; tool outputs as ``tool_result``
blocks of a user message with ``tool_use_id``)."""
OTEL_LOG = LOG.with_name("otel_genai_quickstart.json")
"""The same three conversations as OTLP JSON spans in the OpenTelemetry GenAI semantic
conventions: an ``invoke_agent`` span per trace, ``chat`` inference spans with
``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON strings of ``{role, parts}``
messages, parts ``text``, ``tool_call``, ``tool_call_response``, as in the conventions'
gen-ai-input-messages.json schema), and an ``execute_tool`` span with ``gen_ai.tool.call.id``,
``.arguments`` and ``.result``; attributes as OTLP JSON ``{key, value: {stringValue}}``."""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_calls_of_one_conversation_become_one_trace_with_its_tool_outputs() -> None:
    traces = read_openai_chat(LOG)
    assert [t.case_id for t in traces] == ["line 2", "line 3", "line 4"]
    first = traces[0]
    (turn,) = first.turns
    assert turn.user_message == "Where is my order O-1001?"
    assert [(c.name, c.args, c.result) for c in turn.tool_calls] == [
        ("get_order", {"order_id": "O-1001"}, {"order_id": "O-1001", "status": "shipped"})
    ]
    assert turn.response is not None and turn.response["node_id"] == "END_ANSWERED"


def test_each_trace_is_judged_by_the_path_it_took_and_what_it_broke() -> None:
    project = load_project(QUICKSTART)
    judged = [judge_trace(project, t, project.scenarios()) for t in read_openai_chat(LOG)]
    assert [(j.trace.case_id, j.path, j.signatures) for j in judged] == [
        ("line 2", "END_ANSWERED<-N1_ROUTE", ()),
        (
            "line 3",
            "END_ANSWERED<-N1_ROUTE",
            (
                "calls_in_order:decision_tree.END_ANSWERED.requirements.must_call_tools_in_order@turn0:missing=get_order",
            ),
        ),
        ("line 4", "END_CLARIFY<-N1_ROUTE", ()),
    ]
    summary = summarise(judged + judged)  # the same behaviours twice: grouped, not repeated
    assert summary.traces == 6 and summary.passed == 4 and len(summary.groups) == 3


def test_the_command_prints_a_summary_and_exits_1_when_a_trace_broke_a_contract() -> None:
    code, out, _ = cli("import", str(QUICKSTART), str(LOG))
    assert code == 1
    lines = out.splitlines()
    assert lines[1] == "3 trace(s): 2 passed, 1 failed (broke a contract); 3 distinct behaviour(s)"
    assert "  1 x path END_CLARIFY<-N1_ROUTE: ok (line 4)" in lines


def test_a_tool_error_answer_is_recorded_as_the_calls_error() -> None:
    messages = [
        {"role": "user", "content": "Where is my order O-1001?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": "O-1001"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "error: timeout: get_order did not answer",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": '},
                }
            ],
        },
    ]
    first, second = trace_of(messages).turns[0].tool_calls
    assert (first.error_kind, first.error) == ("timeout", "timeout: get_order did not answer")
    assert (second.error_kind, second.args) == ("invalid_arguments", {})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"request": {"messages": []}, "response": ', "line 2 is not JSON"),
        (
            '{"request": {"messages": []}}',
            "line 2 is not a logged Chat Completions call: response: Field required",
        ),
    ],
)
def test_a_malformed_line_is_an_input_error_naming_file_line_and_shape(
    tmp_path: Path, line: str, message: str
) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        LOG.read_text(encoding="utf-8").splitlines()[0] + "\n" + line + "\n", encoding="utf-8"
    )
    code, _, err = cli("import", str(QUICKSTART), str(log))
    assert code == 2
    assert message in err and f"{log}:2" in err and '"response": {"choices"' in err


def test_the_log_is_json_lines_of_request_and_response() -> None:
    for raw in LOG.read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        assert (
            set(record) == {"request", "response"}
            and record["response"]["object"] == "chat.completion"
        )


def test_an_anthropic_messages_log_is_read_and_judged_like_the_same_chat_log() -> None:
    assert (detect_format(LOG), detect_format(ANTHROPIC_LOG)) == (
        "openai-chat",
        "anthropic-messages",
    )
    project = load_project(QUICKSTART)
    chat = [judge_trace(project, t, project.scenarios()) for t in read_log(LOG, "openai-chat")]
    messages = [
        judge_trace(project, t, project.scenarios())
        for t in read_log(ANTHROPIC_LOG, "anthropic-messages")
    ]
    assert [(j.trace.case_id, j.path, j.signatures) for j in messages] == [
        (j.trace.case_id, j.path, j.signatures) for j in chat
    ]
    first = messages[0].trace.turns[0]
    assert first.text == "Let me look that up." and first.tool_calls[0].result == {
        "order_id": "O-1001",
        "status": "shipped",
    }
    code, out, _ = cli("import", str(QUICKSTART), str(ANTHROPIC_LOG))
    assert (
        code == 1
        and "(anthropic-messages)" in out
        and "3 trace(s): 2 passed, 1 failed (broke a contract)" in out
    )


def test_an_anthropic_tool_result_with_is_error_is_the_calls_error() -> None:
    messages = [
        {"role": "user", "content": "Where is my order O-1001?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "get_order",
                    "input": {"order_id": "O-1001"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "timeout: no answer",
                    "is_error": True,
                }
            ],
        },
    ]
    (call,) = anthropic_trace_of(messages).turns[0].tool_calls
    assert (call.error_kind, call.error, call.result) == ("timeout", "timeout: no answer", None)


def test_a_log_of_the_other_format_names_the_format_option() -> None:
    code, _, err = cli("import", str(QUICKSTART), str(ANTHROPIC_LOG), "--format", "openai-chat")
    assert (
        code == 2
        and "line 1 is not a logged Chat Completions call: response.choices: Field required" in err
    )
    code, _, err = cli("import", str(QUICKSTART), str(LOG), "--format", "anthropic-messages")
    assert code == 2 and "not a logged Anthropic Messages call" in err and "--format" in err


def test_otel_genai_spans_are_read_one_trace_per_trace_id_and_judged_like_the_chat_log() -> None:
    assert detect_format(OTEL_LOG) == "otel"
    project = load_project(QUICKSTART)
    chat = [judge_trace(project, t, project.scenarios()) for t in read_log(LOG, "openai-chat")]
    spans = [judge_trace(project, t, project.scenarios()) for t in read_log(OTEL_LOG, "otel")]
    assert [j.trace.case_id for j in spans] == [
        "trace 5b8efff798038103d269b633813fc60c",
        "trace 6c9f00a8a9149214e37ac744924ad71d",
        "trace 7da011b9ba25a325f48bd855a35be82e",
    ]
    assert [(j.path, j.signatures) for j in spans] == [(j.path, j.signatures) for j in chat]


def test_a_tool_output_missing_from_the_messages_comes_from_the_execute_tool_span(
    tmp_path: Path,
) -> None:
    document = json.loads(OTEL_LOG.read_text(encoding="utf-8"))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for span in spans:
        for attribute in span["attributes"]:
            if attribute["key"] == "gen_ai.input.messages":
                messages = [
                    m for m in json.loads(attribute["value"]["stringValue"]) if m["role"] != "tool"
                ]
                attribute["value"]["stringValue"] = json.dumps(messages)
    log = tmp_path / "spans.json"
    log.write_text(json.dumps(document), encoding="utf-8")
    (call,) = read_otel(log)[0].turns[0].tool_calls
    assert (call.name, call.result) == ("get_order", {"order_id": "O-1001", "status": "shipped"})


def test_a_file_that_is_not_otlp_json_is_an_input_error(tmp_path: Path) -> None:
    log = tmp_path / "spans.json"
    log.write_text('{"spans": []}\n', encoding="utf-8")
    code, _, err = cli("import", str(QUICKSTART), str(log), "--format", "otel")
    assert (
        code == 2
        and "not OTLP JSON: no resourceSpans list" in err
        and '"resourceSpans": [{"scopeSpans"' in err
    )


# --------------------------------------------------------------------------- more formats

RESPONSES_LOG = LOG.with_name("openai_responses_quickstart.jsonl")
"""The same three conversations as Responses API calls, in the shapes the OpenAI API reference
documents for ``POST /v1/responses`` (request: ``model``, ``instructions``, ``input`` as text or
items, ``tools`` of ``type: function`` with top-level ``name``, ``previous_response_id`` chaining
the second call to the first; response: ``object: response`` with ``output`` items
``function_call`` (``call_id``, JSON-text ``arguments``) and ``message`` (``output_text`` parts);
tool outputs as ``function_call_output`` input items)."""
LANGSMITH_LOG = LOG.with_name("langsmith_runs_quickstart.jsonl")
"""The same conversations as LangSmith runs in its documented run data format (``id``,
``trace_id``, ``parent_run_id``, ``dotted_order``, ``run_type`` chain / llm / tool, ``inputs``,
``outputs``): two traces as ``wrap_openai`` records them (OpenAI messages in, the
``chat.completion`` out), one as a LangChain chat model does (serialised ``HumanMessage`` /
``AIMessage`` with ``tool_calls`` of ``{name, args, id}``, ``generations`` out)."""
PHOENIX_LOG = LOG.with_name("phoenix_spans_quickstart.jsonl")
"""The same conversations as Phoenix spans in the OpenInference span JSON shape
(``context.trace_id``, ``span_kind``, ``parent_id``, ``attributes`` flat:
``openinference.span.kind``, ``llm.input_messages.N.message.role`` / ``.content`` /
``.tool_calls.K.tool_call.function.name`` ..., ``llm.output_messages``), one span a line."""
EVENTS_LOG = LOG.with_name("otel_genai_events_quickstart.json")
"""The same conversations as OTLP JSON with the messages recorded as GenAI events, not span
attributes: ``chat`` spans plus ``resourceLogs`` log records (``eventName``
``gen_ai.system.message`` / ``gen_ai.user.message`` / ``gen_ai.assistant.message`` /
``gen_ai.tool.message`` / ``gen_ai.choice``, bodies as ``kvlistValue``, ``traceId`` / ``spanId``
of their span), as opentelemetry-instrumentation-openai-v2 emits them with content capture on."""

EXPECTED = [
    ("END_ANSWERED<-N1_ROUTE", ()),
    (
        "END_ANSWERED<-N1_ROUTE",
        (
            "calls_in_order:decision_tree.END_ANSWERED.requirements.must_call_tools_in_order@turn0:missing=get_order",
        ),
    ),
    ("END_CLARIFY<-N1_ROUTE", ()),
]


@pytest.mark.parametrize(
    ("log", "fmt"),
    [
        (RESPONSES_LOG, "openai-responses"),
        (LANGSMITH_LOG, "langsmith"),
        (PHOENIX_LOG, "phoenix"),
        (EVENTS_LOG, "otel"),
    ],
)
def test_each_format_is_told_read_and_judged_like_the_chat_log(log: Path, fmt: str) -> None:
    assert detect_format(log) == fmt
    project = load_project(QUICKSTART)
    judged = [judge_trace(project, t, project.scenarios()) for t in read_log(log, fmt)]
    assert [(j.path, j.signatures) for j in judged] == EXPECTED
    first = judged[0].trace.turns[0]
    assert first.user_message == "Where is my order O-1001?"
    assert [(c.name, c.result) for c in first.tool_calls] == [
        ("get_order", {"order_id": "O-1001", "status": "shipped"})
    ]


def test_a_responses_call_continued_by_previous_response_id_is_one_conversation() -> None:
    traces = read_log(RESPONSES_LOG, "openai-responses")
    assert [t.case_id for t in traces] == ["line 2", "line 3", "line 4"]
    assert traces[2].turns[0].text == "Let me ask."  # an output message item before the call


def test_messages_on_the_inference_details_span_event_are_read(tmp_path: Path) -> None:
    document = json.loads(OTEL_LOG.read_text(encoding="utf-8"))
    for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        moved = [
            a
            for a in span["attributes"]
            if a["key"] in ("gen_ai.input.messages", "gen_ai.output.messages")
        ]
        span["attributes"] = [a for a in span["attributes"] if a not in moved]
        if moved:
            span["events"] = [
                {
                    "timeUnixNano": span["startTimeUnixNano"],
                    "name": "gen_ai.client.inference.operation.details",
                    "attributes": moved,
                }
            ]
    log = tmp_path / "events.json"
    log.write_text(json.dumps(document), encoding="utf-8")
    project = load_project(QUICKSTART)
    assert [
        (j.path, j.signatures)
        for j in (judge_trace(project, t, project.scenarios()) for t in read_otel(log))
    ] == EXPECTED


def test_langchain_serialised_messages_keep_their_tool_calls() -> None:
    trace = read_log(LANGSMITH_LOG, "langsmith")[2]
    assert trace.turns[0].user_message == "Hmm, can you sort out the thing?"
    assert trace.turns[0].response is not None and trace.turns[0].response["decision"] == "CLARIFY"


# --------------------------------------------------------------------------- cases and corpus


def _project_copy(tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, target, ignore=shutil.ignore_patterns(".agentprop", "__pycache__"))
    return target


def test_to_cases_writes_one_case_per_behaviour_and_run_picks_them_up(tmp_path: Path) -> None:
    project_dir = _project_copy(tmp_path)
    doubled = tmp_path / "doubled.jsonl"
    # each behaviour twice
    doubled.write_text(LOG.read_text(encoding="utf-8") * 2, encoding="utf-8")
    code, out, _ = cli("import", str(project_dir), str(doubled), "--to-cases")
    assert code == 1 and "cases: 3 new, 0 already there" in out
    written = sorted((project_dir / ".agentprop" / "cases" / "quickstart_v1").glob("*.json"))
    assert len(written) == 3
    code, out, _ = cli("import", str(project_dir), str(LOG), "--to-cases")
    assert "cases: 0 new, 3 already there" in out  # deduplicated by behaviour
    from agentprop._pipeline.import_cases import imported_cases

    cases = imported_cases(load_project(project_dir))
    skipped = next(
        c
        for c in cases
        if c.id.endswith("END_ANSWERED<-N1_ROUTE") and c.messages == ["Where is my order O-1002?"]
    )
    looked_up = next(c for c in cases if c.messages == ["Where is my order O-1001?"])
    assert looked_up.world.overrides["get_order"] == {"order_id": "O-1001", "status": "shipped"}
    assert skipped.turns[0].required_tools == ["get_order"]  # the path's expectations stay
    code, out, _ = cli(
        "run", str(project_dir), "--kinds", "mft", "--explore", "0", "--corpus", "none"
    )
    assert code == 0
    assert sum(line.startswith("IMPORTED ") for line in out.splitlines()) == 3


def test_to_corpus_keeps_each_failing_behaviour_once_at_its_rate_on_the_path(
    tmp_path: Path,
) -> None:
    from agentprop._decide.corpus import Corpus

    project_dir = _project_copy(tmp_path)
    corpus_dir = tmp_path / "corpus"
    code, out, _ = cli("import", str(project_dir), str(LOG), "--to-corpus", str(corpus_dir))
    assert code == 1 and "corpus entries: 1 new, 0 already there" in out
    (entry,) = Corpus(corpus_dir).entries(spec_id="quickstart_v1")
    assert entry.agent_ref == "agent:OrderAgent" and entry.scenario.messages == [
        "Where is my order O-1002?"
    ]
    assert (
        entry.signature.startswith("calls_in_order:")
        and entry.original_rate == 0.5
        and not entry.confirmed
    )
    code, out, _ = cli(
        "import", str(project_dir), str(RESPONSES_LOG), "--to-corpus", str(corpus_dir)
    )
    assert "corpus entries: 0 new, 1 already there" in out
    assert len(Corpus(corpus_dir).entries(spec_id="quickstart_v1")) == 1


def test_a_recorded_tool_error_of_a_known_failure_mode_is_injected_in_the_case() -> None:
    from agentprop._pipeline.import_cases import case_of
    from agentprop._scenario.trace import ToolCall, Trace, Turn

    project = load_project(ROOT / "examples" / "supportops")
    base = project.scenarios()[0]
    turn = Turn(index=0, user_message="Cancel order O-1001 please")
    turn.tool_calls = [
        ToolCall(
            name="get_account",
            args={},
            turn_index=0,
            step=0,
            error="timeout: no answer",
            error_kind="timeout",
        ),
        ToolCall(name="get_account", args={}, turn_index=0, step=1, result={"account_id": "A9"}),
    ]
    case = case_of(project, base, Trace(turns=[turn]), "IMPORTED x " + base.id)
    assert case.messages == ["Cancel order O-1001 please"]
    assert case.world.failures == [{"tool": "get_account", "mode": "timeout", "calls": [1]}]
    assert case.world.overrides["get_account"]["account_id"] == "A9"
    # merged over the case's world
    assert case.world.overrides["get_account"]["plan_id"] == "PLAN-BASIC"


def test_a_damaged_imported_case_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    project_dir = _project_copy(tmp_path)
    folder = project_dir / ".agentprop" / "cases" / "quickstart_v1"
    folder.mkdir(parents=True)
    (folder / "bad.json").write_text('{"id": 1}', encoding="utf-8")
    code, _, err = cli(
        "run", str(project_dir), "--kinds", "mft", "--explore", "0", "--corpus", "none"
    )
    assert code == 2 and "imported case bad.json cannot be read" in err and "--to-cases" in err


def _answered_in_text(log: Path, tmp_path: Path) -> Path:
    """The example log as an agent without a ``respond`` tool logs it: the same calls, each
    final answer the assistant's text (``finish_reason: stop``)."""
    lines = []
    for line in log.read_text(encoding="utf-8").splitlines():
        call = json.loads(line)
        choice = call["response"]["choices"][0]
        tool_calls = choice["message"].get("tool_calls") or []
        if tool_calls and tool_calls[0]["function"]["name"] == "respond":
            said = json.loads(tool_calls[0]["function"]["arguments"])["user_message"]
            choice["message"] = {"role": "assistant", "content": said}
            choice["finish_reason"] = "stop"
        call["request"]["tools"] = [
            t for t in call["request"]["tools"] if t["function"]["name"] != "respond"
        ]
        call["request"].pop("tool_choice")
        lines.append(json.dumps(call))
    path = tmp_path / "answered_in_text.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_conversations_answered_in_text_take_the_path_their_tool_calls_fit(
    tmp_path: Path,
) -> None:
    """A production agent without agentprop's ``respond`` tool answers in text: no node or
    decision names where it ended. Its path is told by its tool calls (the lookup is
    END_ANSWERED's, no call END_CLARIFY's), and the response contract it cannot meet is not
    counted against it: before, every such conversation 'broke response_valid' on no path."""
    code, out, _ = cli("import", str(QUICKSTART), str(_answered_in_text(LOG, tmp_path)))
    assert code == 0 and "response_valid" not in out
    assert "3 trace(s): 3 passed, 0 failed (broke a contract); 2 distinct behaviour(s)" in out
    told = "(told by its tool calls: answered in text, no respond): ok"
    assert f"1 x path END_ANSWERED<-N1_ROUTE {told} (line 2)" in out
    # the answer given without the lookup looks like a clarification: the decision is not known
    assert f"2 x path END_CLARIFY<-N1_ROUTE {told} (line 3, line 4)" in out
    # so no case is made of them: it would expect CLARIFY of "Where is my order O-1002?"
    project_dir = _project_copy(tmp_path)
    log = _answered_in_text(LOG, tmp_path)
    code, out, _ = cli("import", str(project_dir), str(log), "--to-cases", "--to-corpus")
    assert "cases: 0 new, 0 already there" in out and "corpus entries: 0 new" in out
    assert out.count("not written: ") == 2 and "answered in text, so the path is told" in out
    assert not (project_dir / ".agentprop").exists()


def test_a_text_answer_that_fits_several_paths_is_not_given_one() -> None:
    from agentprop._scenario.trace import Trace, Turn

    project = load_project(ROOT / "examples" / "supportops")
    trace = Trace(
        case_id="line 1",
        turns=[Turn(index=0, user_message="Hello?", text="How can I help you today?")],
    )
    judged = judge_trace(project, trace, project.scenarios())
    assert judged.path is None and len(judged.fits) > 1 and not judged.failures
    (line,) = summarise([judged]).lines()[1:]
    assert line.startswith(
        f"  1 x path not told: answered in text, and its tool calls fit {len(judged.fits)} "
        "cases equally ("
    )


_GET_ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
}
_ANSWER = {
    "node_id": "END_ANSWERED",
    "decision": "ANSWERED",
    "tool_actions": ["get_order"],
    "evidence": "get_order: O-1001 is shipped",
    "user_message": "Order O-1001 is shipped.",
}
_SHIPPED = json.dumps({"order_id": "O-1001", "status": "shipped"})


def _logged_by_the_sdk(api: str) -> list[dict[str, object]]:
    """A lookup conversation logged as an application logs it with the official SDK: the
    request it passed and ``response.model_dump(mode="json")`` (every field, unset ones
    null), the reply passed back in the next request as the SDK's model dumps it without
    nulls; the model is a loopback server (agentprop.testing)."""
    from agentprop.testing import MessagesServer, OpenAIServer, respond_reply, tool_use_reply

    script = [tool_use_reply("get_order", {"order_id": "O-1001"}), respond_reply(**_ANSWER)]
    respond_schema = {"type": "object", "properties": {k: {} for k in _ANSWER}}
    log: list[dict[str, object]] = []
    if api == "anthropic-messages":
        anthropic = pytest.importorskip("anthropic")
        with MessagesServer(script) as server:
            client = anthropic.Anthropic(base_url=server.base_url, api_key="sk-ant-loopback")
            tools = [
                {"name": "get_order", "input_schema": _GET_ORDER},
                {"name": "respond", "input_schema": respond_schema},
            ]
            messages: list[dict[str, object]] = [
                {"role": "user", "content": "Where is my order O-1001?"}
            ]
            for _ in script:
                request = {"model": "m", "max_tokens": 512, "messages": list(messages)}
                reply = client.messages.create(**request, tools=tools)
                log.append({"request": request, "response": reply.model_dump(mode="json")})
                messages.append(
                    {
                        "role": "assistant",
                        "content": [
                            b.model_dump(mode="json", exclude_none=True) for b in reply.content
                        ],
                    }
                )
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": reply.content[0].id,
                                "content": _SHIPPED,
                            }
                        ],
                    }
                )
        return log
    openai = pytest.importorskip("openai")
    with OpenAIServer(script) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-loopback")
        if api == "openai-chat":
            chat_tools = [
                {"type": "function", "function": {"name": "get_order", "parameters": _GET_ORDER}},
                {"type": "function", "function": {"name": "respond", "parameters": respond_schema}},
            ]
            history: list[dict[str, object]] = [
                {"role": "user", "content": "Where is my order O-1001?"}
            ]
            for _ in script:
                request = {"model": "m", "messages": list(history), "tools": chat_tools}
                completion = client.chat.completions.create(**request)
                log.append({"request": request, "response": completion.model_dump(mode="json")})
                message = completion.choices[0].message
                history.append(message.model_dump(mode="json", exclude_none=True))
                call_id = (message.tool_calls or [])[0].id
                history.append({"role": "tool", "tool_call_id": call_id, "content": _SHIPPED})
            return log
        response_tools = [
            {"type": "function", "name": n, "parameters": s, "strict": False}
            for n, s in (("get_order", _GET_ORDER), ("respond", respond_schema))
        ]
        items: list[dict[str, object]] = [{"role": "user", "content": "Where is my order O-1001?"}]
        for _ in script:
            request = {"model": "m", "input": list(items), "tools": response_tools}
            response = client.responses.create(**request)
            log.append({"request": request, "response": response.model_dump(mode="json")})
            call = response.output[0]
            items.append(call.model_dump(mode="json", exclude_none=True))
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": _SHIPPED}  # type: ignore[union-attr]
            )
        return log


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic-messages"])
def test_a_log_written_with_the_official_sdk_is_one_conversation(api: str, tmp_path: Path) -> None:
    """The SDKs' dumps spell out every unset field as null (``"refusal": null``, ``"caller":
    null`` ...), which the reply sent back in the next request lacks: the calls still chain
    into one conversation (before, a Chat Completions log of one lookup read as two
    conversations, the first ending on a tool call with no answer)."""
    log = tmp_path / f"{api}.jsonl"
    log.write_text("".join(json.dumps(call) + "\n" for call in _logged_by_the_sdk(api)))
    code, out, _ = cli("import", str(QUICKSTART), str(log), "--format", api)
    assert code == 0, out
    assert "1 trace(s): 1 passed, 0 failed" in out
    assert "1 x path END_ANSWERED<-N1_ROUTE: ok (line 2)" in out
