"""A job log's digest (core/output/digest.py), read from the log file in a worker thread.

The event loop never scans a log: a result that needs a digest hands the reading to a thread
(RE2, which does most of the work, releases the GIL while it scans) and waits at most
``TIME_BUDGET_S`` for it. What the thread did not reach in time the digest says it did not
see (``incomplete``); the work done is kept, so a later result goes on from there.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Final

from conch.core.output.digest import Digest, Digester
from conch.core.output.log import JobLog

BLOCK_BYTES: Final = 256 << 10
"""Bytes read and fed at a time (the deadline is checked between blocks)."""

TIME_BUDGET_S: Final = 2.0
"""Longest a result waits for its digest."""

FOLLOW_FROM: Final = 4 << 20
"""A running job's log this large is digested as it grows (its result will want a digest:
no window holds it), so that little is left to do when the job ends."""

FOLLOW_STEP: Final = 8 << 20
"""Most bytes one turn of following digests (a turn holds a worker thread)."""


class LogDigest:
    """The digest of one job's log, built up as far as the log has been read."""

    def __init__(self) -> None:
        self.digester = Digester()
        self._lock = threading.Lock()
        self.shown = False  # a result carried it already (later ones repeat it on request)
        self.following = False  # a task digests the log as it grows (``follow``)

    @property
    def scanned(self) -> int:
        return self.digester.fed

    def advance(self, fd: int, upto: int, final: bool, deadline: float) -> None:
        """Feed the log's bytes up to ``upto`` (and close the digester when ``final`` and
        all are in), until ``deadline``; closes ``fd``. Runs in a worker thread."""
        try:
            if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return
            try:
                d = self.digester
                while d.fed < upto and time.monotonic() < deadline:
                    data = os.pread(fd, min(BLOCK_BYTES, upto - d.fed), d.fed)
                    if not data:
                        break
                    d.feed(data)
                if final and d.fed >= upto:
                    d.close()
            finally:
                self._lock.release()
        finally:
            os.close(fd)


async def build(log: JobLog, held: LogDigest, *, final: bool, budget_s: float) -> None:
    """Bring ``held`` up to the log's end (closed when ``final``: the log is complete), in a
    worker thread, waiting at most ``budget_s``."""
    upto = log.size()
    d = held.digester
    if d.fed >= upto:
        if final and not d.closed:
            d.close()
        return
    try:
        fd = log.reader()
    except OSError:
        return  # (said by `incomplete`)
    deadline = time.monotonic() + budget_s
    await asyncio.to_thread(held.advance, fd, upto, final, deadline)


async def follow(log: JobLog, held: LogDigest, running: Callable[[], bool]) -> None:
    """Digest a growing log in turns of at most ``FOLLOW_STEP`` bytes in a worker thread,
    while ``running()``: the job's result then only has the rest to do."""
    held.following = True
    try:
        while running():
            upto = log.size()
            if upto - held.scanned < 1 << 20:
                await asyncio.sleep(0.1)
                continue
            try:
                fd = log.reader()
            except OSError:
                return
            upto = min(upto, held.scanned + FOLLOW_STEP)
            await asyncio.to_thread(held.advance, fd, upto, False, time.monotonic() + 2.0)
    finally:
        held.following = False


def incomplete(log: JobLog, held: LogDigest, *, cut: bool) -> str | None:
    """Why the digest does not cover all the job printed, or None. ``cut``: the job was
    stopped at ``max_log_bytes``."""
    if log.unreadable and held.scanned < log.size():
        return f"the log cannot be read ({log.unreadable}): only its first {held.scanned} bytes"
    if held.scanned < log.size():
        return (
            f"only the first {held.scanned} of {log.size()} bytes were digested in the "
            f"{TIME_BUDGET_S:g} s a result waits; read with digest: true for the rest"
        )
    if cut:
        return (
            f"the job was stopped at max_log_bytes ({log.cap} bytes): what it printed after "
            "is in neither the log nor this digest"
        )
    if log.lost_bytes:
        return f"{log.lost_bytes} bytes of output could not be logged ({log.lost_reason})"
    return None


async def digest_of(
    log: JobLog, held: LogDigest, *, cut: bool, always: bool, budget_s: float = TIME_BUDGET_S
) -> Digest | None:
    """The digest of a finished job's log (``always``: even when nothing was found)."""
    await build(log, held, final=log.closed, budget_s=budget_s)
    why = incomplete(log, held, cut=cut)
    # a digest that did not get through the log says so even when it found nothing yet
    partial = held.scanned < log.size()
    found = held.digester.digest(always=always or partial)
    if found is not None and why is not None:
        found["incomplete"] = why
    return found
