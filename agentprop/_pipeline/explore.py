"""EXPLORE cases: every path written many ways, drawn from the space its bindings and packs define.

Each path gets ``per_path`` drawn :class:`Choices`, each decided like an MFT case (same
expectations, same oracle). The second half of a path's draws weights up the families seen in
its own failing or imperfect first-half inputs. Draws are seeded by ``(seed, path)`` and learn
from that path only, so a path's inputs depend on the seed and the path alone: the same seed
explores the same inputs, adding a path changes no other path's, and a shard holding a path
draws what the unsharded run draws.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.project import Project
from agentprop._agents.runtime import live_turns
from agentprop._decide.check import Property, decide_scenario
from agentprop._decide.choices import Choices, ChoiceSpace
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import CheckResult, OracleSettings
from agentprop._decide.permits import CaseLanes
from agentprop._decide.written import InputWriter
from agentprop._modelapi.budget import Budget
from agentprop._pipeline.defaults import DEFAULT_PER_PATH  # noqa: F401 (re-exported)
from agentprop._pipeline.kinds import Replay, case_from_check
from agentprop._pipeline.report.model import CaseReport
from agentprop._scenario.build import Scenario
from agentprop._scenario.piecemeal import piecemeal_scenarios
from agentprop._scenario.world import stable_seed
from agentprop._spec.bindings import ChannelBinding
from agentprop.strategies._internal.families import channel_not_tried
from agentprop.strategies._internal.packs import check_languages

_FAILED_WEIGHT = 4.0
_CLOSE_WEIGHT = 2.0


@dataclass(frozen=True)
class ExploredInput:
    case_id: str
    base: Scenario
    choices: Choices
    scenario: Scenario
    space: ChoiceSpace
    """What the shrinker simplifies ``choices`` in."""
    prop: Property | None = None
    """The property the case is decided by (``None``: the scenario's MFT)."""
    kind: str = "EXPLORE"

    @functools.cached_property
    def families(self) -> list[str]:
        """The families of ``choices`` whose effect is in the input
        (:meth:`ChoiceSpace.families_in`): what the report says the input tried."""
        return self.space.families_in(self.choices)


@dataclass
class LearnedWeights:
    """Each path's second-round weights, learned by the first pass that explored
    (``None``: none yet)."""

    weights: dict[str, dict[str, float]] | None = None


def explored_id(scenario: Scenario, k: int) -> str:
    return f"EXPLORE {scenario.id} ~{k}"


def _draw_distinct(
    space: ChoiceSpace,
    rng: random.Random,
    weights: dict[str, float],
    seen: set[str],
    decks: dict[str, list[str]],
    tries: int = 6,
) -> tuple[Choices, Scenario] | None:
    for _ in range(tries):
        choices = space.draw(rng, weights=weights, decks=decks)
        rendered = space.render(choices)
        # told apart by the world as drawn (a value an order moved may meet another draw's)
        as_drawn = rendered
        if space.as_drawn != choices.world:
            as_drawn = space.render(choices.model_copy(update={"world": space.as_drawn}))
        key = json.dumps(
            [as_drawn.messages, as_drawn.world.model_dump(mode="json")], sort_keys=True
        )
        if key not in seen:
            seen.add(key)
            return choices, rendered
    return None


def learn(
    weights: dict[str, float], outcomes: list[tuple[Choices, CheckResult]]
) -> dict[str, float]:
    """Weights for the next draws: families of failing inputs x4, of imperfect ones x2."""
    out = dict(weights)
    for choices, result in outcomes:
        factor = (
            _FAILED_WEIGHT
            if result.verdict in ("FAIL", "UNSTABLE")
            else _CLOSE_WEIGHT
            if result.pass_rate < 1.0
            else 1.0
        )
        if factor > 1.0:
            for family in choices.families():
                out[family] = max(out.get(family, 1.0), factor)
    return out


def exploration_summary(
    inputs: list[ExploredInput], cases: dict[str, CaseReport]
) -> dict[str, Any]:
    """Per path: inputs, families tried (with counts) and the families of failing inputs."""
    per_path: dict[str, dict[str, Any]] = {}
    for e in inputs:
        entry = per_path.setdefault(
            e.base.id, {"inputs": 0, "families": Counter(), "failed_families": Counter()}
        )
        entry["inputs"] += 1
        fams = [f.split(":", 1)[1] if ":" in f else f for f in e.families]
        entry["families"].update(fams)
        case = cases.get(e.case_id)
        if case is not None and case.verdict in ("FAIL", "UNSTABLE"):
            entry["failed_families"].update(fams)
    return {
        k: {
            "inputs": v["inputs"],
            "families": dict(v["families"]),
            "failed_families": dict(v["failed_families"]),
        }
        for k, v in per_path.items()
    }


def exploration_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal summary's lines for ``summary`` (:func:`exploration_summary`): the families
    every path's explored inputs met, then one line per path with what it met beyond those and
    the families of its failing inputs."""
    if not summary:
        return []
    met = {path: set(entry.get("families") or {}) for path, entry in summary.items()}
    common = set.intersection(*met.values()) if met else set()
    order = sorted({f for fams in met.values() for f in fams})
    lines = [
        f"input families met by EXPLORE inputs, per path ({len(summary)} paths; counts in the "
        "JSON report's extra.exploration):",
        f"  every path: {', '.join(f for f in order if f in common) or 'none'}",
    ]
    for path, entry in summary.items():
        extra = [f for f in order if f in met[path] and f not in common]
        text = f"  {path} ({entry.get('inputs', 0)} inputs): " + (
            f"also {', '.join(extra)}" if extra else "only those"
        )
        failed = sorted(entry.get("failed_families") or {})
        if failed:
            text += f"; in failing inputs: {', '.join(failed)}"
        lines.append(text)
    return lines


def channel_summary(channel: ChannelBinding) -> dict[str, Any]:
    """The report's ``extra.channel``: what the bindings' ``channel:`` guarantees and the input
    families it switched off (empty when it guarantees nothing: every family is dealt)."""
    declared = channel.declared()
    if not declared:
        return {}
    return {
        "declared": declared,
        "not_tried": [
            {"families": what, "because": why} for what, why in channel_not_tried(channel)
        ],
    }


def channel_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal summary's line for ``summary`` (:func:`channel_summary`): never silent about
    what a channel declaration left out."""
    if not summary:
        return []
    return [
        "not tried (the bindings' channel: guarantees): "
        + "; ".join(f"{e['families']} ({e['because']})" for e in summary["not_tried"])
    ]


def world_not_tried(spaces: Iterable[ChoiceSpace]) -> dict[str, Any]:
    """The report's ``extra.world_not_tried``: the world values exploration never set because
    each would contradict a related field of the world (:mod:`agentprop._spec.relations`) or
    break an order of one of its lists (:mod:`agentprop._spec.orders`): how many distinct
    values, of how many fields, on how many paths, a few examples, and every value with why
    (``left_out``) and path (``on_paths``), so shards merge (empty: none)."""
    because: dict[str, str] = {}
    paths: set[str] = set()
    for space in spaces:
        for d in space.dropped_world:
            because.setdefault(f"{d.tool}.{d.field}={json.dumps(d.value)}", d.because)
            paths.add(space.scenario.id)
    return world_not_tried_of(because, paths)


def world_not_tried_of(because: dict[str, str], paths: Iterable[str]) -> dict[str, Any]:
    """:func:`world_not_tried` from the values left out (``TOOL.FIELD=VALUE`` -> why) and the
    paths they were left out on (a merge joins its shards' this way)."""
    if not because:
        return {}
    left_out = dict(sorted(because.items()))
    return {
        "values": len(left_out),
        "fields": len({k.split("=", 1)[0] for k in left_out}),
        "paths": len(set(paths)),
        "examples": [{"value": k, "because": v} for k, v in list(left_out.items())[:3]],
        "left_out": left_out,
        "on_paths": sorted(set(paths)),
    }


def world_not_tried_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal summary's line for ``summary`` (:func:`world_not_tried`): a world variation
    left out is never counted as tried, and never left out silently."""
    if not summary:
        return []
    first = summary["examples"][0]
    return [
        f"not tried (world values that would contradict a related field or an order): "
        f"{summary['values']} value(s) of {summary['fields']} field(s) on {summary['paths']} "
        f"path(s), e.g. {first['value']} ({first['because']}); all in the JSON report's "
        "extra.world_not_tried"
    ]


async def explore_cases(
    project: Project,
    agent: LoadedAgent,
    scenarios: list[Scenario],
    oracle: OracleSettings,
    *,
    per_path: int,
    memo: TrialMemo,
    budget: Budget | None,
    seed: int,
    concurrency: int,
    on_done: Callable[[CaseReport], None] = lambda c: None,
    on_planned: Callable[[int], None] = lambda n: None,
    checks: dict[str, tuple[Scenario, CheckResult]] | None = None,
    replays: dict[str, Replay] | None = None,
    settings_for: Callable[[Scenario], OracleSettings] | None = None,
    lanes: CaseLanes = CaseLanes(),
    input_seed: int | None = None,
    learned: LearnedWeights | None = None,
    writer: InputWriter | None = None,
) -> tuple[list[CaseReport], list[ExploredInput]]:
    """Decide ``per_path`` explored inputs of every scenario (two rounds, a path's second weighted
    by what its first found), each turn in the phrase pack of the language it is written in. Each
    input is decided with ``settings_for(its base scenario)`` (default: ``oracle``), so an input of
    a safety path is held to the safety rule as the path's MFT is. Returns the case reports and the
    inputs (for shrinking: each input's base scenario and choices). ``input_seed`` (default
    ``seed``) draws the inputs; ``seed`` names the trials, so a new input seed explores other inputs
    while repeated ones replay their runs. ``learned``: shared by the passes of a budgeted run: the
    first pass keeps the weights it learned there, later passes draw with them, so they decide the
    very inputs the first one ran (a second run of a first-round input must not change which inputs
    the second round draws). ``writer``: turns may also be written by a model (an input model, a
    simulated user). A scenario that stops to ask for a detail the user left out is also
    continued past the question (:func:`piecemeal_scenarios`: the user answers it, then the
    complete path's expectations hold), explored as a path of its own."""
    if per_path <= 0 or not scenarios:
        return [], []
    check_languages(project.bindings)
    # and where a path asks for a detail the user left out, the user answering it
    scenarios = [*scenarios, *piecemeal_scenarios(project.bindings, scenarios)]
    sem = asyncio.Semaphore(max(1, concurrency))
    drawn = seed if input_seed is None else input_seed
    rngs = {s.id: random.Random(stable_seed("explore", drawn, s.id)) for s in scenarios}
    spaces = {s.id: ChoiceSpace(project, s, writer) for s in scenarios}
    seen: dict[str, set[str]] = {
        s.id: {json.dumps([s.messages, s.world.model_dump(mode="json")], sort_keys=True)}
        for s in scenarios
    }
    counters: dict[str, int] = {s.id: 0 for s in scenarios}
    decks: dict[str, dict[str, list[str]]] = {s.id: {} for s in scenarios}
    inputs: list[ExploredInput] = []
    reports: dict[str, CaseReport] = {}

    async def decide(
        e: ExploredInput, who: LoadedAgent = agent, record: bool = True
    ) -> tuple[CaseReport, CheckResult]:
        async with sem:
            chosen = settings_for(e.base) if settings_for is not None else oracle
            # the simulated user reads the agent's live question
            token = live_turns.set(e.space.live_turns(e.choices))
            try:
                result = await decide_scenario(
                    project,
                    e.scenario,
                    who,
                    settings=chosen,
                    memo=memo,
                    budget=budget,
                    seed=seed,
                    name=e.case_id,
                    **lanes.for_case(),
                )
            finally:
                live_turns.reset(token)
        if record and checks is not None:
            checks[e.case_id] = (e.scenario, result)
        case = case_from_check(
            e.case_id,
            "EXPLORE",
            e.scenario,
            result,
            {
                "base": e.base.id,
                "choices": e.choices.model_dump(mode="json"),
                "families": e.families,
                "described": e.choices.describe(),
            },
        )
        if record:
            on_done(case)
        return case, result

    async def replay(e: ExploredInput, who: LoadedAgent) -> CaseReport:
        return (await decide(e, who=who, record=False))[0]

    async def round_(
        count: int, weights: dict[str, dict[str, float]]
    ) -> dict[str, list[tuple[Choices, CheckResult]]]:
        batch: list[ExploredInput] = []
        for s in scenarios:
            for _ in range(count):
                drawn = _draw_distinct(
                    spaces[s.id], rngs[s.id], weights.get(s.id, {}), seen[s.id], decks[s.id]
                )
                if drawn is None:
                    break
                choices, rendered = drawn
                case_id = explored_id(s, counters[s.id])
                counters[s.id] += 1
                batch.append(ExploredInput(case_id, s, choices, rendered, spaces[s.id]))
        on_planned(len(batch))
        decided = await asyncio.gather(*(decide(e) for e in batch))
        for e, (case, _) in zip(batch, decided):
            reports[e.case_id] = case
            inputs.append(e)
            if replays is not None:
                replays[e.case_id] = functools.partial(replay, e)
        outcomes: dict[str, list[tuple[Choices, CheckResult]]] = {}
        for e, (_, result) in zip(batch, decided):
            outcomes.setdefault(e.base.id, []).append((e.choices, result))
        return outcomes

    first = (per_path + 1) // 2
    outcomes = await round_(first, {})
    if learned is not None and learned.weights is not None:
        weights = {path: dict(w) for path, w in learned.weights.items()}
    else:  # each path learns from its own first round only (see the module's docstring)
        weights = {path: learn({}, found) for path, found in outcomes.items()}
        if learned is not None:
            learned.weights = {path: dict(w) for path, w in weights.items()}
    if per_path - first > 0:
        await round_(per_path - first, weights)
    return [reports[e.case_id] for e in inputs], inputs
