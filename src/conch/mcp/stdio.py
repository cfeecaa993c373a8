"""``conch serve``: MCP over stdin/stdout until EOF, SIGTERM or SIGINT, then clean up everything.

Nothing but protocol goes to stdout (the SDK moves the wire to a private descriptor and points
fd 1 at stderr while serving). stdin is read without a worker thread so that a signal can end
the server at once instead of waiting for a blocked read.
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
    try:
        async with Runtime(cfg, owns_process=True) as rt:
            mcp = ConchMCP(rt, transport="stdio", secret_pages=secret_pages)
            if isinstance(stdin, _StdinLines):
                stdin.before_eof = lambda: mcp.settle_calls(_EOF_SETTLE_S)
            mcp.start()
            try:
                async with stdio_server(stdin=stdin) as (read, write):
                    await mcp.server.run(read, write, mcp.initialization_options())
            finally:
                await mcp.aclose()
    except asyncio.CancelledError:
        log.info("signal received; stopped every job")
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)


def run_stdio(cfg: Config, secret_pages: SecretPages | None = None) -> int:
    """``secret_pages``: where ``--secret-prompt elicit`` serves its one-time pages (the
    front end above this layer provides them; see ``conch.http.secret_page``)."""
    asyncio.run(serve_stdio(cfg, secret_pages))
    return 0
