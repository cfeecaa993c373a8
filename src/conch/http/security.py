"""The guard in front of every HTTP route (docs/spec.md §9): Host and Origin against DNS rebinding,
who the peer is (its local user on loopback; a sandboxed job), the bearer token or a dashboard
session, and the request-body cap. Pure ASGI; nothing here logs header values."""

from __future__ import annotations

import hmac
import ipaddress
import math
import os
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
from conch.http.peers import (
    PEER_SCOPE_KEY,
    Address,
    Connections,
    LookupFailed,
    Lookups,
    Peer,
    address,
    identify,
    needs_lookup,
    unidentified,
    user_name,
)

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
    """ASGI middleware, on every route: 421 foreign Host, 403 foreign Origin, 403 a peer that
    may not use this server (another local user without a token, a sandboxed job), 401 a
    missing or wrong token (429 over the throttle), 413 a body over the cap — in that order.

    Without a token only the server's own user gets in over loopback (on Linux: the user
    that owns the client's socket, asked of the kernel; a peer whose user cannot be told is
    refused).
    With a token, whoever presents it. The dashboard's routes (``/``, ``/api/…``) also accept
    a signed-in session cookie (bound to the peer that signed in), and an unauthenticated
    ``GET /`` gets the sign-in form (still a 401); ``POST /login`` checks the typed token
    itself. Every other route requires the bearer header.

    The peer of a connection accepted by the service's listener is known already
    (``connections``); any other is looked up here. Lookups, and the check for a sandboxed
    caller, run off the event loop within a time budget (``Lookups``): one that fails or
    overruns is a refusal."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        bind_host: str,
        token: str = "",
        max_body: int = MAX_BODY_BYTES,
        throttle: signin.Throttle | None = None,
        sessions: signin.Sessions | None = None,
        sandboxed_caller: Callable[[tuple[str, int], tuple[str, int]], str | None] | None = None,
        connections: Connections | None = None,
        lookups: Lookups | None = None,
        owner_uid: int | None = None,
    ) -> None:
        self.app = app
        self.hosts = HostPolicy(bind_host)
        self._token = token.encode() if token else b""
        self.max_body = max_body
        # wrong bearer tokens count against the peer as wrong sign-ins do (one throttle)
        self.throttle = throttle or signin.Throttle()
        self.sessions = signin.Sessions() if sessions is None else sessions
        # a loopback request from inside a sandboxed job gets no more than that job's fence:
        # none of Conch's API (an unsandboxed exec, other jobs' reads and writes)
        self._sandboxed_caller = sandboxed_caller
        self.connections = connections
        # peers and sandboxes are looked up on threads of their own: a slow sandbox scan
        # does not hold up telling who a new connection's peer is
        self.lookups = lookups or Lookups("peer")
        self.sandbox_lookups = Lookups("sandbox", workers=4)
        self.owner_uid = os.geteuid() if owner_uid is None else owner_uid

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
        client, server = address(scope.get("client")), address(scope.get("server"))
        peer = await self._peer(client, server)
        scope[PEER_SCOPE_KEY] = peer
        if not self._token and (refused := self._stranger(peer)):
            await _reject(403, refused, scope, receive, send)
            return
        if self._sandboxed_caller is not None and client and server:
            refused = await self._sandboxed(client, server)
            if refused:
                await _reject(403, refused, scope, receive, send)
                return
        scope[AUTH_SCOPE_KEY] = "none"
        if self._token:
            bearer = headers.get("authorization")
            if bearer is not None:
                if not await self._bearer(bearer, peer, scope, receive, send):
                    return
            elif not self._dashboard_allows(scope, headers, peer):
                await self._unauthenticated(scope, receive, send, headers)
                return
        if scope["type"] == "http":
            await self._limited(scope, receive, send, headers)
        else:
            await self.app(scope, receive, send)

    def close(self) -> None:
        self.lookups.close()
        self.sandbox_lookups.close()

    async def _peer(self, client: Address | None, server: Address | None) -> Peer:
        if client is None or server is None:  # no socket: an in-process ASGI caller
            return Peer(client[0] if client else "", False)
        if self.connections is not None:
            known = self.connections.peer(client, server)
            if known is not None:
                return known
        if not needs_lookup(client):
            return identify(client, server)
        try:
            return await self.lookups.run(identify, client, server)
        except LookupFailed:
            return unidentified(client)

    def _stranger(self, peer: Peer) -> str | None:
        """Why a peer may not use a server without a token (None: it may)."""
        if not peer.identified:
            return (
                "Forbidden: Conch could not tell which local user this connection comes from, "
                "and without a token only its own user may use it"
            )
        if peer.uid is not None and peer.uid != self.owner_uid:
            return (
                f"Forbidden: this Conch server takes requests from {user_name(self.owner_uid)} "
                f"only, and this connection comes from {user_name(peer.uid)}; its owner can "
                "set a token (CONCH_AUTH_TOKEN) to let in whoever presents it"
            )
        return None

    async def _sandboxed(self, client: Address, server: Address) -> str | None:
        """Why a request is refused as coming from a sandboxed job (None: it is not)."""
        assert self._sandboxed_caller is not None
        try:
            # (a lookup that meets the job table changing under it searches again itself,
            # within its own budget: one retry, not one here as well)
            unit = await self.sandbox_lookups.run(self._sandboxed_caller, client, server)
        except LookupFailed as e:
            return (
                "Forbidden: Conch could not tell whether this request comes from "
                f"inside a sandboxed job ({e}), so it is refused"
            )
        if unit is None:
            return None
        return (
            f"Forbidden: this request comes from inside sandboxed {unit}; a sandbox "
            "holds Conch's own API as well"
        )

    async def _bearer(
        self, value: str, peer: Peer, scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Check a bearer token (the right one always passes; a peer over the throttle waits
        its turn); False when the request has been answered (401 or 429)."""
        async with self.throttle.turn(peer.key):
            if self._authorized(value):
                self.throttle.succeeded(peer.key)
                scope[AUTH_SCOPE_KEY] = "bearer"
                return True
            wait = await signin.wrong_token(self.throttle, peer.key)
        if wait > 0:
            await _reject(
                429,
                signin.throttled(self.throttle, wait),
                scope,
                receive,
                send,
                {"Retry-After": str(math.ceil(wait))},
            )
        else:
            await _unauthorized(scope, receive, send)
        return False

    async def _unauthenticated(
        self, scope: Scope, receive: Receive, send: Send, headers: Headers
    ) -> None:
        if (
            scope["type"] == "http"
            and scope.get("path") == "/"
            and scope.get("method") in ("GET", "HEAD")
        ):
            await signin.signin_page()(scope, receive, send)
            return
        if _cross_site_fetch(headers) and signin.cookie_value(
            headers.get("cookie", ""), signin.cookie_name(scope)
        ):
            await _reject(
                403,
                "Forbidden: a signed-in dashboard request must come from the dashboard's own "
                "page (Sec-Fetch-Site)",
                scope,
                receive,
                send,
            )
            return
        await _unauthorized(scope, receive, send)

    def _dashboard_allows(self, scope: Scope, headers: Headers, peer: Peer) -> bool:
        path = scope.get("path", "")
        if scope["type"] != "http" or not signin.is_dashboard_path(path):
            return False
        if path == "/login" or (path == "/logout" and scope.get("method") == "POST"):
            return True  # the form and sign-in (which checks the typed token); sign-out
        if path != "/" and _cross_site_fetch(headers):
            return False  # a data or control route fetched by another site's page
        sid = signin.cookie_value(headers.get("cookie", ""), signin.cookie_name(scope))
        if peer.identified and self.sessions.check(sid, peer):
            scope[AUTH_SCOPE_KEY] = "cookie"
            scope[signin.SESSION_SCOPE_KEY] = sid
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


def _cross_site_fetch(headers: Headers) -> bool:
    """A browser says the request was made by a page of another origin (a page on another
    port of this host included: it is the same *site*)."""
    site = headers.get("sec-fetch-site")
    return site is not None and site != "same-origin"


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    await _reject(
        401,
        "Unauthorized: send Authorization: Bearer <token>",
        scope,
        receive,
        send,
        {"WWW-Authenticate": 'Bearer realm="conch"'},
    )


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
