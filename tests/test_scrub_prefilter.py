"""might_hold_secret answers for a whole trace's JSON before it is scrubbed string by string, so
it must never say no where scrub_text would change the text: its substring prefilter (found
with the case-insensitive label pattern's quirks) is checked against scrub_text itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentprop._util.scrub import might_hold_secret, scrub_text

CREDENTIAL = "abcdefghijklmnop0123456789"
LABELLED = [
    "Bearer ",
    "BEARER\t",
    "x-api-key: ",
    "X-API-\u212aEY=",  # the Kelvin sign, which (?i) reads as k
    "api_key='",
    "ApiKey ",
    "auth-token: ",
    "AccessToken ",
    "acce\u017f\u017f_token=",  # the long s, which (?i) reads as s and lower() keeps
    "sk-ant-api03-",
    "sk-proj-",
]
"""Text before CREDENTIAL that the scrub redacts."""
PIECES = [
    *LABELLED,
    "\u0130pi_key ",  # dotted capital I and dotless i: lower() does not make them i
    "api\u0131key",
    "task-",
    CREDENTIAL,
    "plan PLAN-BASIC ",
    "input_tokens",
    " ",
    '"',
    "\u00e9\u65e5",
]


@pytest.mark.parametrize("piece", LABELLED)
def test_every_labelled_or_key_shaped_credential_is_flagged(piece: str) -> None:
    text = f'{{"text": "{piece}{CREDENTIAL}"}}'
    assert scrub_text(text) != text, piece  # the scrub acts on it ...
    assert might_hold_secret(text)  # ... so the prefilter must let it through


def test_an_ordinary_trace_is_not_flagged() -> None:
    """Not even for its usage's token counts, or a word that only starts like a label."""
    text = (
        '{"plan_id": "PLAN-BASIC", "notes": "task-0123456789 is processing", "usage": '
        '{"input_tokens": 1500}}' * 50
    )
    text += '{"text": "the API, its keys, a bearer bond, an access token"}'
    assert scrub_text(text) == text and not might_hold_secret(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join))
def test_might_hold_secret_says_yes_whenever_the_scrub_changes_the_text(text: str) -> None:
    if scrub_text(text) != text:
        assert might_hold_secret(text)


def test_the_case_insensitive_pattern_runs_only_on_a_label_found_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It crawls a long text (1.4 ms for a 13 KB trace): an ordinary trace must not pay it."""
    from agentprop._util import scrub

    searched: list[str] = []

    class Spy:
        def search(self, text: str) -> object:
            searched.append(text)
            return None

    monkeypatch.setattr(scrub, "_LABELLED", Spy())
    assert not might_hold_secret(
        '{"usage": {"input_tokens": 1500}, "text": "an access token"}' * 100
    )
    assert searched == []
    assert not might_hold_secret("Authorization: Bearer (none)")
    assert len(searched) == 1
