"""The run report as one self-contained HTML file.

No CDN, no server: it opens from ``file://``. Small parts are rendered by jinja2 with
autoescaping; cases and traces travel as escaped JSON that no text can break out of, drawn by a
small script with ``textContent``, never as markup. jinja2 is optional
(:func:`require_jinja2` says how to install it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import Counter
from importlib import resources
from typing import TYPE_CHECKING, Any

from agentprop._pipeline.report.model import RunReport, RunTrace, SnapshotCheckReport
from agentprop.errors import InputError

if TYPE_CHECKING:
    import jinja2  # an optional dependency (the `report` extra): imported when rendering

VERDICT_ORDER = ("FAIL", "UNSTABLE", "INCONCLUSIVE", "NOT APPLICABLE", "PASS")
SNAPSHOT_ORDER = ("CHANGED", "NEW", "INCONCLUSIVE", "UPDATED", "MATCH")
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def require_jinja2() -> None:
    """Raise an input error naming the fix when jinja2 (the ``report`` extra) is missing."""
    try:
        import jinja2  # noqa: F401
    except ImportError:
        raise InputError(
            "the HTML report needs jinja2, which is not installed",
            fix="pip install 'agentprop[report]' (or pip install jinja2); --junit and "
            "--markdown need nothing more",
        ) from None


def script_json(data: Any) -> str:
    """``data`` as JSON safe to put inside ``<script type="application/json">``: every ``<``,
    ``>``, ``&``, U+2028 and U+2029 is written as a ``\\u`` escape (valid JSON, the same value),
    so no string in it can close the element or open a comment."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _asset(name: str) -> str:
    text = (
        resources.files("agentprop._pipeline.report")
        .joinpath("static", name)
        .read_text(encoding="utf-8")
    )
    if (
        "</script" in text.lower() or "</style" in text.lower()
    ):  # pragma: no cover - a bug in the assets
        raise AssertionError(f"{name} contains a closing tag that would end its element early")
    return text


def _environment() -> jinja2.Environment:
    require_jinja2()
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("agentprop._pipeline.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


_DIFF = re.compile(r"\[-(.*?)-\]|\{\+(.*?)\+\}", re.DOTALL)


def diff_parts(line: str) -> list[tuple[str, str]]:
    """The shrinker's word diff (``[-removed-]``, ``{+added+}``) as ``(kind, text)`` parts,
    kind ``del``, ``ins`` or ``text`` (the template escapes each)."""
    parts: list[tuple[str, str]] = []
    last = 0
    for m in _DIFF.finditer(line):
        if m.start() > last:
            parts.append(("text", line[last : m.start()]))
        parts.append(("del", m.group(1)) if m.group(1) is not None else ("ins", m.group(2)))
        last = m.end()
    if last < len(line):
        parts.append(("text", line[last:]))
    return parts


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _trace_data(run: RunTrace) -> dict[str, Any]:
    """A kept run as the page reads it: fields at their defaults left out (the script reads a
    missing field as its default), and ``raw_response`` only where it differs from the
    validated ``response``; this keeps the page of a large suite small."""
    data = run.model_dump(mode="json", exclude_defaults=True)
    data["passed"] = run.passed
    for turn, model in zip(data["trace"].get("turns", []), run.trace.turns):
        if model.raw_response == model.response:
            turn.pop("raw_response", None)
        turn.pop("usage", None)
        turn.pop("duration_s", None)
    return data


def _case_rows(report: RunReport) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """The cases as the page's script reads them (traces apart, parsed only when a case opens)."""
    numbers = {b.id: i for i, b in enumerate(report.bugs, 1)}
    rows: list[dict[str, Any]] = []
    traces: list[list[dict[str, Any]]] = []
    for c in report.cases:
        row = c.model_dump(mode="json", exclude={"traces"})
        row["first"] = c.failures[0].explanation if c.failures else (c.reason or "")
        row["bug_numbers"] = [numbers.get(b, 0) for b in c.bugs]
        row["n_traces"] = len(c.traces)
        rows.append(row)
        traces.append([_trace_data(t) for t in c.traces])
    return rows, traces


def _judged(report: RunReport) -> list[dict[str, Any]]:
    """Per JUDGE case, as the Markdown report shows it: the raw judge rate, the rate corrected
    for the judge's error with its interval, the judge calls, whether it gates (or why not),
    and the judge's reason for each failing run."""
    rows: list[dict[str, Any]] = []
    for c in report.cases:
        j = c.details.get("judged") if c.kind == "JUDGE" else None
        if not isinstance(j, dict):
            continue
        interval = j.get("corrected_interval")
        corrected = (
            f"{j['corrected_rate']:.0%} [{interval[0]:.2f}, {interval[1]:.2f}]"
            if j.get("corrected_rate") is not None and interval
            else "not corrected"
        )
        rows.append(
            {
                "id": c.id,
                "verdict": c.verdict,
                "raw": _pct(j.get("raw_rate")),
                "corrected": corrected,
                "calls": "–" if j.get("judge_calls") is None else str(j["judge_calls"]),
                "gates": "yes" if j.get("gates") else f"no: {j.get('why_not') or ''}",
                "reasons": [str(r) for r in j.get("reasons") or []],
            }
        )
    return rows


def _run_context(report: RunReport) -> dict[str, Any]:
    m = report.metrics
    counts: Counter[str] = Counter(c.verdict for c in report.cases)
    coverage = m.extra.get("coverage") or {}
    branches = coverage.get("branches") or {}
    rows, traces = _case_rows(report)
    kinds = list(dict.fromkeys(c.kind for c in report.cases))
    tdad = m.extra.get("tdad")
    mutation = (tdad or {}).get("mutation") or {}
    sampling = report.trace_sampling
    data = {
        "mode": "run",
        "cases": rows,
        "verdicts": [v for v in VERDICT_ORDER if counts[v]],
        "kinds": kinds,
        "bugs": [
            {"id": b.id, "number": i, "key": b.key, "origin": b.origin}
            for i, b in enumerate(report.bugs, 1)
        ],
        "split": (tdad or {}).get("split") or {},
    }
    return {
        "mode": "run",
        "report": report,
        "title": f"{report.spec.title or report.spec.id}: agentprop report",
        "counts": [(v, counts[v]) for v in VERDICT_ORDER],
        "kinds": [
            (
                k,
                sum(c.kind == k for c in report.cases),
                sum(c.kind == k and c.verdict == "PASS" for c in report.cases),
            )
            for k in kinds
        ],
        "metrics": m,
        "pct": _pct,
        "coverage": branches,
        "capabilities": coverage.get("capabilities") or {},
        "tree_svg": _tree_svg(report),
        "found_bugs": [(i, b) for i, b in enumerate(report.bugs, 1) if b.origin == "cases"],
        "met_bugs": [(i, b) for i, b in enumerate(report.bugs, 1) if b.origin == "shrinking"],
        "shrunk": {c.id: c.shrunk for c in report.cases if c.shrunk},
        "tdad": tdad,
        "mutants": mutation.get("mutants") or [],
        "mutation": mutation,
        "judged": _judged(report),
        "sampling": sampling,
        "traces_kept": sum(len(t) for t in traces),
        "traces_omitted": sum(c.traces_omitted for c in report.cases),
        "data_json": script_json(data),
        "traces_json": script_json(traces),
    }


def _tree_svg(report: RunReport) -> Any:
    from agentprop._pipeline.report.tree_svg import (
        render_tree_svg,  # markupsafe comes with jinja2
    )

    return render_tree_svg(report.tree, report.cases) if report.tree is not None else None


def _snapshot_context(report: SnapshotCheckReport) -> dict[str, Any]:
    counts: Counter[str] = Counter(r.verdict for r in report.results)
    rows: list[dict[str, Any]] = []
    for r in report.results:
        keys = list(
            dict.fromkeys(
                [
                    *sorted(r.baseline, key=lambda k: -r.baseline[k]),
                    *sorted(r.current, key=lambda k: -r.current[k]),
                ]
            )
        )
        changes = {ch.key: ch for ch in r.changes}
        behaviours = [
            {
                "key": k,
                "describe": r.descriptions.get(k, ""),
                "baseline": r.baseline.get(k, 0),
                "current": r.current.get(k, 0),
                "diff": changes[k].diff if k in changes else [],
                "nearest": changes[k].nearest if k in changes else None,
            }
            for k in keys
        ]
        rows.append(
            {
                "id": r.name,
                "kind": "SNAPSHOT",
                "verdict": r.verdict,
                "runs": r.runs,
                "baseline_runs": r.baseline_runs,
                "p_value": r.p_value,
                "alpha": r.alpha,
                "behaviours": behaviours,
                "notes": r.notes,
                "reason": r.reason,
                "pending_path": r.pending_path,
                "path": r.path,
                "directory": r.directory,
                "first": "; ".join(r.notes[:1])
                or (
                    f"{sum(ch.baseline_count == 0 for ch in r.changes)} new behaviour(s)"
                    if r.changes
                    else ""
                ),
            }
        )
    data = {
        "mode": "snapshot",
        "cases": rows,
        "verdicts": [v for v in SNAPSHOT_ORDER if counts[v]],
        "kinds": ["SNAPSHOT"],
        "bugs": [],
        "split": {},
    }
    return {
        "mode": "snapshot",
        "report": report,
        "title": f"{report.spec_id}: agentprop snapshot check",
        "counts": [(v, counts[v]) for v in SNAPSHOT_ORDER],
        "data_json": script_json(data),
        "traces_json": script_json([]),
    }


def render_html(report: RunReport | SnapshotCheckReport) -> str:
    """The report as one self-contained HTML page (UTF-8 text)."""
    env = _environment()
    context = _run_context(report) if isinstance(report, RunReport) else _snapshot_context(report)
    from markupsafe import Markup

    js = _asset("report.js")
    context["css"] = Markup(_asset("report.css"))
    context["js"] = Markup(js)
    # only this script may run: a CSP hash of it (defence in depth; every text is escaped anyway)
    context["script_hash"] = Markup(
        "'sha256-"
        + base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
        + "'"
    )
    context["diff_parts"] = diff_parts
    context["data_json"] = Markup(context["data_json"])  # escaped for <script> by script_json
    context["traces_json"] = Markup(context["traces_json"])
    return env.get_template("report.html.j2").render(**context)
