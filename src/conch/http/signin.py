"""Signing in to a token-protected dashboard (SPEC §8): the token is typed once into a form and
kept in an HttpOnly SameSite=Strict cookie that opens the dashboard's own routes only.

The cookie holds an HMAC of the token, not the token: it cannot be replayed as a bearer token
against /invoke, /mcp, /sse, /health or /manifest, which keep requiring the header.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import secrets
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


def signin_page(message: str = "", status: int = 401) -> Response:
    """The sign-in form (401: the request was not authenticated)."""
    nonce = secrets.token_urlsafe(16)
    note = f'<p id="msg" class="bad">{html.escape(message)}</p>' if message else ""
    body = SIGNIN.replace("{{NONCE}}", nonce).replace("{{MESSAGE}}", note)
    return HTMLResponse(body, status_code=status, headers=headers_for(nonce))


async def login(request: Request, token: str) -> Response:
    """POST /login with ``token=…`` (a form): set the cookie and go to the dashboard (a server
    without a token has nothing to sign in to)."""
    if not token or request.method != "POST":
        return RedirectResponse("/", status_code=303)
    body = (await request.body()).decode("utf-8", "replace")
    given = parse_qs(body, max_num_fields=4).get("token", [""])[0]
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        return signin_page("That token is not right.")
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
