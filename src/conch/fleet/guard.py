"""The orphan guard of a node executor: ``python -m conch.fleet.guard``.

Started by the executor in its own session with a pipe on stdin. When the executor goes away
— closed on shutdown, or killed with its node — the pipe reaches EOF and the guard kills every
process still tagged by a Conch runtime that no longer exists (the executor's jobs among them),
so a lost node leaves nothing running behind it.
"""

from __future__ import annotations

import sys
import time

from conch.core.process.hygiene import kill_orphans_of_dead_servers

_ROUNDS = 10
_PAUSE_S = 0.05


def main() -> int:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, KeyboardInterrupt):
        pass
    for _ in range(_ROUNDS):  # escapees forking while we kill: a few rounds
        if not kill_orphans_of_dead_servers():
            break
        time.sleep(_PAUSE_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
