"""A session or model-call block left in another context than it was entered in (pytest ends
the session in a hook; a test's task may have begun it) restores the value it found instead of
raising ``ValueError: <Token> was created in a different Context``."""

from __future__ import annotations

import contextvars

from agentprop._decide.session import Session
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.context import ModelCallContext, model_call_context, model_context_in_force
from agentprop._util.scope import session_var


def test_a_session_entered_in_one_context_and_left_in_another_restores_the_outer_value() -> None:
    found = session_var.get()
    session = Session(budget=Budget())
    block = session.activate()
    contextvars.copy_context().run(block.__enter__)  # entered inside a copied context (a task's)
    assert session_var.get() is not session  # this context never saw it
    block.__exit__(None, None, None)  # left here: the token is foreign, no ValueError
    assert session_var.get() is found


def test_a_model_call_block_left_in_another_context_restores_the_value_it_found() -> None:
    found = model_context_in_force()  # a pytest-xdist worker's session may have set one
    outer = ModelCallContext(budget=Budget())
    with model_call_context(outer):
        inner = model_call_context(ModelCallContext(budget=Budget()))
        contextvars.copy_context().run(inner.__enter__)
        inner.__exit__(None, None, None)
        assert model_context_in_force() is outer
    assert model_context_in_force() is found
