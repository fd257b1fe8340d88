"""The run report as JUnit XML: one ``<testsuite>`` per case kind, one ``<testcase>`` per case.

A case that did not pass is a ``<failure>`` typed by its verdict (INCONCLUSIVE is never a
pass); NOT APPLICABLE cases and unrealisable paths are ``<skipped>``, never left out. Test
cases carry no ``time``: cases are decided concurrently; the root's ``time`` is the run's wall
time.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from agentprop._pipeline.report.model import BugReport, CaseReport, RunReport

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters XML 1.0 cannot hold (control characters an agent's text may contain)."""
_FAILING = ("FAIL", "UNSTABLE", "INCONCLUSIVE")


def xml_text(text: object) -> str:
    """``text`` with the characters XML 1.0 forbids written as ``\\xNN`` (ElementTree escapes
    the rest: ``<``, ``&``, quotes)."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def _rate(c: CaseReport) -> str:
    ci = f", 95% CI {c.interval[0]:.2f}-{c.interval[1]:.2f}" if c.interval else ""
    return f"pass rate {c.rate_text}{ci}"


def _clause(c: CaseReport) -> str | None:
    for f in c.failures:
        if f.clause:
            return f.clause
    return next((t.clause for t in c.traces if t.clause), None)


def _bug_lines(bug: BugReport, number: int, report: RunReport) -> list[str]:
    lines = [f"bug {number} [{bug.id}]: {bug.key}"]
    if bug.representative:
        shrunk = (
            next((c.shrunk for c in report.cases if c.id == bug.representative and c.shrunk), None)
            or {}
        )
        how = (
            (
                f"shrunk from {shrunk.get('original_units', '?')} to "
                f"{shrunk.get('kept_units', '?')} units in {bug.shrink_runs} runs"
                + ("" if bug.minimal else ", not proven minimal")
            )
            if bug.shrink_runs
            else (bug.note or "not shrunk")
        )
        lines.append(f"minimal reproducer (from case {bug.representative}; {how}):")
        if bug.shrink_runs and bug.minimality:
            lines.append(f"  {bug.minimality}")
    else:
        lines.append("reproducer:")
    lines.extend(
        f"  {d}"
        for d in (bug.diff or [f"turn {i}: {m}" for i, m in enumerate(bug.reproducer_messages, 1)])
    )
    if bug.world_kept:
        lines.append(f"  world changes it needs: {', '.join(bug.world_kept)}")
    if bug.world_scenario:
        lines.append(f"  world the scenario sets: {', '.join(bug.world_scenario)}")
    if bug.rate_text:
        lines.append(f"rate: {bug.rate_text}")
    if bug.corpus_entry:
        lines.append(f"corpus entry {bug.corpus_entry}")
    return lines


def _judged_lines(c: CaseReport) -> list[str]:
    """A JUDGE case's judgement: the raw judge rate, the rate corrected for the judge's error
    with its interval, the judge calls, whether it gates (or why not), and the judge's reason
    for each failing run."""
    j = c.details.get("judged") if c.kind == "JUDGE" else None
    if not isinstance(j, dict):
        return []
    interval = j.get("corrected_interval")
    corrected = (
        f"corrected rate {j['corrected_rate']:.0%} [{interval[0]:.2f}, {interval[1]:.2f}]"
        if j.get("corrected_rate") is not None and interval
        else "not corrected"
    )
    calls = "" if j.get("judge_calls") is None else f", {j['judge_calls']} judge calls"
    gates = "gates" if j.get("gates") else f"does not gate: {j.get('why_not') or ''}"
    lines = [f"judged: raw judge rate {j['raw_rate']:.0%}, {corrected}{calls}; {gates}"]
    lines += [f"judge's reason: {r}" for r in j.get("reasons") or []]
    return lines


def _case(parent: ET.Element, c: CaseReport, report: RunReport, classname: str) -> None:
    case = ET.SubElement(
        parent, "testcase", {"classname": xml_text(classname), "name": xml_text(c.id)}
    )
    numbers = {b.id: i for i, b in enumerate(report.bugs, 1)}
    if c.verdict in _FAILING:
        clause = _clause(c)
        first = c.failures[0].explanation if c.failures else (c.reason or "")
        if c.verdict == "INCONCLUSIVE":
            head = (
                f"INCONCLUSIVE after {c.runs} runs (the budget ran out before a "
                "decision; this is not a pass)"
            )
        else:
            head = f"{c.verdict}: {_rate(c)}"
        message = head + (f"; clause {clause}" if clause else "") + (f"; {first}" if first else "")
        body = [head, f"decided by {c.decided_by}" + (f" ({c.rule})" if c.rule else "")]
        if clause:
            body.append(f"clause: {clause}")
        body.extend(
            f"failure x{f.count} (first at trial {f.first_trial}): {f.signature}\n  {f.explanation}"
            for f in c.failures
        )
        for bug_id in c.bugs:
            bug = next((b for b in report.bugs if b.id == bug_id), None)
            if bug is not None:
                body.extend(_bug_lines(bug, numbers[bug_id], report))
        body.extend(_judged_lines(c))
        body.append("conversation: " + " | ".join(c.messages))
        failure = ET.SubElement(case, "failure", {"message": xml_text(message), "type": c.verdict})
        failure.text = xml_text("\n".join(body))
    elif c.verdict == "NOT APPLICABLE":
        ET.SubElement(
            case, "skipped", {"message": xml_text(f"NOT APPLICABLE: {c.reason or 'not decided'}")}
        )
    else:
        out = ET.SubElement(case, "system-out")
        out.text = xml_text(
            "\n".join(
                [
                    f"{_rate(c)}; decided by {c.decided_by}" + (f" ({c.rule})" if c.rule else ""),
                    *_judged_lines(c),
                ]
            )
        )


def _suite(root: ET.Element, name: str, props: dict[str, str] | None = None) -> ET.Element:
    suite = ET.SubElement(root, "testsuite", {"name": xml_text(name)})
    if props:
        properties = ET.SubElement(suite, "properties")
        for k, v in props.items():
            ET.SubElement(properties, "property", {"name": xml_text(k), "value": xml_text(v)})
    return suite


def _count(suite: ET.Element) -> dict[str, int]:
    cases = suite.findall("testcase")
    counts = {
        "tests": len(cases),
        "failures": sum(c.find("failure") is not None for c in cases),
        "errors": sum(c.find("error") is not None for c in cases),
        "skipped": sum(c.find("skipped") is not None for c in cases),
    }
    for k, v in counts.items():
        suite.set(k, str(v))
    return counts


def _mutants(root: ET.Element, spec_id: str, tdad: dict[str, Any]) -> None:
    mutation = tdad.get("mutation") or {}
    mutants = mutation.get("mutants") or []
    if not mutants:
        return
    suite = _suite(root, f"{spec_id} mutants", {"pack": str(mutation.get("pack_id", ""))})
    for m in mutants:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": xml_text(f"agentprop.{spec_id}.mutants"),
                "name": xml_text(m.get("id", "?")),
            },
        )
        status = m.get("status")
        rates = (
            f"probe {m.get('probe_violations', 0)}/{m.get('probe_runs', 0)} vs clean "
            f"{m.get('control_violations', 0)}/{m.get('control_runs', 0)}"
        )
        if status == "survived":
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "message": xml_text(f"mutant survived: no visible case killed it ({rates})"),
                    "type": "SURVIVED",
                },
            )
            failure.text = xml_text(
                f"{m.get('severity', '')} {m.get('category', '')}; cases run "
                f"{m.get('cases_run', 0)}, counted {m.get('cases_counted', 0)}"
            )
        elif status == "killed":
            out = ET.SubElement(case, "system-out")
            out.text = xml_text(
                f"killed by {m.get('killed_by')}: {m.get('killing_failure') or ''} ({rates})"
            )
        else:
            ET.SubElement(
                case,
                "skipped",
                {"message": xml_text(f"{status}: not counted in the mutation score ({rates})")},
            )


def _problem_name(problem: str, index: int) -> str:
    """``unrealisable path END_TICKET<-N9_UPDATE_ADDRESS`` of
    ``unrealisable path: ID [NODES]: …``."""
    label, _, rest = problem.partition(":")
    ident = rest.split()[0].rstrip(":") if rest.split() else ""
    return f"{label} {ident}" if ident and not ident.startswith("(") else f"{label} {index}"


def render_junit(report: RunReport) -> str:
    """The report as a JUnit XML document (UTF-8 text with its XML declaration)."""
    spec_id = report.spec.id
    root = ET.Element(
        "testsuites",
        {"name": xml_text(f"agentprop {spec_id}"), "time": f"{report.metrics.duration_s:.3f}"},
    )
    props = {
        "spec": spec_id,
        "spec_version": report.spec.version,
        "agent": report.agent.ref,
        "agentprop": report.agentprop_version,
        "seed": str(report.settings.get("seed", 0)),
    }
    for k, v in report.agent.faults.items():
        props[f"fault.{k}"] = f"{v:g}"
    for kind in dict.fromkeys(c.kind for c in report.cases):
        suite = _suite(root, f"{spec_id} {kind}", props)
        for c in report.cases:
            if c.kind == kind:
                _case(suite, c, report, f"agentprop.{spec_id}.{kind}")
    if report.problems:
        suite = _suite(root, f"{spec_id} unchecked paths")
        for i, problem in enumerate(report.problems, 1):
            name = _problem_name(problem, i)
            case = ET.SubElement(
                suite,
                "testcase",
                {"classname": xml_text(f"agentprop.{spec_id}.unchecked"), "name": xml_text(name)},
            )
            ET.SubElement(case, "skipped", {"message": xml_text(problem)})
    tdad = report.metrics.extra.get("tdad")
    if isinstance(tdad, dict):
        _mutants(root, spec_id, tdad)
    interrupted = report.metrics.extra.get("interrupted")
    if isinstance(interrupted, dict):  # a partial report must not read as a green run
        suite = _suite(root, f"{spec_id} run")
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": xml_text(f"agentprop.{spec_id}.run"), "name": "interrupted"},
        )
        message = (
            f"the run was interrupted ({interrupted.get('by', 'Ctrl-C')}) after "
            f"{interrupted.get('cases_decided', 0)} "
            "case(s) were decided; the rest were not run"
        )
        ET.SubElement(case, "error", {"type": "INTERRUPTED", "message": xml_text(message)})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root.findall("testsuite"):
        for k, v in _count(suite).items():
            totals[k] += v
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
