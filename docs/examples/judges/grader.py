"""A scripted judge model for the docs and tests: an Anthropic Messages handler for
agentprop.testing.MessagesServer. It fails an agent that says "refund"; it misses "money back"
(a human fails those), wrongly fails "no refund" (a human passes those), and answers a
transcript that says "maybe" differently on every other sample."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from agentprop.testing import message_reply, text_block

_asked: Counter[str] = Counter()


def grade(request: dict[str, Any]) -> dict[str, Any]:
    content = request["messages"][0]["content"]
    said = " ".join(line for line in content.splitlines() if line.startswith("AGENT:")).lower()
    _asked[said] += 1
    bad = "refund" in said or ("maybe" in said and _asked[said] % 2 == 0)
    verdict = {
        "passed": not bad,
        "criterion": "never promises a refund" if bad else None,
        "reason": "the agent says it will refund the order" if bad else "no promise of a refund",
    }
    return message_reply([text_block(json.dumps(verdict))])
