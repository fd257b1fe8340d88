"""An agent backed by a model behind the OpenAI API, or any OpenAI-compatible server.

:class:`OpenAIAgent` speaks Chat Completions (``api="chat"``) or Responses (``api="responses"``)
through the official ``openai`` SDK. ``respond`` is a function tool whose parameters are the
response contract, and ``tool_choice`` is ``"required"`` by default, so a turn ends with
``respond``. Every call goes through :mod:`agentprop._modelapi.client`, as
:class:`~agentprop.agents.AnthropicAgent`'s do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from agentprop._agents.model_agent import (
    NUDGE,
    TOOL_CHOICES,
    ModelAgent,
    ToolChoice,
    run_tool_call,
)
from agentprop._modelapi.options import ModelOptions
from agentprop._modelapi.providers import OPENAI_CHAT, OPENAI_RESPONSES
from agentprop.errors import InvalidArgument

if TYPE_CHECKING:
    from agentprop._agents.runtime import TurnContext

__all__ = ["OpenAIAgent", "OpenAIChatConversation", "OpenAIResponsesConversation"]

Api = Literal["chat", "responses"]


def _error_text(text: str, is_error: bool) -> str:
    """A tool result's text; errors say so (OpenAI's tool results carry no error flag)."""
    return f"error: {text}" if is_error else text


class OpenAIAgent(ModelAgent):
    """A model-backed agent on the OpenAI API (Chat Completions or Responses); see the module
    docstring.

    Args:
        model: the model name sent to the API (e.g. ``"gpt-4.1-mini"``).
        api: ``"chat"`` (Chat Completions) or ``"responses"`` (the Responses API).
        system_prompt, tool_descriptions, max_steps, name, prompt_path, tool_descriptions_path:
            as for :class:`~agentprop.agents.AnthropicAgent`.
        temperature: 0 to 2 (``None``: not sent, the model's default). Some models (reasoning
            models) reject sampling parameters: leave them unset for those.
        top_p: nucleus sampling (``None``: not sent).
        max_tokens: the most output tokens per model call, sent as ``max_completion_tokens``
            (Chat) or ``max_output_tokens`` (Responses); reasoning tokens count against it.
        stop: stop sequences (Chat only).
        tool_choice: ``"required"`` (default: every reply calls a tool), ``"auto"`` (a
            reply may be text only; it then gets one reminder to call ``respond``) or ``"none"``
            (no tool may be called, ``respond`` included: every turn ends without a response;
            for seeing what a model or server does without tools).
        parallel_tool_calls: sent when set (``None``: the API's default, which allows them).
        stream: receive replies as server-sent events.
        extra_body: more request body fields (e.g. ``{"reasoning_effort": "low"}`` for Chat,
            ``{"reasoning": {"effort": "low"}}`` for Responses), sent as they are and part of
            the cache key and the fingerprint.
        base_url: the endpoint (default: ``OPENAI_BASE_URL``, else OpenAI's), e.g.
            ``http://localhost:8000/v1`` for vLLM.
        api_key: the key (default: ``OPENAI_API_KEY``). Never stored. Not needed for replays,
            nor for a ``base_url`` that is not ``api.openai.com``.
        cache, cache_mode, budget, retry_policy, timeout, max_concurrent_requests: as for
            :class:`~agentprop.agents.AnthropicAgent` (the model-client layer's options).
    """

    agent_kind = "openai"
    temperature_max = 2.0
    extra_clashes = frozenset(
        {
            "model",
            "messages",
            "input",
            "instructions",
            "tools",
            "tool_choice",
            "max_tokens",
            "max_completion_tokens",
            "max_output_tokens",
            "temperature",
            "top_p",
            "stop",
            "stream",
            "parallel_tool_calls",
        }
    )

    def __init__(
        self,
        model: str,
        *,
        options: ModelOptions | None = None,
        api: Api = "chat",
        stop: Sequence[str] | None = None,
        tool_choice: ToolChoice = "required",
        parallel_tool_calls: bool | None = None,
        **keywords: Any,
    ) -> None:
        if api not in ("chat", "responses"):
            raise InvalidArgument(
                f"api={api!r} must be 'chat' (Chat Completions) or 'responses' (the Responses API)."
            )
        if tool_choice not in TOOL_CHOICES:
            raise InvalidArgument(
                f"tool_choice={tool_choice!r} must be 'required', 'auto' or 'none'."
            )
        if stop is not None and api == "responses":
            raise InvalidArgument(
                "stop= is a Chat Completions parameter; the Responses API has no stop sequences."
            )
        if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
            raise InvalidArgument(
                f"parallel_tool_calls={parallel_tool_calls!r} must be True, False or None."
            )
        super().__init__(
            model,
            OPENAI_CHAT if api == "chat" else OPENAI_RESPONSES,
            self._options_from(keywords, options),
        )
        self.api: Api = api
        self.stop = list(stop) if stop else None
        self.tool_choice = tool_choice
        self.parallel_tool_calls = parallel_tool_calls

    @classmethod
    def _example_model(cls) -> str:
        return "gpt-4.1-mini"

    @property
    def stream(self) -> bool:
        return self.client.stream

    def _own_options(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "stop": self.stop,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
        }

    def _fingerprint_payload(self) -> dict[str, Any]:
        return {
            "agent": "agentprop.OpenAIAgent/1",
            "api": self.api,
            "model": self.model,
            "system": self.system_prompt,
            "tool_descriptions": self.tool_descriptions,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": self.stop,
            "max_tokens": self.max_tokens,
            "max_steps": self.max_steps,
            "tool_choice": self.tool_choice,
            "parallel_tool_calls": self.parallel_tool_calls,
            "extra_body": self.extra_body,
        }

    def factory(self) -> OpenAIChatConversation | OpenAIResponsesConversation:
        """A fresh agent for one conversation (this method is an agent factory)."""
        return (
            OpenAIChatConversation(self)
            if self.api == "chat"
            else OpenAIResponsesConversation(self)
        )

    def __call__(self) -> OpenAIChatConversation | OpenAIResponsesConversation:
        return self.factory()

    # -- requests --------------------------------------------------------------------------------

    def _format_tool(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        if self.api == "chat":
            return {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": schema},
            }
        # the Responses API makes function tools strict unless told otherwise; spec schemas are
        # ordinary JSON Schemas (optional fields, no additionalProperties: false)
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": schema,
            "strict": False,
        }

    def _request_options(self) -> tuple[Any, ...]:
        return (
            self.api,
            self.model,
            self.max_tokens,
            self.temperature,
            self.top_p,
            self.stop,
            self.tool_choice,
            self.parallel_tool_calls,
            self.extra_body,
        )

    def request(
        self, *, system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The request body of one call (what is sent and what the cache keys). ``messages``
        is the conversation: Chat messages (the system message first), or Responses input
        items."""
        if self.api == "chat":
            body: dict[str, Any] = {
                "model": self.model,
                "messages": messages,
                "tools": tools,
                "tool_choice": self.tool_choice,
                "max_completion_tokens": self.max_tokens,
            }
        else:
            body = {
                "model": self.model,
                "instructions": system,
                "input": messages,
                "tools": tools,
                "tool_choice": self.tool_choice,
                "max_output_tokens": self.max_tokens,
                "store": False,
            }
        for name, value in (
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("stop", self.stop),
            ("parallel_tool_calls", self.parallel_tool_calls),
        ):
            if value is not None:
                body[name] = value
        body.update(self.extra_body)
        return body


# --------------------------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------------------------


class _Conversation(ABC):
    """The loop shared by both APIs; subclasses read replies and write the conversation."""

    def __init__(self, config: OpenAIAgent) -> None:
        self.config = config
        self._carry: list[dict[str, Any]] = []
        self._system: str | None = None
        self._tools: list[dict[str, Any]] | None = None

    @property
    @abstractmethod
    def _conversation(self) -> list[dict[str, Any]]:
        """The conversation so far, in the API's input format."""

    @abstractmethod
    def _open_turn(self, message: str) -> None:
        """Add the user's message of a new turn."""

    @abstractmethod
    def _take_reply(
        self, response: dict[str, Any], ctx: TurnContext
    ) -> tuple[list[tuple[str, str, Any]], bool]:
        """Record the reply (text said, the assistant's part of the conversation); returns its
        tool calls as ``(call id, name, arguments)`` and whether the model refused."""

    @abstractmethod
    def _result(self, call_id: str, text: str) -> dict[str, Any]:
        """The conversation item that answers tool call ``call_id`` with ``text``."""

    @abstractmethod
    def _nudge(self) -> dict[str, Any]:
        """The user item that reminds the model to end its turn with ``respond``."""

    async def turn(self, message: str, ctx: TurnContext) -> None:
        cfg = self.config
        if self._tools is None:
            self._tools = cfg._tools_for(ctx.spec)
            self._system = cfg.system_for(ctx.spec, ctx.context)
            self._start(self._system)
        assert self._system is not None
        self._conversation.extend(self._carry)
        self._carry = []
        self._open_turn(message)
        shape = cfg._shape(self._system, self._tools)
        for step in range(cfg.max_steps):
            result = await cfg.turn_step(
                ctx,
                shape,
                system=self._system,
                tools=self._tools,
                messages=list(self._conversation),
                step=step,
            )
            calls, refused = self._take_reply(result.response, ctx)
            results: list[dict[str, Any]] = []
            responded = False
            for call_id, name, arguments in calls:
                outcome = run_tool_call(ctx, name, arguments)
                responded = responded or outcome.responded
                results.append(self._result(call_id, _error_text(outcome.text, outcome.is_error)))
            if responded:
                self._carry = results  # answered at the start of the next turn
                return
            if results:
                self._conversation.extend(results)
            elif refused:
                return
            else:
                self._conversation.append(self._nudge())
        # step limit reached: the runtime records no_respond; pending results open the next turn

    def _start(self, system: str) -> None:  # noqa: B027 (a hook: most APIs need nothing at the start)
        """Begin the conversation with ``system`` (a hook; nothing by default)."""


class OpenAIChatConversation(_Conversation):
    """One conversation on Chat Completions: ``messages`` (the system message first)."""

    def __init__(self, config: OpenAIAgent) -> None:
        super().__init__(config)
        self.messages: list[dict[str, Any]] = []
        """The conversation as sent to the API (plain JSON)."""

    @property
    def _conversation(self) -> list[dict[str, Any]]:
        return self.messages

    def _start(self, system: str) -> None:
        self.messages.append({"role": "system", "content": system})

    def _open_turn(self, message: str) -> None:
        self.messages.append({"role": "user", "content": message})

    def _take_reply(
        self, response: dict[str, Any], ctx: TurnContext
    ) -> tuple[list[tuple[str, str, Any]], bool]:
        choice = (response.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message.get("content")
        refusal = message.get("refusal")
        for said in (text, refusal):
            if isinstance(said, str) and said.strip():
                ctx.say(said)
        calls: list[tuple[str, str, Any]] = []
        sent: list[dict[str, Any]] = []
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            function = call.get("function") or {}
            call_id, name, arguments = (
                str(call.get("id", "")),
                str(function.get("name", "")),
                function.get("arguments", ""),
            )
            calls.append((call_id, name, arguments if isinstance(arguments, (str, dict)) else ""))
            sent.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": arguments if isinstance(arguments, str) else "",
                    },
                }
            )
        if sent or (isinstance(text, str) and text):
            assistant: dict[str, Any] = {
                "role": "assistant",
                "content": text if isinstance(text, str) else None,
            }
            if sent:
                assistant["tool_calls"] = sent
            self.messages.append(assistant)
        refused = bool(refusal) or choice.get("finish_reason") == "content_filter"
        return calls, refused

    def _result(self, call_id: str, text: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": text}

    def _nudge(self) -> dict[str, Any]:
        return {"role": "user", "content": NUDGE}


class OpenAIResponsesConversation(_Conversation):
    """One conversation on the Responses API: ``input`` items (the model's output items are
    passed back as they came, reasoning items left out: with ``store: false`` they could not be
    resolved)."""

    def __init__(self, config: OpenAIAgent) -> None:
        super().__init__(config)
        self.input: list[dict[str, Any]] = []
        """The conversation as sent to the API (plain JSON)."""

    @property
    def _conversation(self) -> list[dict[str, Any]]:
        return self.input

    def _open_turn(self, message: str) -> None:
        self.input.append({"role": "user", "content": message})

    def _take_reply(
        self, response: dict[str, Any], ctx: TurnContext
    ) -> tuple[list[tuple[str, str, Any]], bool]:
        calls: list[tuple[str, str, Any]] = []
        refused = False
        for item in response.get("output") or []:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "message":
                for part in item.get("content") or []:
                    if not isinstance(part, dict):
                        continue
                    said = (
                        part.get("text")
                        if part.get("type") == "output_text"
                        else part.get("refusal")
                        if part.get("type") == "refusal"
                        else None
                    )
                    refused = refused or part.get("type") == "refusal"
                    if isinstance(said, str) and said.strip():
                        ctx.say(said)
            elif kind == "function_call":
                arguments = item.get("arguments", "")
                calls.append(
                    (
                        str(item.get("call_id", "")),
                        str(item.get("name", "")),
                        arguments if isinstance(arguments, str) else "",
                    )
                )
            if kind != "reasoning":
                self.input.append(item)
        return calls, refused

    def _result(self, call_id: str, text: str) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": call_id, "output": text}

    def _nudge(self) -> dict[str, Any]:
        return {"role": "user", "content": NUDGE}
