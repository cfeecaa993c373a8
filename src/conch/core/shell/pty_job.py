"""A one-shot job on a pseudo-terminal (``exec {pty: true}``): REPLs, password prompts, TUIs.

The program leads its own session with the PTY as controlling terminal; the job is finished
when it exits. ``write`` types into the terminal, ``eof`` sends the terminal's VEOF (ctrl-d).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

from conch.core.jobs.job import Job
from conch.core.process import procfs
from conch.core.process.exit_watch import ExitWatch, decode_status
from conch.core.process.feeder import Feeder
from conch.core.process.hygiene import TAG_VAR, Reaper, kill_tree_now, terminate_tree
from conch.core.shell import terminal
from conch.errors import ConchError

_DRAIN_LIMIT_S = 0.05


class PtyProcess:
    """Driver of a job whose program runs on its own terminal."""

    def __init__(self, job: Job, reaper: Reaper, *, on_output_limit: Callable[[Job], None]) -> None:
        self.job = job
        self.reaper = reaper
        self.pid: int | None = None
        self._loop = asyncio.get_running_loop()
        self._master: int | None = None
        self._tty = ""
        self._tag = b""
        self._watch: ExitWatch | None = None
        self._input: Feeder | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._on_output_limit = on_output_limit

    def start(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        stdin: bytes | None,
        eof_after_stdin: bool = False,
    ) -> None:
        self._tag = env[TAG_VAR].encode()
        pid, master, self._tty, _ = terminal.spawn(argv, cwd=cwd, env=env)
        self.pid, self._master = pid, master
        self.reaper.known_sids.add(str(pid))
        self._loop.add_reader(master, self._on_readable)
        self._watch = ExitWatch(pid, self._on_exit, self.reaper.awaited)
        self._input = Feeder(master, terminal.write_master)
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
            self._close_master()
            if self.job.terminal:
                self.job.log.close_writer()
            self.job.notify()
            return
        if data:
            self._append(data)

    def _append(self, data: bytes) -> None:
        self.job.log.append(data, 0)
        self.job.notify()
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

    def input_state(self) -> tuple[bool, bool]:
        if self._master is None or self.pid is None or self.job.terminal:
            return False, False
        pids = [self.pid, *procfs.descendants([self.pid])]
        return terminal.input_state(self._master, self._tty, pids)

    # -- signals and stopping ----------------------------------------------------------------

    def _collect(self) -> set[int]:
        assert self.pid is not None
        pids = procfs.scan_job(self.pid, self.pid, TAG_VAR.encode(), self._tag)
        if self._watch is not None and not self._watch.status.done():
            pids.add(self.pid)
        return pids

    def send_signal(self, signum: int) -> None:
        if self.pid is None:
            return
        self.job.sent_signals.add(signum)
        target = self.pid
        if self._master is not None:
            with contextlib.suppress(OSError):
                target = os.tcgetpgrp(self._master)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(target, signum)

    def lingering(self) -> list[int]:
        if self.pid is None:
            return []
        pids = self._collect()
        pids.discard(self.pid)
        return sorted(pids)

    async def stop(self, reason: str, grace_s: float) -> None:
        if self._stop_task is None:
            if self.job.terminal:
                await self.kill_lingering()
                return
            self.job.kill_reason = reason
            self._stop_task = asyncio.ensure_future(self._stop(reason, grace_s))
        await asyncio.shield(self._stop_task)

    async def _stop(self, reason: str, grace_s: float) -> None:
        assert self.pid is not None and self._watch is not None
        await terminate_tree(self._collect, [self.pid], grace_s, self.reaper)
        status: int | None
        try:
            status = await asyncio.wait_for(asyncio.shield(self._watch.status), 2.0)
        except asyncio.TimeoutError:
            status = None
        self._drain()
        code, signum = decode_status(status)
        self.job.finish(reason, exit_code=code, signum=signum)
        self._release()

    async def kill_lingering(self, grace_s: float = 0.0) -> None:
        if self.pid is None:
            return
        await kill_tree_now(self._collect, [self.pid], self.reaper)
        self._release()

    def _on_exit(self, status: int) -> None:
        if self.job.kill_reason:
            return  # _stop() finishes the job once the tree is gone
        self._drain()
        code, signum = decode_status(status)
        lingering = self.lingering()
        self.reaper.note(lingering)
        state = "cancelled" if signum is not None and signum in self.job.sent_signals else "exited"
        self.job.finish(state, exit_code=code, signum=signum, lingering=lingering)
        if not lingering:
            self._release()

    def _release(self) -> None:
        self._close_master()
        self.job.log.close_writer()

    async def aclose(self, grace_s: float) -> None:
        if not self.job.terminal:
            await self.stop("cancelled", grace_s)
        else:
            await self.kill_lingering()
        if self._watch is not None:
            self._watch.close()
            if self.pid is not None:
                self.reaper.awaited.discard(self.pid)
        self._release()
