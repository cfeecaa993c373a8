"""The states of a persistent shell and the moves between them (pure; ``Shell`` is the one owner
that moves them, through ``Shell._to``).

    starting ──▶ ready ⇄ busy        (a command runs: busy; its end marker: ready)
       ▲  │        │      │
       │  ▼        ▼      ▼
       └─ exited ◀─┴──────┘          (the shell died; the next exec restarts it: starting)
    any ──▶ closing ──▶ closed       (closing wins: nothing moves a closing shell but close)

A command that cannot be stopped rebuilds the shell: ready/busy ──▶ starting.
"""

from __future__ import annotations

from enum import Enum


class ShellState(str, Enum):
    STARTING = "starting"
    READY = "ready"
    BUSY = "busy"
    EXITED = "exited"
    CLOSING = "closing"
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.value


S = ShellState
MOVES: dict[ShellState, frozenset[ShellState]] = {
    S.STARTING: frozenset({S.STARTING, S.READY, S.EXITED, S.CLOSING}),
    S.READY: frozenset({S.BUSY, S.EXITED, S.STARTING, S.CLOSING}),
    S.BUSY: frozenset({S.READY, S.EXITED, S.STARTING, S.CLOSING}),
    S.EXITED: frozenset({S.STARTING, S.CLOSING}),
    S.CLOSING: frozenset({S.CLOSED}),
    S.CLOSED: frozenset(),
}
# a shell in these states takes no command
UNAVAILABLE = frozenset({S.STARTING, S.CLOSING, S.CLOSED})


def move(current: ShellState, new: ShellState) -> ShellState:
    """The state after asking to go from ``current`` to ``new``: ``new`` if that move exists
    (staying is always one);
    a closing or closed shell stays as it is (close wins a race with start or exit)."""
    if new is current or new in MOVES[current]:
        return new
    if current in (S.CLOSING, S.CLOSED):
        return current
    raise RuntimeError(f"shell state cannot go from {current.value} to {new.value}")
