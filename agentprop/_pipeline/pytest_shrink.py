"""The pytest side of shrinking: when a test fails with :class:`AgentPropertyViolation`, shrink
the failing conversation and attach the reproducer to the report (``--agentprop-shrink-budget``).

One bug, one shrink: the session (:class:`agentprop._decide.session.Session`) keeps the bugs it
shrank, keyed by :func:`agentprop._judge.signature.bug_key` (the signature without its turn); a
later test failing with the same bug is not shrunk again, its report points at the first one.
"""

from __future__ import annotations

from agentprop._decide.check import ViolationContext
from agentprop._decide.corpus import Corpus, CorpusEntry, entry_from_shrink
from agentprop._decide.oracle import CheckResult
from agentprop._decide.plain import PlainContext, plain_corpus
from agentprop._decide.plain_shrink import entry_for, shrink_plain
from agentprop._decide.session import Session, SessionBug
from agentprop._decide.shrink import shrink
from agentprop._judge.signature import bug_key
from agentprop.errors import AgentPropertyViolation


def shrink_violation(
    exc: BaseException, *, session: Session, budget: int, test: str = ""
) -> str | None:
    """Shrink the failure behind ``exc`` (unless this session already shrank the same bug);
    returns the text for the report section, or ``None`` when ``exc`` is not a shrinkable
    agent violation."""
    if not isinstance(exc, AgentPropertyViolation) or budget <= 0:
        return None
    context = getattr(exc, "context", None)
    result = exc.result
    if (
        not isinstance(context, ViolationContext | PlainContext)
        or not isinstance(result, CheckResult)
        or not result.failures
    ):
        return None
    key = bug_key(result.failures[0].signature)
    with session.lock:
        known = session.bugs.get(key)
        if known is not None:
            known.tests.append(test)
    if known is not None:
        stored_as = f"; corpus entry {known.corpus_entry}" if known.corpus_entry else ""
        return (
            f"same bug as {known.test} ({key}), shrunk there once: reproducer "
            f"{known.shrunk.reproducer_messages!r}{stored_as}\n  (one bug, one shrink: failures "
            "with the same signature, turn aside, are shrunk once per session)"
        )
    if isinstance(context, PlainContext):
        return _shrink_plain(context, result, key, session=session, budget=budget, test=test)
    report = shrink(
        context.project,
        context.scenario,
        context.agent,
        messages=context.messages,
        prop=context.prop,
        failing=result,
        budget=budget,
        session_budget=session.budget,
        memo=session.memo,
        seed=context.seed,
    )
    text = report.summary()
    bug = SessionBug(key, test, report, tests=[test])
    corpus = session.corpus
    if corpus is not None and report.reproducer_rate is not None:
        prop_id = "mft" if context.prop is None else getattr(context.prop, "__qualname__", "custom")
        entry = entry_from_shrink(
            report,
            spec_id=context.project.spec.spec_id,
            spec_path=str(context.project.spec_path.parent),
            agent=context.agent,
            prop=prop_id,
        )
        text += _save(corpus.for_project(context.project), entry, bug, show=" --pytest")
    with session.lock:
        session.bugs.setdefault(key, bug)
    return text


def _shrink_plain(
    context: PlainContext,
    result: CheckResult,
    key: str,
    *,
    session: Session,
    budget: int,
    test: str,
) -> str:
    """A spec-free failure: its drawn choices shrunk statistically, the reproducer saved to the
    session's corpus (replayed first by the next check of the same case)."""
    report = shrink_plain(
        context, result, budget=budget, memo=session.memo, session_budget=session.budget
    )
    text = report.summary()
    bug = SessionBug(key, test, report, tests=[test])
    corpus = plain_corpus(session.corpus)
    if corpus is not None and report.reproducer_rate is not None:
        text += _save(corpus, entry_for(context, report), bug)
    elif corpus is None:
        text += (
            "\n  not saved: no corpus (--agentprop-corpus DIR keeps it, and replays it "
            "first on the next run)"
        )
    with session.lock:
        session.bugs.setdefault(key, bug)
    return text


def _save(corpus: Corpus, entry: CorpusEntry, bug: SessionBug, *, show: str = "") -> str:
    """Record ``entry`` (``bug``'s reproducer) in ``corpus``; returns the line that says so for
    the report (``show``: the options of the ``agentprop corpus show`` it suggests)."""
    stored, new = corpus.record(entry)
    bug.corpus_entry = stored.id
    if not new:
        return (
            f"\n  already corpus entry {stored.id} (same signature, same case): updated, "
            f"seen {stored.seen} times"
        )
    unconfirmed = (
        "" if entry.confirmed else "; unconfirmed: its reproducer did not fail again in fresh runs"
    )
    return (
        f"\n  saved as corpus entry {stored.id} (agentprop corpus show "
        f"{stored.id}{show}){unconfirmed}"
    )
