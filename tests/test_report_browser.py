"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright through ``executable_path``) opens the file from ``file://`` and the tests assert
through the DOM: the counts, a failing case opening to its trace with the failing step
highlighted and the clause quoted, the filters, the tree's branches, a large report drawing only
the rows on screen, an agent's script payload shown as text, a snapshot check, and one
screenshot that is not blank (saved for docs/report.md when ``AGENTPROP_DOCS_SCREENSHOT`` names
a path).

One browser for the module; each test opens its own page. Where no Chromium exists the tests
skip and say why (``.ci/run`` installs it).
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agentprop._agents.loading import load_agent, make_factory
from agentprop._agents.project import load_project
from agentprop._decide.memo import TrialMemo
from agentprop._pipeline.report import render_html
from agentprop._pipeline.report.model import RunReport
from agentprop._pipeline.run import RunSettings, arun_cases
from agentprop._util.aio import run_sync
from benchmarks._support.synthetic_report import synthetic_report

pytest.importorskip(
    "jinja2", reason="the HTML report needs the report extra (pip install 'agentprop[report]')"
)
sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need Playwright (pip install playwright; the test extra has it)",
)

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAYLOAD = (
    "</script><script>window.__pwned=1</script><img src=x "
    'onerror="window.__pwned=2"><!-- &amp; \u2028'
)
VERDICTS = ("FAIL", "UNSTABLE", "INCONCLUSIVE", "NOT APPLICABLE", "PASS")


def chromium_path() -> str | None:
    """``$AGENTPROP_CHROMIUM``, else ``chromium`` on the PATH, else Debian's /usr/bin/chromium."""
    for candidate in (
        os.environ.get("AGENTPROP_CHROMIUM"),
        shutil.which("chromium"),
        "/usr/bin/chromium",
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.skip(
            "no Chromium to run the HTML report in (looked at $AGENTPROP_CHROMIUM, chromium on "
            "the PATH and /usr/bin/chromium): install Debian's chromium package (apt-get install "
            "-y chromium), as .ci/run does"
        )
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=path,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


class Page:
    """A report opened in the browser, with the page errors it raised."""

    def __init__(self, browser: Any, path: Path, fragment: str = "") -> None:
        self.page = browser.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.goto(path.as_uri() + fragment)
        self.page.wait_for_selector("html[data-ready='1']", timeout=15_000)

    def count(self) -> str:
        return self.page.inner_text("#f-count")

    def rows(self) -> list[dict[str, str]]:
        return self.page.eval_on_selector_all(
            "#case-rows .row",
            "rows => rows.map(r => ({id: r.dataset.id, verdict: r.dataset.verdict}))",
        )

    def select(self, which: str, value: str) -> None:
        self.page.select_option(f"#f-{which}", value)

    def open_row(self, case_id: str) -> Any:
        self.page.fill("#f-text", case_id)
        self.page.wait_for_function(
            "id => [...document.querySelectorAll('#case-rows .row')].some(r => "
            "r.dataset.id === id)",
            arg=case_id,
        )
        self.page.locator("#case-rows .row").filter(
            has=self.page.locator(".c-id", has_text=case_id)
        ).first.click()
        detail = self.page.locator("#case-detail")
        assert detail.get_attribute("data-id") == case_id
        return detail

    def close(self) -> None:
        errors = list(self.errors)
        self.page.close()
        assert errors == [], f"the page reported errors: {errors}"


@pytest.fixture(scope="module")
def faulty_html(
    tmp_path_factory: pytest.TempPathFactory, faulty_supportops_report: RunReport
) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(faulty_supportops_report), encoding="utf-8")
    return path


@pytest.fixture
def page(browser: Any, faulty_html: Path) -> Iterator[Page]:
    opened = Page(browser, faulty_html)
    yield opened
    opened.close()


def test_the_summary_shows_the_reports_counts(
    page: Page, faulty_supportops_report: RunReport
) -> None:
    report = faulty_supportops_report
    for verdict in VERDICTS:
        n = sum(c.verdict == verdict for c in report.cases)
        tile = page.page.locator(f'[data-verdict-filter="{verdict}"]')
        assert tile.get_attribute("data-count") == str(n)
        assert tile.locator(".n").inner_text() == str(n)
    assert page.page.inner_text("#sum-cases") == str(report.metrics.cases)
    assert page.page.inner_text("#sum-runs") == str(report.metrics.runs)
    kept = sum(len(c.traces) for c in report.cases)
    assert page.page.inner_text("#sum-traces").startswith(
        f"{kept} of {report.metrics.runs} runs; {report.metrics.runs - kept} left out"
    )
    assert page.count() == f"showing {len(report.cases)} of {len(report.cases)} cases"
    shown = page.rows()
    # not passing first
    assert [r["verdict"] for r in shown] == sorted(
        (r["verdict"] for r in shown), key=VERDICTS.index
    )
    assert page.page.locator("article.bug").count() == sum(b.origin == "cases" for b in report.bugs)


def test_a_failing_case_opens_to_its_trace_with_the_failing_step_highlighted(
    page: Page, faulty_supportops_report: RunReport
) -> None:
    case = next(
        c
        for c in faulty_supportops_report.cases
        if c.kind == "MFT" and c.verdict == "FAIL" and c.shrunk
    )
    run = next(t for t in case.traces if not t.passed)
    detail = page.open_row(case.id)
    active = detail.locator(".run-tab.active")
    assert active.inner_text() == f"trial {run.trial} · fail"
    trace = detail.locator(".trace")
    assert trace.get_attribute("data-trial") == str(run.trial)
    assert trace.locator(".failure .explanation").inner_text() == run.explanation
    assert trace.locator(".failure .clause q").inner_text() == run.clause
    assert run.turn is not None
    turn = trace.locator(".turn.failing-turn")
    assert turn.count() == 1 and turn.get_attribute("data-turn") == str(run.turn)
    failing = trace.locator(".step.failing")
    assert failing.count() == 1
    assert ("respond" in failing.get_attribute("class")) == (run.step is None)
    recorded = run.trace.turns[run.turn]
    assert turn.locator(".user .text").inner_text() == recorded.user_message
    assert turn.locator(".tool-name").all_inner_texts() == [c.name for c in recorded.tool_calls]
    assert recorded.response is not None
    assert turn.locator(".respond th").all_inner_texts() == list(recorded.response)
    assert page.page.url.endswith("#case=" + quote(case.id, safe=""))
    # the reproducer of the case's bug, as a diff, and a passing run without any highlight
    assert detail.locator("ul.diffs li").count() == len(case.shrunk["diff"])
    passed = next((k for k, t in enumerate(case.traces) if t.passed), None)
    if passed is not None:
        detail.locator(f'.run-tab[data-run="{passed}"]').click()
        assert (
            detail.locator(".trace.passed").count() == 1
            and detail.locator(".step.failing").count() == 0
        )


def test_filters_narrow_the_table(page: Page, faulty_supportops_report: RunReport) -> None:
    cases = faulty_supportops_report.cases
    total = len(cases)
    page.select("verdict", "FAIL")
    fails = [c for c in cases if c.verdict == "FAIL"]
    assert page.count() == f"showing {len(fails)} of {total} cases"
    assert {r["verdict"] for r in page.rows()} == {"FAIL"}
    page.select("kind", "DIR")
    both = [c for c in fails if c.kind == "DIR"]
    assert page.count() == f"showing {len(both)} of {total} cases"
    assert {r["id"] for r in page.rows()} == {c.id for c in both}
    page.select("verdict", "NOT PASSING")
    assert (
        page.count()
        == f"showing {sum(c.kind == 'DIR' and c.verdict != 'PASS' for c in cases)} of {total} cases"
    )
    page.select("verdict", "")
    page.select("kind", "")
    page.page.fill("#f-text", "verify_identity")
    hay = [
        " ".join(
            [
                c.id,
                c.kind,
                c.verdict,
                c.failures[0].explanation if c.failures else (c.reason or ""),
                " ".join(c.messages),
                c.rule or "",
            ]
        ).lower()
        for c in cases
    ]
    expected = sum("verify_identity" in h for h in hay)
    page.page.wait_for_function(
        "n => document.getElementById('f-count').textContent === `showing ${n} of "
        + str(total)
        + " cases`",
        arg=expected,
    )
    page.page.fill("#f-text", "")
    bug = next(b for b in faulty_supportops_report.bugs if b.origin == "cases")
    page.page.wait_for_function(
        "() => document.getElementById('f-count').textContent === 'showing "
        f"{total} of {total} cases'"
    )
    page.page.locator(f'[data-filter-bug="{bug.id}"]').click()
    assert page.count() == f"showing {sum(bug.id in c.bugs for c in cases)} of {total} cases"
    assert page.page.locator("#f-chips .chip").inner_text() == f"bug {bug.id} \u2715"


def test_the_tree_draws_every_branch_with_its_status(
    page: Page, faulty_supportops_report: RunReport
) -> None:
    tree = faulty_supportops_report.tree
    assert tree is not None
    svg = page.page.locator("#tree svg")
    drawn = svg.locator("g.branch")
    branches = [b for n in tree.nodes for b in n.branches]
    assert drawn.count() == len(branches)
    for b in branches:
        g = svg.locator(f'g[data-branch="{b.id}"]')
        classes = g.get_attribute("class").split()
        assert g.get_attribute("data-status") == b.status and b.status in classes
        assert ("loop" in classes) == b.loop, b.id
        assert g.locator("title").text_content().startswith(f"{b.id}: when {b.when} -> {b.next}")
    assert {"N3_BILLING#0", "N9_UPDATE_ADDRESS#1"} <= {
        b.id for b in branches if b.status == "unrealisable"
    }
    assert svg.locator("g.node").count() == len(tree.nodes)
    # a branch lists the cases that take it
    svg.locator('g[data-branch="N2_AUTH#0"] path.hit').click(force=True)
    taking = sum("N2_AUTH#0" in c.branches for c in faulty_supportops_report.cases)
    assert page.count() == f"showing {taking} of {len(faulty_supportops_report.cases)} cases"
    assert page.page.locator("#f-chips .chip").inner_text() == "branch N2_AUTH#0 \u2715"
    page.page.locator("#f-chips .chip").click()
    svg.locator('g[data-node="N3_BILLING"] rect').click()
    reaching = sum(
        "N3_BILLING" in c.path or c.node == "N3_BILLING" for c in faulty_supportops_report.cases
    )
    assert page.count() == f"showing {reaching} of {len(faulty_supportops_report.cases)} cases"


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunReport]:
    """A synthetic report of 2,000 cases and 50,000 runs, with TDAD metrics and mutants."""
    report = synthetic_report(cases=2000, runs=50_000, seed=7, traces_per_case=1)
    path = tmp_path_factory.mktemp("large") / "large.html"
    path.write_text(render_html(report), encoding="utf-8")
    return path, report


def test_a_large_report_draws_only_the_rows_on_screen(
    browser: Any, large: tuple[Path, RunReport]
) -> None:
    path, report = large
    case = next(c for c in report.cases if any(t.step == 0 and not t.passed for t in c.traces))
    opened = Page(browser, path, "#case=" + quote(case.id, safe=""))  # a link to one case opens it
    try:
        assert opened.count() == "showing 2000 of 2000 cases"
        assert len(opened.rows()) <= 60
        assert opened.page.evaluate("document.getElementsByTagName('*').length") < 3000
        run = next(t for t in case.traces if not t.passed)
        detail = opened.page.locator("#case-detail")
        assert detail.get_attribute("data-id") == case.id
        failing = detail.locator(".step.failing")
        if run.step == 0:
            assert failing.get_attribute("data-step") == "0" and "tool" in failing.get_attribute(
                "class"
            )
        order = sorted(
            range(len(report.cases)), key=lambda i: (VERDICTS.index(report.cases[i].verdict), i)
        )
        expected = report.cases[order[-1]].id
        opened.page.evaluate(
            "() => { const s = document.getElementById('case-scroll'); "
            "s.scrollTop = s.scrollHeight; }"
        )
        # The rows before the scroll already satisfy "some rows, fewer than 60": wait for the
        # redraw the scroll causes (the last case in the table order), then check the window.
        try:
            opened.page.wait_for_function(
                "id => { const r = document.querySelector('#case-rows .row:last-child'); return r "
                "&& r.dataset.id === id; }",
                arg=expected,
                timeout=15_000,
            )
        except sync_api.TimeoutError:
            pass  # the assertion below reports what was drawn instead
        assert opened.rows()[-1]["id"] == expected
        assert len(opened.rows()) < 60
    finally:
        opened.close()


def test_the_tdad_section_lists_mutants_and_opens_their_killers(
    browser: Any, large: tuple[Path, RunReport]
) -> None:
    path, report = large
    tdad = report.metrics.extra["tdad"]
    opened = Page(browser, path)
    try:
        for key in ("vpr", "hpr", "rpr", "ms"):
            assert opened.page.inner_text(f"#metric-{key} .n") == f"{tdad[key]:.0%}"
        assert opened.page.inner_text("#metric-surs .n") == "–"  # no --base: said, not hidden
        mutants = tdad["mutation"]["mutants"]
        rows = opened.page.locator("tr.mutant")
        assert rows.evaluate_all("rs => rs.map(r => [r.dataset.mutant, r.dataset.status])") == [
            [m["id"], m["status"]] for m in mutants
        ]
        killed = next(m for m in mutants if m["status"] == "killed")
        opened.page.locator(f'tr.mutant[data-mutant="{killed["id"]}"] [data-open-case]').click()
        assert opened.page.locator("#case-detail").get_attribute("data-id") == killed["killed_by"]
        split = tdad["split"][killed["killed_by"]]
        assert f"({split})" in opened.page.inner_text("#case-detail dl.facts")
    finally:
        opened.close()


@pytest.fixture(scope="module")
def payload_html(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunReport]:
    """A real run of an agent whose reply carries a script payload (and skips auth, so cases
    fail and their traces are kept); the payload is also put in the parts rendered server-side."""
    base = load_agent("agent:SupportOpsAgent", SUPPORTOPS).target

    class PayloadAgent(base):  # type: ignore[misc, valid-type]
        def _respond(
            self, ctx: Any, node: str, decision: str, message: str, evidence: str = ""
        ) -> None:
            super()._respond(ctx, node, decision, message + " " + PAYLOAD, evidence)

    project = load_project(SUPPORTOPS)
    agent = make_factory(PayloadAgent, {"skip_auth": 1.0}, ref="agent:PayloadAgent")
    scenarios = [
        s
        for s in project.scenarios()
        if s.id in ("END_CANCELLED<-N7_CANCEL", "END_BILLING_ANSWER<-N3_BILLING")
    ]
    report = run_sync(
        arun_cases(
            project, agent, scenarios, RunSettings(kinds=("mft",), explore=0), memo=TrialMemo()
        )
    )
    report.spec.title = "title " + PAYLOAD
    assert report.tree is not None
    report.tree.nodes[0].description = PAYLOAD
    path = tmp_path_factory.mktemp("payload") / "report.html"
    path.write_text(render_html(report), encoding="utf-8")
    return path, report


def test_an_agents_script_payload_renders_as_text(
    browser: Any, payload_html: tuple[Path, RunReport]
) -> None:
    path, report = payload_html
    case = next(c for c in report.cases if c.verdict == "FAIL")
    run = next(t for t in case.traces if not t.passed)
    reply = run.trace.turns[0].response
    assert reply is not None and PAYLOAD in reply["user_message"]
    opened = Page(browser, path)
    try:
        detail = opened.open_row(case.id)
        cells = (
            detail.locator(".turn")
            .first.locator(".respond tr")
            .filter(has=opened.page.locator("th", has_text="user_message"))
        )
        assert cells.locator("td").text_content() == reply["user_message"]
        assert opened.page.evaluate("typeof window.__pwned") == "undefined"
        assert opened.page.evaluate("document.querySelectorAll('img').length") == 0
        assert opened.page.evaluate("document.scripts.length") == 3
        assert opened.page.title().startswith(("title " + PAYLOAD)[:40])
        assert (
            opened.page.locator('#tree g[data-node="N1_INTENT"] title')
            .text_content()
            .startswith("N1_INTENT: " + PAYLOAD)
        )
    finally:
        opened.close()


def test_a_snapshot_check_shows_baseline_against_current_behaviours(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentprop._cli import main

    monkeypatch.chdir(tmp_path)
    shutil.copytree(SUPPORTOPS / "__snapshots__", tmp_path / "snaps")
    argv = [
        "snapshot",
        "check",
        str(SUPPORTOPS),
        "--fault",
        "skip_auth=1",
        "--case",
        "END_CANCELLED<-N7_CANCEL",
        "--runs",
        "5",
        "--dir",
        str(tmp_path / "snaps"),
        "--html",
        "snap.html",
    ]
    # Playwright's loop runs in this thread
    with ThreadPoolExecutor(1) as pool, open(os.devnull, "w") as sink:
        code = pool.submit(main, argv, out=sink).result()
    assert code == 1
    opened = Page(browser, tmp_path / "snap.html")
    try:
        assert (
            opened.page.locator('[data-verdict-filter="CHANGED"]').get_attribute("data-count")
            == "1"
        )
        assert opened.count() == "showing 1 of 1 snapshots"
        detail = opened.open_row("END_CANCELLED<-N7_CANCEL")
        rows = detail.locator("table.behaviours tr.behaviour")
        assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.status)")) == ["gone", "new"]
        new = detail.locator("tr.behaviour.new")
        assert new.locator("td.count").all_inner_texts() == ["0/10", "5/5"]
        assert "tools removed: verify_identity" in new.inner_text()
    finally:
        opened.close()


def test_a_screenshot_of_a_failing_case_is_not_blank(
    browser: Any, faulty_html: Path, faulty_supportops_report: RunReport, tmp_path: Path
) -> None:
    case = next(
        c
        for c in faulty_supportops_report.cases
        if c.kind == "MFT" and c.verdict == "FAIL" and c.shrunk
    )
    opened = Page(browser, faulty_html)
    try:
        detail = opened.open_row(case.id)
        detail.locator(".trace").evaluate("e => e.scrollIntoView({block: 'start'})")
        png = opened.page.screenshot(full_page=False)
    finally:
        opened.close()
    (tmp_path / "report.png").write_bytes(png)
    if os.environ.get("AGENTPROP_DOCS_SCREENSHOT"):
        Path(os.environ["AGENTPROP_DOCS_SCREENSHOT"]).write_bytes(png)
    blank = browser.new_page()
    try:
        stats = blank.evaluate(
            """async (b64) => {
                const img = new Image();
                img.src = 'data:image/png;base64,' + b64;
                await img.decode();
                const c = document.createElement('canvas');
                c.width = img.width; c.height = img.height;
                const g = c.getContext('2d');
                g.drawImage(img, 0, 0);
                const d = g.getImageData(0, 0, c.width, c.height).data;
                let n = 0, sum = 0, sq = 0; const colours = new Set();
                for (let i = 0; i < d.length; i += 16) {
                    const y = 0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2];
                    n++; sum += y; sq += y * y; colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
                }
                const mean = sum / n;
                return {width: c.width, height: c.height, variance: sq / n - mean * mean, colours: colours.size};
            }""",  # noqa: E501
            base64.b64encode(png).decode(),
        )
    finally:
        blank.close()
    assert (stats["width"], stats["height"]) == (1400, 900)
    assert stats["variance"] > 200 and stats["colours"] > 50, stats
