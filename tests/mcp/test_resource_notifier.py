"""The resource notifier (conch/mcp/notify.py) in process, with a handshake-era connection
stand-in: each URI at most every MIN_INTERVAL_S, and one URI's update never held back by
another's."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from types import SimpleNamespace
from typing import Any

import pytest

from conch.mcp.notify import MIN_INTERVAL_S, ResourceNotifier

pytestmark = pytest.mark.anyio


class Connection:
    def __init__(self) -> None:
        self.exit_stack = contextlib.ExitStack()
        self.got: list[tuple[float, str]] = []

    async def send_resource_updated(self, uri: str) -> None:
        self.got.append((time.monotonic(), uri))


async def until(conn: Connection, n: int) -> None:
    for _ in range(200):
        if len(conn.got) >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{n} updates expected, got {conn.got}")


async def test_each_uri_at_most_every_interval_and_none_held_back_by_another() -> None:
    changed: dict[str | None, list[str]] = {"j1": ["conch://jobs", "conch://jobs/j1/log"]}
    notifier = ResourceNotifier(lambda job_id: changed[job_id])
    conn = Connection()
    session: Any = SimpleNamespace(_connection=conn)
    notifier.subscribe(session, "conch://jobs")
    notifier.start()
    try:
        notifier.on_runtime_change("j1")  # the job started: the overview goes out
        await until(conn, 1)
        # the caller subscribes to the job's log only now (its start reached nobody there)
        notifier.subscribe(session, "conch://jobs/j1/log")
        t = time.monotonic()
        notifier.on_runtime_change("j1")  # its first output, 5 ms or so after the start
        await until(conn, 2)
        first_log = next(when for when, uri in conn.got if uri.endswith("/log"))
        assert first_log - t < MIN_INTERVAL_S / 2, conn.got  # not behind the overview's pause
        await until(conn, 3)  # the overview again, once its interval is over
        times = [when for when, uri in conn.got if uri == "conch://jobs"]
        assert len(times) == 2 and times[1] - times[0] >= MIN_INTERVAL_S * 0.95
        notifier.on_runtime_change("j1")  # right after: both wait their interval, then go
        await until(conn, 5)
        for uri in ("conch://jobs", "conch://jobs/j1/log"):
            times = [when for when, u in conn.got if u == uri]
            assert all(b - a >= MIN_INTERVAL_S * 0.95 for a, b in itertools.pairwise(times))
    finally:
        await notifier.aclose()
