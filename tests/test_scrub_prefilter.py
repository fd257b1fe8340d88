"""might_hold_secret answers for a whole trace's JSON before it is scrubbed string by string, so
it must never say no where scrub_text would change the text: its substring prefilter (found
with the case-insensitive label pattern's quirks) is checked against scrub_text itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentprop._util.scrub import might_hold_secret, scrub_text

CREDENTIAL = "abcdefghijklmnop0123456789"
PIECES = [
    "Bearer ",
    "BEARER\t",
    "x-api-key: ",
    "X-API-\u212aEY=",  # the Kelvin sign, which (?i) reads as k
    "api_key='",
    "ApiKey ",
    "auth-token: ",
    "acce\u017f\u017f_token=",  # the long s, which (?i) reads as s and lower() keeps
    "\u0130pi_key ",  # dotted capital I, which (?i) reads as i
    "api\u0131key",
    "sk-ant-api03-",
    "sk-proj-",
    "task-",
    CREDENTIAL,
    "plan PLAN-BASIC ",
    " ",
    '"',
    "\u00e9\u65e5",
]


@pytest.mark.parametrize("piece", PIECES[:6] + PIECES[7:8] + PIECES[10:12])
def test_every_labelled_or_key_shaped_credential_is_flagged(piece: str) -> None:
    text = f'{{"text": "{piece}{CREDENTIAL}"}}'
    assert scrub_text(text) != text, piece  # the scrub acts on it ...
    assert might_hold_secret(text)  # ... so the prefilter must let it through


def test_ordinary_text_is_not_flagged() -> None:
    text = '{"account_id": "A1", "plan_id": "PLAN-BASIC", "notes": "task-0123456789 is processing"}' * 50
    assert scrub_text(text) == text and not might_hold_secret(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join))
def test_might_hold_secret_says_yes_whenever_the_scrub_changes_the_text(text: str) -> None:
    if scrub_text(text) != text:
        assert might_hold_secret(text)
