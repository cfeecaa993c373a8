"""Signing in to a token-protected dashboard (SPEC §8): the token is typed once into a form and
kept in an HttpOnly SameSite=Strict cookie that opens the dashboard's own routes only.

The cookie holds an HMAC of the token, not the token: it cannot be replayed as a bearer token
against /invoke, /mcp, /sse, /health or /manifest, which keep requiring the header.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import math
import secrets
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

COOKIE = "conch_dashboard"
COOKIE_MAX_AGE_S = 30 * 86400
# the routes a signed-in browser may use: the page, its data routes, sign-in/out
DASHBOARD_PREFIXES = ("/api/",)
DASHBOARD_PATHS = frozenset({"/", "/login", "/logout"})


def is_dashboard_path(path: str) -> bool:
    return path in DASHBOARD_PATHS or path.startswith(DASHBOARD_PREFIXES)


def session_value(token: str) -> str:
    return hmac.new(token.encode(), b"conch dashboard session v1", hashlib.sha256).hexdigest()


def cookie_valid(cookie_header: str, token: str) -> bool:
    """True when the ``Cookie`` header carries this server's session cookie."""
    want = session_value(token).encode()
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and hmac.compare_digest(value.strip().encode(), want):
            return True
    return False


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
    """Failed sign-ins per client: after ``limit`` within ``window_s`` seconds, further tries
    (right token or not) wait until the oldest failure leaves the window. Pure state with an
    injectable clock; the app keeps one."""

    def __init__(
        self,
        limit: int = 5,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 1024,
    ) -> None:
        self.limit, self.window_s, self._clock = limit, window_s, clock
        self._failures: dict[str, deque[float]] = {}
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
        """Seconds until ``client`` may try again (0: now)."""
        times = self._recent(client)
        if len(times) < self.limit:
            return 0.0
        return max(0.0, times[0] + self.window_s - self._clock())

    def failed(self, client: str) -> None:
        if client not in self._failures and len(self._failures) >= self._max_clients:
            self._failures.pop(next(iter(self._failures)))  # the oldest client goes
        self._failures.setdefault(client, deque()).append(self._clock())

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)


async def login(request: Request, token: str, throttle: Throttle) -> Response:
    """POST /login with ``token=…`` (a form): set the cookie and go to the dashboard (a server
    without a token has nothing to sign in to). Guessing is throttled per client."""
    if not token or request.method != "POST":
        return RedirectResponse("/", status_code=303)
    client = request.client.host if request.client is not None else ""
    wait = throttle.retry_after(client)
    if wait > 0:
        return signin_page(
            f"Too many wrong tokens: try again in {math.ceil(wait)} s.", 429, retry_after=wait
        )
    body = (await request.body()).decode("utf-8", "replace")
    given = parse_qs(body, max_num_fields=4).get("token", [""])[0]
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        throttle.failed(client)
        return signin_page("That token is not right.")
    throttle.succeeded(client)
    response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        COOKIE,
        session_value(token),
        max_age=COOKIE_MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
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
