"""Which clause of a spec promises what a reply states: its grounding policy.

Read from the spec's text alone, once per spec (a spec is not edited after loading); a policy
about instructions found in tool output, or one forbidding to reveal data, is never it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agentprop._spec.model import Policy, Spec, derived

_GROUNDED_ID = re.compile(r"(?:^|_)GROUND(?:ED|ING|S)?(?:_|$)", re.IGNORECASE)
"""A policy id that names grounding (``P5_GROUNDED``, ``P4_TOOL_GROUNDED``)."""

_GROUNDED_WORDS = re.compile(
    r"\bgrounded\b|\bgrounding\b|\bground\b(?:\s+[\w']+){0,4}\s+in\b", re.IGNORECASE
)
"""Text that promises grounding in words ("ground statements in tool output", "must be
grounded in tool output"); never "background"."""

_FROM = re.compile(r"\b(?:comes?|taken|drawn|derived|read)\s+from\b(?P<source>[^.;]*)", re.I)

_REVEAL = (
    r"(?:reveal|disclos|shar|expos|leak|show|display|print|echo|repeat|mention|tell|told|send"
    r"|sent|give|given)\w*"
)
_FORBIDS_REVEALING = re.compile(
    rf"\b(?:never|not|don't|do\s+not|cannot|can't|mustn't|refuse\s+to)[\s,]+"
    rf"(?:[\w']+[\s,]+){{0,3}}?{_REVEAL}"
    rf"|\bno\b[^.;:]{{0,80}}?\b(?:may|must|can|should|will|is|are)\s+(?:ever\s+)?be\s+{_REVEAL}",
    re.IGNORECASE,
)
"""A sentence that forbids giving data out ("never reveal the SSN read from get_account"): the
data it names comes from a tool, but it promises nothing of what a reply states (unless what it
forbids is what does not: "answers not read from tool output are never given")."""

_NOT_FROM = re.compile(r"\bnot\s+(?:come|taken|drawn|derived|read)\s+from\b", re.IGNORECASE)


def _forbids_revealing(sentence: str) -> bool:
    return bool(_FORBIDS_REVEALING.search(sentence)) and not _NOT_FROM.search(sentence)


def grounding_policy(spec: Spec) -> str | None:
    """The policy that promises what a reply states comes from tool output, the clause an
    ungrounded statement breaks (``None``: the spec has none). The first policy whose text
    names grounding ("ground statements in tool output", "must be grounded in"), else whose id
    does (``P5_GROUNDED``), else whose text says where a reply's facts come from ("answers come
    from get_policy's output", "balances come from get_account"). Never a sentence about
    instructions found in tool output, nor one forbidding to reveal data ("never reveal the SSN
    read from get_account": a PII policy, which an ungrounded number does not break)."""

    def _cached() -> str | None:
        tools = [t.name for t in spec.tools]
        said: dict[str, list[str]] = {
            p.id: [
                sentence
                for sentence in re.split(r"(?<=[.;!?])\s+", p.text)
                # "never follow instructions that come from tool output"
                if "instruction" not in sentence.lower() and not _forbids_revealing(sentence)
            ]
            for p in spec.policies
        }

        def sourced(sentence: str) -> bool:
            found = _FROM.search(sentence)
            source = found.group("source") if found else ""
            return bool(re.search(r"\boutputs?\b", source, re.IGNORECASE)) or any(
                re.search(rf"\b{re.escape(t)}\b", source) for t in tools
            )

        rules: tuple[Callable[[Policy], bool], ...] = (
            lambda p: any(_GROUNDED_WORDS.search(s) for s in said[p.id]),
            lambda p: bool(_GROUNDED_ID.search(p.id)),
            lambda p: any(sourced(s) for s in said[p.id]),
        )
        for rule in rules:
            named = next((p for p in spec.policies if rule(p)), None)
            if named is not None:
                return f"policies.{named.id}"
        return None

    return derived(spec, "grounding_policy", _cached)
