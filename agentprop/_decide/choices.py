"""The generator's choices: how one input of a scenario was written.

A scenario fixes *what* the user asks (the path's intent, its slots, what is withheld, the world
the path needs); its :class:`Choices` fix *how* they ask it:

- ``template``: which template variant writes the conversation. Variants are the scenario
  builder's own (``build_scenario(template_index=k)`` with the scenario's assignment; the
  bindings align each follow-up's templates with the first message's, so one index picks
  them all), kept only when they build the same case (expectations and world).
- per turn, ``steps``: paraphrase transforms from the phrase packs applied in order
  (politeness, hedges, fillers, register — hurried, casual, formal —, indirect requests,
  synonyms, reordering, one typo; see :data:`agentprop.strategies.TRANSFORM_NAMES`). Protected
  slots (ids, amounts, ZIP codes, the scenario's slot values) are never altered.

Every choice is valid by construction: a template variant asks the same thing with the same
slots, and the transforms preserve meaning. So shrinking *choices* (a step dropped, the template
back to 0) always yields an instance of the same scenario; that is what the shrinker does
(:mod:`agentprop._decide.shrink`), never deleting words from the text.

:class:`ChoiceSpace` draws choices from a seeded random source with per-family weights (the
exploration's learning, :mod:`agentprop._pipeline.explore`) and renders them.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from agentprop._spec.paths import TreePath, enumerate_paths
from agentprop._agents.project import Project
from agentprop._scenario.build import Scenario, build_scenario
from agentprop.strategies._internal.paraphrase import _build_plan, apply_transforms
from agentprop.errors import AgentPropError, InvalidArgument

StepChoice = tuple[str, tuple[tuple[str, int], ...]]
"""One paraphrase step: a transform name and its integer parameters."""


class TurnChoice(BaseModel):
    """The paraphrase steps applied to one user turn."""

    model_config = ConfigDict(frozen=True)

    steps: tuple[StepChoice, ...] = ()


class Choices(BaseModel):
    """How a scenario's conversation is written: one template choice for the whole
    conversation (the bindings align a follow-up's templates with the first message's, so they
    are chosen together, as the scenario builder does) and paraphrase steps per turn."""

    model_config = ConfigDict(frozen=True)

    lang: str = "en"
    template: int = 0
    turns: tuple[TurnChoice, ...] = ()

    @property
    def plain(self) -> bool:
        """No choice differs from the scenario's own messages."""
        return self.template == 0 and not any(t.steps for t in self.turns)

    def families(self) -> list[str]:
        """What this input varies: ``template`` and ``turnN:TRANSFORM``."""
        out = ["template"] if self.template else []
        for i, t in enumerate(self.turns):
            out += [f"turn{i + 1}:{name}" for name, _ in t.steps]
        return list(dict.fromkeys(out))

    def describe(self) -> str:
        parts = [f"template {self.template}"] if self.template else []
        for i, t in enumerate(self.turns):
            if t.steps:
                parts.append(f"turn {i + 1}: " + " + ".join(f"{name}({', '.join(f'{k}={v}' for k, v in params)})" for name, params in t.steps))
        return "; ".join(parts) or "the scenario's own messages"


def _protected(scenario: Scenario, text: str) -> list[str]:
    """The scenario's slot values that occur in ``text``: never touched by a transform."""
    values = {str(v) for v in scenario.slots.values() if str(v)}
    return sorted((v for v in values if v in text), key=len, reverse=True)


def _available_steps(text: str, lang: str, protect: Sequence[str]) -> list[tuple[str, tuple[tuple[str, int], ...]]]:
    """``(transform, parameter bounds)`` for the transforms that can change ``text``."""
    plan = _build_plan(
        text, lang=lang, packs=None, protect=list(protect), pool=(), max_transforms=4, max_typos=MAX_TYPOS, transforms=None, filter_available=True
    )
    return [(t.name, b) for t, b in zip(plan.candidates, plan.bounds)]


MAX_TYPOS = 1
"""Keyboard slips per turn an explored input may have (one typo is a slip; two in one word is
a different word)."""

MAX_TEMPLATES = 8


def _same_case(a: Scenario, b: Scenario) -> bool:
    """Whether ``b`` asks the same as ``a``: same turns, expectations and world."""
    strip = {"user_message"}
    return a.world == b.world and [t.model_dump(exclude=strip) for t in a.turns] == [t.model_dump(exclude=strip) for t in b.turns]


class ChoiceSpace:
    """The inputs one scenario can be written as, and how to render and draw them.

    Template choices are the builder's own (``build_scenario(template_index=k)`` with the
    scenario's assignment), kept only when they build the same case (expectations and world):
    a template variant is an instance of the scenario by construction, or it is not offered.
    """

    def __init__(self, project: Project, scenario: Scenario) -> None:
        self.project = project
        self.scenario = scenario
        self.variants: list[Scenario] = [scenario]
        path = _path_of(project, scenario)
        if path is not None:
            seen = {tuple(scenario.messages)}
            for k in range(1, MAX_TEMPLATES):
                try:
                    built = build_scenario(project.spec, project.bindings, path, template_index=k, assignment=scenario.assignment)
                except AgentPropError:
                    continue
                built = built.model_copy(update={"id": scenario.id})
                if tuple(built.messages) in seen or not _same_case(scenario, built):
                    continue
                seen.add(tuple(built.messages))
                self.variants.append(built)

    def base(self, template: int) -> Scenario:
        if not 0 <= template < len(self.variants):
            raise InvalidArgument(f"scenario {self.scenario.id} has {len(self.variants)} template variant(s); template={template} is out of range")
        return self.variants[template]

    def render(self, choices: Choices) -> Scenario:
        """The scenario with its messages written as ``choices`` say (same id, expectations, world)."""
        base = self.base(choices.template)
        if len(choices.turns) != len(base.turns):
            raise InvalidArgument(f"choices describe {len(choices.turns)} turn(s) but scenario {base.id} has {len(base.turns)}")
        turns = []
        for t, c in zip(base.turns, choices.turns):
            text = t.user_message
            if c.steps:
                text = str(apply_transforms(text, [(n, dict(p)) for n, p in c.steps], lang=choices.lang, protect=_protected(base, text), max_typos=MAX_TYPOS))
            turns.append(t.model_copy(update={"user_message": text}))
        return base.model_copy(update={"turns": turns})

    @property
    def lang(self) -> str:
        """The phrase pack the scenario's messages are written in (``zh`` for Chinese text)."""
        return language_of(" ".join(self.scenario.messages))

    def plain(self) -> Choices:
        return Choices(lang=self.lang, turns=tuple(TurnChoice() for _ in self.scenario.turns))

    def draw(self, rng: random.Random, *, lang: str | None = None, weights: Mapping[str, float] | None = None, vary_probability: float = 0.7, max_steps: int = 3) -> Choices:
        """A random way to write the conversation: a template variant (uniform), and for each
        turn (with probability ``vary_probability``, at least one turn) 1 to ``max_steps``
        transforms, each picked with probability proportional to its family's weight. ``lang``
        defaults to the language the scenario is written in."""
        weights = weights or {}
        lang = lang or self.lang
        template = rng.randrange(len(self.variants))
        base = self.variants[template]
        n = len(base.turns)
        varied = [rng.random() < vary_probability for _ in range(n)]
        if not any(varied) and template == 0:
            varied[rng.randrange(n)] = True
        turns = []
        for i, (t, vary) in enumerate(zip(base.turns, varied)):
            steps: list[StepChoice] = []
            options = _available_steps(t.user_message, lang, _protected(base, t.user_message)) if vary else []
            if options:
                w = [max(weights.get(f"turn{i + 1}:{name}", 1.0), 1e-6) for name, _ in options]
                for _ in range(rng.randint(1, max_steps)):
                    name, bounds = options[rng.choices(range(len(options)), weights=w)[0]]
                    steps.append((name, tuple((key, rng.randint(0, hi)) for key, hi in bounds)))
            turns.append(TurnChoice(steps=tuple(steps)))
        return Choices(lang=lang, template=template, turns=tuple(turns))


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def language_of(text: str) -> str:
    """``zh`` for text with CJK ideographs, ``en`` otherwise (the shipped packs)."""
    return "zh" if _CJK.search(text) else "en"


def _path_of(project: Project, scenario: Scenario) -> TreePath | None:
    """The tree path ``scenario`` was built from (same branches, leaf and stop)."""
    for path in enumerate_paths(project.spec):
        if [f"{s.node}#{s.branch}" for s in path.steps] == scenario.branches and path.leaf == scenario.leaf and (path.id == scenario.id.split("/")[0]):
            return path
    return None


class ChoiceUnit(BaseModel):
    """A removable choice, for the shrinker: removing it makes the input simpler."""

    model_config = ConfigDict(frozen=True)

    kind: str
    """``template`` (removed: template 0) or ``step`` (removed: not applied)."""
    turn: int = 0
    step: int = 0


def choice_units(choices: Choices) -> list[ChoiceUnit]:
    """Each non-default choice as a unit."""
    out = [ChoiceUnit(kind="template")] if choices.template else []
    for i, t in enumerate(choices.turns):
        out += [ChoiceUnit(kind="step", turn=i, step=j) for j in range(len(t.steps))]
    return out


def keep_only(choices: Choices, kept: Sequence[ChoiceUnit]) -> Choices:
    """``choices`` with every unit not in ``kept`` set back to its default."""
    keep = set(kept)
    turns = tuple(TurnChoice(steps=tuple(s for j, s in enumerate(t.steps) if ChoiceUnit(kind="step", turn=i, step=j) in keep)) for i, t in enumerate(choices.turns))
    return Choices(lang=choices.lang, template=choices.template if ChoiceUnit(kind="template") in keep else 0, turns=turns)
