"""Shrinking a failing case: ``agentprop.oracle.shrink``.

The units are the case's choices and the world fields the scenario changed; injected failures
and the fields that realise the path are kept. Every candidate is rendered from choices, so it
is an instance of the same scenario; words are never deleted from a message. Each query is a
truncated sequential test against the failure's signature; the smallest confirmed reproducer
is held at all times and re-run with fresh trials at the end.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Collection, Sequence
from typing import Any

from agentprop._agents.loading import as_loaded_agent
from agentprop._agents.project import Project
from agentprop._agents.runtime import live_turns
from agentprop._decide.choices import (
    INJECTED,
    Choices,
    ChoiceSpace,
    ChoiceUnit,
    TurnChoice,
    choice_units,
    is_injected,
    keep_only,
    unit_label,
)
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import CheckResult, TrialRecord
from agentprop._decide.run_key import project_digest, run_digest
from agentprop._decide.session import current_session
from agentprop._decide.shrunk import OtherFailure, RateSummary, ShrinkReport, reconfirm
from agentprop._decide.verdicts import record_for
from agentprop._judge.case import Case, compile_mft
from agentprop._judge.judges import ModelJudge
from agentprop._judge.properties import Property, verdicts_of
from agentprop._modelapi.budget import Budget
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._scenario.world import get_path
from agentprop._shrink import Calibration, Outcome, Unit
from agentprop._shrink import shrink as shrink_units
from agentprop._spec.bindings import fill_slots
from agentprop._util.aio import run_sync
from agentprop.errors import InfrastructureError, InvalidArgument
from agentprop.strategies._internal.free_spans import spans_of
from agentprop.strategies._internal.paraphrase import Paraphrase


def _base_world(project: Project) -> dict[str, dict[str, Any]]:
    return {
        t: dict(v) for t, v in fill_slots(project.bindings.world, project.bindings.slots).items()
    }


def _changed_fields(project: Project, scenario: Scenario) -> list[tuple[str, str, Any]]:
    """``(tool, field, value)`` for each override the scenario sets beyond the base world
    (top-level keys; a dotted key such as ``orders[0].days_since_created`` is one field)."""
    base = _base_world(project)
    out = []
    for tool, fields in scenario.world.overrides.items():
        for key, value in fields.items():
            if key in base.get(tool, {}) and base[tool][key] == value:
                continue
            if key not in base.get(tool, {}) and ("." in key or "[" in key):
                try:
                    if get_path(base.get(tool, {}), key) == value:
                        continue  # a dotted override that restates the base world
                except (KeyError, IndexError, TypeError, ValueError):
                    pass
            out.append((tool, key, value))
    return out


def _path_bound(project: Project, scenario: Scenario) -> tuple[set[tuple[str, str]], set[str]]:
    """World fields and failing tools that realise the path's own conditions: the scenario's
    expectations rest on them, so they are never reset (resetting ``verified: false`` would
    make a correct agent "fail" the REFUSE_AUTH expectation)."""
    fields: set[tuple[str, str]] = set()
    failing: set[str] = set()
    for name in scenario.assignment:
        var = project.bindings.variables.get(name)
        if var is None or var.world is None:
            continue
        w = var.world
        if w.field is not None:
            fields.add((w.tool, w.field))
        for effect in (w.values or {}).values():
            fields.update((w.tool, f) for f in effect.set)
            if effect.failure is not None:
                failing.add(w.tool)
    return fields, failing


def _world_units(project: Project, scenario: Scenario) -> list[Unit[Any]]:
    bound, _ = _path_bound(project, scenario)
    units: list[Unit[Any]] = [
        Unit(("world", tool, key), protected=(tool, key) in bound, label=f"{tool}.{key}={value!r}")
        for tool, key, value in _changed_fields(project, scenario)
    ]
    for i, failure in enumerate(scenario.world.failures):
        # every injected failure defines the scenario: its expected calls (a retry the
        # tool's retry_policy or a retry node requires) and its route were compiled with it, so
        # a candidate without it would keep expectations it no longer implies
        units.append(
            Unit(
                ("failure", i),
                protected=True,
                label=f"{failure['tool']} fails with {failure['mode']}",
            )
        )
    return units


def _with_world(
    project: Project, candidate: Scenario, scenario: Scenario, kept: tuple[Unit[Any], ...]
) -> Scenario:
    """``candidate`` (rendered from the kept choices: the scenario's world plus the kept world
    choices) with the scenario's own world changes whose unit was removed reset to the base
    world, and the failures whose unit was removed dropped."""
    world_kept = {(u.value[1], u.value[2]) for u in kept if u.value[0] == "world"}
    failures_kept = {u.value[1] for u in kept if u.value[0] == "failure"}
    overrides = copy.deepcopy(candidate.world.overrides)
    base = _base_world(project)
    for tool, key, _ in _changed_fields(project, scenario):
        if (tool, key) in world_kept:
            continue
        if key in base.get(tool, {}):
            overrides[tool][key] = copy.deepcopy(base[tool][key])
        else:
            overrides[tool].pop(key, None)
    failures = [f for i, f in enumerate(candidate.world.failures) if i in failures_kept]
    world = candidate.world.model_copy(update={"overrides": overrides, "failures": failures})
    return candidate.model_copy(update={"world": world})


def free_word_units(scenario: Scenario, lang: str) -> list[Unit[Any]]:
    """The free spans of ``scenario``'s turns as units: span -> clauses -> words (the words
    the shrinker may remove; everything outside the spans is not a unit at all)."""
    out: list[Unit[Any]] = []
    for i, turn in enumerate(scenario.turns):
        if turn.marked is None:
            continue
        for s, span in enumerate(spans_of(turn.marked, lang)):
            clauses = tuple(
                Unit(
                    ("clause", i, s, c),
                    children=tuple(
                        Unit(("word", i, s, c, w), label=f"turn {i + 1}: {word.strip()!r}")
                        for w, word in enumerate(clause.words)
                    ),
                    label=f"turn {i + 1}: clause "
                    f"{clause.prefix.strip()}{''.join(clause.words).strip()!r}",
                )
                for c, clause in enumerate(span.clauses)
                if clause.words
            )
            if clauses:
                out.append(
                    Unit(
                        ("span", i, s),
                        children=clauses,
                        label=f"turn {i + 1}: free span {span.text!r}",
                    )
                )
    return out


def choices_of_messages(scenario: Scenario, messages: Sequence[str]) -> Choices | None:
    """The choices behind ``messages`` when each is the scenario's own message or a
    :class:`~agentprop.phrases.Paraphrase` of it (as ``aps.paraphrases`` draws them in a
    test); ``None`` when a message was written some other way."""
    turns = []
    lang = "en"
    for turn, message in zip(scenario.turns, messages):
        if (
            isinstance(message, Paraphrase)
            and message.original == turn.user_message
            and all(s.name != "pool" and ":" not in s.name for s in message.transforms)
        ):
            turns.append(
                TurnChoice(steps=tuple((s.name, tuple(s.params)) for s in message.transforms))
            )
            lang = message.lang
        elif str(message) == turn.user_message:
            turns.append(TurnChoice())
        else:
            return None
    return Choices(lang=lang, turns=tuple(turns))


def _turn_diffs(original: Sequence[str], kept_messages: Sequence[str]) -> list[str]:
    return [
        f"turn {i + 1}: {word_diff(a, b)}" for i, (a, b) in enumerate(zip(original, kept_messages))
    ]


def word_diff(before: str, after: str) -> str:
    """``[-removed-]`` words of ``before`` that ``after`` drops (and ``{+added+}`` ones)."""
    a, b = before.split(), after.split()
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.extend(a[i1:i2])
        if op in ("delete", "replace"):
            out.append("[-" + " ".join(a[i1:i2]) + "-]")
        if op in ("insert", "replace"):
            out.append("{+" + " ".join(b[j1:j2]) + "+}")
    return " ".join(out)


def shrink(
    project: Project,
    scenario: Scenario | str,
    agent: Any,
    *,
    messages: Sequence[str] | None = None,
    choices: Choices | None = None,
    prop: Property | None = None,
    failing: CheckResult | None = None,
    signature: str | None = None,
    budget: int = 200,
    verify_runs: int = 30,
    max_verify_runs: int = 300,
    memo: TrialMemo | None = None,
    session_budget: Budget | None = None,
    shrink_world: bool = True,
    seed: int = 0,
    space: ChoiceSpace | None = None,
    shrink_words: bool = True,
    suspects: Collection[str] = (),
) -> ShrinkReport:
    """Shrink a failing input of ``scenario`` (and its world) to a minimal reproducer.

    The input is ``choices`` (an explored input), or ``messages`` (each the scenario's own
    message or an ``aps.paraphrases`` draw of it; other text is kept as it is), or the
    scenario's own messages. ``failing`` is the :class:`CheckResult` that found the failure: its
    runs calibrate the reproduction rate for free, and its most frequent failure is the
    signature to chase (``signature`` overrides). ``budget`` caps the shrinker's runs exactly;
    ``verify_runs`` fresh runs of the reproducer follow, more (up to ``max_verify_runs``) when it
    stays clean and the original's rate says a failure would need more runs to show (a
    rare failure is not called gone after 30 clean runs). ``session_budget`` (the run's shared
    budget) is charged for every new run and can stop the shrinker early: the best reproducer
    confirmed so far is returned. A run that meets an error that is not the agent's (a cache
    miss in replay-only mode, no API key ...) stops the shrink with that
    :class:`~agentprop.errors.InfrastructureError`: nothing it ran is kept.

    After the choices (and the world), the words inside the templates' free spans
    (``{~ ... ~}``, :mod:`agentprop._spec.free_spans`) are shrunk in a second search that starts
    from the simplified input (``shrink_words=False`` skips it); the intent words and the
    slots, outside those spans, are in every candidate.

    ``suspects`` names choice families (``turn1:urgency``, ``template``) suspected of carrying
    the failure, such as those every failing input of the bug shares: the other choices are
    first offered for removal together (one cheap question when the suspicion is right, one
    wasted rule-out when it is not), then one at a time.
    """
    sc = project.scenario(scenario) if isinstance(scenario, str) else scenario
    if choices is not None and messages is not None:
        raise InvalidArgument("give the failing input as choices= or as messages=, not both")
    msgs = list(messages) if messages is not None else None
    if msgs is not None and len(msgs) != len(sc.turns):
        raise InvalidArgument(
            f"messages has {len(msgs)} turn(s) but scenario {sc.id} has {len(sc.turns)}"
        )
    if budget < 1:
        raise InvalidArgument(f"budget={budget} must be at least 1 run")
    kept_as_written = "the messages were given as fixed text"
    if choices is None and msgs is not None:
        choices = choices_of_messages(sc, msgs)
        if choices is not None and not choices.plain:
            # a paraphrase drawn from the text alone may change a word the scenario's facts
            # rest on (a slip in its intent word): the space does not render it, so shrinking
            # its steps would shrink another input; such a text is kept as written
            space = space or ChoiceSpace(project, sc)
            if [t.user_message for t in space.render(choices).turns] != [str(m) for m in msgs]:
                choices, space = None, None
                kept_as_written = (
                    "the messages are kept as written: a drawn step changed a word the "
                    "scenario's facts rest on, which its space never writes"
                )
    fixed_text = choices is None and msgs is not None
    if choices is not None and (not choices.plain or space is not None):
        space = space or ChoiceSpace(project, sc)
        original = space.render(choices)
    elif fixed_text:
        assert msgs is not None
        original = sc.model_copy(
            update={
                "turns": [
                    t.model_copy(update={"user_message": str(m)}) for t, m in zip(sc.turns, msgs)
                ]
            }
        )
    else:
        original = sc
    loaded = as_loaded_agent(agent)
    memo = memo if memo is not None else current_session().memo
    base_trial = seed * 1_000_003
    chased = signature or (
        failing.failures[0].signature if failing is not None and failing.failures else None
    )
    calibration = None
    if failing is not None and chased is not None:
        hits = next((f.count for f in failing.failures if f.signature == chased), 0)
        calibration = Calibration(runs=failing.runs, failures=hits, signature=chased)

    refused: dict[str, Any] = {"n": 0, "why": None}
    judge_calls = {"n": 0}
    grounding = project.bindings.response_grounding(project.spec)

    runtime = project_digest(project)

    compiled: dict[int, tuple[Scenario, Case]] = {}
    written_by: dict[int, tuple[Scenario, Choices]] = {}
    """The choices each candidate was rendered from (their simulated turns are written live)."""
    if choices is not None and space is not None:
        written_by[id(original)] = (original, choices)

    def case_of(candidate: Scenario) -> Case:
        """Each candidate is compiled once, however many runs judge it."""
        known = compiled.get(id(candidate))
        if known is None or known[0] is not candidate:
            known = compiled[id(candidate)] = (
                candidate,
                compile_mft(project.spec, candidate, grounding),
            )
        return known[1]

    def evaluate(candidate: Scenario, trial: int) -> TrialRecord | None:
        """The judged run, or None when the session budget refused to start it. A model judge's
        calls for it are added to ``judge_calls["n"]``."""
        digest = run_digest(project, candidate, candidate.messages, seed, project_key=runtime)
        key = memo.key(digest, loaded.fingerprint, base_trial + trial)
        trace = memo.get(key)
        if trace is None:
            if session_budget is not None and not session_budget.try_start_run():
                refused["n"] += 1
                if refused["why"] is None:
                    refused["why"] = (
                        session_budget.exhausted_reason or "the session budget is spent"
                    )
                return None
            held = written_by.get(id(candidate))
            token = live_turns.set(
                space.live_turns(held[1])
                if space is not None and held is not None and held[0] is candidate
                else None
            )
            try:  # a simulated user's turn is written live, as when the input was explored
                trace = memo.put(
                    key,
                    run_sync(
                        project.arun(
                            candidate,
                            loaded.factory,
                            trial=base_trial + trial,
                            agent_name=loaded.ref,
                        )
                    ),
                )
            finally:
                live_turns.reset(token)
            infra = trace.infrastructure_error
            if infra is not None:  # the run was not made: nothing to learn, nothing to keep
                raise InfrastructureError(f"shrinking stopped: {infra.message}", kind=infra.kind)
        if prop is None:
            rec = record_for(case_of(candidate).verdicts(trace))
        else:
            before = prop.calls if isinstance(prop, ModelJudge) else 0
            rec = record_for(verdicts_of(prop(trace)))
            judge_calls["n"] += (prop.calls - before) if isinstance(prop, ModelJudge) else 0
        if not rec.passed and (chased is None or rec.signature == chased):
            behaved.setdefault(id(candidate), (candidate, behaviour_of(trace, rec.turn)))
        return rec

    others: dict[str, OtherFailure] = {}
    behaved: dict[int, tuple[Scenario, list[str]]] = {}
    """Per candidate, what the agent did in its first run failing with the chased signature."""

    def run(candidate: Scenario, trial: int) -> Outcome:
        """One run; a model judge's calls for it spend the shrink budget like runs."""
        calls0 = judge_calls["n"]
        rec = evaluate(candidate, trial)
        calls = judge_calls["n"] - calls0
        if rec is None:  # not run: no evidence either way (never a pass)
            return Outcome.refused()
        if not rec.passed and chased is not None and rec.signature != chased:
            # a different failure: it does not count as "still fails"; kept, to be reported
            seen = others.setdefault(
                str(rec.signature),
                OtherFailure(
                    signature=str(rec.signature),
                    explanation=rec.explanation or "",
                    messages=candidate.messages,
                ),
            )
            seen.count += 1
        return Outcome.passed(calls) if rec.passed else Outcome.failure(rec.signature, calls)

    # the scenario itself (its intent, slots and path) is one protected unit: never removed
    choice_us: list[Unit[Any]] = (
        [Unit(("choice", cu), label=_choice_label(choices, cu)) for cu in choice_units(choices)]
        if choices is not None and not choices.plain
        else []
    )
    if choices is not None and suspects and choice_us:
        suspected = [u for u in choice_us if _unit_family(choices, u.value[1]) in set(suspects)]
        rest = [u for u in choice_us if u not in suspected]
        if suspected and rest:
            choice_us = [
                Unit(
                    ("group", "others"),
                    children=tuple(rest),
                    label="the choices the bug's other inputs do not share",
                ),
                Unit(
                    ("group", "suspects"),
                    children=tuple(suspected),
                    label="the choices every input of the bug shares",
                ),
            ]
    # the scenario's own world changes (an explored input's world choices are choice units)
    own_world = original if fixed_text or choices is None or choices.plain else sc
    world_units = _world_units(project, own_world) if shrink_world else []
    units = tuple([Unit(("scenario",), protected=True, label=sc.id), *choice_us, *world_units])
    kept_world_all = tuple(world_units)

    def build(kept: tuple[Unit[Any], ...]) -> Scenario:
        kept = _leaves(kept)
        if not shrink_world:
            kept = kept + kept_world_all
        candidate = original
        if choices is not None and (not choices.plain or space is not None):
            assert space is not None
            chosen = keep_only(choices, [u.value[1] for u in kept if u.value[0] == "choice"])
            candidate = _with_world(project, space.render(chosen), own_world, kept)
            written_by[id(candidate)] = (candidate, chosen)
            return candidate
        return _with_world(project, candidate, own_world, kept)

    result = shrink_units(
        units, run, budget=budget, build=build, signature=chased, calibration=calibration
    )
    reproducer: Scenario = result.reproducer
    kept_leaves = _leaves(result.units)
    kept_choices = (
        keep_only(choices, [u.value[1] for u in kept_leaves if u.value[0] == "choice"])
        if choices is not None
        else None
    )
    runs, queries, judged = result.runs, result.queries, result.judge_calls
    minimal, exhausted, stop_reason = result.minimal, result.budget_exhausted, result.stop_reason
    original_units, kept_units = result.original_leaves - 1, result.kept_leaves - 1
    other_signatures = {str(k): v for k, v in result.other_signatures.items()}
    final = result
    # then words, only inside the free spans of the simplified input's templates
    words = None
    if (
        shrink_words
        and not fixed_text
        and result.signature is not None
        and result.reproducer_rate is not None
        and result.reproducer_rate.failures
    ):
        space = space or ChoiceSpace(project, sc)
        start = kept_choices if kept_choices is not None else space.plain()
        word_units = free_word_units(space.base_for(start), start.lang)
        if word_units and budget - runs - judged > 0:
            world = reproducer.world
            every = {
                u.value for span in word_units for clause in span.children for u in clause.children
            }

            def build_words(kept: tuple[Unit[Any], ...]) -> Scenario:
                left = {
                    u.value for span in kept for clause in span.children for u in clause.children
                }
                dropped = tuple(sorted((w[1], w[2], w[3], w[4]) for w in every - left))
                return space.render(start.model_copy(update={"dropped": dropped})).model_copy(
                    update={"world": world}
                )

            rate = result.reproducer_rate
            words = shrink_units(
                word_units,
                run,
                budget=budget - runs - judged,
                build=build_words,
                signature=result.signature,
                calibration=Calibration(
                    runs=rate.runs, failures=rate.failures, signature=result.signature
                ),
            )
            left = {
                u.value for span in words.units for clause in span.children for u in clause.children
            }
            kept_choices = start.model_copy(
                update={"dropped": tuple(sorted((w[1], w[2], w[3], w[4]) for w in every - left))}
            )
            reproducer = words.reproducer
            runs += words.runs
            judged += words.judge_calls
            queries += words.queries
            minimal = minimal and words.minimal
            exhausted = exhausted or words.budget_exhausted
            stop_reason = f"choices: {result.stop_reason}; free words: {words.stop_reason}"
            original_units += len(every)
            kept_units += len(left)
            for k, v in words.other_signatures.items():
                other_signatures[str(k)] = other_signatures.get(str(k), 0) + v
            final = words
        elif word_units:  # the free words were never offered for removal: not shown minimal
            minimal = False
            stop_reason = (
                f"choices: {result.stop_reason}; free words: not checked (the shrink budget of "
                f"{budget} runs was spent on the choices)"
            )
    again = reconfirm(
        final,
        run,
        calibration,
        runs=verify_runs,
        max_runs=max_verify_runs,
        minimal=minimal,
        stop_reason=stop_reason,
    )
    minimal, stop_reason = again.minimal, again.stop_reason
    kept_labels = {u.describe() for u in kept_leaves if u.value[0] in ("world", "failure")}
    all_world = [u.describe() for u in world_units if not u.protected]
    orig = result.original_rate
    original_rate = RateSummary(
        failures=orig.failures, runs=orig.runs, rate=orig.rate, interval=orig.interval
    )
    if fixed_text and minimal:
        # the world may be minimal, the words were never offered for removal
        minimal = False
        stop_reason = f"the text is not shrunk ({kept_as_written}); {stop_reason}"
    return ShrinkReport(
        scenario=sc.id,
        signature=str(result.signature),
        original_messages=original.messages,
        reproducer_messages=reproducer.messages,
        reproducer=reproducer,
        world_reset=[w for w in all_world if w not in kept_labels],
        world_kept=[w for w in all_world if w in kept_labels],
        world_scenario=[u.describe() for u in world_units if u.protected],
        diff=_turn_diffs(sc.messages, reproducer.messages),
        original_units=original_units,
        kept_units=kept_units,
        runs=runs,
        judge_calls=judged,
        queries=queries,
        budget=budget,
        budget_exhausted=exhausted or refused["n"] > 0,
        minimal=minimal,
        stop_reason=stop_reason
        if not refused["n"]
        else f"the session budget refused {refused['n']} run(s); {stop_reason}",
        original_rate=original_rate,
        reproducer_rate=again.rate,
        verify_refused=again.refused,
        budget_spent=refused["why"] if refused["n"] else None,
        other_signatures=other_signatures,
        original_choices=choices.model_dump(mode="json") if choices is not None else None,
        reproducer_choices=kept_choices.model_dump(mode="json")
        if kept_choices is not None
        else None,
        reproducer_families=(
            space.families_in(kept_choices) if space is not None else kept_choices.families()
        )
        if kept_choices is not None
        else None,
        choices_kept=(
            kept_choices.describe()
            if kept_choices is not None and not kept_choices.plain
            else "none: the scenario's own wording fails"
        )
        if not fixed_text
        else kept_as_written,
        other_failures=sorted(others.values(), key=lambda o: (-o.count, o.signature)),
        behaviour=held[1]
        if (held := behaved.get(id(reproducer))) is not None and held[0] is reproducer
        else [],
    )


def behaviour_of(trace: Trace, through: int | None = None) -> list[str]:
    """What the agent did in one run, per turn up to the failing turn ``through`` (0-based;
    ``None``: every turn), without the words it or the user wrote: the tools it called (names,
    in order), the node and decision it reported, and errors by kind. Two inputs failing for
    one cause make the agent behave alike up to the failure, whatever their wording; what
    follows it depends on the path (a cancellation that then fails opens a ticket)."""
    out = []
    last = len(trace.turns) - 1 if through is None else through % max(len(trace.turns), 1)
    for t in trace.turns[: last + 1]:
        r = t.response or {}
        calls = ",".join(c.name for c in t.tool_calls)
        errors = ",".join(e.kind for e in t.errors)
        out.append(
            f"turn {t.index + 1}: calls [{calls}] node {r.get('node_id')} decision "
            f"{r.get('decision')}" + (f" errors [{errors}]" if errors else "")
        )
    out += [f"run error: {e.kind}" for e in trace.errors if through is None]
    return out


def _leaves(units: Sequence[Unit[Any]]) -> tuple[Unit[Any], ...]:
    """The leaf units of a (pruned) forest: groups stand for their children."""
    out: list[Unit[Any]] = []
    for u in units:
        out.extend(_leaves(u.children) if u.children else [u])
    return tuple(out)


def _unit_family(choices: Choices, unit: ChoiceUnit) -> str:
    """The family (as :meth:`Choices.families` names it) of one choice unit."""
    if unit.kind == "template":
        return "template"
    if unit.kind == "world":
        return INJECTED if is_injected(choices.world[unit.step].value) else "world"
    if unit.kind == "probe":
        return "probe:indirect"
    t = choices.turns[unit.turn]
    if unit.kind in ("written", "trait") and t.written is not None:
        return f"turn{unit.turn + 1}:{t.written.family_key}"
    family = (
        "segment"
        if unit.kind == "segment"
        else t.entities[unit.step].family
        if unit.kind == "entity"
        else t.steps[unit.step][0]
    )
    return f"turn{unit.turn + 1}:{family}"


def _choice_label(choices: Choices | None, unit: ChoiceUnit) -> str:
    if choices is None:
        return "template 0"
    return unit_label(choices, unit)
