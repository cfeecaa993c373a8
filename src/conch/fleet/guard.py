"""The orphan guard of a node executor: ``python -m conch.fleet.guard OWNER_PID``.

Started by the executor in its own session with a pipe on stdin. When the executor goes away
— killed, or its worker told to exit when the fleet server died — the pipe reaches EOF: the
guard waits (bounded) until the executor is really gone (it closes its files before it has
finished exiting), then kills every process still tagged by a Conch runtime that no longer
exists (the executor's jobs and what they started), so a lost node leaves nothing running
behind it. ``stop`` on the pipe before EOF is a clean shutdown: the runtime has stopped its
jobs itself, and the guard just exits.
"""

from __future__ import annotations

import sys
import time

from conch.core import kill_orphans_of_dead_servers, pid_alive

_ROUNDS = 10
_PAUSE_S = 0.05
_OWNER_EXIT_S = 10.0
STOP = b"stop"


def main() -> int:
    owner = int(sys.argv[1]) if len(sys.argv) > 1 else None
    said = b""
    try:
        while chunk := sys.stdin.buffer.read(4096):
            said = (said + chunk)[-len(STOP) :]
    except (OSError, KeyboardInterrupt):
        pass
    if said == STOP:
        return 0
    deadline = time.monotonic() + _OWNER_EXIT_S
    while owner is not None and pid_alive(owner) and time.monotonic() < deadline:
        time.sleep(_PAUSE_S)  # exiting: its files are closed, the process not yet gone
    for _ in range(_ROUNDS):  # escapees forking while we kill: a few rounds
        if not kill_orphans_of_dead_servers():
            break
        time.sleep(_PAUSE_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
