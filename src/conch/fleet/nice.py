"""The niceness of a node executor's worker (conch.fleet.executor).

Ray starts its workers at nice 15 (``RAY_worker_niceness``); jobs are the user's work, not
background chores, and run at the niceness of the node's own processes (the raylet's). Linux
keeps a niceness per thread, and a new thread takes its creator's. Only ``os``: the executor's
module calls :func:`leave_rays_niceness` before its other imports.
"""

from __future__ import annotations

import os


def node_niceness() -> int:
    """The niceness of the node's own processes: the raylet's (a worker's parent), to which
    Ray adds its worker niceness."""
    try:
        return os.getpriority(os.PRIO_PROCESS, os.getppid())
    except OSError:
        return 0


def unnice() -> int:
    """Lower every thread of this process to the node's niceness where allowed (it needs
    CAP_SYS_NICE, or an RLIMIT_NICE that allows it); the highest niceness left."""
    target = node_niceness()
    highest = target
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            now = os.getpriority(os.PRIO_PROCESS, tid)
        except OSError:
            continue  # the thread ended
        if now > target:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, target)
                now = target
            except OSError:
                pass  # EACCES
        highest = max(highest, now)
    return highest


def leave_rays_niceness() -> None:
    """In a worker a raylet started (not in a program that imports the executor's module for
    its names), lower its niceness now, before the imports that take most of an executor's
    start: at nice 15 they are starved behind a busy node's nice-0 work."""
    if os.environ.get("RAY_RAYLET_PID") == str(os.getppid()):
        unnice()
