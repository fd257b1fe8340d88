"""The model APIs agentprop speaks: what differs between providers, and nothing else.

A :class:`Provider` knows one API's wire format (:data:`ANTHROPIC_MESSAGES`,
:data:`OPENAI_CHAT`, :data:`OPENAI_RESPONSES`): making the SDK client, sending a body, reading
the reply and its usage. Usage is normalised to one :class:`TokenUsage`, so one price table
prices every provider. Everything around a call lives in :mod:`agentprop._modelapi.client`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from agentprop._util.aio import is_async
from agentprop.errors import InvalidArgument, MissingDependency

__all__ = [
    "ANTHROPIC_MESSAGES",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "MissingDependency",
    "Provider",
    "TextPrompt",
    "TokenUsage",
    "provider_named",
]


class TokenUsage(NamedTuple):
    """One call's usage in agentprop's terms (every count >= 0). (A named tuple: made on every
    model call, replays included.)"""

    input_tokens: int = 0
    """Input tokens not written to or read from a prompt cache."""
    output_tokens: int = 0
    """Output tokens, reasoning tokens included."""
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def all_input_tokens(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


@dataclass(frozen=True)
class TextPrompt:
    """A one-shot text request: a system prompt and one user message (no tools)."""

    system: str
    user: str
    max_tokens: int
    temperature: float | None = None


def _int(value: Any) -> int:
    return (
        int(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        else 0
    )


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else None


_PARAMETERS: dict[tuple[type, str], frozenset[str]] = {}


def _parameters(resource: Any, method: str) -> frozenset[str]:
    """The keyword parameters of an SDK resource's method (worked out once per class)."""
    key = (type(resource), method)
    found = _PARAMETERS.get(key)
    if found is None:
        try:
            found = frozenset(inspect.signature(getattr(resource, method)).parameters)
        except (TypeError, ValueError):
            found = frozenset()
        _PARAMETERS[key] = found
    return found


def _sdk_kwargs(body: Mapping[str, Any], parameters: frozenset[str]) -> dict[str, Any]:
    """Keyword arguments of an SDK ``create`` method for a request body: fields the installed
    SDK does not take as parameters (``temperature`` in recent Anthropic SDKs, a server's own
    fields) travel in ``extra_body``; ``None`` is left out."""
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in body.items():
        if value is None:
            continue
        if key in parameters and key not in (
            "extra_body",
            "extra_headers",
            "extra_query",
            "timeout",
            "stream",
        ):
            kwargs[key] = value
        else:
            extra[key] = value
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


class _NotWireJSON(Exception):
    """A body value the SDK would prepare before encoding (a model, a date, a file, ...)."""


def _not_wire_json(value: object) -> Any:
    raise _NotWireJSON


_WIRE_ENCODE = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_not_wire_json
).encode
"""The JSON text the SDKs send a body of plain JSON as (their encoder's options)."""


def _wire_content(client: Any, body: Mapping[str, Any]) -> bytes | None:
    """The bytes ``client.post`` would send for ``body`` (``None`` fields left out), when the
    SDK would send them unchanged: a body of plain JSON and an SDK whose ``post`` takes
    ``content=``. ``None`` otherwise (post the body).

    ``post(body=...)`` first copies the whole body, walking every nested value in Python to
    prepare SDK objects, dates and files (there are none in plain JSON), then encodes the copy
    with these options: encoding it here sends the same bytes without that walk."""
    if "content" not in _parameters(client, "post"):
        return None
    try:
        return _WIRE_ENCODE({k: v for k, v in body.items() if v is not None}).encode()
    except (_NotWireJSON, ValueError, TypeError):
        return None


def _http_client_maker(sdk: ModuleType) -> Callable[[], Any] | None:
    """A maker of the SDK's default async HTTP client (``DefaultAsyncHttpxClient``), all on one
    TLS context made by the HTTP library's own ``create_ssl_context()`` with its defaults (what
    each client would make for itself); ``None`` when the SDK or its HTTP library has neither,
    and each client then makes its own."""
    default = getattr(sdk, "DefaultAsyncHttpxClient", None)
    if not isinstance(default, type):
        return None
    library = next((k for k in default.__mro__ if k.__name__ == "AsyncClient"), None)
    package = sys.modules.get(library.__module__.partition(".")[0]) if library else None
    create_ssl_context = getattr(package, "create_ssl_context", None)
    if create_ssl_context is None:
        return None
    context = create_ssl_context()

    def make() -> Any:
        return default(verify=context)

    return make


class Provider(ABC):
    """One model API (see the module docstring). Instances are stateless and shared."""

    name: str = ""
    """The provider: ``anthropic`` or ``openai`` (also the agentprop extra that
    installs its SDK)."""
    api: str = ""
    """The API of the provider: ``messages``, ``chat`` or ``responses``."""
    key_env: str = ""
    base_url_env: str = ""
    official_hosts: tuple[str, ...] = ()
    conversation_field = "messages"
    max_tokens_field = "max_tokens"
    streams = False
    """Whether :meth:`send` can stream."""

    @property
    def label(self) -> str:
        return f"{self.name}.{self.api}"

    # -- the SDK -----------------------------------------------------------------------------------

    def sdk(self) -> ModuleType:
        """The provider's official SDK, or :class:`MissingDependency` naming the extra."""
        try:
            return importlib.import_module(self.name)
        except ImportError:
            raise MissingDependency(
                f"the {self.name} SDK is not installed, and calling the {self.label} API needs it",
                expected=f"the `{self.name}` package",
                fix=f"pip install 'agentprop[{self.name}]'",
            ) from None

    @abstractmethod
    def make_client(
        self, *, api_key: str, base_url: str | None, timeout: float, http_client: Any = None
    ) -> Any:
        """The SDK's async client for this API (on ``http_client``, else on one of its own)."""

    def make_clients(
        self, n: int, *, api_key: str, base_url: str | None, timeout: float
    ) -> tuple[Any, ...]:
        """``n`` SDK clients, each with a connection pool of its own: one as :meth:`make_client`
        makes it; several on the SDK's default HTTP client, all sharing one TLS context, made as
        the HTTP library makes its default (loading the certificates takes tens of milliseconds:
        once a process, as for one client; see :func:`_http_client_maker`)."""
        http = _http_client_maker(self.sdk()) if n > 1 else None
        return tuple(
            self.make_client(
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
                http_client=None if http is None else http(),
            )
            for _ in range(n)
        )

    @abstractmethod
    async def send(
        self, client: Any, body: Mapping[str, Any], *, stream: bool = False
    ) -> dict[str, Any]:
        """One HTTP attempt: the response as plain JSON (a complete response, also when
        streamed). Raises the SDK's errors, which :mod:`agentprop._modelapi.retry` classifies."""

    # -- reading requests and responses ------------------------------------------------------------

    def max_output_tokens(self, body: Mapping[str, Any]) -> int | None:
        value = body.get(self.max_tokens_field)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    @abstractmethod
    def usage(self, response: Mapping[str, Any]) -> TokenUsage:
        """The tokens one response used."""

    @abstractmethod
    def check_response(self, response: Any) -> None:
        """Raise :class:`ValueError` if ``response`` is not a response of this API."""

    def response_model(self, response: Mapping[str, Any]) -> str | None:
        model = response.get("model")
        return model if isinstance(model, str) and model else None

    @abstractmethod
    def text_body(self, model: str, prompt: TextPrompt) -> dict[str, Any]:
        """The request body of a text-only call (PromptSmith, MutationSmith, paraphrase pools)."""

    @abstractmethod
    def text_of(self, response: Mapping[str, Any]) -> str:
        """The text of a text-only call's response."""

    def __repr__(self) -> str:
        return f"<provider {self.label}>"


# --------------------------------------------------------------------------------------------
# Anthropic
# --------------------------------------------------------------------------------------------


class _AnthropicMessages(Provider):
    name = "anthropic"
    api = "messages"
    key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    official_hosts = ("api.anthropic.com",)

    def make_client(
        self, *, api_key: str, base_url: str | None, timeout: float, http_client: Any = None
    ) -> Any:
        return self.sdk().AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )

    def _kwargs(self, client: Any, body: Mapping[str, Any]) -> dict[str, Any]:
        return _sdk_kwargs(body, _parameters(client.messages, "create"))

    async def send(
        self, client: Any, body: Mapping[str, Any], *, stream: bool = False
    ) -> dict[str, Any]:
        if stream:
            raise InvalidArgument(
                "agentprop does not stream the Anthropic Messages API; use stream=False."
            )
        if isinstance(client, self.sdk().AsyncAnthropic):
            # The body as it is, through the SDK's own request path (headers, key, version,
            # timeout, errors), as for Chat Completions: messages.create() only sorts the
            # fields into parameters and extra_body, which the SDK joins again into the same
            # JSON, and wraps the answer in a response object read back as JSON. None is left
            # out, as before. A body of plain JSON goes as the bytes post(body=) would send.
            content = _wire_content(client, body)
            raw = (
                await client.post("/v1/messages", content=content, cast_to=bytes)
                if content is not None
                else await client.post(
                    "/v1/messages",
                    body={k: v for k, v in body.items() if v is not None},
                    cast_to=bytes,
                )
            )
            data: dict[str, Any] = json.loads(raw)
            self.check_response(data)
            return data
        kwargs = self._kwargs(client, body)
        create = client.messages.with_raw_response.create
        if is_async(create):
            response = await create(**kwargs)
            data = (
                await response.json()
                if inspect.iscoroutinefunction(response.json)
                else response.json()
            )
        else:  # a synchronous client someone handed in (paraphrase pools' ``client=``)

            def call() -> Any:
                return create(**kwargs).json()

            data = await asyncio.to_thread(call)
        self.check_response(data)
        return data

    def check_response(self, response: Any) -> None:
        if not isinstance(response, dict) or not isinstance(response.get("content"), list):
            raise ValueError(
                f"the API answered with JSON that is not a message: {str(response)[:200]}"
            )

    def usage(self, response: Mapping[str, Any]) -> TokenUsage:
        u = response.get("usage") or {}
        if type(u) is dict and len(u) == 2:  # the common case: input and output only, both ints
            inp, out = u.get("input_tokens"), u.get("output_tokens")
            if type(inp) is int and type(out) is int and inp >= 0 and out >= 0:
                return TokenUsage(inp, out)
        return TokenUsage(
            input_tokens=_int(_field(u, "input_tokens")),
            output_tokens=_int(_field(u, "output_tokens")),
            cache_creation_input_tokens=_int(_field(u, "cache_creation_input_tokens")),
            cache_read_input_tokens=_int(_field(u, "cache_read_input_tokens")),
        )

    def text_body(self, model: str, prompt: TextPrompt) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": prompt.max_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
        }
        if prompt.temperature is not None:
            body["temperature"] = prompt.temperature
        return body

    def text_of(self, response: Mapping[str, Any]) -> str:
        return "".join(
            str(b.get("text", ""))
            for b in response.get("content") or []
            if isinstance(b, dict) and b.get("type") == "text"
        )


# --------------------------------------------------------------------------------------------
# OpenAI
# --------------------------------------------------------------------------------------------


class _OpenAIBase(Provider):
    name = "openai"
    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    official_hosts = ("api.openai.com",)
    streams = True
    _resource = ""

    def make_client(
        self, *, api_key: str, base_url: str | None, timeout: float, http_client: Any = None
    ) -> Any:
        return self.sdk().AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )

    @abstractmethod
    def _resource_of(self, client: Any) -> Any:
        """The SDK resource whose ``create`` this API calls."""

    def _kwargs(self, client: Any, body: Mapping[str, Any]) -> dict[str, Any]:
        return _sdk_kwargs(body, _parameters(self._resource_of(client), "create"))

    _path = ""
    """The endpoint :meth:`send` posts a body to as it is (``""``: through ``create``)."""

    async def send(
        self, client: Any, body: Mapping[str, Any], *, stream: bool = False
    ) -> dict[str, Any]:
        if not stream and self._path and isinstance(client, self.sdk().AsyncOpenAI):
            # The body as it is, through the SDK's own request path (headers, auth, errors):
            # create() would first walk it against the SDK's parameter types, a third of the
            # SDK's CPU a call, and change nothing in a body of plain JSON (the Chat
            # Completions parameters have no aliases or formats). None is left out, as before.
            raw = await client.post(
                self._path,
                body={k: v for k, v in body.items() if v is not None},
                cast_to=bytes,
            )
            data: dict[str, Any] = json.loads(raw)
            self.check_response(data)
            return data
        kwargs = self._kwargs(client, body)
        if stream:
            data = await self._send_streamed(client, kwargs)
        else:
            create = self._raw_create(client)
            if is_async(create):
                raw = await create(**kwargs)
                data = json.loads(raw.content)
            else:

                def call() -> Any:
                    return json.loads(create(**kwargs).content)

                data = await asyncio.to_thread(call)
        self.check_response(data)
        return data

    @abstractmethod
    def _raw_create(self, client: Any) -> Any:
        """The SDK's ``create`` that returns the raw HTTP response."""

    @abstractmethod
    async def _send_streamed(self, client: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One streamed call, assembled into the complete response."""


class _OpenAIChat(_OpenAIBase):
    api = "chat"
    max_tokens_field = "max_completion_tokens"
    _path = "/chat/completions"

    def _resource_of(self, client: Any) -> Any:
        return client.chat.completions

    def _raw_create(self, client: Any) -> Any:
        return client.chat.completions.with_raw_response.create

    def max_output_tokens(self, body: Mapping[str, Any]) -> int | None:
        for name in ("max_completion_tokens", "max_tokens"):
            value = body.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    async def _send_streamed(self, client: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        from openai.lib.streaming.chat import ChatCompletionStreamState

        kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        stream = await client.chat.completions.create(**kwargs)
        state: Any = ChatCompletionStreamState()
        usage: Any = None
        try:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                if chunk.choices:
                    state.handle_chunk(chunk)
                elif not getattr(
                    state, "_ChatCompletionStreamState__current_completion_snapshot", None
                ):
                    state.handle_chunk(chunk)  # the first chunk may carry no choice
        finally:
            await stream.close()
        final = state.get_final_completion()
        data: dict[str, Any] = final.model_dump(mode="json", exclude_none=True)
        for choice in data.get("choices", []):
            message = choice.get("message") or {}
            message.pop("parsed", None)
            for call in message.get("tool_calls") or []:
                (call.get("function") or {}).pop("parsed_arguments", None)
        if usage is not None:
            data["usage"] = usage.model_dump(mode="json", exclude_none=True)
        return data

    def check_response(self, response: Any) -> None:
        choices = response.get("choices") if isinstance(response, dict) else None
        if (
            not isinstance(choices, list)
            or not choices
            or not isinstance(choices[0], dict)
            or not isinstance(choices[0].get("message"), dict)
        ):
            raise ValueError(
                f"the API answered with JSON that is not a chat completion: {str(response)[:200]}"
            )

    def usage(self, response: Mapping[str, Any]) -> TokenUsage:
        u = response.get("usage") or {}
        prompt = _int(_field(u, "prompt_tokens"))
        cached = min(
            prompt, _int(_field(_field(u, "prompt_tokens_details") or {}, "cached_tokens"))
        )
        return TokenUsage(
            input_tokens=prompt - cached,
            output_tokens=_int(_field(u, "completion_tokens")),
            cache_read_input_tokens=cached,
        )

    def text_body(self, model: str, prompt: TextPrompt) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_completion_tokens": prompt.max_tokens,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
        }
        if prompt.temperature is not None:
            body["temperature"] = prompt.temperature
        return body

    def text_of(self, response: Mapping[str, Any]) -> str:
        choices = response.get("choices") or []
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        return content if isinstance(content, str) else ""


class _OpenAIResponses(_OpenAIBase):
    api = "responses"
    conversation_field = "input"
    max_tokens_field = "max_output_tokens"

    def _resource_of(self, client: Any) -> Any:
        return client.responses

    def _raw_create(self, client: Any) -> Any:
        return client.responses.with_raw_response.create

    async def _send_streamed(self, client: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        stream = await client.responses.create(**kwargs, stream=True)
        final: Any = None
        try:
            async for event in stream:
                if event.type in ("response.completed", "response.incomplete", "response.failed"):
                    final = event.response
                elif event.type == "error":
                    raise ValueError(
                        f"the streamed response failed: {getattr(event, 'message', event)}"
                    )
        finally:
            await stream.close()
        if final is None:
            raise ValueError("the stream ended without a response.completed event")
        data: dict[str, Any] = final.model_dump(mode="json", exclude_none=True)
        return data

    def check_response(self, response: Any) -> None:
        if not isinstance(response, dict) or not isinstance(response.get("output"), list):
            raise ValueError(
                f"the API answered with JSON that is not a response: {str(response)[:200]}"
            )

    def usage(self, response: Mapping[str, Any]) -> TokenUsage:
        u = response.get("usage") or {}
        total = _int(_field(u, "input_tokens"))
        cached = min(total, _int(_field(_field(u, "input_tokens_details") or {}, "cached_tokens")))
        return TokenUsage(
            input_tokens=total - cached,
            output_tokens=_int(_field(u, "output_tokens")),
            cache_read_input_tokens=cached,
        )

    def text_body(self, model: str, prompt: TextPrompt) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_output_tokens": prompt.max_tokens,
            "instructions": prompt.system,
            "input": [{"role": "user", "content": prompt.user}],
            "store": False,
        }
        if prompt.temperature is not None:
            body["temperature"] = prompt.temperature
        return body

    def text_of(self, response: Mapping[str, Any]) -> str:
        parts: list[str] = []
        for item in response.get("output") or []:
            if isinstance(item, dict) and item.get("type") == "message":
                for part in item.get("content") or []:
                    if isinstance(part, dict) and part.get("type") == "output_text":
                        parts.append(str(part.get("text", "")))
        return "".join(parts)


ANTHROPIC_MESSAGES: Provider = _AnthropicMessages()
OPENAI_CHAT: Provider = _OpenAIChat()
OPENAI_RESPONSES: Provider = _OpenAIResponses()

_BY_LABEL = {p.label: p for p in (ANTHROPIC_MESSAGES, OPENAI_CHAT, OPENAI_RESPONSES)}


def provider_named(label: str) -> Provider:
    """A provider by its label: ``anthropic.messages``, ``openai.chat`` or ``openai.responses``."""
    try:
        return _BY_LABEL[label]
    except KeyError:
        raise InvalidArgument(
            f"unknown model API {label!r}; use one of {sorted(_BY_LABEL)}"
        ) from None
