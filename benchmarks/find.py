"""The fault zoo: does a default ``agentprop run`` find the bug nobody wrote down?

Usage: ``python benchmarks/find.py [--json PATH] [--quick] [--clean-seeds N] [--only KNOB]``

Each fault of :data:`ZOO` is a fault knob of a bundled example's reference agent
(``examples/*/agent.py``, ``ZOO_FAULTS`` and ``skip_auth_impatient``) that misbehaves only when
the user writes in a certain way — a word of a phrase-pack family, another template, a follow-up
phrased differently, an entity typed in lower case or misspelt, a Chinese phrase, English mixed
with Chinese — or when a tool answers a value the path does not fix, at a realistic rate
(0.2-1.0). The faults were written before the generator could reach them, from what users say;
each has a known minimal trigger (:class:`Trigger`): a test on the messages (or the world) that
holds exactly when the fault can fire.

For every fault, in this one process, with the entry points ``agentprop run`` uses
(``arun_cases`` then ``shrink_failures``, default settings, seed 0, no corpus):

- **default**: the default run (MFT, EXPLORE, PROBE, BOUNDARY, DIR, INV; ``--explore 12``);
- **baseline**: the first-template-only run (``--explore 0``, no PROBE: every case written in
  each path's first template, as before exploration and probes existed).

A fault is *found* when the run reports a bug (a case failed). A reproducer is *minimal* when
the shrunk input holds the trigger, every choice it kept is needed for the trigger (dropping
any one loses it), it kept no world change the trigger does not need, and its fresh runs still
fail with the bug's signature. In the blind zoo (no trigger to read) a shrunk bug the clean agent
fails too is the base agent's bug, found beside the fault's. Like a clean run's failure, it is a
false alarm unless a blind adjudication judged its failing case an agent error (it may be a
generator's or an oracle's error met during the fault's run); an adjudicated one's reproducer is
judged against the clean agent (which must fail it and pass it without any one kept choice), the
fault's own against the faulted agent. The minimal rate is over the fault's own shrunk bugs and
the base agents' adjudicated ones, each judged against the agent that has it, and each side is
also reported alone. Then the clean agents run every case of the default run on
``--clean-seeds`` seeds (0, 1, ...): any case that does not pass is a false alarm unless a blind
adjudication judged it an agent error (benchmarks/_adjudication); the baseline's cases are those
runs' cases minus EXPLORE (same seed, same inputs, same verdicts).

The canary-probe and forbidden-scope faults are reached by PROBE cases (requests that ask for
a planted field by name or by meaning, or invite a forbidden action).

``--json PATH`` writes ``{"found_rate", "baseline_found_rate", "false_alarms", "minimal_rate",
"shrink_runs_per_bug", "runs_total", ...}``; the blind zoo adds ``blind_X`` for X in
:data:`BLIND_KEYS` (``blind_faults``, ``blind_found_rate``, ``blind_missed_unreached`` and
``blind_missed_masked``: missed faults whose run failed no case the clean agent passes, or
some; ``blind_false_alarms`` = ``blind_clean_false_alarms`` + ``blind_base_false_alarms`` (the
base agents' bugs not adjudicated agent errors), ``blind_minimal_rate``,
``blind_own_minimal_rate``, ``blind_base_minimal_rate`` (the adjudicated ones),
``blind_base_bugs``, ``blind_base_bugs_adjudicated_agent_errors``,
``blind_shrink_runs_per_bug``, ...),
``blind_zoo`` (freeze hash, author) and ``blind`` (the whole summary; per fault
``entries[].fault_only_cases``: 0 never reached, more reached but masked, null not measured).
Targets (issues #10, #24): found >= 0.9, false alarms 0, minimal >= 0.9, shrink runs per
distinct bug <= 60. ``--quick`` runs three faults on one path
each and one clean seed (the CI test's configuration). Seeded: a rerun prints the same table.
The summary keeps every failing input it counted and every bug's judgement
(``entries[].bugs[]``, ``entries[].baseline_bugs[]``), so ``--rejudge JSON`` counts its false
alarms and minimal rates again against adjudications landed after the run, running nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentprop import load_agent, load_project  # noqa: E402
from agentprop._agents.project import Project  # noqa: E402
from agentprop._decide.check import decide_scenario  # noqa: E402
from agentprop._decide.choices import Choices, ChoiceSpace, choice_units, keep_only  # noqa: E402
from agentprop._decide.memo import TrialMemo  # noqa: E402
from agentprop._decide.shrunk import ShrinkReport  # noqa: E402
from agentprop._modelapi.budget import Budget  # noqa: E402
from agentprop._pipeline.defaults import KINDS  # noqa: E402
from agentprop._pipeline.explore import DEFAULT_PER_PATH  # noqa: E402
from agentprop._pipeline.report.model import RunReport  # noqa: E402
from agentprop._pipeline.run import RunSettings, arun_cases, shrink_failures  # noqa: E402
from agentprop._scenario.build import Scenario, load_object  # noqa: E402
from agentprop._scenario.world import get_path, set_path  # noqa: E402
from benchmarks._support.adjudicated import (  # noqa: E402
    Adjudications,
    Failure,
    Tally,
    failure_from,
    failure_of,
    failure_record,
    judged_text,
    world_key,
)

DEFAULT_KINDS = KINDS
BASELINE_KINDS = ("mft", "boundary", "dir", "inv")
SHRINK_BUDGET = 200
"""``agentprop run``'s default ``--shrink-budget``."""
FAILING = ("FAIL", "UNSTABLE")


# ----------------------------------------------------------------------------- triggers


@dataclass(frozen=True)
class Trigger:
    """The known minimal trigger of a fault: what must be in the input for it to fire."""

    words: str
    """In words, for the table."""
    turns: str = "any"
    """Which user turns may carry it: ``first``, ``followup`` or ``any`` (``world``: none)."""
    message: Callable[[str], bool] | None = None
    world: Callable[[Mapping[str, Mapping[str, Any]]], bool] | None = None

    def present(self, scenario: Scenario) -> bool:
        if self.world is not None:
            return self.world(scenario.world.overrides)
        assert self.message is not None
        messages = scenario.messages
        chosen = (
            messages[:1]
            if self.turns == "first"
            else messages[1:]
            if self.turns == "followup"
            else messages
        )
        return any(self.message(m) for m in chosen)


def _agent_attr(example: str, name: str) -> Any:
    """An attribute of an example's agent module (its trigger patterns are the ground truth)."""
    return load_object(f"agent:{name}", ROOT / "examples" / example)


def matches(example: str, pattern: str) -> Callable[[str], bool]:
    """The message matches the agent's own compiled pattern ``pattern``."""

    def test(message: str) -> bool:
        return _agent_attr(example, pattern).search(message) is not None

    return test


def contains(*needles: str, ignore_case: bool = False) -> Callable[[str], bool]:
    def test(message: str) -> bool:
        hay = message.lower() if ignore_case else message
        return any(n in hay for n in needles)

    return test


def _supportops_auth_first(message: str) -> bool:
    last4, zip_code, intent = (
        _agent_attr("supportops", n).search(message) for n in ("_LAST4", "_ZIP", "_INTENT_WORD")
    )
    return intent is not None and any(
        m is not None and m.start() < intent.start() for m in (last4, zip_code)
    )


def _supportops_typo(message: str) -> bool:
    classify = _agent_attr("supportops", "classify")
    correct = _agent_attr("supportops", "correct_typos")
    vocabulary = _agent_attr("supportops", "_VOCABULARY")
    return bool(classify(message, exact=True) != classify(correct(message, vocabulary)))


def _expenseguard_role(message: str) -> bool:
    parse = _agent_attr("expenseguard", "parse_request")
    correct = _agent_attr("expenseguard", "correct_typos")
    role = parse(correct(message, _agent_attr("expenseguard", "_VOCABULARY"))).get("role")
    return role is not None and role not in _agent_attr("expenseguard", "_KNOWN_ROLES")


def _receipt_id_typed_in_lower_case(message: str) -> bool:
    return "rcp-123" in message.lower() and "RCP-123" not in message


def _mixed_language(message: str) -> bool:
    return (
        re.search(r"[\u3400-\u9fff]", message) is not None
        and re.search(r"[A-Za-z]{3,}", message) is not None
    )


def _thanks_not_no(message: str) -> bool:
    return matches("supportops", "_THANKS")(message) and not matches("supportops", "_NO")(message)


def _manager_gate(world: Mapping[str, Mapping[str, Any]]) -> bool:
    value = world.get("get_policy", {}).get("manager_approval_over")
    # below every amount the approve paths submit
    return isinstance(value, (int, float)) and value < 138.0


# ----------------------------------------------------------------------------- the zoo


@dataclass(frozen=True)
class Fault:
    example: str
    knob: str
    rate: float
    kind: str
    trigger: Trigger
    quick_case: str | None = None
    """The path ``--quick`` runs it on (faults without one are left out of ``--quick``)."""

    @property
    def words(self) -> str:
        return self.trigger.words


S, E, D = "supportops", "expenseguard", "datainsights"
ZOO: tuple[Fault, ...] = (
    # SupportOps: a support desk that cancels orders and changes addresses
    Fault(
        S,
        "skip_auth_impatient",
        0.5,
        "register: hurried",
        Trigger("a hurried word (now, asap, quick, hurry, !)", message=matches(S, "_IMPATIENT")),
    ),
    Fault(
        S,
        "hedge_asks_again",
        0.5,
        "hedge",
        Trigger(
            "a hedge (if possible, maybe, when you get a chance)", message=matches(S, "_HEDGE")
        ),
    ),
    Fault(
        S,
        "filler_unclear",
        0.4,
        "filler",
        Trigger(
            "a first message opening with a filler (um, so, well)",
            "first",
            matches(S, "_FILLER_OPENING"),
        ),
    ),
    Fault(
        S,
        "casual_skips_confirm",
        0.6,
        "register: casual",
        Trigger("a casual word (hey, thx, pls)", message=matches(S, "_CASUAL")),
    ),
    Fault(
        S,
        "question_explains",
        0.5,
        "question <-> request",
        Trigger(
            "an address change asked as a question (could you ...?)",
            message=matches(S, "_QUESTION_REQUEST"),
        ),
    ),
    Fault(
        S,
        "auth_first_missed",
        0.7,
        "reorder",
        Trigger("card digits or ZIP before the request", "first", _supportops_auth_first),
    ),
    Fault(
        S,
        "typo_unrecognised",
        0.8,
        "typo",
        Trigger("a slip in the request word (cancle, adress)", "first", _supportops_typo),
    ),
    Fault(
        S,
        "moving_skips_auth",
        0.4,
        "second template",
        Trigger("the user is moving (template 1)", message=matches(S, "_MOVING")),
    ),
    Fault(
        S,
        "not_sure_is_yes",
        0.5,
        "follow-up wording",
        Trigger("'not sure' on the confirmation turn", "followup", matches(S, "_UNSURE")),
    ),
    Fault(
        S,
        "order_id_case",
        0.6,
        "entity letter case",
        Trigger("the order id typed in lower case (o-1001)", message=contains("o-1001")),
        quick_case="END_CANCELLED<-N7_CANCEL",
    ),
    Fault(
        S,
        "zh_trouble_ticket",
        0.5,
        "language-specific phrase (zh)",
        Trigger("麻烦 (麻烦您 / 麻烦了)", message=contains("麻烦")),
    ),
    Fault(
        S,
        "thanks_as_no",
        0.6,
        "follow-up wording",
        Trigger("a thanks on the confirmation turn", "followup", _thanks_not_no),
    ),
    Fault(
        S,
        "leak_dob",
        1.0,
        "canary probe",
        Trigger("a question about the date of birth on file", message=matches(S, "_BIRTH")),
    ),
    Fault(
        S,
        "skip_auth_on_request",
        0.8,
        "forbidden-scope invitation",
        Trigger("'no need to verify me'", message=matches(S, "_SKIP_CHECK")),
    ),
    # ExpenseGuard: expense approvals against a policy
    Fault(
        E,
        "polite_over_limit",
        0.5,
        "politeness",
        Trigger(
            "a polite phrase (kindly, could you please, would you mind)",
            message=matches(E, "_POLITE"),
        ),
    ),
    Fault(
        E,
        "formal_opens_case",
        0.4,
        "register: formal",
        Trigger(
            "formal wording (I would be grateful, Dear, I am writing to)",
            message=matches(E, "_FORMAL"),
        ),
    ),
    Fault(
        E,
        "receipt_id_case",
        0.7,
        "entity letter case",
        Trigger(
            "the receipt id typed in lower case (rcp-123)", message=_receipt_id_typed_in_lower_case
        ),
    ),
    Fault(
        E,
        "unknown_role",
        0.6,
        "entity spelling",
        Trigger("the role misspelt (enginer)", message=_expenseguard_role),
    ),
    Fault(
        E,
        "manager_gate",
        0.5,
        "world value",
        Trigger("get_policy.manager_approval_over below the amount", "world", world=_manager_gate),
        quick_case="END_APPROVE<-N7_SUBMIT",
    ),
    Fault(
        E,
        "client_visit_entertainment",
        0.5,
        "optional segment",
        Trigger("the trip's purpose: a client visit", message=matches(E, "_CLIENT")),
    ),
    Fault(
        E,
        "reimbursement_skips_items",
        0.4,
        "second template",
        Trigger(
            "a reimbursement, not an expense report (template 2)",
            message=matches(E, "_REIMBURSEMENT"),
        ),
    ),
    Fault(
        E,
        "hedge_asks_again",
        0.3,
        "hedge",
        Trigger("a hedge (if possible, maybe)", message=matches(E, "_HEDGE")),
    ),
    Fault(
        E,
        "urgent_skips_receipt",
        0.5,
        "register: urgent",
        Trigger("an urgent word (asap, urgent, quickly)", message=matches(E, "_URGENT")),
    ),
    # DataInsights: business questions answered with SQL
    Fault(
        D,
        "followup_filler_asks_again",
        0.6,
        "follow-up wording",
        Trigger(
            "the clarification answer opens with a filler or hedge",
            "followup",
            matches(D, "_FILLER_OR_HEDGE_OPENING"),
        ),
    ),
    Fault(
        D,
        "report_select_star",
        0.5,
        "second template",
        Trigger("a request for a report (template 2)", message=matches(D, "_REPORT")),
    ),
    Fault(
        D,
        "hurried_guess",
        0.4,
        "register: hurried",
        Trigger("a hurried word (asap, urgent, quick)", message=matches(D, "_HURRIED")),
    ),
    Fault(
        D,
        "can_you_answered_yes",
        0.5,
        "question <-> request",
        Trigger(
            "a request asked as a yes/no question (can you ...?)",
            message=matches(D, "_YES_NO_REQUEST"),
        ),
    ),
    Fault(
        D,
        "mixed_language_clarify",
        0.6,
        "code-switching",
        Trigger("English mixed with Chinese", message=_mixed_language),
    ),
    Fault(
        D,
        "month_case",
        1.0,
        "entity letter case",
        Trigger("a month typed in lower case (march 2024)", message=matches(D, "_LOWER_MONTH")),
        quick_case="END_NO_RESULTS<-N4_RUN_SQL",
    ),
    Fault(
        D,
        "casual_rounds_figures",
        0.3,
        "register: casual",
        Trigger("a casual word (hey, thx, pls)", message=matches(D, "_CASUAL")),
    ),
)


# ----------------------------------------------------------------------------- running


@dataclass
class RunOutcome:
    report: RunReport
    shrinks: list[ShrinkReport]
    runs_total: int
    """Agent runs started (memo hits are free: no run)."""
    shrink_runs: int
    """Agent runs the shrinker started, verification included."""
    seconds: float
    seed: int = 0

    def runs_of(self, kinds: Sequence[str]) -> int:
        return sum(c.runs for c in self.report.cases if c.kind in kinds)

    def shrink_of(self, bug: Any) -> ShrinkReport | None:
        """The shrink whose reproducer the bug reports (one signature split into causes has
        one shrink per cause, and shrinks that named no new cause)."""
        return next(
            (
                s
                for s in self.shrinks
                if s.signature == bug.signature and s.reproducer_messages == bug.reproducer_messages
            ),
            None,
        )

    @property
    def bugs(self) -> list[Any]:
        return [b for b in self.report.bugs if b.origin == "cases"]


_PROJECTS: dict[str, Project] = {}


def project_of(example: str) -> Project:
    if example not in _PROJECTS:
        _PROJECTS[example] = load_project(ROOT / "examples" / example)
    return _PROJECTS[example]


def agentprop_run(
    example: str,
    faults: Mapping[str, float],
    *,
    explore: bool,
    seed: int = 0,
    case: str | None = None,
) -> RunOutcome:
    """``agentprop run examples/EXAMPLE [--fault K=P] [--explore 0] --seed S --corpus none``,
    in process: the same calls the CLI makes (cases, then shrinking under one budget).
    ``case`` (``--quick``) runs that one path's MFT and EXPLORE cases only."""
    project = project_of(example)
    return run_project(
        project, project.bindings.agent or "", faults, explore=explore, seed=seed, case=case
    )


def run_project(
    project: Project,
    agent_ref: str,
    faults: Mapping[str, float],
    *,
    explore: bool,
    seed: int = 0,
    case: str | None = None,
) -> RunOutcome:
    """:func:`agentprop_run` on a loaded project and an agent reference."""
    agent = load_agent(agent_ref, project.base_dir, dict(faults))
    scenarios = project.scenarios()
    kinds = DEFAULT_KINDS if explore else BASELINE_KINDS
    if case is not None:
        scenarios = [s for s in scenarios if s.id == case]
        kinds = ("mft", "explore") if explore else ("mft",)
    settings = RunSettings(kinds=kinds, seed=seed, explore=DEFAULT_PER_PATH if explore else 0)
    budget = Budget()
    memo = TrialMemo()
    started = time.perf_counter()

    async def go() -> tuple[RunReport, list[ShrinkReport], int]:
        report = await arun_cases(
            project,
            agent,
            scenarios,
            settings,
            problems=project.problems,
            budget=budget,
            memo=memo,
            corpus=None,
        )
        before = budget.snapshot().runs
        shrinks = await asyncio.to_thread(
            shrink_failures,
            project,
            agent,
            report,
            budget=SHRINK_BUDGET,
            corpus=None,
            session_budget=budget,
            memo=memo,
            seed=seed,
        )
        return report, shrinks, budget.snapshot().runs - before

    report, shrinks, shrink_runs = asyncio.run(go())
    return RunOutcome(
        report, shrinks, budget.snapshot().runs, shrink_runs, time.perf_counter() - started, seed
    )


@dataclass
class Judgement:
    bug: str
    minimal: bool
    keeps_signature: bool
    why: str
    reproducer: str
    shrunk: bool = True
    """False for a bug only INV or DIR cases hit (a distribution or a pair: no one input to
    shrink); it has no reproducer to judge and is counted apart."""
    own: bool = True
    """The fault's bug (blind zoo: the clean agent passes its reproducer; an unshrunk bug has
    none to check and does not count)."""
    base: bool = False
    """Blind zoo: the base agent's bug (the clean agent fails its reproducer too), judged
    against the clean agent."""
    adjudicated: str | None = None
    """Blind zoo, a base agent's bug: what a blind adjudication said of its failing cases."""
    failures: tuple[Failure, ...] = ()
    """Blind zoo, a base agent's bug in the clean run's world: its failing cases (``--rejudge``
    looks them up again)."""


def judge(fault: Fault, outcome: RunOutcome) -> list[Judgement]:
    """For each shrunk bug of a fault's run: does its reproducer equal the known minimal
    trigger (holds it, needs every kept choice for it, no world change it does not need) and
    keep the bug's signature on fresh runs?"""
    project = project_of(fault.example)
    out: list[Judgement] = []
    for bug in outcome.bugs:
        shrunk = outcome.shrink_of(bug)
        if shrunk is None or not bug.shrink_runs:
            out.append(
                Judgement(
                    bug.id,
                    False,
                    False,
                    f"not shrunk: {bug.note}",
                    repr(bug.reproducer_messages),
                    shrunk=False,
                )
            )
            continue
        keeps = shrunk.reproducer_rate is not None and shrunk.reproducer_rate.failures > 0
        rep = shrunk.reproducer
        text = " | ".join(rep.messages) + (
            f" [{shrunk.choices_kept}]" if shrunk.reproducer_choices else ""
        )
        if not fault.trigger.present(rep):
            out.append(
                Judgement(bug.id, False, keeps, "the reproducer does not hold the trigger", text)
            )
            continue
        if shrunk.world_kept:
            out.append(
                Judgement(
                    bug.id,
                    False,
                    keeps,
                    f"kept world changes the trigger does not need: {', '.join(shrunk.world_kept)}",
                    text,
                )
            )
            continue
        if shrunk.reproducer_choices is None:
            out.append(
                Judgement(bug.id, True, keeps, "the scenario's own input holds the trigger", text)
            )
            continue
        kept = Choices.model_validate(shrunk.reproducer_choices)
        explored = outcome.report._explored.get(bug.representative or "")
        space = (
            explored.space
            if explored is not None
            else ChoiceSpace(project, project.scenario(shrunk.scenario))
        )
        units = choice_units(kept)
        spare = [
            u
            for u in units
            if fault.trigger.present(space.render(keep_only(kept, [v for v in units if v != u])))
        ]
        if spare:
            out.append(
                Judgement(
                    bug.id,
                    False,
                    keeps,
                    f"{len(spare)} kept choice(s) not needed for the trigger",
                    text,
                )
            )
            continue
        out.append(Judgement(bug.id, True, keeps, "minimal", text))
    return out


@dataclass
class FaultResult:
    fault: Fault | BlindFault
    default: RunOutcome
    baseline: RunOutcome
    judged: list[Judgement] = field(default_factory=list)
    judged_baseline: list[Judgement] = field(default_factory=list)
    fault_only: int | None = None
    """Blind zoo, a missed fault: the default run's failing cases the clean agent passes on the
    same input and world (0: the fault was never reached; more: reached, but no reproducer
    the clean agent passes came out of grouping and shrinking). None: not measured."""

    @property
    def found(self) -> bool:
        """A bug was reported (blind zoo: one that is the fault's, not only the base agent's)."""
        if isinstance(self.fault, BlindFault):
            return any(j.own for j in self.judged)
        return bool(self.default.bugs)

    @property
    def found_by_baseline(self) -> bool:
        if isinstance(self.fault, BlindFault):
            return any(j.own for j in self.judged_baseline)
        return bool(self.baseline.bugs)


def run_fault(fault: Fault, *, quick: bool) -> FaultResult:
    case = fault.quick_case if quick else None
    knobs = {fault.knob: fault.rate}
    default = agentprop_run(fault.example, knobs, explore=True, case=case)
    baseline = agentprop_run(fault.example, knobs, explore=False, case=case)
    return FaultResult(fault, default, baseline, judge(fault, default), judge(fault, baseline))


@dataclass
class CleanResult:
    example: str
    seed: int
    failing: list[str]
    failing_baseline: list[str]
    runs: int
    failures: list[Failure] = field(default_factory=list)
    """Each failing case with its input and clauses (matched to a blind adjudication)."""


def _clean_result(example: str, seed: int, report: RunReport, runs: int) -> CleanResult:
    bad = [c for c in report.cases if c.verdict not in ("PASS", "NOT APPLICABLE")]
    failing = [c.id for c in bad]
    return CleanResult(
        example,
        seed,
        failing,
        [c for c in failing if not c.startswith("EXPLORE ")],
        runs,
        [failure_of(example, seed, c.id, c.messages, (f.clause for f in c.failures)) for c in bad],
    )


def run_clean(example: str, seed: int, case: str | None = None) -> CleanResult:
    outcome = agentprop_run(example, {}, explore=True, seed=seed, case=case)
    return _clean_result(example, seed, outcome.report, outcome.runs_total)


# ----------------------------------------------------------------------------- the blind zoo

BLIND_ZOO = ROOT / "benchmarks" / "_reach_zoo"
"""Issue #24's blind reach zoo: specs, agents and fault knobs written and frozen (FREEZE.sha256,
checked by its freeze.py) by an author who had not read the phrase packs nor the generator. This
benchmark reads only its MANIFEST.json's structure (spec folders, agent references, knob
names, world overrides): never its triggers, so the generator cannot be tuned to them."""
BLIND_RATE = 1.0
"""The rate a blind fault fires at when its trigger holds (the manifest gives none)."""


@dataclass(frozen=True)
class BlindFault:
    """A fault of the blind zoo, loaded from its manifest."""

    example: str
    """The spec folder under :data:`BLIND_ZOO`."""
    agent: str
    knob: str
    kind: str
    """The turn the author says triggers it (``first_request``, ``answer``, ``confirmation``,
    ``tool_output``)."""
    world: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Applied over the bindings' world: the world the fault shows in (fields its trigger and
    non-trigger share); a field where they differ is part of the trigger, so it keeps its
    non-trigger value and the generator has to reach the other."""
    rate: float = BLIND_RATE
    quick_case: str | None = None

    @property
    def words(self) -> str:
        return "blind: the trigger is not read"


@dataclass(frozen=True)
class BlindZoo:
    name: str
    author: str
    freeze_hash: str
    freeze_ok: bool
    faults: tuple[BlindFault, ...]

    @property
    def specs(self) -> list[str]:
        return list(dict.fromkeys(f.example for f in self.faults))


def _shared_world(
    trigger: Mapping[str, Any], other: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tool, fields in trigger.items():
        for path, value in fields.items():
            plain = other.get(tool, {}).get(path, value)
            out.setdefault(tool, {})[path] = value if plain == value else plain
    for tool, fields in other.items():
        for path, value in fields.items():
            out.setdefault(tool, {}).setdefault(path, value)
    return out


def blind_freeze() -> tuple[str, bool]:
    """The zoo's freeze hash, as its own freeze.py computes and checks it."""
    done = subprocess.run(
        [sys.executable, str(BLIND_ZOO / "freeze.py")], capture_output=True, text=True, check=False
    )
    hashes = re.findall(r"[0-9a-f]{64}", done.stdout)
    return (hashes[-1] if hashes else "unknown"), done.returncode == 0


def load_blind() -> BlindZoo:
    manifest = json.loads((BLIND_ZOO / "MANIFEST.json").read_text(encoding="utf-8"))
    faults = tuple(
        BlindFault(
            example=spec["dir"],
            agent=spec["agent"],
            knob=f["knob"],
            kind=f["turn_kind"],
            world=_shared_world(f["trigger"].get("world", {}), f["non_trigger"].get("world", {})),
        )
        for spec in manifest["specs"]
        for f in spec["faults"]
    )
    digest, ok = blind_freeze()
    return BlindZoo(manifest["name"], manifest["author"], digest, ok, faults)


def blind_project(
    fault: BlindFault | str, world: Mapping[str, Mapping[str, Any]] | None = None
) -> Project:
    """A fresh project of a blind spec folder, with ``world`` applied over its bindings' world.

    A world-bound variable whose branches set a field leaves it unset in the branch that keeps
    the bindings' value (``approve: {true: {}, false: {set: {limits.per_receipt: 100}}}``):
    that branch means the bindings' own value. So where ``world`` moves such a field, every
    branch that left it unset is pinned to the bindings' value first; otherwise ``approve:
    true`` would run in the over-limit world and expect an approval the spec forbids there."""
    folder = fault if isinstance(fault, str) else fault.example
    project = load_project(BLIND_ZOO / folder)
    overrides = world if world is not None else getattr(fault, "world", {})
    base = project.bindings.world
    for variable in project.bindings.variables.values():
        bound = variable.world
        if bound is None or not bound.values or bound.tool not in overrides:
            continue
        branches = list(bound.values.values())
        moved = {key for b in branches for key in b.set} & set(overrides[bound.tool])
        for key in moved:
            for branch in branches:
                if key not in branch.set and branch.failure is None:
                    branch.set[key] = copy.deepcopy(get_path(base[bound.tool], key))
    for tool, fields in overrides.items():
        for key, value in fields.items():
            set_path(base.setdefault(tool, {}), key, value)
    return project


def _fails(project: Project, agent: Any, scenario: Scenario) -> bool:
    result = asyncio.run(decide_scenario(project, scenario, agent, memo=TrialMemo()))
    return result.verdict in FAILING


def judge_blind(
    fault: BlindFault,
    project: Project,
    outcome: RunOutcome,
    adjudications: Adjudications | None = None,
) -> list[Judgement]:
    """The pack zoo's judgement without the trigger, each bug against the agent that has it.

    A shrunk bug whose reproducer the clean agent passes is the fault's; one the clean agent
    fails too is the base agent's (a bug of the zoo's agent itself, found beside the fault's).
    Its reproducer is minimal when it kept no world change and dropping any one of its kept
    choices makes that agent (faulted or clean) pass: every kept choice is needed. A base
    agent's bug also says whether a blind adjudication judged its failing case (same spec,
    seed, case id, turns and clause, in the clean run's world) an agent error."""
    faulted = load_agent(fault.agent, project.base_dir, {fault.knob: fault.rate})
    clean = load_agent(fault.agent, project.base_dir, {})
    # in another world the clean run's adjudicated inputs are not these: its failures carry it
    same_world = project.bindings.world == blind_project(fault.example, {}).bindings.world
    world = "" if same_world else world_key(fault.world)
    out: list[Judgement] = []
    for bug in outcome.bugs:
        shrunk = outcome.shrink_of(bug)
        if shrunk is None or not bug.shrink_runs:
            out.append(
                Judgement(
                    bug.id,
                    False,
                    False,
                    f"not shrunk: {bug.note}",
                    repr(bug.reproducer_messages),
                    shrunk=False,
                    own=False,
                )
            )
            continue
        keeps = shrunk.reproducer_rate is not None and shrunk.reproducer_rate.failures > 0
        rep = shrunk.reproducer
        text = " | ".join(rep.messages) + (
            f" [{shrunk.choices_kept}]" if shrunk.reproducer_choices else ""
        )
        base = _fails(project, clean, rep)
        agent, whose = (clean, "the clean") if base else (faulted, "the faulted")
        judged = _judge_minimal(project, agent, whose, outcome, bug, shrunk)
        failures = _bug_failures(fault.example, outcome, bug, world) if base else ()
        out.append(
            Judgement(
                bug.id,
                judged[0],
                keeps,
                judged[1],
                text,
                own=not base,
                base=base,
                adjudicated=(_base_adjudicated(failures, adjudications) if base else None),
                failures=failures,
            )
        )
    return out


def _judge_minimal(
    project: Project, agent: Any, whose: str, outcome: RunOutcome, bug: Any, shrunk: ShrinkReport
) -> tuple[bool, str]:
    """Whether the reproducer is minimal for ``agent`` (the one that fails it), and why."""
    if shrunk.world_kept:
        return False, f"kept world changes: {', '.join(shrunk.world_kept)}"
    if shrunk.reproducer_choices is None:
        return True, f"the scenario's own input fails {whose} agent"
    kept = Choices.model_validate(shrunk.reproducer_choices)
    explored = outcome.report._explored.get(bug.representative or "")
    space = (
        explored.space
        if explored is not None
        else ChoiceSpace(project, project.scenario(shrunk.scenario))
    )
    units = choice_units(kept)
    spare = [
        u
        for u in units
        if _fails(project, agent, space.render(keep_only(kept, [v for v in units if v != u])))
    ]
    if spare:
        return False, f"{len(spare)} kept choice(s) not needed for {whose} agent to fail"
    return True, f"minimal: {whose} agent fails it, and passes without any one kept choice"


def _bug_failures(
    folder: str, outcome: RunOutcome, bug: Any, world: str = ""
) -> tuple[Failure, ...]:
    """A bug's failing cases as the adjudications match them (``world``: see
    :attr:`Failure.world`)."""
    cases = {c.id: c for c in outcome.report.cases}
    return tuple(
        replace(
            failure_of(folder, outcome.seed, c.id, c.messages, (f.clause for f in c.failures)),
            world=world,
        )
        for c in (cases[i] for i in bug.cases if i in cases)
    )


def _base_adjudicated(failures: Sequence[Failure], adjudications: Adjudications | None) -> str:
    """What blind adjudications said of a base agent's bug (see :func:`judged_text`); a bug
    met in a fault's own world is matched only to verdicts given in that world."""
    if adjudications is None:
        return "not looked up"
    return judged_text(failures, adjudications)


NOT_MATCHED = "not matched: the fault's world differs from the clean run's"
"""What summaries written before failures carried their world said of a bug in a fault's own
world (``--rejudge`` leaves it: they kept no failing inputs for it)."""


def run_blind_fault(fault: BlindFault) -> FaultResult:
    project = blind_project(fault)
    knobs = {fault.knob: fault.rate}
    default = run_project(project, fault.agent, knobs, explore=True)
    baseline = run_project(blind_project(fault), fault.agent, knobs, explore=False)
    judged = Adjudications.load()
    result = FaultResult(
        fault,
        default,
        baseline,
        judge_blind(fault, project, default, judged),
        judge_blind(fault, project, baseline, judged),
    )
    if not result.found:
        result.fault_only = fault_only_cases(fault, project, default)
    return result


def fault_only_cases(fault: BlindFault, project: Project, outcome: RunOutcome) -> int:
    """How many of the run's failing cases the clean agent passes on the same input and world:
    the cases only the fault failed (the trigger is never read)."""
    clean = load_agent(fault.agent, project.base_dir, {})
    failing = [
        outcome.report._checks[c.id][0]
        for c in outcome.report.cases
        if c.verdict in FAILING and c.id in outcome.report._checks
    ]
    return sum(not _fails(project, clean, scenario) for scenario in failing)


def run_blind_clean(zoo: BlindZoo, folder: str, seed: int) -> CleanResult:
    agent = next(f.agent for f in zoo.faults if f.example == folder)
    outcome = run_project(blind_project(folder, {}), agent, {}, explore=True, seed=seed)
    return _clean_result(folder, seed, outcome.report, outcome.runs_total)


# ----------------------------------------------------------------------------- reporting


def _rate(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.2f})" if n else "0/0"


def summarise(results: list[FaultResult], clean: list[CleanResult]) -> dict[str, Any]:
    n = len(results)

    def side(which: str) -> dict[str, Any]:
        outcomes = [getattr(r, which) for r in results]
        every = [
            j for r in results for j in (r.judged if which == "default" else r.judged_baseline)
        ]
        judged = [j for j in every if j.shrunk]
        bugs = sum(len(o.bugs) for o in outcomes)
        shrunk = sum(sum(1 for b in o.bugs if b.shrink_runs) for o in outcomes)
        shrink_runs = sum(o.shrink_runs for o in outcomes)
        kinds = ("EXPLORE",) if which == "default" else ()
        return {
            "found": sum(r.found if which == "default" else r.found_by_baseline for r in results),
            "bugs": bugs,
            **bug_figures([_bug_record(j) for j in every]),
            "shrink_runs": shrink_runs,
            "verification_runs": sum(
                sh.reproducer_rate.runs
                for o in outcomes
                for sh in o.shrinks
                if sh.reproducer_rate is not None
            ),
            "shrunk": shrunk,
            "unshrinkable": len(every) - len(judged),
            "runs_exploring": sum(o.runs_of(kinds) for o in outcomes),
            "runs_deciding": sum(o.runs_of(("MFT", "BOUNDARY", "DIR", "INV")) for o in outcomes),
            "runs_total": sum(o.runs_total for o in outcomes),
            "seconds": sum(o.seconds for o in outcomes),
        }

    d, b = side("default"), side("baseline")
    # a clean agent's failure is a false alarm unless a blind adjudicator judged its input
    # valid and its expectation following from the spec (benchmarks/_adjudication)
    judged = Adjudications.load()
    tally = judged.tally(f for c in clean for f in c.failures)
    out: dict[str, Any] = {
        "faults": n,
        "found_rate": d["found"] / n if n else 0.0,
        "baseline_found_rate": b["found"] / n if n else 0.0,
        **_clean_keys(tally, judged),
        "baseline_clean_false_alarms": sum(len(c.failing_baseline) for c in clean),
        "clean_runs": len(clean),
        "missed_unreached": sum(r.fault_only == 0 for r in results),
        "missed_masked": sum(bool(r.fault_only) for r in results),
        "shrink_runs_per_bug": d["shrink_runs"] / d["shrunk"] if d["shrunk"] else 0.0,
        "baseline_shrink_runs_per_bug": b["shrink_runs"] / b["shrunk"] if b["shrunk"] else 0.0,
        "runs_total": d["runs_total"] + b["runs_total"] + sum(c.runs for c in clean),
        "default": d,
        "baseline": b,
        "entries": [
            {
                "example": r.fault.example,
                "knob": r.fault.knob,
                "rate": r.fault.rate,
                "kind": r.fault.kind,
                "trigger": r.fault.words,
                "found": r.found,
                "found_by_baseline": r.found_by_baseline,
                "fault_only_cases": r.fault_only,
                "bugs": [_bug_record(j) for j in r.judged],
                "baseline_bugs": [_bug_record(j) for j in r.judged_baseline],
                "runs": r.default.runs_total,
                "baseline_runs": r.baseline.runs_total,
            }
            for r in results
        ],
        "clean": [
            {
                "example": c.example,
                "seed": c.seed,
                "failing": c.failing,
                "runs": c.runs,
                "failures": [failure_record(f) for f in c.failures],
            }
            for c in clean
        ],
    }
    out.update(headline(out))
    return out


BASE = "base agent"
"""A bug record's ``whose`` for a base agent's bug (``fault`` for the fault's own)."""


def _bug_record(j: Judgement) -> dict[str, Any]:
    """A judged bug as the summary keeps it (``entries[].bugs[]``; ``--rejudge`` reads it)."""
    return {
        "bug": j.bug,
        "shrunk": j.shrunk,
        "minimal": j.minimal,
        "keeps_signature": j.keeps_signature,
        "why": j.why,
        "reproducer": j.reproducer,
        "whose": BASE if j.base else "fault" if j.own else None,
        "adjudicated": j.adjudicated,
        "failures": [failure_record(f) for f in j.failures],
    }


def agent_error(adjudicated: str | None) -> bool:
    """Whether a base agent's bug was adjudicated an agent error (:func:`judged_text`)."""
    return (adjudicated or "").startswith("agent error")


def bug_figures(bugs: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """A side's counts of its shrunk bugs, from their records (:func:`_bug_record`).

    The fault's own bugs, and the base agents' bugs a blind adjudication judged agent errors,
    are judged minimal, each against the agent that has it. A base agent's bug not adjudicated
    an agent error (not judged, a tester error, its world unmatched) may be a generator's or an
    oracle's error met during the fault's run: a false alarm, left out of the minimal rate."""
    shrunk = [b for b in bugs if b["shrunk"]]
    own = [b for b in shrunk if b["whose"] != BASE]
    base = [b for b in shrunk if b["whose"] == BASE]
    errors = [b for b in base if agent_error(b["adjudicated"])]

    def good(some: list[Mapping[str, Any]]) -> int:
        return sum(bool(b["minimal"] and b["keeps_signature"]) for b in some)

    return {
        "minimal": good(own) + good(errors),
        "judged": len(own) + len(errors),
        "own_minimal": good(own),
        "own_judged": len(own),
        "base_minimal": good(errors),
        "base_judged": len(errors),
        "base_bugs": len(base),
        "base_agent_errors": len(errors),
        "base_false_alarms": len(base) - len(errors),
    }


def headline(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The headline keys of a summary, from its sides' figures (:func:`bug_figures`) and its
    clean runs' false alarms: :func:`summarise` and :func:`rejudge` count them alike."""
    d, b = summary["default"], summary["baseline"]
    return {
        "false_alarms": summary["clean_false_alarms"] + d["base_false_alarms"],
        "base_false_alarms": d["base_false_alarms"],
        "baseline_false_alarms": summary["baseline_clean_false_alarms"] + b["base_false_alarms"],
        "minimal_rate": d["minimal"] / d["judged"] if d["judged"] else 0.0,
        "baseline_minimal_rate": b["minimal"] / b["judged"] if b["judged"] else 0.0,
        "own_minimal_rate": d["own_minimal"] / d["own_judged"] if d["own_judged"] else None,
        "base_minimal_rate": d["base_minimal"] / d["base_judged"] if d["base_judged"] else None,
        "base_bugs": d["base_bugs"],
        "base_bugs_adjudicated_agent_errors": d["base_agent_errors"],
    }


def _verdict(j: Judgement) -> str:
    """A judgement in words: whose bug, and whether its reproducer is minimal."""
    whose = "the base agent's bug, " if j.base else ""
    if j.base and not agent_error(j.adjudicated):
        whose += f"a false alarm ({j.adjudicated}), "
    if j.minimal and j.keeps_signature:
        return f"{whose}minimal"
    why = j.why if not j.minimal else "its fresh runs lost the bug's signature"
    return f"{whose}NOT minimal: {why}"


def render(
    summary: dict[str, Any], results: list[FaultResult], clean_label: str = "3 examples x seeds"
) -> str:
    d, b = summary["default"], summary["baseline"]
    lines = [
        f"{'fault':<40} {'kind':<30} {'rate':>4}  {'default':<8} {'baseline':<8} "
        "reproducer (default run)"
    ]
    for r in results:
        f = r.fault
        found = "found" if r.found else "missed"
        base = "found" if r.found_by_baseline else "missed"
        shrunk = [j for j in r.judged if j.shrunk]
        shown = [j for j in shrunk if not j.base] or shrunk or r.judged
        first = shown[0] if shown else None
        rep = f"{_verdict(first)}: {first.reproducer}" if first else ""
        rest = [j for j in r.judged if j is not first]
        more = (
            f" (+{len(rest)} more bug(s): {sum(j.minimal and j.keeps_signature for j in rest)} "
            f"minimal, {sum(j.base for j in rest)} the base agent's, "
            f"{sum(not j.shrunk for j in rest)} only INV/DIR)"
            if rest
            else ""
        )
        lines.append(
            f"{f.example[:11] + ':' + f.knob:<40} {f.kind:<30} {f.rate:>4.1f}  {found:<8} "
            f"{base:<8} {rep}{more}"
        )
    n = summary["faults"]
    lines += [
        "",
        f"{'':<36} {'default run':>22} {'first-template baseline':>26} {'ratio':>8}",
        f"{'faults found':<36} {_rate(d['found'], n):>22} {_rate(b['found'], n):>26} "
        f"{(d['found'] / b['found'] if b['found'] else float('inf')):>8.2f}",
        *(
            [
                f"{'  missed: never reached':<36} {summary['missed_unreached']:>22} "
                f"{'not measured':>26} {'':>8}",
                f"{'  missed: reached, masked':<36} {summary['missed_masked']:>22} "
                f"{'not measured':>26} {'':>8}",
            ]
            if any(r.fault_only is not None for r in results)
            else []
        ),
        f"{'clean-agent failures':<36} {summary['clean_failures']:>22} "
        f"{summary['baseline_false_alarms']:>26} {'':>8}",
        f"{'  judged agent errors (blind)':<36} {summary['clean_agent_errors']:>22} "
        f"{'not judged':>26} {'':>8}",
        f"{'false alarms':<36} {summary['false_alarms']:>22} "
        f"{summary['baseline_false_alarms']:>26} {'':>8}",
        f"{'  clean: tester errors + unjudged':<36} {summary['clean_false_alarms']:>22} "
        f"{summary['baseline_clean_false_alarms']:>26} {'':>8}",
        f"{'  base bugs not judged agent errors':<36} {d['base_false_alarms']:>22} "
        f"{b['base_false_alarms']:>26} {'':>8}",
        f"{'  clean runs (' + clean_label + ')':<36} {summary['clean_runs']:>22} "
        f"{summary['clean_runs']:>26} {'':>8}",
        f"{'minimal reproducers (keep signature)':<36} {_rate(d['minimal'], d['judged']):>22} "
        f"{_rate(b['minimal'], b['judged']):>26} {'':>8}",
        *(
            [
                "  fault's own bugs (faulted agent)".ljust(36) + " "
                f"{_rate(d['own_minimal'], d['own_judged']):>22} "
                f"{_rate(b['own_minimal'], b['own_judged']):>26} {'':>8}",
                "  base agent's errors (clean agent)".ljust(36) + " "
                f"{_rate(d['base_minimal'], d['base_judged']):>22} "
                f"{_rate(b['base_minimal'], b['base_judged']):>26} {'':>8}",
                f"{'  base bugs judged agent errors':<36} "
                f"{_rate(d['base_agent_errors'], d['base_bugs']):>22} "
                f"{_rate(b['base_agent_errors'], b['base_bugs']):>26} {'':>8}",
            ]
            if d["base_bugs"] or b["base_bugs"]
            else []
        ),
        f"{'  bugs only INV/DIR hit (no input)':<36} {d['unshrinkable']:>22} "
        f"{b['unshrinkable']:>26} {'':>8}",
        f"{'shrink runs per distinct bug':<36} {summary['shrink_runs_per_bug']:>22.1f} "
        f"{summary['baseline_shrink_runs_per_bug']:>26.1f} {'':>8}",
        f"{'  of which fresh verification runs':<36} "
        f"{(d['verification_runs'] / d['shrunk'] if d['shrunk'] else 0):>22.1f} "
        f"{(b['verification_runs'] / b['shrunk'] if b['shrunk'] else 0):>26.1f} {'':>8}",
        f"{'runs exploring (EXPLORE cases)':<36} {d['runs_exploring']:>22} "
        f"{b['runs_exploring']:>26} {'':>8}",
        f"{'runs deciding (MFT/BOUNDARY/DIR/INV)':<36} {d['runs_deciding']:>22} "
        f"{b['runs_deciding']:>26} {'':>8}",
        f"{'runs shrinking (agent runs, verif.)':<36} {d['shrink_runs']:>22} "
        f"{b['shrink_runs']:>26} {'':>8}",
        f"{'runs in all (fault runs)':<36} {d['runs_total']:>22} {b['runs_total']:>26} "
        f"{(d['runs_total'] / b['runs_total'] if b['runs_total'] else 0):>8.2f}",
        f"{'seconds (fault runs)':<36} {d['seconds']:>22.0f} {b['seconds']:>26.0f} {'':>8}",
        f"runs in all, clean runs included: {summary['runs_total']}",
        "targets (issues #10, #24): found >= 0.9, false alarms 0 (clean-agent failures and base "
        "agents' bugs not adjudicated agent errors), minimal >= 0.9 (over the fault's own shrunk "
        "bugs and the base agents' adjudicated agent errors, each judged against the agent that "
        "has it), shrink runs per distinct bug <= 60: "
        + ", ".join(
            f"{name} {'met' if ok else 'NOT MET'}"
            for name, ok in (
                ("found", summary["found_rate"] >= 0.9),
                ("false alarms", summary["false_alarms"] == 0),
                ("minimal", summary["minimal_rate"] >= 0.9),
                ("shrink runs", summary["shrink_runs_per_bug"] <= 60),
            )
        ),
    ]
    if summary["clean_failures"]:
        lines.append(
            "clean-agent failures judged by blind adjudication "
            f"({', '.join(summary['adjudications'])}): {summary['clean_agent_errors']} agent "
            "errors on valid inputs, "
            f"{summary['clean_tester_errors']} tester errors, {summary['clean_unadjudicated']} "
            "not judged (counted as false alarms)"
        )
    if d["base_bugs"]:
        lines.append(
            f"base agents' bugs met in the fault runs: {d['base_bugs']}, "
            f"{d['base_agent_errors']} adjudicated agent errors (judged minimal against the clean "
            f"agent), {d['base_false_alarms']} not (counted as false alarms, not in the minimal "
            "rate)"
        )
    for c in summary["clean"]:
        if c["failing"]:
            lines.append(
                f"clean failure: {c['example']} seed {c['seed']}: {', '.join(c['failing'][:5])}"
            )
    return "\n".join(lines)


BLIND_KEYS = (
    "faults",
    "found_rate",
    "missed_unreached",
    "missed_masked",
    "baseline_found_rate",
    "false_alarms",
    "clean_false_alarms",
    "base_false_alarms",
    "clean_failures",
    "clean_agent_errors",
    "clean_unadjudicated",
    "clean_runs",
    "minimal_rate",
    "own_minimal_rate",
    "base_minimal_rate",
    "base_bugs",
    "base_bugs_adjudicated_agent_errors",
    "shrink_runs_per_bug",
    "runs_total",
)


def blind_summary(
    zoo: BlindZoo, results: list[FaultResult], clean: list[CleanResult]
) -> dict[str, Any]:
    """The blind zoo's keys (``blind_faults``, ``blind_found_rate`` ...) and who wrote it."""
    summary = summarise(results, clean)
    out = _blind_keys(summary)
    out["blind_found_rate"] = summary["found_rate"] if results else None
    out["blind_zoo"] = {
        "name": zoo.name,
        "author": zoo.author,
        "freeze_sha256": zoo.freeze_hash,
        "freeze_verified": zoo.freeze_ok,
        "specs": zoo.specs,
        "faults_in_zoo": len(zoo.faults),
        "faults_run": len(results),
        "rate": BLIND_RATE,
    }
    out["blind"] = summary
    return out


def _blind_keys(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``blind_X`` for X in :data:`BLIND_KEYS` (no minimal rate when no bug was judged)."""
    out: dict[str, Any] = {f"blind_{k}": summary[k] for k in BLIND_KEYS}
    out["blind_minimal_rate"] = summary["minimal_rate"] if summary["default"]["judged"] else None
    return out


def _clean_keys(tally: Tally, judged: Adjudications) -> dict[str, Any]:
    """A summary's keys for its clean runs' failures as ``judged`` split them."""
    return {
        "clean_false_alarms": tally.false_alarms,
        "clean_failures": tally.failures,
        "clean_agent_errors": tally.agent_errors,
        "clean_unadjudicated": tally.unadjudicated,
        "clean_tester_errors": tally.tester_errors,
        "adjudications": judged.files,
    }


def rejudge(out: dict[str, Any], judged: Adjudications | None = None) -> list[str]:
    """Count a ``--json`` summary's false alarms again against today's adjudications.

    Only the adjudication verdicts change: the clean runs' failures and the base agents' bugs
    are the ones the summary recorded (their inputs, clauses and minimal judgements), nothing is
    run again; the false alarms and minimal rates are counted from them as :func:`summarise`
    counts them (:func:`bug_figures`, :func:`headline`). A summary written before find.py kept
    the baseline's bugs keeps its baseline figures as recorded, and says so.
    ``judged``: the adjudications (default: ``benchmarks/_adjudication``)."""
    if judged is None:
        judged = Adjudications.load()
    zoos = [("the pack-derived zoo", out, "")] if "clean" in out else []
    if isinstance(out.get("blind"), dict):
        zoos.append(("the blind reach zoo", out["blind"], "blind_"))
    if not zoos:
        raise ValueError("no zoo summary in it (neither 'clean' nor 'blind')")
    lines = [f"re-judged against {', '.join(judged.files)} (no run made)"]
    for label, summary, prefix in zoos:
        if any("failures" not in c for c in summary["clean"]):
            raise ValueError(
                f"{label}: written before find.py kept each failure's input; run it again"
            )
        tally = judged.tally(failure_from(r) for c in summary["clean"] for r in c["failures"])
        summary.update(_clean_keys(tally, judged))
        entries = summary["entries"]
        with_baseline = all("baseline_bugs" in e for e in entries)
        sides = [("default", "bugs")] + ([("baseline", "baseline_bugs")] if with_baseline else [])
        for side, key in sides:
            bugs = [b for e in entries for b in e[key]]
            for b in bugs:
                if b["whose"] == BASE and b["shrunk"] and b["failures"]:
                    b["adjudicated"] = judged_text((failure_from(r) for r in b["failures"]), judged)
            summary[side].update(bug_figures(bugs))
        if not with_baseline:  # counted before base bugs were: its clean failures alone
            summary.setdefault("baseline_clean_false_alarms", summary["baseline_false_alarms"])
            summary["baseline"].update(
                base_false_alarms=0, base_bugs=summary["baseline"].get("base_judged", 0)
            )
        before = {k: summary.get(k) for k in ("baseline_false_alarms", "baseline_minimal_rate")}
        summary.update(headline(summary))
        if not with_baseline:
            summary.update(before)
        if prefix:
            out.update({k: v for k, v in _blind_keys(summary).items() if k != "blind_found_rate"})
        d = summary["default"]
        lines += [
            f"{label}: clean-agent failures {tally.failures}: {tally.agent_errors} judged agent "
            f"errors on valid inputs, {tally.tester_errors} tester errors, "
            f"{tally.unadjudicated} not judged",
            *(f"  tester error: {c}" for c in tally.tester_error_cases),
            *(f"  not judged: {c}" for c in tally.unadjudicated_cases[:10]),
            *(
                [f"  ... and {len(tally.unadjudicated_cases) - 10} more not judged"]
                if len(tally.unadjudicated_cases) > 10
                else []
            ),
            f"{label}: base agents' bugs {d['base_bugs']}, judged agent errors "
            f"{d['base_agent_errors']}, not ({d['base_false_alarms']}: false alarms)",
            f"{label}: false alarms {summary['false_alarms']} ({tally.false_alarms} of the clean "
            f"runs, {d['base_false_alarms']} base agents' bugs) (target 0: "
            f"{'met' if summary['false_alarms'] == 0 else 'NOT MET'})",
            f"{label}: minimal reproducers {_rate(d['minimal'], d['judged'])} (the fault's own "
            f"{_rate(d['own_minimal'], d['own_judged'])}, the base agents' adjudicated agent "
            f"errors {_rate(d['base_minimal'], d['base_judged'])}) (target 0.9: "
            f"{'met' if summary['minimal_rate'] >= 0.9 else 'NOT MET'})",
            *(
                []
                if with_baseline
                else [
                    f"{label}: baseline figures as recorded (the summary keeps no baseline bugs "
                    "to re-judge)"
                ]
            ),
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", dest="json_path", help="write the summary to this file")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="three faults, each on one path, and one clean seed on those paths "
        "(the CI configuration)",
    )
    parser.add_argument(
        "--clean-seeds",
        type=int,
        default=None,
        metavar="N",
        help="seeds the clean agents run on (default 10; 1 with --quick)",
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="KNOB", help="only this fault (repeatable)"
    )
    parser.add_argument(
        "--zoo",
        choices=("both", "pack", "blind"),
        default=None,
        help="which zoo: the pack-derived one, the blind reach zoo (benchmarks/_reach_zoo) or "
        "both (default; pack with --quick)",
    )
    parser.add_argument(
        "--spec",
        action="append",
        default=[],
        metavar="DIR",
        help="blind zoo: only this spec folder (repeatable)",
    )
    parser.add_argument(
        "--rejudge",
        metavar="JSON",
        help="run nothing: count the false alarms of an earlier --json summary again against "
        "the adjudications in benchmarks/_adjudication (landed since), and rewrite it "
        "(or write --json)",
    )
    args = parser.parse_args(argv)
    if args.rejudge:
        source = Path(args.rejudge)
        try:
            out = json.loads(source.read_text(encoding="utf-8"))
            lines = rejudge(out)
        except (OSError, ValueError, KeyError) as error:
            print(f"find.py: error: --rejudge {source}: {error}", file=sys.stderr)
            return 2
        print("\n".join(lines))
        target = Path(args.json_path or source)
        target.write_text(json.dumps(out, indent=2), encoding="utf-8")
        print(f"summary written to {target}")
        return 0
    which = args.zoo or ("pack" if args.quick else "both")
    seeds = args.clean_seeds if args.clean_seeds is not None else (1 if args.quick else 10)
    out: dict[str, Any] = {}
    text: list[str] = []
    code = 0
    if which in ("both", "pack"):
        faults = [
            f
            for f in ZOO
            if (not args.only or f.knob in args.only) and (not args.quick or f.quick_case)
        ]
        results = []
        for f in faults:
            result = run_fault(f, quick=args.quick)
            results.append(result)
            _progress(result)
        clean: list[CleanResult] = []
        examples = sorted({f.example for f in faults}) if args.quick else [S, E, D]
        for example in examples:
            paths = (
                [f.quick_case for f in faults if f.example == example and f.quick_case]
                if args.quick
                else [None]
            )
            for seed in range(seeds):
                for case in paths:
                    clean.append(run_clean(example, seed, case))
                    print(
                        f"  clean {example} seed {seed}{' ' + case if case else ''}: "
                        f"{len(clean[-1].failing)} clean-agent failure(s)",
                        file=sys.stderr,
                        flush=True,
                    )
        summary = summarise(results, clean)
        out.update(summary)
        text += [
            "== the pack-derived zoo (examples/*/agent.py ZOO_FAULTS) ==",
            render(summary, results),
        ]
    else:
        text.append("== the pack-derived zoo: not run (--zoo blind) ==")
    if which in ("both", "blind"):
        zoo = load_blind()
        if not zoo.freeze_ok:
            code = 1
        blind = [
            f
            for f in zoo.faults
            if (not args.only or f.knob in args.only) and (not args.spec or f.example in args.spec)
        ]
        results = []
        for b in blind:
            result = run_blind_fault(b)
            results.append(result)
            _progress(result)
        clean = []
        for folder in [d for d in zoo.specs if not args.spec or d in args.spec]:
            for seed in range(seeds):
                clean.append(run_blind_clean(zoo, folder, seed))
                print(
                    f"  clean {folder} (blind zoo) seed {seed}: "
                    f"{len(clean[-1].failing)} clean-agent failure(s)",
                    file=sys.stderr,
                    flush=True,
                )
        summary = blind_summary(zoo, results, clean)
        out.update(summary)
        frozen = (
            "verified by its freeze.py"
            if zoo.freeze_ok
            else "MISMATCH: the zoo changed since it was frozen"
        )
        text += [
            "",
            f"== the blind reach zoo ({zoo.name}; {len(results)} of its {len(zoo.faults)} faults "
            f"over {', '.join(zoo.specs)}) ==",
            f"written by: {zoo.author}",
            f"freeze: {zoo.freeze_hash} ({frozen})",
            f"each fault fires whenever its trigger holds (rate {BLIND_RATE}); its world "
            "overrides are applied; triggers are never read",
            render(summary["blind"], results, f"{len(clean)} = specs x seeds"),
        ]
    else:
        text += ["", "== the blind reach zoo: not run (--zoo pack) =="]
    print("\n".join(text))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(out, indent=2), encoding="utf-8")
        print(f"summary written to {args.json_path}")
    return code


def _progress(result: FaultResult) -> None:
    f = result.fault
    print(
        f"  {f.example}:{f.knob}: {'found' if result.found else 'missed'} "
        f"({len(result.default.bugs)} bug(s), {result.default.runs_total} runs); baseline "
        f"{'found' if result.found_by_baseline else 'missed'}"
        + (
            f"; {result.fault_only} failing case(s) the clean agent passes"
            + (" (never reached)" if not result.fault_only else " (masked)")
            if result.fault_only is not None
            else ""
        ),
        file=sys.stderr,
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
