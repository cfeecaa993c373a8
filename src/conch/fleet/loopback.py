"""Which loopback a process shares: its machine (this boot of it) and its network namespace.

A job reaches a server's 127.0.0.1 only from the same machine and network namespace, so the
fleet's HTTP guard asks the executors that share its own (conch.fleet.view) whether one of
their sandboxed jobs is the caller. Where this cannot be told (no ``/proc``), it is ``""``,
and such an executor is asked too.
"""

from __future__ import annotations

import os


def loopback_id() -> str:
    """``<boot id>/<network namespace inode>`` of this process, or ``""`` where unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return ""
    return f"{boot}/{netns}"
