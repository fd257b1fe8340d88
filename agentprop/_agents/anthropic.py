"""An agent backed by a real model through the Anthropic Messages API.

:class:`AnthropicAgent` is a configuration and an agent factory; each conversation is an
:class:`AnthropicConversation`. A turn is the tool-use loop with a ``respond`` tool whose schema
is the response contract; tool errors and contract violations go back to the model as error
results; the turn ends when ``respond`` succeeds or after ``max_steps`` calls. Every call goes
through :mod:`agentprop._modelapi.client`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentprop._agents.model_agent import (
    NUDGE,
    RESPOND_TOOL,
    TOOL_CHOICES,
    ModelAgent,
    ToolChoice,
    default_system_prompt,
    run_tool_call,
)
from agentprop._modelapi.client import (
    DEFAULT_API_CACHE_PATH,
    OFFLINE_API_KEY,
    ModelReply,
    default_cache_mode,
    open_api_cache,
)
from agentprop._modelapi.options import ModelOptions
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
from agentprop.errors import ApiUnavailable, InvalidArgument, MissingApiKey, ModelCallError

if TYPE_CHECKING:
    from agentprop._agents.runtime import TurnContext

__all__ = [
    "DEFAULT_API_CACHE_PATH",
    "OFFLINE_API_KEY",
    "RESPOND_TOOL",
    "AnthropicAgent",
    "AnthropicConversation",
    "ApiUnavailable",
    "MissingApiKey",
    "ModelCallError",
    "default_cache_mode",
    "default_system_prompt",
    "open_api_cache",
]


class AnthropicAgent(ModelAgent):
    """A model-backed agent on the Anthropic Messages API: the TDAD compiled artifact (prompt +
    tool descriptions) plus the model and how to call it.

    Args:
        model: the model name sent to the API (e.g. ``"claude-sonnet-4-6"``).
        system_prompt: the system prompt; ``None`` builds a plain one from the spec (policies,
            assumptions, the runtime context and the ``respond`` rule).
        tool_descriptions: tool name -> description shown to the model, overriding the spec's
            description of that tool (``respond`` included). Unlisted tools keep the spec's.
        temperature, top_p, top_k, stop_sequences: sampling parameters (``None``: the API's
            default; not sent).
        max_tokens: the most output tokens per model call.
        max_steps: the most model calls in one turn; past it the turn ends without ``respond``.
        tool_choice: ``None`` (default: not sent, the API's ``auto``), ``"auto"``, ``"required"``
            (sent as ``{"type": "any"}``: every reply calls a tool) or ``"none"`` (no tool may be
            called, ``respond`` included).
        extra_body: more request body fields, sent as they are and part of the cache key and the
            fingerprint (e.g. ``{"output_config": {"effort": "low"}}`` or ``{"thinking": ...}``).
        base_url: the API endpoint (default: ``ANTHROPIC_BASE_URL``, else Anthropic's).
        api_key: the key (default: ``ANTHROPIC_API_KEY``). Never stored in the cache. Not needed
            for replays, nor for a ``base_url`` that is not Anthropic's (a local test server).
        cache: an :class:`ApiCache`, a path to one, ``None`` for :data:`DEFAULT_API_CACHE_PATH`,
            or ``False`` for no cache.
        cache_mode: the mode when ``cache`` is a path or ``None`` (default: the run context's,
            :func:`default_cache_mode`).
        budget: the budget to charge (default: the run context's -- the budget of the check
            running the agent, or the session's). Its price table prices the calls.
        retry_policy: how API errors are retried (429/5xx/529/timeouts; ``retry-after`` honoured
            within the turn's deadline).
        timeout: seconds for one HTTP attempt.
        max_concurrent_requests: the starting (and highest) number of API requests in flight
            per event loop; halved on 429/529, then raised again as calls succeed.
        name: how the agent is named in reports (default ``anthropic:<model>``).
        prompt_path, tool_descriptions_path: where the prompt and descriptions came from (for
            error messages; :meth:`from_files` sets them).
    """

    agent_kind = "anthropic"
    extra_clashes = frozenset(
        {
            "model",
            "messages",
            "system",
            "tools",
            "tool_choice",
            "max_tokens",
            "temperature",
            "top_p",
            "top_k",
            "stop_sequences",
            "stream",
        }
    )

    def __init__(
        self,
        model: str,
        *,
        options: ModelOptions | None = None,
        top_k: int | None = None,
        stop_sequences: Sequence[str] | None = None,
        tool_choice: ToolChoice | None = None,
        **keywords: Any,
    ) -> None:
        super().__init__(model, ANTHROPIC_MESSAGES, self._options_from(keywords, options))
        if tool_choice is not None and tool_choice not in TOOL_CHOICES:
            raise InvalidArgument(
                f"tool_choice={tool_choice!r} must be None, 'auto', 'required' or 'none'."
            )
        self.top_k = top_k
        self.stop_sequences = list(stop_sequences) if stop_sequences else None
        self.tool_choice: ToolChoice | None = tool_choice

    @classmethod
    def _example_model(cls) -> str:
        return "claude-sonnet-4-6"

    def _own_options(self) -> dict[str, Any]:
        return {
            "top_k": self.top_k,
            "stop_sequences": self.stop_sequences,
            "tool_choice": self.tool_choice,
        }

    def _fingerprint_payload(self) -> dict[str, Any]:
        # unset: fingerprints as before
        chosen = {"tool_choice": self.tool_choice} if self.tool_choice is not None else {}
        return {
            **chosen,
            "agent": "agentprop.AnthropicAgent/1",
            "model": self.model,
            "system": self.system_prompt,
            "tool_descriptions": self.tool_descriptions,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "stop_sequences": self.stop_sequences,
            "max_tokens": self.max_tokens,
            "max_steps": self.max_steps,
            "extra_body": self.extra_body,
        }

    def factory(self) -> AnthropicConversation:
        """A fresh agent for one conversation (this method is an agent factory)."""
        return AnthropicConversation(self)

    def __call__(self) -> AnthropicConversation:
        return AnthropicConversation(self)

    # -- requests --------------------------------------------------------------------------------

    def _format_tool(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "description": description, "input_schema": schema}

    def _request_options(self) -> tuple[Any, ...]:
        return (
            self.model,
            self.max_tokens,
            self.temperature,
            self.top_p,
            self.top_k,
            self.stop_sequences,
            self.tool_choice,
            self.extra_body,
        )

    def request(
        self, *, system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The Messages API request body for one call (what is sent and what the cache keys)."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": messages,
            "tools": tools,
            **self.extra_body,
        }
        for name, value in (
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("top_k", self.top_k),
            ("stop_sequences", self.stop_sequences),
        ):
            if value is not None:
                body[name] = value
        if self.tool_choice is not None:
            body["tool_choice"] = {
                "type": "any" if self.tool_choice == "required" else self.tool_choice
            }
        return body

    def charge(self, result: ModelReply) -> tuple[int, int, float]:
        """(input tokens, output tokens, dollars) of a reply (the budget was charged when the
        call was made; an unknown price counts as 0 here)."""
        usage = result.usage
        return usage.all_input_tokens, usage.output_tokens, result.cost_usd or 0.0


# --------------------------------------------------------------------------------------------
# One conversation
# --------------------------------------------------------------------------------------------


def _tool_result(tool_use_id: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


class AnthropicConversation:
    """The agent for one conversation: the Messages API history across turns."""

    def __init__(self, config: AnthropicAgent) -> None:
        self.config = config
        self.messages: list[dict[str, Any]] = []
        """The conversation as sent to the API (plain JSON)."""
        self._carry: list[dict[str, Any]] = []
        self._system: str | None = None
        self._tools: list[dict[str, Any]] | None = None

    def _push_user(self, blocks: list[dict[str, Any]]) -> None:
        """Add user content, merging into a trailing user message (never mutated in place:
        earlier requests keep their own lists)."""
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == "user":
            last = self.messages[-1]
            self.messages[-1] = {"role": "user", "content": [*last["content"], *blocks]}
        else:
            self.messages.append({"role": "user", "content": list(blocks)})

    async def turn(self, message: str, ctx: TurnContext) -> None:
        cfg = self.config
        if self._tools is None:
            self._tools = cfg._tools_for(ctx.spec)
            self._system = cfg.system_for(ctx.spec, ctx.context)
        assert self._system is not None
        self._push_user([*self._carry, {"type": "text", "text": message}])
        self._carry = []
        # every request of the turn has the same fields but its messages: key them through one
        # shape (built from, and checked against, this turn's tools, prompt and options)
        shape = cfg._shape(self._system, self._tools)
        for step in range(cfg.max_steps):
            result = await cfg.turn_step(
                ctx,
                shape,
                system=self._system,
                tools=self._tools,
                messages=list(self.messages),
                step=step,
            )
            response = result.response
            content = [b for b in (response.get("content") or []) if isinstance(b, dict)]
            if content:
                self.messages.append({"role": "assistant", "content": content})
            results, responded = self._execute(content, ctx)
            if responded:
                self._carry = results
                return
            if results:
                self._push_user(results)
            elif response.get("stop_reason") == "refusal":
                return
            else:
                self._push_user([{"type": "text", "text": NUDGE}])
        # step limit reached: the runtime records no_respond; pending results open the next turn

    def _execute(
        self, content: list[dict[str, Any]], ctx: TurnContext
    ) -> tuple[list[dict[str, Any]], bool]:
        results: list[dict[str, Any]] = []
        responded = False
        for block in content:
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    ctx.say(text)
                continue
            if kind != "tool_use":
                continue
            outcome = run_tool_call(ctx, str(block.get("name", "")), block.get("input"))
            responded = responded or outcome.responded
            results.append(
                _tool_result(str(block.get("id", "")), outcome.text, is_error=outcome.is_error)
            )
        return results, responded
