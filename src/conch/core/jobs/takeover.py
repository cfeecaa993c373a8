"""A person typing into a terminal job from the dashboard (docs/spec.md §8): the job is *attended*.

While attended, the agent's own ``write`` answers ``busy`` (retryable): a person and a model
typing into one terminal at once would interleave keystrokes. The job stays attended until the
person hands back or types nothing for ``idle_s``. The agent learns that someone typed, and how
much, in its next result for the job (``human_input: {at, bytes}``); never what was typed, so a
password typed there reaches no model.

A person may also run a command in an idle shell from the dashboard: that command's job is
attended from its start, and what nobody reported yet is carried to the agent's next command in
the shell (:meth:`Attendance.carried`), so the agent hears that a person used its shell.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from conch.core.results import HumanInput, timestamp


class Attendance:
    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self._until = 0.0  # monotonic
        self._bytes = 0
        self._at: datetime | None = None

    @property
    def attended(self) -> bool:
        return time.monotonic() < self._until

    @property
    def idle_in_s(self) -> float:
        """Seconds until the job is no longer attended (0 when it is not)."""
        return max(0.0, self._until - time.monotonic())

    def typed(self, n: int) -> None:
        self._at = datetime.now(timezone.utc)
        self._bytes += n
        self._until = time.monotonic() + self.idle_s

    def hand_back(self) -> None:
        self._until = 0.0

    def carried(self) -> Attendance | None:
        """What is not reported yet, moved to a new record that is not attended (the agent's
        next command in a shell a person used); None when everything was reported."""
        if self._at is None or not self._bytes:
            return None
        out = Attendance(self.idle_s)
        out._at, out._bytes = self._at, self._bytes
        self._bytes = 0
        return out

    def report(self) -> HumanInput | None:
        """What the agent's next result carries (once), or None when nobody typed since."""
        if self._at is None or not self._bytes:
            return None
        out: HumanInput = {"at": timestamp(self._at), "bytes": self._bytes}
        self._bytes = 0
        return out
