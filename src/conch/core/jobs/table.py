"""The runtime's jobs: admission (never queued), names, retention and eviction."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator

from conch.core.jobs.job import Job
from conch.errors import ConchError


class JobTable:
    def __init__(
        self,
        *,
        max_running: int,
        max_jobs: int,
        retention_s: int,
        on_evict: Callable[[Job], None],
        logs_over: Callable[[], bool] = lambda: False,
    ) -> None:
        self.max_running = max_running
        self.max_jobs = max_jobs
        self.retention_s = retention_s
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._finished: deque[Job] = deque()
        self._running: set[str] = set()
        self._on_evict = on_evict
        self._logs_over = logs_over  # the logs' total is past max_total_log_bytes

    def __iter__(self) -> Iterator[Job]:
        return iter(list(self._jobs.values()))

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def running(self) -> int:
        return len(self._running)

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
        if not job.terminal:
            self._running.add(job.job_id)
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

    def finished(self, job: Job) -> None:
        """Called once when a job reaches a terminal state (jobs finish in time order)."""
        self._finished.append(job)
        self._running.discard(job.job_id)

    def evict(self) -> None:
        """Drop finished jobs past retention, then the oldest finished beyond max_jobs or
        while the logs' total is past its cap."""
        now = time.monotonic()
        while self._finished:
            job = self._finished[0]
            if job.job_id not in self._jobs:
                self._finished.popleft()
                continue
            expired = job.finished_at is not None and now - job.finished_at >= self.retention_s
            if not (expired or len(self._jobs) > self.max_jobs or self._logs_over()):
                break
            self._finished.popleft()
            self.drop(job)

    def drop(self, job: Job) -> None:
        self._running.discard(job.job_id)
        if self._jobs.pop(job.job_id, None) is not None:
            self._on_evict(job)
