"""Run a PydanticAI agent under agentprop (``pip install "agentprop[pydantic-ai]"``).

:func:`pydantic_ai_agent` builds a ``pydantic_ai.Agent`` with the spec's tools and the response
contract as ``output_type``; :class:`PydanticAIAgent` wraps one, one instance per conversation,
one ``agent.run`` per turn. The trace holds what reached the world: a call PydanticAI rejects
itself never does. Token usage is recorded, its cost is not (counted $0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, Tool

from agentprop._agents.runtime import TurnContext
from agentprop._spec.model import Spec
from agentprop._spec.response import response_model
from agentprop.adapters import bind, current_turn, tool_error_text, typed_function
from agentprop.errors import ToolError

DEFAULT_TOOL_RETRIES = 5
"""How often a tool may fail in one turn before PydanticAI gives up (its own default is 1,
too few for a world that injects failures and expects retries)."""


def _retrying(tool: str) -> Callable[[dict[str, Any]], Any]:
    def call(args: dict[str, Any]) -> Any:
        try:
            return current_turn().call(tool, **args)
        except ToolError as exc:
            raise ModelRetry(tool_error_text(exc)) from None

    return call


def pydantic_ai_tools(spec: Spec, *, max_retries: int = DEFAULT_TOOL_RETRIES) -> list[Tool[Any]]:
    """The spec's tools as PydanticAI tools acting on the bound turn (``respond`` is not one:
    it is the agent's output, :func:`response_model`)."""
    return [
        Tool(
            typed_function(t.name, t.description, t.input_schema, _retrying(t.name), is_async=True),
            name=t.name,
            max_retries=max_retries,
        )
        for t in spec.action_tools
    ]


def pydantic_ai_agent(
    spec: Spec, model: Any, *, tools: Sequence[Tool[Any]] | None = None, **agent_kwargs: Any
) -> Agent[Any, Any]:
    """A ``pydantic_ai.Agent`` for ``spec``: its tools, and the response contract as the
    output type. ``agent_kwargs`` (``instructions``, ``model_settings``, ...) go to ``Agent``."""
    return Agent(
        model,
        output_type=response_model(spec),
        tools=list(tools) if tools is not None else pydantic_ai_tools(spec),
        **agent_kwargs,
    )


class PydanticAIAgent:
    """An agentprop agent running a PydanticAI agent: one instance per conversation.

    Each turn runs ``agent.run(message, message_history=...)`` with the spec's tools bound to
    the turn, then responds with the run's output (a model of the response contract, or a
    ``dict``); text output is said to the user and the turn ends without ``respond``. Token
    usage is recorded per turn. ``deps`` is passed to every run, and ``model``, when given,
    overrides the agent's model (one ``Agent`` built once can serve every conversation).
    """

    def __init__(self, agent: Agent[Any, Any], *, model: Any = None, deps: Any = None) -> None:
        self.agent = agent
        self.model = model
        self.deps = deps
        self.history: list[Any] = []

    async def turn(self, message: str, ctx: TurnContext) -> None:
        with bind(ctx):
            result = await self.agent.run(
                message, message_history=self.history, deps=self.deps, model=self.model
            )
        self.history = list(result.all_messages())
        usage = result.usage
        if not hasattr(usage, "input_tokens"):  # older PydanticAI: a method
            usage = usage()
        ctx.add_usage(
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            model_calls=usage.requests or 0,
        )
        output = result.output
        if isinstance(output, BaseModel):
            ctx.respond(**output.model_dump(exclude_unset=True))
        elif isinstance(output, dict):
            ctx.respond(**output)
        else:
            ctx.say(str(output))


class PlayedModel:
    """A scripted PydanticAI model played by a plain-Python agent, for offline tests.

    ``PlayedModel(agent, spec=spec).model`` is a ``FunctionModel`` whose every decision is the
    agent's: a turn starts the agent's ``turn(message, ctx)`` (see
    :class:`agentprop.testing.puppet.TurnPuppet`), each of its ``ctx.call`` becomes a tool
    call the framework executes through the adapter's tools, the result (or the retry text of
    a tool error, read back as a :class:`~agentprop.ToolError`) is handed back to it, and its
    ``ctx.respond`` becomes the final output. The agent draws from the runtime's random source
    for the case and trial, so with the same agent the trace equals the in-process run's.
    """

    def __init__(self, agent: Any, *, spec: Spec) -> None:
        from pydantic_ai.models.function import FunctionModel

        self.agent = agent
        self.spec = spec
        self._puppet: Any = None
        self.model = FunctionModel(self._step, model_name="played-agent")

    async def _step(self, messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import (
            ModelResponse,
            RetryPromptPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )

        from agentprop.testing.puppet import Call, Finished, Respond, TurnPuppet

        parts = list(messages[-1].parts)
        prompts = [p for p in parts if isinstance(p, UserPromptPart)]
        output_tools = {t.name for t in info.output_tools}
        if prompts or self._puppet is None:
            # a new turn (the request may also carry the previous run's final-result return)
            if self._puppet is not None:
                self._puppet.abandon()
            ctx = current_turn()
            self._puppet = TurnPuppet(
                self.agent.turn,
                str(prompts[-1].content if prompts else ""),
                spec=self.spec,
                context=ctx.context,
                rng=ctx.rng,
                turn_index=ctx.turn_index,
                memory=ctx.memory,
            )
        else:
            for part in parts:
                if not isinstance(part, (ToolReturnPart, RetryPromptPart)):
                    continue
                if part.tool_name in output_tools:
                    raise RuntimeError(
                        f"the framework rejected the played agent's response: {part.content}"
                    )
                if (
                    isinstance(part, ToolReturnPart)
                    and getattr(part, "outcome", "success") == "success"
                ):
                    self._puppet.answer(part.content)
                # a retry: a RetryPromptPart, or (PydanticAI 2) a return whose
                # outcome is not success
                else:
                    text = (
                        part.content
                        if isinstance(part.content, str)
                        else f"invalid_arguments: {part.content}"
                    )
                    kind, _, message = text.partition(": ")
                    self._puppet.answer(
                        error=ToolError(kind if message else "tool_error", message or text)
                    )
        action = await self._puppet.next_action()
        if isinstance(action, Call):
            return ModelResponse(parts=[ToolCallPart(tool_name=action.name, args=action.args)])
        if isinstance(action, Respond):
            self._puppet.answer({"acknowledged": True})
            return ModelResponse(
                parts=[ToolCallPart(tool_name=info.output_tools[0].name, args=action.fields)]
            )
        assert isinstance(action, Finished)
        self._puppet = None
        if action.error is not None:
            raise action.error
        raise RuntimeError("the played agent ended its turn without respond")


__all__ = [
    "DEFAULT_TOOL_RETRIES",
    "PlayedModel",
    "PydanticAIAgent",
    "pydantic_ai_agent",
    "pydantic_ai_tools",
]
