"""Benchmark: the HTML report of a large suite opens and filters fast in a real browser.

A seeded synthetic run report (:func:`benchmarks._support.synthetic_report.synthetic_report`: 2,000
cases, 50,000 agent runs, the kept traces of every case by the report's own rule) is rendered
by ``render_html`` and opened from ``file://`` in headless Chromium (Debian's, through
Playwright). The baseline is the same data rendered the obvious way, measured in the same
run: one eager HTML table with a row per case and every kept trace written out under it, and
a filter that hides the rows that do not match.

Measured, as the median of ``--repeat`` fresh page loads each:

* **load**: from navigation start to the ``load`` event plus a forced layout (the script of
  the viewer has drawn its first rows by then);
* **filter**: a verdict filter (FAIL), then a kind filter (EXPLORE), each from the change to a
  forced layout; the larger is reported;
* **open**: the viewer opening a failing case (its traces parsed on first use, drawn).

Target (issue #14): load and filter in under 2 s. Timings are measurements on a shared machine;
the data and the page sizes repeat exactly for a seed.

    python benchmarks/report.py [--cases N] [--runs N] [--seed S] [--repeat K] [--json PATH]

``--json`` writes ``{"load_ms", "filter_ms", "open_case_ms", "baseline_load_ms",
"baseline_filter_ms", "load_ratio", "filter_ratio", "html_bytes", "baseline_html_bytes",
"dom_elements", "baseline_dom_elements", "cases", "runs", "traces", "met"}``.
"""

from __future__ import annotations

import argparse
import html
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentprop._pipeline.report import render_html
from agentprop._pipeline.report.model import RunReport

ROOT_DIR = Path(__file__).resolve().parents[1]
if str(ROOT_DIR) not in sys.path:
    sys.path.insert(0, str(ROOT_DIR))

from benchmarks._support.synthetic_report import synthetic_report  # noqa: E402

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TARGET_MS = 2000.0
_LOADED = """window.addEventListener('load', () => {
  document.body.getBoundingClientRect();
  window.__loadedAt = performance.now();
});"""
_FILTER = """([select, value]) => {
  const t0 = performance.now();
  const s = document.getElementById(select);
  s.value = value;
  s.dispatchEvent(new Event('change'));
  document.body.getBoundingClientRect();
  return performance.now() - t0;
}"""


def eager_html(report: RunReport) -> str:
    """The baseline: every case a row of one table, every kept trace written out under its
    case, and a filter that hides the rows that do not match (no lazy drawing)."""
    out = [
        "<!doctype html><html><head><meta charset='utf-8'><title>eager</title>",
        "<style>td,th{border:1px solid #ccc;padding:2px 6px;font:13px "
        "sans-serif}pre{margin:0}</style></head><body>",
        "<select id='f-verdict'><option value=''>all</option>"
        + "".join(
            f"<option>{v}</option>"
            for v in ("PASS", "FAIL", "UNSTABLE", "INCONCLUSIVE", "NOT APPLICABLE")
        )
        + "</select>",
        "<select id='f-kind'><option value=''>all</option>"
        + "".join(f"<option>{k}</option>" for k in dict.fromkeys(c.kind for c in report.cases))
        + "</select>",
        "<table "
        "id='cases'><tr><th>case</th><th>kind</th><th>verdict</th><th>rate</th><th>runs</"
        "th><th>first failure</th></tr>",
    ]
    esc = html.escape
    for c in report.cases:
        first = c.failures[0].explanation if c.failures else (c.reason or "")
        out.append(
            f"<tr class='case' data-verdict='{esc(c.verdict)}' "
            f"data-kind='{esc(c.kind)}'><td>{esc(c.id)}</td><td>{esc(c.kind)}</"
            f"td><td>{esc(c.verdict)}</td><td>{c.pass_rate:.0%}</td><td>{c.runs}</"
            f"td><td>{esc(first)}</td></tr>"
        )
        if c.traces:
            cells = []
            for run in c.traces:
                cells.append(
                    f"<div><b>trial {run.trial} {'pass' if run.passed else 'fail'}</b> "
                    f"{esc(run.explanation or '')}</div>"
                )
                for turn in run.trace.turns:
                    cells.append(f"<div>user: {esc(turn.user_message)}</div>")
                    for call in turn.tool_calls:
                        cells.append(
                            f"<div>{esc(call.name)}<pre>{esc(json.dumps(call.args))}</pre><pre>{esc(json.dumps(call.result))}</pre></div>"
                        )
                    cells.append(
                        "<table>"
                        + "".join(
                            f"<tr><th>{esc(k)}</th><td>{esc(json.dumps(v))}</td></tr>"
                            for k, v in (turn.response or {}).items()
                        )
                        + "</table>"
                    )
            out.append(
                f"<tr class='trace' data-verdict='{esc(c.verdict)}' data-kind='{esc(c.kind)}'><td "
                f"colspan='6'>{''.join(cells)}</td></tr>"
            )
    out.append("</table><script>")
    out.append("""function apply() {
  const v = document.getElementById('f-verdict').value, k = document.getElementById('f-kind').value;
  for (const row of document.querySelectorAll('#cases tr[data-verdict]')) {
    row.style.display = (!v || row.dataset.verdict === v) && (!k || row.dataset.kind === k) ? '' : 'none';
  }
}
document.getElementById('f-verdict').addEventListener('change', apply);
document.getElementById('f-kind').addEventListener('change', apply);""")  # noqa: E501
    out.append("</script></body></html>")
    return "\n".join(out)


def _chromium() -> str:
    for candidate in (
        shutil.which("chromium"),
        "/usr/bin/chromium",
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("benchmarks/report.py needs Chromium: apt-get install -y chromium")


def measure(context: Any, path: Path, *, viewer: bool, repeat: int) -> dict[str, float]:
    loads, filters, opens, elements = [], [], [], 0.0
    for _ in range(repeat):
        page = context.new_page()
        page.add_init_script(_LOADED)
        page.goto(path.as_uri(), wait_until="load", timeout=120_000)
        page.wait_for_function("() => window.__loadedAt !== undefined", timeout=120_000)
        if viewer:
            page.wait_for_selector("html[data-ready='1']")
        loads.append(page.evaluate("window.__loadedAt"))
        elements = page.evaluate("document.getElementsByTagName('*').length")
        verdict = page.evaluate(_FILTER, ["f-verdict", "FAIL"])
        kind = page.evaluate(_FILTER, ["f-kind", "EXPLORE"])
        filters.append(max(verdict, kind))
        if viewer:
            opens.append(
                page.evaluate("""() => {
                const row = document.querySelector('#case-rows .row');
                const t0 = performance.now();
                row.click();
                document.body.getBoundingClientRect();
                return performance.now() - t0;
            }""")
            )
        page.close()
    return {
        "load": statistics.median(loads),
        "filter": statistics.median(filters),
        "open": statistics.median(opens) if opens else 0.0,
        "elements": elements,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    report = synthetic_report(cases=args.cases, runs=args.runs, seed=args.seed)
    t0 = time.perf_counter()
    page_html = render_html(report)
    render_s = time.perf_counter() - t0
    baseline_html = eager_html(report)
    traces = sum(len(c.traces) for c in report.cases)
    with tempfile.TemporaryDirectory() as tmp:
        viewer_path, eager_path = Path(tmp) / "report.html", Path(tmp) / "eager.html"
        viewer_path.write_text(page_html, encoding="utf-8")
        eager_path.write_text(baseline_html, encoding="utf-8")
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                str(Path(tmp) / "profile"),
                executable_path=_chromium(),
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1400, "height": 900},
            )
            try:
                # warm-up: the browser's first page pays its start-up
                measure(context, viewer_path, viewer=True, repeat=1)
                viewer = measure(context, viewer_path, viewer=True, repeat=args.repeat)
                eager = measure(context, eager_path, viewer=False, repeat=args.repeat)
            finally:
                context.close()
    met = viewer["load"] < TARGET_MS and viewer["filter"] < TARGET_MS
    print(
        f"report viewer: {args.cases:,} cases, {report.metrics.runs:,} runs, {traces:,} traces "
        f"kept (seed {args.seed}); HTML {len(page_html.encode()) / 1e6:.1f} MB rendered in "
        f"{render_s:.1f} s, eager baseline {len(baseline_html.encode()) / 1e6:.1f} MB"
    )
    print(
        f"{'measurement (median of ' + str(args.repeat) + ')':<40} {'viewer':>10} "
        f"{'eager DOM':>11} {'ratio':>8}"
    )
    rows = [
        ("load (navigation to laid out)", viewer["load"], eager["load"]),
        ("filter (verdict, then kind; the larger)", viewer["filter"], eager["filter"]),
    ]
    for name, v, e in rows:
        print(f"{name:<40} {v:>8.0f}ms {e:>9.0f}ms {e / v if v else float('inf'):>7.1f}x")
    print(f"{'open a failing case (first open)':<40} {viewer['open']:>8.0f}ms {'-':>11}")
    print(
        f"{'DOM elements after load':<40} {viewer['elements']:>10,.0f} {eager['elements']:>11,.0f}"
    )
    print(
        f"target: load and filter under {TARGET_MS:.0f} ms in headless Chromium: "
        f"{'met' if met else 'NOT MET'}"
    )
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "load_ms": viewer["load"],
                    "filter_ms": viewer["filter"],
                    "open_case_ms": viewer["open"],
                    "baseline_load_ms": eager["load"],
                    "baseline_filter_ms": eager["filter"],
                    "load_ratio": eager["load"] / viewer["load"],
                    "filter_ratio": eager["filter"] / viewer["filter"]
                    if viewer["filter"]
                    else None,
                    "html_bytes": len(page_html.encode()),
                    "baseline_html_bytes": len(baseline_html.encode()),
                    "dom_elements": viewer["elements"],
                    "baseline_dom_elements": eager["elements"],
                    "cases": args.cases,
                    "runs": report.metrics.runs,
                    "traces": traces,
                    "met": met,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
