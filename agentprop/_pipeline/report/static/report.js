/* agentprop report viewer: a virtual case table and a trace view, from the JSON blocks of the
   page. Every text from the report is written with textContent (never as markup). */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("ap-data").textContent);
  var tracesCache = null;
  var cases = data.cases;
  var mode = data.mode;
  var ROW_H = 30;
  var OVERSCAN = 12;
  var VISIBLE_ROWS = 18;
  var SEVERITY = { FAIL: 0, CHANGED: 0, UNSTABLE: 1, NEW: 1, INCONCLUSIVE: 2, "NOT APPLICABLE": 3, UPDATED: 3, PASS: 4, MATCH: 4 };
  var PASSING = { PASS: 1, MATCH: 1, UPDATED: 1, "NOT APPLICABLE": 1 };
  var state = { verdict: "", kind: "", bug: "", branch: "", node: "", text: "", sort: "", dir: 1, selected: -1 };
  var shown = [];

  function traces() {
    if (tracesCache === null) {
      tracesCache = JSON.parse(document.getElementById("ap-traces").textContent);
    }
    return tracesCache;
  }

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  function add(parent, child) { parent.appendChild(child); return child; }

  function pct(x) { return x === null || x === undefined ? "–" : Math.round(x * 100) + "%"; }

  function num(x, digits) { return x === null || x === undefined ? "–" : Number(x).toFixed(digits); }

  function json(value) {
    if (typeof value === "string") { return value; }
    try {
      var flat = JSON.stringify(value);
      return flat !== undefined && flat.length <= 100 ? flat : JSON.stringify(value, null, 2);
    } catch (e) { return String(value); }
  }

  function verdictClass(v) { return "v-" + String(v).toLowerCase().replace(/ /g, "-"); }

  function badge(v) { return el("span", "badge " + verdictClass(v), v); }

  /* ---------------------------------------------------------------- filtering */

  var hay = cases.map(function (c) {
    return [c.id, c.kind, c.verdict, c.first || "", (c.messages || []).join(" "), (c.rule || "")].join(" ").toLowerCase();
  });

  function matches(i, text) {
    var c = cases[i];
    if (state.verdict === "NOT PASSING") {
      if (PASSING[c.verdict]) { return false; }
    } else if (state.verdict && c.verdict !== state.verdict) { return false; }
    if (state.kind && c.kind !== state.kind) { return false; }
    if (state.bug && (c.bugs || []).indexOf(state.bug) < 0) { return false; }
    if (state.branch && (c.branches || []).indexOf(state.branch) < 0) { return false; }
    if (state.node && c.node !== state.node && (c.path || []).indexOf(state.node) < 0) { return false; }
    if (text && hay[i].indexOf(text) < 0) { return false; }
    return true;
  }

  function sortKey(i) {
    var c = cases[i];
    switch (state.sort) {
      case "id": return c.id;
      case "kind": return c.kind;
      case "rate": return c.pass_rate === undefined ? 0 : c.pass_rate;
      case "runs": return c.runs;
      default: return SEVERITY[c.verdict] === undefined ? 9 : SEVERITY[c.verdict];
    }
  }

  function applyFilters() {
    var text = state.text.toLowerCase();
    shown = [];
    for (var i = 0; i < cases.length; i++) {
      if (matches(i, text)) { shown.push(i); }
    }
    var keys = {};
    shown.forEach(function (i) { keys[i] = sortKey(i); });
    var dir = state.dir;
    shown.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      if (x < y) { return -dir; }
      if (x > y) { return dir; }
      return a - b;
    });
    $("f-count").textContent = "showing " + shown.length + " of " + cases.length + (mode === "snapshot" ? " snapshots" : " cases");
    $("case-spacer").style.height = (shown.length * ROW_H) + "px";
    $("case-scroll").style.height = (Math.max(3, Math.min(shown.length, VISIBLE_ROWS)) * ROW_H) + "px";
    $("case-scroll").scrollTop = 0;
    renderChips();
    renderRows();
  }

  function renderChips() {
    var box = $("f-chips");
    box.textContent = "";
    [["branch", "branch"], ["node", "node"], ["bug", "bug"]].forEach(function (pair) {
      var key = pair[0];
      if (!state[key]) { return; }
      var chip = add(box, el("button", "chip", pair[1] + " " + state[key] + " \u2715"));
      chip.type = "button";
      chip.dataset.clear = key;
      chip.addEventListener("click", function () {
        state[key] = "";
        if (key === "bug") { $("f-bug").value = ""; }
        applyFilters();
      });
    });
  }

  /* ---------------------------------------------------------------- the virtual table */

  function cellsFor(c) {
    if (mode === "snapshot") {
      return [
        ["id", c.id], ["verdict", null], ["p", c.p_value === null ? "first" : num(c.p_value, 4)],
        ["runs", c.runs + " vs " + c.baseline_runs], ["n", (c.behaviours || []).length], ["first", c.first || ""]
      ];
    }
    var ci = c.interval ? num(c.interval[0], 2) + "\u2013" + num(c.interval[1], 2) : "";
    var first = c.first || "";
    if (c.bug_numbers && c.bug_numbers.length) { first = "[bug " + c.bug_numbers.join(", ") + "] " + first; }
    return [["id", c.id], ["kind", c.kind], ["verdict", null], ["rate", pct(c.pass_rate)], ["ci", ci], ["runs", c.runs], ["first", first]];
  }

  function rowFor(i) {
    var c = cases[i];
    var row = el("div", "row " + verdictClass(c.verdict) + (i === state.selected ? " selected" : ""));
    row.setAttribute("role", "row");
    row.tabIndex = 0;
    row.dataset.index = String(i);
    row.dataset.id = c.id;
    row.dataset.verdict = c.verdict;
    cellsFor(c).forEach(function (cell) {
      var td = add(row, el("span", "cell c-" + cell[0]));
      td.setAttribute("role", "cell");
      if (cell[0] === "verdict") { td.appendChild(badge(c.verdict)); } else { td.textContent = String(cell[1]); td.title = String(cell[1]); }
    });
    return row;
  }

  var pending = false;

  function renderRows() {
    var scroller = $("case-scroll");
    var top = scroller.scrollTop;
    var height = scroller.clientHeight || 480;
    var first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    var last = Math.min(shown.length, Math.ceil((top + height) / ROW_H) + OVERSCAN);
    var box = $("case-rows");
    box.textContent = "";
    box.style.transform = "translateY(" + (first * ROW_H) + "px)";
    var frag = document.createDocumentFragment();
    for (var k = first; k < last; k++) { frag.appendChild(rowFor(shown[k])); }
    box.appendChild(frag);
    $("case-empty").hidden = shown.length > 0;
  }

  function onScroll() {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; renderRows(); });
  }

  /* ---------------------------------------------------------------- one case */

  function facts(parent, pairs) {
    var dl = add(parent, el("dl", "facts"));
    pairs.forEach(function (p) {
      if (p[1] === null || p[1] === undefined || p[1] === "") { return; }
      add(dl, el("dt", null, p[0]));
      add(dl, el("dd", null, p[1]));
    });
    return dl;
  }

  function collapsible(parent, summary, value, open) {
    var d = add(parent, el("details", "raw"));
    if (open) { d.open = true; }
    add(d, el("summary", null, summary));
    add(d, el("pre", null, json(value)));
    return d;
  }

  function diffLine(parent, text) {
    /* [-removed-] and {+added+} of the shrinker's word diff, as <del> and <ins> (text only) */
    var li = add(parent, el("li", "diff"));
    var re = /\[-([\s\S]*?)-\]|\{\+([\s\S]*?)\+\}/g;
    var last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) { li.appendChild(document.createTextNode(text.slice(last, m.index))); }
      if (m[1] !== undefined) { add(li, el("del", null, m[1])); } else { add(li, el("ins", null, m[2])); }
      last = re.lastIndex;
    }
    if (last < text.length) { li.appendChild(document.createTextNode(text.slice(last))); }
  }

  function openCase(i, opts) {
    opts = opts || {};
    state.selected = i;
    var c = cases[i];
    var box = $("case-detail");
    box.textContent = "";
    box.hidden = false;
    box.dataset.index = String(i);
    box.dataset.id = c.id;
    var head = add(box, el("div", "detail-head"));
    add(head, badge(c.verdict));
    add(head, el("h3", "case-id", c.id));
    var close = add(head, el("button", "close", "close \u2715"));
    close.type = "button";
    close.addEventListener("click", function () {
      box.hidden = true;
      state.selected = -1;
      renderRows();
      try { history.replaceState(null, "", location.pathname + location.search); } catch (e) { /* file:// in some browsers */ }
    });
    if (mode === "snapshot") { renderSnapshot(box, c); } else { renderCase(box, c, i); }
    renderRows();
    if (!opts.fromLink) {
      try { history.replaceState(null, "", "#case=" + encodeURIComponent(c.id)); } catch (e) { /* file:// in some browsers */ }
    }
    box.scrollIntoView({ block: "start" });
  }

  function renderCase(box, c, i) {
    var split = data.split[c.id];
    facts(box, [
      ["kind", c.kind + (split ? " (" + split + ")" : "")],
      ["pass rate", c.rate_text || (pct(c.pass_rate) + " (" + c.passes + "/" + c.runs + ")")],
      ["95% interval", c.interval ? num(c.interval[0], 2) + " \u2013 " + num(c.interval[1], 2) + " (Wilson)" : ""],
      ["decided by", c.decided_by],
      ["rule", c.rule],
      ["reason", c.reason],
      ["path", (c.path || []).join(" \u2192 ")],
      ["branches", (c.branches || []).join(", ")],
      ["cost", c.cost_usd ? "$" + num(c.cost_usd, 4) : ""]
    ]);
    if (c.failures && c.failures.length) {
      add(box, el("h4", null, "failures"));
      var ul = add(box, el("ul", "failures"));
      c.failures.forEach(function (f) {
        var li = add(ul, el("li"));
        add(li, el("code", "signature", f.signature));
        add(li, el("span", "count", " \u00d7" + f.count + " (first at trial " + f.first_trial + ") "));
        add(li, el("div", "explanation", f.explanation));
      });
    }
    if (c.bugs && c.bugs.length) {
      var bp = add(box, el("p", "bugs-of-case", "bugs: "));
      c.bugs.forEach(function (b, k) {
        var a = add(bp, el("a", null, "bug " + (c.bug_numbers[k] || "") + " [" + b + "]"));
        a.href = "#bug-" + b;
        bp.appendChild(document.createTextNode(" "));
      });
    }
    add(box, el("h4", null, "conversation the case sends"));
    var ol = add(box, el("ol", "messages"));
    (c.messages || []).forEach(function (m, k) {
      var li = add(ol, el("li"));
      add(li, el("span", "msg", m));
      var exp = (c.expected_decisions || [])[k];
      if (exp) { add(li, el("span", "expect", " expects " + exp)); }
    });
    if (c.shrunk) {
      add(box, el("h4", null, "minimal reproducer"));
      var dl = add(box, el("ul", "diffs"));
      (c.shrunk.diff || []).forEach(function (d) { diffLine(dl, d); });
    }
    if (c.details && Object.keys(c.details).length) { collapsible(box, "details of the " + c.kind + " case", c.details, false); }
    if (c.world) { collapsible(box, "world: overrides and injected failures", c.world, false); }
    renderRuns(box, c, traces()[i] || []);
  }

  function renderRuns(box, c, runs) {
    add(box, el("h4", null, "runs"));
    var note = c.runs + " run(s); " + runs.length + " kept here";
    if (c.traces_omitted) { note += ", " + c.traces_omitted + " left out (the report keeps the first failing runs of each signature and a passing one)"; }
    add(box, el("p", "runs-note", note));
    if (!runs.length) { return; }
    var tabs = add(box, el("div", "run-tabs"));
    tabs.setAttribute("role", "tablist");
    var view = add(box, el("div", "run-view"));
    var firstFailing = -1;
    runs.forEach(function (r, k) {
      if (!r.passed && firstFailing < 0) { firstFailing = k; }
      var t = add(tabs, el("button", "run-tab " + (r.passed ? "passed" : "failed"),
        (r.side ? r.side + " \u00b7 " : "") + "trial " + r.trial + (r.passed ? " \u00b7 pass" : " \u00b7 fail")));
      t.type = "button";
      t.setAttribute("role", "tab");
      t.dataset.run = String(k);
      t.addEventListener("click", function () { showRun(tabs, view, c, runs, k); });
    });
    showRun(tabs, view, c, runs, firstFailing >= 0 ? firstFailing : 0);
  }

  function showRun(tabs, view, c, runs, k) {
    Array.prototype.forEach.call(tabs.children, function (t) {
      var on = t.dataset.run === String(k);
      t.classList.toggle("active", on);
      t.setAttribute("aria-selected", on ? "true" : "false");
    });
    view.textContent = "";
    renderTrace(view, c, runs[k]);
  }

  function renderTrace(view, c, run) {
    var tr = run.trace;
    var trace = add(view, el("div", "trace " + (run.passed ? "passed" : "failed")));
    trace.dataset.trial = String(run.trial);
    if (!run.passed) {
      var f = add(trace, el("div", "failure"));
      add(f, el("p", "explanation", run.explanation || run.signature || "failed"));
      if (run.clause) {
        var q = add(f, el("blockquote", "clause"));
        add(q, el("span", "label", "clause "));
        add(q, el("q", null, run.clause));
      }
      if (run.turn !== null && run.turn !== undefined) {
        add(f, el("p", "where", "at turn " + (run.turn + 1) + (run.step !== null && run.step !== undefined ? ", tool call " + (run.step + 1) : ", the reply")));
      }
    }
    (tr.turns || []).forEach(function (turn, t) {
      var failingTurn = !run.passed && run.turn === t;
      var tb = add(trace, el("section", "turn" + (failingTurn ? " failing-turn" : "")));
      tb.dataset.turn = String(t);
      var th = add(tb, el("h5", null, "turn " + (t + 1)));
      var exp = (c.expected_decisions || [])[t];
      if (exp && !run.side) { add(th, el("span", "expect", " \u2014 the spec expects " + exp)); }
      var user = add(tb, el("div", "user"));
      add(user, el("span", "who", "user"));
      add(user, el("p", "text", turn.user_message));
      (turn.tool_calls || []).forEach(function (call, s) {
        var failing = failingTurn && run.step !== null && run.step !== undefined && run.step === (call.step === undefined ? s : call.step);
        var st = add(tb, el("div", "step tool" + (call.error ? " error" : "") + (failing ? " failing" : "")));
        st.dataset.step = String(s);
        var h = add(st, el("div", "step-head"));
        add(h, el("span", "who", "tool call " + (s + 1)));
        add(h, el("code", "tool-name", call.name));
        var io = add(st, el("div", "io"));
        add(io, el("span", "io-label", "arguments"));
        add(io, el("pre", "args", json(call.args || {})));
        add(io, el("span", "io-label", call.error ? "error" : "result"));
        if (call.error) {
          add(io, el("pre", "result error", (call.error_kind ? call.error_kind + ": " : "") + call.error));
        } else {
          add(io, el("pre", "result", json(call.result)));
        }
      });
      var replyFailing = failingTurn && (run.step === null || run.step === undefined);
      var reply = add(tb, el("div", "step respond" + (replyFailing ? " failing" : "")));
      add(reply, el("span", "who", "respond"));
      var resp = turn.response || turn.raw_response;
      if (resp) {
        var table = add(reply, el("table", "fields"));
        Object.keys(resp).forEach(function (key) {
          var row = add(table, el("tr"));
          add(row, el("th", null, key));
          add(row, el("td", null, json(resp[key])));
        });
        if (!turn.response) { add(reply, el("p", "invalid", "not valid against the response contract (as sent)")); }
      } else {
        add(reply, el("p", "none", "no respond call"));
      }
      if (turn.text) {
        var ft = add(tb, el("div", "step freetext"));
        add(ft, el("span", "who", "free text"));
        add(ft, el("p", "text", turn.text));
      }
      (turn.errors || []).forEach(function (e) { add(tb, el("p", "run-error", e.kind + ": " + e.message)); });
    });
    (tr.errors || []).forEach(function (e) { add(trace, el("p", "run-error", e.kind + ": " + e.message)); });
    var world = { seed: tr.world_seed, canaries: tr.canaries };
    var w = run.world || c.world;
    if (w) { world.overrides = w.overrides; world.failures = w.failures; }
    collapsible(trace, "the world of this run", world, false);
  }

  function renderSnapshot(box, c) {
    facts(box, [
      ["runs", c.runs + " now, " + c.baseline_runs + " in the baseline"],
      ["test", c.p_value === null || c.p_value === undefined ? "no baseline to compare with" : "p = " + num(c.p_value, 4) + " (alpha " + c.alpha + ")"],
      ["file", c.path],
      ["candidate", c.pending_path],
      ["approved because", c.reason]
    ]);
    add(box, el("h4", null, "baseline vs current behaviours"));
    var table = add(box, el("table", "behaviours"));
    var hr = add(table, el("tr"));
    ["behaviour", "what the agent did", "baseline", "current"].forEach(function (h) { add(hr, el("th", null, h)); });
    (c.behaviours || []).forEach(function (b) {
      var status = b.baseline === 0 ? "new" : b.current === 0 ? "gone" : "kept";
      var row = add(table, el("tr", "behaviour " + status));
      row.dataset.status = status;
      add(row, el("td", "key", b.key + (status !== "kept" ? " (" + status + ")" : "")));
      var d = add(row, el("td", "describe"));
      (b.describe || "").split(" | ").forEach(function (part) { add(d, el("div", null, part)); });
      if (b.diff && b.diff.length) {
        var ul = add(d, el("ul", "diffs"));
        if (b.nearest) { add(ul, el("li", "nearest", "compared with baseline behaviour " + b.nearest)); }
        b.diff.forEach(function (line) { add(ul, el("li", null, line)); });
      }
      add(row, el("td", "count", b.baseline + "/" + c.baseline_runs));
      add(row, el("td", "count", b.current + "/" + c.runs));
    });
    (c.notes || []).forEach(function (n) { add(box, el("p", "note", "note: " + n)); });
    if (c.verdict === "NEW" || c.verdict === "CHANGED") {
      add(box, el("p", "howto", "if the new behaviour is right: agentprop snapshot approve " + (c.directory || "SPEC") + " '" + c.id + "' --reason \"...\""));
    }
  }

  /* ---------------------------------------------------------------- wiring */

  function openById(id, opts) {
    for (var i = 0; i < cases.length; i++) {
      if (cases[i].id === id) { openCase(i, opts); return true; }
    }
    return false;
  }

  function setVerdict(v) {
    state.verdict = v;
    $("f-verdict").value = v;
    applyFilters();
  }

  function init() {
    $("case-scroll").addEventListener("scroll", onScroll, { passive: true });
    $("case-rows").addEventListener("click", function (ev) {
      var row = ev.target.closest(".row");
      if (row) { openCase(Number(row.dataset.index)); }
    });
    $("case-rows").addEventListener("keydown", function (ev) {
      var row = ev.target.closest(".row");
      if (row && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); openCase(Number(row.dataset.index)); }
    });
    $("f-verdict").addEventListener("change", function () { state.verdict = this.value; applyFilters(); });
    $("f-kind").addEventListener("change", function () { state.kind = this.value; applyFilters(); });
    $("f-bug").addEventListener("change", function () { state.bug = this.value; applyFilters(); });
    var timer = null;
    $("f-text").addEventListener("input", function () {
      var input = this;
      window.clearTimeout(timer);
      timer = window.setTimeout(function () { state.text = input.value; applyFilters(); }, 120);
    });
    Array.prototype.forEach.call(document.querySelectorAll(".case-head [data-sort]"), function (h) {
      h.addEventListener("click", function () {
        var key = h.dataset.sort;
        state.dir = state.sort === key ? -state.dir : 1;
        state.sort = key;
        applyFilters();
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll("[data-verdict-filter]"), function (b) {
      b.addEventListener("click", function () { setVerdict(b.dataset.verdictFilter); $("cases").scrollIntoView(); });
    });
    Array.prototype.forEach.call(document.querySelectorAll("[data-filter-bug]"), function (b) {
      b.addEventListener("click", function () {
        state.bug = b.dataset.filterBug;
        $("f-bug").value = state.bug;
        applyFilters();
        $("cases").scrollIntoView();
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll("[data-open-case]"), function (b) {
      b.addEventListener("click", function () { openById(b.dataset.openCase); });
    });
    var svg = document.querySelector("#tree svg");
    if (svg) {
      svg.addEventListener("click", function (ev) {
        var g = ev.target.closest("[data-branch], [data-node]");
        if (!g) { return; }
        if (g.dataset.branch) { state.branch = g.dataset.branch; state.node = ""; } else { state.node = g.dataset.node; state.branch = ""; }
        applyFilters();
        $("cases").scrollIntoView();
      });
      svg.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" && ev.target.dispatchEvent) { ev.target.dispatchEvent(new MouseEvent("click", { bubbles: true })); }
      });
    }
    var any = cases.some(function (c) { return !PASSING[c.verdict]; });
    state.verdict = "";
    $("f-verdict").value = "";
    applyFilters();
    var hash = decodeURIComponent((location.hash || "").replace(/^#/, ""));
    if (hash.indexOf("case=") === 0) { openById(hash.slice(5), { fromLink: true }); }
    document.documentElement.dataset.ready = "1";
    window.agentpropReport = {
      readyAt: performance.now(),
      anyNotPassing: any,
      shown: function () { return shown.length; },
      open: openById
    };
  }

  init();
})();
