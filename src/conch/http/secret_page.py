"""One-time loopback pages where a person types a secret for a terminal (``--secret-prompt
elicit``; ``conch.mcp.secrets`` decides when to ask).

A small HTTP server on 127.0.0.1 (an ephemeral port), started on the first page and stopped
with the server, behind the same guard as the HTTP app (Host and Origin against DNS
rebinding, the body cap). Each page lives at a random, unguessable path, answers one
submission, and expires after ``PAGE_TTL_S`` (5 minutes). What is typed goes to the page's
``deliver`` callback and nowhere else: it is never logged, stored or echoed back.

The page promises no more than that. It shows what the agent ran and why, which program reads
the terminal (it gets the value: the agent started it), and a warning when that is no known
password program; then a value is sent only with an explicit second confirmation (a box the
person ticks: ``confirm=unverified``), and never when that program changed since the page was
shown.
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
from conch.mcp.secrets import SecretAsk

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
    describe: Callable[[], SecretAsk] | None = None
    # the processes reading the terminal as the page last showed them (or as it was opened)
    shown: tuple[tuple[int, str | None], ...] = ()
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

    async def open(
        self,
        message: str,
        deliver: Callable[[str], Awaitable[bool]],
        describe: Callable[[], SecretAsk] | None = None,
    ) -> PageHandle:
        port = await self._ensure_server()
        self._prune()
        token = secrets.token_urlsafe(32)
        page_id = f"conch-secret-{secrets.token_hex(8)}"
        url = f"http://{self._host}:{port}/secret/{token}"
        page = _Page(page_id, url, message, deliver, time.monotonic() + self._ttl_s, describe)
        if describe is not None:
            page.shown = describe().readers
        self._pages[token] = page
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
        ask = page.describe() if page.describe is not None else None
        if request.method == "GET":
            if ask is not None:
                page.shown = ask.readers
            return _page(page.message, ask=ask, form=True)
        body = await request.body()
        value = _submitted(request.headers.get("content-type", ""), body)
        if value is None:
            return _page("The form was empty; nothing was sent.", ask=ask, form=True, status=400)
        if len(value) > MAX_SECRET_CHARS or any(_not_typed(c) for c in value):
            return _page(
                "That value has a line break, a control character or a lone surrogate (no "
                "text); nothing was sent.",
                ask=ask,
                form=True,
                status=400,
            )
        if ask is not None and ask.readers != page.shown:
            # another program reads the terminal now than the page showed: the person decides
            # again, seeing it (a real prompt that gave up, and a fake one in its place)
            page.shown = ask.readers
            return _page(
                "Another program reads the terminal now than when this page was shown; "
                "nothing was sent. Check below who asks now, then send again if you mean to.",
                ask=ask,
                form=True,
                status=409,
            )
        if _unverified(ask) and not _confirmed(request.headers.get("content-type", ""), body):
            return _page(
                "Nothing was sent: the program reading the terminal is not a known password "
                "program, and what you type goes to it. Tick the box below to confirm that you "
                "mean to give this value to that program.",
                ask=ask,
                form=True,
                notice=True,  # the form again, as web forms do: an ordinary 200 page
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


def _not_typed(c: str) -> bool:
    """A character no value typed at a prompt holds: a control character (Enter ends the
    line), or a lone UTF-16 surrogate (a JSON body's escape, no text)."""
    return ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF


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


#: the value of the second confirmation a page asks for when the program is no known one
CONFIRM = "unverified"


def _unverified(ask: SecretAsk | None) -> bool:
    """The value would go to a program not known to be a password program (or to one the
    page cannot name): a value is sent only with the person's second confirmation."""
    return ask is None or ask.warn


def _confirmed(content_type: str, body: bytes) -> bool:
    """The form's box (``confirm=unverified``), or a JSON object's ``"confirm":
    "unverified"``, is in the request."""
    text = body.decode("utf-8", "replace")
    if content_type.split(";")[0].strip().lower() == "application/json":
        try:
            data = json.loads(text)
        except ValueError:
            return False
        return isinstance(data, dict) and data.get("confirm") == CONFIRM
    try:
        fields = parse_qs(text, keep_blank_values=True, max_num_fields=8)
    except ValueError:
        return False
    return CONFIRM in fields.get("confirm", [])


def _who(path: str | None, pid: int) -> str:
    if pid == 0:  # (the processes the search for readers did not look at in time)
        return "processes Conch could not check in time"
    return f"{path} (process {pid})" if path is not None else f"process {pid}"


def _ask_html(ask: SecretAsk) -> str:
    """Who asks: what the agent ran and why, which program reads the terminal, and what that
    means for the value (every text escaped; the command as the dashboard shows it)."""
    e = html.escape
    prompt = f" (<q>{e(ask.prompt)}</q>)" if ask.prompt else ""
    readers = ", ".join(_who(path, pid) for pid, path in ask.readers) or "unknown"
    warning = ""
    if ask.warn:
        who = ", ".join(ask.unknown) or "a program Conch cannot tell"
        warning = (
            '<p id="warning" class="warn"><strong>Warning: this is not a known password '
            f"prompt.</strong> The program reading the terminal is {e(who)}, not a password "
            "program such as sudo, ssh or passwd. A prompt that only looks like one (a shell's "
            "<code>read -s</code>, a script) can keep what you type and give it to the agent. "
            "Type a password here only if you expected this very program to ask for it.</p>"
        )
    return (
        f'{warning}<p id="msg">A program in job <code>{e(ask.job_id)}</code> is asking for a '
        f"password or other secret{prompt}.</p><dl>"
        f'<dt>The agent ran</dt><dd><pre id="what">{e(ask.what or "(not known)")}</pre></dd>'
        f'<dt>Its stated purpose</dt><dd id="purpose">{e(ask.purpose or "(none given)")}</dd>'
        f'<dt>Reading the terminal now</dt><dd id="reader">{e(readers)}</dd></dl>'
        '<p id="goes">What you send goes to that program, followed by Enter. The agent '
        "started it: Conch keeps the value out of results, logs and the dashboard, but the "
        "program can do anything with it, such as save it where the agent can read it.</p>"
    )


def _page(
    message: str,
    *,
    ask: SecretAsk | None = None,
    form: bool = False,
    status: int = 200,
    notice: bool = False,
) -> Response:
    """A page: ``message`` alone, or (with ``ask``) who asks, headed by ``message`` as a
    notice when the status is not 200 or ``notice`` is set (nothing was sent)."""
    nonce = secrets.token_urlsafe(16)
    body = ""
    if form and _unverified(ask):
        # the second confirmation: the value goes to a program no one vouches for
        body = (
            '<form method="post"><label for="secret">Secret</label>'
            '<input id="secret" name="secret" type="password" autocomplete="off" autofocus>'
            f'<p><label><input id="confirm" name="confirm" type="checkbox" value="{CONFIRM}" '
            "required> I understand that this value goes to a program that is not a known "
            "password program, which the agent started: it can keep the value and hand it "
            "to the agent.</label></p>"
            '<button id="send" type="submit">Send to this unverified program</button></form>'
        )
    elif form:
        body = (
            '<form method="post"><label for="secret">Secret</label>'
            '<input id="secret" name="secret" type="password" autocomplete="off" autofocus>'
            '<button id="send" type="submit">Send to the terminal</button></form>'
        )
    if ask is None:
        about = f'<p id="msg">{html.escape(message)}</p>'
    elif form and status == 200 and not notice:
        about = _ask_html(ask)
    else:  # a notice first (nothing was sent), then who asks
        about = f'<p id="notice">{html.escape(message)}</p>' + _ask_html(ask)
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Conch · a program asks for a secret</title>"
        f'<style nonce="{nonce}">body{{font:14px/1.4 system-ui,sans-serif;max-width:36em;'
        "margin:10vh auto;padding:0 1em}input{width:100%;padding:8px;font:inherit;"
        "box-sizing:border-box;margin:6px 0}button{padding:8px 16px;font:inherit}"
        "pre{white-space:pre-wrap;word-break:break-all;margin:0}dd{margin:0 0 8px 1em}"
        ".warn{border:2px solid #b00;background:#fee;padding:8px}</style>"
        f"</head><body><h1>Conch</h1>{about}{body}</body></html>"
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
