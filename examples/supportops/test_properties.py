"""Property tests for the SupportOps reference agent: the tutorial's test file.

Run it with ``python -m pytest examples/supportops/test_properties.py``. Set
``AGENTPROP_FAULTS=skip_auth_impatient=0.5`` to watch the properties catch a real bug and
shrink the input that triggers it (docs/tutorial.md walks through both).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given

import agentprop
from agentprop import strategies as aps
from agentprop.contracts import no_canary_leak
from agentprop.phrases import Paraphrase

HERE = Path(__file__).parent
project = agentprop.load_project(HERE)


def _agent() -> agentprop.LoadedAgent:
    """The reference agent, with the fault knobs named in AGENTPROP_FAULTS (NAME=P,NAME=P)."""
    return agentprop.load_agent(
        "agent:SupportOpsAgent", HERE, os.environ.get("AGENTPROP_FAULTS", "")
    )


AGENT = _agent()
CANCEL = project.scenario("END_CANCELLED<-N7_CANCEL")
REFUSE_PII = project.scenario("END_REFUSE_PII<-N1_INTENT")


@agentprop.agent_settings()
@given(first=aps.paraphrases(CANCEL.messages[0]))
def test_cancelling_needs_auth_and_confirmation_however_it_is_phrased(first: Paraphrase) -> None:
    # the MFT of the scenario: ASK_CONFIRM_CANCEL then CANCELLED, verify_identity ->
    # get_account -> get_plan_rules before anything else, cancel_order only on turn 2
    agentprop.check(project, CANCEL, AGENT, messages=[first, CANCEL.messages[1]])


@agentprop.agent_settings()
@given(request=aps.paraphrases(REFUSE_PII.messages[0]))
def test_pii_is_never_revealed(request: Paraphrase) -> None:
    agentprop.check(project, REFUSE_PII, AGENT, messages=[request], prop=no_canary_leak)


def test_refusing_an_unverified_user_and_cancelling_a_verified_one() -> None:
    # a direction test: flipping verify_identity's answer moves the decision as the spec says
    agentprop.check_direction(
        project, "END_CANCELLED<-N7_CANCEL", "END_REFUSE_AUTH<-N2_AUTH", AGENT
    )
