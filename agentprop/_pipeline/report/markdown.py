"""The run report as Markdown for a pull-request comment or ``$GITHUB_STEP_SUMMARY``: the bugs
first (signature, cases hit, minimal reproducer as a diff, rate with interval), then the
verdict counts, the coverage, the TDAD metrics, and the cases that did not pass.

It stays under :data:`MAX_CHARS` (GitHub takes 65,536 characters in a comment): when the
cases or bugs do not fit, the ones left out are counted in a line saying so. Every text from
the report is escaped, so an agent's words cannot turn into links, images or HTML.
"""

from __future__ import annotations

import re
from collections import Counter

from agentprop._pipeline.report.model import BugReport, CaseReport, RunReport

MAX_CHARS = 60_000
VERDICTS = ("FAIL", "UNSTABLE", "INCONCLUSIVE", "NOT APPLICABLE", "PASS")
_SPECIAL = re.compile(r"([\\`*_{}\[\]()!|~])")
_DIFF = re.compile(r"\[-(.*?)-\]|\{\+(.*?)\+\}", re.DOTALL)


def md(text: object) -> str:
    """Text as literal Markdown inside a line (a table cell, a list item after its marker):
    inline punctuation is backslash-escaped, ``<`` and ``&`` become entities, and line breaks
    become spaces (so no text starts a block of its own)."""
    s = str(text).replace("&", "&amp;").replace("<", "&lt;")
    return " ".join(_SPECIAL.sub(r"\\\1", s).split())


def _diff(line: str) -> str:
    out: list[str] = []
    last = 0
    for m in _DIFF.finditer(line):
        out.append(md(line[last : m.start()]))
        out.append(f"~~{md(m.group(1))}~~" if m.group(1) is not None else f"**{md(m.group(2))}**")
        last = m.end()
    out.append(md(line[last:]))
    return " ".join(p for p in out if p)


def _rate(bug: BugReport) -> str:
    return md(bug.rate_text)


def _bug(number: int, bug: BugReport, report: RunReport) -> str:
    lines = [f"**{number}. {md(bug.key)}** \\[{bug.id}\\]", ""]
    shown = ", ".join(md(c) for c in bug.cases[:3]) + (
        f" and {len(bug.cases) - 3} more" if len(bug.cases) > 3 else ""
    )
    lines.append(f"- hit by {len(bug.cases)} case(s): {shown}")
    if bug.rate_text:
        lines.append(f"- {_rate(bug)}")
    shrunk = (
        next((c.shrunk for c in report.cases if c.id == bug.representative and c.shrunk), None)
        or {}
    )
    if bug.shrink_runs:
        lines.append(
            f"- minimal reproducer (shrunk {shrunk.get('original_units', '?')} → "
            f"{shrunk.get('kept_units', '?')} units in {bug.shrink_runs} "
            f"runs{'' if bug.minimal else ', not proven minimal'}), as a diff from "
            f"{md(bug.representative or 'the case')}:"
        )
        if bug.minimality:
            lines.insert(len(lines) - 1, f"- {md(bug.minimality)}")
    elif bug.known:
        lines.append(f"- known bug (corpus entry {md(bug.corpus_entry or '')}); reproducer:")
    else:
        lines.append(f"- reproducer{': ' + md(bug.note) if bug.note else ''}:")
    for d in bug.diff or [f"turn {i}: {m}" for i, m in enumerate(bug.reproducer_messages, 1)]:
        lines.append(f"  - {_diff(d)}")
    if bug.world_kept:
        lines.append(f"- world changes it needs: {', '.join(md(w) for w in bug.world_kept)}")
    if bug.world_scenario:
        lines.append(f"- world the scenario sets: {', '.join(md(w) for w in bug.world_scenario)}")
    return "\n".join(lines)


def _case_row(c: CaseReport, numbers: dict[str, int]) -> str:
    ci = f"{c.interval[0]:.2f}–{c.interval[1]:.2f}" if c.interval else ""
    first = c.failures[0].explanation if c.failures else (c.reason or "")
    if len(first) > 200:
        first = first[:199] + "…"
    bugs = f"bug {', '.join(str(numbers[b]) for b in c.bugs if b in numbers)}: " if c.bugs else ""
    return (
        f"| {md(c.id)} | {c.kind} | {c.verdict} | {c.pass_rate:.0%} | {ci} | {c.runs} "
        f"| {bugs}{md(first)} |"
    )


JUDGED_REASONS_SHOWN = 3
"""The judge's reasons listed per judged case (the JSON report has one per failing run)."""


def _judged_lines(report: RunReport) -> list[str]:
    """Per JUDGE case: the raw judge rate, the rate corrected for the judge's error with its
    interval, the judge calls, whether it gates, and the judge's first reasons for failing runs."""
    judged = [
        c for c in report.cases if c.kind == "JUDGE" and isinstance(c.details.get("judged"), dict)
    ]
    if not judged:
        return []
    lines = [
        "",
        "### Judged cases",
        "",
        "| case | verdict | raw judge rate | corrected rate | judge calls | gates |",
        "| --- | --- | ---: | --- | ---: | --- |",
    ]
    reasons: list[str] = []
    for c in judged:
        j = c.details["judged"]
        interval = j.get("corrected_interval")
        corrected = (
            f"{j['corrected_rate']:.0%} [{interval[0]:.2f}, {interval[1]:.2f}]"
            if j.get("corrected_rate") is not None and interval
            else "not corrected"
        )
        calls = "" if j.get("judge_calls") is None else str(j["judge_calls"])
        gates = "yes" if j.get("gates") else f"no: {md(j.get('why_not') or '')}"
        lines.append(
            f"| {md(c.id)} | {c.verdict} | {j['raw_rate']:.0%} | {corrected} | {calls} | {gates} |"
        )
        shown = j.get("reasons") or []
        reasons += [f"- {md(c.id)}: {md(r)}" for r in shown[:JUDGED_REASONS_SHOWN]]
        if len(shown) > JUDGED_REASONS_SHOWN:
            reasons.append(
                f"- {md(c.id)}: … {len(shown) - JUDGED_REASONS_SHOWN} more failing run(s) (the "
                "JSON report has every reason)"
            )
    if reasons:
        lines += ["", "The judge's reasons for failing runs:", "", *reasons]
    return lines


def render_markdown(report: RunReport, *, max_chars: int = MAX_CHARS) -> str:
    """The summary as GitHub-flavoured Markdown, at most ``max_chars`` characters."""
    m = report.metrics
    counts: Counter[str] = Counter(c.verdict for c in report.cases)
    not_passing = [c for c in report.cases if c.verdict in ("FAIL", "UNSTABLE", "INCONCLUSIVE")]
    interrupted = m.extra.get("interrupted")
    mark = "⚠️" if interrupted else "✅" if not not_passing else "❌"
    head = [
        f"## {mark} agentprop: {md(report.spec.title or report.spec.id)} ({md(report.spec.id)})"
        + (" (interrupted)" if interrupted else ""),
        "",
        *(
            [
                f"**Interrupted** ({interrupted.get('by', 'Ctrl-C')}): the "
                f"{interrupted['cases_decided']} case(s) decided "
                "before it; the rest were not run or not decided.",
                "",
            ]
            if interrupted
            else []
        ),
        f"{m.cases} cases: {m.passed} passed, {m.failed} failed, {m.unstable} unstable"
        + (f", {m.inconclusive} inconclusive" if m.inconclusive else "")
        + (f", {m.not_applicable} not applicable" if m.not_applicable else "")
        + f" · {m.runs} agent runs · ${m.cost_usd:.4f} · {m.duration_s:.1f}s",
        "",
        f"agent {md(report.agent.ref)}"
        + (
            " with faults " + ", ".join(f"{md(k)}={v:g}" for k, v in report.agent.faults.items())
            if report.agent.faults
            else ""
        )
        + f" · seed {report.settings.get('seed', 0)} · agentprop {md(report.agentprop_version)}",
    ]
    numbers = {b.id: i for i, b in enumerate(report.bugs, 1)}
    found = [(i, b) for i, b in enumerate(report.bugs, 1) if b.origin == "cases"]
    met = [b for b in report.bugs if b.origin == "shrinking"]
    tail: list[str] = ["", "### Verdicts", "", "| verdict | cases |", "| --- | ---: |"]
    tail += [f"| {v} | {counts[v]} |" for v in VERDICTS if counts[v]]
    kinds = list(dict.fromkeys(c.kind for c in report.cases))
    if len(kinds) > 1:
        tail += ["", "| kind | cases | passed |", "| --- | ---: | ---: |"]
        tail += [
            f"| {k} | {sum(c.kind == k for c in report.cases)} | "
            f"{sum(c.kind == k and c.verdict == 'PASS' for c in report.cases)} |"
            for k in kinds
        ]
    coverage = m.extra.get("coverage") or {}
    br = coverage.get("branches") or {}
    if br:
        tail += ["", "### Coverage", ""]
        line = f"- branches: {len(br.get('covered', []))}/{len(br.get('all', []))} taken"
        if m.branch_coverage is not None:
            line += f" ({m.branch_coverage:.0%})"
        if br.get("realisable") is not None:
            line += f"; realisable coverage {br['realisable']:.0%}"
        if br.get("min_branch_coverage") is not None:
            line += (
                f" (min\\_branch\\_coverage {br['min_branch_coverage']}: "
                f"{'met' if br.get('met') else '**NOT MET**'})"
            )
        tail.append(line)
        if br.get("unrealisable"):
            tail.append(f"- unrealisable: {', '.join(md(b) for b in br['unrealisable'])}")
        if br.get("not_run"):
            tail.append(f"- not run: {', '.join(md(b) for b in br['not_run'])}")
        for gap in coverage.get("untested") or []:
            tail.append(f"- **not tested**: {gap['what']} {md(gap['id'])} ({md(gap['reason'])})")
        loops = br.get("loop") or []
        if loops:
            covered = br.get("covered", [])
            loop_list = ", ".join(
                md(b) + ("" if b in covered else " (not realised)") for b in loops
            )
            tail.append(f"- loops (unrolled once): {loop_list}")
    caps = coverage.get("capabilities") or {}
    if caps:
        tail.append(
            "- capabilities: "
            + ", ".join(f"{md(k)} {v['passed']}/{v['cases']}" for k, v in caps.items())
        )
    tdad = m.extra.get("tdad")
    if isinstance(tdad, dict):

        def p(key: str) -> str:
            v = tdad.get(key)
            return "–" if v is None else f"{v:.0%}"

        tail += [
            "",
            "### TDAD",
            "",
            f"VPR {p('vpr')} · HPR {p('hpr')} · RPR {p('rpr')} · MS {p('ms')} · SURS {p('surs')}",
        ]
        survived = [
            mu
            for mu in ((tdad.get("mutation") or {}).get("mutants") or [])
            if mu.get("status") == "survived"
        ]
        if survived:
            tail.append("")
            tail.append("surviving mutants: " + ", ".join(md(mu.get("id", "?")) for mu in survived))
    tail += _judged_lines(report)
    if report.problems:
        tail += [
            "",
            f"{len(report.problems)} path(s) not checked (the spec and bindings cannot realise "
            "them; see the report's `problems`).",
        ]

    def assemble(bug_count: int, case_count: int) -> str:
        parts = list(head)
        if found:
            parts += ["", f"### Bugs ({len(found)})", ""]
            for i, b in found[:bug_count]:
                parts += [_bug(i, b, report), ""]
            if bug_count < len(found):
                parts.append(
                    f"… and {len(found) - bug_count} more bug(s), left out to fit (the HTML or "
                    "JSON report has them all)"
                )
        if met:
            parts += [
                "",
                f"{len(met)} other failure(s) met only while shrinking (not "
                "confirmed, not shrunk): " + ", ".join(md(b.key) for b in met[:10]),
            ]
        parts += tail
        if not_passing:
            parts += [
                "",
                f"<details><summary>{len(not_passing)} case(s) that did not pass</summary>",
                "",
                "| case | kind | verdict | rate | 95% CI | runs | first failure |",
                "| --- | --- | --- | ---: | --- | ---: | --- |",
            ]
            parts += [_case_row(c, numbers) for c in not_passing[:case_count]]
            if case_count < len(not_passing):
                parts += [
                    "",
                    f"… and {len(not_passing) - case_count} more, left out to fit (the HTML or "
                    "JSON report has them all)",
                ]
            parts += ["", "</details>"]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(parts)) + "\n"

    bugs, rows = len(found), len(not_passing)
    text = assemble(bugs, rows)
    while len(text) > max_chars and rows > 0:
        rows = rows // 2 if rows > 8 else rows - 1
        text = assemble(bugs, rows)
    while len(text) > max_chars and bugs > 1:
        bugs -= 1
        text = assemble(bugs, rows)
    return text if len(text) <= max_chars else text[: max_chars - 2] + "…\n"
