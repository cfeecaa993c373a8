"""A one-shot job on pipes: spawn, stream stdout/stderr into the log, detect leader exit.

The job is finished when its leader exits, even if descendants still hold the pipes: readers stay
attached and whatever the descendants print later still reaches the log.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable

from conch.core.containment.fence import SpawnFence
from conch.core.jobs.driver import ProcessDriver
from conch.core.jobs.job import Job
from conch.core.output.log import STDERR, STDOUT
from conch.core.process import popen, procfs
from conch.core.process.feeder import Feeder
from conch.core.process.hygiene import TAG_VAR, Reaper
from conch.core.process.spec import SpawnSpec
from conch.errors import ConchError

_F_SETPIPE_SZ = 1031
_PIPE_DEFAULT = 65536
_DRAIN_LIMIT_S = 0.02


def _pipe() -> tuple[int, int]:
    return os.pipe()  # both ends close-on-exec already (PEP 446): Popen dup2s the child's


_devnull: int | None = None


def _null() -> int:
    """One /dev/null for every job's absent stdin (Popen would open and close one per call)."""
    global _devnull
    if _devnull is None:
        _devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _devnull


def _grow_pipe(fd: int) -> None:
    """A 1 MiB pipe moves bulk output in far fewer wake-ups; done only once a job proves to
    be chatty, since resizing costs more than a short job's whole output."""
    if procfs.LINUX:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)


class PipeDriver(ProcessDriver):
    """Driver of a job whose process talks through pipes."""

    def __init__(self, job: Job, reaper: Reaper, *, on_output_limit: Callable[[Job], None]) -> None:
        super().__init__(job, reaper, on_output_limit=on_output_limit)
        self._stdin_w: int | None = None
        self._stdin_ino = 0
        self._out_fds: dict[int, int] = {}  # fd -> stream
        self._grown: set[int] = set()
        self._stdin: Feeder | None = None

    # -- start -------------------------------------------------------------------------------

    def start(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        stdin: bytes | None,
        stdin_open: bool,
        fence: SpawnFence | None = None,
        merge_sh: bool = False,
    ) -> None:
        """``merge_sh``: see ``SpawnFence.wrap``."""
        tag = env[TAG_VAR].encode()
        self._fence(fence)
        place: str | None = None
        if fence is not None:
            # (glibc 2.39+: the spawn starts the child in its cgroup, no sh enters it first)
            run, env, place = fence.prepare(argv, cwd=cwd, env=env, merge_sh=merge_sh)
        else:
            run = argv
        out_r, out_w = _pipe()
        err_r, err_w = _pipe()
        in_r: int | None = None
        if stdin is not None or stdin_open:
            in_r, self._stdin_w = os.pipe()
            os.set_blocking(self._stdin_w, False)
            self._stdin_ino = os.fstat(self._stdin_w).st_ino
        try:
            spec = SpawnSpec(
                None,
                run,
                env,
                cwd,
                stdin=in_r if in_r is not None else _null(),
                stdout=out_w,
                stderr=err_w,
                cgroup=place,
            )
            pid = popen.spawn(spec, spawner=fence.spawner if fence is not None else None)
        except BaseException:
            for fd in (out_r, out_w, err_r, err_w, in_r, self._stdin_w):
                if fd is not None:
                    os.close(fd)
            self._stdin_w = None
            raise
        for fd in (out_w, err_w, in_r):
            if fd is not None:
                os.close(fd)
        for fd, stream in ((out_r, STDOUT), (err_r, STDERR)):
            os.set_blocking(fd, False)
            self._out_fds[fd] = stream
            self._loop.add_reader(fd, self._on_readable, fd)
        self._watch_leader(pid, tag)
        if self._stdin_w is not None:
            self._stdin = Feeder(self._stdin_w, on_error=self._close_stdin_now)
            if stdin:
                self._stdin.put(stdin)
            if not stdin_open:
                self._close_stdin_when_written()

    # -- output ------------------------------------------------------------------------------

    def _on_readable(self, fd: int) -> None:
        log = self.job.log
        try:
            n = log.append_from_fd(fd, self._out_fds[fd])
        except BlockingIOError:
            return
        except OSError:
            n = 0
        if n == 0:
            if log.full:
                self._close_output(fd)
                self._on_output_limit(self.job)
            else:
                self._close_output(fd)
            self.job.notify()
            return
        if n >= _PIPE_DEFAULT and fd not in self._grown:
            self._grown.add(fd)
            _grow_pipe(fd)
        self.job.notify()
        if log.full:
            self._on_output_limit(self.job)

    def _drain(self) -> None:
        """Take what is already in the pipes (bounded in time: a writer may never stop)."""
        deadline = self._loop.time() + _DRAIN_LIMIT_S
        for fd in list(self._out_fds):
            while fd in self._out_fds and self._loop.time() < deadline:
                try:
                    n = self.job.log.append_from_fd(fd, self._out_fds[fd])
                except BlockingIOError:
                    break
                except OSError:
                    n = 0
                if n == 0:
                    self._close_output(fd)
                    break

    def _close_output(self, fd: int) -> None:
        if self._out_fds.pop(fd, None) is None:
            return
        self._loop.remove_reader(fd)
        os.close(fd)
        if not self._out_fds and self._exited:
            self.job.log.close_writer()

    @property
    def _holds_output(self) -> bool:
        return bool(self._out_fds)

    # -- stdin -------------------------------------------------------------------------------

    @property
    def stdin_open(self) -> bool:
        return self._stdin_w is not None

    def _close_stdin_when_written(self) -> None:
        if self._stdin is not None and self._stdin.pending:
            self._stdin.on_drained = self._close_stdin_now
        else:
            self._close_stdin_now()

    def _close_stdin_now(self) -> None:
        if self._stdin is not None:
            self._stdin.clear()
            self._stdin = None
        if self._stdin_w is not None:
            os.close(self._stdin_w)
            self._stdin_w = None

    def feed(self, data: bytes, *, close: bool) -> None:
        """Queue bytes for stdin (written as the pipe takes them); ``close``: then EOF."""
        if self._stdin is None:
            raise ConchError("stdin_closed", "the job's stdin is closed (or was never opened)")
        if data:
            self._stdin.put(data)
        if close:
            self._close_stdin_when_written()

    async def write(self, data: bytes) -> None:
        if self._stdin is None:
            raise ConchError("stdin_closed", "the job's stdin is closed (or was never opened)")
        self._stdin.put(data)

    async def close_stdin(self) -> None:
        self._close_stdin_when_written()

    def resize(self, rows: int, cols: int) -> None:
        raise ConchError(
            "invalid_argument",
            f"job {self.job.job_id} runs on pipes, not a terminal: only pty and shell jobs have "
            "a size",
            field="resize",
        )

    def input_state(self) -> tuple[bool, bool]:
        if self._stdin_w is None or self.job.terminal or not procfs.LINUX or self.pid is None:
            return False, False
        target = f"pipe:[{self._stdin_ino}]"
        for pid in {self.pid} | procfs.descendants([self.pid]):
            if procfs.fd_target(pid, 0) == target and "pipe_read" in procfs.wchan(pid):
                self._drain()  # its prompt may still wait in the pipe (as on a terminal)
                return True, False
        return False, False

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        return ()  # no terminal

    # -- signals and stopping ----------------------------------------------------------------

    def _deliver(self, signum: int) -> None:
        assert self.pid is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def _release(self) -> None:
        """Close what the finished job no longer needs (pipes only once nobody holds them)."""
        self._close_stdin_now()
        if self._stop_task is not None or not self._out_fds:
            self._close_files()
            self.job.log.close_writer()
        self.release_cgroup()

    def _close_files(self) -> None:
        for fd in list(self._out_fds):
            self._close_output(fd)
        self._close_stdin_now()
