"""A property drawn from a template: model-written wordings too, when pytest runs with
``--agentprop-input-model PROVIDER:MODEL`` (``run_pytest.py`` runs it so, against a loopback
model; without the option it draws the phrase packs' wordings alone).

Written for agentprop (see examples/THIRD_PARTY.md).
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given

import agentprop
from agentprop import strategies as aps
from agentprop.phrases import Paraphrase

SUPPORTOPS = Path(__file__).resolve().parent.parent / "supportops"
project = agentprop.load_project(SUPPORTOPS)
AGENT = agentprop.load_agent("agent:SupportOpsAgent", SUPPORTOPS)
CANCEL = project.scenario("END_CANCELLED<-N7_CANCEL")


@agentprop.agent_settings()
@given(first=aps.paraphrases(CANCEL.messages[0], max_transforms=1))
def test_cancelling_needs_auth_and_confirmation_however_it_is_written(first: Paraphrase) -> None:
    # with an input model, `first` is about half the time a text the model wrote (its
    # provenance step names the family: model:hedge(index=2)), else the template and packs
    agentprop.check(project, CANCEL, AGENT, messages=[first, CANCEL.messages[1]])
