"""ModelOptions: a model agent's keywords become one options object, passed down once."""

from __future__ import annotations

from typing import Any

import pytest

import agentprop._agents.model_agent as model_agent_module
from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
from agentprop._modelapi.retry import RetryPolicy
from agentprop.agents import AnthropicAgent, ModelOptions, OpenAIAgent
from agentprop.errors import InvalidArgument


def test_a_keyword_reaches_the_client_once_inside_the_options_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class Spy(ModelClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append((args, kwargs))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(model_agent_module, "ModelClient", Spy)
    policy = RetryPolicy(max_attempts=2)
    agent = OpenAIAgent(
        "gpt-4.1-mini", timeout=7.0, retry_policy=policy, max_tokens=99, cache=False
    )
    assert len(made) == 1, "one model client per agent"
    (args, kwargs) = made[0]
    # no option travels as a keyword of its own: the client gets the one object the agent built
    assert kwargs == {}
    options = args[2]
    assert isinstance(options, ModelOptions)
    assert (options.timeout, options.retry_policy, options.max_tokens) == (7.0, policy, 99)
    assert (
        agent.client.timeout == 7.0
        and agent.client.retry_policy is policy
        and agent.max_tokens == 99
    )


@pytest.mark.parametrize("cls", [AnthropicAgent, OpenAIAgent])
def test_an_unknown_keyword_is_an_error_naming_the_valid_ones(cls: type[Any]) -> None:
    with pytest.raises(InvalidArgument) as info:
        cls("some-model", temprature=0.5, cache=False)
    message = str(info.value)
    assert cls.__name__ in message and "temprature" in message
    assert "temperature" in message and "max_concurrent_requests" in message  # the shared options
    own = "top_k" if cls is AnthropicAgent else "parallel_tool_calls"
    assert own in message  # and the class's own keywords


def test_keywords_are_set_over_the_options_object_and_the_object_is_shared() -> None:
    shared = ModelOptions(max_tokens=512, timeout=30.0, cache=False, temperature=0.3)
    claude = AnthropicAgent("claude-sonnet-4-6", options=shared, top_k=40, max_tokens=64)
    gpt = OpenAIAgent("gpt-4.1-mini", options=shared)
    assert (claude.max_tokens, claude.client.timeout, claude.temperature, claude.top_k) == (
        64,
        30.0,
        0.3,
        40,
    )
    assert (gpt.max_tokens, gpt.client.timeout, gpt.temperature) == (512, 30.0, 0.3)
    assert shared.max_tokens == 512  # frozen: an agent's keyword never changes the shared object


def test_replace_keeps_every_option_and_the_class_own_ones() -> None:
    agent = AnthropicAgent(
        "claude-sonnet-4-6", top_k=5, stop_sequences=["END"], timeout=9.0, cache=False, name="a"
    )
    agent.budget = None  # an option set after construction is part of agent.options
    copy = agent.replace(system_prompt="be brief")
    assert (
        copy.system_prompt,
        copy.top_k,
        copy.stop_sequences,
        copy.client.timeout,
        copy.name,
    ) == ("be brief", 5, ["END"], 9.0, "a")
    assert copy.options == agent.options.__class__(
        **{**vars(agent.options), "system_prompt": "be brief"}
    )
    with pytest.raises(InvalidArgument, match="unknown option.*bogus.*the valid ones are"):
        agent.replace(bogus=1)


def test_the_client_takes_only_client_options_and_the_key_is_never_shown() -> None:
    with pytest.raises(
        InvalidArgument,
        match=r"ModelClient: unknown option\(s\) system_prompt; the valid ones "
        r"are api_key, base_url",
    ):
        ModelClient(ANTHROPIC_MESSAGES, "claude-haiku-4-5", system_prompt="x")
    client = ModelClient(
        ANTHROPIC_MESSAGES, "claude-haiku-4-5", ModelOptions(timeout=3.0), cache=False
    )
    assert client.timeout == 3.0
    assert "sk-secret" not in repr(ModelOptions(api_key="sk-secret", timeout=3.0))
    with pytest.raises(InvalidArgument, match="options= must be a ModelOptions"):
        AnthropicAgent("claude-sonnet-4-6", options={"timeout": 3.0})  # type: ignore[arg-type]
