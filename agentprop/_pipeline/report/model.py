"""The run report: what ``agentprop run --json PATH`` writes (schema ``agentprop.run/1``).

The schema is versioned: fields are only ever added within a major version; renaming or
removing one bumps ``schema``. docs/report-schema.md documents every field.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, computed_field

from agentprop._decide.snapshot import SnapshotResult
from agentprop._scenario.trace import Trace
from agentprop._util.bulk import BulkModel

SCHEMA_ID = "agentprop.run/1"
SNAPSHOT_CHECK_SCHEMA_ID = "agentprop.snapshot-check/1"

CaseVerdict = Literal["PASS", "FAIL", "UNSTABLE", "INCONCLUSIVE", "NOT APPLICABLE"]
"""``NOT APPLICABLE`` (INV cases): the base case did not pass, so the case was not decided; it
counts for nothing (neither passed nor failed, left out of VPR/HPR and mutation kills)."""


class FailureSummary(BulkModel):
    signature: str
    """``contract:clause@turnN``: which promise broke, where (stable across runs)."""
    explanation: str
    count: int
    first_trial: int
    clause: str | None = None
    """The spec clause it broke
    (``decision_tree.N2_AUTH.requirements.must_call_tools_in_order``)."""
    traceback: str | None = None
    """The traceback of the agent's exception in the first failing run (when the agent
    raised; secrets scrubbed); ``agentprop run -v`` prints it."""


class RunTrace(BulkModel):
    """One run of a case kept in the report, turn by turn, with what the property said of it.

    Which runs are kept: the first failing runs of every signature and a passing sample
    (:func:`agentprop._decide.oracle.sample_runs`); ``CaseReport.traces_omitted``
    counts the others."""

    trial: int
    passed: bool
    side: str | None = None
    """Which input of the case the run is of, when it has several: ``base`` / ``perturbed``
    (DIR), ``original`` / ``variant 1`` … (INV); ``None`` for one-input cases."""
    signature: str | None = None
    explanation: str | None = None
    clause: str | None = None
    """The spec clause the failure broke (``decision_tree.N2_AUTH.requirements…``)."""
    turn: int | None = None
    """0-based turn of the failure (``None``: a pass, or the conversation as a whole)."""
    step: int | None = None
    """0-based tool call of ``turn`` that broke the promise; ``None`` with a ``turn``: the
    turn's reply (``respond``) or the turn as a whole."""
    world: dict[str, Any] | None = None
    """The world of this run when it is not the case's (``CaseReport.world``): the base side of
    a DIR case."""
    trace: Trace
    """The run: per turn the user message, the tool calls with arguments and results or
    errors, the ``respond`` fields, free text and run errors; the world seed and canaries."""


class CaseReport(BulkModel):
    id: str
    node: str
    """The terminal node (or the node that stopped for missing fields) the case targets."""
    via: str | None = None
    path: list[str] = Field(default_factory=list)
    kind: str = "MFT"
    messages: list[str] = Field(default_factory=list)
    expected_decisions: list[str | None] = Field(default_factory=list)
    verdict: CaseVerdict
    runs: int
    passes: int
    pass_rate: float
    interval: tuple[float, float] | None = None
    """Wilson interval of the pass rate (confidence in ``settings.confidence``)."""
    interval_exact: tuple[float, float] | None = None
    """Clopper–Pearson interval of the pass rate."""
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    """pass^k = C(c,k)/C(n,k) for a few k (``"1"``, ``"3"`` …)."""
    decided_by: str = "fixed"
    runs_beyond_decision: int = 0
    """Runs of a model-backed case started ahead of its decision that the decision did not need
    (cancelled in flight, or finished and kept in the memo); not in ``runs``."""
    rule: str | None = None
    """Which rule chose the oracle settings of this case, e.g. ``zero-failure, 59 clean runs
    (safety: policies.P1_NO_PII)`` or ``sprt at tau 0.9 (spec min_pass_rate)``."""
    reason: str | None = None
    """Why the verdict is NOT APPLICABLE, or why an INCONCLUSIVE case was not decided when the
    reason is not the agent's (``None`` otherwise)."""
    infrastructure_error: dict[str, Any] | None = None
    """``{"kind", "message", "traceback"}`` of the error, not the agent's, that stopped the
    case (a cache miss in replay-only mode, no API key, a refused key, the API unreachable, the
    budget spent inside a run): the case is INCONCLUSIVE, never shrunk or saved to the corpus,
    and ``agentprop run`` exits 2."""
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    failures: list[FailureSummary] = Field(default_factory=list)
    capabilities: list[str] = Field(default_factory=list)
    branches: list[str] = Field(default_factory=list)
    shrunk: dict[str, Any] | None = None
    """The minimal reproducer, on the one case of each bug that was shrunk (its
    representative); the other cases of the bug name it in ``bugs``."""
    bugs: list[str] = Field(default_factory=list)
    """Ids of the bugs (``RunReport.bugs``) whose failures this case met."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Kind-specific facts: the comparison and edge of a BOUNDARY case, the flipped atom of a
    DIR case, the variants and p-values of an INV case."""
    world: dict[str, Any] | None = None
    """The scenario's world: ``overrides`` (tool -> fields set) and injected ``failures``."""
    traces: list[RunTrace] = Field(default_factory=list)
    """Runs kept for reading: the first failing runs of each signature and a passing sample."""
    traces_omitted: int = 0
    """Runs of the case whose traces the report left out (``runs`` minus the kept ones, for
    the kinds that keep traces)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rate_text(self) -> str:
        """The pass rate and what it counts, as every output prints it: runs for most kinds,
        both sides' runs for DIR, variants that kept the original's behaviour for INV (whose
        ``runs`` count the comparison's runs, not what ``pass_rate`` divides)."""
        n = len(self.details.get("variants") or []) if self.kind == "INV" else 0
        if n:
            return (
                f"{self.pass_rate:.0%} ({self.passes}/{n} variants kept the original's behaviour)"
            )
        if self.kind == "DIR":
            return f"{self.pass_rate:.0%} ({self.passes}/{self.runs} runs of both sides)"
        return f"{self.pass_rate:.0%} ({self.passes}/{self.runs} runs)"


class FailureRate(BaseModel):
    """How often something failed with one signature: ``failures`` of ``runs``, with the
    Wilson interval (95%)."""

    failures: int
    runs: int
    rate: float
    interval: tuple[float, float]


class BugReport(BaseModel):
    """One bug: the failures of every case grouped by :func:`agentprop._pipeline.bugs.bug_key` (the
    signature without its ``@turnN``), shrunk once, on its simplest case."""

    id: str
    """Stable across runs: a hash of ``key``."""
    key: str
    """``contract:clause:detail``: the grouping key (the signature without the turn)."""
    signature: str
    """The full signature that was chased (the representative's)."""
    signatures: list[str] = Field(default_factory=list)
    """Every full signature of the group (the same fault met on different turns)."""
    explanation: str = ""
    origin: Literal["cases", "shrinking"] = "cases"
    """``cases``: a case that did not pass failed with it. ``shrinking``: met only on a
    candidate while another bug was shrunk; not confirmed (the candidate's expectations are
    those of the case's path, which the cut-down messages may no longer ask for)."""
    cases: list[str] = Field(default_factory=list)
    """The cases that did not pass and failed with it (for ``shrinking``: the cases being
    shrunk when it was met)."""
    representative: str | None = None
    """The case the reproducer comes from (the simplest shrinkable case of the group)."""
    known: bool = False
    """A corpus entry already held this bug and its replay reproduced it: no new shrink."""
    shrink_runs: int = 0
    """Agent runs the shrinker spent on it (0 when not shrunk), verification included."""
    minimal: bool | None = None
    minimality: str = ""
    """What was checked of ``minimal``, from measured runs: "1-minimal at 99.8% confidence:
    each of the 2 single simplification(s) passed 12 run(s) without the failure (...)", or
    "not shown 1-minimal: " and why (empty when not shrunk)."""
    reproducer_messages: list[str] = Field(default_factory=list)
    reproducer_world: dict[str, Any] | None = None
    diff: list[str] = Field(default_factory=list)
    world_kept: list[str] = Field(default_factory=list)
    world_scenario: list[str] = Field(default_factory=list)
    """The world values the reproducer's scenario sets (path conditions, injected failures):
    printed with the reproducer, since they are part of what makes it fail."""
    choices_kept: str = ""
    """The generator's choices the reproducer kept, in words (explored inputs)."""
    rate: FailureRate | None = None
    """Failure rate with this signature: of the reproducer on fresh runs when it was shrunk,
    of the corpus replay when ``known``, else of the representative case."""
    rate_of: str = ""
    """What ``rate`` was measured on: ``reproducer``, ``corpus replay``, ``case``, ``candidate``,
    ``variants`` (INV: the variants that changed the behaviour) or ``pair`` (DIR:
    both sides' runs)."""
    confirmed: bool | None = None
    """``True``: the reproducer failed again with the signature on fresh runs. ``False``: seen
    in the cases but not reconfirmed (the fresh runs stayed clean, or were not made); it is
    reported and saved all the same. ``None``: there was no reproducer to re-run."""
    refused_runs: int = 0
    """Fresh runs of the reproducer asked for but refused by the run's budget: not in ``rate``."""
    budget_spent: str | None = None
    """The budget limit that refused runs (``max_runs=60 reached``), when one did."""
    case_rate: FailureRate | None = None
    """The representative case's own failures with the signature (the evidence the bug rests
    on when its reproducer was not re-run, or stayed clean)."""
    corpus_entry: str | None = None
    cause: list[str] = Field(default_factory=list)
    """The choice families its reproducer needs, when its signature had more than one cause
    (each cause is its own bug, keyed ``KEY [cause: FAMILIES]``); empty otherwise."""
    note: str = ""
    """Why it was not shrunk, or what to make of it."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rate_text(self) -> str:
        """The bug's figures in one sentence: what every output (terminal, JSON, HTML, JUnit,
        Markdown) prints, made by :func:`bug_rate_text`."""
        return bug_rate_text(self)


_RATE_ON = {
    "reproducer": "fresh runs of the reproducer",
    "corpus replay": "runs of the corpus replay",
    "case": "runs of the case",
    "candidate": "shrinking runs",
    "variants": "variants (each against the original, over its runs)",
    "pair": "runs of the pair (both sides)",
}


def _figures(r: FailureRate) -> str:
    return (
        f"{r.failures}/{r.runs} runs ({r.rate:.0%}, 95% CI {r.interval[0]:.2f}-{r.interval[1]:.2f})"
    )


def bug_rate_text(bug: BugReport) -> str:
    """How often ``bug`` failed, in the words every output uses: only figures that were
    measured. Runs the budget refused are never counted as clean runs: with none made it
    says "not measured (budget spent)" and what was spent; a reproducer whose fresh runs
    stayed clean is "not reconfirmed", with the rate its runs can exclude and the case's."""
    on = _RATE_ON.get(bug.rate_of, "runs")
    spent = f"budget spent: {bug.budget_spent or 'the run budget'}"
    case = (
        f"; the case failed {_figures(bug.case_rate)}"
        if bug.case_rate is not None and bug.case_rate.runs
        else ""
    )
    r = bug.rate
    if r is None or r.runs == 0:
        if bug.rate_of == "reproducer" or bug.refused_runs:
            return f"{on}: not measured ({spent}; {bug.refused_runs} run(s) refused){case}"
        return ""
    failures, runs = r.failures, r.runs
    text = (
        f"fails {failures}/{runs} {on} ({r.rate:.0%}, 95% CI "
        f"{r.interval[0]:.2f}-{r.interval[1]:.2f})"
    )
    if bug.refused_runs:
        text += f"; {bug.refused_runs} more run(s) not measured ({spent})"
    if bug.confirmed is False and failures == 0:
        text += f": not reconfirmed, a rate above {r.interval[1]:.2f} is excluded (95%){case}"
    return text


class CorpusEvent(BaseModel):
    """What happened to one corpus entry in this run."""

    entry: str
    action: Literal[
        "regression",
        "fails-differently",
        "retired",
        "kept",
        "saved",
        "updated",
        "damaged",
        "not-saved",
    ]
    """``damaged``: the entry's file could not be read; it was skipped (``message`` names the
    file, the problem and the fix). ``not-saved``: the entry could not be written (a full or
    read-only disk); the reproducer is still in this report, under its case's ``shrunk``."""
    signature: str
    message: str


class Metrics(BaseModel):
    cases: int
    passed: int
    failed: int
    unstable: int
    inconclusive: int = 0
    not_applicable: int = 0
    """Cases not decided because their base case did not pass; left out of ``case_pass_rate``."""
    case_pass_rate: float
    runs: int
    """Runs judged, summed over the cases (a run one case reuses from another counts in each):
    not what was spent, which is ``runs_started``."""
    runs_started: int | None = None
    """Agent runs started (each one costs model calls), shrinking not included (``None``:
    written by an agentprop that did not count them)."""
    runs_reused: int | None = None
    """Runs judged without starting them: reused from the memo (another case's, an earlier
    decision's, or the screen's when a failure was confirmed)."""
    runs_refused: int | None = None
    """Runs the budget refused to start (cases left undecided or shallower for it)."""
    runs_beyond_decision: int = 0
    """Runs started ahead of a decision that it did not need, over all cases (see
    :attr:`CaseReport.runs_beyond_decision`)."""
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    branch_coverage: float | None = None
    duration_s: float = 0.0
    extra: dict[str, Any] = Field(default_factory=dict)
    """Further metrics (VPR, HPR, MS, SURS, RPR when the TDAD pipeline computes them)."""


def case_metrics(
    cases: list[CaseReport],
    coverage: dict[str, Any],
    *,
    runs_started: int | None,
    runs_reused: int | None,
    runs_refused: int | None,
    duration_s: float,
    extra: dict[str, Any],
) -> Metrics:
    """The metrics of a run (or of merged shards) whose cases are ``cases``: verdict counts,
    runs and costs summed over the cases, branch coverage from ``coverage`` (a coverage matrix,
    also the first of ``extra``); what was spent is the caller's to count."""
    verdicts = Counter(c.verdict for c in cases)
    decided = len(cases) - verdicts["NOT APPLICABLE"]
    covered, all_branches = set(coverage["branches"]["covered"]), set(coverage["branches"]["all"])
    return Metrics(
        cases=len(cases),
        passed=verdicts["PASS"],
        failed=verdicts["FAIL"],
        unstable=verdicts["UNSTABLE"],
        inconclusive=verdicts["INCONCLUSIVE"],
        not_applicable=verdicts["NOT APPLICABLE"],
        case_pass_rate=verdicts["PASS"] / decided if decided else 0.0,
        runs=sum(c.runs for c in cases),
        runs_started=runs_started,
        runs_reused=runs_reused,
        runs_refused=runs_refused,
        runs_beyond_decision=sum(c.runs_beyond_decision for c in cases),
        cost_usd=sum(c.cost_usd for c in cases),
        input_tokens=sum(c.input_tokens for c in cases),
        output_tokens=sum(c.output_tokens for c in cases),
        branch_coverage=len(covered & all_branches) / len(all_branches) if all_branches else None,
        duration_s=duration_s,
        extra={"coverage": coverage, **extra},
    )


class SpecInfo(BaseModel):
    id: str
    title: str = ""
    version: str = ""
    base_version: str | None = None
    risk_level: str = ""
    path: str = ""


class AgentInfo(BaseModel):
    ref: str
    faults: dict[str, float] = Field(default_factory=dict)
    fingerprint: str = ""


BranchStatus = Literal["taken", "untaken", "unrealisable"]


class TreeBranch(BaseModel):
    """Branch ``index`` of a node: taken when ``when`` holds (first match wins)."""

    id: str
    """``NODE#k`` (as in ``cases[].branches``)."""
    index: int
    when: str
    next: str
    description: str | None = None
    status: BranchStatus
    """``taken``: a case that ran takes it; ``untaken``: realisable, but no case that ran takes
    it (left out by ``--case``); ``unrealisable``: no scenario can take it (see ``problems``)."""
    loop: bool = False
    """It leads back to a node already on its path (loops are unrolled once)."""


class TreeNode(BaseModel):
    id: str
    description: str = ""
    terminal: bool = False
    """A node no branch leaves (``END_*``: declared without branches, or only named by ``next``)."""
    branches: list[TreeBranch] = Field(default_factory=list)


class DecisionTree(BaseModel):
    """The spec's decision tree with what this run covered of it."""

    root: str
    nodes: list[TreeNode] = Field(default_factory=list)


class TraceSampling(BaseModel):
    """How many runs the report kept traces of, and the rule that chose them."""

    kept: int = 0
    omitted: int = 0
    failing_per_signature: int = 0
    failing_per_case: int = 0
    passing_per_case: int = 0
    passing_per_run: int | None = None
    """Passing runs kept in all (the first cases decided keep theirs); ``None``: no cap."""


class PolicyClaimReport(BaseModel):
    """A safety policy's claim (:mod:`agentprop._decide.claims`): certified over the suite's
    runs (``level: suite``) or per case (``case``, the ``release`` profile), violated, or not
    certified for want of runs."""

    policy: str
    why: str
    level: Literal["suite", "case"]
    status: Literal["certified", "violated", "not certified"]
    cases: int
    runs: int
    violations: int
    violating_cases: list[str] = Field(default_factory=list)
    bound: float | None = None
    """Upper bound on the violation rate at ``confidence`` (no violation in ``runs``)."""
    confidence: float = 0.95
    needed: int = 59
    statement: str = ""
    topped_up: int = 0
    """Runs the top-up added towards ``needed`` clean runs (part of ``runs``)."""


class RunReport(BaseModel):
    schema_: str = Field(SCHEMA_ID, alias="schema")
    agentprop_version: str
    spec: SpecInfo
    agent: AgentInfo
    settings: dict[str, Any] = Field(default_factory=dict)
    cases: list[CaseReport] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    """Paths the spec and bindings cannot realise (reported, never silently skipped)."""
    metrics: Metrics
    bugs: list[BugReport] = Field(default_factory=list)
    """The failures grouped into bugs (one shrink each), most cases first; the ones met only
    while shrinking come last."""
    corpus: list[CorpusEvent] = Field(default_factory=list)
    """What happened to the failure corpus: regressions, retirements, new and updated entries."""
    tree: DecisionTree | None = None
    """The decision tree, each branch taken, untaken or unrealisable (``None``: written by an
    agentprop before the tree was reported)."""
    trace_sampling: TraceSampling | None = None
    """Totals of the runs kept in ``cases[].traces`` and left out."""
    profile: str | None = None
    """How deep the cases were decided (``smoke``, ``ci``, ``release``; ``None``:
    explicit settings)."""
    claims: list[PolicyClaimReport] = Field(default_factory=list)
    """Per safety policy, the level at which it was certified (or that it was violated)."""

    model_config = {"populate_by_name": True}

    _replays: dict[str, Any] = PrivateAttr(default_factory=dict)
    """``case id -> replay(agent)``: decide the same case for another agent (mutation testing)."""
    _checks: dict[str, Any] = PrivateAttr(default_factory=dict)
    """``case id -> (scenario, CheckResult)`` of the cases decided in this process (what the
    shrinker needs); not part of the JSON."""
    _explored: dict[str, Any] = PrivateAttr(default_factory=dict)
    """``case id -> ExploredInput`` of the EXPLORE cases: the base scenario and the choices
    (what the shrinker simplifies); not part of the JSON (``cases[].details.choices`` is)."""
    _props: dict[str, Any] = PrivateAttr(default_factory=dict)
    """``case id -> property`` of the cases not decided by the MFT of their scenario (corpus
    replays of PROBE reproducers); not part of the JSON."""

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)

    def json_chunks(self) -> Iterator[str]:
        """:meth:`to_json` in pieces, one case at a time: joined, the same text; a report of many
        thousand cases is never held as one string (nor as its serializer's buffer)."""
        cases = self.cases
        head, marker, tail = self.model_copy(update={"cases": []}).to_json().partition(_EMPTY_CASES)
        if not cases or not marker:
            yield self.to_json()
            return
        yield head + '\n  "cases": [\n'
        last = len(cases) - 1
        for i, case in enumerate(cases):
            yield (
                "    "
                + case.model_dump_json(by_alias=True, indent=2).replace("\n", "\n    ")
                + (",\n" if i < last else "\n")
            )
        yield "  ]," + tail


_EMPTY_CASES = '\n  "cases": [],'
"""How :meth:`RunReport.to_json` writes no cases (a newline inside a string is escaped: this
only matches the report's own field)."""


# --- snapshot checks (``agentprop snapshot check --json``) ----------------------------------


class SnapshotCheckReport(BaseModel):
    """What ``agentprop snapshot check --json PATH`` writes (schema
    ``agentprop.snapshot-check/1``)."""

    schema_: str = Field(SNAPSHOT_CHECK_SCHEMA_ID, alias="schema")
    spec_id: str
    agent: str
    runs: int
    alpha: float
    results: list[SnapshotResult] = Field(default_factory=list)
    """One per snapshot: the verdict, the baseline's and the current behaviour
    counts, the changes."""

    model_config = {"populate_by_name": True}

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"
