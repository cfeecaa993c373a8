"""Killing every process of a cgroup at once: ``cgroup.kill`` on v2; on v1, the fallback:
freeze (where the freezer controller is ours), SIGKILL every pid in ``cgroup.procs``, thaw."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable

from conch.core.containment.cgroup import fs


def kill_now(d: str, *, freezer: bool = False) -> None:
    """Kill every process of cgroup ``d``: ``cgroup.kill`` (v2) or freeze + SIGKILL (v1)."""
    kill_file = os.path.join(d, "cgroup.kill")
    if os.path.exists(kill_file):
        with contextlib.suppress(OSError):
            fs.write(kill_file, "1")
            return
    frozen = False
    if freezer:
        with contextlib.suppress(OSError):
            fs.write(os.path.join(d, "freezer.state"), "FROZEN")
            frozen = True
            deadline = time.monotonic() + 0.2
            while "FREEZING" in fs.read(os.path.join(d, "freezer.state")):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.001)
    for _ in range(100):
        pids = fs.pids_in(d)
        if not pids:
            break
        _signal(pids, signal.SIGKILL)
        if frozen:
            break
    if frozen:
        with contextlib.suppress(OSError):
            fs.write(os.path.join(d, "freezer.state"), "THAWED")


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
