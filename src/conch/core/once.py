"""A start that runs once, however many callers race to it (the engine's, the fleet's)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from conch.errors import RuntimeClosedError


class Once:
    def __init__(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._work = work
        self.task: asyncio.Task[None] | None = None  # the start, once begun

    async def run(self, *, closed: bool) -> None:
        """Begin the work (the first call) and wait for it; a caller that is cancelled
        leaves it running. After close: RuntimeClosedError."""
        if closed:
            raise RuntimeClosedError()
        if self.task is None:
            self.task = asyncio.ensure_future(self._work())
        await asyncio.shield(self.task)
