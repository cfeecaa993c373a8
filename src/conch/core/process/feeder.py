"""Input for a non-blocking fd (a stdin pipe, a terminal): written as the fd takes it, the rest
queued until it is writable again, so a slow reader never blocks the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable


def write_nonblocking(fd: int, data: bytes) -> int:
    """os.write that reports a full fd as 0 bytes written."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


class Feeder:
    def __init__(
        self,
        fd: int,
        write: Callable[[int, bytes], int] = write_nonblocking,
        *,
        on_error: Callable[[], None] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd = fd
        self._write = write
        self._pending = b""
        self._waiting = False
        self._on_error = on_error
        # called once everything queued so far has been written (e.g. to close a stdin pipe)
        self.on_drained: Callable[[], None] | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    def put(self, data: bytes) -> None:
        self._pending += data
        self.flush()

    def flush(self) -> None:
        while self._pending:
            try:
                n = self._write(self._fd, self._pending)
            except OSError:  # the reader is gone: what is left can never be delivered
                self.clear()
                if self._on_error is not None:
                    self._on_error()
                return
            if n == 0:
                if not self._waiting:
                    self._loop.add_writer(self._fd, self.flush)
                    self._waiting = True
                return
            self._pending = self._pending[n:]
        self._stop_waiting()
        if self.on_drained is not None:
            drained, self.on_drained = self.on_drained, None
            drained()

    def clear(self) -> None:
        """Drop what is queued (the command it was typed for has ended, or the fd closes)."""
        self._pending = b""
        self._stop_waiting()

    def _stop_waiting(self) -> None:
        if self._waiting:
            self._waiting = False
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_writer(self._fd)
