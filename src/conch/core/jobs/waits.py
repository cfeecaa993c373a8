"""What a ``read`` waits for (docs/spec.md §6): new output, the end, a quiet spell, a prompt, a
regex, or the first of several of these, on one job or on the first of several jobs.

A :class:`Watch` is one job's condition, counted from where the read starts; :func:`first`
waits until any watch holds. Every condition also holds once the job can change no more (it
ended and its output is closed), so no wait outlives the job it watches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from conch.core.jobs.job import Job
from conch.core.jobs.ready import LogScanner, changed
from conch.core.pattern import Pattern

#: the named conditions; a pattern is the fifth kind
KINDS = ("change", "exit", "quiet", "input")
# how often a wait for input looks at the job's terminal (the OS tells no one when a process
# blocks reading it, so it is polled: a few /proc reads each time)
_INPUT_POLL_S = 0.05


@dataclass(frozen=True)
class Until:
    """The conditions of a read; any one of them ends the wait."""

    kinds: frozenset[str]
    pattern: Pattern | None = None
    quiet_s: float = 1.0


class Watch:
    """One job's condition, from the read's start: ``start`` is the first byte that counts as
    new in the read's stream (``stream``: 0 stdout, 1 stderr, None the combined log)."""

    def __init__(self, job: Job, until: Until, start: int, stream: int | None) -> None:
        self.job = job
        self.until = until
        self.start = start
        self.stream = stream
        since = start if stream is None else job.log.size()
        self._scan = LogScanner(until.pattern, since) if until.pattern is not None else None
        self.met = ""  # the condition that held

    def _still(self) -> bool:
        """The job can change no more: it ended and nothing more can be printed."""
        return self.job.terminal and self.job.log.closed

    def holds(self, now: float) -> bool:
        job, kinds = self.job, self.until.kinds
        if "exit" in kinds and job.terminal:
            self.met = "exit"
        elif "change" in kinds and job.log.size(self.stream) > self.start:
            self.met = "change"
        elif self._scan is not None and self._scan.matched:
            self.met = "pattern"
        elif "quiet" in kinds and now - job.quiet_since >= self.until.quiet_s:
            self.met = "quiet"
        elif "input" in kinds and any(job.input_state()):
            self.met = "input"
        elif self._still() and not (self._scan is not None and self._scan.behind(job)):
            self.met = "exit" if job.terminal else "change"
        else:
            return False
        return True

    def scan(self) -> asyncio.Task[None] | None:
        """The pattern search step that runs (started if the search is behind), or None."""
        return self._scan.step(self.job) if self._scan is not None else None

    def pattern_behind(self) -> int:
        """How many bytes of output the pattern was not searched in yet (0: none, or no
        pattern)."""
        if self._scan is None or self._scan.matched:
            return 0
        return max(0, self.job.log.size() - self._scan.scanned)

    def close(self) -> None:
        if self._scan is not None:
            self._scan.close()

    def wake_in(self, now: float) -> float | None:
        """How soon the condition may hold with no change of the job: a quiet spell ending, a
        prompt to look for; None: only a change (or a pattern search step) can do it."""
        soon: list[float] = []
        if "quiet" in self.until.kinds:
            soon.append(max(0.0, self.job.quiet_since + self.until.quiet_s - now))
        if "input" in self.until.kinds:
            soon.append(_INPUT_POLL_S)
        return min(soon) if soon else None


async def first(watches: Sequence[Watch], timeout_s: float) -> Watch | None:
    """The first watch that holds (in the given order when several do), waiting up to
    ``timeout_s``; None when none held in time. A pattern's search goes on in steps beside
    the loop meanwhile (core/jobs/ready.py); it stops with the wait."""
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            now = time.monotonic()
            for w in watches:
                if w.holds(now):
                    return w
            remaining = deadline - now
            if remaining <= 0:
                return None
            steps = [s for w in watches if (s := w.scan()) is not None]
            wake = min([remaining, *(t for w in watches if (t := w.wake_in(now)) is not None)])
            if wake > 0:
                await changed([w.job for w in watches], wake, steps)
    finally:
        for w in watches:
            w.close()
