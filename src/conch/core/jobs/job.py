"""A job: its identity, its state machine, its log, and the driver that runs it."""

from __future__ import annotations

import asyncio
import secrets
import signal as _signal
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Protocol

from conch.core.jobs.label import JobLabel
from conch.core.jobs.takeover import Attendance
from conch.core.output.cast import Recording
from conch.core.output.digest_log import FOLLOW_FROM, LogDigest
from conch.core.output.log import JobLog
from conch.core.process.terminal import COLS, ROWS

RUNNING = "running"
TERMINAL = frozenset({"exited", "timed_out", "cancelled", "output_limit", "limit"})
TERMINAL_MODES = frozenset({"pty", "shell"})  # jobs whose program runs on a terminal


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(5)}"


def signal_name(signum: int) -> str:
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def _expire(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class JobDriver(Protocol):
    """What runs a job: a pipe process, a PTY program, or a command in a persistent shell."""

    pid: int | None

    async def write(self, data: bytes) -> None: ...

    async def close_stdin(self) -> None: ...

    def send_signal(self, signum: int) -> None: ...

    def resize(self, rows: int, cols: int) -> None:
        """Set the job's terminal to rows × cols (terminal jobs only: ``invalid_argument``
        for pipes)."""

    async def stop(self, reason: str, grace_s: float) -> None:
        """Stop the job's whole tree; the job ends in state ``reason``."""

    async def kill_lingering(self) -> None:
        """Kill what is left of a finished job's tree."""

    def input_state(self) -> tuple[bool, bool]:
        """(awaiting_input, awaiting_secret) from the OS's view of the job."""

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        """The processes waiting to read the job's terminal (JobView's)."""

    def lingering(self) -> list[int]: ...

    @property
    def stdin_open(self) -> bool: ...


class Job:
    def __init__(
        self,
        *,
        job_id: str,
        mode: str,
        cwd: str,
        log: JobLog,
        name: str | None = None,
        shell_id: str | None = None,
        output_format: str = "text",
        on_change: Callable[[Job], None] | None = None,
        on_finish: Callable[[Job], None] | None = None,
        label: JobLabel | None = None,
    ) -> None:
        self.job_id = job_id
        self.name = name
        self.mode = mode
        self.shell_id = shell_id
        self.cwd = cwd
        self.started_cwd = cwd  # (a shell job's cwd is the shell's after it ends)
        self.log = log
        self.output_format = output_format
        self.state = RUNNING
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.started_at = datetime.now(timezone.utc)
        self._t0 = time.monotonic()
        self.finished_at: float | None = None
        self._duration_ms: int | None = None
        self.ready: bool | None = None
        self.restarted = False
        self.lingering_pids: list[int] = []
        self.driver: JobDriver | None = None
        self.kill_reason: str | None = None
        self.limit: str | None = None  # the cgroup limit that killed it (state `limit`)
        self.sent_signals: set[int] = set()  # signals Conch delivered on request
        # where the next read without a cursor starts, per stream (None = combined)
        self.read_cursor: dict[str | None, int] = {}
        self.version = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._on_change = on_change
        self._finish_callbacks: list[Callable[[Job], None]] = [on_finish] if on_finish else []
        self.tmp_files: list[str] = []  # removed when the job ends (its script file)
        self.parsed: tuple[Any, str | None] | None = None  # cached (data, parse_error)
        self.digest: LogDigest | None = None  # its output's digest, once a result wanted one
        self.digest_off = False  # its exec said digest: false (none is built as it runs)
        # called once when its log passes FOLLOW_FROM: the digest is then built as it prints
        self.on_big_output: Callable[[Job], None] | None = None
        self.label = label  # what the call runs and why: for the dashboard only
        # a terminal job's recording (when each part of its log arrived; a shell sets its
        # own size), and who types into it from the dashboard (core/jobs/takeover.py)
        self.recording = Recording(ROWS, COLS) if mode in TERMINAL_MODES else None
        self.attendance: Attendance | None = None
        # what it changed under the workspace, once it ended (core/changes): the counts
        # {added, modified, deleted}, None while unknown or when it changed nothing
        self.changes: dict[str, int] | None = None

    def output_arrived(self) -> None:
        """Output was appended to the log (a terminal job's driver calls it)."""
        if self.recording is not None:
            self.recording.mark(self.log.total)
        self.notify()

    @property
    def attended(self) -> bool:
        return self.attendance is not None and self.attendance.attended

    # -- state -----------------------------------------------------------------------------

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def streams(self) -> bool:
        """Whether stdout and stderr are apart (pipes); a terminal (pty, shell) has one stream."""
        return self.mode not in TERMINAL_MODES

    @property
    def pid(self) -> int | None:
        return self.driver.pid if self.driver else None

    @property
    def duration_ms(self) -> int:
        if self._duration_ms is not None:
            return self._duration_ms
        return int((time.monotonic() - self._t0) * 1000)

    def finish(
        self,
        state: str,
        *,
        exit_code: int | None = None,
        signum: int | None = None,
        lingering: list[int] | None = None,
    ) -> bool:
        """Move to a terminal state; the first call wins and nothing changes afterwards."""
        if self.terminal:
            return False
        assert state in TERMINAL
        self._duration_ms = int((time.monotonic() - self._t0) * 1000)
        self.finished_at = time.monotonic()
        self.state = state
        self.exit_code = exit_code
        self.signal = signal_name(signum) if signum else None
        self.lingering_pids = sorted(lingering or [])
        for fn in self._finish_callbacks:
            fn(self)
        self.notify()
        return True

    def begin(self, on_change: Callable[[Job], None] | None, label: JobLabel | None) -> None:
        """The job starts now: a process started ahead of need (core/jobs/warm.py) waited
        for it, unobserved until this moment."""
        self.started_at = datetime.now(timezone.utc)
        self._t0 = time.monotonic()
        self._on_change = on_change
        self.label = label  # what this call runs (not the call that made it)

    def input_state(self) -> tuple[bool, bool]:
        """(awaiting_input, awaiting_secret): what its terminal says now (docs/spec.md §2)."""
        if self.driver is None or self.terminal:
            return False, False
        return self.driver.input_state()

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        if self.driver is None or self.terminal:
            return ()
        return self.driver.terminal_readers()

    def on_finish(self, fn: Callable[[Job], None]) -> None:
        """Call fn(job) once, when the job reaches a terminal state."""
        self._finish_callbacks.append(fn)

    @property
    def ok(self) -> bool:
        return self.state == "exited" and self.exit_code == 0

    # -- change notification -----------------------------------------------------------------

    def notify(self) -> None:
        self.version += 1
        if self.on_big_output is not None and self.log.total >= FOLLOW_FROM:
            hook, self.on_big_output = self.on_big_output, None
            hook(self)
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        if self._on_change:
            self._on_change(self)

    async def wait_change(self, since: int, timeout_s: float) -> bool:
        """Wait until version > since; returns False on timeout."""
        if self.version > since:
            return True
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        timer = loop.call_later(timeout_s, _expire, fut)
        try:
            await fut
        finally:
            timer.cancel()
        return self.version > since

    def watch(self) -> asyncio.Future[None]:
        """A future resolved at the job's next change (for waits on several jobs at once);
        give it back with :meth:`unwatch` when done with it."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def unwatch(self, fut: asyncio.Future[None]) -> None:
        if not fut.done():
            fut.cancel()
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    @property
    def quiet_since(self) -> float:
        """Since when (monotonic) the job printed nothing: its last output, or its start."""
        return max(self.log.last_output, self._t0)

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await self.wait_change(self.version, remaining)
        return True
