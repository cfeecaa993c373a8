"""Running ripgrep: the asyncio protocol that streams its output into a parser, stops it at
the cap or the timeout, and the reaping that survives cancellation."""

from __future__ import annotations

import asyncio
import contextlib

from conch.core.search.parse import JsonParser, NullParser

_MAX_READ_BYTES = 64 * 1024 * 1024
_STDERR_KEEP = 64 * 1024
_COALESCE_S = 0.001  # how long rg's output may wait in the pipe before we read it


class RgProtocol(asyncio.SubprocessProtocol):
    """Feeds rg's stdout straight into a parser from the event loop's read callbacks.

    No StreamReader and no reader task: one callback per pipe read, which matters when rg
    writes a small block per matching file. Kills rg once the parser has enough (or the byte
    cap is hit); ``done`` resolves when rg has exited and both pipes are closed.
    """

    def __init__(self, parser: JsonParser | NullParser, done: asyncio.Future[None]) -> None:
        self.parser = parser
        self.done = done
        self.transport: asyncio.SubprocessTransport | None = None
        self.stderr = bytearray()
        self.total = 0
        self.stopped = False  # we killed rg because we had what we need
        self.timed_out = False
        self.paused = False  # stdout reading paused for a moment to batch small writes
        self.failure: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if isinstance(data, str):  # pragma: no cover - pipes are binary
            data = data.encode()
        if fd == 1:
            if self.stopped or self.timed_out:
                return
            self.total += len(data)
            try:
                stop = self.parser.feed(data)
            except Exception as exc:  # a parser bug must not leave rg running
                self.failure = exc
                stop = True
            if stop or self.total >= _MAX_READ_BYTES:
                self.stopped = True
                self.kill()
            elif _COALESCE_S > 0 and self.transport is not None:
                # rg writes one small block per matching file; waking up for each costs more
                # than parsing it. Let output pile up in the pipe for a moment instead.
                pipe = self.transport.get_pipe_transport(1)
                if isinstance(pipe, asyncio.ReadTransport) and not self.paused:
                    # our own flag: ReadTransport.is_reading() is not implemented on 3.10
                    self.paused = True
                    pipe.pause_reading()
                    asyncio.get_running_loop().call_later(_COALESCE_S, self._resume, pipe)
        elif fd == 2:
            room = _STDERR_KEEP - len(self.stderr)
            if room > 0:
                self.stderr += data[:room]

    def _resume(self, pipe: asyncio.ReadTransport) -> None:
        self.paused = False
        if not pipe.is_closing():
            pipe.resume_reading()

    def on_timeout(self) -> None:
        if self.returncode() is None and not self.stopped:
            self.timed_out = True
            self.kill()

    def returncode(self) -> int | None:
        return self.transport.get_returncode() if self.transport is not None else None

    def kill(self) -> None:
        t = self.transport
        if t is not None and not t.is_closing() and t.get_returncode() is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                t.kill()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def reap(proto: RgProtocol) -> None:
    """Kill rg and wait until it is reaped, even if the caller is cancelled (again) meanwhile."""
    proto.kill()
    cancelled = False
    while not proto.done.done():
        try:
            await asyncio.shield(proto.done)
        except asyncio.CancelledError:
            cancelled = True
            proto.kill()
    if cancelled:
        raise asyncio.CancelledError
