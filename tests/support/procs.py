"""Helpers of the containment tests: watching processes come and go."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

MiB = 1024 * 1024


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_for(pred: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def _text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def read_pid(path: str, within_s: float = 5.0) -> int:
    """The pid a test's process wrote to ``path`` (waiting for it to appear)."""
    assert wait_for(lambda: _text(path).strip() != "", within_s)
    return int(_text(path).split()[0])


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def reap_zombie_children(within_s: float = 2.0) -> None:
    """Reap killed orphans that came back to this process (a runtime made it a subreaper)."""
    import psutil

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        kids = psutil.Process().children()
        for z in kids:
            try:
                if z.status() != psutil.STATUS_ZOMBIE:
                    continue
            except psutil.NoSuchProcess:
                continue  # gone (reaped elsewhere) between the listing and the look
            try:
                os.waitpid(z.pid, 0)
            except ChildProcessError:
                pass
        if not kids:
            return
        time.sleep(0.02)


async def eventually(pred: Callable[[], bool], within_s: float) -> bool:
    """wait_for that lets the event loop (the runtime's housekeeping) run meanwhile."""
    import asyncio

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.05)
    return pred()
