"""Tests for conch.core.output.digest_log: the log read in a worker thread, in bounded time."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from conch.core.output.digest_log import LogDigest, digest_of
from conch.core.output.log import JobLog

pytestmark = pytest.mark.anyio


def log_of(tmp_path, data: bytes, *, close: bool = True) -> JobLog:
    path = str(tmp_path / "j.log")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    log = JobLog(path, fd, cap=1 << 30)
    log.append(data)
    if close:
        log.close_writer()
    return log


async def test_a_log_too_slow_to_digest_in_time_says_how_far_it_got_and_goes_on(tmp_path):
    log = log_of(tmp_path, b"error: every line a hit\n" * 400_000)  # ~10 MB, the worst kind
    held = LogDigest()
    started = time.monotonic()
    first = await digest_of(log, held, cut=False, always=False, budget_s=0.05)
    waited = time.monotonic() - started
    assert waited < 2.0, waited  # the budget, and at most one block past it
    assert first is not None and "read with digest: true for the rest" in first["incomplete"]
    assert 0 < held.scanned < log.size()
    assert f"only the first {held.scanned} of {log.size()} bytes" in first["incomplete"]
    before = held.scanned
    await digest_of(log, held, cut=False, always=False, budget_s=0.05)
    assert held.scanned > before  # the next result goes on from there


async def test_the_event_loop_runs_while_a_log_is_digested(tmp_path):
    log = log_of(tmp_path, b"CC build/obj/module/file.o gcc -O2 -c src/file.c\n" * 600_000)
    held = LogDigest()
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    tick = asyncio.ensure_future(ticker())
    try:
        found = await digest_of(log, held, cut=False, always=True, budget_s=30)
    finally:
        tick.cancel()
    assert found == {"lines": []} and held.digester.closed
    assert gaps and max(gaps) < 0.5, max(gaps)


async def test_an_unreadable_log_gives_a_digest_that_says_so(tmp_path):
    log = log_of(tmp_path, b"x.c:1:1: error: a\n" * 10)
    os.unlink(log.path)
    held = LogDigest()
    found = await digest_of(log, held, cut=False, always=False)
    assert found is not None and found["lines"] == []
    assert "the log cannot be read" in found["incomplete"]
