"""The guard asks whether a request comes from inside a sandboxed job (the runtime's
``sandboxed_caller``) off the event loop and within a time budget: a slow answer holds up
neither the server nor other requests, and one that overruns or fails is a refusal (403).
The guard runs in this process on real loopback connections (so it can tell their peers)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from conch.http.peers import LOOKUP_BUDGET_S
from conch.http.security import Guard

pytestmark = pytest.mark.anyio
Address = tuple[str, int]


@pytest.fixture
def connections() -> Iterator[Callable[[], tuple[Address, Address]]]:
    """Real loopback connections: (client address, server address) of each one made."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = [listener]

    def connect() -> tuple[Address, Address]:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        held.extend((client, accepted))
        return client.getsockname(), listener.getsockname()

    yield connect
    for s in held:
        s.close()


def guard(sandboxed_caller: Callable[[Address, Address], str | None]) -> Guard:
    async def ok(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Guard(
        Starlette(routes=[Route("/health", ok)]),
        bind_host="127.0.0.1",
        sandboxed_caller=sandboxed_caller,
    )


async def get(app: Guard, client: Address, server: Address) -> tuple[int, str]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/health",
        "raw_path": b"/health",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", f"127.0.0.1:{server[1]}".encode())],
        "client": client,
        "server": server,
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body.decode()


async def test_a_lookup_that_overruns_its_budget_is_refused_and_the_loop_runs_on(connections):
    released = threading.Event()

    def stuck(client: Address, server: Address) -> str | None:
        released.wait(10)
        return None

    app = guard(stuck)
    client, server = connections()
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.monotonic()
        while not done:
            await anyio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            t0 = time.monotonic()
            status, text = await get(app, client, server)
            took = time.monotonic() - t0
            done = True
    finally:
        released.set()
        app.close()
    assert status == 403 and "could not tell whether this request comes from" in text, text
    assert f"longer than {LOOKUP_BUDGET_S:g} s" in text
    assert LOOKUP_BUDGET_S <= took < LOOKUP_BUDGET_S + 1
    assert max(gaps) < 0.25, max(gaps)  # the loop was never held while it waited


async def test_a_lookup_that_fails_is_refused(connections):
    def broken(client: Address, server: Address) -> str | None:
        raise PermissionError("cannot read /proc")

    app = guard(broken)
    try:
        status, text = await get(app, *connections())
    finally:
        app.close()
    assert status == 403 and "PermissionError: cannot read /proc" in text, text


async def test_a_slow_lookup_holds_up_no_other_request(connections):
    slow_client, server = connections()
    quick_client, _ = connections()

    def lookup(client: Address, srv: Address) -> str | None:
        if client == slow_client:
            time.sleep(1.5)
        return "j_sandboxed" if client == slow_client else None

    app = guard(lookup)
    ends: dict[str, tuple[int, float]] = {}
    t0 = time.monotonic()

    async def one(name: str, client: Address) -> None:
        status, _ = await get(app, client, server)
        ends[name] = status, time.monotonic() - t0

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "slow", slow_client)
            await anyio.sleep(0.05)
            tg.start_soon(one, "quick", quick_client)
    finally:
        app.close()
    (slow_status, slow_end), (quick_status, quick_end) = ends["slow"], ends["quick"]
    assert slow_status == 403 and slow_end >= 1.5  # from inside a sandbox: refused
    assert quick_status == 200 and quick_end < 0.6, ends  # served meanwhile
