"""The run report: what ``agentprop run --json PATH`` writes (schema ``agentprop.run/1``).

The schema is versioned: fields are only ever added within a major version; renaming or
removing one bumps ``schema``. docs/report-schema.md documents every field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

SCHEMA_ID = "agentprop.run/1"

CaseVerdict = Literal["PASS", "FAIL", "UNSTABLE", "INCONCLUSIVE"]


class FailureSummary(BaseModel):
    signature: str
    """``contract:clause@turnN``: which promise broke, where (stable across runs)."""
    explanation: str
    count: int
    first_trial: int


class CaseReport(BaseModel):
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
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    failures: list[FailureSummary] = Field(default_factory=list)
    capabilities: list[str] = Field(default_factory=list)
    branches: list[str] = Field(default_factory=list)
    shrunk: dict[str, Any] | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    """Kind-specific facts: the comparison and edge of a BOUNDARY case, the flipped atom of a
    DIR case, the variants and p-values of an INV case."""


class Metrics(BaseModel):
    cases: int
    passed: int
    failed: int
    unstable: int
    inconclusive: int = 0
    case_pass_rate: float
    runs: int
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    branch_coverage: float | None = None
    duration_s: float = 0.0
    extra: dict[str, Any] = Field(default_factory=dict)
    """Further metrics (VPR, HPR, MS, SURS, RPR when the TDAD pipeline computes them)."""


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

    model_config = {"populate_by_name": True}

    _replays: dict[str, Any] = PrivateAttr(default_factory=dict)
    """``case id -> replay(agent)``: decide the same case for another agent (mutation testing)."""
    _checks: dict[str, Any] = PrivateAttr(default_factory=dict)
    """``case id -> (scenario, CheckResult)`` of the cases decided in this process (what the
    shrinker needs); not part of the JSON."""
    _explored: dict[str, Any] = PrivateAttr(default_factory=dict)
    """``case id -> ExploredInput`` of the EXPLORE cases: the base scenario and the choices
    (what the shrinker simplifies); not part of the JSON (``cases[].details.choices`` is)."""

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)
