"""What every model-backed agent shares, whatever API it speaks.

:class:`ModelAgent` is a configuration over a :class:`~agentprop._modelapi.client.ModelClient`
and an agent factory: option checks, fingerprint, the tools shown to the model (with
``respond``), the system prompt; :func:`run_tool_call` runs one tool call in the test world and
says what to answer, so the model can correct bad arguments.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import marshal
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentprop._agents.loading import LoadedAgent
from agentprop._agents.prompt import (
    check_tool_descriptions,
    load_prompt,
    load_tool_descriptions,
)
from agentprop._agents.runtime import TurnContext
from agentprop._modelapi.cache import ApiCache, CacheMode, canonical_json
from agentprop._modelapi.client import ModelClient, ModelReply
from agentprop._modelapi.options import ModelOptions
from agentprop._modelapi.providers import Provider, TextPrompt
from agentprop._modelapi.retry import RetryStats
from agentprop._scenario.world import copy_json
from agentprop._spec.implied import implied_decision
from agentprop._spec.model import Spec
from agentprop._spec.response import respond_tool_schema
from agentprop.errors import (
    ApiUnavailable,
    CacheError,
    DeadlineExceeded,
    InfrastructureError,
    InvalidArgument,
    MissingDependency,
    ModelCallError,
    ToolError,
)

__all__ = [
    "RESPOND_TOOL",
    "TOOL_CHOICES",
    "ModelAgent",
    "ToolChoice",
    "ToolOutcome",
    "default_system_prompt",
    "model_call_error",
    "run_tool_call",
]

RESPOND_TOOL = "respond"
"""The name of the tool that ends a turn with the structured response."""

ToolChoice = Literal["auto", "required", "none"]
TOOL_CHOICES: tuple[ToolChoice, ...] = ("auto", "required", "none")
"""Whether a reply may, must, or must not call a tool (OpenAI's names; the Messages API calls
``required`` ``any``)."""

NUDGE = (
    "You ended your turn without calling the `respond` tool. Every turn must end with exactly one "
    "call of `respond`; call it now."
)

_DEFAULT_RESPOND_DESCRIPTION = (
    "Submit the structured response for this turn. Call it exactly once per turn, "
    "as the final action."
)


class _ClientOption:
    """An agent attribute that lives on its model client (so setting it on the agent, as the
    CLI does with ``agent.budget = ...``, changes the calls it makes)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, agent: Any, owner: type | None = None) -> Any:
        if agent is None:
            return self
        return getattr(agent.client, self.name)

    def __set__(self, agent: Any, value: Any) -> None:
        setattr(agent.client, self.name, value)


class ModelAgent(ABC):
    """The shared configuration of a model-backed agent; see the module docstring.

    Subclasses set :attr:`provider_label`, build request bodies (:meth:`request`) and their
    conversation class (:meth:`factory`).
    """

    agent_kind: ClassVar[str] = ""
    """The ``--agent`` name and the prefix of :attr:`ref` (``anthropic``, ``openai``)."""
    extra_clashes: ClassVar[frozenset[str]] = frozenset()
    """Request fields ``extra_body`` may not set (they have options of their own)."""
    temperature_max: ClassVar[float] = 1.0

    budget = _ClientOption("budget")
    store = _ClientOption("store")
    cache_mode = _ClientOption("cache_mode")
    base_url = _ClientOption("base_url")
    retry_policy = _ClientOption("retry_policy")
    timeout = _ClientOption("timeout")
    max_concurrent_requests = _ClientOption("max_concurrent_requests")
    missing_key_error = _ClientOption("missing_key_error")
    """Set when a call needed the API and no key was configured (the CLI reports it)."""

    def __init__(self, model: str, provider: Provider, options: ModelOptions) -> None:
        o = options
        if not isinstance(model, str) or not model.strip():
            raise InvalidArgument(
                f"model={model!r}: name the model to call, e.g. model='{self._example_model()}'."
            )
        if o.system_prompt is not None and not isinstance(o.system_prompt, str):
            raise InvalidArgument(
                f"system_prompt must be a string or None, not {type(o.system_prompt).__name__}."
            )
        descriptions = dict(o.tool_descriptions or {})
        for k, v in descriptions.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidArgument(
                    f"tool_descriptions must map tool names to strings; got {k!r}: {v!r}."
                )
        if not isinstance(o.max_tokens, int) or isinstance(o.max_tokens, bool) or o.max_tokens < 1:
            raise InvalidArgument(f"max_tokens={o.max_tokens!r} must be an int >= 1.")
        if not isinstance(o.max_steps, int) or isinstance(o.max_steps, bool) or o.max_steps < 1:
            raise InvalidArgument(
                f"max_steps={o.max_steps!r} must be an int >= 1 (model calls per turn)."
            )
        if o.temperature is not None and not 0.0 <= float(o.temperature) <= self.temperature_max:
            raise InvalidArgument(
                f"temperature={o.temperature} must be between 0 and {self.temperature_max:g}."
            )
        if o.top_p is not None and not 0.0 < float(o.top_p) <= 1.0:
            raise InvalidArgument(f"top_p={o.top_p} must be in (0, 1].")
        extra = dict(o.extra_body or {})
        clash = sorted(set(extra) & self.extra_clashes)
        if clash:
            raise InvalidArgument(
                f"extra_body may not set {', '.join(clash)}: use the {type(self).__name__} "
                "options of those names."
            )
        self.client = ModelClient(provider, model, options)  # the options, passed down once
        self._given = options
        self.model = model
        self.system_prompt = o.system_prompt
        self.tool_descriptions: dict[str, str] = descriptions
        self.temperature = None if o.temperature is None else float(o.temperature)
        self.top_p = None if o.top_p is None else float(o.top_p)
        self.max_tokens = o.max_tokens
        self.max_steps = o.max_steps
        self.extra_body = extra
        self.name = o.name
        self.prompt_path = Path(options.prompt_path) if options.prompt_path is not None else None
        self.tool_descriptions_path = (
            Path(options.tool_descriptions_path)
            if options.tool_descriptions_path is not None
            else None
        )
        self._lock = threading.Lock()
        self._tools_memo: dict[int, tuple[Spec, list[dict[str, Any]]]] = {}

    @classmethod
    def _example_model(cls) -> str:
        return "MODEL"

    # -- construction helpers -------------------------------------------------------------------

    @classmethod
    def from_files(
        cls,
        model: str,
        prompt: str | os.PathLike[str] | None = None,
        tool_descriptions: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> Any:
        """An agent whose system prompt and tool descriptions are loaded from files (TDAD's
        ``seed_prompt.txt`` and ``seed_tool_descriptions.yaml``); other options as in the
        constructor."""
        system = load_prompt(prompt) if prompt is not None else None
        descriptions = (
            load_tool_descriptions(tool_descriptions) if tool_descriptions is not None else None
        )
        concrete: Any = cls  # a subclass: its constructor takes the options as keywords
        return concrete(
            model,
            system_prompt=system,
            tool_descriptions=descriptions,
            prompt_path=prompt,
            tool_descriptions_path=tool_descriptions,
            **options,
        )

    @property
    def options(self) -> ModelOptions:
        """The shared options as they are now (an option set since, such as ``agent.budget``,
        included)."""
        client = self.client
        return dataclasses.replace(
            self._given,
            system_prompt=self.system_prompt,
            tool_descriptions=self.tool_descriptions,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            max_steps=self.max_steps,
            extra_body=self.extra_body,
            base_url=client.base_url,
            cache_mode=client.cache_mode,
            budget=client.budget,
            retry_policy=client.retry_policy,
            timeout=client.timeout,
            max_concurrent_requests=client.max_concurrent_requests,
            stream=client.stream,
            name=self.name,
            prompt_path=self.prompt_path,
            tool_descriptions_path=self.tool_descriptions_path,
        )

    def _own_options(self) -> dict[str, Any]:
        """The subclass's own keyword arguments as they are now (for :meth:`replace`)."""
        return {}

    @classmethod
    def _options_from(
        cls, keywords: Mapping[str, Any], options: ModelOptions | None
    ) -> ModelOptions:
        """The constructor's ``options=`` with its other keyword arguments set over it; an
        unknown keyword names the valid ones (the shared options and the class's own)."""
        own = [
            p.name
            for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        ]
        return ModelOptions.of(keywords, base=options, where=cls.__name__, also=own)

    def replace(self, **changes: Any) -> Any:
        """A copy with some options changed (e.g. another prompt, for a prompt mutant)."""
        model = changes.pop("model", self.model)
        return type(self)(model, options=self.options, **{**self._own_options(), **changes})

    # -- identity --------------------------------------------------------------------------------

    @property
    def ref(self) -> str:
        """The name in reports."""
        return self.name or f"{self.agent_kind}:{self.model}"

    @abstractmethod
    def _fingerprint_payload(self) -> dict[str, Any]:
        """What identifies this agent's behaviour (model, prompt, tools, options): hashed
        into its fingerprint."""

    @property
    def fingerprint(self) -> str:
        """A digest of everything that changes the model's behaviour: model, system prompt, tool
        descriptions, sampling parameters and the step limit (not the endpoint, cache or key)."""
        return hashlib.sha256(canonical_json(self._fingerprint_payload()).encode()).hexdigest()[:16]

    def loaded(self) -> LoadedAgent:
        """This agent as a :class:`~agentprop.LoadedAgent` (what ``check`` and ``agentprop run``
        take), fingerprinted by :attr:`fingerprint`."""
        return LoadedAgent(
            ref=self.ref, factory=self.factory, faults={}, fingerprint=self.fingerprint
        )

    def __repr__(self) -> str:
        # make_factory() fingerprints an object by its repr: include the behaviour fingerprint
        return f"{type(self).__name__}(model={self.model!r}, fingerprint={self.fingerprint!r})"

    @abstractmethod
    def factory(self) -> Any:
        """A fresh agent for one conversation (this method is an agent factory)."""

    def __call__(self) -> Any:
        return self.factory()

    # -- what the model sees ---------------------------------------------------------------------

    def check_spec(self, spec: Spec) -> None:
        """Raise :class:`InputError` if the tool descriptions name tools ``spec`` lacks."""
        check_tool_descriptions(self.tool_descriptions, spec, path=self.tool_descriptions_path)

    def spec_tools(self, spec: Spec) -> list[tuple[str, str, dict[str, Any]]]:
        """``(name, description, input schema)`` of every tool the model gets: the spec's action
        tools, then ``respond`` (schemas are copies)."""
        self.check_spec(spec)
        out: list[tuple[str, str, dict[str, Any]]] = []
        for tool in spec.action_tools:
            schema = (
                copy_json(tool.input_schema)
                if tool.input_schema
                else {"type": "object", "properties": {}}
            )
            out.append(
                (
                    tool.name,
                    self.tool_descriptions.get(tool.name, tool.description or tool.name),
                    schema,
                )
            )
        spec_respond = spec.tools_by_name.get(RESPOND_TOOL)
        respond_description = self.tool_descriptions.get(
            RESPOND_TOOL,
            (spec_respond.description if spec_respond is not None else "")
            or _DEFAULT_RESPOND_DESCRIPTION,
        )
        out.append((RESPOND_TOOL, respond_description, copy_json(respond_tool_schema(spec))))
        return out

    @abstractmethod
    def _format_tool(self, name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
        """One tool in the provider's request format."""

    def tools_for(self, spec: Spec) -> list[dict[str, Any]]:
        """The ``tools`` of every request, in the API's format (a copy: changing it changes no
        request)."""
        tools: list[dict[str, Any]] = copy_json(self._tools_for(spec))
        return tools

    def _tools_for(self, spec: Spec) -> list[dict[str, Any]]:
        """:meth:`tools_for`, worked out once per spec and kept private: the requests of every
        conversation send this very list, and nothing changes it, so request shapes may be
        remembered by its identity."""
        memo = self._tools_memo.get(id(spec))
        if memo is not None and memo[0] is spec:
            return memo[1]
        tools = [self._format_tool(*t) for t in self.spec_tools(spec)]
        with self._lock:
            self._tools_memo[id(spec)] = (spec, tools)
        return tools

    def system_for(self, spec: Spec, context: Mapping[str, Any]) -> str:
        """The system prompt: the configured one, or one written from the spec."""
        if self.system_prompt is not None:
            return self.system_prompt
        return default_system_prompt(spec, context)

    @abstractmethod
    def _request_options(self) -> tuple[Any, ...]:
        """Every option that goes into a request body (model, sampling, ``extra_body`` ...)."""

    def _shape(self, system: str, tools: list[dict[str, Any]]) -> Any:
        """The request shape of this agent's requests with ``system`` and ``tools`` (remembered
        by the tools' identity, the prompt and every request option)."""
        try:
            frozen = marshal.dumps(self._request_options())
        except ValueError:  # not plain built-in data
            return None
        return self.client.request_shape(
            lambda: self.request(system=system, tools=tools, messages=[]), (tools, system, frozen)
        )

    @abstractmethod
    def request(
        self, *, system: str, tools: list[dict[str, Any]], messages: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """The request body of one call in the provider's API."""

    # -- the client ------------------------------------------------------------------------------

    @property
    def provider(self) -> Provider:
        return self.client.provider

    @property
    def cache(self) -> ApiCache:
        """The API cache in use (an ``off``-mode cache when caching is disabled)."""
        return self.client.cache

    @property
    def retry_stats(self) -> RetryStats:
        return self.client.retry_stats

    def api_key(self) -> str:
        """The key to send (see :meth:`ModelClient.api_key`: the offline-key rule)."""
        return self.client.api_key()

    def preflight(self) -> None:
        """What must hold before the first run, checked once instead of failing every run:
        the API cache opens (a damaged file raises :class:`~agentprop.errors.CacheError` naming
        it and the fix); a miss can reach the model (a key is configured, or ``base_url`` is a
        local endpoint: else :class:`~agentprop.errors.MissingApiKey`); in ``replay-only`` mode,
        where nothing can be called, the cache holds responses of this model (else
        ``CacheError``)."""
        cache = self.cache
        if cache.mode is not CacheMode.OFF and cache.store is None:
            # opens the file and checks its tables (a store was checked when opened)
            cache._connection()
        if cache.mode.calls_api:
            self.api_key()
            return
        if not cache.holds(self.model):
            raise CacheError(
                f"{cache.where()}: replay-only mode, and the API cache holds no response of model "
                f"{self.model!r}, so no run could be made (every model call would be a cache "
                "miss).\n  fix: record the responses first (run with --cache-mode read-write and "
                "an API key, or unset CI), or point --cache at the file that holds them"
            )

    def stats(self) -> dict[str, Any]:
        """Counters for reports: model calls, cache hits, live calls, retries."""
        return self.client.stats()

    async def aclose(self) -> None:
        """Close the SDK client of the running event loop now (clients are also closed when
        their event loop shuts down)."""
        await self.client.aclose()

    async def call_model(
        self, request: dict[str, Any], *, trial: int, seed_parts: Sequence[object] = ()
    ) -> ModelReply:
        """One model call through the model client (cache, budget, retries, limiter)."""
        return await self.client.call(request, trial=trial, seed_parts=seed_parts)

    async def turn_step(
        self,
        ctx: TurnContext,
        shape: Any,
        *,
        system: str,
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        step: int,
    ) -> ModelReply:
        """Model call ``step`` of the turn ``ctx`` runs, in the provider's API: the request (through
        the turn's request ``shape`` when there is one: :meth:`_shape`), the call through the model
        client (cache, budget, retries within the turn's deadline), its usage charged to the turn;
        a failure raised as :func:`model_call_error` says."""
        request = (
            shape.body(messages)
            if shape is not None
            else self.request(system=system, tools=tools, messages=messages)
        )
        try:
            result = await self.client.call(
                request,
                trial=int(getattr(ctx, "trial", 0)),
                seed_parts=(str(getattr(ctx, "case_id", "")), ctx.turn_index, step),
                shape=shape,
                deadline=getattr(ctx, "deadline", None),
                what=f"{step + 1} of turn {ctx.turn_index}",
            )
        except Exception as exc:
            raise model_call_error(self, exc, step, ctx.turn_index) from exc
        usage = result.usage
        ctx.add_usage(
            input_tokens=usage.all_input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=result.cost_usd,
            model_calls=1,
        )
        return result

    async def complete_text(
        self, prompt: TextPrompt, *, trial: int, seed_parts: Sequence[object] = ()
    ) -> tuple[str, ModelReply]:
        """A text-only call to this agent's model (PromptSmith, MutationSmith):
        its text and reply."""
        return await self.client.text(prompt, trial=trial, seed_parts=seed_parts)


def default_system_prompt(spec: Spec, context: Mapping[str, Any]) -> str:
    """A plain system prompt written from the spec, used when no prompt is given."""
    lines = [
        f"You are the agent described by the spec {spec.title or spec.spec_id!r} ({spec.spec_id})."
    ]
    if context:
        lines.append("")
        lines.append("Context of this conversation:")
        lines.extend(f"- {k}: {json.dumps(v, ensure_ascii=False)}" for k, v in context.items())
    if spec.assumptions:
        lines.append("")
        lines.append("Assumptions:")
        lines.extend(f"- {a}" for a in spec.assumptions)
    if spec.policies:
        lines.append("")
        lines.append("Policies (highest priority first):")
        ordered = sorted(spec.policies, key=lambda p: -(p.priority or 0))
        lines.extend(f"- {p.id}: {p.text}" for p in ordered)
    lines.extend(decision_tree_lines(spec))
    decisions = ", ".join(spec.response_contract.decision_enum)
    lines.append("")
    lines.append(
        "Use the tools to help the user. End every turn with exactly one call of the `respond` "
        f"tool, as your final action; its `decision` is one of: {decisions}."
    )
    return "\n".join(lines)


def decision_tree_lines(spec: Spec) -> list[str]:
    """The decision tree as prompt lines: each node's id and description, its tools, the
    decision it stops with when fields are missing, and its branches (condition -> next node);
    each terminal node with the decision its name implies. Empty for a spec without a tree."""
    if not spec.decision_tree:
        return []
    enum = spec.response_contract.decision_enum
    fields = {
        *spec.response_contract.required_json_fields,
        *spec.response_contract.optional_json_fields,
    }
    says_node = "node_id" in fields
    lines = [
        "",
        f"Decision tree: start at {spec.root.node_id} on every turn and follow the first branch "
        "whose condition holds, until a node ends the turn"
        + (
            "; `respond` with that node's id as `node_id` and its decision."
            if says_node
            else " with its decision."
        ),
    ]
    defined = spec.nodes_by_id
    for node in spec.decision_tree:
        head = f"- {node.node_id}" + (
            f": {node.description.strip()}" if node.description.strip() else ""
        )
        if node.is_terminal:
            implied, _ = implied_decision(node.node_id, enum)
            head = (
                f"- {node.node_id} (ends the turn"
                + (f"; decision {implied}" if implied else "")
                + ")"
                + (f": {node.description.strip()}" if node.description.strip() else "")
            )
        lines.append(head)
        req = node.requirements
        if req.must_call_tools_in_order:
            lines.append(f"    call, in this order: {', '.join(req.must_call_tools_in_order)}")
        if req.must_not_use:
            lines.append(f"    never call: {', '.join(req.must_not_use)}")
        for missing, decision in req.missing_field_outcomes():
            lines.append(
                f"    if {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing: "
                f"stop here with decision {decision}"
            )
        for branch in node.branches:
            condition = branch.when.strip()
            lines.append(
                "    "
                f"{'otherwise' if condition == 'otherwise' else 'if ' + condition} -> {branch.next}"
            )
    for leaf in spec.leaf_ids():
        if leaf not in defined:
            implied, _ = implied_decision(leaf, enum)
            lines.append(
                f"- {leaf} (ends the turn" + (f"; decision {implied}" if implied else "") + ")"
            )
    return lines


# --------------------------------------------------------------------------------------------
# Running the model's tool calls
# --------------------------------------------------------------------------------------------

# ``json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)`` without building an
# encoder on every call
_TEXT_ENCODE = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode
_ACK_TEXT = _TEXT_ENCODE({"acknowledged": True})


def as_text(value: Any) -> str:
    """A tool's output as the text of a tool result."""
    if isinstance(value, str):
        return value
    if type(value) is dict and len(value) == 1 and value.get("acknowledged") is True:
        return _ACK_TEXT  # what ``respond`` answers: the same text, without encoding it again
    return _TEXT_ENCODE(value)


class ToolOutcome:
    """What to answer one tool call with: ``text``, whether it is an error, and whether it was
    a successful ``respond`` (which ends the turn)."""

    __slots__ = ("is_error", "responded", "text")

    def __init__(self, text: str, is_error: bool = False, responded: bool = False) -> None:
        self.text = text
        self.is_error = is_error
        self.responded = responded


def run_tool_call(ctx: TurnContext, name: str, args: Any) -> ToolOutcome:
    """Execute one tool call of the model in the test world.

    ``args`` is what the model sent: a JSON object (a dict), or for APIs that send arguments as
    text, the text itself. Arguments that are not a JSON object, or that the tool cannot take,
    are answered with an ``invalid_arguments`` error the model can correct (never an exception
    that ends the turn); a :class:`ToolError` (a planted failure, an unknown tool, an invalid
    ``respond``) is answered with ``kind: message``.
    """
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            # not only JSONDecodeError: an integer past Python's digit limit is a plain ValueError
            why = (
                f"{exc.msg} at character {exc.pos}"
                if isinstance(exc, json.JSONDecodeError)
                else str(exc)
            )
            return ToolOutcome(
                f"invalid_arguments: the arguments of {name} are not valid JSON ({why}); send "
                "them again as one JSON object",
                is_error=True,
            )
    if not isinstance(args, dict):
        return ToolOutcome(
            f"invalid_arguments: the input of {name} must be a JSON object", is_error=True
        )
    try:
        if name == RESPOND_TOOL:
            ack = ctx.respond(**args)
            return ToolOutcome(as_text(ack), responded=True)
        if type(ctx) is TurnContext:
            # the output as the trace keeps it, encoded at once: not copied a second time
            return ToolOutcome(as_text(ctx._call(name, args, keep=True)))
        return ToolOutcome(as_text(ctx.call(name, **args)))
    except ToolError as exc:
        return ToolOutcome(f"{exc.kind}: {exc.message}", is_error=True)
    except TypeError as exc:
        if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:
            raise  # raised inside the call: a bug there, not arguments the model got wrong
        # raised by the call itself: arguments Python cannot pass (a field named like a parameter)
        return ToolOutcome(
            f"invalid_arguments: {name} cannot take these arguments ({exc}); correct them",
            is_error=True,
        )


_PASS_THROUGH = (InfrastructureError, MissingDependency, DeadlineExceeded)
"""Errors of a model call that go to the runtime as they are: what they say is not a model
failure (a cache miss or a damaged cache, a missing key or SDK, the budget, the turn's
deadline)."""

_AUTH_ERRORS = frozenset({"AuthenticationError", "PermissionDeniedError"})
_UNREACHABLE_ERRORS = frozenset(
    {"APIConnectionError", "APITimeoutError", "RateLimitError", "InternalServerError"}
)


def infrastructure_kind(exc: BaseException) -> str | None:
    """``auth`` or ``api_unavailable`` when ``exc`` (or an exception it was raised from) is the
    API refusing the key or staying unreachable, in either SDK (they name these exceptions
    alike, and carry the HTTP status); ``None`` for anything else (a 400 is a request the
    agent made, a malformed answer is the model's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {k.__name__ for k in type(current).__mro__}
        status = getattr(current, "status_code", None)
        if names & _AUTH_ERRORS or status in (401, 403):
            return "auth"
        if names & _UNREACHABLE_ERRORS or (
            isinstance(status, int) and (status == 429 or status >= 500)
        ):
            return "api_unavailable"
        current = current.__cause__ or current.__context__
    return None


def model_call_error(
    agent: ModelAgent, exc: BaseException, step: int, turn_index: int
) -> BaseException:
    """What a failed model call raises into the runtime: the pass-through errors as they are;
    the API refusing the key or staying unreachable as :class:`ApiUnavailable` (not the
    agent's: never judged); anything else as a :class:`ModelCallError` naming the call, secrets
    scrubbed."""
    if isinstance(exc, _PASS_THROUGH):
        return exc
    notes = " ".join(getattr(exc, "__notes__", []))
    message = (
        f"model call {step + 1} of turn {turn_index} ({agent.model}) failed: "
        f"{type(exc).__name__}: {exc}" + (f" [{notes}]" if notes else "")
    )
    kind = infrastructure_kind(exc)
    if kind is not None:
        unavailable = ApiUnavailable(agent.client.scrub(message), kind=kind)
        unavailable.__cause__ = exc
        return unavailable
    error = ModelCallError(agent.client.scrub(message))
    error.__cause__ = exc
    return error
