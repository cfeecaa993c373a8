"""Signing in to a token-protected dashboard (docs/spec.md §8): the token is typed once into a form,
and the browser gets a cookie that opens the dashboard's own routes only.

The cookie is a random session id kept by this server (:class:`Sessions`), not a value derived
from the token: it means nothing to another server or to this one after a restart, it is bound
to the peer that signed in (its local user on loopback, else its address), it expires
(``SESSION_IDLE_S`` without a request, ``SESSION_MAX_S`` after signing in), and ``/logout``
revokes it. It cannot be replayed as a bearer token against /invoke, /mcp, /sse, /health or
/manifest, which keep requiring the header. Each page of the dashboard also gets a token of its
own (:meth:`Sessions.page_token`), which its script sends with every control action.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import html
import math
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import Scope

from conch.http.peers import PEER_SCOPE_KEY, Peer

COOKIE = "conch_dashboard"  # the name's stem: each server port's cookie has a name of its own
SESSION_MAX_S = 12 * 3600.0  # a sign-in lasts 12 hours at most
SESSION_IDLE_S = 2 * 3600.0  # and ends after 2 hours without a request
MAX_SESSIONS = 64
PAGE_TOKEN_HEADER = "x-conch-page-token"
SESSION_SCOPE_KEY = "conch.session"  # the signed-in request's session id, set by the guard
# the routes a signed-in browser may use: the page, its data routes, sign-in/out
DASHBOARD_PREFIXES = ("/api/",)
DASHBOARD_PATHS = frozenset({"/", "/login", "/logout"})


def is_dashboard_path(path: str) -> bool:
    return path in DASHBOARD_PATHS or path.startswith(DASHBOARD_PREFIXES)


def cookie_name(scope: Scope) -> str:
    """The session cookie's name for the port the request came in on
    (``conch_dashboard_<port>``). A browser keeps one cookie jar per host, not per port: one
    name for every port would make a sign-in to one dashboard sign the person out of another
    on the same host. (The cookie still reaches every port of the host: what keeps it from
    working elsewhere is the session's binding to this run and peer, and the page token.)"""
    server = scope.get("server")
    port = server[1] if isinstance(server, (tuple, list)) and len(server) == 2 else None
    return f"{COOKIE}_{port}" if isinstance(port, int) else COOKIE


def cookie_value(cookie_header: str, name: str) -> str | None:
    """The value of the cookie ``name`` in a ``Cookie`` header, if any."""
    for part in cookie_header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value.strip()
    return None


@dataclass
class _Session:
    peer: str  # Peer.key of whoever signed in
    started: float
    seen: float


class Sessions:
    """The dashboard sign-ins of this server run, and the per-page tokens of its control
    actions. Pure state with an injectable clock; the app keeps one."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        max_s: float = SESSION_MAX_S,
        idle_s: float = SESSION_IDLE_S,
        limit: int = MAX_SESSIONS,
    ) -> None:
        self._clock, self.max_s, self.idle_s, self._limit = clock, max_s, idle_s, limit
        self._sessions: dict[str, _Session] = {}
        self._key = secrets.token_bytes(32)  # this run's: page tokens die with it

    def create(self, peer: Peer) -> str:
        now = self._clock()
        self._expire(now)
        while len(self._sessions) >= self._limit:
            self._sessions.pop(next(iter(self._sessions)))  # the oldest sign-in goes
        sid = secrets.token_urlsafe(32)
        self._sessions[sid] = _Session(peer.key, now, now)
        return sid

    def check(self, sid: str | None, peer: Peer) -> bool:
        """True when ``sid`` is a live session that ``peer`` (the same user or address)
        opened; a use keeps it from going idle."""
        if not sid:
            return False
        now = self._clock()
        self._expire(now)
        session = self._sessions.get(sid)
        if session is None or not hmac.compare_digest(session.peer, peer.key):
            return False
        session.seen = now
        return True

    def revoke(self, sid: str | None) -> None:
        if sid:
            self._sessions.pop(sid, None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _expire(self, now: float) -> None:
        for sid, s in list(self._sessions.items()):
            if now - s.started >= self.max_s or now - s.seen >= self.idle_s:
                del self._sessions[sid]

    # -- page tokens -------------------------------------------------------------------------

    def page_token(self, binding: str) -> str:
        """A fresh token for one page, good for control actions of the same ``binding`` (a
        session, or a peer where no token is set) while this server runs."""
        nonce = secrets.token_urlsafe(12)
        return f"{nonce}.{self._mac(binding, nonce)}"

    def page_token_valid(self, token: str | None, binding: str) -> bool:
        nonce, _, mac = (token or "").partition(".")
        if not nonce or not mac:
            return False
        return hmac.compare_digest(mac.encode(), self._mac(binding, nonce).encode())

    def _mac(self, binding: str, nonce: str) -> str:
        msg = f"conch page v1\0{binding}\0{nonce}".encode()
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()


def headers_for(nonce: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": f"default-src 'none'; style-src 'nonce-{nonce}'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",  # no-referrer would make forms send Origin: null
        "Cache-Control": "no-store",
        "WWW-Authenticate": 'Bearer realm="conch"',
    }


def signin_page(message: str = "", status: int = 401, retry_after: float = 0.0) -> Response:
    """The sign-in form (401: the request was not authenticated; 429: too many tries)."""
    nonce = secrets.token_urlsafe(16)
    note = f'<p id="msg" class="bad">{html.escape(message)}</p>' if message else ""
    body = SIGNIN.replace("{{NONCE}}", nonce).replace("{{MESSAGE}}", note)
    headers = headers_for(nonce)
    if retry_after > 0:
        headers["Retry-After"] = str(math.ceil(retry_after))
    return HTMLResponse(body, status_code=status, headers=headers)


class Throttle:
    """Wrong tokens per peer (a local user, or an address). Within ``limit`` wrong tries in
    ``window_s`` seconds each is answered at once (401); past that, the peer's tries are
    looked at one at a time (:meth:`turn`) and each wrong one is answered only after
    ``pace_s`` (429), so guessing gets no faster than the limit. A right token is never
    refused: it only waits for the turn of a try of the same peer already being looked at.
    Failures are pure state with an injectable clock; the app keeps one throttle."""

    def __init__(
        self,
        limit: int = 5,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 1024,
    ) -> None:
        self.limit, self.window_s, self._clock = limit, window_s, clock
        self.pace_s = window_s / limit
        self._failures: dict[str, deque[float]] = {}
        self._turns: dict[str, asyncio.Lock] = {}
        self._max_clients = max_clients

    def _recent(self, client: str) -> deque[float]:
        now = self._clock()
        times = self._failures.get(client)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[client]
        return times

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` is under the limit again (0: it is)."""
        times = self._recent(client)
        if len(times) < self.limit:
            return 0.0
        return max(0.0, times[len(times) - self.limit] + self.window_s - self._clock())

    @contextlib.asynccontextmanager
    async def turn(self, client: str) -> AsyncIterator[None]:
        """Hold ``client``'s turn while its try is looked at: none is needed under the
        limit; over it, one try at a time."""
        if self.retry_after(client) <= 0:
            self._turns.pop(client, None)
            yield
            return
        lock = self._turns.setdefault(client, asyncio.Lock())
        async with lock:
            yield

    def failed(self, client: str) -> None:
        if client not in self._failures and len(self._failures) >= self._max_clients:
            self._failures.pop(next(iter(self._failures)))  # the oldest client goes
        self._failures.setdefault(client, deque()).append(self._clock())

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)


async def wrong_token(throttle: Throttle, client: str) -> float:
    """Count a wrong token of ``client`` (inside its :meth:`Throttle.turn`): 0 when it is
    answered at once (401); else, after ``pace_s``, the Retry-After of its 429."""
    over = throttle.retry_after(client) > 0
    throttle.failed(client)
    if not over:
        return 0.0
    await asyncio.sleep(throttle.pace_s)
    return max(1.0, throttle.retry_after(client))


def throttled(throttle: Throttle, wait: float) -> str:
    """The answer to a wrong try over the limit, ``wait`` s before the peer is under it."""
    return (
        f"Too many wrong tokens: for {math.ceil(wait)} s more, each wrong try takes "
        f"{throttle.pace_s:g} s to be answered"
    )


def request_peer(request: Request) -> Peer:
    peer = request.scope.get(PEER_SCOPE_KEY)
    if isinstance(peer, Peer):
        return peer
    host = request.client.host if request.client is not None else ""
    return Peer(host, False)


async def login(request: Request, token: str, throttle: Throttle, sessions: Sessions) -> Response:
    """POST /login with ``token=…`` (a form): open a session and go to the dashboard (a
    server without a token has nothing to sign in to). A peer's wrong tries are throttled;
    the right token always signs in."""
    if not token or request.method != "POST":
        return RedirectResponse("/", status_code=303)
    peer = request_peer(request)
    if not peer.identified:
        return signin_page("Conch cannot tell which local user you are; try again.", 403)
    body = (await request.body()).decode("utf-8", "replace")
    given = parse_qs(body, max_num_fields=4).get("token", [""])[0]
    async with throttle.turn(peer.key):
        if not hmac.compare_digest(given.strip().encode(), token.encode()):
            wait = await wrong_token(throttle, peer.key)
            if wait > 0:
                return signin_page(throttled(throttle, wait) + ".", 429, retry_after=wait)
            return signin_page("That token is not right.")
        throttle.succeeded(peer.key)
    response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        cookie_name(request.scope),
        sessions.create(peer),
        max_age=int(sessions.max_s),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request, sessions: Sessions) -> Response:
    """POST /logout: the session ends here (not only in the browser)."""
    name = cookie_name(request.scope)
    sessions.revoke(cookie_value(request.headers.get("cookie", ""), name))
    response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
    response.delete_cookie(name, path="/", httponly=True, samesite="strict")
    return response


SIGNIN = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Conch · sign in</title>
<style nonce="{{NONCE}}">
body{font:14px/1.4 system-ui,sans-serif;display:flex;align-items:center;justify-content:center;
height:100vh;margin:0;background:#f4f5f7;color:#222}
form{background:#fff;padding:24px 28px;border-radius:8px;box-shadow:0 1px 4px #0002;width:320px}
h1{font-size:18px;margin:0 0 12px}label{display:block;margin-bottom:6px;color:#555}
input{width:100%;box-sizing:border-box;padding:8px;font:inherit;border:1px solid #bbb;
border-radius:4px}button{margin-top:12px;padding:8px 16px;font:inherit;border:0;
border-radius:4px;background:#2563eb;color:#fff;cursor:pointer}.bad{color:#b00}
</style></head><body>
<form id="signin" method="post" action="/login">
<h1>Conch dashboard</h1>{{MESSAGE}}
<label for="token">This server's access token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button id="go" type="submit">Sign in</button>
</form></body></html>
"""
