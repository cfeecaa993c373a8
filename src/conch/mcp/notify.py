"""Resource-change notifications, debounced, for both protocol eras.

Runtime changes mark resource URIs dirty; one task sends each dirty URI at once, and then
not again before ``MIN_INTERVAL_S``, to the 2026-07-28 ``subscriptions/listen`` streams
(through the SDK's bus) and to the handshake-era sessions that sent ``resources/subscribe``.

This module holds Conch's only use of a private SDK attribute: ``ServerSession._connection``,
the connection a legacy subscription belongs to (the SDK gives no public identity for it, and
makes a session object per message); and its channel, the one client a cancel's reason and a
detached job's notice belong to (mcp/server.py, mcp/detached.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

log = logging.getLogger("conch.mcp")
MIN_INTERVAL_S = 0.1  # ≤ 10 notifications per second per resource


def connection_of(session: ServerSession) -> Any:
    """The connection behind a per-request session proxy (private SDK attribute)."""
    return session._connection


def peer_of(session: ServerSession) -> Any:
    """The one client a message came from: its connection's channel (a stdio stream, an HTTP
    session), the same for every message of that client; a 2026-07-28 client gets a
    connection object per request, all on that one channel."""
    return connection_of(session).outbound


class _CountingBus(InMemorySubscriptionBus):
    """The SDK's bus, knowing whether anyone listens (so that no change costs a thing then)."""

    def __init__(self) -> None:
        super().__init__()
        self.listeners = 0

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        self.listeners += 1
        done = False

        def once() -> None:
            nonlocal done
            if not done:
                done = True
                self.listeners -= 1
            unsubscribe()

        return once


class ResourceNotifier:
    def __init__(self, uris_for_change: Callable[[str | None], list[str]]) -> None:
        self._uris_for_change = uris_for_change
        self.bus = _CountingBus()
        # connection -> URIs it subscribed to (legacy resources/subscribe)
        self._legacy: dict[Any, set[str]] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- sources -----------------------------------------------------------------------------

    def on_runtime_change(self, job_id: str | None) -> None:
        """Runtime listener: a job (or the job/shell set) changed. Nobody subscribed: nothing
        to mark (a subscriber reads the resource first, then gets later changes)."""
        if not self.bus.listeners and not self._legacy:
            return
        self._dirty.update(self._uris_for_change(job_id))
        self._wake.set()

    # -- legacy subscriptions ------------------------------------------------------------------

    def subscribe(self, session: ServerSession, uri: str) -> None:
        conn = connection_of(session)
        if conn not in self._legacy:
            self._legacy[conn] = set()
            with contextlib.suppress(Exception):
                conn.exit_stack.callback(self._legacy.pop, conn, None)
        self._legacy[conn].add(uri)

    def unsubscribe(self, session: ServerSession, uri: str) -> None:
        uris = self._legacy.get(connection_of(session))
        if uris is not None:
            uris.discard(uri)

    # -- delivery ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        """Each dirty URI goes out at once, unless it went to a subscriber less than
        MIN_INTERVAL_S ago: then when that interval is over. (One pause after every round of
        sends held back the first update of any other URI as well, by up to the interval: a
        job's first output after another resource's update.)"""
        loop = asyncio.get_running_loop()
        sent: dict[str, float] = {}  # URI -> when it last reached a subscriber
        timer: asyncio.TimerHandle | None = None  # the wake for URIs that must wait
        while True:
            await self._wake.wait()
            self._wake.clear()
            now = loop.time()
            for uri, when in list(sent.items()):
                if now - when >= MIN_INTERVAL_S:
                    del sent[uri]
            due = sorted(uri for uri in self._dirty if uri not in sent)
            self._dirty.difference_update(due)
            for uri in due:
                if await self.publish(uri):
                    sent[uri] = now
            if self._dirty:  # the rest went out too lately: wake when the first may again
                first = min(sent.get(uri, now) for uri in self._dirty) + MIN_INTERVAL_S
                if timer is None or timer.when() <= now or timer.when() > first:
                    if timer is not None:
                        timer.cancel()
                    timer = loop.call_at(first, self._wake.set)

    async def publish(self, uri: str) -> bool:
        """Send one update of ``uri`` to every subscriber of both eras (never raises);
        whether it may have reached one (a listen stream may filter it out)."""
        reached = self.bus.listeners > 0
        try:
            await self.bus.publish(ResourceUpdated(uri=uri))
        except Exception:
            log.exception("publishing a resource update failed")
        for conn, uris in list(self._legacy.items()):
            if uri in uris:
                reached = True
                try:
                    await conn.send_resource_updated(uri)
                except Exception:
                    self._legacy.pop(conn, None)
        return reached
