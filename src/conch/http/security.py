"""The guard in front of every HTTP route (SPEC §9): Host and Origin against DNS rebinding,
the bearer token, and the request-body cap. Pure ASGI; nothing here logs header values."""

from __future__ import annotations

import hmac
import ipaddress
import math
import socket
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conch.core import is_loopback
from conch.http import signin

MAX_BODY_BYTES = 4 * 1024 * 1024
AUTH_SCOPE_KEY = "conch.auth"  # how the request was authenticated: "bearer", "cookie" or "none"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def split_host(value: str) -> str | None:
    """The host name of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``)."""
    try:
        parts = urlsplit("//" + value)
        name = parts.hostname
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return None
    return name.lower() if name else None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostPolicy:
    """Which ``Host`` names a request may carry. On loopback: the loopback names only. On another
    bind address (only allowed with a token): also that address, this machine's host name, and
    IP literals when bound to every interface — never an arbitrary DNS name, which is what a
    rebinding attack needs."""

    def __init__(self, bind_host: str) -> None:
        self.names = set(LOOPBACK_NAMES)
        self.any_ip = False
        bind = bind_host.strip("[]").lower()
        if not is_loopback(bind):
            if bind in ("0.0.0.0", "::", ""):
                self.any_ip = True
            else:
                self.names.add(bind)
            for name in {socket.gethostname(), socket.getfqdn()}:
                if name:
                    self.names.add(name.lower())

    def allows(self, name: str | None) -> bool:
        if not name:
            return False
        return name in self.names or (self.any_ip and _is_ip(name))


def _same_origin(origin: str, host_header: str, scheme: str) -> bool:
    try:
        o = urlsplit(origin)
    except ValueError:
        return False
    if o.scheme not in ("http", "https") or not o.netloc:
        return False
    return o.netloc.lower() == host_header.lower() and o.scheme == scheme


class Guard:
    """ASGI middleware: 421 foreign Host, 403 foreign Origin, 401 missing/wrong token, 413 body
    over the cap — in that order, on every route.

    With a token, the dashboard's routes (``/``, ``/api/…``) also accept the sign-in cookie, and
    an unauthenticated ``GET /`` gets the sign-in form (still a 401); ``POST /login`` checks the
    typed token itself. Every other route requires the bearer header."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        bind_host: str,
        token: str = "",
        max_body: int = MAX_BODY_BYTES,
        throttle: signin.Throttle | None = None,
        sandboxed_caller: Callable[[tuple[str, int], tuple[str, int]], str | None] | None = None,
    ) -> None:
        self.app = app
        self.hosts = HostPolicy(bind_host)
        self._token = token.encode() if token else b""
        self.max_body = max_body
        # wrong bearer tokens count against the client as wrong sign-ins do (one throttle):
        # after 5 a minute, every route answers 429 to that client's bearer tries
        self.throttle = throttle or signin.Throttle()
        # a loopback request from inside a sandboxed job gets no more than that job's fence:
        # none of Conch's API (an unsandboxed exec, other jobs' reads and writes)
        self._sandboxed_caller = sandboxed_caller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self.hosts.allows(split_host(host)):
            await _reject(421, "Misdirected request: unexpected Host header", scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host, scope.get("scheme", "http")):
            await _reject(403, "Forbidden: cross-origin request", scope, receive, send)
            return
        peer, server = scope.get("client"), scope.get("server")
        if self._sandboxed_caller is not None and peer and server:
            unit = self._sandboxed_caller((peer[0], peer[1]), (server[0], server[1]))
            if unit is not None:
                await _reject(
                    403,
                    f"Forbidden: this request comes from inside sandboxed {unit}; a sandbox "
                    "holds Conch's own API as well",
                    scope,
                    receive,
                    send,
                )
                return
        scope[AUTH_SCOPE_KEY] = "none"
        bearer = headers.get("authorization")
        authorized = bool(self._token) and bearer is not None and self._authorized(bearer)
        if self._token and bearer is not None:
            client = peer[0] if peer else ""  # the socket's peer, never a header
            wait = self.throttle.retry_after(client)
            if wait > 0:
                await _reject(
                    429,
                    f"Too many wrong tokens: try again in {math.ceil(wait)} s",
                    scope,
                    receive,
                    send,
                    {"Retry-After": str(math.ceil(wait))},
                )
                return
            if not authorized:
                self.throttle.failed(client)
        if authorized:
            scope[AUTH_SCOPE_KEY] = "bearer"
        elif self._token and not self._dashboard_allows(scope, headers):
            if (
                scope["type"] == "http"
                and scope.get("path") == "/"
                and scope.get("method")
                in (
                    "GET",
                    "HEAD",
                )
            ):
                await signin.signin_page()(scope, receive, send)
                return
            await _reject(
                401,
                "Unauthorized: send Authorization: Bearer <token>",
                scope,
                receive,
                send,
                {"WWW-Authenticate": 'Bearer realm="conch"'},
            )
            return
        if scope["type"] == "http":
            await self._limited(scope, receive, send, headers)
        else:
            await self.app(scope, receive, send)

    def _dashboard_allows(self, scope: Scope, headers: Headers) -> bool:
        path = scope.get("path", "")
        if scope["type"] != "http" or not signin.is_dashboard_path(path):
            return False
        if path == "/login" or (path == "/logout" and scope.get("method") == "POST"):
            return True  # the form and sign-in (which checks the typed token); sign-out
        if signin.cookie_valid(headers.get("cookie", ""), self._token.decode()):
            scope[AUTH_SCOPE_KEY] = "cookie"
            return True
        return False

    def _authorized(self, value: str) -> bool:
        scheme, _, given = value.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self._token)

    async def _limited(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        declared = headers.get("content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_body
            except ValueError:
                await _reject(400, "Bad Content-Length", scope, receive, send)
                return
            if too_big:
                await _reject(413, "Request body too large (limit 4 MiB)", scope, receive, send)
                return
        # Read the body up front (it is small by construction) so a chunked upload over the
        # cap is refused before any handler sees a byte of it.
        body = bytearray()
        pending: deque[Message] = deque()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)
                break
            body.extend(message.get("body", b""))
            if len(body) > self.max_body:
                await _reject(413, "Request body too large (limit 4 MiB)", scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        pending.appendleft({"type": "http.request", "body": bytes(body), "more_body": False})

        async def replay() -> Message:
            if pending:
                return pending.popleft()
            return await receive()

        await self.app(scope, replay, send)


async def _reject(
    status: int,
    text: str,
    scope: Scope,
    receive: Receive,
    send: Send,
    headers: dict[str, Any] | None = None,
) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    response = PlainTextResponse(text, status_code=status, headers=headers)
    await response(scope, receive, send)
