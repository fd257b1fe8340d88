"""The one place agentprop's MCP code meets the MCP SDK: the same few operations on mcp 1.x
(1.24+, whose API langchain-mcp-adapters and fastmcp 3 require) and on mcp 2.x (2.3+).

Which API is used follows the installed ``mcp`` distribution's version (read from its metadata,
not from what imports: mcp 2's ``mcp_types`` may sit beside an mcp 1). Wire types are built with
their camelCase field names, which both accept, and read with :func:`get`. Handlers of a server
take ``(ctx, params)`` on both (``ctx.request``: the HTTP request, when there is one).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from agentprop._util.mcp_sdk import installed_mcp, version_tuple

SDK_VERSION = installed_mcp() or "0"
V2 = version_tuple(SDK_VERSION) >= (2,)
"""Whether the installed SDK has the 2.x API (``mcp.Client``, ``mcp_types``, ``on_*`` handlers)."""

types: Any = importlib.import_module("mcp_types" if V2 else "mcp.types")
"""The MCP wire types (``mcp_types`` on 2.x, ``mcp.types`` on 1.x)."""

_exceptions = importlib.import_module("mcp.shared.exceptions")
MCPError: type[Exception] = _exceptions.MCPError if V2 else _exceptions.McpError
"""The exception of a JSON-RPC error (raised by a handler, or by a client for an error reply)."""

StdioServerParameters: Any = importlib.import_module("mcp").StdioServerParameters


def mcp_error(code: int, message: str) -> Exception:
    """An :data:`MCPError` with ``code`` and ``message`` (a handler raises it as
    the error reply)."""
    if V2:
        return MCPError(code, message)
    return MCPError(types.ErrorData(code=code, message=message))


def get(obj: Any, name: str) -> Any:
    """The field ``name`` (snake_case) of a wire-type object of either SDK (1.x names it in
    camelCase: ``is_error`` is ``isError``)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    head, *rest = name.split("_")
    return getattr(obj, head + "".join(p.title() for p in rest), None)


# ----------------------------------------------------------------- servers

Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Handlers:
    """A server's request handlers, each ``async (ctx, params) -> result``."""

    list_tools: Handler
    call_tool: Handler
    list_prompts: Handler
    get_prompt: Handler
    list_resources: Handler
    read_resource: Handler


def new_server(
    name: str, *, version: str, instructions: str, handlers: Handlers, sessions_only: bool = False
) -> Any:
    """A low-level SDK server. Tool arguments reach ``call_tool`` unvalidated (agentprop's
    runtime validates and records them). ``sessions_only``: advertise only the MCP revisions
    with the initialize handshake, whose sessions tell clients apart (2.x also speaks a
    sessionless revision; 1.x knows only the handshake)."""
    Server: Any = importlib.import_module("mcp.server.lowlevel").Server  # noqa: N806 (typed for neither SDK)

    if V2:
        server = Server(
            name,
            version=version,
            instructions=instructions,
            on_list_tools=handlers.list_tools,
            on_call_tool=handlers.call_tool,
            on_list_prompts=handlers.list_prompts,
            on_get_prompt=handlers.get_prompt,
            on_list_resources=handlers.list_resources,
            on_read_resource=handlers.read_resource,
        )
        if sessions_only:
            handshake_versions = list(
                importlib.import_module("mcp_types.version").HANDSHAKE_PROTOCOL_VERSIONS
            )

            async def discover(ctx: Any, params: Any) -> Any:
                return types.DiscoverResult(
                    supported_versions=handshake_versions, capabilities=server.get_capabilities()
                )

            server.add_request_handler("server/discover", types.RequestParams, discover)
        return server
    server = Server(name, version=version, instructions=instructions)

    def route(fn: Handler) -> Callable[[Any], Awaitable[Any]]:
        async def handle(request: Any) -> Any:
            return types.ServerResult(await fn(server.request_context, request.params))

        return handle

    # registered directly (not through the decorators): no input validation, and one signature
    server.request_handlers.update(
        {
            types.ListToolsRequest: route(handlers.list_tools),
            types.CallToolRequest: route(handlers.call_tool),
            types.ListPromptsRequest: route(handlers.list_prompts),
            types.GetPromptRequest: route(handlers.get_prompt),
            types.ListResourcesRequest: route(handlers.list_resources),
            types.ReadResourceRequest: route(handlers.read_resource),
        }
    )
    return server


def _loopback_security() -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def http_app(server: Any) -> Any:
    """An ASGI app serving ``server`` over streamable HTTP at ``/mcp``, on loopback (Host and
    Origin headers are checked against 127.0.0.1, localhost and ::1)."""
    if V2:
        return server.streamable_http_app(host="127.0.0.1")
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route

    _quiet_session_teardown()
    manager = StreamableHTTPSessionManager(app=server, security_settings=_loopback_security())

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        await manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route("/mcp", endpoint=_AsgiEndpoint(endpoint))], lifespan=lifespan)


class _SessionTeardownNoise(logging.Filter):
    """Drops mcp 1.x's ERROR record, with a traceback, of every streamable HTTP session a client
    closes (its standalone SSE writer reads a stream the session's end has closed): an
    ordinary end of a session, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (
            record.msg == "Error in standalone SSE writer"
            and type(exc).__name__ == "ClosedResourceError"
        )


def _quiet_session_teardown() -> None:
    log = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, _SessionTeardownNoise) for f in log.filters):
        log.addFilter(_SessionTeardownNoise())


class _AsgiEndpoint:
    """A raw ASGI callable as a Starlette route endpoint (an instance, not a function, so
    Starlette hands it the scope instead of a Request)."""

    def __init__(self, app: Callable[[Any, Any, Any], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


async def serve_stdio(server: Any) -> None:
    """Serve one session over this process's stdin and stdout."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


# ----------------------------------------------------------------- clients


def Client(target: Any, **options: Any) -> AbstractAsyncContextManager[Any]:  # noqa: N802 (the SDK 2.x class's name)
    """A connected client session: ``async with Client(target) as client``. ``target``: a
    streamable HTTP URL, :data:`StdioServerParameters`, or a server object (in-process). On
    mcp 2.x this is ``mcp.Client``; on 1.x a ``ClientSession`` (the object langchain-mcp-adapters'
    ``load_mcp_tools`` takes) with ``protocol_version`` added; both have ``list_tools``,
    ``call_tool``, ``get_prompt``, ``read_resource``, ``list_prompts``, ``list_resources``.
    ``options`` go to ``mcp.Client`` (2.x only)."""
    if V2:
        client: AbstractAsyncContextManager[Any] = importlib.import_module("mcp").Client(
            target, **options
        )
        return client
    if options:
        raise TypeError(
            f"Client options {sorted(options)} need mcp 2.x; mcp {SDK_VERSION} is installed"
        )
    return _client_1x(target)


@asynccontextmanager
async def _client_1x(target: Any) -> AsyncIterator[Any]:
    import anyio

    ClientSession: Any = importlib.import_module("mcp").ClientSession  # noqa: N806 (typed for neither SDK)

    async with AsyncExitStack() as stack:
        if isinstance(target, str):
            streamable_http: Any = importlib.import_module("mcp.client.streamable_http")
            connect = (
                getattr(streamable_http, "streamable_http_client", None)
                or streamable_http.streamablehttp_client
            )
            read, write, *_ = await stack.enter_async_context(connect(target))
        elif isinstance(target, StdioServerParameters):
            from mcp.client.stdio import stdio_client

            read, write = await stack.enter_async_context(stdio_client(target))
        else:
            from mcp.shared.memory import create_client_server_memory_streams

            client_streams, server_streams = await stack.enter_async_context(
                create_client_server_memory_streams()
            )
            read, write = client_streams
            tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tasks.cancel_scope.cancel)  # runs first on the way out: the server stops
            tasks.start_soon(
                lambda: target.run(*server_streams, target.create_initialization_options())
            )
        session = await stack.enter_async_context(ClientSession(read, write))
        initialized = await session.initialize()
        session.protocol_version = initialized.protocolVersion
        yield session


__all__ = [
    "MCPError",
    "SDK_VERSION",
    "V2",
    "Client",
    "Handlers",
    "StdioServerParameters",
    "get",
    "http_app",
    "mcp_error",
    "new_server",
    "serve_stdio",
    "types",
]
