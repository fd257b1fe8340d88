"""One Session object instead of module globals (issue #12 items 2 and 3).

Two sessions in one process never share a memo, a budget, recorded results or corpus replays;
the session in force follows the context (nested blocks, helper threads of ``run_sync``);
``check`` and ``acheck`` take the same arguments and behave the same; and no module of
agentprop keeps session state in a global.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
from pathlib import Path

import pytest

import agentprop
import agentprop.oracle
from agentprop._decide.corpus import Corpus, entry_from_shrink
from agentprop._decide.session import Session, current_session
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.context import current_model_context
from agentprop._util.aio import run_sync

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "supportops"
BILLING = "END_BILLING_ANSWER<-N3_BILLING"
CANCEL = "END_CANCELLED<-N7_CANCEL"


@pytest.fixture(scope="module")
def project() -> agentprop.Project:
    return agentprop.load_project(EXAMPLE)


@pytest.fixture(scope="module")
def clean() -> agentprop.LoadedAgent:
    return agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE)


def test_two_sessions_in_one_process_share_nothing(
    project: agentprop.Project, clean: agentprop.LoadedAgent
) -> None:
    first, second = Session(), Session(budget=Budget(max_runs=500))
    with first.activate():
        agentprop.check(project, BILLING, clean, settings=agentprop.settings(runs=5))
        # the same runs again: memo hits
        agentprop.check(project, BILLING, clean, settings=agentprop.settings(runs=5))
    with second.activate():
        agentprop.check(project, BILLING, clean, settings=agentprop.settings(runs=5))
    (a, b), (c,) = first.recorded_results(), second.recorded_results()
    assert a.result.runs == b.result.runs == c.result.runs > 0
    # the first session's second check came from its memo; the second session's memo was empty,
    # so it ran the agent itself: nothing came from the first session
    assert first.memo.hits == b.result.memo_hits == b.result.runs and second.memo.hits == 0
    assert first.budget.snapshot().runs == second.budget.snapshot().runs == c.result.runs
    assert first.budget is not second.budget and second.budget.max_runs == 500


def test_the_session_in_force_follows_the_context() -> None:
    outer, inner = Session(), Session()
    with outer.activate():
        assert current_session() is outer and current_model_context() is outer.model_context
        with inner.activate():
            assert current_session() is inner and current_model_context().budget is inner.budget
        assert current_session() is outer

        async def in_a_running_loop() -> Session:
            # run_sync inside a running loop runs on a helper thread: the session goes with it
            return run_sync(_current())

        assert asyncio.run(in_a_running_loop()) is outer


async def _current() -> Session:
    return current_session()


def test_check_and_acheck_take_the_same_arguments() -> None:
    check = inspect.signature(agentprop.check).parameters
    acheck = inspect.signature(agentprop.acheck).parameters
    assert [p for p in check if p != "raise_on_failure"] == list(acheck)
    for name, param in acheck.items():
        assert check[name].default == param.default and check[name].kind == param.kind, name


def test_acheck_replays_the_corpus_and_records_like_check(
    project: agentprop.Project, tmp_path: Path
) -> None:
    skipper = agentprop.load_agent("agent:SupportOpsAgent", EXAMPLE, {"skip_auth": 1.0})
    with Session().activate():
        found = agentprop.check(project, CANCEL, skipper, raise_on_failure=False)
        shrunk = agentprop.oracle.shrink(project, CANCEL, skipper, failing=found, budget=30)
    corpus = Corpus(tmp_path)
    corpus.record(
        entry_from_shrink(
            shrunk, spec_id=project.spec.spec_id, spec_path=str(EXAMPLE), agent=skipper
        )
    )
    with Session(corpus=corpus).activate() as session:
        result = asyncio.run(agentprop.acheck(project, CANCEL, skipper))
        assert not result.passed and result.name.startswith("corpus ")  # the replay came first
        assert [n.action for n in session.recorded_corpus_notes()] == ["regression"]
        assert len(session.recorded_results()) == 1


# --------------------------------------------------------------------------- no module state

CACHES = {
    (
        "agentprop/_agents/loading.py",
        "_digests",
    ): "source digests per (file, mtime): a pure function's memo",
    (
        "agentprop/_modelapi/providers.py",
        "_PARAMETERS",
    ): "the keyword parameters of an SDK method, per SDK class: a pure function's memo",
    (
        "agentprop/_util/refs.py",
        "_LOADED",
    ): "modules loaded from files by MODULE:ATTR: an import registry, like sys.modules",
    (
        "agentprop/_util/scrub.py",
        "_secrets",
    ): "API keys seen in this process, scrubbed from every error text: a deny-list that only "
    "grows, never a result",
}
"""Module-level mutable values that are memos of pure functions, not session state."""


def _module_state(path: Path) -> list[str]:
    """``global`` statements, and module-level names bound to an empty mutable container."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [
        f"{path.relative_to(ROOT)}:{n.lineno}: global {', '.join(n.names)}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Global)
    ]
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        empty = (
            isinstance(value, (ast.Dict, ast.List, ast.Set))
            and not getattr(value, "keys", getattr(value, "elts", None))
        ) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict")
            and not value.args
        )
        for target in targets:
            if (
                empty
                and isinstance(target, ast.Name)
                and (str(path.relative_to(ROOT)), target.id) not in CACHES
            ):
                found.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {target.id} = "
                    "<empty mutable container>"
                )
    return found


def test_no_module_keeps_session_state_in_a_global() -> None:
    found = [
        line for path in sorted((ROOT / "agentprop").rglob("*.py")) for line in _module_state(path)
    ]
    assert found == [], (
        "module-level state (put it on agentprop._decide.session.Session):\n" + "\n".join(found)
    )
