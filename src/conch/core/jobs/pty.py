"""A one-shot job on a pseudo-terminal (``exec {pty: true}``): REPLs, password prompts, TUIs.

The program leads its own session with the PTY as controlling terminal; the job is finished
when it exits. ``write`` types into the terminal, ``eof`` sends the terminal's VEOF (ctrl-d).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from conch.core.containment.fence import SpawnFence
from conch.core.jobs.driver import ProcessDriver
from conch.core.jobs.job import Job
from conch.core.process import procfs, terminal
from conch.core.process.feeder import Feeder
from conch.core.process.hygiene import TAG_VAR, Reaper
from conch.core.process.spec import SpawnSpec
from conch.errors import ConchError

_DRAIN_LIMIT_S = 0.05


class PtyDriver(ProcessDriver):
    """Driver of a job whose program runs on its own terminal."""

    def __init__(self, job: Job, reaper: Reaper, *, on_output_limit: Callable[[Job], None]) -> None:
        super().__init__(job, reaper, on_output_limit=on_output_limit)
        self._master: int | None = None
        self._tty = ""
        self._input: Feeder | None = None

    def start(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        stdin: bytes | None,
        eof_after_stdin: bool = False,
        fence: SpawnFence | None = None,
    ) -> None:
        self._fence(fence)
        run, env, place = fence.prepare(argv, cwd=cwd, env=env) if fence else (argv, env, None)
        spawner = fence.spawner if fence else None
        spec = SpawnSpec(None, run, env, cwd, cgroup=place)
        pid, master, self._tty, _ = terminal.spawn(spec, spawner=spawner)
        self._master = master
        self._loop.add_reader(master, self._on_readable)
        self._watch_leader(pid, env[TAG_VAR].encode())
        self._input = Feeder(master)
        if stdin:
            self._input.put(stdin)
        if eof_after_stdin:
            # ctrl-d ends input at the start of a line; after a partial line it first sends it
            eof = terminal.eof_byte(master)
            self._input.put(eof if not stdin or stdin.endswith(b"\n") else eof + eof)

    # -- output ------------------------------------------------------------------------------

    def _on_readable(self) -> None:
        if self._master is None:
            return
        data = terminal.read_master(self._master)
        if data is None:
            # every slave end is closed. A program may close its stdio just before it exits
            # (cat does): closing the master now would hang up the terminal and kill it with
            # SIGHUP before its own exit. Stop reading; the master closes once the leader is gone.
            if self._exited or self.job.terminal:
                self._close_master()
                self.job.log.close_writer()
            else:
                with contextlib.suppress(ValueError, OSError):
                    self._loop.remove_reader(self._master)
            self.job.notify()
            return
        if data:
            self._append(data)

    def _append(self, data: bytes) -> None:
        self.job.log.append(data, 0)
        self.job.output_arrived()
        if self.job.log.full:
            self._on_output_limit(self.job)

    def _drain(self) -> None:
        deadline = self._loop.time() + _DRAIN_LIMIT_S
        while self._master is not None and self._loop.time() < deadline:
            data = terminal.read_master(self._master)
            if not data:
                if data is None:
                    self._close_master()
                break
            self._append(data)

    def _close_master(self) -> None:
        if self._input is not None:
            self._input.clear()
        if self._master is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._master)
            os.close(self._master)
            self._master = None

    # -- input -------------------------------------------------------------------------------

    @property
    def stdin_open(self) -> bool:
        return self._master is not None and not self.job.terminal

    async def write(self, data: bytes) -> None:
        if not self.stdin_open:
            raise ConchError("stdin_closed", "the job's terminal is closed")
        assert self._input is not None
        self._input.put(data)

    async def close_stdin(self) -> None:
        if self._master is not None:
            await self.write(terminal.eof_byte(self._master))

    def resize(self, rows: int, cols: int) -> None:
        if not self.stdin_open:
            raise ConchError("stdin_closed", "the job's terminal is closed")
        assert self._master is not None
        terminal.set_size(self._master, rows, cols)

    def input_state(self) -> tuple[bool, bool]:
        if self._master is None or self.pid is None or self.job.terminal:
            return False, False
        pids = [self.pid, *procfs.descendants([self.pid])]
        state = terminal.input_state(self._master, self._tty, pids)
        if state[0]:
            # what it printed before it blocked (the prompt) may still wait in the master:
            # take it, so a result that says it waits also shows what it asked
            self._drain()
        return state

    def terminal_readers(self) -> tuple[tuple[int, str | None], ...]:
        if self._master is None or self.pid is None or self.job.terminal:
            return ()
        pids = [self.pid, *procfs.descendants([self.pid])]
        return tuple((p, procfs.exe(p)) for p in terminal.readers(self._master, self._tty, pids))

    # -- signals and stopping ----------------------------------------------------------------

    def _deliver(self, signum: int) -> None:
        assert self.pid is not None
        target = self.pid
        if self._master is not None:
            with contextlib.suppress(OSError):
                target = os.tcgetpgrp(self._master)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(target, signum)

    def _release(self) -> None:
        self._close_master()
        self.job.log.close_writer()
        self.release_cgroup()

    def _close_files(self) -> None:
        self._close_master()

    @property
    def _holds_output(self) -> bool:
        return self._master is not None
