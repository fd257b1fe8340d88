"""``agentprop import``: OpenAI Chat Completions logs read into traces and judged by the spec.

docs/examples/imports/openai_chat_quickstart.jsonl (shown in docs/importing-traces.md) is written by hand in the shapes the OpenAI API
reference documents for ``POST /v1/chat/completions`` (request: ``model``, ``messages``,
``tools``, ``tool_choice``; response: ``chat.completion`` with ``choices[].message.tool_calls``
of ``type: function`` whose ``arguments`` are JSON text; tool results as ``role: tool`` messages
with ``tool_call_id``), one ``{"request", "response"}`` pair a line. Its four calls hold three
conversations of the quickstart: a correct lookup (two calls), an answer given without looking
the order up, and an unclear message asked back.
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
            ("calls_in_order:decision_tree.END_ANSWERED.requirements.must_call_tools_in_order@turn0:missing=get_order",),
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
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "O-1001"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "error: timeout: get_order did not answer"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": '}}],
        },
    ]
    first, second = trace_of(messages).turns[0].tool_calls
    assert (first.error_kind, first.error) == ("timeout", "timeout: get_order did not answer")
    assert (second.error_kind, second.args) == ("invalid_arguments", {})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"request": {"messages": []}, "response": ', "line 2 is not JSON"),
        ('{"request": {"messages": []}}', "line 2 is not a logged Chat Completions call: response: Field required"),
    ],
)
def test_a_malformed_line_is_an_input_error_naming_file_line_and_shape(tmp_path: Path, line: str, message: str) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(LOG.read_text(encoding="utf-8").splitlines()[0] + "\n" + line + "\n", encoding="utf-8")
    code, _, err = cli("import", str(QUICKSTART), str(log))
    assert code == 2
    assert message in err and f"{log}:2" in err and '"response": {"choices"' in err


def test_the_log_is_json_lines_of_request_and_response() -> None:
    for raw in LOG.read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        assert set(record) == {"request", "response"} and record["response"]["object"] == "chat.completion"


def test_an_anthropic_messages_log_is_read_and_judged_like_the_same_chat_log() -> None:
    assert (detect_format(LOG), detect_format(ANTHROPIC_LOG)) == ("openai-chat", "anthropic-messages")
    project = load_project(QUICKSTART)
    chat = [judge_trace(project, t, project.scenarios()) for t in read_log(LOG, "openai-chat")]
    messages = [judge_trace(project, t, project.scenarios()) for t in read_log(ANTHROPIC_LOG, "anthropic-messages")]
    assert [(j.trace.case_id, j.path, j.signatures) for j in messages] == [(j.trace.case_id, j.path, j.signatures) for j in chat]
    first = messages[0].trace.turns[0]
    assert first.text == "Let me look that up." and first.tool_calls[0].result == {"order_id": "O-1001", "status": "shipped"}
    code, out, _ = cli("import", str(QUICKSTART), str(ANTHROPIC_LOG))
    assert code == 1 and "(anthropic-messages)" in out and "3 trace(s): 2 passed, 1 failed (broke a contract)" in out


def test_an_anthropic_tool_result_with_is_error_is_the_calls_error() -> None:
    messages = [
        {"role": "user", "content": "Where is my order O-1001?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_order", "input": {"order_id": "O-1001"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "timeout: no answer", "is_error": True}]},
    ]
    (call,) = anthropic_trace_of(messages).turns[0].tool_calls
    assert (call.error_kind, call.error, call.result) == ("timeout", "timeout: no answer", None)


def test_a_log_of_the_other_format_names_the_format_option() -> None:
    code, _, err = cli("import", str(QUICKSTART), str(ANTHROPIC_LOG), "--format", "openai-chat")
    assert code == 2 and "line 1 is not a logged Chat Completions call: response.choices: Field required" in err
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


def test_a_tool_output_missing_from_the_messages_comes_from_the_execute_tool_span(tmp_path: Path) -> None:
    document = json.loads(OTEL_LOG.read_text(encoding="utf-8"))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    for span in spans:
        for attribute in span["attributes"]:
            if attribute["key"] == "gen_ai.input.messages":
                messages = [m for m in json.loads(attribute["value"]["stringValue"]) if m["role"] != "tool"]
                attribute["value"]["stringValue"] = json.dumps(messages)
    log = tmp_path / "spans.json"
    log.write_text(json.dumps(document), encoding="utf-8")
    (call,) = read_otel(log)[0].turns[0].tool_calls
    assert (call.name, call.result) == ("get_order", {"order_id": "O-1001", "status": "shipped"})


def test_a_file_that_is_not_otlp_json_is_an_input_error(tmp_path: Path) -> None:
    log = tmp_path / "spans.json"
    log.write_text('{"spans": []}\n', encoding="utf-8")
    code, _, err = cli("import", str(QUICKSTART), str(log), "--format", "otel")
    assert code == 2 and "not OTLP JSON: no resourceSpans list" in err and '"resourceSpans": [{"scopeSpans"' in err
