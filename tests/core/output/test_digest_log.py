"""Tests for conch.core.output.digest_log: the log read in a worker thread, in bounded time."""

from __future__ import annotations

import asyncio
import os
import random
import time

import pytest
from digest_checks import adversarial, check_faithful

from conch.core.output.digest import digest_bytes
from conch.core.output.digest_log import LogDigest, build, digest_of
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


async def test_digested_in_any_turns_as_the_log_grows_it_is_the_whole_logs_digest(tmp_path):
    """Following a growing log (turns over what has arrived so far, any sizes) gives the
    digest one pass over the finished log gives: no line invented, none lost."""
    rng = random.Random(5)
    for i in range(40):
        data = adversarial(rng, rng.randint(0, 200_000))
        path = str(tmp_path / f"j{i}.log")
        log = JobLog(path, os.open(path, os.O_RDWR | os.O_CREAT, 0o600), cap=1 << 30)
        held = LogDigest()
        written = 0
        while written < len(data):
            n = rng.randint(1, 40_000)
            log.append(data[written : written + n])
            written += n
            if rng.random() < 0.6:  # a turn of following, over what has arrived
                await build(log, held, final=False, budget_s=30)
        log.close_writer()
        found = await digest_of(log, held, cut=False, always=True, budget_s=30)
        assert found == digest_bytes(data, always=True)
        check_faithful(data, found)


WORST = [
    pytest.param(b"x" * (8 << 20), id="one 8 MB line"),
    pytest.param(b"\rerror: frame" * (1 << 19), id="a carriage-return storm"),
    pytest.param(b"\x1b[1;31merror\x1b[0m: \x1b]8;;u\x07y\n" * (1 << 17), id="ANSI noise"),
    pytest.param(bytes(range(256)) * (1 << 15), id="invalid UTF-8"),
    pytest.param(b"error: e\n" * (1 << 20), id="every line a hit"),
    pytest.param(
        b'Traceback (most recent call last):\n  File "a", line 1\n' * (1 << 17), id="follows"
    ),
]


@pytest.mark.parametrize("data", WORST)
async def test_a_result_never_waits_past_its_budget_for_the_worst_output(tmp_path, data):
    """Whatever the output, a result waits its budget and at most about one block more, and
    what the digest holds by then is faithful and says how far it got."""
    log = log_of(tmp_path, data)
    held = LogDigest()
    budget = 0.1
    started = time.monotonic()
    found = await digest_of(log, held, cut=False, always=True, budget_s=budget)
    waited = time.monotonic() - started
    assert waited < budget + 1.0, waited  # and a block (BLOCK_BYTES) of the slowest kind
    assert found is not None
    check_faithful(data, found)
    if held.scanned < log.size():
        assert f"only the first {held.scanned} of {log.size()} bytes" in found["incomplete"]
    else:
        assert "incomplete" not in found
