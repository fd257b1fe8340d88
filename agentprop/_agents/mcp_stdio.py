"""The stdio server process of a served trial: it relays one MCP session to the trial's HTTP server.

A framework's MCP client starts it with the command :class:`~agentprop.mcp.McpServedAgent`
gives (``self.stdio``): each JSON-RPC message read from stdin is posted to the streamable-HTTP
server at ``$AGENTPROP_MCP_URL`` within one session, and every message of the replies (JSON or
an event stream) is written to stdout, one per line. It keeps no state and records nothing:
the trial lives in the runtime's process, so however many of these processes a client starts,
they act on the one trial and their trial numbers cannot collide. Standard library only, so a
client that starts one per tool call pays a Python start, not an SDK import.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
from typing import Any, BinaryIO
from urllib.parse import urlsplit

URL_ENV = "AGENTPROP_MCP_URL"
"""The environment variable that carries the trial server's URL (its token included)."""


class Relay:
    """One MCP session relayed from stdin/stdout to the streamable-HTTP endpoint ``url``."""

    def __init__(self, url: str, out: BinaryIO) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.target = parts.path + (f"?{parts.query}" if parts.query else "")
        self.out = out
        self.session: str | None = None
        self.protocol: str | None = None
        self._write = threading.Lock()
        self._initializing = threading.Event()
        self._initialized = threading.Event()

    def _headers(self) -> dict[str, str]:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        if self.session:
            headers["mcp-session-id"] = self.session
        if self.protocol:
            headers["mcp-protocol-version"] = self.protocol
        return headers

    def emit(self, message: Any) -> None:
        data = (
            json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        )
        with self._write:
            self.out.write(data)
            self.out.flush()

    def post(self, body: bytes) -> None:
        """Post one message; write every message of the reply to stdout. A request that fails
        is answered with a JSON-RPC error, so the client is not left waiting."""
        try:
            message = json.loads(body)
        except ValueError:
            self.emit(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32700, "message": "parse error: not a JSON-RPC message"},
                }
            )
            return
        method = message.get("method") if isinstance(message, dict) else None
        initialize = method == "initialize"
        if initialize:
            self._initializing.set()
        elif not self._initializing.is_set():
            # the server/discover probe of a 2.x client, or anything before the handshake: the
            # relay speaks the initialize handshake only (its session is the trial's connection)
            self._fail(
                message,
                f"{method}: this stdio server speaks the initialize handshake; "
                "send initialize first",
                code=-32601,
            )
            return
        else:
            self._initialized.wait(60)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=3600)
        try:
            conn.request("POST", self.target, body=body, headers=self._headers())
            response = conn.getresponse()
            if initialize:
                self.session = response.getheader("mcp-session-id") or self.session
            kind = (response.getheader("content-type") or "").split(";")[0].strip()
            if response.status >= 400:
                self._fail(
                    message,
                    f"agentprop's trial server answered HTTP {response.status}: "
                    f"{response.read(2000).decode('utf-8', 'replace')}",
                )
            elif kind == "text/event-stream":
                self._events(response)
            elif kind == "application/json" and (data := response.read()).strip():
                self._reply(json.loads(data))
            else:
                response.read()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self._fail(
                message,
                f"agentprop's trial server could not be reached ({type(exc).__name__}: {exc}); "
                "the trial may be over",
            )
        finally:
            conn.close()
            if initialize:
                self._initialized.set()

    def _reply(self, message: Any) -> None:
        if (
            isinstance(message, dict)
            and isinstance(message.get("result"), dict)
            and "protocolVersion" in message["result"]
        ):
            self.protocol = str(message["result"]["protocolVersion"])
        self.emit(message)

    def _events(self, response: http.client.HTTPResponse) -> None:
        data: list[str] = []
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                self._reply(json.loads("\n".join(data)))
                data = []
        if data:
            self._reply(json.loads("\n".join(data)))

    def _fail(self, message: Any, why: str, *, code: int = -32603) -> None:
        if isinstance(message, dict) and "id" in message and "method" in message:
            self.emit(
                {"jsonrpc": "2.0", "id": message["id"], "error": {"code": code, "message": why}}
            )
        else:
            print(f"agentprop MCP relay: {why}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """End the session (the client closed stdin)."""
        if self.session is None:
            return
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            conn.request("DELETE", self.target, headers=self._headers())
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()

    def run(self, stdin: BinaryIO) -> None:
        """Relay until stdin closes; each message is posted on a thread of its own, so a long
        tool call does not hold up a notification or a second request."""
        posts: list[threading.Thread] = []
        for line in stdin:
            if line.strip():
                post = threading.Thread(target=self.post, args=(line,), daemon=True)
                post.start()
                posts.append(post)
        for post in posts:
            post.join(5)
        self.close()


def main() -> int:
    url = os.environ.get(URL_ENV, "")
    if not url.startswith("http://127.0.0.1:"):
        print(
            f"agentprop MCP relay: ${URL_ENV} is {url!r}, not the loopback URL of a trial's "
            "server; this command is started by an MCP client with the command and environment "
            "McpServedAgent.stdio gives (command, args, env), not by hand",
            file=sys.stderr,
        )
        return 2
    Relay(url, sys.stdout.buffer).run(sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
