"""Meaning-preserving paraphrases as a Hypothesis strategy.

A paraphrase is drawn as integers and lists (a pool index and transform steps), never as text,
and the text is built from them. So shrinking goes towards the original, every shrunk value
renders to a sensible sentence, and replays are exact. Protected slots are masked before any
transform runs, and re-checked after every step; a step that changes nothing is left out of the
provenance.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from agentprop.errors import AgentPropError, InvalidArgument
from agentprop.strategies._internal.language import Language, language_for
from agentprop.strategies._internal.model_written import Realiser, current_realiser
from agentprop.strategies._internal.packs import PhrasePack, resolve_pack
from agentprop.strategies._internal.slots import (
    Slot,
    find_slots,
    has_placeholder_chars,
    mask,
    unmask,
    validate_protect,
)
from agentprop.strategies._internal.transforms import (
    BY_NAME,
    TRANSFORM_NAMES,
    TRANSFORMS,
    Transform,
)

if TYPE_CHECKING:  # Hypothesis is imported where a strategy is made: a run needs none
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "Paraphrase",
    "Step",
    "apply_transforms",
    "paraphrases",
    "rerender",
    "turn_paraphrases",
]


# --- values -----------------------------------------------------------------------------------


class Step(NamedTuple):
    """One applied transform: its name and its integer parameters (provenance)."""

    name: str
    params: tuple[tuple[str, int], ...] = ()

    @property
    def kwargs(self) -> dict[str, int]:
        return dict(self.params)

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.name}({args})"


class Paraphrase(str):
    """A paraphrased text: a ``str`` (use it anywhere a string goes) that also remembers where
    it came from.

    * ``p.text`` -- the text as a plain ``str`` (same as ``str(p)``)
    * ``p.original`` -- the sentence it was derived from
    * ``p.transforms`` -- tuple of :class:`Step` ``(name, params)``, in the order applied;
      empty means ``p == p.original`` (unless a pool rewrite was chosen, which is then the
      first step, ``pool(index=i)``)
    * ``p.lang`` -- the phrase-pack language used

    Equality and hashing are those of the text. Instances are immutable.
    """

    original: str
    transforms: tuple[Step, ...]
    lang: str

    def __new__(
        cls, text: str, *, original: str, transforms: Iterable[Step] = (), lang: str = "en"
    ) -> Paraphrase:
        self = super().__new__(cls, text)
        object.__setattr__(self, "original", str(original))
        object.__setattr__(self, "transforms", tuple(Step(*s) for s in transforms))
        object.__setattr__(self, "lang", lang)
        return self

    @property
    def text(self) -> str:
        return str.__str__(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        steps = ", ".join(str(s) for s in self.transforms)
        return f"Paraphrase({self.text!r}, original={self.original!r}, transforms=[{steps}])"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Paraphrase is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Paraphrase is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_paraphrase, (self.text, self.original, self.transforms, self.lang))

    def describe(self) -> str:
        """One line: the text and how it was made."""
        how = " + ".join(str(s) for s in self.transforms) or "unchanged"
        return (
            f"{self.text!r} = original + {how}"
            if self.transforms
            else f"{self.text!r} (original, unchanged)"
        )


def _rebuild_paraphrase(
    text: str, original: str, transforms: tuple[Step, ...], lang: str
) -> Paraphrase:
    return Paraphrase(text, original=original, transforms=transforms, lang=lang)


# --- plan and rendering -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    text: str
    masked: str
    mapping: dict[str, str]


@dataclass(frozen=True)
class _Plan:
    """Everything a draw needs, validated once when the strategy is created."""

    lang_code: str
    lang: Language
    sources: tuple[_Source, ...]
    candidates: tuple[Transform, ...]
    bounds: tuple[tuple[tuple[str, int], ...], ...]
    max_transforms: int
    max_typos: int
    description: str = field(default="")
    open_wording: bool = True
    """Whether a draw may reword the template freely: no ``max_transforms=0``, no ``transforms=``
    list. Only then may an input model's texts stand in for it (they are free rewordings)."""
    steps_strategy: SearchStrategy[list[tuple[str, dict[str, int]]]] | None = field(
        default=None, compare=False
    )
    pool_strategy: SearchStrategy[int] | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return self.description

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.description)

    @property
    def original(self) -> str:
        return self.sources[0].text

    def render(self, pool_index: int, steps: Sequence[tuple[str, Mapping[str, int]]]) -> Paraphrase:
        source = self.sources[pool_index]
        text = source.masked
        applied: list[Step] = [Step("pool", (("index", pool_index),))] if pool_index else []
        typos = 0
        slipped: Counter[str] = Counter()
        placeholders = Counter(c for c in text if "\ue000" <= c <= "\uf8ff")
        for name, params in steps:
            if name == "typo" and typos >= self.max_typos:
                continue
            transform = BY_NAME[name]
            new = transform.apply(self.lang, text, params)
            if new == text:
                continue
            if name == "typo" and (_words(text) - _words(new)) & slipped:
                continue  # one slip per word: two in one word make another word
            if Counter(c for c in new if "\ue000" <= c <= "\uf8ff") != placeholders:
                raise AgentPropError(
                    f"internal error: transform {name!r} with {dict(params)} altered a protected "
                    f"slot of {self.original!r}; please report this bug to agentprop"
                )
            if name == "typo":
                slipped.update(_words(new) - _words(text))
            text = new
            typos += name == "typo"
            applied.append(Step(name, tuple(params.items())))
        result = Paraphrase(
            unmask(text, source.mapping),
            original=self.original,
            transforms=applied,
            lang=self.lang_code,
        )
        # what re-renders a subset of its steps (rerender)
        object.__setattr__(result, "_plan", self)
        return result


def _words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text))


def rerender(paraphrase: Paraphrase, steps: Iterable[Step]) -> Paraphrase | None:
    """``paraphrase``'s original with only ``steps`` (some of its ``transforms``, in order)
    applied, under the plan that drew it (its packs, protected slots and pool): what a shrinker
    of the drawn choices builds its candidates from. A ``pool`` step left out means the
    original text. ``None`` when the plan is unknown (a Paraphrase built by hand or unpickled),
    or does not re-render the paraphrase itself exactly."""
    plan = paraphrase.__dict__.get("_plan")
    if not isinstance(plan, _Plan):
        return None
    steps = list(steps)
    if any(s.name.startswith(MODEL_STEP) for s in paraphrase.transforms):
        # a model-written text is one choice: kept whole, or left out (the template itself)
        kept = any(s.name.startswith(MODEL_STEP) for s in steps)
        return paraphrase if kept else plan.render(0, [])
    if plan.render(*_plan_steps(paraphrase.transforms)).text != paraphrase.text:
        return None
    return plan.render(*_plan_steps(steps))


def _plan_steps(steps: Iterable[Step]) -> tuple[int, list[tuple[str, Mapping[str, int]]]]:
    pool_index = 0
    out: list[tuple[str, Mapping[str, int]]] = []
    for step in steps:
        if step.name == "pool":
            pool_index = step.kwargs.get("index", 0)
        else:
            out.append((step.name, step.kwargs))
    return pool_index, out


def _validate_int(name: str, value: object, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise InvalidArgument(f"{name}={value!r} must be at least {minimum}")
    return value


def _validate_text(value: object, argument: str = "text") -> str:
    if not isinstance(value, str):
        raise InvalidArgument(
            f"{argument} must be a str, got {type(value).__name__} {value!r}"
            + (" (decode bytes first)" if isinstance(value, bytes) else "")
        )
    if not value.strip():
        raise InvalidArgument(
            f"{argument}={value!r} must contain at least one non-whitespace character"
        )
    if has_placeholder_chars(value):
        raise InvalidArgument(
            f"{argument} contains private-use characters (U+E000-U+F8FF), which agentprop "
            "reserves to mask protected slots; remove them"
        )
    return value


def _make_source(text: str, protect: Sequence[str | re.Pattern[str]]) -> tuple[_Source, list[Slot]]:
    slots = find_slots(text, protect=protect)
    masked, mapping = mask(text, slots)
    return _Source(text, masked, mapping), slots


def build_plan(
    text: object,
    *,
    lang: object,
    packs: object,
    protect: object,
    pool: object,
    max_transforms: object,
    max_typos: object,
    transforms: object,
    filter_available: bool,
) -> _Plan:
    original = _validate_text(text)
    n_max = _validate_int("max_transforms", max_transforms)
    typo_max = _validate_int("max_typos", max_typos)
    protect_items = validate_protect(protect)
    for item in protect_items:
        if isinstance(item, str) and item not in original:
            raise InvalidArgument(
                f"protect=[{item!r}] does not occur in text {original!r}; protected strings must "
                "be exact substrings (case-sensitive)"
            )
        if isinstance(item, re.Pattern) and not item.search(original):
            raise InvalidArgument(
                f"protect pattern {item.pattern!r} matches nothing in text {original!r}"
            )
    if isinstance(pool, str) or not isinstance(pool, Iterable):
        raise InvalidArgument(
            f"pool must be a list of alternative texts, got {type(pool).__name__} {pool!r}"
        )
    pool_texts = [_validate_text(p, "pool entry") for p in pool]
    if transforms is None:
        wanted = TRANSFORM_NAMES
    else:
        if isinstance(transforms, str) or not isinstance(transforms, Iterable):
            raise InvalidArgument(
                f"transforms must be a list of transform names, got {transforms!r}"
            )
        wanted = tuple(transforms)
        unknown = [t for t in wanted if t not in BY_NAME]
        if unknown:
            raise InvalidArgument(
                f"unknown transform names {unknown}; choose from {list(TRANSFORM_NAMES)}"
            )
    if not isinstance(lang, str):
        raise InvalidArgument(
            f"lang must be a str such as 'en' or 'zh', got {type(lang).__name__} {lang!r}"
        )
    language = language_for(resolve_pack(lang, packs))

    first, slots = _make_source(original, protect_items)
    sources = [first]
    needed = Counter(s.text for s in slots)
    for entry in pool_texts:
        missing = [s for s, n in needed.items() if entry.count(s) < n]
        if missing:
            raise InvalidArgument(
                f"pool entry {entry!r} drops or changes protected slots {missing} of "
                f"{original!r}; every rewrite in a pool must keep each id, amount, date and "
                "number of the original verbatim"
            )
        sources.append(_make_source(entry, protect_items)[0])

    site_max = max(15, min(1023, 2 * max(len(s.masked) for s in sources)))
    candidates = tuple(
        t
        for t in TRANSFORMS
        if t.name in wanted
        and (not filter_available or any(t.available(language, s.masked) for s in sources))
    )
    bounds = tuple(t.params(language, site_max) for t in candidates)
    options = [f"lang={lang!r}"]
    if packs is not None:
        options.append(f"packs={packs!r}")
    if protect_items:
        options.append(f"protect={list(protect_items)!r}")
    if pool_texts:
        options.append(f"pool={pool_texts!r}")
    if n_max != 4:
        options.append(f"max_transforms={n_max}")
    if transforms is not None:
        options.append(f"transforms={list(wanted)!r}")
    description = f"paraphrases({original!r}, {', '.join(options)})"
    return _Plan(
        lang,
        language,
        tuple(sources),
        candidates,
        bounds,
        n_max,
        typo_max,
        description,
        open_wording=n_max > 0 and transforms is None,
    )


def _with_strategies(plan: _Plan) -> _Plan:
    """``plan`` with the strategies a draw of it uses (:func:`build_plan` makes none: replaying
    recorded steps and listing the transforms need no Hypothesis)."""
    from hypothesis import strategies as st

    step = _step_strategy(plan.candidates, plan.bounds)
    n = len(plan.sources)
    return dataclasses.replace(
        plan,
        steps_strategy=(
            _steps_strategy(step, plan.max_transforms)
            if step is not None and plan.max_transforms
            else None
        ),
        pool_strategy=st.integers(0, n - 1) if n > 1 else None,
    )


@functools.lru_cache(maxsize=256)
def _step_strategy_for(
    spec: tuple[tuple[str, tuple[tuple[str, int], ...]], ...],
) -> SearchStrategy[tuple[str, dict[str, int]]] | None:
    """One step: a transform (lower index = simpler, what one_of shrinks towards) and its
    integer parameters (shrinking towards 0 = the first site / the first pack entry).

    Cached by shape, so building strategies for many texts (``flatmap``) reuses one object."""
    if not spec:
        return None
    from hypothesis import strategies as st

    def branch(
        name: str, spec: tuple[tuple[str, int], ...]
    ) -> SearchStrategy[tuple[str, dict[str, int]]]:
        keys = tuple(n for n, _ in spec)
        values = st.tuples(*(st.integers(0, hi) for _, hi in spec))
        return values.map(lambda vs: (name, dict(zip(keys, vs))))

    return st.one_of([branch(name, b) for name, b in spec])


@functools.lru_cache(maxsize=256)
def _steps_strategy(
    step: SearchStrategy[tuple[str, dict[str, int]]], max_size: int
) -> SearchStrategy[list[tuple[str, dict[str, int]]]]:
    from hypothesis import strategies as st

    return st.lists(step, max_size=max_size)


def _step_strategy(
    candidates: Sequence[Transform], bounds: Sequence[tuple[tuple[str, int], ...]]
) -> SearchStrategy[tuple[str, dict[str, int]]] | None:
    return _step_strategy_for(tuple((t.name, b) for t, b in zip(candidates, bounds)))


MODEL_STEP = "model:"
"""The prefix of a model-written paraphrase's one step (``model:hedge``, ``model:user:hurried``):
its family; its ``index`` is the text's place among the realiser's texts for the template."""


def _written(
    draw: st.DrawFn, plan: _Plan, realiser: Realiser, role: str, goal: str
) -> Paraphrase | None:
    """With a realiser in force: a model-written text of the template, or ``None`` (the
    template's own draw follows). The first choice is a boolean whose simplest value keeps the
    template; the realiser's texts are fixed once fetched, so shrinking never asks the model."""
    protect = tuple(dict.fromkeys(plan.sources[0].mapping.values()))
    texts = realiser.realisations(
        plan.original, lang=plan.lang_code, protect=protect, role=role, goal=goal
    )
    from hypothesis import strategies as st

    if not texts or not draw(st.booleans()):
        return None
    index = draw(st.integers(0, len(texts) - 1))
    chosen = texts[index]
    result = Paraphrase(
        chosen.text,
        original=plan.original,
        transforms=[Step(MODEL_STEP + chosen.family, (("index", index),))],
        lang=plan.lang_code,
    )
    object.__setattr__(result, "_plan", plan)
    return result


def _paraphrase_strategy(
    draw: st.DrawFn, plan: _Plan, role: str = "request", goal: str = ""
) -> Paraphrase:
    from hypothesis import note

    realiser = current_realiser()
    written = (
        _written(draw, plan, realiser, role, goal)
        if realiser is not None and plan.open_wording
        else None
    )
    if written is not None:
        note(f"Paraphrase: {written.describe()}")
        return written
    index = draw(plan.pool_strategy) if plan.pool_strategy is not None else 0
    steps = draw(plan.steps_strategy) if plan.steps_strategy is not None else []
    result = plan.render(index, steps)
    note(f"Paraphrase: {result.describe()}")
    return result


@functools.cache
def _paraphrase_composite() -> Callable[..., SearchStrategy[Paraphrase]]:
    """:func:`_paraphrase_strategy` as a strategy of plans, made when first needed."""
    from hypothesis import strategies as st

    return st.composite(_paraphrase_strategy)


def paraphrases(
    text: str,
    *,
    lang: str = "en",
    packs: Sequence[str | os.PathLike[str] | PhrasePack] | None = None,
    protect: Sequence[str | re.Pattern[str]] = (),
    pool: Sequence[str] = (),
    max_transforms: int = 4,
    max_typos: int = 2,
    transforms: Sequence[str] | None = None,
) -> SearchStrategy[Paraphrase]:
    """A strategy for meaning-preserving rewrites of ``text``, as :class:`Paraphrase` values.

    Each example is the original (or a ``pool`` entry) with up to ``max_transforms`` transforms
    applied in order, drawn from :data:`TRANSFORM_NAMES` (restrict with ``transforms=``). It
    shrinks towards the unchanged ``text``. Protected slots -- ids, money, dates, times,
    e-mails, URLs, numbers, ``{placeholders}`` and every string or regex in ``protect`` -- are
    never altered. At most ``max_typos`` typo steps take effect per example, and a word takes
    at most one (two slips in one word make another word).

    ``lang`` picks the shipped phrase pack (``"en"``, ``"zh"``); ``packs`` adds user packs
    (paths or :class:`PhrasePack` objects; packs for other languages are ignored). ``pool`` is a
    list of ready-made rewrites of ``text`` (for instance LLM paraphrases cached on disk);
    index 0 is always the original and every entry must keep all protected slots.

    Arguments are validated when the strategy is created; bad ones raise
    :class:`~agentprop.errors.InvalidArgument`, bad pack files
    :class:`~agentprop.errors.InputError`.
    """
    plan = build_plan(
        text,
        lang=lang,
        packs=packs,
        protect=protect,
        pool=pool,
        max_transforms=max_transforms,
        max_typos=max_typos,
        transforms=transforms,
        filter_available=True,
    )
    return _paraphrase_composite()(_with_strategies(plan))


def turn_paraphrases(
    text: str,
    *,
    role: str,
    goal: str,
    lang: str = "en",
    protect: Sequence[str | re.Pattern[str]] = (),
    max_transforms: int = 4,
) -> SearchStrategy[Paraphrase]:
    """:func:`paraphrases` of one turn of a conversation: an input model in force writes it as a
    turn of ``role`` (``request``, ``answer``) of the conversation whose first message is
    ``goal``; without one, the very same draws as :func:`paraphrases`."""
    plan = build_plan(
        text,
        lang=lang,
        packs=None,
        protect=protect,
        pool=(),
        max_transforms=max_transforms,
        max_typos=2,
        transforms=None,
        filter_available=True,
    )
    return _paraphrase_composite()(_with_strategies(plan), role, goal)


def apply_transforms(
    text: str,
    steps: Iterable[Step | tuple[str, Any]],
    *,
    lang: str = "en",
    packs: Sequence[str | os.PathLike[str] | PhrasePack] | None = None,
    protect: Sequence[str | re.Pattern[str]] = (),
    pool: Sequence[str] = (),
    max_typos: int = 2,
) -> Paraphrase:
    """Re-apply recorded steps (e.g. ``p.transforms``) to ``text``; deterministic.

    ``apply_transforms(p.original, p.transforms, lang=p.lang, ...)`` returns ``p`` again (with
    the same packs, protect and pool). A step is a :class:`Step` or ``(name, params)`` with
    params a mapping or ``(name, value)`` pairs; a ``pool(index=i)`` step selects a pool entry.
    """
    plan = build_plan(
        text,
        lang=lang,
        packs=packs,
        protect=protect,
        pool=pool,
        max_transforms=0,
        max_typos=max_typos,
        transforms=None,
        filter_available=False,
    )
    bounds = {t.name: dict(b) for t, b in zip(plan.candidates, plan.bounds)}
    pool_index = 0
    normalized: list[tuple[str, Mapping[str, int]]] = []
    for raw in steps:
        try:
            name, params = raw
        except (TypeError, ValueError):
            raise InvalidArgument(f"a step must be (name, params), got {raw!r}") from None
        values = dict(params.items() if isinstance(params, Mapping) else params)
        if name == "pool":
            pool_index = _validate_int("pool index", values.get("index", 0))
            if pool_index >= len(plan.sources):
                raise InvalidArgument(
                    f"pool index {pool_index} is out of range: the pool has "
                    f"{len(plan.sources) - 1} entries"
                )
            continue
        if name not in bounds:
            raise InvalidArgument(
                f"unknown transform {name!r}; choose from {list(TRANSFORM_NAMES)}"
            )
        expected = bounds[name]
        if set(values) != set(expected):
            raise InvalidArgument(
                f"transform {name!r} takes parameters {sorted(expected)}, got {sorted(values)}"
            )
        for key, value in values.items():
            _validate_int(f"{name}.{key}", value)
        normalized.append((name, {k: values[k] for k in expected}))
    return plan.render(pool_index, normalized)
