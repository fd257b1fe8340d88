"""Failure signatures and bug keys.

A failure's signature is ``contract:clause@turnN:detail`` (:attr:`Verdict.signature
<agentprop._judge.verdict.Verdict.signature>`): what failed, where and how. The same fault
breaks the same clause in the same way in many cases, but not always on the same turn, so a
*bug* is keyed by the signature without its ``@turnN`` (:func:`bug_key`) and named by a short
hash of that key and the spec it broke (:func:`bug_id`): the same clause name in two specs is
two bugs, never one id.
"""

from __future__ import annotations

import hashlib
import re

_TURN = re.compile(r"@turn-?\d+")


def bug_key(signature: str) -> str:
    """``calls_in_order:N2_AUTH…@turn1:missing=x`` -> ``calls_in_order:N2_AUTH…:missing=x``."""
    return _TURN.sub("", signature)


def bug_id(key: str, spec: str = "") -> str:
    """The bug's short name: 8 hex digits of the SHA-256 of the spec id and the key (the key
    alone when no spec is named)."""
    text = f"{spec}\n{key}" if spec else key
    return hashlib.sha256(text.encode()).hexdigest()[:8]
