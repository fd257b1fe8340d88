"""Scenarios drawn from a path of the decision tree: worlds and conversations.

Invariants: expectations are computed from the tree, never written by hand; strategies draw
integers, never text or floats, with 0 the path's default, so Hypothesis shrinks towards the
default scenario; bad requests fail when the strategy is created; a drawn value carries its
provenance. Also holds what the boundary and directional strategies share
(:func:`choose_branch`, :func:`walk`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from agentprop._scenario.build import Scenario, WorldSpec, build_scenario
from agentprop._scenario.solver import (
    BranchChoice,
    NumericField,
    Route,
    Solver,
    _WalkStop,
    is_number,
    numeric_value,
    same_value,
    solve,
)
from agentprop._spec.bindings import Bindings
from agentprop._spec.model import Spec
from agentprop._spec.paths import TreePath, enumerate_paths
from agentprop._spec.when import (
    And,
    Compare,
    Expr,
    Not,
    Or,
    UnboundVariable,
    variables,
)
from agentprop._spec.when import (
    Path as VarPath,
)
from agentprop.errors import AgentPropError, InvalidArgument, Unsatisfiable

if TYPE_CHECKING:  # Hypothesis is imported where a strategy is made: a run needs none
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "BranchChoice",
    "ConversationProvenance",
    "DrawnScenario",
    "PathWorld",
    "Route",
    "Skipped",
    "choose_branch",
    "conversations",
    "resolve_path",
    "walk",
    "worlds",
]

PathLike = TreePath | str


# ----------------------------------------------------------------------------- models


class PathWorld(BaseModel):
    """A world drawn by :func:`worlds`: the overrides, and how they were chosen."""

    path_id: str
    tree_path: str
    """The path as text (``N1_INTENT [intent == cancel_order] -> ...``)."""
    alternative: int = 0
    """Index among the tree paths that share ``path_id`` (0 = the first satisfiable)."""
    assignment: dict[str, Any]
    """Values of the condition variables; every condition of the path holds for them."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    """The value :func:`~agentprop._scenario.build.solve` chose for each varied variable."""
    offsets: dict[str, int] = Field(default_factory=dict)
    """Steps away from the default, per varied variable (0 = the default)."""
    fixed: dict[str, str] = Field(default_factory=dict)
    """Numeric variables that were not varied, with the reason."""
    world: WorldSpec

    def describe(self) -> str:
        moved = ", ".join(
            f"{k}={self.assignment[k]!r} ({v:+d} steps)" for k, v in self.offsets.items() if v
        )
        return f"world for {self.path_id}: " + (moved or "default values")


class ConversationProvenance(BaseModel):
    """How a :class:`DrawnScenario` was made (everything needed to make it again)."""

    path_id: str
    tree_path: str
    alternative: int = 0
    template_index: int = 0
    world_offsets: dict[str, int] = Field(default_factory=dict)
    original_messages: list[str] = Field(default_factory=list)
    paraphrase_steps: list[list[str]] = Field(default_factory=list)
    """Per turn, the paraphrase transforms applied (empty = the template's own text)."""

    def describe(self) -> str:
        moved = {k: v for k, v in self.world_offsets.items() if v}
        changed = [
            f"turn {i + 1}: {' + '.join(s)}" for i, s in enumerate(self.paraphrase_steps) if s
        ]
        return (
            f"conversation for {self.path_id}: template {self.template_index}"
            + (f", world offsets {moved}" if moved else ", default world")
            + (f", paraphrased ({'; '.join(changed)})" if changed else ", original wording")
        )


class DrawnScenario(Scenario):
    """A :class:`~agentprop._scenario.build.Scenario` drawn by :func:`conversations`, with its
    provenance. Use it anywhere a ``Scenario`` goes."""

    provenance: ConversationProvenance


class Skipped(BaseModel):
    """A comparison, atom, variable or value for which no case was made, and why."""

    comparison: str
    location: str
    variable: str | None = None
    value: Any = None
    label: str | None = None
    reason: str


# ----------------------------------------------------------------------------- validation


def check_spec_bindings(spec: object, bindings: object, where: str) -> tuple[Spec, Bindings]:
    if not isinstance(spec, Spec):
        raise InvalidArgument(
            f"{where}: spec must be a Spec (got {type(spec).__name__}); load one with "
            "agentprop.spec.load_spec('path/to/spec.yaml')"
        )
    if not isinstance(bindings, Bindings):
        raise InvalidArgument(
            f"{where}: bindings must be a Bindings (got {type(bindings).__name__}); load them with "
            "load_bindings('agentprop.yaml', spec), or use empty_bindings(spec) for none"
        )
    return spec, bindings


def check_node(spec: Spec, node: object, where: str, *, allow_none: bool) -> str | None:
    if node is None and allow_none:
        return None
    inner = [n.node_id for n in spec.decision_tree if not n.is_terminal]
    if not isinstance(node, str):
        raise InvalidArgument(
            f"{where}: node must be a node id string (got {type(node).__name__}); nodes with "
            f"branches: {', '.join(inner)}"
        )
    if node not in spec.nodes_by_id:
        close = difflib.get_close_matches(node, list(spec.nodes_by_id), n=1)
        raise InvalidArgument(
            f"{where}: spec {spec.spec_id} has no node {node!r}"
            + (f"; did you mean {close[0]!r}?" if close else "")
            + f" Nodes with branches: {', '.join(inner)}"
        )
    if spec.nodes_by_id[node].is_terminal:
        raise InvalidArgument(
            f"{where}: node {node!r} is terminal (it has no branches, so nothing to compare); use "
            f"a node with branches: {', '.join(inner)}"
        )
    return node


def check_int(value: object, name: str, where: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{where}: {name}={value!r} must be an integer >= {minimum}")
    if value < minimum:
        raise InvalidArgument(f"{where}: {name}={value} must be >= {minimum}")
    return value


def resolve_path(spec: Spec, path: object, where: str = "resolve_path") -> list[TreePath]:
    """The tree paths ``path`` names: a :class:`~agentprop._spec.paths.TreePath` of ``spec``, a
    path id such as ``"END_CANCELLED<-N7_CANCEL"`` (several tree paths may share an id; all
    are returned, in tree order), or a scenario id of ``agentprop run`` that adds the branch it
    covers (``"END_APPROVE<-N7_SUBMIT/N5_CALCULATE#1"``)."""
    all_paths = enumerate_paths(spec)
    if isinstance(path, TreePath):
        if path not in all_paths:
            raise InvalidArgument(
                f"{where}: path {path.id} is not a path of spec {spec.spec_id}; take paths from "
                "enumerate_paths(spec), or pass a path id string"
            )
        return [path]
    if isinstance(path, str):
        matches = [p for p in all_paths if p.id == path]
        base, _, branch = path.rpartition("/")
        if not matches and base and "#" in branch:
            # a scenario id of `agentprop run`: the path id plus the branch it covers
            node, _, k = branch.partition("#")
            matches = [
                p
                for p in all_paths
                if p.id == base and any(f"{s.node}#{s.branch}" == f"{node}#{k}" for s in p.steps)
            ]
        if not matches:
            ids = list(dict.fromkeys(p.id for p in all_paths))
            close = difflib.get_close_matches(path, ids, n=1)
            raise InvalidArgument(
                f"{where}: spec {spec.spec_id} has no path {path!r}"
                + (f"; did you mean {close[0]!r}?" if close else "")
                + f" Path ids: {', '.join(ids)}"
            )
        return matches
    raise InvalidArgument(
        f"{where}: path must be a TreePath or a path id string like 'END_CANCELLED<-N7_CANCEL' "
        f"(got {type(path).__name__})"
    )


# ----------------------------------------------------------------------------- the context


class Context(Solver):
    """The :class:`~agentprop._scenario.solver.Solver` of a spec and its bindings, plus what the
    strategies need on top of it: realising an assignment as a scenario."""

    def build_env(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """The part of an assignment ``build_scenario`` can realise (bound, not internal)."""
        return {k: v for k, v in env.items() if (b := self.var(k)) is not None and not b.internal}

    def realise(
        self,
        route: Route,
        env: Mapping[str, Any],
        *,
        template_index: int = 0,
        extra_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> tuple[Scenario | None, str | None]:
        """A scenario for ``route`` under ``env``, or ``(None, reason)``."""
        if route.leaf is None:
            return None, f"the route stops before a leaf: {route.stop}"
        path = self.path_for(route.steps)
        if path is None:
            return None, f"no loop-free tree path follows {route}"
        for k, v in env.items():
            why = (
                self.realisable(k, v)
                if not self.is_internal(k) and self.var(k) is not None
                else None
            )
            if why is not None:
                return None, why
        try:
            scenario = build_scenario(
                self.spec,
                self.bindings,
                path,
                template_index=template_index,
                assignment=self.build_env(env),
            )
        except (Unsatisfiable, AgentPropError, KeyError) as exc:
            return None, f"path {path.id} cannot be built: {exc}"
        if extra_overrides:
            scenario = scenario.model_copy(deep=True)
            for tool, fields in extra_overrides.items():
                scenario.world.overrides.setdefault(tool, {}).update(dict(fields))
        return scenario, None


def choose_branch(
    spec: Spec, bindings: Bindings, node: str, assignment: Mapping[str, Any]
) -> BranchChoice:
    """The branch ``node`` takes for ``assignment``: its ``when`` clauses evaluated in order,
    first match wins, with variables the assignment lacks at their defaults (see
    :class:`BranchChoice` for ``internal`` ones)."""
    spec, bindings = check_spec_bindings(spec, bindings, "choose_branch")
    check_node(spec, node, "choose_branch", allow_none=False)
    assert node is not None
    try:
        return Context(spec, bindings).choose(node, dict(assignment), {})
    except _WalkStop as exc:
        raise Unsatisfiable(str(exc)) from None


def walk(spec: Spec, bindings: Bindings, assignment: Mapping[str, Any]) -> Route:
    """The route ``assignment`` takes through the tree from the root (see :class:`Route`)."""
    spec, bindings = check_spec_bindings(spec, bindings, "walk")
    return Context(spec, bindings).walk(assignment)[0]


# ----------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class _Free:
    """A numeric variable :func:`worlds` may move, with its grid."""

    name: str
    num: NumericField
    default: int | float

    def at(self, k: int) -> int | float:
        return self.num.norm(self.default + k * self.num.step)


def _direct_thresholds(
    name: str, exprs: Sequence[Expr], env: Mapping[str, Any]
) -> list[float] | None:
    """Values of the other side of every comparison ``name OP e`` in ``exprs``; ``None`` if
    ``name`` appears in a form this analysis does not solve (inside arithmetic, ...)."""
    out: list[float] = []

    def walk_(e: Expr) -> bool:
        if isinstance(e, (And, Or)):
            return all(walk_(i) for i in e.items)
        if isinstance(e, Not):
            return walk_(e.item)
        if name not in variables(e):
            return True
        if not isinstance(e, Compare):
            return False
        for side, other in ((e.left, e.right), (e.right, e.left)):
            if isinstance(side, VarPath) and side.dotted == name and name not in variables(other):
                try:
                    t = numeric_value(other, env)
                except UnboundVariable:
                    return False
                if is_number(t):
                    out.append(float(t))
                    return True
                return t is None or isinstance(t, str)
        return False

    return out if all(walk_(e) for e in exprs) else None


def _k_interval(
    free: _Free, exprs: Sequence[Expr], env: Mapping[str, Any], max_steps: int, ctx: Context
) -> tuple[int, int] | None:
    """The integers ``k`` around 0 for which every expression holds with ``free`` at
    ``free.at(k)`` (others as in ``env``); ``None`` if it cannot be analysed."""
    thresholds = _direct_thresholds(free.name, exprs, env)
    if thresholds is None:
        return None
    num, step = free.num, free.num.step
    kmin, kmax = -max_steps, max_steps
    if num.lo is not None:
        kmin = max(kmin, math.ceil((num.lo - free.default) / step - 1e-9))
    if num.hi is not None:
        kmax = min(kmax, math.floor((num.hi - free.default) / step + 1e-9))
    if kmin > 0 or kmax < 0:
        return (0, 0)
    probes = {kmin, kmax, 0}
    for t in thresholds:
        kt = (t - free.default) / step
        for k in (math.floor(kt) - 1, math.floor(kt), math.ceil(kt), math.ceil(kt) + 1):
            if kmin <= k <= kmax:
                probes.add(k)
    ordered = sorted(probes)

    def ok(k: int) -> bool:
        e = dict(env)
        e[free.name] = free.at(k)
        try:
            return all(ctx.truth(x, e) for x in exprs)
        except (UnboundVariable, TypeError, _WalkStop):
            return False

    # between consecutive probes the truth of every comparison is constant (no threshold lies
    # strictly inside a gap), so checking each probe and one point per gap is exact
    i0 = ordered.index(0)
    hi = 0
    for a, b in zip(ordered[i0:], ordered[i0 + 1 :]):
        if b - a > 1 and not ok(a + 1):
            hi = a
            break
        if not ok(b):
            hi = b - 1
            break
        hi = b
    lo = 0
    rev = ordered[: i0 + 1][::-1]
    for a, b in zip(rev, rev[1:]):
        if a - b > 1 and not ok(a - 1):
            lo = a
            break
        if not ok(b):
            lo = b + 1
            break
        lo = b
    return (lo, hi)


# ----------------------------------------------------------------------------- worlds


@dataclass
class _Alternative:
    index: int
    path: TreePath
    env: dict[str, Any]
    exprs: list[Expr]
    free: list[_Free]
    fixed: dict[str, str]


@dataclass
class _WorldPlan:
    ctx: Context
    path_id: str
    alternatives: list[_Alternative]
    max_steps: int


def _plan_worlds(
    spec: Spec, bindings: Bindings, path: object, max_steps: int, where: str
) -> _WorldPlan:
    ctx = Context(spec, bindings)
    paths = resolve_path(spec, path, where)
    alternatives: list[_Alternative] = []
    reasons: list[str] = []
    for p in paths:
        try:
            env = solve(spec, bindings, p)
            build_scenario(spec, bindings, p, assignment=env)
        except (Unsatisfiable, AgentPropError) as exc:
            reasons.append(f"{p.describe()}: {exc}")
            continue
        exprs = [c.as_expr() for c in p.constraints()]
        free: list[_Free] = []
        fixed: dict[str, str] = {}
        for name, var in bindings.variables.items():
            num = ctx.numeric(name)
            if num is None or var.world is None or var.world.field is None:
                continue
            value = env.get(name, ctx.default(name))
            if not is_number(value):
                fixed[name] = f"its default value is {value!r}, not a number"
                continue
            f = _Free(name, num, value)
            if _direct_thresholds(name, exprs, {**env, name: value}) is None:
                fixed[name] = (
                    "it appears in a condition this solver does not invert (inside arithmetic)"
                )
                continue
            env.setdefault(name, value)
            free.append(f)
        alternatives.append(_Alternative(len(alternatives), p, env, exprs, free, fixed))
    if not alternatives:
        raise Unsatisfiable(
            f"{where}: no assignment realises path {paths[0].id} of spec {spec.spec_id}:\n  "
            + "\n  ".join(reasons)
        )
    return _WorldPlan(ctx, paths[0].id, alternatives, max_steps)


def _draw_world(
    draw: Callable[[SearchStrategy[Any]], Any], plan: _WorldPlan
) -> tuple[PathWorld, _Alternative]:
    from hypothesis import strategies as st

    n = len(plan.alternatives)
    alt = plan.alternatives[draw(st.integers(0, n - 1)) if n > 1 else 0]
    env = dict(alt.env)
    offsets: dict[str, int] = {}
    fixed = dict(alt.fixed)
    for f in alt.free:
        interval = _k_interval(f, alt.exprs, env, plan.max_steps, plan.ctx)
        if interval is None:
            fixed[f.name] = "its interval could not be computed"
            continue
        lo, hi = interval
        k = draw(st.integers(lo, hi)) if lo < hi else lo
        env[f.name] = f.at(k)
        offsets[f.name] = k
    scenario = build_scenario(
        plan.ctx.spec, plan.ctx.bindings, alt.path, assignment=plan.ctx.build_env(env)
    )
    world = PathWorld(
        path_id=alt.path.id,
        tree_path=alt.path.describe(),
        alternative=alt.index,
        assignment=env,
        defaults={f.name: f.default for f in alt.free},
        offsets=offsets,
        fixed=fixed,
        world=scenario.world,
    )
    return world, alt


def worlds(
    spec: Spec, bindings: Bindings, path: PathLike, *, max_steps: int = 1000
) -> SearchStrategy[PathWorld]:
    """Worlds in which every condition along ``path`` holds, as :class:`PathWorld` values.

    Each numeric world field bound to a condition variable (``order.days_since_created``) is
    moved an integer number of grid steps (1, or the binding's ``precision``; at most
    ``max_steps``) away from the value :func:`~agentprop._scenario.build.solve` picks, inside the
    interval where the path's conditions still hold and within the field's ``min``/``max``
    and schema bounds. Shrinks towards the solved (default) world. Fields that only the
    bindings' base world sets are never moved: an abstract variable may depend on them.

    ``path`` is a :class:`~agentprop._spec.paths.TreePath` or a path id
    (``"END_CANCELLED<-N7_CANCEL"``); when several tree paths share the id, the one used is drawn (0
    = the first satisfiable). Raises :class:`~agentprop._scenario.build.Unsatisfiable` now if no
    assignment realises the path."""
    spec, bindings = check_spec_bindings(spec, bindings, "worlds")
    check_int(max_steps, "max_steps", "worlds", minimum=0)
    plan = _plan_worlds(spec, bindings, path, max_steps, "worlds")
    from hypothesis import note
    from hypothesis import strategies as st

    @st.composite
    def draw_world(draw: Callable[[SearchStrategy[Any]], Any]) -> PathWorld:
        world, _ = _draw_world(draw, plan)
        note(world.describe())
        return world

    return draw_world()


# ----------------------------------------------------------------------------- conversations


def _paraphrase_fn() -> Callable[..., SearchStrategy[Any]] | None:
    try:
        from agentprop.strategies._internal.paraphrase import paraphrases
    except ImportError:
        return None
    return paraphrases


def _template_count(ctx: Context, env: Mapping[str, Any]) -> int:
    for name, value in env.items():
        var = ctx.var(name)
        if var is not None and var.utterance is not None:
            for k, templates in var.utterance.items():
                if same_value(k, value):
                    return max(1, len(templates))
    return max(1, len(ctx.bindings.utterances))


def conversations(
    spec: Spec,
    bindings: Bindings,
    path: PathLike,
    *,
    paraphrase: bool | None = None,
    lang: str = "en",
    max_transforms: int = 2,
    max_steps: int = 1000,
) -> SearchStrategy[DrawnScenario]:
    """Scenarios realising ``path``, as :class:`DrawnScenario` values.

    Draws the world as :func:`worlds` does, then a template index (0 = the first template the
    bindings list for the path's utterance variable, or ``utterances:``; follow-up turns use the
    same index, as :func:`~agentprop._scenario.build.build_scenario` does), then -- when the
    paraphrase strategy is available (``paraphrase=None``) or asked for (``True``) -- paraphrases
    each user turn with up to ``max_transforms`` transforms, protecting every slot value. Shrinks
    towards template 0, the default world and the original wording.

    Raises :class:`~agentprop._scenario.build.Unsatisfiable` now if no assignment realises the path.
    """
    where = "conversations"
    spec, bindings = check_spec_bindings(spec, bindings, where)
    if paraphrase is not None and not isinstance(paraphrase, bool):
        raise InvalidArgument(
            f"{where}: paraphrase={paraphrase!r} must be True, False or None (use it if available)"
        )
    check_int(max_transforms, "max_transforms", where, minimum=0)
    check_int(max_steps, "max_steps", where, minimum=0)
    para = _paraphrase_fn() if paraphrase is not False else None
    if paraphrase is True and para is None:
        raise InvalidArgument(
            f"{where}: paraphrase=True but agentprop.strategies._internal.paraphrase cannot be "
            "imported; pass paraphrase=None to paraphrase only when it is available"
        )
    if para is not None and max_transforms > 0:
        try:
            para("probe", lang=lang, max_transforms=max_transforms)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}: {exc}") from None
    plan = _plan_worlds(spec, bindings, path, max_steps, where)
    cache: dict[tuple[str, tuple[str, ...], str], SearchStrategy[Any]] = {}

    def paraphrased(text: str, protect: tuple[str, ...], goal: str) -> SearchStrategy[Any]:
        # a follow-up turn (the user's answer) knows the conversation's goal, its first message:
        # what an input model in force (a simulated user) writes it from
        key = (text, protect, goal)
        if key not in cache:
            assert para is not None
            from agentprop.strategies._internal.paraphrase import turn_paraphrases

            cache[key] = turn_paraphrases(
                text,
                role="answer" if goal else "request",
                goal=goal,
                lang=lang,
                protect=list(protect),
                max_transforms=max_transforms,
            )
        return cache[key]

    from hypothesis import note
    from hypothesis import strategies as st

    @st.composite
    def draw_conversation(draw: Callable[[SearchStrategy[Any]], Any]) -> DrawnScenario:
        world, alt = _draw_world(draw, plan)
        n = _template_count(plan.ctx, world.assignment)
        template_index = draw(st.integers(0, n - 1)) if n > 1 else 0
        base = build_scenario(
            spec,
            bindings,
            alt.path,
            template_index=template_index,
            assignment=plan.ctx.build_env(world.assignment),
        )
        originals = [t.user_message for t in base.turns]
        steps: list[list[str]] = [[] for _ in base.turns]
        turns = [t.model_copy() for t in base.turns]
        if para is not None and max_transforms > 0:
            protect = tuple(
                sorted(
                    {str(v) for v in base.slots.values() if str(v).strip()},
                    key=lambda s: (-len(s), s),
                )
            )
            for i, t in enumerate(turns):
                present = tuple(x for x in protect if x in t.user_message)
                p = draw(paraphrased(t.user_message, present, originals[0] if i else ""))
                t.user_message = str(p)
                steps[i] = [str(s) for s in getattr(p, "transforms", ())]
        provenance = ConversationProvenance(
            path_id=alt.path.id,
            tree_path=alt.path.describe(),
            alternative=alt.index,
            template_index=template_index,
            world_offsets=world.offsets,
            original_messages=originals,
            paraphrase_steps=steps,
        )
        data = base.model_dump()
        data["turns"] = [t.model_dump() for t in turns]
        scenario = DrawnScenario(**data, provenance=provenance)
        note(provenance.describe())
        return scenario

    return draw_conversation()
