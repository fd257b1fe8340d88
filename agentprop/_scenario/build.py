"""Scenarios: a decision-tree path turned into a conversation, a world and expectations.

:func:`solve` finds values that make a path's conjunction true; :func:`build_scenario` realises
them through the bindings (messages, follow-ups, world overrides, injected failures) and states
per turn the decision and tools the spec expects. Comparisons on ``internal`` variables are
assumed to hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from agentprop._scenario.exits import exit_cut
from agentprop._scenario.solver import (
    LOOP_BOUNDARY,
    base_name,
    condition_budget,
    instance_keys,
    instance_name,
    lookup_value,
    solve,
)
from agentprop._scenario.world import Failure, World
from agentprop._spec.bindings import (
    Bindings,
    VariableBinding,
    fill_slots,
    node_tools,
    parse_field_path,
)
from agentprop._spec.free_spans import has_free, strip_free
from agentprop._spec.model import Spec, leaf_set, spec_memo
from agentprop._spec.paths import TreePath, enumerate_loop_paths, enumerate_paths
from agentprop._spec.relations import FieldPath, world_relations
from agentprop._spec.requirements import anchor_overlap
from agentprop._spec.retries import tree_retries
from agentprop._spec.when import (
    Expr,
    variables,
)
from agentprop._util.bulk import BulkModel
from agentprop._util.refs import load_ref
from agentprop.errors import (
    AgentPropError,
    BindingsError,
    SourceLocation,
    Unsatisfiable,  # noqa: F401 (re-exported: defined in errors.py)
)


class TemplateSource(BulkModel):
    """The template a turn's message was rendered from, and the slots it left out: what
    exploration renders again with other choices (optional segments, slot values)."""

    template: str
    withheld: tuple[str, ...] = ()


class ScenarioTurn(BulkModel):
    user_message: str
    marked: str | None = Field(default=None, exclude=True)
    """The message with its template's free spans still marked (``{~ ... ~}``), when the
    template has any: what token shrinking removes words from (:mod:`agentprop._spec.free_spans`).
    Not serialised: a scenario read back is its messages."""
    expect_decision: str | None = None
    also_allowed: list[str] = Field(default_factory=list)
    """Further decisions the spec allows on this turn (the bindings list several for the
    turn's leaf: ``outcomes: {LEAF<-VIA: [EXPECTED, OTHER]}``); left out of the JSON when empty."""
    required_tools: list[str] = Field(default_factory=list)
    """Tools the spec requires this turn, in order (a subsequence of the calls)."""
    allowed_tools: list[str] = Field(default_factory=list)
    """Tools the spec permits (but does not require) this turn."""
    nodes: list[str] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_empty_alternatives(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Scenarios written before alternatives existed serialise as they did."""
        out: dict[str, Any] = handler(self)
        if not self.also_allowed:
            out.pop("also_allowed", None)
        return out

    @property
    def allowed_decisions(self) -> list[str]:
        """The expected decision and the others the spec allows (empty: none expected)."""
        return (
            [self.expect_decision, *self.also_allowed] if self.expect_decision is not None else []
        )


class WorldSpec(BulkModel):
    """A world's configuration as data (so scenarios serialise and hash)."""

    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    failures: list[dict[str, Any]] = Field(default_factory=list)


class Scenario(BulkModel):
    id: str
    spec_id: str
    leaf: str
    via: str | None = None
    path: list[str]
    path_text: str = ""
    turns: list[ScenarioTurn]
    world: WorldSpec = Field(default_factory=WorldSpec)
    assignment: dict[str, Any] = Field(default_factory=dict)
    forbidden_tools: list[str] = Field(default_factory=list)
    slots: dict[str, Any] = Field(default_factory=dict)
    withheld: list[str] = Field(default_factory=list)
    branches: list[str] = Field(default_factory=list)
    """``NODE#k`` for each branch taken, for coverage."""
    capabilities: list[str] = Field(default_factory=list)
    clauses: list[str] = Field(default_factory=list)
    """Spec clauses this scenario checks (node requirements and policies it exercises)."""

    @property
    def messages(self) -> list[str]:
        return [t.user_message for t in self.turns]

    @property
    def expect_decision(self) -> str | None:
        return self.turns[-1].expect_decision if self.turns else None


def _is_internal(expr: Expr, bindings: Bindings) -> bool:
    names = variables(expr)
    return bool(names) and all(
        (b := bindings.variables.get(n)) is not None and b.internal for n in names
    )


# ----------------------------------------------------------------------------- realising

_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_OPTIONAL = re.compile(r"\[([^\[\]]*)\]")


def optional_segments(template: str) -> list[str]:
    """The ``[...]`` segments of ``template`` that hold no slot, in order: optional wording
    (``Cancel my order[, it's for a gift]``). A scenario's own message leaves them out;
    exploration puts them in (``segments=``)."""
    return [m.group(1) for m in _OPTIONAL.finditer(template) if not _SLOT.search(m.group(1))]


def render_template(
    template: str, slots: Mapping[str, Any], withheld: set[str], segments: Collection[int] = ()
) -> str | None:
    """Fill ``{slot}`` placeholders; drop ``[...]`` segments that hold a withheld slot; drop the
    ``{~ ... ~}`` markers of free spans (their words stay).

    A segment that holds no slot is optional wording: it is dropped unless its index among
    such segments (see :func:`optional_segments`) is in ``segments``.

    Returns ``None`` when a withheld slot sits outside any optional segment (this template
    cannot express the withholding).
    """
    marked = render_marked(template, slots, withheld, segments)
    return None if marked is None else strip_free(marked)


def render_marked(
    template: str, slots: Mapping[str, Any], withheld: set[str], segments: Collection[int] = ()
) -> str | None:
    """:func:`render_template` with the free spans' markers kept."""
    slotless = iter(range(len(template)))

    def segment(m: re.Match[str]) -> str:
        body = m.group(1)
        names = _SLOT.findall(body)
        if not names:
            return body if next(slotless) in segments else ""
        return "" if any(s in withheld for s in names) else body

    text = _OPTIONAL.sub(segment, template)
    if any(s in withheld for s in _SLOT.findall(text)):
        return None
    text = _SLOT.sub(lambda m: str(slots[m.group(1)]), text)
    return re.sub(r"\s{2,}", " ", text).strip()


def _decision_for(name: str, spec: Spec) -> str | None:
    enum = spec.response_contract.decision_enum
    upper = name.upper()
    if upper in enum:
        return upper
    matches = [d for d in enum if upper in d]
    return matches[0] if len(matches) == 1 else None


def _path_of(field: str) -> FieldPath:
    try:
        return tuple(parse_field_path(field))
    except ValueError:
        return (field,)


def build_scenario(
    spec: Spec,
    bindings: Bindings,
    path: TreePath,
    *,
    template_index: int = 0,
    assignment: Mapping[str, Any] | None = None,
    extra_failures: list[dict[str, Any]] | None = None,
    sources: list[TemplateSource | None] | None = None,
) -> Scenario:
    """Realise ``path`` as a scenario (raises :class:`Unsatisfiable` or
    :class:`~agentprop.errors.BindingsError` when the bindings cannot express it).
    ``extra_failures`` are injected on top of the path's own (a retry scenario's first call).
    ``sources``, when given, receives per turn the template its message was rendered from
    (``None`` for a message that is no template's), for exploration to render again."""
    env = dict(assignment) if assignment is not None else solve(spec, bindings, path)
    slots = dict(bindings.slots)
    withheld: set[str] = set()
    overrides: dict[str, dict[str, Any]] = {t: dict(v) for t, v in bindings.world.items()}
    changed: set[tuple[str, FieldPath]] = set()
    failures: list[dict[str, Any]] = [dict(f) for f in extra_failures or []]
    templates: list[str] = list(bindings.utterances)
    primary: str | None = None

    boundary = env.get(LOOP_BOUNDARY)
    for name, value in env.items():
        if name == LOOP_BOUNDARY:
            continue
        if "@" in name:
            # a loop's second instance: world failures move to the second call here; new user
            # messages are made where the turns are split below
            _second_instance_world(bindings, name, value, failures)
            continue
        binding = bindings.variables[name]
        if binding.utterance is not None:
            try:
                templates = list(lookup_value(binding.utterance, value))
                primary = name
            except KeyError:
                raise Unsatisfiable(
                    f"variable {name!r} has no utterances for value {value!r}"
                ) from None
        elif binding.withhold is not None:
            try:
                withheld |= set(lookup_value(binding.withhold, value))
            except KeyError:
                raise Unsatisfiable(
                    f"variable {name!r} has no `withhold` entry for value {value!r}; "
                    "add it to the binding"
                ) from None
        elif binding.world is not None:
            w = binding.world
            if w.values is not None:
                try:
                    effect = lookup_value(w.values, value)
                except KeyError:
                    raise Unsatisfiable(
                        f"variable {name!r} has no world effect for value {value!r}; "
                        "add it under `values:`"
                    ) from None
                for f, v in effect.set.items():
                    overrides.setdefault(w.tool, {})[f] = v
                    changed.add((w.tool, _path_of(f)))
                if effect.failure is not None:
                    calls = effect.calls
                    if instance_name(name) in env:
                        # the loop's second visit has its own instance: this one is call 1's
                        calls = list(calls) if calls is not None else [1]
                    failures.append({"tool": w.tool, "mode": effect.failure, "calls": calls})
            elif w.field is not None:
                overrides.setdefault(w.tool, {})[w.field] = value
                changed.add((w.tool, _path_of(w.field)))
    if path.missing is not None:
        withheld |= set(path.missing.fields)
    if not templates:
        raise Unsatisfiable(
            f"path {path.id}: no first user message; bind an utterance variable on the path or "
            "add `utterances:` defaults to the bindings file"
        )
    first: str | None = None
    first_source: TemplateSource | None = None
    order = (
        templates[template_index % len(templates) :] + templates[: template_index % len(templates)]
    )
    for template in order:
        first = render_marked(template, slots, withheld)
        if first is not None:
            first_source = TemplateSource(template=template, withheld=tuple(sorted(withheld)))
            break
    if first is None:
        raise Unsatisfiable(
            f"path {path.id}: no template of {primary or 'utterances'} can leave out "
            f"{', '.join(sorted(withheld))}; wrap those slots in [ ... ] optional segments"
        )
    overrides = {tool: fill_slots(fields, slots) for tool, fields in overrides.items()}
    if changed:
        # a field the path sets re-derives the fields related to it (a date from its days)
        overrides = world_relations(bindings).reconcile(overrides, changed)

    # split the path into turns: a follow-up variable or an `after X` clause starts a new turn
    # (on a loop path, so does a second instance of an utterance or follow-up variable)
    constraints = path.constraints(boundary) if isinstance(boundary, str) else path.constraints()
    keys = instance_keys(constraints)
    looping = path.loop_step is not None
    turns: list[ScenarioTurn] = [ScenarioTurn(user_message=first)]
    turn_sources: list[TemplateSource | None] = [first_source]
    turn_nodes: list[list[str]] = [[]]
    turn_steps: list[list[int | None]] = [[]]
    entered_internally: set[str] = set()
    followups_done: set[str] = set()
    for si, step in enumerate(path.steps):
        node_constraints = [c for c in constraints if c.step == si and (looping or not c.negated)]
        new_turn: tuple[str, str | None, TemplateSource | None] | None = None
        for c in node_constraints:
            for n in variables(c.expr):
                var = bindings.variables.get(n)
                key = keys.get((n, c.instance), n)
                if var is not None and var.followup is not None and key not in followups_done:
                    followups_done.add(key)
                    utterances = lookup_value(var.followup.values, env[key])
                    if utterances:
                        raw = utterances[template_index % len(utterances)]
                        text = render_marked(raw, slots, set())
                        new_turn = (
                            (text, var.followup.after_decision, TemplateSource(template=raw))
                            if text is not None
                            else (raw, var.followup.after_decision, None)
                        )
                    else:
                        # the conversation stops here: the agent's question is the last turn
                        turns[-1].expect_decision = var.followup.after_decision
                elif (
                    var is not None
                    and var.utterance is not None
                    and key != n
                    and key not in followups_done
                ):
                    followups_done.add(key)
                    new_turn = _second_message(
                        spec, path, step.node, var, env[key], slots, withheld, template_index
                    )
            if c.after is not None and new_turn is None and not c.negated:
                again_template = order[1 % len(order)]
                again = render_marked(again_template, slots, withheld)
                after_decision = _decision_for(c.after, spec)
                if after_decision is None:
                    raise Unsatisfiable(
                        f"cannot tell which decision `after {c.after}` means in {spec.spec_id}"
                    )
                if again is None:
                    new_turn = (first, after_decision, first_source)
                else:
                    new_turn = (
                        again,
                        after_decision,
                        TemplateSource(template=again_template, withheld=tuple(sorted(withheld))),
                    )
        if new_turn is not None:
            turns[-1].expect_decision = new_turn[1]
            turns.append(ScenarioTurn(user_message=new_turn[0]))
            turn_sources.append(new_turn[2])
            turn_nodes.append([])
            turn_steps.append([])
        turn_nodes[-1].append(step.node)
        turn_steps[-1].append(si)
        if _is_agent_choice(spec, bindings, step.node) and _skippable(spec, step.node, step.next):
            # the agent itself chooses between these branches (e.g. schema_needed) and another
            # choice bypasses this node: its tools are permitted, not required
            entered_internally.add(step.next)
    if path.missing is None:
        turn_nodes[-1].append(path.leaf)
        turn_steps[-1].append(None)

    # expectations per turn
    required_anywhere = _required_anywhere(spec, bindings)
    allowed_all: set[str] = set()
    leaves = leaf_set(spec)
    previous: list[str] = []  # what the node before on the path required: anchors repeat its tail
    visited: set[str] = set()
    # branches of this path that retry a tool after its failure (the tree's own retry): the
    # node that calls it again calls it from that tool on (a second call, not an anchor, and
    # not the tools before it, which did not fail), and the retry_policy adds none (one retry)
    on_path = {(st.node, st.branch) for st in path.steps}
    retries = [r for r in tree_retries(spec, bindings) if (r.node, r.branch) in on_path]
    retry_at = {(r.node, r.branch): r.tool for r in retries}
    pending: str | None = None
    for ti, nodes in enumerate(turn_nodes):
        req: list[str] = []
        allowed: list[str] = []
        for node_id, step_index in zip(nodes, turn_steps[ti]):
            tools = node_tools(spec, bindings, node_id)
            node = spec.nodes_by_id.get(node_id)
            if node is not None:
                allowed += node.requirements.may_call_tools
            if node_id in entered_internally:
                allowed += tools
                previous = []
                visited.add(node_id)
                continue
            taken = path.steps[step_index] if step_index is not None else None
            own = tools
            if taken is not None and taken.next in leaves:
                # the branch ends the conversation off the happy path: only the tools up to the
                # one whose output decided it are required; the rest are allowed
                cut = _deciding_tool_index(spec, bindings, node_id, taken, tools, env)
                if cut is not None:
                    own = tools[: cut + 1]
                    allowed += tools[cut + 1 :]
            if pending is not None and pending in own:
                req += own[own.index(pending) :]
                pending = None
            else:
                req += own[_anchor_length(bindings, node_id, previous, own, visited) :]
            if taken is not None and (taken.node, taken.branch) in retry_at:
                pending = retry_at[(taken.node, taken.branch)]
            previous = own
            visited.add(node_id)
        # a missing-field stop: the stopping node runs none of its own tools (it is not in
        # turn_nodes), but the nodes before it on the path keep their requirements, also for a
        # tool the stopping node lists too (an anchor): they ran before the stop
        turns[ti].required_tools = req
        turns[ti].allowed_tools = sorted(set(allowed))
        turns[ti].nodes = nodes
        allowed_all |= set(req) | set(allowed)
    forbidden = sorted(required_anywhere - allowed_all)
    for node_id in path.nodes:
        extra = bindings.nodes.get(node_id)
        if extra is not None:
            forbidden = sorted(set(forbidden) | set(extra.must_not_call))

    _add_retries(spec, turns, failures, {(r.tool, r.mode) for r in retries})
    limit = spec.max_tool_calls_per_turn
    for ti, t in enumerate(turns):
        if limit is not None and len(t.required_tools) > limit:
            raise Unsatisfiable(
                f"path {path.id} requires {len(t.required_tools)} tool calls in turn {ti + 1} "
                f"({', '.join(t.required_tools)}) but max_tool_calls_per_turn is {limit}: the spec "
                "cannot be satisfied on this path"
            )
    if path.missing is not None:
        turns[-1].expect_decision = path.missing.decision
    else:
        options = bindings.outcome_options(
            path.leaf, path.via, spec.response_contract.decision_enum
        )
        turns[-1].expect_decision = options[0] if options else None
        turns[-1].also_allowed = options[1:]

    for t in turns:
        if has_free(t.user_message):
            t.marked = t.user_message
        t.user_message = strip_free(t.user_message)
    capabilities = sorted(
        cap for cap, nodes in bindings.capabilities.items() if set(nodes) & set(path.nodes)
    )
    clauses = [f"decision_tree.{n}" for n in path.nodes if n in spec.nodes_by_id]
    if sources is not None:
        sources[:] = turn_sources
    return Scenario(
        id=path.id,
        spec_id=spec.spec_id,
        leaf=path.leaf,
        via=path.via,
        path=path.nodes,
        path_text=path.describe(),
        turns=turns,
        world=WorldSpec(overrides=overrides, failures=failures),
        assignment={k: v for k, v in env.items()},
        forbidden_tools=forbidden,
        slots=slots,
        withheld=sorted(withheld),
        branches=[f"{s.node}#{s.branch}" for s in path.steps],
        capabilities=capabilities,
        clauses=clauses,
    )


def _second_instance_world(
    bindings: Bindings, key: str, value: Any, failures: list[dict[str, Any]]
) -> None:
    """A world variable's second instance (a loop's second visit): its failure applies to the
    tool's second call (``calls:`` of the effect count from there)."""
    var = bindings.variables[base_name(key)]
    if var.world is None or var.world.values is None:
        return
    try:
        effect = lookup_value(var.world.values, value)
    except KeyError:
        raise Unsatisfiable(
            f"variable {base_name(key)!r} has no world effect for value {value!r}; "
            "add it under `values:`"
        ) from None
    if effect.failure is not None:
        calls = [c + 1 for c in effect.calls] if effect.calls is not None else [2]
        failures.append({"tool": var.world.tool, "mode": effect.failure, "calls": calls})


def _asking_decision(spec: Spec, node_id: str) -> str | None:
    """What the agent decides at ``node_id`` when it asks the user again (a loop's second
    visit starts with the user's answer): the decision of an ``after X`` suffix on one of the
    node's clauses, else the one its name implies (``N4_CLARIFY`` -> ``CLARIFY``)."""
    node = spec.nodes_by_id[node_id]
    for b in node.branches:
        if b.clause.after is not None:
            found = _decision_for(b.clause.after, spec)
            if found is not None:
                return found
    stem = re.sub(r"^N\d+[A-Z]?_", "", node_id)
    return _decision_for(stem, spec) if stem != node_id else None


def _second_message(
    spec: Spec,
    path: TreePath,
    node_id: str,
    var: VariableBinding,
    value: Any,
    slots: Mapping[str, Any],
    withheld: set[str],
    template_index: int,
) -> tuple[str, str | None, TemplateSource | None]:
    """The user's message that realises an utterance variable's second instance, and the
    decision the agent takes on the turn before it."""
    assert var.utterance is not None
    try:
        templates = list(lookup_value(var.utterance, value))
    except KeyError:
        raise Unsatisfiable(
            f"path {path.id}: variable has no utterances for value {value!r} on "
            "the loop's second visit"
        ) from None
    text = None
    source = None
    for t in (
        templates[template_index % len(templates) :] + templates[: template_index % len(templates)]
    ):
        text = render_marked(t, slots, withheld)
        if text is not None:
            source = TemplateSource(template=t, withheld=tuple(sorted(withheld)))
            break
    if text is None:
        raise Unsatisfiable(
            f"path {path.id}: no template for {value!r} can leave out {', '.join(sorted(withheld))}"
        )
    decision = _asking_decision(spec, node_id)
    if decision is None:
        raise Unsatisfiable(
            f"path {path.id} ({path.describe()}): cannot tell what the agent decides at {node_id} "
            "before the user's second message; add `after DECISION` to a clause of the node"
        )
    return text, decision, source


def _add_retries(
    spec: Spec,
    turns: list[ScenarioTurn],
    failures: list[dict[str, Any]],
    tree: Collection[tuple[str, str]] = (),
) -> None:
    """Require the retries a tool's ``retry_policy`` calls for: when an injected failure hits
    a required call with a mode the policy retries on, the agent must call the tool again (up
    to ``retries`` times while the failure lasts). The retries count against
    ``max_tool_calls_per_turn`` like any other call. ``tree``: ``(tool, mode)`` failures the
    path's own retry node retries (:mod:`agentprop._spec.retries`): that is the retry, the
    policy adds none."""
    counts: dict[str, int] = {}

    def failing(tool: str, n: int) -> str | None:
        for f in failures:
            if f["tool"] == tool and (not f.get("calls") or n in f["calls"]):
                return str(f["mode"])
        return None

    for turn in turns:
        out: list[str] = []
        for tool in turn.required_tools:
            counts[tool] = counts.get(tool, 0) + 1
            out.append(tool)
            policy = spec.tool(tool).retry_policy if tool in spec.tools_by_name else None
            left = policy.retries if policy is not None else 0
            mode = failing(tool, counts[tool])
            while (
                mode is not None
                and policy is not None
                and mode in policy.on
                and left > 0
                and (tool, mode) not in tree
            ):
                left -= 1
                counts[tool] += 1
                out.append(tool)
                mode = failing(tool, counts[tool])
        turn.required_tools = out


def _per_bindings(spec: Spec, bindings: Bindings) -> dict[str, Any]:
    """What :func:`build_scenario` derives from the whole tree, once per (spec, bindings)
    rather than once per scenario (which made a large spec's suite quadratic in its size). The
    bindings object is kept beside its entry, so a new one with a reused ``id`` misses."""
    memo: dict[int, tuple[Bindings, dict[str, Any]]] = spec_memo(spec).setdefault(
        "build_per_bindings", {}
    )
    found = memo.get(id(bindings))
    if found is None or found[0] is not bindings:
        found = memo[id(bindings)] = (bindings, {})
    return found[1]


def _required_anywhere(spec: Spec, bindings: Bindings) -> frozenset[str]:
    """The tools some node of the tree requires."""
    memo = _per_bindings(spec, bindings)
    found: frozenset[str] | None = memo.get("required_anywhere")
    if found is None:
        tools: set[str] = set()
        for node_id in [*(n.node_id for n in spec.decision_tree), *spec.leaf_ids()]:
            tools.update(node_tools(spec, bindings, node_id))
        found = memo["required_anywhere"] = frozenset(tools)
    return found


def _is_agent_choice(spec: Spec, bindings: Bindings, node_id: str) -> bool:
    """A node whose branches are two or more conditions on internal variables only."""
    memo: dict[str, bool] = _per_bindings(spec, bindings).setdefault("agent_choice", {})
    found = memo.get(node_id)
    if found is None:
        node = spec.nodes_by_id[node_id]
        internal = [
            b
            for b in node.branches
            if b.clause.expr is not None and _is_internal(b.clause.expr, bindings)
        ]
        found = memo[node_id] = len(node.branches) >= 2 and len(internal) == len(node.branches)
    return found


def _reachable(spec: Spec, start: str) -> set[str]:
    seen = {start}
    frontier = [start]
    while frontier:
        node = spec.nodes_by_id.get(frontier.pop())
        for b in node.branches if node is not None else []:
            if b.next not in seen:
                seen.add(b.next)
                frontier.append(b.next)
    return seen


def _skippable(spec: Spec, choice: str, target: str) -> bool:
    """Whether some other branch of ``choice`` leads on without passing through ``target``."""
    others = [b.next for b in spec.nodes_by_id[choice].branches if b.next != target]
    return any(target not in _reachable(spec, o) for o in others)


def _deciding_tool_index(
    spec: Spec,
    bindings: Bindings,
    node_id: str,
    step: Any,
    tools: list[str],
    env: Mapping[str, Any],
) -> int | None:
    """The index of the last tool a branch to a terminal node requires, when the value it took
    leaves the happy path (see :func:`agentprop._spec.requirements.exit_cut`);
    ``None``: all required."""
    cut = exit_cut(spec, bindings, node_id, step.branch, tools, env)
    return cut.index if cut is not None else None


def _anchor_length(
    bindings: Bindings, node_id: str, previous: list[str], tools: list[str], visited: set[str]
) -> int:
    """How many leading tools of ``node_id``'s list are ordering anchors on the node before it
    (one call, already required); a revisited node (a loop) repeats its calls."""
    if node_id in visited:
        return 0
    extra = bindings.nodes.get(node_id)
    return anchor_overlap(previous, tools, extra.repeat_calls if extra is not None else ())


class PathProblem(BaseModel):
    """A path (or a retry scenario) that the spec and bindings cannot realise."""

    code: str = "P001"
    """``P001``: an unrealisable tree path; ``P002``: a tool's retry cannot be checked; ``P005``:
    two cases of one conversation and world that expect different things (a spec contradiction)."""
    path_id: str
    nodes: list[str] = Field(default_factory=list)
    """The full node path (root first); loop paths name the re-entered node twice."""
    node: str | None = None
    """The node the finding points at in the spec (the last one the path decides at)."""
    reason: str
    fix: str

    @property
    def label(self) -> str:
        return {
            "P001": "unrealisable path",
            "P002": "retry not checked",
            "P003": "impossible paths",
            "P005": "contradictory cases",
        }.get(self.code, "problem")

    def render(self) -> str:
        """``LABEL: ID [N1 -> N2 -> ...]: reason; fix: ...`` (one line)."""
        where = " -> ".join(self.nodes)
        head = f"{self.label}: {self.path_id}" + (f" [{where}]" if where else "")
        return f"{head}: {self.reason}; fix: {self.fix}"


def _path_fix(reason: str) -> str:
    if "max_tool_calls_per_turn" in reason:
        return (
            "raise defaults.limits.max_tool_calls_per_turn, or split the work over turns in the "
            "tree; if the path cannot happen, leave it: the finding documents that the "
            "spec cannot be met there"
        )
    if "needs variable" in reason:
        return "bind the variable under `variables:` in the bindings file"
    if reason.startswith("no values"):
        return (
            "nothing to do if the conditions contradict each other (first-match-wins makes the "
            "path impossible); otherwise add the missing value to the variable's binding"
        )
    return "extend the bindings as the reason says"


def _problem(path: TreePath, exc: Exception) -> PathProblem:
    reason = str(exc)
    return PathProblem(
        path_id=path.id,
        nodes=path.nodes,
        node=path.steps[-1].node if path.steps else path.leaf,
        reason=reason,
        fix=_path_fix(reason),
    )


def leaf_scenarios(spec: Spec, bindings: Bindings) -> tuple[list[Scenario], list[str]]:
    """The scenarios ``agentprop run`` decides, and every unrealisable path as text (see
    :func:`scenarios_and_problems`)."""
    scenarios, problems = scenarios_and_problems(spec, bindings)
    return scenarios, [p.render() for p in problems]


def scenarios_and_problems(
    spec: Spec, bindings: Bindings
) -> tuple[list[Scenario], list[PathProblem]]:
    """The scenarios ``agentprop run`` decides.

    One per terminal node and the node it is entered from (``END_X<-N``), one per
    missing-field stop, and then more paths until every branch that some realisable path
    takes is covered (their ids add the branch: ``END_APPROVE<-N7_SUBMIT/N5_CALCULATE#1``).
    Loop paths (one loop unrolled once) come last, so loop branches are covered by them
    (``END_REFUSE_PII<-N1_INTENT/N4_CLARIFY#0``). Several tree paths can share a key
    (``N1 -> N2 -> N8`` through either intent); the first satisfiable one is used. Then one
    scenario per tool whose ``retry_policy`` retries a failure mode the tool declares: its first
    call fails that way and the agent must retry (``.../cancel_order:timeout+retry``).

    Returns ``(scenarios, problems)``: every path that cannot be realised is reported with
    its full node path and the reason (also when another path realises its key), never
    silently skipped.
    """
    with condition_budget(spec):
        return _scenarios_and_problems(spec, bindings)


def _scenarios_and_problems(
    spec: Spec, bindings: Bindings
) -> tuple[list[Scenario], list[PathProblem]]:
    out: list[Scenario] = []
    failed: dict[str, list[PathProblem]] = {}

    def attempt(path: TreePath) -> Scenario | None:
        """The scenario of ``path``, or ``None`` with why it cannot be realised
        kept in ``failed``."""
        try:
            return build_scenario(spec, bindings, path)
        except Unsatisfiable as exc:
            failed.setdefault(path.id, []).append(_problem(path, exc))
            return None

    done: set[str] = set()
    built: list[tuple[Scenario, TreePath]] = []
    pending: list[TreePath] = []
    for path in enumerate_paths(spec):
        key = path.id
        if key in done:
            pending.append(path)
            continue
        if (scenario := attempt(path)) is None:
            continue
        done.add(key)
        out.append(scenario)
        built.append((scenario, path))
    covered = {b for sc in out for b in sc.branches}
    for path in pending:
        new = [f"{s.node}#{s.branch}" for s in path.steps if f"{s.node}#{s.branch}" not in covered]
        if not new:
            continue
        if (scenario := attempt(path)) is None:
            continue
        scenario.id = f"{path.id}/{new[0]}"
        covered |= set(scenario.branches)
        out.append(scenario)
        built.append((scenario, path))
    # each loop unrolled once, for every way the second visit can go on
    exits: set[str] = set()
    for path in enumerate_loop_paths(spec):
        exit_key = _loop_exit(path)
        if exit_key in exits:
            continue
        if (scenario := attempt(path)) is None:
            continue
        exits.add(exit_key)
        scenario.id = f"{path.id}/{exit_key}"
        covered |= set(scenario.branches)
        out.append(scenario)
        built.append((scenario, path))
    realised = {sc.id.split("/", 1)[0] for sc in out}
    problems: list[PathProblem] = []
    contradictions = 0
    for key, group in failed.items():
        other_reason = any(not pr.reason.startswith("no values") for pr in group)
        shown_for_key = False
        for pr in group:
            if pr.reason.startswith("no values"):
                if (
                    other_reason
                    or shown_for_key
                    or (key in realised and not _takes_uncovered(spec, pr, covered))
                ):
                    # first-match-wins makes this tree path impossible; the key is realised by
                    # another path, or its real obstacle is reported
                    contradictions += 1
                    continue
                shown_for_key = True
            problems.append(pr)
    if contradictions:
        problems.append(
            PathProblem(
                code="P003",
                path_id="(contradictory paths)",
                reason=(
                    f"{contradictions} more tree path(s) are impossible (their conditions exclude "
                    "each other under first-match-wins, e.g. intent routed one way and read as "
                    "another); each one's key is realised by another path or its "
                    "real obstacle is listed"
                ),
                fix="nothing to do",
            )
        )
    retries, retry_problems = retry_scenarios(spec, bindings, built)
    out += retries
    out, clashes = drop_contradictions(spec, out, bindings)
    retry_problems += clashes
    # one finding per (key, reason): tree paths that share a key and fail for the same reason
    # (the same calls over the limit) are one problem, not one line each
    unique: dict[tuple[str, str, str], PathProblem] = {}
    for pr in problems + retry_problems:
        unique.setdefault((pr.code, pr.path_id, pr.reason), pr)
    return out, list(unique.values())


def _conflict(a: Scenario, b: Scenario) -> str | None:
    """What two scenarios of one world expect differently on the turns where their
    conversations are the same so far (the agent cannot know what comes next), or ``None``."""
    same = 0
    for ma, mb in zip(a.messages, b.messages):
        if ma != mb:
            break
        same += 1
    for i in range(same):
        ta, tb = a.turns[i], b.turns[i]
        last = i == len(a.turns) - 1 or i == len(b.turns) - 1
        # one decision both allow satisfies both: not a contradiction
        disjoint = not set(ta.allowed_decisions) & set(tb.allowed_decisions)
        if (
            ta.expect_decision != tb.expect_decision
            and disjoint
            and not (last and None in (ta.expect_decision, tb.expect_decision))
        ):
            return f"turn {i + 1}: decision {ta.expect_decision} vs {tb.expect_decision}"
        if ta.required_tools != tb.required_tools:
            return (
                f"turn {i + 1}: calls {', '.join(ta.required_tools) or 'none'} vs "
                f"{', '.join(tb.required_tools) or 'none'}"
            )
    if same == len(a.turns) == len(b.turns):
        required_a = {t for turn in a.turns for t in turn.required_tools}
        required_b = {t for turn in b.turns for t in turn.required_tools}
        clash = sorted(
            (required_a & set(b.forbidden_tools)) | (required_b & set(a.forbidden_tools))
        )
        if clash:
            return f"{', '.join(clash)} required by one and forbidden by the other"
    return None


def _internal_only(spec: Spec, a: Scenario, b: Scenario, bindings: Bindings) -> bool:
    """Whether the branch where ``a``'s path parts from ``b``'s reads an ``internal`` variable
    (assumed, never realised): nothing in the conversation or world can make the agent take it."""
    for x, y in zip(a.branches, [*b.branches, *([""] * len(a.branches))]):
        if x == y:
            continue
        node, _, k = x.partition("#")
        branch = spec.nodes_by_id[node].branches[int(k)] if node in spec.nodes_by_id else None
        return branch is not None and any(
            (var := bindings.variables.get(name)) is not None and var.internal
            for name in variables(branch.clause)
        )
    return False


def _clauses(spec: Spec, a: Scenario, b: Scenario) -> str:
    """The clauses of ``a`` that ``b`` does not share: the branch where their paths part
    (``decision_tree.N1.branches[2] `when```) and any tool ``retry_policy`` only ``a`` reads."""
    out = []
    for x, y in zip(a.branches, [*b.branches, *([""] * len(a.branches))]):
        if x != y:
            node, _, k = x.partition("#")
            when = spec.nodes_by_id[node].branches[int(k)].when if node in spec.nodes_by_id else ""
            out.append(f"decision_tree.{node}.branches[{k}] `{when}`")
            break
    out += [c for c in a.clauses if c.startswith("tools.") and c not in b.clauses]
    return ", ".join(out) or a.id


def drop_contradictions(
    spec: Spec, scenarios: list[Scenario], bindings: Bindings
) -> tuple[list[Scenario], list[PathProblem]]:
    """Pairs of scenarios of one world whose conversations agree up to a turn where they
    expect different things (:func:`_conflict`): no agent can pass both, so each pair is a spec
    error (P005) citing the clauses that differ, never a case an agent fails. The scenario that
    differs only by an ``internal`` variable's assumed value is dropped (nothing realises it);
    otherwise both are."""
    groups: dict[str, list[Scenario]] = {}
    for sc in scenarios:
        key = json.dumps(sc.world.model_dump(mode="json"), sort_keys=True, default=str)
        groups.setdefault(key, []).append(sc)
    out: list[PathProblem] = []
    dropped: set[int] = set()
    for group in groups.values():
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if id(a) in dropped or id(b) in dropped:
                    continue
                why = _conflict(a, b)
                if why is None:
                    continue
                a_assumed, b_assumed = (
                    _internal_only(spec, a, b, bindings),
                    _internal_only(spec, b, a, bindings),
                )
                if a_assumed != b_assumed:
                    dropped.add(id(a) if a_assumed else id(b))
                else:
                    dropped |= {id(a), id(b)}
                out.append(
                    PathProblem(
                        code="P005",
                        path_id=f"{a.id} vs {b.id}",
                        nodes=[],
                        node=a.path[-1] if a.path else None,
                        reason=(
                            "the two cases have the same world and conversation so far but "
                            f"expect different things ({why}): {_clauses(spec, a, b)} against "
                            f"{_clauses(spec, b, a)}; no agent can pass both"
                            + (
                                f"; {(a if a_assumed else b).id} is dropped: it differs only by "
                                "an internal variable's assumed value"
                                if a_assumed != b_assumed
                                else "; both are dropped"
                            )
                        ),
                        fix=(
                            "make the clauses describe one behaviour: if they describe the same "
                            "retry or step, say it once (in the tree or in the tool's "
                            "retry_policy); give the cases different worlds or messages in the "
                            "bindings; a branch on a variable nothing can realise (bound "
                            "`internal`) needs a source"
                        ),
                    )
                )
    return [sc for sc in scenarios if id(sc) not in dropped], out


def _loop_exit(path: TreePath) -> str:
    """``LOOP#k>NODE#j``: the loop branch a loop path takes and how the re-entered node goes
    on on its second visit (``>NODE:stop`` when it stops there for missing fields)."""
    i = path.loop_step
    assert i is not None
    loop = path.steps[i]
    after = path.steps[i + 1] if i + 1 < len(path.steps) else None
    return f"{loop.node}#{loop.branch}>" + (
        f"{after.node}#{after.branch}" if after is not None else f"{path.leaf}:stop"
    )


def _takes_uncovered(spec: Spec, problem: PathProblem, covered: set[str]) -> bool:
    """Whether a failed path runs through a node branch no scenario covers (by its nodes)."""
    nodes = problem.nodes
    for a, b in zip(nodes, nodes[1:]):
        node = spec.nodes_by_id.get(a)
        if node is None:
            continue
        ks = [f"{a}#{k}" for k, br in enumerate(node.branches) if br.next == b]
        if ks and not any(k in covered for k in ks):
            return True
    return False


def retry_scenarios(
    spec: Spec, bindings: Bindings, built: list[tuple[Scenario, TreePath]]
) -> tuple[list[Scenario], list[PathProblem]]:
    """For each tool whose ``retry_policy`` retries (``retries >= 1``) a failure mode it
    declares: the first scenario that requires the tool, with its first call failing in that
    mode (a timeout when the policy retries timeouts). The retry is required, counted against
    ``max_tool_calls_per_turn``; a tool whose retry fits no scenario is reported (P002)."""
    out: list[Scenario] = []
    problems: list[PathProblem] = []
    # a failure the tree itself retries is tested by the tree's path: the policy describes the
    # same retry, so no second case (it would expect the same calls of the same world)
    by_tree = {(r.tool, r.mode) for r in tree_retries(spec, bindings) if r.policy_too(spec)}
    for tool in spec.tools:
        policy = tool.retry_policy
        modes = [
            m
            for m in (policy.on if policy is not None else [])
            if m in tool.failure_modes and (tool.name, m) not in by_tree
        ]
        if policy is None or policy.retries < 1 or not modes:
            continue
        mode = "timeout" if "timeout" in modes else modes[0]
        reasons: list[str] = []
        candidates = [
            (sc, p)
            for sc, p in built
            if any(tool.name in t.required_tools for t in sc.turns)
            and not any(f["tool"] == tool.name for f in sc.world.failures)
        ]
        for base, path in candidates:
            try:
                scenario = build_scenario(
                    spec,
                    bindings,
                    path,
                    assignment=base.assignment,
                    extra_failures=[{"tool": tool.name, "mode": mode, "calls": [1]}],
                )
            except Unsatisfiable as exc:
                reasons.append(f"{base.id}: {exc}")
                continue
            scenario.id = f"{base.id}/{tool.name}:{mode}+retry"
            scenario.clauses = [*scenario.clauses, f"tools.{tool.name}.retry_policy"]
            out.append(scenario)
            break
        else:
            if candidates:
                reason = (
                    f"the retry its retry_policy requires after a {mode} fits no scenario: "
                    + "; ".join(reasons)
                )
            else:
                reason = (
                    "no scenario requires the tool (it is only permitted where it appears), so "
                    "no first call can fail"
                )
            problems.append(
                PathProblem(
                    code="P002",
                    path_id=f"{tool.name}:{mode}+retry",
                    reason=f"tool {tool.name}'s retry_policy (retries {policy.retries} on "
                    f"{', '.join(policy.on)}) is not checked: {reason}",
                    fix=_path_fix(reason)
                    if candidates
                    else "require the tool on a node (must_call_tools_in_order) if its "
                    "retry should be tested",
                )
            )
    return out, problems


# ----------------------------------------------------------------------------- worlds


def load_object(
    ref: str, base_dir: Path, *, what: str = "object", dirs: Sequence[Path] = ()
) -> Any:
    """Import ``MODULE:ATTR`` or ``FILE:ATTR`` (``MODULE`` may be a file next to the bindings,
    e.g. ``agent:make_agent`` or ``agent.py:make_agent`` for ``agent.py``); ``dirs`` are
    searched before ``base_dir`` (see :mod:`agentprop._util.refs`)."""
    return load_ref(ref, [*dirs, base_dir], what=what)


def base_world(spec: Spec, bindings: Bindings, *, seed: int = 0) -> World:
    return World(spec=spec, seed=seed, overrides={t: dict(v) for t, v in bindings.world.items()})


def make_world(
    spec: Spec, bindings: Bindings, scenario: Scenario | None, *, seed: int = 0, nonce: str = ""
) -> World:
    """A fresh world for one run of ``scenario``: overrides, failures, handlers, canaries."""
    handlers: dict[str, Any] = {}
    for tool, ref in bindings.handlers.items():
        factory = load_object(ref, bindings.base_dir, what=f"handler of {tool}")
        handlers[tool] = factory
    overrides = scenario.world.overrides if scenario is not None else bindings.world
    failures = [
        Failure(f["tool"], f["mode"], tuple(f["calls"]) if f.get("calls") else None)
        for f in (scenario.world.failures if scenario is not None else [])
    ]
    try:
        return World(
            spec=spec,
            seed=seed,
            overrides={t: dict(v) for t, v in overrides.items()},
            failures=failures,
            handlers=handlers,
            pii={t: list(v) for t, v in bindings.pii.items()},
            canary_nonce=nonce,
        )
    except AgentPropError as exc:
        raise BindingsError(str(exc), location=SourceLocation(bindings.path)) from None
