"""The driver of one command running in a persistent shell: input goes to the shell's terminal,
signals to the command's processes, stopping is the shell's escalation (session.py)."""

from __future__ import annotations

from typing import Protocol

from conch.core.jobs.job import Job
from conch.errors import ConchError


class ShellControl(Protocol):
    """What the driver needs of its shell (``Shell`` provides it)."""

    pid: int | None

    def write(self, data: bytes) -> None: ...

    def eof(self) -> None: ...

    def signal_command(self, signum: int) -> None: ...

    async def stop_job(self, job: Job, reason: str, grace_s: float) -> None: ...

    def input_state(self) -> tuple[bool, bool]: ...

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]: ...

    def resize(self, rows: int, cols: int) -> None: ...


class ShellCommandDriver:
    """The JobDriver of one command running in a persistent shell."""

    def __init__(self, shell: ShellControl, job: Job) -> None:
        self.shell = shell
        self.job = job
        self.pid: int | None = shell.pid

    @property
    def stdin_open(self) -> bool:
        return not self.job.terminal

    async def write(self, data: bytes) -> None:
        if self.job.terminal:
            raise ConchError("not_running", f"job {self.job.job_id} is {self.job.state}")
        self.shell.write(data)

    async def close_stdin(self) -> None:
        if not self.job.terminal:
            self.shell.eof()

    def send_signal(self, signum: int) -> None:
        if self.job.terminal:
            return
        self.job.sent_signals.add(signum)
        self.shell.signal_command(signum)

    async def stop(self, reason: str, grace_s: float) -> None:
        await self.shell.stop_job(self.job, reason, grace_s)

    def resize(self, rows: int, cols: int) -> None:
        if self.job.terminal:
            raise ConchError("not_running", f"job {self.job.job_id} is {self.job.state}")
        self.shell.resize(rows, cols)

    async def kill_lingering(self) -> None:
        return None  # background processes belong to the shell until it closes

    def input_state(self) -> tuple[bool, bool]:
        if self.job.terminal:
            return False, False
        return self.shell.input_state()

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        return () if self.job.terminal else self.shell.terminal_readers()

    def lingering(self) -> list[int]:
        return []
