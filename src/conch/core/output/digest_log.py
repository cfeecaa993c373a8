"""A job log's digest (core/output/digest.py), read from the log file in a worker thread.

The event loop never scans a log: a result that needs a digest hands the reading to a thread
(RE2, which does most of the work, releases the GIL while it scans) and waits at most
``TIME_BUDGET_S`` for it. What the thread did not reach in time the digest says it did not
see (``incomplete``); the work done is kept, so a later result goes on from there.

A job whose log passes ``FOLLOW_FROM`` will want a digest (no window holds its output), so
its log is digested while it prints (``follow``), in turns in a worker thread that start as
soon as enough new output has arrived: the scan runs beside the job, and its result only has
the last turn's worth left. Each byte is read from the log once.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Final

from conch.core.output.digest import Digest, Digester
from conch.core.output.log import JobLog

BLOCK_BYTES: Final = (16 << 10, 64 << 10, 1 << 20)
"""Bytes read and fed at a time: least, first, most. The deadline is checked between
blocks, so a block that took long (output where every line is a hit) makes the next ones
smaller, and one that took little makes them larger (fewer calls over plain output)."""

BLOCK_S: Final = (0.005, 0.02)
"""A block faster than the first grows the next; one slower than the second shrinks it."""

TIME_BUDGET_S: Final = 2.0
"""Longest a result waits for its digest."""

FOLLOW_FROM: Final = 1 << 20
"""A running job's log this large is digested as it grows: its result will want a digest
(the largest inline budget is 1 MiB), so that little is left to do when the job ends."""

FOLLOW_MIN: Final = 256 << 10
"""New output that starts a turn of following at once (less waits ``FOLLOW_WAIT_S``)."""

FOLLOW_WAIT_S: Final = 0.05
"""How long following lets less than ``FOLLOW_MIN`` of new output gather."""

FOLLOW_TURN_S: Final = 0.25
"""Longest turn of following (a turn holds a worker thread and the digest's lock)."""


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

    def caught_up(self, upto: int, final: bool) -> bool:
        """Whether all up to ``upto`` is fed (then closed when ``final``) without waiting:
        the closing (the log's unfinished last line) is done here, when no turn of
        following holds the digest."""
        d = self.digester
        if d.fed < upto:
            return False
        if not final or d.closed:
            return True
        if not self._lock.acquire(blocking=False):
            return False  # a turn of following is under way: the worker thread closes it
        try:
            d.close()
        finally:
            self._lock.release()
        return True

    def advance(self, fd: int, upto: int, final: bool, deadline: float) -> None:
        """Feed the log's bytes up to ``upto`` (and close the digester when ``final`` and
        all are in), until ``deadline``; closes ``fd``. Runs in a worker thread."""
        try:
            if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return
            try:
                d = self.digester
                least, step, most = BLOCK_BYTES
                now = time.monotonic()
                while d.fed < upto and now < deadline:
                    data = os.pread(fd, min(step, upto - d.fed), d.fed)
                    if not data:
                        break
                    d.feed(data)
                    took, now = -now, time.monotonic()
                    took += now
                    if took < BLOCK_S[0]:
                        step = min(most, step * 2)
                    elif took > BLOCK_S[1]:
                        step = max(least, step // 4)
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
    if held.caught_up(upto, final):
        return
    try:
        fd = log.reader()
    except OSError:
        return  # (said by `incomplete`)
    deadline = time.monotonic() + budget_s
    await asyncio.to_thread(held.advance, fd, upto, final, deadline)


async def follow(
    log: JobLog,
    held: LogDigest,
    running: Callable[[], bool],
    more: Callable[[float], Awaitable[object]],
) -> None:
    """Digest a growing log in a worker thread while ``running()``, in turns of at most
    ``FOLLOW_TURN_S`` over the output that has arrived: the job's result then only has the
    rest to do. ``more(timeout_s)`` waits until the job prints or changes (or the
    timeout). No turn starts once the job has ended: its result takes the digest over."""
    held.following = True
    try:
        while running():
            new = log.size() - held.scanned
            if new <= 0:
                await more(1.0)
                continue
            if new < FOLLOW_MIN:
                await asyncio.sleep(FOLLOW_WAIT_S)  # let a trickle gather (or the job end)
                if not running():
                    break
            try:
                fd = log.reader()
            except OSError:
                return
            deadline = time.monotonic() + FOLLOW_TURN_S
            await asyncio.to_thread(held.advance, fd, log.size(), False, deadline)
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
