"""Resource-change notifications, debounced, for both protocol eras.

Runtime changes mark resource URIs dirty; one task sends each dirty URI at most every
``MIN_INTERVAL_S`` to the 2026-07-28 ``subscriptions/listen`` streams (through the SDK's bus)
and to the handshake-era sessions that sent ``resources/subscribe``.

This module holds Conch's only use of a private SDK attribute: ``ServerSession._connection``,
the connection a legacy subscription belongs to (the SDK gives no public identity for it).
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


class ResourceNotifier:
    def __init__(self, uris_for_change: Callable[[str | None], list[str]]) -> None:
        self._uris_for_change = uris_for_change
        self.bus = InMemorySubscriptionBus()
        # connection -> URIs it subscribed to (legacy resources/subscribe)
        self._legacy: dict[Any, set[str]] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- sources -----------------------------------------------------------------------------

    def on_runtime_change(self, job_id: str | None) -> None:
        """Runtime listener: a job (or the job/shell set) changed."""
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
        while True:
            await self._wake.wait()
            self._wake.clear()
            uris, self._dirty = self._dirty, set()
            for uri in sorted(uris):
                await self.publish(uri)
            await asyncio.sleep(MIN_INTERVAL_S)

    async def publish(self, uri: str) -> None:
        """Send one update of ``uri`` to every subscriber of both eras (never raises)."""
        try:
            await self.bus.publish(ResourceUpdated(uri=uri))
        except Exception:
            log.exception("publishing a resource update failed")
        for conn, uris in list(self._legacy.items()):
            if uri in uris:
                try:
                    await conn.send_resource_updated(uri)
                except Exception:
                    self._legacy.pop(conn, None)
