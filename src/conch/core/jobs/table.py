"""The runtime's jobs: admission (never queued), names, retention and eviction."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from conch.core.jobs.job import Job
from conch.errors import ConchError


class JobTable:
    def __init__(
        self, *, max_running: int, max_jobs: int, retention_s: int, on_evict: Callable[[Job], None]
    ) -> None:
        self.max_running = max_running
        self.max_jobs = max_jobs
        self.retention_s = retention_s
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._on_evict = on_evict

    def __iter__(self) -> Iterator[Job]:
        return iter(list(self._jobs.values()))

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def running(self) -> int:
        return sum(1 for j in self._jobs.values() if not j.terminal)

    def admit(self, name: str | None) -> None:
        """Check (synchronously, no await before add) that a new job may start."""
        self.evict()
        if self.running >= self.max_running:
            raise ConchError("busy", f"{self.max_running} jobs are already running; retry later")
        if name is not None:
            for j in self._jobs.values():
                if j.name == name and not j.terminal:
                    raise ConchError("invalid_argument", f"a running job is already named {name!r}")

    def add(self, job: Job) -> None:
        if job.name is not None:
            # a finished job's name passes to the new one
            for j in self._jobs.values():
                if j.name == job.name:
                    j.name = None
        self._jobs[job.job_id] = job
        self.evict()

    def get(self, key: str) -> Job:
        self.evict()
        job = self._jobs.get(key)
        if job is None:
            for j in self._jobs.values():
                if j.name == key:
                    return j
            raise ConchError("not_found", f"no job {key!r} (unknown, or finished and evicted)")
        return job

    def evict(self) -> None:
        now = time.monotonic()
        finished = [j for j in self._jobs.values() if j.terminal and j.finished_at is not None]
        expired = [j for j in finished if now - j.finished_at >= self.retention_s]  # type: ignore[operator]
        for j in expired:
            self._drop(j)
        excess = len(self._jobs) - self.max_jobs
        if excess > 0:
            finished = sorted(
                (j for j in self._jobs.values() if j.terminal), key=lambda j: j.finished_at or 0.0
            )
            for j in finished[:excess]:
                self._drop(j)

    def _drop(self, job: Job) -> None:
        if self._jobs.pop(job.job_id, None) is not None:
            self._on_evict(job)
