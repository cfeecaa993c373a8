"""What the layers above the core see of a job: a read-only view (docs/spec.md §1).

Tools, front ends and the fleet read a job's identity, state and log through :class:`JobView`
and change it only through the engine's requests (write, signal): they never hold its driver.
``Job`` (core/jobs/job.py) is the one implementation; mypy checks the upper layers against
this protocol, so a write to a job or a reach into its driver above the core is a type error.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from conch.core.jobs.label import JobLabel


class LogView(Protocol):
    """A job's output log, read-only: sizes and byte ranges of the combined log or a stream."""

    @property
    def path(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    def size(self, stream: int | None = None) -> int: ...

    def read(self, start: int, end: int, stream: int | None = None) -> bytes: ...


class JobView(Protocol):
    @property
    def job_id(self) -> str: ...

    @property
    def name(self) -> str | None: ...

    @property
    def mode(self) -> str: ...

    @property
    def shell_id(self) -> str | None: ...

    @property
    def cwd(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def exit_code(self) -> int | None: ...

    @property
    def signal(self) -> str | None: ...

    @property
    def started_at(self) -> datetime: ...

    @property
    def terminal(self) -> bool: ...

    @property
    def streams(self) -> bool: ...

    @property
    def duration_ms(self) -> int: ...

    @property
    def version(self) -> int: ...

    @property
    def output_format(self) -> str: ...

    @property
    def label(self) -> JobLabel | None: ...

    @property
    def log(self) -> LogView: ...

    @property
    def attended(self) -> bool:
        """A person is typing into its terminal from the dashboard (core/jobs/takeover.py)."""
        ...

    def input_state(self) -> tuple[bool, bool]:
        """(awaiting_input, awaiting_secret) now; (False, False) without a process."""
        ...

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        """The processes that wait reading the job's terminal now, in its foreground group
        (what is typed next goes to them): each (pid, the path of its program, None where that
        cannot be told). Empty without a terminal, or where it cannot be known (not Linux, a
        job on another node)."""
        ...

    async def wait_change(self, since: int, timeout_s: float) -> bool: ...

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool: ...
