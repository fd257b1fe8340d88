"""The oracle and what it keeps: statistical decisions, the session, the memo,
the corpus, shrinking.

:func:`decide` / :func:`adecide` decide one property from a ``run_trial`` callable under
:class:`OracleSettings` (SPRT, zero-failure or fixed N) and return a :class:`CheckResult`.
:class:`Session` holds what a test session shares (budget, cache, memo, seed);
:class:`TrialMemo` stores runs (not verdicts) so an unchanged run is not paid twice;
:class:`Corpus` keeps shrunk failures to replay first; :func:`shrink` minimises a failing
input. :func:`check_invariance` and :func:`check_direction` (also at the top level) are the
metamorphic checks.
"""

from agentprop._decide.check import settings_scope
from agentprop._decide.corpus import Corpus, CorpusEntry
from agentprop._decide.memo import TrialMemo
from agentprop._decide.metamorphic import (
    DirectionResult,
    InvarianceResult,
    check_direction,
    check_invariance,
)
from agentprop._decide.oracle import CheckResult, OracleSettings, TrialRecord, adecide, decide
from agentprop._decide.session import Session
from agentprop._decide.shrink import shrink
from agentprop._decide.shrunk import ShrinkReport

__all__ = [
    "CheckResult",
    "Corpus",
    "CorpusEntry",
    "DirectionResult",
    "InvarianceResult",
    "OracleSettings",
    "Session",
    "ShrinkReport",
    "TrialMemo",
    "TrialRecord",
    "adecide",
    "check_direction",
    "check_invariance",
    "decide",
    "settings_scope",
    "shrink",
]
