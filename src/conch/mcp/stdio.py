"""``conch serve``: MCP over stdin/stdout until EOF, SIGTERM or SIGINT, then clean up everything.

Nothing but protocol goes to stdout: the wire moves to private descriptors and fd 0/1 point at
/dev/null and stderr while serving. Both directions are served by the event loop, without a
worker thread: a signal can end the server at once instead of waiting for a blocked read, and a
response costs no thread hand-offs (the SDK's default file wrapper takes two per message).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from conch.config import Config

if TYPE_CHECKING:
    from conch.mcp.secrets import SecretPages

log = logging.getLogger("conch.mcp")
_MAX_LINE = 256 * 1024 * 1024
_FLUSH_LIMIT_S = 0.5
_EOF_SETTLE_S = 1.5  # + ~1 s of tree killing keeps EOF-to-exit within the 3 s target


class _StdinLines:
    """Protocol lines from a pipe on fd 0, read by the event loop (cancellable)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        # called at EOF before the server sees it: lets calls already received answer
        self.before_eof: Callable[[], Awaitable[None]] | None = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            line = await self._reader.readline()
            if not line:
                if self.before_eof is not None:
                    await self.before_eof()
                return
            yield line.decode("utf-8", "replace")


async def _claim_stdin() -> _StdinLines | None:
    """Serve fd 0 from a private duplicate and point fd 0 at /dev/null; None when stdin is
    not a pipe or socket (then the SDK's threaded reader is used)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    private = os.dup(0)
    os.set_inheritable(private, False)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_MAX_LINE)
    try:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(private, "rb", buffering=0)
        )
    except (OSError, ValueError):
        os.close(private)
        return None
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return _StdinLines(reader)


class _WireProtocol(asyncio.Protocol):
    """Flow control of the stdout pipe: ``paused`` while the transport holds unwritten bytes."""

    def __init__(self) -> None:
        self.paused = False
        self.lost = False
        self._waiters: list[asyncio.Future[None]] = []

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def drained(self) -> None:
        while self.paused and not self.lost:
            w = asyncio.get_running_loop().create_future()
            self._waiters.append(w)
            await w


class _StdoutLines:
    """Protocol lines to a pipe on a private duplicate of fd 1, written by the event loop: a
    line goes to the kernel at once when the pipe has room (no thread), else when it drains."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: _WireProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        transport.set_write_buffer_limits(high=0)  # paused = something is still buffered

    async def write(self, text: str) -> None:
        if self._protocol.lost or self._transport.is_closing():
            raise BrokenPipeError("the client closed stdout")
        self._transport.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Like a file's flush: returns once every byte is in the kernel's pipe."""
        await self._protocol.drained()

    def close(self) -> None:
        self._transport.close()


async def _claim_stdout() -> tuple[_StdoutLines, Callable[[], None]] | None:
    """Serve fd 1 from a private duplicate and point fd 1 at stderr (stray prints, children);
    None when stdout is not a pipe or socket (then the SDK's file wrapper is used). Returns the
    writer and the function that puts fd 1 back."""
    try:
        mode = os.fstat(1).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    private = os.dup(1)
    os.set_inheritable(private, False)
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(
            _WireProtocol, os.fdopen(private, "wb", buffering=0)
        )
    except (OSError, ValueError):
        os.close(private)
        return None
    saved = os.dup(1)
    os.set_inheritable(saved, False)
    os.dup2(2, 1)
    writer = _StdoutLines(transport, protocol)

    def restore() -> None:
        writer.close()
        with contextlib.suppress(OSError):
            os.dup2(saved, 1)
        os.close(saved)

    return writer, restore


async def serve_stdio(cfg: Config, secret_pages: SecretPages | None = None) -> None:
    from mcp.server.stdio import stdio_server

    from conch.mcp.server import ConchMCP
    from conch.runtime import Runtime

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    stdin: Any = await _claim_stdin()
    claimed = await _claim_stdout()
    stdout: Any = claimed[0] if claimed else None
    try:
        async with Runtime(cfg, owns_process=True) as rt:
            mcp = ConchMCP(rt, transport="stdio", secret_pages=secret_pages)
            if isinstance(stdin, _StdinLines):
                stdin.before_eof = lambda: mcp.settle_calls(_EOF_SETTLE_S)
            mcp.start()
            try:
                async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
                    await mcp.server.run(read, write, mcp.initialization_options())
            finally:
                await mcp.aclose()
    except asyncio.CancelledError:
        log.info("signal received; stopped every job")
    finally:
        if claimed is not None:
            with contextlib.suppress(Exception):  # a client that stopped reading
                await asyncio.wait_for(claimed[0].flush(), _FLUSH_LIMIT_S)
            claimed[1]()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)


def run_stdio(cfg: Config, secret_pages: SecretPages | None = None) -> int:
    """``secret_pages``: where ``--secret-prompt elicit`` serves its one-time pages (the
    front end above this layer provides them; see ``conch.http.secret_page``)."""
    asyncio.run(serve_stdio(cfg, secret_pages))
    return 0
