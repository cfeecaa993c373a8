"""The profile's per-runtime state: Codex's numeric session ids for the jobs still running,
and where each session's last chunk ended in the job's log (owned by the runtime's registry,
handed to calls through ``ctx.profile_state``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

# Codex draws its session ids from this range (random, so a model cannot guess another's)
SESSION_IDS = range(1_000, 100_000)


@dataclass
class Session:
    """A running command the model may write to or poll: its Conch job, whether it has a
    terminal, and the log offset the next chunk starts at."""

    job_id: str
    tty: bool
    cursor: int


class Sessions:
    """Session id -> :class:`Session`, for one runtime."""

    def __init__(self) -> None:
        self._by_id: dict[int, Session] = {}
        self._random = random.SystemRandom()

    def open(self, job_id: str, tty: bool, cursor: int) -> int:
        while True:
            sid = self._random.choice(SESSION_IDS)
            if sid not in self._by_id:
                self._by_id[sid] = Session(job_id, tty, cursor)
                return sid

    def get(self, sid: int) -> Session | None:
        return self._by_id.get(sid)

    def advance(self, sid: int, cursor: int) -> None:
        """The session's next chunk starts at ``cursor``."""
        session = self._by_id.get(sid)
        if session is not None:
            session.cursor = cursor

    def close(self, sid: int) -> None:
        """The session reported its exit: it is gone (Codex: ``Unknown process id``)."""
        self._by_id.pop(sid, None)
