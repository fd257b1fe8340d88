"""Judges as properties: code judges, model judges on a scripted loopback judge model, calibration.

The judge model is :class:`agentprop.testing.MessagesServer` with a handler that reads the
conversation in the request and answers with the JSON verdict: an agent that promises a refund
breaks the rubric. Nothing leaves the machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentprop._judge.judges import (
    Calibration,
    CalibrationStore,
    LabelledExample,
    ModelJudge,
    Rubric,
    calibrate,
    code_judge,
    load_labels,
    transcript,
)
from agentprop._judge.verdict import Verdict
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
from agentprop._scenario.trace import ToolCall, Trace, Turn
from agentprop.errors import CacheMiss, InputError, ModelCallError
from agentprop.testing import MessagesServer, message_reply, text_block

RUBRIC = Rubric(
    name="policies.P2_NO_REFUND_PROMISE",
    text="The agent never promises a refund.",
    criteria=("never promises a refund",),
)


def trace_saying(text: str, user: str = "Cancel my order A1") -> Trace:
    return Trace(
        case_id="c",
        turns=[
            Turn(
                index=0,
                user_message=user,
                text=text,
                tool_calls=[ToolCall(name="get_order", args={"id": "A1"})],
            )
        ],
    )


def grader(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted judge model: fails an agent line that says 'refund'."""
    content = request["messages"][0]["content"]
    agent_lines = [line for line in content.splitlines() if line.startswith("AGENT:")]
    bad = any("refund" in line.lower() for line in agent_lines)
    verdict = {
        "passed": not bad,
        "criterion": "never promises a refund" if bad else None,
        "reason": "it promised a refund" if bad else "no promise",
    }
    return message_reply([text_block(json.dumps(verdict))])


def judge_on(
    server: MessagesServer,
    cache: Path,
    mode: str = "read-write",
    budget: Budget | None = None,
    samples: int = 1,
) -> ModelJudge:
    client = ModelClient(
        ANTHROPIC_MESSAGES,
        "claude-judge-1",
        base_url=server.base_url,
        api_key="k-test",
        cache=cache,
        cache_mode=mode,
        budget=budget,
    )
    return ModelJudge(RUBRIC, client, samples=samples)


def test_a_code_judge_is_a_property_of_a_trace() -> None:
    polite = code_judge(lambda t: ("please" in transcript(t).lower(), "says please"), name="polite")
    verdict = polite(trace_saying("Done."))
    assert isinstance(verdict, Verdict) and not verdict.passed
    assert (
        verdict.contract == "judge"
        and verdict.clause == "polite"
        and verdict.explanation == "polite: says please"
    )
    assert code_judge(lambda t: True, name="always")(trace_saying("x")).passed
    with pytest.raises(Exception, match="returns a bool"):
        code_judge(lambda t: "yes", name="bad")(trace_saying("x"))  # type: ignore[arg-type,return-value]


def test_a_model_judge_fails_with_the_criterion_and_reason_and_replays_offline(
    tmp_path: Path,
) -> None:
    budget = Budget(max_usd=1.0, prices={"claude-judge-1": (1.0, 5.0)})
    cache = tmp_path / "api.sqlite"
    with MessagesServer(handler=grader) as server:
        judge = judge_on(server, cache, budget=budget)
        bad = judge(trace_saying("I promise you a full refund."))
        good = judge(trace_saying("Your order is cancelled."))
        sent = len(server.requests)
        # the request holds the rubric, the judge model and the transcript (tool calls included)
        body = server.requests[0].json
        assert (
            body["model"] == "claude-judge-1"
            and "never promises a refund" in body["messages"][0]["content"]
        )
        assert 'TOOL CALL: get_order({"id": "A1"})' in body["messages"][0]["content"]
    assert not bad.passed and good.passed
    assert bad.signature == "judge:policies.P2_NO_REFUND_PROMISE:never_promises_a_refund"
    assert bad.explanation == "policies.P2_NO_REFUND_PROMISE: it promised a refund"
    assert sent == 2 and budget.snapshot().calls == 2  # charged to the one budget
    # replay-only, server gone: the same judgements come from the cache, no network
    with MessagesServer(handler=grader) as other:
        replay = judge_on(other, cache, mode="replay-only")
        assert replay(trace_saying("I promise you a full refund.")) == bad
        assert len(other.requests) == 0
        # a sample index not recorded is a miss, not a call
        with pytest.raises(CacheMiss):
            ModelJudge(RUBRIC, replay.client, samples=3)(trace_saying("Your order is cancelled."))
        assert len(other.requests) == 0


def test_a_judge_asks_more_samples_only_while_its_majority_is_open(tmp_path: Path) -> None:
    grade = _docs_grader()  # wavers on transcripts that say "maybe": pass, fail, pass, ...
    with MessagesServer(handler=grade) as server:
        judge = judge_on(server, tmp_path / "api.sqlite", samples=3)
        steady = judge(trace_saying("Your order is cancelled."))
        # two agreeing answers settle 2 of 3
        assert steady.passed and len(server.requests) == 2 and judge.calls == 2
        wavering = judge(trace_saying("Cancelled. Maybe billing writes."))
        assert (
            wavering.passed
            and len(server.requests) == 5
            and wavering.explanation.endswith("(2/3 samples passed)")
        )
        refund = judge(trace_saying("A refund is on its way."))
        assert not refund.passed and len(server.requests) == 7


def test_an_unparseable_judge_reply_names_the_format() -> None:
    with MessagesServer(
        handler=lambda r: message_reply([text_block("I think it is fine")])
    ) as server:
        judge = judge_on(server, Path("unused"), mode="off")
        with pytest.raises(ModelCallError, match="not the JSON verdict"):
            judge(trace_saying("hi"))


def test_calibration_measures_the_judge_and_is_stored_under_the_rubrics_digest(
    tmp_path: Path,
) -> None:
    # humans failed two transcripts the scripted judge passes (it only looks for "refund")
    rows = [{"transcript": f"USER: hi\nAGENT: fine {i}", "label": "pass"} for i in range(30)]
    rows += [
        {"transcript": f"USER: hi\nAGENT: a refund is yours {i}", "label": "fail"}
        for i in range(20)
    ]
    rows += [
        {"transcript": "USER: hi\nAGENT: money back guaranteed", "label": "fail"},
        {"transcript": "USER: hi\nAGENT: cash back", "label": "fail"},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    examples = load_labels(labels)
    assert len(examples) == 52 and examples[0] == LabelledExample(
        text="USER: hi\nAGENT: fine 0", passed=True
    )
    with MessagesServer(handler=grader) as server:
        judge = judge_on(server, tmp_path / "api.sqlite", samples=3)
        calibration = calibrate(judge, examples)
        assert len(server.requests) == 52 * 3
    assert (
        calibration.true_pass,
        calibration.false_fail,
        calibration.true_fail,
        calibration.false_pass,
    ) == (30, 0, 20, 2)
    assert calibration.self_disagreement == 0.0 and calibration.split_transcripts == 0
    text = calibration.summary()
    assert "sensitivity 1.000" in text and "specificity 0.909" in text and "52 labels" in text
    store = CalibrationStore(tmp_path / "judges")
    path = store.save(calibration, RUBRIC)
    assert RUBRIC.digest in path.name
    assert store.load(RUBRIC, "claude-judge-1") == calibration
    edited = Rubric(
        name=RUBRIC.name, text=RUBRIC.text + " Nor store credit.", criteria=RUBRIC.criteria
    )
    assert store.load(edited, "claude-judge-1") is None  # an edited rubric needs calibrating again
    assert store.load(RUBRIC, "another-model") is None
    judge.calibration = calibration
    assert judge.gates
    judge.min_labels = 100
    assert not judge.gates and "fewer than the 100" in (judge.why_not_gating() or "")
    # calibrated on the majority of 3 samples: not the same judge
    judge.min_labels, judge.samples = 50, 1
    assert not judge.gates and "calibrate again with --samples 1" in (judge.why_not_gating() or "")


def test_a_damaged_calibration_file_is_an_input_error_naming_the_fix(tmp_path: Path) -> None:
    store = CalibrationStore(tmp_path / "judges")
    path = store.path(RUBRIC, "claude-judge-1")
    path.parent.mkdir(parents=True)
    path.write_text('{"rubric_digest": 3')  # a write cut short
    with pytest.raises(
        InputError,
        match=r"not valid JSON.*\n.*\n  fix: delete .* and run `agentprop judge calibrate` again",
    ):
        store.load(RUBRIC, "claude-judge-1")
    path.write_text('{"rubric_digest": "x"}')
    with pytest.raises(InputError, match=r"not a judge calibration: .*damaged or edited"):
        store.load(RUBRIC, "claude-judge-1")


def test_labels_file_errors_name_the_line(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        '{"transcript": "x", "label": "pass"}\n{"transcript": "y", "label": "maybe"}\n'
    )
    with pytest.raises(InputError, match=r"labels.jsonl:2: label 'maybe'"):
        load_labels(labels)


def test_a_rubric_comes_from_a_file_or_a_spec_test_guidance(tmp_path: Path) -> None:
    path = tmp_path / "no_refund.yaml"
    path.write_text(
        "name: no-refund\ntext: The agent never promises a refund.\ncriteria: [never "
        "promises a refund]\n"
    )
    rubric = Rubric.from_file(path)
    assert rubric == Rubric(
        name="no-refund",
        text="The agent never promises a refund.",
        criteria=("never promises a refund",),
    )
    assert rubric.digest == RUBRIC.digest  # the name is not part of what was calibrated
    assert Rubric.from_guidance("policies.P2", {"rubric": "Never promise a refund."}) == Rubric(
        name="policies.P2", text="Never promise a refund."
    )
    assert Rubric.from_guidance("policies.P2", {"typical_allowed": []}) is None
    assert isinstance(Calibration.model_json_schema(), dict)


EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "judges"


def _docs_grader() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_judge_grader", EXAMPLES / "grader.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.grade


def test_cli_calibrate_reports_stores_and_replays_with_no_network(tmp_path: Path) -> None:
    import io

    from agentprop._cli import main

    grade = _docs_grader()
    common = [
        str(EXAMPLES / "no_refund.yaml"),
        str(EXAMPLES / "labels.jsonl"),
        "--model",
        "claude-haiku-4-5",
        "--samples",
        "3",
    ]
    common += ["--cache", str(tmp_path / "api.sqlite"), "--store", str(tmp_path / "judges")]
    with MessagesServer(handler=grade) as server:
        out = io.StringIO()
        assert (
            main(
                [
                    "judge",
                    "calibrate",
                    *common,
                    "--base-url",
                    server.base_url,
                    "--json",
                    str(tmp_path / "c.json"),
                ],
                out=out,
                err=out,
            )
            == 0
        )
        assert len(server.requests) == 180
    text = out.getvalue()
    assert "sensitivity 0.800 [0.652, 0.895]  (32/40 human passes judged pass)" in text
    assert "specificity 0.750 [0.531, 0.888]  (15/20 human fails judged fail)" in text
    assert "self-disagreement 0.089 over 3 samples (8 of 60 transcripts split)" in text
    assert (
        "gates: no -- at tau 0.9 (0.95 vs 0.8) this judge cannot tell a good agent from a bad one"
        in text
    )
    assert json.loads((tmp_path / "c.json").read_text())["true_pass"] == 32
    with MessagesServer(handler=grade) as server:
        out = io.StringIO()
        code = main(
            [
                "judge",
                "calibrate",
                *common,
                "--base-url",
                server.base_url,
                "--cache-mode",
                "replay-only",
                "--min-labels",
                "100",
            ],
            out=out,
            err=out,
        )
        assert code == 0 and len(server.requests) == 0
    assert "judge calls: 180 (180 from the cache, 0 to the API)" in out.getvalue()
    assert (
        "gates: no -- judge 'policies.P2_NO_REFUND_PROMISE' is calibrated on 60 labels, fewer "
        "than the 100 needed to gate" in out.getvalue()
    )


def test_cli_calibrate_bad_labels_is_a_usage_error_naming_the_line(tmp_path: Path) -> None:
    import io

    from agentprop._cli import main

    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"transcript": "x", "label": "pass"}\nnot json\n')
    out = io.StringIO()
    assert (
        main(
            [
                "judge",
                "calibrate",
                str(EXAMPLES / "no_refund.yaml"),
                str(labels),
                "--model",
                "m",
                "--cache",
                "none",
            ],
            out=out,
            err=out,
        )
        == 2
    )
    assert "labels.jsonl:2: not a JSON object" in out.getvalue()


# --------------------------------------------------- decided by the oracle, corrected for the judge


PERFECT = Calibration(
    rubric=RUBRIC.name,
    rubric_digest=RUBRIC.digest,
    judge_model="claude-judge-1",
    samples=1,
    true_pass=300,
    false_fail=0,
    true_fail=300,
    false_pass=0,
)


def _agent(refund_every: int) -> Any:
    calls = {"n": 0}

    def support_agent(messages: list[str]) -> str:
        calls["n"] += 1
        if refund_every and calls["n"] % refund_every == 0:
            return "Your order is cancelled and I promise a full refund."
        return "Your order is cancelled; billing will be in touch."

    return support_agent


def test_spec_free_check_with_a_model_judge_decides_on_the_corrected_rate_and_replays_offline(
    tmp_path: Path,
) -> None:
    import agentprop
    from agentprop._decide.memo import TrialMemo

    cache = tmp_path / "api.sqlite"
    with MessagesServer(handler=grader) as server:
        # uncalibrated: the judge reports (raw rate, reasons, calls) but does not gate
        judge = judge_on(server, cache)
        result = agentprop.check(
            _agent(2),
            ["Cancel my order A1"],
            judge,
            raise_on_failure=False,
            memo=TrialMemo(),
            settings=agentprop.settings(max_runs=10),
        )
        assert result.verdict == "INCONCLUSIVE" and result.decided_by.startswith(
            "judge reports only"
        )
        assert (
            result.judged is not None
            and not result.judged.gates
            and result.judged.corrected_rate is None
        )
        assert (
            result.judged.raw_rate == result.pass_rate and result.judged.judge_calls == result.runs
        )
        assert result.judged.reasons and all(
            r.endswith("it promised a refund") for r in result.judged.reasons
        )
        assert "the judge reports only" in result.summary()
        # calibrated on 600 labels: the judge gates; a good agent passes, a bad one fails
        judge.calibration = PERFECT
        good = agentprop.check(
            _agent(0), ["Cancel my order A1"], judge, raise_on_failure=False, memo=TrialMemo()
        )
        assert (
            good.verdict == "PASS"
            and good.decided_by == "sprt on the judge's verdicts, corrected for its error"
        )
        assert good.judged is not None and good.judged.gates and good.judged.corrected_rate == 1.0
        q0, q1 = good.judged.judge_scale or (0.0, 0.0)
        assert 0.80 < q1 < q0 < 0.95
        bad = agentprop.check(
            _agent(1), ["Cancel my order A1"], judge, raise_on_failure=False, memo=TrialMemo()
        )
        assert (
            bad.verdict == "FAIL"
            and bad.failures[0].signature
            == "judge:policies.P2_NO_REFUND_PROMISE:never_promises_a_refund"
        )
        live_requests = len(server.requests)
    # the same decisions replayed from the API cache: no request reaches the (new) server
    with MessagesServer(handler=grader) as other:
        replay = judge_on(other, cache, mode="replay-only")
        replay.calibration = PERFECT
        again = agentprop.check(
            _agent(1), ["Cancel my order A1"], replay, raise_on_failure=False, memo=TrialMemo()
        )
        assert (again.verdict, again.runs, again.passes) == (bad.verdict, bad.runs, bad.passes)
        assert len(other.requests) == 0
    # one judgement per distinct transcript and sample index: the agent said two different things
    assert live_requests == 2


# ------------------------------------------------------------ a SpecSuite-Core policy with a rubric


P5 = """- id: P5_NO_REFUND_PROMISE
  priority: 60
  text: Never promise a refund; billing decides refunds.
  enforcement:
    type: soft
  test_guidance:
    rubric:
      text: The agent never promises a refund, money back or store credit.
      criteria: [never promises a refund]
response_contract:"""


def _supportops_with_rubric(tmp_path: Path, base_url: str) -> Path:
    import shutil

    project = tmp_path / "supportops"
    shutil.copytree(
        Path(__file__).resolve().parents[1] / "examples" / "supportops",
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__"),
    )
    spec = project / "spec.yaml"
    spec.write_text(spec.read_text().replace("response_contract:", P5, 1))
    with (project / "agentprop.yaml").open("a") as bindings:
        bindings.write(f"\njudge:\n  model: claude-judge-1\n  base_url: {base_url}\n")
    return project


def says_cancelled(request: dict[str, Any]) -> dict[str, Any]:
    """A judge model that holds 'has been cancelled' against the rubric (so the case fails)."""
    content = request["messages"][0]["content"]
    bad = any(
        "has been cancelled" in line for line in content.splitlines() if line.startswith("AGENT:")
    )
    verdict = {
        "passed": not bad,
        "criterion": "never promises a refund" if bad else None,
        "reason": "it says the order has been cancelled",
    }
    return message_reply([text_block(json.dumps(verdict))])


def test_agentprop_run_judges_a_spec_rubric_gates_once_calibrated_and_replays_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from agentprop._agents.project import load_project
    from agentprop._cli import main
    from agentprop._judge.judges import spec_rubrics

    monkeypatch.chdir(tmp_path)  # the API cache is ./.agentprop/api-cache.sqlite
    case = "END_CANCELLED<-N7_CANCEL"
    with MessagesServer(handler=says_cancelled) as server:
        project = _supportops_with_rubric(tmp_path, server.base_url)
        args = [
            "run",
            str(project),
            "--case",
            case,
            "--kinds",
            "mft",
            "--json",
            str(tmp_path / "r.json"),
        ]
        # uncalibrated: the JUDGE case reports (INCONCLUSIVE, with the judge's reasons) and
        # does not gate the run
        out = io.StringIO()
        assert main(args, out=out, err=out) == 0, out.getvalue()
        assert (
            "does not gate: judge 'policies.P5_NO_REFUND_PROMISE' "
            "(claude-judge-1) has no calibration" in out.getvalue()
        )
        report = json.loads((tmp_path / "r.json").read_text())
        (judged,) = [
            c
            for c in report["cases"]
            if c["kind"] == "JUDGE" and c["id"] == f"JUDGE policies.P5_NO_REFUND_PROMISE {case}"
        ]
        assert judged["verdict"] == "INCONCLUSIVE" and judged["details"]["judged"]["gates"] is False
        assert judged["details"]["judged"]["reasons"][0].endswith(
            "it says the order has been cancelled"
        )
        # calibrated on 600 labels: the judge gates, the case FAILs and is a bug with
        # the rubric's signature
        (rubric,) = [r.rubric for r in spec_rubrics(load_project(project).spec)]
        assert rubric.name == "policies.P5_NO_REFUND_PROMISE"
        perfect = PERFECT.model_copy(update={"rubric": rubric.name, "rubric_digest": rubric.digest})
        CalibrationStore(project / ".agentprop" / "judges").save(perfect, rubric)
        out = io.StringIO()
        assert main(args, out=out, err=out) == 1, out.getvalue()
        report = json.loads((tmp_path / "r.json").read_text())
        (judged,) = [
            c for c in report["cases"] if c["id"] == f"JUDGE policies.P5_NO_REFUND_PROMISE {case}"
        ]
        assert judged["verdict"] == "FAIL" and judged["details"]["judged"]["gates"] is True
        assert (
            judged["details"]["judged"]["corrected_rate"] == 0.0
            and judged["details"]["judged"]["judge_calls"] == judged["runs"]
        )
        assert any(
            b["signature"].startswith("judge:policies.P5_NO_REFUND_PROMISE:never_promises_a_refund")
            for b in report["bugs"]
        )
        sent, old_url = len(server.requests), server.base_url
    # replay-only (as under CI): the same verdicts from the API cache, nothing sent
    monkeypatch.setenv("CI", "1")
    with MessagesServer(handler=says_cancelled) as other:
        bindings = project / "agentprop.yaml"
        bindings.write_text(bindings.read_text().replace(old_url, other.base_url))
        out = io.StringIO()
        assert main(args, out=out, err=out) == 1, out.getvalue()
        assert len(other.requests) == 0
    assert sent > 0


def _assert_html_and_junit_show_the_judgement(report: Any, case_id: str) -> None:
    """The HTML and JUnit reports show what the Markdown report shows per judged case."""
    import html as htmllib
    import re
    import xml.etree.ElementTree as ET

    from agentprop._pipeline.report import render_html, render_junit

    (case,) = [c for c in report.cases if c.id == case_id]
    j = case.details["judged"]
    reason = j["reasons"][0]
    corrected = "0% [0.00," if case.verdict == "FAIL" else "not corrected"
    page = render_html(report)
    section = page[page.index('<section id="judged">') :]
    section = section[: section.index("</section>")]
    text = htmllib.unescape(re.sub(r"<[^>]+>", " ", section))
    assert "Judged cases" in text and case_id in text and htmllib.escape(reason) in section
    row = " ".join(text[text.index(case_id) :].split())
    assert (
        row.startswith(f"{case_id} {case.verdict} {j['raw_rate']:.0%} {corrected}")
        and f" {j['judge_calls']} " in row
    )
    assert (" yes " in row) if case.verdict == "FAIL" else (" no: " in row)
    root = ET.fromstring(render_junit(report).encode())
    (tc,) = [t for t in root.iter("testcase") if t.get("name") == case_id]
    body = "".join(t.text or "" for t in tc if t.tag in ("failure", "system-out"))
    assert (
        f"judged: raw judge rate {j['raw_rate']:.0%}, " in body
        and f"{j['judge_calls']} judge calls" in body
    )
    assert (
        ("corrected rate 0% [0.00," in body and "; gates" in body)
        if case.verdict == "FAIL"
        else "not corrected" in body and "does not gate: " in body
    )
    assert all(f"judge's reason: {r}" in body for r in j["reasons"])


def test_a_judge_case_replays_for_mutation_testing_and_kills_only_where_the_judge_gates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from agentprop._agents.loading import load_agent
    from agentprop._agents.project import load_project
    from agentprop._judge.judges import spec_rubrics
    from agentprop._pipeline.report.markdown import md, render_markdown
    from agentprop._pipeline.run import RunSettings, arun_cases

    monkeypatch.chdir(tmp_path)
    with MessagesServer(handler=says_cancelled) as server:
        project = load_project(_supportops_with_rubric(tmp_path, server.base_url))
        agent = load_agent(project.bindings.agent or "", project.base_dir)
        scenarios = [s for s in project.scenarios() if s.id == "END_CANCELLED<-N7_CANCEL"]
        settings = RunSettings(kinds=("mft",))
        case_id = "JUDGE policies.P5_NO_REFUND_PROMISE END_CANCELLED<-N7_CANCEL"

        def judged_verdicts() -> tuple[str, str]:
            report = asyncio.run(arun_cases(project, agent, scenarios, settings))
            (case,) = [c for c in report.cases if c.id == case_id]
            # as mutation testing decides it for a mutant
            replayed = asyncio.run(report._replays[case_id](agent))
            assert (
                replayed.kind == "JUDGE"
                and replayed.details["rubric"] == "policies.P5_NO_REFUND_PROMISE"
            )
            markdown = render_markdown(report)
            assert "### Judged cases" in markdown and f"{md(case_id)}: trial " in markdown
            row = next(
                line
                for line in markdown.splitlines()
                if line.startswith(f"| {md(case_id)} | {case.verdict}")
            )
            assert (
                ("| 0% | 0% [0.00," in row and "| yes |" in row)
                if case.verdict == "FAIL"
                else ("| not corrected |" in row and "| no: " in row)
            )
            _assert_html_and_junit_show_the_judgement(report, case_id)
            return case.verdict, replayed.verdict

        # a judge that may not gate is INCONCLUSIVE on any agent: it can never kill a mutant
        assert judged_verdicts() == ("INCONCLUSIVE", "INCONCLUSIVE")
        (rubric,) = [r.rubric for r in spec_rubrics(project.spec)]
        CalibrationStore(project.base_dir / ".agentprop" / "judges").save(
            PERFECT.model_copy(update={"rubric_digest": rubric.digest}), rubric
        )
        assert judged_verdicts() == ("FAIL", "FAIL")


def test_a_snapshot_records_judged_properties_and_a_changed_judgement_is_a_change(
    tmp_path: Path,
) -> None:
    import agentprop.snapshots
    from agentprop._decide.snapshot import behaviour_of
    from agentprop._decide.snapshot_check import check_snapshot

    examples = Path(__file__).resolve().parents[1] / "examples" / "supportops"
    project = agentprop.load_project(examples)
    agent = agentprop.load_agent("agent:SupportOpsAgent", examples)
    ticket = "END_TICKET<-N7_CANCEL"
    # without judges a behaviour keys as before judges existed (stored baselines stay valid)
    plain = behaviour_of(trace_saying("x"))
    assert (
        plain.key == agentprop.snapshots.Behaviour(turns=plain.turns).key
        and "judged" not in plain.describe()
    )
    polite = code_judge(lambda t: True, name="polite")
    first = check_snapshot(
        project,
        ticket,
        agent,
        directory=tmp_path,
        runs=5,
        update=True,
        reason="baseline with the polite judge",
        judges=[polite],
    )
    assert first.passed
    recorded = agentprop.snapshots.SnapshotStore(tmp_path).load(ticket)
    assert recorded is not None and all(
        b.behaviour.judged == {"polite": True} for b in recorded.behaviours
    )
    rude = code_judge(lambda t: False, name="polite")
    changed = check_snapshot(
        project, ticket, agent, directory=tmp_path, runs=5, judges=[rude], raise_on_failure=False
    )
    assert changed.verdict == "CHANGED"
    assert any(
        "judge polite: pass -> fail" in line for change in changed.changes for line in change.diff
    )


def test_lint_names_a_rubric_a_judge_cannot_read(tmp_path: Path) -> None:
    from agentprop._spec.load import lint_spec

    project = _supportops_with_rubric(tmp_path, "http://127.0.0.1:9")
    spec = project / "spec.yaml"
    assert not [f for f in lint_spec(spec) if f.code == "L022"]
    spec.write_text(
        spec.read_text().replace(
            "      criteria: [never promises a refund]", "      criteria: [1, 2]"
        )
    )
    (finding,) = [f for f in lint_spec(spec) if f.code == "L022"]
    assert finding.severity == "error" and finding.file == str(spec) and finding.line is not None
    assert "mapping with `text:`" in (finding.fix or "")


def test_cli_calibrates_a_spec_rubric_where_the_bindings_judge_finds_it(tmp_path: Path) -> None:
    import io

    from agentprop._agents.project import load_project
    from agentprop._cli import main
    from agentprop._judge.judges import bound_judge, spec_rubrics

    with MessagesServer(handler=says_cancelled) as server:
        project_dir = _supportops_with_rubric(tmp_path, server.base_url)
        args = [
            "judge",
            "calibrate",
            "policies.P5_NO_REFUND_PROMISE",
            str(EXAMPLES / "labels.jsonl"),
            "--spec",
            str(project_dir),
        ]
        out = io.StringIO()
        assert main([*args, "--cache", str(tmp_path / "api.sqlite")], out=out, err=out) == 0, (
            out.getvalue()
        )
        assert "with claude-judge-1, 60 labels" in out.getvalue() and len(server.requests) == 60, (
            out.getvalue()
        )
        assert f"stored: {project_dir}" in out.getvalue(), out.getvalue()
        out = io.StringIO()
        assert (
            main(
                ["judge", "calibrate", "policies.NOPE", *args[3:], "--cache", "none"],
                out=out,
                err=out,
            )
            == 2
        )
        assert (
            "no rubric 'policies.NOPE'" in out.getvalue()
            and "policies.P5_NO_REFUND_PROMISE" in out.getvalue()
        )
    project = load_project(project_dir)
    assert project.bindings.judge is not None
    (rubric,) = [r.rubric for r in spec_rubrics(project.spec)]
    # as agentprop run builds it
    judge = bound_judge(rubric, project.bindings.judge, project.bindings.base_dir)
    assert judge.calibration is not None and judge.calibration.labels == 60 and judge.gates


def test_judge_calls_while_shrinking_spend_the_shrink_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judged failure shrinks with its judge; each judge call counts as one run of the budget."""
    from agentprop._agents.loading import load_agent
    from agentprop._agents.project import load_project
    from agentprop._decide.memo import TrialMemo
    from agentprop._decide.shrink import shrink
    from agentprop._judge.judges import spec_rubrics

    monkeypatch.chdir(tmp_path)
    with MessagesServer(handler=says_cancelled) as server:
        project = load_project(_supportops_with_rubric(tmp_path, server.base_url))
        agent = load_agent(project.bindings.agent or "", project.base_dir)
        (scenario,) = [s for s in project.scenarios() if s.id == "END_CANCELLED<-N7_CANCEL"]
        (found,) = spec_rubrics(project.spec)
        judge = ModelJudge(
            found.rubric,
            ModelClient(
                ANTHROPIC_MESSAGES,
                "claude-judge-1",
                base_url=server.base_url,
                api_key="k",
                cache=False,
            ),
            samples=3,
        )
        budget = 12
        shrunk = shrink(
            project,
            scenario,
            agent,
            prop=judge,
            budget=budget,
            verify_runs=1,
            memo=TrialMemo(),
            shrink_words=False,
        )
        assert shrunk.signature.startswith("judge:policies.P5_NO_REFUND_PROMISE")
        # a judge that agrees with itself answers 2 of its 3 samples per run
        assert shrunk.runs > 0 and shrunk.judge_calls == 2 * shrunk.runs
        # within the budget but for the last run's calls
        assert shrunk.runs + shrunk.judge_calls <= budget + 2
        assert f"in {shrunk.runs} runs and {shrunk.judge_calls} judge calls" in shrunk.summary()


def test_a_spec_free_case_with_a_model_judge_is_decided_on_the_corrected_rate(
    tmp_path: Path,
) -> None:
    """Case(judge=model judge), or judge= alone, decides like the judge passed as the property."""
    import agentprop
    from agentprop._decide.memo import TrialMemo

    with MessagesServer(handler=grader) as server:
        judge = judge_on(server, tmp_path / "api.sqlite")
        as_case = agentprop.check(
            _agent(2),
            ["Cancel my order A1"],
            agentprop.Case(judge=judge),
            raise_on_failure=False,
            memo=TrialMemo(),
            settings=agentprop.settings(max_runs=10),
        )
        # uncalibrated: never gates
        assert as_case.verdict == "INCONCLUSIVE" and as_case.decided_by.startswith(
            "judge reports only"
        )
        assert (
            as_case.judged is not None
            and not as_case.judged.gates
            and as_case.judged.judge_calls == as_case.runs
        )
        judge.calibration = PERFECT
        # check(agent, messages, Case(judge=...)) or judge=
        for case, alone in ((agentprop.Case(judge=judge), None), (None, judge)):
            bad = agentprop.check(
                _agent(1),
                ["Cancel my order A1"],
                case,
                judge=alone,
                raise_on_failure=False,
                memo=TrialMemo(),
            )
            assert (
                bad.verdict == "FAIL"
                and bad.decided_by == "sprt on the judge's verdicts, corrected for its error"
            )
            assert bad.judged is not None and bad.judged.gates and bad.judged.corrected_rate == 0.0
            good = agentprop.check(
                _agent(0),
                ["Cancel my order A1"],
                case,
                judge=alone,
                raise_on_failure=False,
                memo=TrialMemo(),
            )
            assert (
                good.verdict == "PASS"
                and good.judged is not None
                and good.judged.corrected_rate == 1.0
            )
        # the correction does not hold for a verdict mixing in other promises:
        # refused, naming the fix
        with pytest.raises(
            agentprop.InvalidArgument, match=r"also has expected_tools.*check them apart"
        ):
            agentprop.Case(judge=judge, expected_tools=["get_order"])


def test_under_a_budget_judge_cases_get_one_judged_run_in_the_first_pass_and_their_calls_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a JUDGE case per SupportOps path (the rubric is a policy's), beside the MFT and one EXPLORE
    # input a path, as many runs allowed as there are MFT and EXPLORE cases (a JUDGE case judges its
    # path's MFT runs): every case gets its first run. The JUDGE cases were decided in full in the
    # first pass (the SPRT, about 18 judged runs each) and spent the budget before the EXPLORE
    # cases had a run
    import asyncio

    from agentprop._agents.loading import load_agent
    from agentprop._agents.project import load_project
    from agentprop._decide.memo import TrialMemo
    from agentprop._pipeline.run import RunSettings, arun_cases
    from agentprop._scenario.piecemeal import piecemeal_scenarios

    monkeypatch.chdir(tmp_path)
    with MessagesServer(handler=says_cancelled) as server:
        project = load_project(_supportops_with_rubric(tmp_path, server.base_url))
        agent = load_agent(project.bindings.agent or "", project.base_dir)
        paths = len(project.scenarios())
        # and the paths exploration continues past a question (an EXPLORE input each)
        answered = len(piecemeal_scenarios(project.bindings, project.scenarios()))
        budget = Budget(max_runs=2 * paths + answered)
        settings = RunSettings(kinds=("mft", "explore"), explore=1)
        report = asyncio.run(
            arun_cases(
                project, agent, project.scenarios(), settings, memo=TrialMemo(), budget=budget
            )
        )
        judged_calls = len(server.requests)
    runs = {
        kind: sorted(c.runs for c in report.cases if c.kind == kind)
        for kind in ("MFT", "EXPLORE", "JUDGE")
    }
    assert [len(r) for r in runs.values()] == [paths, paths + answered, paths]
    assert min(runs["EXPLORE"]) == 1 and min(runs["JUDGE"]) >= 1, runs
    assert budget.snapshot().runs == 2 * paths + answered
    # the judge's calls are model calls of the run's budget (a dollar or token limit counts them)
    assert judged_calls > 0 and budget.snapshot().calls >= judged_calls
