"""What shrinking a failing case found: the reproducer, its rates, and how minimal it is shown.

Plain data (the corpus and the session keep it, reports render it), and :func:`reconfirm`, the
fresh runs that decide whether a reproducer is shown minimal; the search that makes it is
:mod:`agentprop._decide.shrink` (and :mod:`agentprop._decide.plain_shrink`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from agentprop._scenario.build import Scenario
from agentprop._shrink import Calibration, Outcome, ShrinkResult, verify

__all__ = ["OtherFailure", "RateSummary", "Reconfirmed", "ShrinkReport", "reconfirm"]

C = TypeVar("C")


class RateSummary(BaseModel):
    failures: int
    runs: int
    rate: float
    interval: tuple[float, float]


class OtherFailure(BaseModel):
    """A failure with another signature met on a candidate while shrinking (a different bug,
    or a candidate that no longer asks for what the case expects): never a reproduction."""

    signature: str
    explanation: str = ""
    count: int = 0
    messages: list[str] = Field(default_factory=list)
    """The first candidate it was met on."""


class ShrinkReport(BaseModel):
    """A minimal reproducer of a failing case, and how sure we are of it."""

    scenario: str
    signature: str
    original_messages: list[str]
    reproducer_messages: list[str]
    reproducer: Scenario
    world_reset: list[str] = Field(default_factory=list)
    """World fields put back to the base world (the failure does not need them)."""
    world_kept: list[str] = Field(default_factory=list)
    """World changes the failure needs (beyond those that realise the path itself)."""
    world_scenario: list[str] = Field(default_factory=list)
    """The world values the scenario itself sets and the reproducer always keeps (those that
    realise the path's conditions, the injected failures): part of what reproduces it."""
    diff: list[str] = Field(default_factory=list)
    """Per turn, the reproducer against the scenario's own message: ``{+added+}`` is what the
    kept choices wrote on top of it (``[-removed-]`` what a template variant left out)."""
    original_units: int
    kept_units: int
    runs: int
    judge_calls: int = 0
    """Judge-model calls the shrinker's runs took (a judged property): each spent one run of
    ``budget``, so ``runs + judge_calls`` is within it, but for the last run's calls."""
    queries: int
    budget: int
    budget_exhausted: bool
    minimal: bool
    stop_reason: str
    original_rate: RateSummary
    reproducer_rate: RateSummary | None = None
    """Fresh-run reproduction rate of the reproducer (verification), over the runs made
    (``runs`` 0: none was made; see ``verify_refused``)."""
    verify_refused: int = 0
    """Verification runs asked for but refused by the session budget: not counted."""
    budget_spent: str | None = None
    """Which session limit refused runs (``max_runs=60 reached``), when one did."""
    other_signatures: dict[str, int] = Field(default_factory=dict)
    """Other failures met by the search (counts)."""
    original_choices: dict[str, Any] | None = None
    """The failing input's choices (``None`` when its messages were given as fixed text)."""
    reproducer_choices: dict[str, Any] | None = None
    """The reproducer's choices: what the shrinker kept."""
    reproducer_families: list[str] | None = None
    """The families of ``reproducer_choices`` whose effect is in the reproducer
    (:meth:`agentprop._decide.choices.ChoiceSpace.families_in`): what a cause is named by."""
    choices_kept: str = ""
    """The kept choices in words (``turn 1: urgency(choice=1)``), or that none were needed."""
    other_failures: list[OtherFailure] = Field(default_factory=list)
    """Every other failure met, search and verification runs alike, with the first candidate
    it was met on, most frequent first."""
    behaviour: list[str] = Field(default_factory=list)
    """What the agent did in a run of the reproducer that failed with the signature, per turn up
    to the failing one, without words (tools called, node, decision:
    :func:`agentprop._decide.shrink.behaviour_of`); empty when no run of it failed."""

    @property
    def minimality(self) -> str:
        """What was checked of ``minimal``, in one sentence from measured runs: "1-minimal at
        X% confidence: each of the K single simplification(s) passed N run(s) ..." (per search
        when the free words were shrunk too), or "not shown 1-minimal: " and why."""
        reason = self.stop_reason.replace("minimal: 1-minimal", "1-minimal").removeprefix(
            "minimal: "
        )
        return reason if self.minimal else f"not shown 1-minimal: {reason}"

    @property
    def confirmed(self) -> bool:
        """Whether the reproducer failed again with the signature on fresh runs."""
        return self.reproducer_rate is not None and self.reproducer_rate.failures > 0

    def summary(self) -> str:
        lines = [
            f"shrunk {self.scenario} ({self.signature}): {self.original_units} -> "
            f"{self.kept_units} units in {self.runs} runs"
            + (f" and {self.judge_calls} judge calls" if self.judge_calls else "")
            + (" (budget exhausted)" if self.budget_exhausted else "")
        ]
        lines += [f"  {d}" for d in self.diff]
        if self.world_reset:
            lines.append(f"  world fields not needed: {', '.join(self.world_reset)}")
        if self.world_kept:
            lines.append(f"  world fields needed: {', '.join(self.world_kept)}")
        if self.world_scenario:
            lines.append(f"  world the scenario sets: {', '.join(self.world_scenario)}")
        o = self.original_rate
        lines.append(
            f"  original fails {o.failures}/{o.runs} ({o.rate:.0%}, 95% CI "
            f"{o.interval[0]:.2f}-{o.interval[1]:.2f})"
        )
        if self.reproducer_rate is not None:
            r = self.reproducer_rate
            spent = f"budget spent: {self.budget_spent or 'the run budget'}"
            if not r.runs:
                lines.append(
                    f"  reproducer: fresh runs not measured ({spent}; {self.verify_refused} "
                    "run(s) refused); not reconfirmed"
                )
            else:
                text = (
                    f"  reproducer fails {r.failures}/{r.runs} fresh runs ({r.rate:.0%}, 95% CI "
                    f"{r.interval[0]:.2f}-{r.interval[1]:.2f})"
                )
                if self.verify_refused:
                    text += f"; {self.verify_refused} more run(s) not measured ({spent})"
                if not r.failures:
                    text += f": not reconfirmed, a rate above {r.interval[1]:.2f} is excluded (95%)"
                lines.append(text)
        # "minimal: minimal: ..." read as a stutter
        reason = self.stop_reason.removeprefix("minimal: ")
        lines.append(f"  {'minimal' if self.minimal else 'not proven minimal'}: {reason}")
        for other in self.other_failures:
            lines.append(
                f"  another failure met while shrinking ({other.count}x, not this bug): "
                f"{other.signature} on {other.messages!r}"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class Reconfirmed:
    """What fresh runs of a reproducer showed (:func:`reconfirm`)."""

    rate: RateSummary | None
    """Its failure rate in them (``None``: not run again)."""
    minimal: bool
    stop_reason: str
    refused: int
    """Runs asked for and not made (the budget refused them)."""


def reconfirm(
    result: ShrinkResult[C],
    run: Callable[[C, int], Outcome],
    calibration: Calibration | None,
    *,
    runs: int,
    max_runs: int,
    minimal: bool,
    stop_reason: str,
) -> Reconfirmed:
    """Run ``result``'s reproducer ``runs`` fresh times, more (up to ``max_runs``) while a
    failure at the calibrated original's rate could still be unseen; one that did not fail
    again is not shown to need its units (not ``minimal``, and ``stop_reason`` says why).
    Nothing is run when ``runs`` is 0 or nothing was reproduced."""
    if runs <= 0 or result.signature is None:
        return Reconfirmed(None, minimal, stop_reason, 0)
    seen = calibration.failures / calibration.runs if calibration and calibration.runs else None
    verification = verify(result, run, runs=runs, see_rate=seen, max_runs=max(runs, max_runs))
    r = verification.reproducer
    rate = RateSummary(
        failures=r.failures, runs=r.runs, rate=r.rate if r.runs else 0.0, interval=r.interval
    )
    if minimal and not r.failures:
        minimal = False
        stop_reason = (
            f"{stop_reason}; not reconfirmed: the reproducer did not fail in {r.runs} fresh run(s)"
        )
    return Reconfirmed(rate, minimal, stop_reason, verification.refused)
