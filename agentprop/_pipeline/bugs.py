"""One bug, one shrink: the failures of a run grouped into bugs.

A bug is keyed by its signature without the turn (:func:`bug_key`), a wrong decision by the node
where the turn left its path (:func:`divergence_key`). Each group is shrunk on its simplest case;
when explored inputs the reproducer does not explain (they lack a family it kept) failed with it
too, they are shrunk as well (at most :data:`MAX_CAUSES` shrinks), and reproducers that keep
disjoint causes split the group into one bug per cause (:func:`distinct_causes`). A corpus entry
that reproduced its own signature is not shrunk again. Another signature met while shrinking
never counts as "still fails"; it is noted, or reported unconfirmed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentprop._decide.choices import Choices, choice_units
from agentprop._decide.metamorphic import distribution_words
from agentprop._decide.shrink import behaviour_of
from agentprop._decide.shrunk import ShrinkReport
from agentprop._judge.signature import bug_id, bug_key
from agentprop._pipeline.kinds import SAFETY_CONTRACTS
from agentprop._pipeline.report.model import BugReport, CaseReport, FailureRate, RunReport
from agentprop._scenario.build import Scenario
from agentprop._shrink.query import wilson_interval

SHRINKABLE_KINDS = ("MFT", "EXPLORE", "PROBE", "BOUNDARY", "REGRESSION", "CORPUS", "JUDGE")


def rate_of(failures: int, runs: int) -> FailureRate:
    return FailureRate(
        failures=failures,
        runs=runs,
        rate=failures / runs if runs else 0.0,
        interval=wilson_interval(failures, runs) if runs else (0.0, 1.0),
    )


@dataclass
class Hit:
    """One case's failures with one bug's key."""

    case: CaseReport
    signature: str
    count: int
    explanation: str


@dataclass
class Group:
    key: str
    hits: list[Hit] = field(default_factory=list)

    @property
    def case_ids(self) -> list[str]:
        return list(dict.fromkeys(h.case.id for h in self.hits))


KeyOf = Callable[[CaseReport, str], str]
"""``(case, signature) -> bug key``."""


def group_failures(cases: list[CaseReport], key_of: KeyOf | None = None) -> list[Group]:
    """The bugs of the cases that did not pass, most cases first (then first seen); a
    failure's bug is ``key_of(case, signature)`` (default :func:`bug_key`)."""
    groups: dict[str, Group] = {}
    for case in cases:
        if case.verdict not in ("FAIL", "UNSTABLE"):
            continue
        for f in case.failures:
            key = key_of(case, f.signature) if key_of is not None else bug_key(f.signature)
            group = groups.setdefault(key, Group(key))
            same = next(
                (h for h in group.hits if h.case is case and h.signature == f.signature), None
            )
            if same is not None:
                same.count += f.count  # a DIR case lists the failures of both its sides
            else:
                group.hits.append(Hit(case, f.signature, f.count, f.explanation))
    if isinstance(key_of, DivergenceKey):
        _merge_forbidden_calls(groups, key_of)
    order = list(groups)
    return sorted(groups.values(), key=lambda g: (-len(g.case_ids), order.index(g.key)))


def _merge_decisions_on_one_branch(groups: dict[str, Group], key_of: DivergenceKey) -> None:
    """Wrong decisions that left the path at the same node into the same branch are one bug,
    whatever the branch then decided: an agent that skips a confirmation decides CHANGED where
    the change succeeds and CHANGE_FAILED where it fails, both at ``N2_SEARCH`` into
    ``N3_CONFIRM_CHANGE``'s branch. A group joins the earlier (larger) one when every hit of it
    shares a branch with that group."""
    seen: list[tuple[str, set[Branch]]] = []
    for key in list(groups):
        if not key.startswith("decision_is:"):
            continue
        group = groups[key]
        per_hit = [key_of.branches(h.case, h.signature) for h in group.hits]
        target = next(
            (k for k, branches in seen if per_hit and all(b & branches for b in per_hit)),
            None,
        )
        if target is None:
            seen.append((key, set().union(*per_hit) if per_hit else set()))
            continue
        groups[target].hits.extend(group.hits)
        del groups[key]


def _merge_forbidden_calls(groups: dict[str, Group], key_of: DivergenceKey) -> None:
    """A group of forbidden calls whose every hit left its path on the branch a wrong
    decision's group took (the agent went on into the node that calls the tool, instead of
    stopping where the path stops) joins that group: one fault, one bug. Where no case checked
    the decision (a PROBE turn), only the forbidden call shows it."""
    _merge_decisions_on_one_branch(groups, key_of)
    by_branch: dict[Branch, str] = {}
    for key, group in groups.items():
        if key.startswith("decision_is:"):
            for hit in group.hits:
                for b in key_of.branches(hit.case, hit.signature):
                    by_branch.setdefault(b, key)
    for key in [k for k in groups if k.startswith("forbids_tools:")]:
        group = groups[key]
        # the decision groups each hit's branches lead to; every hit must lead to the same one
        targets = [
            {by_branch[b] for b in key_of.branches(h.case, h.signature) if b in by_branch}
            for h in group.hits
        ]
        common = set.intersection(*targets) if targets else set()
        target = min(common) if common else None
        if target is not None:
            groups[target].hits.extend(group.hits)
            del groups[key]


_WRONG_DECISION = re.compile(r"decision_is:decision_tree\.([A-Za-z0-9_]+)@turn(-?\d+):got=(.+)")
_FORBIDDEN_CALL = re.compile(
    r"forbids_tools:decision_tree\.([A-Za-z0-9_]+)@turn(-?\d+):called=(.+)"
)

Branch = tuple[str, str]
"""``(node where a turn left its path, the node it went into instead)``."""


def _fork(nodes: list[str], others: Iterable[list[str]]) -> tuple[int, set[str]]:
    """How many leading nodes ``nodes`` shares at most with one of ``others``, and the nodes
    those sharing that many go into next."""
    shared, into = 0, set[str]()
    for other in others:
        n = 0
        while n < min(len(nodes), len(other)) and nodes[n] == other[n]:
            n += 1
        if n > shared:
            shared, into = n, set()
        if n == shared and n < len(other):
            into.add(other[n])
    return shared, into


def _from_root(scenario: Scenario, turn: int) -> list[str]:
    """The nodes of turns ``0..turn`` of ``scenario`` in order (its leaf after the last turn's,
    when that turn stops short of it)."""
    nodes = [n for t in scenario.turns[: turn + 1] for n in t.nodes]
    if turn == len(scenario.turns) - 1 and scenario.leaf not in scenario.turns[turn].nodes:
        nodes.append(scenario.leaf)
    return nodes


class DivergenceKey:
    """Bug keys that name where a wrong decision left the path, not where the path ended.

    A turn expected to end at ``END_TOO_EARLY`` that decided ``REQUEST_IDENTITY`` went wrong at
    ``N2_VERIFY``, whose missing-field exit decides that: so did the turns expected to end at
    ``END_RX_UNAVAILABLE`` or ``END_REFILL_SUBMITTED`` with the same decision, and all are one
    bug. The divergence is the last node the failing turn shares, from the start, with a turn
    of ``scenarios`` that decides the wrong decision (its turn role in the tree); a wrong
    decision no turn decides, or a case whose scenario is unknown, keeps :func:`bug_key`.
    Other failures keep :func:`bug_key` too (their clauses already name the node that requires
    what is missing).

    :meth:`branches` says where a failure left its path and which node it went into: for a
    wrong decision, the next node of the turns deciding it; for a call the path forbids, the
    next node of the turns requiring that tool. A forbidden call on the same branch as a wrong
    decision is the same fault seen where the decision was not checked (a PROBE turn): see
    :func:`group_failures`."""

    def __init__(
        self, scenarios: Iterable[Scenario], scenario_of: Callable[[CaseReport], Scenario | None]
    ) -> None:
        self.scenario_of = scenario_of
        self.deciding: dict[str, list[list[str]]] = {}
        self.deciding_from_root: dict[str, list[list[str]]] = {}
        """The same turns' nodes with every earlier turn's before them (a confirmation turn
        starts where the first turn stopped)."""
        self.requiring: dict[str, list[list[str]]] = {}
        for s in scenarios:
            for i, t in enumerate(s.turns):
                nodes = list(t.nodes)
                if i == len(s.turns) - 1 and s.leaf not in nodes:
                    nodes.append(s.leaf)  # a missing-field stop: its node is where it decides
                if t.expect_decision:
                    self.deciding.setdefault(t.expect_decision, []).append(nodes)
                    self.deciding_from_root.setdefault(t.expect_decision, []).append(
                        _from_root(s, i)
                    )
                for tool in t.required_tools:
                    self.requiring.setdefault(tool, []).append(_from_root(s, i))

    def _decision_fork(
        self, case: CaseReport, m: re.Match[str]
    ) -> tuple[list[str], int, set[str]] | None:
        scenario = self.scenario_of(case)
        if scenario is None:
            return None
        turn, got = int(m.group(2)), m.group(3)
        if not -len(scenario.turns) <= turn < len(scenario.turns):
            return None
        nodes = list(scenario.turns[turn].nodes)
        if turn in (-1, len(scenario.turns) - 1) and scenario.leaf not in nodes:
            nodes.append(scenario.leaf)
        shared, into = _fork(nodes, self.deciding.get(got, []))
        return (nodes, shared, into) if shared else None

    def __call__(self, case: CaseReport, signature: str) -> str:
        key = bug_key(signature)
        m = _WRONG_DECISION.fullmatch(signature)
        fork = self._decision_fork(case, m) if m is not None else None
        if m is None or fork is None:
            return key
        nodes, shared, _ = fork
        return f"decision_is:decision_tree.{nodes[shared - 1]}:got={m.group(3)}"

    def branches(self, case: CaseReport, signature: str) -> set[Branch]:
        """Where the failure left its path and the nodes it may have gone into; empty when
        the failure is neither a wrong decision nor a forbidden call, or the fork is unknown."""
        m = _WRONG_DECISION.fullmatch(signature)
        if m is not None:
            scenario = self.scenario_of(case)
            turn = int(m.group(2))
            if scenario is None or not -len(scenario.turns) <= turn < len(scenario.turns):
                return set()
            nodes = _from_root(scenario, turn % len(scenario.turns))
            shared, into = _fork(nodes, self.deciding_from_root.get(m.group(3), []))
            return {(nodes[shared - 1], n) for n in into} if shared else set()
        m = _FORBIDDEN_CALL.fullmatch(signature)
        scenario = self.scenario_of(case) if m is not None else None
        if m is None or scenario is None:
            return set()
        path = list(scenario.path)
        if scenario.leaf not in path:
            path.append(scenario.leaf)
        shared, into = _fork(path, self.requiring.get(m.group(3), []))
        return {(path[shared - 1], n) for n in into} if shared else set()


def divergence_key(
    scenarios: Iterable[Scenario], scenario_of: Callable[[CaseReport], Scenario | None]
) -> DivergenceKey:
    """:class:`DivergenceKey` over ``scenarios``."""
    return DivergenceKey(scenarios, scenario_of)


def simplicity(case: CaseReport) -> tuple[int, int, int, int, str]:
    """Fewest turns, then the fewest generator choices (an explored input's template variant,
    steps, segments, re-typed values, world values: each is a unit the shrinker would have
    to take away), then the first template, then the fewest characters, then the id
    (deterministic). Characters come late: a Chinese sentence is shorter than its English
    twin without being simpler."""
    units, template = 0, 0
    raw = case.details.get("choices") if case.kind == "EXPLORE" else None
    if raw is not None:
        choices = Choices.model_validate(raw)
        units, template = len(choice_units(choices)), choices.template
    return (len(case.messages), units, template, sum(len(m) for m in case.messages), case.id)


Shrinker = Callable[[CaseReport, str], "ShrinkReport | None"]
"""``(case, signature) -> ShrinkReport``, or None when the case cannot be shrunk."""


MAX_CAUSES = 3
"""Representatives shrunk at most for one group whose failing inputs differ in what made them
(the first, then one per input that no reproducer so far explains)."""


def _family(name: str) -> str:
    """A family without its turn (``turn2:urgency`` -> ``urgency``): one trigger met on
    another turn is the same cause."""
    return re.sub(r"^turn\d+:", "", name)


def case_families(case: CaseReport) -> frozenset[str] | None:
    """The choice families an explored input varies (:meth:`Choices.families`, without their
    turn), or None for a case that is not an explored input (its cause cannot be told)."""
    raw = case.details.get("families") if case.kind == "EXPLORE" else None
    return frozenset(_family(str(f)) for f in raw) if isinstance(raw, list) else None


def kept_families(shrunk: ShrinkReport) -> frozenset[str] | None:
    """The families (without their turn) of the choices a confirmed reproducer kept whose
    effect is in it (``ShrinkReport.reproducer_families``): what its failure needs (empty: the
    scenario's own wording and world fail). None when the reproducer did not fail again."""
    if shrunk.reproducer_rate is None or not shrunk.reproducer_rate.failures:
        return None
    if shrunk.reproducer_choices is None:
        return frozenset()
    kept = shrunk.reproducer_families
    if kept is None:  # a report saved before the families were checked against the input
        kept = Choices.model_validate(shrunk.reproducer_choices).families()
    return frozenset(_family(f) for f in kept)


@dataclass
class Cause:
    """One cause behind a group's signature: its representative, its shrink, and the families
    its reproducer needs (None: not reconfirmed)."""

    hit: Hit
    shrunk: ShrinkReport
    families: frozenset[str] | None
    hits: list[Hit] = field(default_factory=list)


def path_of(case: CaseReport) -> str:
    """The scenario a case's input is an instance of (an explored input: its base): its path
    through the tree and the tool failures injected on it (a retry adds calls)."""
    base = case.details.get("base") if case.kind == "EXPLORE" else None
    return str(base) if base is not None else case.id


def _distinct(new: Cause, old: Cause) -> bool:
    """Two reproducers of one signature are distinct causes when they are inputs of one scenario,
    neither needs every family the other needs, and the agent behaved differently when they
    failed (:func:`behaviour_of <agentprop._decide.shrink.behaviour_of>`: tools called, node,
    decision per turn): one cause met through two families (Chinese text from a template or
    from a code-switched phrase) makes the agent do the same thing. On two scenarios (another
    path, another injected tool failure) the agent does different things whatever the cause,
    so behaviour tells nothing there: not split."""
    if path_of(new.hit.case) != path_of(old.hit.case):
        return False
    if new.families is None or old.families is None:
        return False
    if new.families <= old.families or old.families <= new.families:
        return False
    a, b = new.shrunk.behaviour, old.shrunk.behaviour
    return bool(a) and bool(b) and a != b


def case_behaviour(hit: Hit) -> list[str] | None:
    """What the agent did, up to the failing turn, in the case's first run failing with the
    hit's signature (from the runs the report kept: no new run), or None when none was kept."""
    run = next(
        (r for r in hit.case.traces if r.signature == hit.signature and r.side is None), None
    )
    return behaviour_of(run.trace, run.turn) if run is not None else None


def distinct_causes(
    candidates: list[Hit],
    first: Cause,
    shrink: Callable[[Hit], ShrinkReport | None],
    behaviour: Callable[[Hit], list[str] | None] = lambda h: None,
) -> tuple[list[Cause], list[ShrinkReport]]:
    """The causes behind one group, ``first`` (its simplest case, shrunk) first.

    Only explored inputs of the first's scenario are looked at. One that holds every family a
    reproducer kept is explained by it, and so is one whose failing run (``behaviour``) did
    what the run of an input already shrunk did. The simplest one nothing explains is shrunk
    too (at most :data:`MAX_CAUSES` shrinks in all); its reproducer is another cause when it
    is :func:`_distinct` from every cause so far. Nothing is split when a reproducer kept no
    choice (the scenario's own input fails: every input may fail for that reason) or when the
    first was not reconfirmed. Returns the causes and every extra shrink (also those that named
    no new cause: their runs were spent on this bug)."""
    causes = [first]
    spent: list[ShrinkReport] = []
    if not first.families:
        return causes, spent
    explained: list[frozenset[str]] = [first.families]
    # what a cause does: its reproducer's run (the representative may hold another cause's
    # trigger too, and its own run follow that one), else the representative's
    seen = [b for b in (first.shrunk.behaviour or behaviour(first.hit),) if b]
    tried = {first.hit.case.id}
    while len(tried) < MAX_CAUSES:
        nxt = next(
            (
                h
                for h in candidates
                if h.case.id not in tried
                and path_of(h.case) == path_of(first.hit.case)
                and (fams := case_families(h.case)) is not None
                and not any(e <= fams for e in explained)
                and behaviour(h) not in seen
            ),
            None,
        )
        if nxt is None:
            break
        tried.add(nxt.case.id)
        did = behaviour(nxt)
        shrunk = shrink(nxt)
        ran = shrunk.behaviour if shrunk is not None and shrunk.behaviour else did
        if ran:
            seen.append(ran)
        if shrunk is None:
            continue
        spent.append(shrunk)
        cause = Cause(nxt, shrunk, kept_families(shrunk))
        if cause.families is None:
            continue
        if not cause.families:
            return [first], spent  # the scenario's own input fails: one cause may explain all
        explained.append(cause.families)
        if all(_distinct(cause, c) for c in causes):
            causes.append(cause)
    return causes, spent


Owner = tuple[Hit | None, frozenset[str] | None, list[str] | None]
"""A cause as :func:`place_case` reads it: its representative (``None``: not at hand), the
families its reproducer needs, and what its reproducer's failing run did (``None``: not
known)."""


def place_case(hit: Hit, owners: Sequence[Owner]) -> tuple[int, str]:
    """Which of ``owners`` a failing case goes under, and on what evidence: ``representative``
    (it is one), ``run`` (its failing run did what exactly one reproducer's run did, else what
    exactly one representative's did: the stronger evidence, as a family's words need not carry
    its cause's trigger in every language; a reproducer first, as a representative may hold
    another cause's trigger too and its run follow that one), ``families`` (it holds the
    first's families whose run matched none alone), else ``run`` (the first of several alike)
    or ``default``: nothing ties it to a cause, so it is put under the first, which is not
    shown to be its cause (the bug's note says so)."""
    for i, (rep, _, _) in enumerate(owners):
        if rep is hit:
            return i, "representative"
    did = case_behaviour(hit)
    alike = [i for i, (_, _, ran) in enumerate(owners) if did is not None and ran == did]
    if len(alike) != 1:
        alike = [
            i
            for i, (rep, _, _) in enumerate(owners)
            if did is not None and rep is not None and case_behaviour(rep) == did
        ]
    if len(alike) == 1:
        return alike[0], "run"
    fams = case_families(hit.case)
    for i, (_, needs, _) in enumerate(owners):
        if fams is not None and needs and needs <= fams:
            return i, "families"
    return (alike[0], "run") if alike else (0, "default")


def _owner(hit: Hit, causes: list[Cause]) -> tuple[Cause, str]:
    """The cause a failing case is put under, and the evidence (:func:`place_case`)."""
    i, why = place_case(hit, [(c.hit, c.families, c.shrunk.behaviour or None) for c in causes])
    return causes[i], why


def unplaced_note(case_ids: Sequence[str]) -> str:
    """What a bug's note says of the failing cases put under it by default (:func:`place_case`)."""
    shown = ", ".join(case_ids[:3]) + (
        f" and {len(case_ids) - 3} more" if len(case_ids) > 3 else ""
    )
    return (
        f"{len(case_ids)} failing case(s) here ({shown}) match no cause: their failing run did "
        "not do what one cause's representative did and they hold no reproducer's families, so "
        "they are filed under this cause by default, not shown to be it"
    )


def add_note(bug: BugReport, more: str) -> None:
    bug.note = f"{bug.note}; {more}" if bug.note else more


def cause_text(families: frozenset[str]) -> str:
    """A cause in words: the families its reproducer needs, sorted (stable across runs)."""
    return " + ".join(sorted(families))


def find_bugs(
    report: RunReport,
    shrink_case: Shrinker | None,
    *,
    shrinkable: Callable[[CaseReport], bool],
    key_of: KeyOf | None = None,
) -> list[BugReport]:
    """Group the report's failures into bugs (``key_of``: see :func:`group_failures`) and
    shrink each with ``shrink_case`` (``None``: shrinking is off), once on its simplest case;
    when its explored inputs differ in what made them, up to :data:`MAX_CAUSES` times, and a
    group whose reproducers are distinct causes (:func:`distinct_causes`) is split into one bug
    per cause, keyed by the signature key and the cause. Sets ``cases[].bugs`` and the
    representatives' ``cases[].shrunk``; returns the bugs (also stored in ``report.bugs``)."""
    bugs: list[BugReport] = []
    met_while_shrinking: dict[str, BugReport] = {}
    groups = group_failures(report.cases, key_of)
    found_by_cases = {g.key for g in groups}

    def note_others(rep: Hit, shrunk: ShrinkReport) -> None:
        for other in shrunk.other_failures:
            okey = (
                key_of(rep.case, other.signature)
                if key_of is not None
                else bug_key(other.signature)
            )
            if okey in found_by_cases:
                continue  # a bug the cases found too: it is listed on its own
            seen = met_while_shrinking.get(okey)
            if seen is None:
                seen = met_while_shrinking[okey] = BugReport(
                    id=bug_id(okey, report.spec.id),
                    key=okey,
                    signature=other.signature,
                    signatures=[other.signature],
                    explanation=other.explanation,
                    origin="shrinking",
                    reproducer_messages=other.messages,
                    rate=rate_of(
                        other.count,
                        shrunk.runs
                        + (shrunk.reproducer_rate.runs if shrunk.reproducer_rate else 0),
                    ),
                    rate_of="candidate",
                    note="met only on shrinking candidates, never in a case: not confirmed as a "
                    "bug (the cut-down messages may no longer ask for what the case's path "
                    "expects); re-check it with agentprop.check(..., messages=...)",
                )
            elif other.signature not in seen.signatures:
                seen.signatures.append(other.signature)
            if rep.case.id not in seen.cases:
                seen.cases.append(rep.case.id)

    def new_bug(key: str, hits: list[Hit]) -> BugReport:
        first = hits[0]
        bug = BugReport(
            id=bug_id(key, report.spec.id),
            key=key,
            signature=first.signature,
            signatures=list(dict.fromkeys(h.signature for h in hits)),
            explanation=first.explanation,
            cases=list(dict.fromkeys(h.case.id for h in hits)),
        )
        bugs.append(bug)
        for hit in hits:
            if bug.id not in hit.case.bugs:
                hit.case.bugs.append(bug.id)
        return bug

    for group in groups:
        known = [
            h
            for h in group.hits
            if h.case.kind == "REGRESSION" and h.case.details.get("signature") == h.signature
        ]
        if known:
            _known_causes(group, known, new_bug)
            continue
        # an INV case is a distribution: only its leak (one conversation's failure) can be shrunk
        candidates = sorted(
            (
                h
                for h in group.hits
                if shrinkable(h.case)
                and (h.case.kind != "INV" or h.signature.startswith(SAFETY_CONTRACTS))
            ),
            key=lambda h: simplicity(h.case),
        )
        if not candidates:
            _unshrunk(
                new_bug(group.key, group.hits),
                max(group.hits, key=lambda h: h.case.runs),
                "no case of this bug can be shrunk (DIR and INV cases are pairs and "
                "distributions, not one conversation)",
            )
            continue
        rep = candidates[0]
        if shrink_case is None:
            _unshrunk(new_bug(group.key, group.hits), rep, "shrinking is off")
            continue
        shrunk = shrink_case(rep.case, rep.signature)
        if shrunk is None:
            _unshrunk(new_bug(group.key, group.hits), rep, "the case could not be shrunk")
            continue
        note_others(rep, shrunk)

        def shrink_more(hit: Hit) -> ShrinkReport | None:
            assert shrink_case is not None
            more = shrink_case(hit.case, hit.signature)
            if more is not None:
                note_others(hit, more)
            return more

        causes, spent = distinct_causes(
            candidates,
            Cause(rep, shrunk, kept_families(shrunk)),
            shrink_more,
            case_behaviour,
        )
        split_runs = {id(c.shrunk) for c in causes}
        unsplit_runs = sum(
            s.runs + (s.reproducer_rate.runs if s.reproducer_rate else 0)
            for s in spent
            if id(s) not in split_runs
        )
        if len(causes) == 1:
            bug = new_bug(group.key, group.hits)
            _from_shrink(bug, rep, shrunk)
            bug.shrink_runs += unsplit_runs
            continue
        unplaced: dict[int, list[str]] = {}
        for hit in group.hits:
            owner, why = _owner(hit, causes)
            owner.hits.append(hit)
            if why == "default":
                unplaced.setdefault(id(owner), []).append(hit.case.id)
        others = [cause_text(c.families or frozenset()) for c in causes]
        for i, cause in enumerate(causes):
            assert cause.families is not None
            text = cause_text(cause.families)
            bug = new_bug(f"{group.key} [cause: {text}]", cause.hits)
            bug.cause = sorted(cause.families)
            _from_shrink(bug, cause.hit, cause.shrunk)
            rest = ", ".join(o for j, o in enumerate(others) if j != i)
            split = (
                f"one of {len(causes)} causes behind {group.key}: its reproducer needs {text}, "
                f"the other(s) {rest}; each reproducer keeps only its own"
            )
            add_note(bug, split)
            if cause.hits and id(cause) in unplaced:
                add_note(bug, unplaced_note(list(dict.fromkeys(unplaced[id(cause)]))))
            if i == 0:
                bug.shrink_runs += unsplit_runs
    report.bugs = bugs + list(met_while_shrinking.values())
    return report.bugs


def _known_causes(
    group: Group, known: list[Hit], new_bug: Callable[[str, list[Hit]], BugReport]
) -> None:
    """A group its corpus entries reproduced: one known bug, or one per cause when the entries
    were saved as distinct causes of the signature (``CorpusEntry.cause``), so a split found
    once stays split, under the same ids. Other failing cases go under the cause whose families
    they hold (else the first)."""
    by_cause: dict[frozenset[str], Hit] = {}
    for h in known:
        by_cause.setdefault(frozenset(str(c) for c in h.case.details.get("cause") or ()), h)
    if list(by_cause) == [frozenset()]:
        _from_corpus(new_bug(group.key, group.hits), known[0])
        return
    parts: dict[frozenset[str], list[Hit]] = {c: [] for c in by_cause}
    # a known cause's representative is its reproducer's replay: its run is the reproducer's
    owners: list[Owner] = [(h, c, None) for c, h in by_cause.items()]
    unplaced: dict[frozenset[str], list[str]] = {}
    for hit in group.hits:
        if any(h is hit for h in known):
            owner = frozenset(str(c) for c in hit.case.details.get("cause") or ())
        else:  # the same evidence as on the run that split it (:func:`place_case`)
            i, why = place_case(hit, owners)
            owner = list(by_cause)[i]
            if why == "default":
                unplaced.setdefault(owner, []).append(hit.case.id)
        parts[owner].append(hit)
    for cause, hits in parts.items():
        key = f"{group.key} [cause: {cause_text(cause)}]" if cause else group.key
        bug = new_bug(key, hits)
        bug.cause = sorted(cause)
        _from_corpus(bug, by_cause[cause])
        if cause in unplaced:
            add_note(bug, unplaced_note(list(dict.fromkeys(unplaced[cause]))))


def _unshrunk(bug: BugReport, hit: Hit, note: str) -> None:
    bug.representative = hit.case.id
    bug.signature = hit.signature
    bug.reproducer_messages = list(hit.case.messages)
    bug.rate = rate_of(hit.count, hit.case.runs)
    bug.rate_of = "case"
    bug.note = note
    if hit.case.kind == "INV":
        _invariance_pair(bug, hit.case)
    elif hit.case.kind == "DIR":
        _direction_pair(bug, hit.case)


def _invariance_pair(bug: BugReport, case: CaseReport) -> None:
    """An INV bug is the original message and a variant that changed the behaviour, each with
    its distribution of decisions, and the share of variants that changed it (the case's rate
    read from the other side): not a conversation of turns, nor a rate per run."""
    variants = [v for v in case.details.get("variants") or [] if isinstance(v, dict)]
    differing = [v for v in variants if v.get("differs")]
    if not variants or not differing:
        return
    first = differing[0]
    original = case.details.get("original") or {}
    bug.reproducer_messages = [str(first.get("message", ""))]
    bug.diff = [
        f"original: {case.details.get('original_message', '')!r} -> {distribution_words(original)}",
        f"variant:  {first.get('message', '')!r} -> "
        f"{distribution_words(first.get('decisions') or {})}",
    ]
    bug.rate = rate_of(len(differing), len(variants))
    bug.rate_of = "variants"


def _direction_pair(bug: BugReport, case: CaseReport) -> None:
    """A DIR bug is its two sides: the base messages and the perturbed ones, with the decision
    each side should reach and what its runs decided, in words; its rate is over the runs of
    both sides."""
    expected = case.details.get("expected_change") or ["?", "?"]
    base = case.details.get("base_messages") or []

    def did(side: str) -> str:
        words = case.details.get(f"{side}_decided")
        return f"; {words}" if words else ""

    bug.diff = [
        f"base ({case.details.get('base_verdict', '?')}, expects "
        f"{expected[0]}{did('base')}): {base!r}",
        f"perturbed ({case.details.get('perturbed_verdict', '?')}, expects "
        f"{expected[-1]}{did('perturbed')}): {list(case.messages)!r}",
    ]
    bug.rate_of = "pair"


def _from_corpus(bug: BugReport, hit: Hit) -> None:
    case = hit.case
    bug.known = True
    bug.representative = case.id
    bug.signature = hit.signature
    bug.reproducer_messages = list(case.messages)
    bug.rate = rate_of(hit.count, case.runs)
    bug.rate_of = "corpus replay"
    bug.corpus_entry = case.details.get("corpus_entry")
    bug.note = "known: its corpus entry reproduced it, so it was not shrunk again"


def _from_shrink(bug: BugReport, hit: Hit, shrunk: ShrinkReport) -> None:
    case = hit.case
    bug.representative = case.id
    bug.signature = shrunk.signature
    bug.reproducer_messages = list(shrunk.reproducer_messages)
    bug.reproducer_world = shrunk.reproducer.world.model_dump(mode="json")
    bug.diff = list(shrunk.diff)
    bug.world_kept = list(shrunk.world_kept)
    bug.world_scenario = list(shrunk.world_scenario)
    bug.choices_kept = shrunk.choices_kept if shrunk.reproducer_choices else ""
    bug.minimal = shrunk.minimal
    bug.minimality = shrunk.minimality
    bug.shrink_runs = shrunk.runs + (shrunk.reproducer_rate.runs if shrunk.reproducer_rate else 0)
    rates_from_shrink(bug, shrunk, rate_of(hit.count, case.runs))
    if not bug.shrink_runs and shrunk.budget_spent:
        bug.note = (
            "not shrunk: the run's budget was spent before any shrinking run: "
            f"{shrunk.budget_spent}"
        )
    if shrunk.reproducer_rate is None:
        bug.rate = rate_of(hit.count, case.runs)
        bug.rate_of = "case"
    shrunk_json: dict[str, Any] = shrunk.model_dump(mode="json", exclude={"reproducer"})
    shrunk_json["reproducer_world"] = bug.reproducer_world
    shrunk_json["bug"] = bug.id
    case.shrunk = shrunk_json


def rates_from_shrink(bug: BugReport, shrunk: ShrinkReport, case_rate: FailureRate) -> None:
    """Set ``bug``'s figures from its shrink: the reproducer's fresh runs (only those made),
    the runs the budget refused, whether it was reconfirmed, and the case's own rate."""
    bug.case_rate = case_rate
    bug.refused_runs = shrunk.verify_refused
    bug.budget_spent = shrunk.budget_spent
    if shrunk.reproducer_rate is not None:
        r = shrunk.reproducer_rate
        bug.rate = (
            FailureRate(failures=r.failures, runs=r.runs, rate=r.rate, interval=r.interval)
            if r.runs
            else None
        )
        bug.rate_of = "reproducer"
        bug.confirmed = r.failures > 0
        o = shrunk.original_rate
        if r.runs and r.interval[0] > o.interval[1]:
            bug.note = (
                f"the reproducer fails more often than the original case ({r.rate:.0%} vs "
                f"{o.rate:.0%}, the intervals do not overlap): cutting it down may have changed "
                "what the input asks, so the case's expectations may no longer apply; check "
                "it before trusting it"
            )
