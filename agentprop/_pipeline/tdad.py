"""The TDAD evaluation of an agent: a visible/hidden split of the suite and its metrics.

The split is seeded and stratified by kind: every MFT case is visible; BOUNDARY, DIR and INV
cases are split at ``visible_fraction``. Metrics: VPR, HPR, RPR, the mutation score (killed by
the visible suite, over activated mutants) and SURS. Passing the visible tests is never taken
for meeting the spec.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from agentprop._pipeline.mutation.mutants import MutationReport
from agentprop._pipeline.report.model import CaseReport
from agentprop._pipeline.surs import SursResult

Side = Literal["visible", "hidden"]

REPEATED_KINDS = ("MFT", "EXPLORE", "PROBE", "BOUNDARY", "REGRESSION")


def split_suite(
    cases: Sequence[CaseReport],
    *,
    visible_fraction: float = 0.5,
    seed: int = 0,
    mft_visible: bool = True,
) -> dict[str, Side]:
    """``case id -> "visible" | "hidden"``: seeded, stratified by kind (see the module doc)."""
    if not 0.0 <= visible_fraction <= 1.0:
        raise ValueError(f"visible_fraction={visible_fraction} must be between 0 and 1")
    by_kind: dict[str, list[str]] = {}
    for c in cases:
        by_kind.setdefault(c.kind, []).append(c.id)
    out: dict[str, Side] = {}
    for kind, ids in by_kind.items():
        if kind == "REGRESSION" or (kind == "MFT" and mft_visible):
            out.update({i: "visible" for i in ids})
            continue
        ordered = sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
        k = math.floor(visible_fraction * len(ordered) + 0.5)
        out.update({i: ("visible" if n < k else "hidden") for n, i in enumerate(ordered)})
    return out


class ProbeRates(BaseModel):
    """A mutant's activation probe: how often it fired on the mutant and on the clean agent."""

    id: str
    probe_runs: int
    probe_violations: int
    control_runs: int
    control_violations: int
    p_value: float | None

    def text(self) -> str:
        return (
            f"{self.id} (mutant {self.probe_violations}/{self.probe_runs}, clean "
            f"{self.control_violations}/{self.control_runs})"
        )


def probe_rates(mutation: MutationReport, status: str) -> list[ProbeRates]:
    return [
        ProbeRates(
            id=m.id,
            probe_runs=m.probe_runs,
            probe_violations=m.probe_violations,
            control_runs=m.control_runs,
            control_violations=m.control_violations,
            p_value=m.probe_p_value,
        )
        for m in mutation.mutants
        if m.status == status
    ]


class TdadMetrics(BaseModel):
    """TDAD's metrics for one agent on one spec (``None`` where there is nothing to measure)."""

    visible: int
    hidden: int
    visible_passed: int
    hidden_passed: int
    visible_not_applicable: int = 0
    """Visible cases NOT APPLICABLE (base case did not pass): left out of ``visible`` and VPR."""
    hidden_not_applicable: int = 0
    """Hidden cases NOT APPLICABLE: left out of ``hidden`` and HPR."""
    vpr: float | None
    hpr: float | None
    rpr: float | None
    rpr_cases: int
    ms: float | None = None
    mutation_pack: str | None = None
    """The mutation pack's id (``None``: no pack, so no mutation testing)."""
    mutants_killed: int = 0
    mutants_activated: int = 0
    """Mutants whose probe fired significantly more often than on the clean agent."""
    vacuous_probes: list[ProbeRates] = Field(default_factory=list)
    """Mutants left out of MS because the clean agent fires their probe too."""
    non_activating: list[ProbeRates] = Field(default_factory=list)
    """Mutants left out of MS because their probe did not fire more often than
    on the clean agent."""
    cases_clean_not_passing: list[str] = Field(default_factory=list)
    """Visible cases the clean agent does not pass: they kill no mutant."""
    surs: float | None = None
    """Spec update regression score: v1 invariants that pass / v1 invariants (``--base``)."""
    surs_invariants: int = 0
    surs_passed: int = 0
    surs_excluded: int = 0
    visible_fraction: float
    split_seed: int
    split: dict[str, Side] = Field(default_factory=dict)

    def summary(self) -> str:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.1%}"

        def na(k: int) -> str:
            return f"; {k} not applicable, counted for nothing" if k else ""

        lines = [
            f"VPR {pct(self.vpr)}  ({self.visible_passed}/{self.visible} visible cases "
            f"pass{na(self.visible_not_applicable)})",
            f"HPR {pct(self.hpr)}  ({self.hidden_passed}/{self.hidden} hidden cases "
            f"pass{na(self.hidden_not_applicable)})",
            f"RPR {pct(self.rpr)}  (mean pass rate of the runs of {self.rpr_cases} repeated cases)",
        ]
        if self.mutation_pack is None:
            lines.append(
                "MS  n/a  (no mutation pack: mutations.yaml next to the spec, or --mutations FILE)"
            )
        else:
            left_out = (
                f"{len(self.vacuous_probes)} vacuous probes, {len(self.non_activating)} "
                "non-activating left out"
            )
            if self.mutants_activated:
                lines.append(
                    f"MS  {pct(self.ms)}  ({self.mutants_killed}/{self.mutants_activated} "
                    f"activated mutants killed by the visible suite; {left_out})"
                )
            else:
                lines.append(
                    f"MS  n/a  (no mutant of {self.mutation_pack} activated; {left_out}; "
                    "see the mutation lines)"
                )
            if self.vacuous_probes:
                lines.append(
                    "    vacuous probes (the clean agent fires them): "
                    + ", ".join(r.text() for r in self.vacuous_probes)
                )
            if self.non_activating:
                lines.append(
                    "    non-activating: " + ", ".join(r.text() for r in self.non_activating)
                )
            if self.cases_clean_not_passing:
                lines.append(
                    f"    {len(self.cases_clean_not_passing)} visible cases the clean agent does "
                    "not pass killed nothing"
                )
        if self.surs_invariants:
            lines.append(
                f"SURS {pct(self.surs)}  ({self.surs_passed}/{self.surs_invariants} v1 invariant "
                f"cases pass; {self.surs_excluded} v1 cases excluded: v2 changed their path)"
            )
        else:
            lines.append("SURS n/a  (give --base V1_SPEC to run the previous version's invariants)")
        return "\n".join(lines)


def tdad_metrics(
    cases: Sequence[CaseReport],
    split: dict[str, Side],
    mutation: MutationReport | None,
    *,
    visible_fraction: float,
    seed: int,
    surs: SursResult | None = None,
) -> TdadMetrics:
    # NOT APPLICABLE cases (an INV whose base case failed) count for nothing:
    # neither side of VPR/HPR
    decided = [c for c in cases if c.verdict != "NOT APPLICABLE"]
    visible = [c for c in decided if split.get(c.id) == "visible"]
    hidden = [c for c in decided if split.get(c.id) == "hidden"]
    na = [c for c in cases if c.verdict == "NOT APPLICABLE"]
    repeated = [c for c in cases if c.kind in REPEATED_KINDS and c.runs > 0]
    vp = sum(c.verdict == "PASS" for c in visible)
    hp = sum(c.verdict == "PASS" for c in hidden)
    return TdadMetrics(
        visible=len(visible),
        hidden=len(hidden),
        visible_passed=vp,
        hidden_passed=hp,
        visible_not_applicable=sum(split.get(c.id) == "visible" for c in na),
        hidden_not_applicable=sum(split.get(c.id) == "hidden" for c in na),
        vpr=vp / len(visible) if visible else None,
        hpr=hp / len(hidden) if hidden else None,
        rpr=sum(c.pass_rate for c in repeated) / len(repeated) if repeated else None,
        rpr_cases=len(repeated),
        ms=mutation.mutation_score if mutation is not None else None,
        mutation_pack=mutation.pack_id if mutation is not None else None,
        mutants_killed=mutation.killed if mutation is not None else 0,
        mutants_activated=mutation.activated if mutation is not None else 0,
        vacuous_probes=probe_rates(mutation, "vacuous") if mutation is not None else [],
        non_activating=probe_rates(mutation, "non-activating") if mutation is not None else [],
        cases_clean_not_passing=list(mutation.clean_not_passing) if mutation is not None else [],
        surs=surs.surs if surs is not None else None,
        surs_invariants=surs.invariants if surs is not None else 0,
        surs_passed=surs.passed if surs is not None else 0,
        surs_excluded=len(surs.excluded) if surs is not None else 0,
        visible_fraction=visible_fraction,
        split_seed=seed,
        split=dict(split),
    )
