"""One-time loopback pages where a person types a secret for a terminal (``--secret-prompt
elicit``; ``conch.mcp.secrets`` decides when to ask).

A small HTTP server on 127.0.0.1 (an ephemeral port), started on the first page and stopped
with the server, behind the same guard as the HTTP app (Host and Origin against DNS
rebinding, the body cap). Each page lives at a random, unguessable path, answers one
submission, and expires after ``PAGE_TTL_S`` (5 minutes). What is typed goes to the page's
``deliver`` callback and nowhere else: it is never logged, stored or echoed back.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from conch.http.security import Guard

log = logging.getLogger("conch.http")
PAGE_TTL_S = 300.0
MAX_SECRET_CHARS = 4096


@dataclass
class _Page:
    page_id: str
    url: str
    message: str
    deliver: Callable[[str], Awaitable[bool]]
    expires: float
    used: bool = False


@dataclass(frozen=True)
class PageHandle:
    page_id: str
    url: str


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """Leaves signal handling to the process that runs Conch."""

        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    return Server


class LoopbackSecretPages:
    def __init__(self, *, host: str = "127.0.0.1", ttl_s: float = PAGE_TTL_S) -> None:
        self._host = host
        self._ttl_s = ttl_s
        self._pages: dict[str, _Page] = {}  # secret path token -> page
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._port: int | None = None
        self._lock = asyncio.Lock()

    # -- the SecretPages protocol ----------------------------------------------------------------

    async def open(self, message: str, deliver: Callable[[str], Awaitable[bool]]) -> PageHandle:
        port = await self._ensure_server()
        self._prune()
        token = secrets.token_urlsafe(32)
        page_id = f"conch-secret-{secrets.token_hex(8)}"
        url = f"http://{self._host}:{port}/secret/{token}"
        self._pages[token] = _Page(page_id, url, message, deliver, time.monotonic() + self._ttl_s)
        return PageHandle(page_id, url)

    def cancel(self, page_id: str) -> None:
        for page in self._pages.values():
            if page.page_id == page_id:
                page.used = True

    def usable(self, page_id: str) -> bool:
        return any(
            p.page_id == page_id and self._live(token) is not None
            for token, p in self._pages.items()
        )

    async def aclose(self) -> None:
        self._pages.clear()
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 5)
            self._task = None
        self._server = None

    # -- the server ------------------------------------------------------------------------------

    @property
    def port(self) -> int | None:
        return self._port

    async def _ensure_server(self) -> int:
        async with self._lock:
            if self._port is not None:
                return self._port
            import uvicorn

            app = Starlette(
                routes=[Route("/secret/{token}", self._handle, methods=["GET", "POST"])]
            )
            config = uvicorn.Config(
                Guard(app, bind_host=self._host),
                host=self._host,
                port=0,
                log_level="warning",
                access_log=False,
                lifespan="off",
                server_header=False,
            )
            server = _server_class()(config)
            self._server = server
            self._task = asyncio.ensure_future(server.serve())
            while not server.started:
                if self._task.done():
                    raise RuntimeError("the secret page server did not start")
                await asyncio.sleep(0.01)
            self._port = int(server.servers[0].sockets[0].getsockname()[1])
            return self._port

    def _prune(self) -> None:
        now = time.monotonic()
        for token, page in list(self._pages.items()):
            if page.expires < now:
                del self._pages[token]

    def _live(self, token: str) -> _Page | None:
        page = self._pages.get(token)
        if page is None or page.used or page.expires < time.monotonic():
            return None
        return page

    async def _handle(self, request: Request) -> Response:
        token = request.path_params["token"]
        page = self._live(token)
        if page is None:
            return _page("This page has expired or was already used.", status=410)
        if request.method == "GET":
            return _page(page.message, form=True)
        value = _submitted(request.headers.get("content-type", ""), await request.body())
        if value is None:
            return _page("The form was empty; nothing was sent.", form=True, status=400)
        if len(value) > MAX_SECRET_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
            return _page(
                "That value has a line break or control character; nothing was sent.",
                form=True,
                status=400,
            )
        page.used = True  # single use: one value goes to the terminal, whatever happens next
        try:
            sent = await page.deliver(value)
        except Exception:
            log.warning("delivering a secret to its terminal failed")
            sent = False
        if not sent:
            return _page("The program is no longer waiting for it; nothing was sent.", status=409)
        return _page("Sent to the terminal. You can close this page.")


FIELDS = ("secret", "password", "value")


def _submitted(content_type: str, body: bytes) -> str | None:
    """The value of the page's form (``secret=…``), or of a JSON object's ``secret``; None
    when the request carries none."""
    text = body.decode("utf-8", "replace")
    if content_type.split(";")[0].strip().lower() == "application/json":
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if isinstance(data, dict):
            for key in FIELDS:
                if isinstance(data.get(key), str):
                    return str(data[key])
        return None
    try:
        fields = parse_qs(text, keep_blank_values=True, max_num_fields=8)
    except ValueError:
        return None
    for key in FIELDS:
        if key in fields:
            return fields[key][0]
    return None


def _page(message: str, *, form: bool = False, status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(16)
    body = (
        '<form method="post"><label for="secret">Secret</label>'
        '<input id="secret" name="secret" type="password" autocomplete="off" autofocus>'
        '<button id="send" type="submit">Send to the terminal</button></form>'
        if form
        else ""
    )
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Conch · a program asks for a secret</title>"
        f'<style nonce="{nonce}">body{{font:14px/1.4 system-ui,sans-serif;max-width:36em;'
        "margin:10vh auto;padding:0 1em}input{width:100%;padding:8px;font:inherit;"
        "box-sizing:border-box;margin:6px 0}button{padding:8px 16px;font:inherit}</style>"
        f'</head><body><h1>Conch</h1><p id="msg">{html.escape(message)}</p>{body}</body></html>'
    )
    return HTMLResponse(
        text,
        status_code=status,
        headers={
            "Content-Security-Policy": f"default-src 'none'; style-src 'nonce-{nonce}'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            "Cache-Control": "no-store",
            "Referrer-Policy": "same-origin",
            "X-Content-Type-Options": "nosniff",
        },
    )
