"""The sweep of leftovers: the parent cgroups of Conch servers that died without closing theirs
are emptied (their jobs killed) and removed when a runtime sets up its own."""

from __future__ import annotations

import os
import time

from conch.core.containment.cgroup import fs
from conch.core.containment.cgroup.kill import kill_now
from conch.core.containment.cgroup.layout import PARENT_PREFIX, Layout
from conch.core.process import procfs


def sweep_dead_parents(layout: Layout, keep: str = "") -> list[str]:
    """Kill and remove the parent cgroups of Conch servers that no longer exist."""
    removed: list[str] = []
    bases = ([layout.v2] if layout.v2 else []) + list(layout.v1.values())
    for base in bases:
        try:
            entries = [
                e for e in os.scandir(base) if e.name.startswith(PARENT_PREFIX) and e.name != keep
            ]
        except OSError:
            continue
        for e in entries:
            if _owner_alive(e.name[len(PARENT_PREFIX) :]):
                continue
            for sub in fs.subdirs(e.path):
                kill_now(sub)
            kill_now(e.path)
            for _ in range(20):
                if fs.rmdir_tree(e.path):
                    removed.append(e.path)
                    break
                time.sleep(0.01)
    return removed


def _owner_alive(instance: str) -> bool:
    """False only for a server of this PID namespace that provably no longer runs (see
    procfs.owner_in_this_namespace): another namespace's parents are not ours to judge."""
    owner = procfs.owner_in_this_namespace(instance)
    if owner is None:
        return True
    return procfs.start_time(owner[0]) == owner[1]
